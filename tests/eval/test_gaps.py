"""The docs-gap report: grouping of refused / insufficient questions from a fixture log, and the CLI."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

from typer.testing import CliRunner

from citewise.cli import app
from citewise.eval.gaps import content_tokens, gap_report, group_gaps, read_log
from citewise.settings import Settings
from citewise.text import jaccard

LOG = Path(__file__).parent.parent / "fixtures" / "eval" / "questions_log.jsonl"


def test_tokens_and_jaccard():
    rotate = content_tokens("How do I rotate API keys?")
    assert rotate == {"rotat", "api", "key"}  # stopwords gone, "keys" ~ "key", "rotate" ~ "rotated"
    rotated = content_tokens("Can API keys be rotated automatically?")
    assert jaccard(rotate, rotated) == 3 / 4  # {api, key, rotat} of {api, key, rotat, automatically}
    assert jaccard(frozenset(), frozenset(), empty=0.0) == 0.0  # questions of stop words only are alike in nothing


def test_log_reading_skips_broken_lines():
    records, bad = read_log(LOG)
    assert len(records) == 8
    assert bad == 1  # the half-written last line


def test_groups_most_frequent_first_with_queries():
    records, _ = read_log(LOG)
    groups = group_gaps(records)
    # The success without insufficiencies and the provider error are not gaps: 6 of 8 records remain.
    assert [g["count"] for g in groups] == [3, 2, 1]
    keys = groups[0]
    assert keys["question"] == "How do I rotate API keys?"  # the most asked wording (case-insensitive twins)
    assert keys["questions"] == [
        {"question": "How do I rotate API keys?", "count": 2},
        {"question": "Can API keys be rotated automatically?", "count": 1},
    ]
    assert keys["queries"] == ["rotate API keys", "API key rotation", "API keys rotated automatically"]
    assert keys["refused"] == 3
    assert keys["refusal_reasons"] == ["no source above the minimum score"]
    assert (keys["first_seen"], keys["last_seen"]) == ("2026-11-20T09:00:00+00:00", "2026-11-21T08:00:00+00:00")
    upload = groups[1]
    # An answer that named an insufficiency is a gap too, grouped with the refused paraphrase.
    assert {q["question"] for q in upload["questions"]} == {
        "What is the upload size limit?",
        "Is there a limit on upload size?",
    }
    assert upload["refused"] == 1
    assert upload["insufficiencies"] == ["the docs do not say whether the limit applies per file"]
    assert groups[2]["question"] == "Does Citewise support SAML login?"


def test_grouping_does_not_depend_on_log_order():
    records, _ = read_log(LOG)
    forward = group_gaps(records)
    backward = group_gaps(list(reversed(records)))
    assert [sorted(q["question"] for q in g["questions"]) for g in forward] == [
        sorted(q["question"] for q in g["questions"]) for g in backward
    ]


def test_min_count_and_threshold():
    records, _ = read_log(LOG)
    assert [g["count"] for g in group_gaps(records, min_count=2)] == [3, 2]
    # At a strict threshold the paraphrase "Can API keys be rotated automatically?" (Jaccard 0.75) splits off.
    assert [g["count"] for g in group_gaps(records, similarity=0.8)] == [2, 2, 1, 1]


def test_report_on_a_missing_log_is_empty(tmp_path):
    report = gap_report(Settings(home=tmp_path / "nowhere"))
    assert report["questions"] == 0 and report["groups"] == []


def test_cli_gaps_json_and_table(tmp_path):
    home = tmp_path / "home"
    home.mkdir()
    shutil.copy(LOG, home / "questions.jsonl")
    runner = CliRunner()
    result = runner.invoke(app, ["gaps", "--home", str(home), "--json", "--min-count", "2"])
    assert result.exit_code == 0, result.output
    report = json.loads(result.stdout.strip().splitlines()[-1])
    assert report["questions"] == 8 and report["gaps"] == 6 and report["unreadable_lines"] == 1
    assert [g["count"] for g in report["groups"]] == [3, 2]

    table = runner.invoke(app, ["gaps", "--home", str(home)])
    assert table.exit_code == 0, table.output
    assert "How do I rotate API keys?" in table.stdout
    assert "rotate API keys" in table.stdout

    empty = runner.invoke(app, ["gaps", "--home", str(tmp_path / "empty")])
    assert empty.exit_code == 0
    assert "No unanswered questions" in empty.stdout
