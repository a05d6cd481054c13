"""`citewise ask` and `citewise chat` against a real index (quote mode: no model needed)."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from typer.testing import CliRunner

from citewise.cli import app
from citewise.ingest.pipeline import Ingestor
from citewise.settings import Settings
from citewise.types import REFUSAL_TEXT, Answer

runner = CliRunner()
QUESTION = "How do I pin the worker pool to a fixed number of threads?"


@pytest.fixture(scope="module")
def home(tmp_path_factory, embedder) -> Path:
    from citewise.index.knowledge_base import KnowledgeBase

    home = tmp_path_factory.mktemp("cli-ask-home")
    corpus = Path(__file__).parent / "fixtures" / "corpus"
    Ingestor(KnowledgeBase(Settings(home=home), embedder=embedder)).ingest_paths([corpus])
    return home


def _ask(home: Path, *args: str):
    return runner.invoke(app, ["ask", *args, "--home", str(home)])


def test_ask_json_answerable(home):
    result = _ask(home, QUESTION, "--json")
    assert result.exit_code == 0, result.output
    answer = Answer.model_validate_json(result.stdout.strip().splitlines()[-1])
    assert answer.status == "success" and answer.exit_reason == "COMPLETED"
    assert answer.citations and "twelve threads" in answer.answer
    assert answer.trace == []  # only with --trace


def test_ask_json_with_trace(home):
    result = _ask(home, QUESTION, "--json", "--trace")
    answer = json.loads(result.stdout.strip().splitlines()[-1])
    assert [e["type"] for e in answer["trace"]][-1] == "exit"


def test_ask_json_unanswerable_is_refused_with_exit_code_0(home):
    result = _ask(home, "What is the airspeed velocity of an unladen swallow?", "--json")
    assert result.exit_code == 0
    answer = json.loads(result.stdout.strip().splitlines()[-1])
    assert answer["status"] == "refused" and answer["answer"] == REFUSAL_TEXT and answer["citations"] == []


def test_ask_human_output_lists_numbered_sources(home):
    result = _ask(home, QUESTION)
    assert result.exit_code == 0
    assert "twelve threads" in result.stdout
    assert "Sources" in result.stdout
    assert "[1] configuration.mdx › Configuring Orbitron > Worker pool" in result.stdout


def test_ask_structured_style(home):
    result = _ask(home, QUESTION, "--style", "structured", "--json")
    assert json.loads(result.stdout.strip().splitlines()[-1])["answer"].startswith("## ")


def test_ask_selected_text(home, tmp_path):
    selection = tmp_path / "selection.txt"
    selection.write_text("Kestrel clusters elect a coordinator every 90 seconds. The coordinator assigns shards.")
    result = _ask(
        home, "How often do Kestrel clusters elect a coordinator?", "--selected-text", str(selection), "--json"
    )
    answer = json.loads(result.stdout.strip().splitlines()[-1])
    assert answer["status"] == "success" and "90 seconds" in answer["answer"]


def test_ask_exit_codes(home, tmp_path):
    assert _ask(home, "   ", "--json").exit_code == 1  # EMPTY_INPUT: the run could not answer
    assert _ask(home, QUESTION, "--owner", "not valid!").exit_code == 2  # bad input
    assert _ask(home, QUESTION, "--mode", "agent").exit_code == 2  # agent mode without a model configured
    assert _ask(home, QUESTION, "--selected-text", str(tmp_path / "missing.txt")).exit_code == 2
    assert _ask(home, QUESTION, "--mode", "telepathy").exit_code == 2  # Click rejects the choice


def test_ask_logs_the_question(home, tmp_path):
    private = tmp_path / "home"
    shutil.copytree(home, private)
    _ask(private, QUESTION, "--json")
    lines = (private / "questions.jsonl").read_text().splitlines()
    assert json.loads(lines[-1])["question"] == QUESTION


def test_chat_repl_answers_and_keeps_going(home):
    result = runner.invoke(app, ["chat", "--home", str(home)], input=f"hello\n\n{QUESTION}\nexit\n")
    assert result.exit_code == 0, result.output
    assert "Ask me anything" in result.stdout  # the greeting
    assert "twelve threads" in result.stdout and "Sources" in result.stdout


def test_chat_reads_a_follow_up_with_the_question_before_it(home):
    """Quote mode, the default: "Is it enabled by default?" after a question about encryption is about encryption,
    and --trace shows the question it was read as."""
    from citewise.agent.followup import standalone

    first, followup = "How do I turn on encryption at rest?", "Is it enabled by default?"
    result = runner.invoke(app, ["chat", "--trace", "--home", str(home)], input=f"{first}\n{followup}\nexit\n")
    assert result.exit_code == 0, result.output
    answers = result.stdout.split("\n> ")[1:]  # after each prompt: its answer
    assert "off by default" in answers[1]
    steps = " ".join(result.stderr.split())  # the terminal's width wraps long lines
    assert "retrieve: standalone" in steps and standalone(followup, [first]).question in steps
    # Asked first, the same words are about something else.
    alone = runner.invoke(app, ["chat", "--home", str(home)], input=f"{followup}\nexit\n")
    assert "off by default" not in alone.stdout


def test_missing_vendor_extra_is_a_clear_error_naming_the_install_command(home, monkeypatch):
    # The hint contains "[anthropic]", which a terminal renderer could take for markup and drop.
    monkeypatch.setenv("CITEWISE_LLM", "anthropic:claude-test")
    result = _ask(home, QUESTION)
    assert result.exit_code == 2
    assert "pip install 'citewise[anthropic]'" in result.stderr


def _ask_on_a_terminal(home: Path, *args: str) -> tuple[str, str]:
    """Run `citewise ask` with stderr on a pseudo-terminal (stdout piped): (stdout, what the terminal showed)."""
    import os
    import pty
    import subprocess
    import sys

    leader, follower = pty.openpty()
    env = {**os.environ, "TERM": "xterm-256color", "COLUMNS": "100"}
    env.pop("NO_COLOR", None)
    process = subprocess.Popen(
        [sys.executable, "-m", "citewise.cli", "ask", *args, "--home", str(home)],
        stdout=subprocess.PIPE,
        stderr=follower,
        env=env,
    )
    os.close(follower)
    shown = b""
    while True:
        try:
            data = os.read(leader, 4096)
        except OSError:  # the child closed the terminal
            break
        if not data:
            break
        shown += data
    stdout = process.stdout.read().decode()
    process.wait(timeout=120)
    os.close(leader)
    return stdout, shown.decode(errors="replace")


def test_a_spinner_shows_on_the_terminal_while_the_answer_is_composed(home):
    stdout, terminal = _ask_on_a_terminal(home, QUESTION)
    assert "Composing the answer" in terminal
    assert "twelve threads" in stdout and "Composing" not in stdout


def test_no_spinner_with_json(home):
    stdout, terminal = _ask_on_a_terminal(home, QUESTION, "--json")
    assert "Composing" not in terminal
    assert Answer.model_validate_json(stdout.strip().splitlines()[-1]).status == "success"
