"""What a new user sees in the terminal: help without odd type labels, document ids that fit 80 columns, a refusal
that says how to find out why, answers reflowed for the terminal, and `citewise gaps` with what readers rated."""

from __future__ import annotations

import io
import json
import re
import shutil
from datetime import UTC, datetime
from pathlib import Path

import pytest
from rich.console import Console
from typer.testing import CliRunner

from citewise import cli
from citewise.cli import app
from citewise.feedback.sqlite import SqliteFeedbackStore
from citewise.feedback.store import AnswerRecord, Rating
from citewise.ingest.pipeline import Ingestor
from citewise.settings import Settings
from citewise.types import REFUSAL_TEXT, Answer, ExitReason, Status

runner = CliRunner()
CORPUS = Path(__file__).parent / "fixtures" / "corpus"
LOG = Path(__file__).parent / "fixtures" / "eval" / "questions_log.jsonl"


@pytest.fixture(scope="module")
def home(tmp_path_factory, embedder) -> Path:
    from citewise.index.knowledge_base import KnowledgeBase

    home = tmp_path_factory.mktemp("cli-reach-home")
    Ingestor(KnowledgeBase(Settings(home=home), embedder=embedder)).ingest_paths([CORPUS])
    return home


def test_help_shows_no_type_for_flags():
    for command in (["ask", "--help"], ["gaps", "--help"], ["mcp", "--help"], ["--help"]):
        result = runner.invoke(app, command, env={"COLUMNS": "100"})
        assert result.exit_code == 0, result.output
        assert "<bool>" not in result.output, command
    assert "<path>" in runner.invoke(app, ["ask", "--help"]).output  # options that take a value keep theirs


def test_docs_list_fits_80_columns_and_remove_takes_the_short_id(home, tmp_path):
    copy = tmp_path / "home"
    shutil.copytree(home, copy)
    listing = runner.invoke(app, ["docs", "list", "--home", str(copy)], env={"COLUMNS": "80"})
    assert listing.exit_code == 0, listing.output
    assert all(len(line) <= 80 for line in listing.stdout.splitlines())
    records = json.loads(runner.invoke(app, ["docs", "list", "--home", str(copy), "--json"]).stdout)
    short = records[0]["doc_id"][:8]
    # Every row's id is on one line, whole as shown (no id folded over two lines).
    assert len(re.findall(r"\b[0-9a-f]{8}\b", listing.stdout)) == len(records)
    assert short in listing.stdout and records[0]["doc_id"] not in listing.stdout

    removed = runner.invoke(app, ["docs", "remove", short, "--home", str(copy)])
    assert removed.exit_code == 0, removed.output
    left = json.loads(runner.invoke(app, ["docs", "list", "--home", str(copy), "--json"]).stdout)
    assert [r["doc_id"] for r in left] == [r["doc_id"] for r in records[1:]]
    ambiguous = runner.invoke(app, ["docs", "remove", "", "--home", str(copy)])
    assert ambiguous.exit_code == 2


def test_a_refusal_says_how_to_see_why(home):
    result = runner.invoke(app, ["ask", "What is the airspeed velocity of an unladen swallow?", "--home", str(home)])
    assert result.exit_code == 0
    assert REFUSAL_TEXT in result.stdout
    assert "--trace" in result.stderr and "Why:" in result.stderr
    traced = runner.invoke(
        app, ["ask", "What is the airspeed velocity of an unladen swallow?", "--trace", "--home", str(home)]
    )
    assert "again with --trace" not in traced.stderr  # already tracing


def test_terminal_answers_are_reflowed(monkeypatch):
    screen = io.StringIO()
    monkeypatch.setattr(
        cli, "out", Console(file=screen, force_terminal=True, width=100, color_system=None, emoji=False)
    )
    answer = Answer(
        question="q",
        answer="Point `ORBITRON_KEY_FILE` at a 256-bit key\nbefore the first job is written [1].",
        status=Status.SUCCESS,
        exit_reason=ExitReason.COMPLETED,
    )
    cli._print_answer(answer)
    first = screen.getvalue().splitlines()[0]
    assert "256-bit key before the first job is written" in first  # the source's line break is gone


