"""A home written before chunks kept their answer units keeps working: readers say in one line what to run, and
`citewise doctor --repair` (or the next ingest) upgrades it in place to exactly what a fresh ingest writes."""

from __future__ import annotations

import pytest

from citewise.agent.runner import Citewise
from citewise.errors import IndexUpgradeNeeded
from citewise.index.doctor import ProblemKind, check
from citewise.index.registry import INDEX_FORMAT
from citewise.ingest.pipeline import Ingestor


@pytest.fixture
def settings(each_engine):
    return each_engine


def _age(kb) -> None:
    """Make the index look as an older Citewise left it: no units on any chunk, manifest format 1."""
    if kb.settings.uses_postgres:
        with kb._db.transaction() as conn:
            conn.execute("UPDATE chunks SET units = NULL")
            conn.execute("UPDATE citewise_manifest SET format = 1")
        kb.manifest.format = 1
    else:
        kb.store._writable().drop_columns(["units"])
        kb.store._written()
        kb.manifest.format = 1
        kb.manifest.write(kb._manifest_path)


def test_an_old_index_is_refused_with_what_to_run_then_upgraded_in_place(settings, make_kb, corpus):
    kb = make_kb(settings)
    Ingestor(kb).ingest_paths([corpus])
    fresh = {c.chunk_id: c.units for c in kb.store.chunks()}
    assert all(units is not None for units in fresh.values())

    _age(kb)
    old = make_kb(settings)
    assert old.outdated and old.store.missing_units() == len(fresh)
    with pytest.raises(IndexUpgradeNeeded, match=r"citewise doctor --repair"):
        Citewise(settings, kb=old).ask("What port does the daemon listen on?", mode="quote")

    report = check(old)
    assert [p.kind for p in report.problems] == [ProblemKind.OUTDATED_INDEX]
    repaired = check(make_kb(settings), repair=True)
    assert repaired.problems[0].fixed.startswith(f"upgraded in place: answer units recorded for {len(fresh)}")

    upgraded = make_kb(settings)
    assert not upgraded.outdated and upgraded.manifest.format == INDEX_FORMAT
    assert {c.chunk_id: c.units for c in upgraded.store.chunks()} == fresh  # what ingest would have written
    answer = Citewise(settings, kb=upgraded).ask("What port does the daemon listen on?", mode="quote")
    assert answer.citations


def test_the_next_ingest_upgrades_an_old_index_first(settings, make_kb, corpus):
    kb = make_kb(settings)
    Ingestor(kb).ingest_paths([corpus])
    _age(kb)
    report = Ingestor(make_kb(settings)).ingest_paths([corpus])
    assert report.upgraded > 0 and report.unchanged == report.seen  # nothing re-embedded, every chunk upgraded
    assert not make_kb(settings).outdated
