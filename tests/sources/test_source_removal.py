"""A removed source stays removed: neither the running server's scheduler (whose settings, read at its start, still
declare it), nor a sync that was waiting for the write lock, nor an older copy of citewise.toml brings it back."""

from __future__ import annotations

import os
import threading
import time
from pathlib import Path

import pytest
from fastapi.testclient import TestClient
from typer.testing import CliRunner

from citewise.cli import app
from citewise.server import create_app
from citewise.settings import ServerSettings, Settings, SourceSpec, SyncSettings
from citewise.sources.config import all_specs, config_path, write_to_config
from citewise.sources.state import SourceState
from citewise.sources.sync import remove_source, runs, sync_source

runner = CliRunner()


def _settings(home: Path) -> Settings:
    """Settings read as `citewise serve` reads them: the sources come from citewise.toml (CITEWISE_CONFIG)."""
    return Settings(
        home=home,
        sync=SyncSettings(max_page_mb=0.1),
        server=ServerSettings(rate_limit_per_minute=0, log_questions=False),
    )


def _wait_for(predicate, timeout_s: float = 120.0, what: str = "the condition"):
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if predicate():
            return
        time.sleep(0.2)
    raise AssertionError(f"timed out waiting for {what}")


def test_a_source_removed_while_the_server_runs_is_not_synced_back(site, tmp_path, make_kb):
    write_to_config(config_path(), "acme", SourceSpec(url=site.url("/docs/"), allow_private_network=True, every="1s"))
    settings = _settings(tmp_path / "home")
    assert set(settings.sources) == {"acme"}  # the server's start-up settings declare it, and keep doing so
    kb = make_kb(settings)
    with TestClient(create_app(settings, kb=kb)) as client:
        _wait_for(lambda: len(kb.registry.list()) == 5, what="the first scheduled sync")

        removed = runner.invoke(app, ["sources", "remove", "acme", "--home", str(settings.home)])
        assert removed.exit_code == 0, removed.output
        site.clear_log()
        time.sleep(4)  # `every` is 1 s: a scheduler that still saw the source would have synced it again by now

        assert site.log == []  # no request: no sync ran
        assert kb.registry.list() == []  # and its documents stay removed
        assert client.get("/api/sources").json()["sources"] == []
        assert runs(settings) == []
    assert SourceState(settings.index_dir).documents("acme") == {}


@pytest.mark.parametrize("scheduled", [True, False])
def test_a_sync_that_waited_for_the_lock_does_not_bring_a_removed_source_back(scheduled, site, tmp_path, make_kb):
    """The scheduler found the source due (or someone ran `sources sync`) just before `sources remove` took the lock;
    the sync gets the lock after the removal, with settings that still declare the source."""
    write_to_config(config_path(), "acme", SourceSpec(url=site.url("/docs/"), allow_private_network=True, every="1h"))
    settings = _settings(tmp_path / "home")
    remover, syncer = make_kb(settings), make_kb(settings)
    assert sync_source(remover, "acme").ok and len(remover.registry.list()) == 5
    site.clear_log()
    waiting, reports = threading.Event(), []
    with remover.writing():
        sync = threading.Thread(
            target=lambda: reports.append(
                sync_source(syncer, "acme", only_if_due=scheduled, on_wait=lambda _: waiting.set())
            )
        )
        sync.start()
        assert waiting.wait(60)  # it found the source and now waits for the lock
        assert remove_source(remover, "acme") == 5
    sync.join(120)

    [report] = reports
    if scheduled:
        assert report.ok and not report.ran and "removed" in report.notes[0]
    else:
        assert not report.ok and "removed" in report.error
    assert site.log == [] and remover.registry.list() == []
    assert runs(settings) == [] and SourceState(settings.index_dir).documents("acme") == {}
    again = runner.invoke(app, ["sources", "sync", "acme", "--home", str(settings.home)])
    assert again.exit_code == 2 and "was removed" in again.output and "sources add" in again.output


def test_only_a_declaration_newer_than_the_removal_brings_a_source_back(site, tmp_path, monkeypatch):
    spec = SourceSpec(url=site.url("/docs/"), allow_private_network=True)
    path = config_path()
    write_to_config(path, "acme", spec)
    stale_copy = tmp_path / "replica.toml"
    stale_copy.write_text(path.read_text())  # another machine's citewise.toml, which the removal does not edit
    before = _settings(tmp_path / "home")  # read before the removal: still declares the source
    assert runner.invoke(app, ["sources", "remove", "acme", "--home", str(before.home)]).exit_code == 0

    assert all_specs(before) == {}
    monkeypatch.setenv("CITEWISE_CONFIG", str(stale_copy))
    os.utime(stale_copy, (time.time() - 60, time.time() - 60))  # last edited before the removal
    replica = _settings(tmp_path / "home")
    assert set(replica.sources) == {"acme"} and all_specs(replica) == {}
    write_to_config(stale_copy, "acme", spec.model_copy(update={"max_pages": 3}))  # declared again, after it
    assert all_specs(replica)["acme"].max_pages == 3
    monkeypatch.setenv("CITEWISE_CONFIG", str(path))
    assert runner.invoke(app, ["sources", "add", "acme", site.url("/docs/"), "--home", str(before.home)]).exit_code == 0
    assert set(all_specs(before)) == {"acme"} and SourceState(before.index_dir).removed() == {}
