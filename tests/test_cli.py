"""The CLI as a user runs it: real processes for start-up behaviour, Typer's runner for the rest."""

from __future__ import annotations

import gc
import json
import subprocess
import sys

import pytest
import typer
from typer.testing import CliRunner

from citewise import cli
from citewise.cli import app

runner = CliRunner()


def _run(*args: str):
    return runner.invoke(app, list(args), catch_exceptions=False)


def test_help_and_docs_list_start_without_heavy_imports(tmp_path):
    script = (
        "import sys\n"
        "from typer.testing import CliRunner\n"
        "from citewise.cli import app\n"
        "r = CliRunner()\n"
        "assert r.invoke(app, ['--help']).exit_code == 0\n"
        f"assert r.invoke(app, ['docs', 'list', '--home', {str(tmp_path)!r}]).exit_code == 0\n"
        "heavy = [m for m in ('sentence_transformers', 'torch', 'lancedb') if m in sys.modules]\n"
        "print(','.join(heavy) or 'none')\n"
    )
    proc = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() == "none"


def test_only_the_one_question_commands_keep_the_collector_paused():
    """main() pauses garbage collection for a cold start; `_run` resumes it for every command but search and ask
    (ingest, serve or chat may run for hours)."""
    collecting = {}
    try:
        for one_question in (True, False):
            gc.disable()
            with pytest.raises(typer.Exit):
                cli._run(lambda q=one_question: collecting.__setitem__(q, gc.isenabled()), one_question=one_question)
    finally:
        gc.enable()
    assert collecting == {True: False, False: True}


ALONE = [["search", "--help"], ["ask", "--help"], ["docs", "list", "--help"], ["search"], ["ask", "--mode", "x", "q"]]


@pytest.mark.parametrize("args", ALONE)
def test_a_command_runs_alone_as_it_runs_in_the_whole_app(args):
    """main() builds only the command it runs (Typer builds every command's parameters first): its help, its errors
    and its behaviour are the whole app's."""
    only = cli._app_for(args)
    assert set(typer.main.get_command(only).commands) == {args[0]}
    alone, whole = runner.invoke(only, args), runner.invoke(app, args)
    assert (alone.exit_code, alone.output) == (whole.exit_code, whole.output)


@pytest.mark.parametrize("args", [[], ["--help"], ["--version"], ["serach", "q"]])
def test_without_a_command_the_whole_app_answers(args):
    assert cli._app_for(args) is app


def test_ingest_list_search_roundtrip(tmp_path, corpus):
    home = str(tmp_path / "home")
    first = _run("ingest", str(corpus), "--home", home, "--json")
    assert first.exit_code == 0
    report = json.loads(first.stdout.strip().splitlines()[-1])
    assert report["indexed"] == report["seen"] > 0 and report["failed"] == 0

    again = _run("ingest", str(corpus), "--home", home)
    assert again.exit_code == 0 and "Nothing to embed" in again.stdout

    listing = json.loads(_run("docs", "list", "--home", home, "--json").stdout)
    assert len(listing) == report["seen"] and {d["status"] for d in listing} == {"INDEXED"}

    result = _run("search", "configuration settings", "--k", "3", "--home", home, "--json")
    payload = json.loads(result.stdout.strip().splitlines()[-1])
    assert result.exit_code == 0 and 1 <= len(payload["chunks"]) <= 3
    assert {"filename", "chapter", "score", "doc_id", "chunk_id"} <= set(payload["chunks"][0])

    table = _run("search", "configuration settings", "--home", home)
    assert table.exit_code == 0 and payload["chunks"][0]["filename"] in table.stdout


def test_failed_files_make_ingest_exit_1_and_show_in_list(tmp_path):
    docs = tmp_path / "docs"
    docs.mkdir()
    (docs / "good.md").write_text("# Good\n\nA fine page.\n")
    (docs / "bad.pdf").write_bytes(b"%PDF-1.4 garbage")
    home = str(tmp_path / "home")
    result = _run("ingest", str(docs), "--home", home)
    assert result.exit_code == 1
    failed = json.loads(_run("docs", "list", "--status", "FAILED", "--home", home, "--json").stdout)
    assert [d["filename"] for d in failed] == ["bad.pdf"] and failed[0]["error"]


def test_usage_errors_exit_2_with_a_message(tmp_path):
    home = str(tmp_path / "home")
    missing = runner.invoke(app, ["ingest", str(tmp_path / "missing"), "--home", home])
    assert missing.exit_code == 2 and "No such file" in missing.stderr
    bad_k = runner.invoke(app, ["search", "x", "--k", "50", "--home", home])
    assert bad_k.exit_code == 2 and "top_k" in bad_k.stderr
    empty = runner.invoke(app, ["search", "  ", "--home", home])
    assert empty.exit_code == 2 and "empty" in empty.stderr
    unknown = runner.invoke(app, ["docs", "remove", "nope", "--home", home])
    assert unknown.exit_code == 2 and "No document" in unknown.stderr


def test_search_on_empty_home_says_so(tmp_path):
    result = _run("search", "anything", "--home", str(tmp_path / "home"))
    assert result.exit_code == 0 and "index is empty" in result.stdout
