"""The CLI as a user runs it: real processes for start-up behaviour, Typer's runner for the rest."""

from __future__ import annotations

import gc
import json
import shutil
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
    docs = tmp_path / "docs"
    docs.mkdir()
    (docs / "a.md").write_text("# A\n\nText.\n")
    fresh = tmp_path / "fresh"
    slugs = runner.invoke(app, ["ingest", str(docs), "--slugs", "mkdocs", "--home", str(fresh)])  # of no site
    assert slugs.exit_code == 2 and "--base-url" in slugs.stderr
    assert not fresh.exists()  # nothing was written


def test_reading_commands_on_a_home_with_nothing_ingested_say_so_and_create_nothing(tmp_path):
    """A mistyped --home used to be created, and `ask` answered with the refusal sentence (exit 0), as if the docs
    lacked the answer. Now ask, search and chat say there is nothing there and what to run (exit 2)."""
    missing = tmp_path / "typo"
    for args in (["ask", "How do I rotate the key?"], ["search", "rotate"], ["search", "rotate", "--json"], ["chat"]):
        result = runner.invoke(app, [*args, "--home", str(missing)], input="exit\n")
        assert result.exit_code == 2, (args, result.output)
        said = " ".join(result.stderr.split())
        assert f"No Citewise home at {missing}" in said and f"citewise ingest PATH --home {missing}" in said
        assert result.stdout.strip() == "", args  # not the refusal sentence, not an empty JSON result
    assert not missing.exists()

    empty = tmp_path / "empty"  # a home that exists with no document in it (a server started on it, say)
    empty.mkdir()
    for args in (["ask", "How do I rotate the key?"], ["search", "rotate"], ["chat"]):
        result = runner.invoke(app, [*args, "--home", str(empty)], input="exit\n")
        assert result.exit_code == 2, (args, result.output)
        said = " ".join(result.stderr.split())
        assert "Nothing is ingested in" in said and "citewise ingest PATH" in said
    assert list(empty.iterdir()) == []

    broken = tmp_path / "broken"  # every document failed: nothing to answer from, and the list says why
    broken.mkdir()
    (broken / "bad.pdf").write_bytes(b"%PDF-1.4 garbage")
    assert _run("ingest", str(broken), "--home", str(empty)).exit_code == 1
    result = runner.invoke(app, ["ask", "How do I rotate the key?", "--home", str(empty)])
    assert result.exit_code == 2 and "all 1 failed" in " ".join(result.stderr.split())

    selected = tmp_path / "selected.txt"  # an answer about a selected text needs no index
    selected.write_text("Keys are rotated every ninety days by the scheduler.\n")
    result = runner.invoke(app, ["search", "rotated", "--selected-text", str(selected), "--home", str(empty)])
    assert result.exit_code == 0 and "ninety days" in result.stdout


def test_on_postgres_the_database_decides_whether_anything_is_ingested(tmp_path, pg_url, monkeypatch):
    """With store = "postgres" the documents are the database's: a home folder that was never created is no sign of
    an empty index, and an empty database is said to be one."""
    monkeypatch.setenv("CITEWISE_STORE", "postgres")
    monkeypatch.setenv("CITEWISE_DATABASE_URL", pg_url)
    home = tmp_path / "never-created"
    empty = runner.invoke(app, ["search", "worker threads", "--home", str(home)])
    assert empty.exit_code == 2 and "Nothing is ingested in the PostgreSQL database" in " ".join(empty.stderr.split())
    docs = tmp_path / "docs"
    docs.mkdir()
    (docs / "workers.md").write_text("# Workers\n\nThe worker pool runs twelve threads by default.\n")
    assert _run("ingest", str(docs), "--home", str(home)).exit_code == 0
    shutil.rmtree(home, ignore_errors=True)  # a replica's local folder: nothing of the index lives there
    found = runner.invoke(app, ["search", "worker threads", "--home", str(home)])
    assert found.exit_code == 0 and "twelve threads" in found.stdout