def test_gaps_shows_ratings_refusals_and_the_answer_rate(tmp_path):
    home = tmp_path / "home"
    home.mkdir()
    today = datetime.now(UTC).isoformat(timespec="seconds")
    lines = [json.loads(line) for line in LOG.read_text().splitlines() if line.strip().endswith("}")]
    for record in lines:
        record["timestamp"] = today
    lines[0]["owner"] = "alice"
    (home / "questions.jsonl").write_text("".join(json.dumps(r) + "\n" for r in lines))
    store = SqliteFeedbackStore(home / "feedback.sqlite3")
    record = AnswerRecord(
        owner="alice", question="How do I pin the pool?", answer="Use 12 [1].", status="success",
        exit_reason="COMPLETED", citations=[{"n": 1, "filename": "config.md"}],
    )  # fmt: skip
    store.record_answer(record)
    store.rate(record.answer_id, "alice", Rating.DOWN, "Says nothing about limits")

    table = runner.invoke(app, ["gaps", "--home", str(home)], env={"COLUMNS": "160"})
    assert table.exit_code == 0, table.output
    assert "How do I rotate API keys?" in table.stdout
    assert "Answers marked bad" in table.stdout and "Says nothing about limits" in table.stdout
    assert "Refusals by reason" in table.stdout and "answer rate" in table.stdout

    mine = json.loads(runner.invoke(app, ["gaps", "--home", str(home), "--owner", "alice", "--json"]).stdout)
    assert mine["questions"] == 1 and mine["analytics"]["ratings"] == {"up": 0, "down": 1}
    theirs = json.loads(runner.invoke(app, ["gaps", "--home", str(home), "--owner", "bob", "--json"]).stdout)
    assert theirs["questions"] == 0 and theirs["analytics"]["marked_bad"] == []


def test_gaps_marks_questions_whose_refusal_a_reader_rated_wrong(tmp_path):
    """A refusal rated down is the reader saying "the docs do cover this": a false refusal, not a missing page. gaps
    still lists the question, marked so, with what the reader said; other groups are not marked."""
    home = tmp_path / "home"
    home.mkdir()
    (home / "questions.jsonl").write_text(LOG.read_text())
    store = SqliteFeedbackStore(home / "feedback.sqlite3")
    refused = AnswerRecord(
        owner="public", question="How do I rotate API keys?", answer=REFUSAL_TEXT, status="refused",
        exit_reason="COMPLETED", refusal_reason="weak_evidence",
    )  # fmt: skip
    store.record_answer(refused)
    store.rate(refused.answer_id, "public", Rating.DOWN, "It's under Owners and API keys")
    answered = AnswerRecord(
        owner="public", question="Is there a limit on upload size?", answer="50 MB [1].", status="success",
        exit_reason="COMPLETED",
    )  # fmt: skip
    store.record_answer(answered)  # an answer rated down is a bad answer, not a wrong refusal
    store.rate(answered.answer_id, "public", Rating.DOWN, None)

    report = json.loads(runner.invoke(app, ["gaps", "--home", str(home), "--json"]).stdout)
    marked = {g["question"]: (g["rated_wrong"], g["rated_wrong_comments"]) for g in report["groups"]}
    assert marked["How do I rotate API keys?"] == (1, ["It's under Owners and API keys"])
    assert all(count == 0 for question, (count, _) in marked.items() if "rotate" not in question)

    table = runner.invoke(app, ["gaps", "--home", str(home)], env={"COLUMNS": "200"})
    assert table.exit_code == 0, table.output
    flat = " ".join(table.stdout.split())
    assert "refusal rated wrong by readers (1)" in flat and "Owners and API keys" in flat
