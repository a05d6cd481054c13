"""`citewise eval answers` end to end: real index, real embedding model, the real agent in quote mode.

small.jsonl has four answerable questions, each written from one sentence of its own passage, and two that no
passage answers (one about volcanoes with no passage, one about sourdough whose passage is about logs).
"""

from __future__ import annotations

import json
from pathlib import Path

from typer.testing import CliRunner

from citewise.cli import app
from citewise.eval.answers import evaluate_answers
from citewise.eval.formats import load_jsonl
from citewise.settings import Settings

FIXTURES = Path(__file__).parent.parent / "fixtures"
SMALL = FIXTURES / "eval" / "small.jsonl"


def test_cli_quote_mode_json():
    result = CliRunner().invoke(app, ["eval", "answers", "--jsonl", str(SMALL), "--mode", "quote", "--json"])
    assert result.exit_code == 0, result.output
    report = json.loads(result.stdout.strip().splitlines()[-1])
    assert (report["questions"], report["answerable"], report["unanswerable"]) == (6, 4, 2)
    assert report["corpus"] == 4 and report["mode"] == "quote"
    # Grounding: every citation points at a retrieved chunk.
    assert report["citations"] > 0
    assert report["citation_validity"] == 1.0
    # Both unanswerable questions are refused, and no answerable one is.
    assert report["refusal"]["recall"] == 1.0
    assert report["refusal"]["precision"] == 1.0
    # Quote mode answers with the sentence that holds the fact, so the gold phrase is in the answer and the citation.
    assert report["answer_recall"] == 1.0
    assert report["citation_support"] == 1.0
    assert report["context_citation"] == 1.0
    assert 0 < report["token_f1"] < 1
    assert sum(report["exit_reasons"].values()) == 6
    assert report["latency_p50_ms"] > 0


def test_cache_dir_reuses_the_index_and_figures_repeat(tmp_path, embedder):
    settings = Settings(home=tmp_path / "home")
    dataset = load_jsonl(SMALL)
    first = evaluate_answers(dataset, settings, cache_dir=tmp_path / "cache", embedder=embedder, limit=4, seed=3)
    again = evaluate_answers(dataset, settings, cache_dir=tmp_path / "cache", embedder=embedder, limit=4, seed=3)
    assert first["ingest_unchanged"] == 0
    assert again["ingest_unchanged"] == 4  # every passage found unchanged: nothing re-embedded
    assert again["chunks"] == first["chunks"] > 0
    volatile = ("ingest_s", "ingest_unchanged", "latency_p50_ms", "latency_p95_ms")
    stable = {k: v for k, v in first.items() if k not in volatile}
    assert stable == {k: v for k, v in again.items() if k not in volatile}
    assert first["questions"] == 4
    # Evaluation questions stay out of the docs-gap log, of the user's home and of the evaluation's.
    assert not settings.questions_log_path.exists()
    assert not list((tmp_path / "cache").rglob("questions.jsonl"))


def test_corpus_folder_and_details(tmp_path, embedder):
    questions = tmp_path / "orbitron.jsonl"
    questions.write_text(
        json.dumps({"id": "port", "question": "Which port does the Orbitron daemon listen on?", "answers": ["7433"]})
        + "\n"
        + json.dumps({"id": "pets", "question": "How often should I feed a goldfish?", "answers": []})
        + "\n"
    )
    details = tmp_path / "details.jsonl"
    report = evaluate_answers(
        load_jsonl(questions, require_passages=False),
        Settings(home=tmp_path / "home"),
        corpus_paths=[FIXTURES / "corpus"],
        details_path=details,
        embedder=embedder,
    )
    assert report["corpus"] >= 5 and report["questions"] == 2
    assert report["citation_validity"] == 1.0
    rows = {row["id"]: row for row in map(json.loads, details.read_text().splitlines())}
    assert rows["port"]["status"] == "success" and rows["port"]["answer_contains_gold"]
    assert rows["pets"]["status"] == "refused"


QUESTIONS = FIXTURES / "questions.jsonl"  # written for the fixture corpus: answerable + near-miss unanswerable


def test_docs_questions_are_judged_right_wrong_or_refused_and_failures_listed(tmp_path):
    args = ["eval", "answers", "--docs", str(FIXTURES / "corpus"), "--questions", str(QUESTIONS)]
    result = CliRunner().invoke(app, [*args, "--cache-dir", str(tmp_path / "cache"), "--json"])
    assert result.exit_code == 0, result.output
    report = json.loads(result.stdout.strip().splitlines()[-1])
    docs = report["docs"]
    answerable, unanswerable = docs["answerable"], docs["unanswerable"]
    assert answerable["questions"] + unanswerable["questions"] == report["questions"] == 45
    assert answerable["right"] + answerable["wrong"] + answerable["refused"] == answerable["questions"]
    assert unanswerable["refused"] + unanswerable["answered"] == unanswerable["questions"]
    failing = answerable["wrong"] + answerable["refused"] + unanswerable["answered"]
    assert len(report["failures"]) == failing
    for failure in report["failures"]:
        assert failure["outcome"] in ("wrong", "refused", "answered") and failure["question"] and failure["id"]
    assert report["citation_validity"] == 1.0
    # The human-readable table names the three outcomes and lists the failures.
    table = CliRunner().invoke(app, [*args, "--cache-dir", str(tmp_path / "cache")])
    assert table.exit_code == 0, table.output
    assert "right" in table.output and "unanswerable refused" in table.output
    assert ("Failures" in table.output) == bool(failing)


def test_questions_need_a_docs_folder():
    result = CliRunner().invoke(app, ["eval", "answers", "--questions", str(QUESTIONS)])
    assert result.exit_code == 2 and "--docs" in result.output
