"""What the CLI prints from documents, paths and users is shown as text: never parsed as Rich markup, never sent
to the terminal as control sequences."""

from __future__ import annotations

import json
from pathlib import Path

from typer.testing import CliRunner

from citewise.cli import app

runner = CliRunner()


def _run(*args: str):
    return runner.invoke(app, list(args), catch_exceptions=False)


def test_markup_in_headings_and_failed_paths_is_printed_literally(tmp_path):
    docs = tmp_path / "docs"
    docs.mkdir()
    (docs / "api.md").write_text(
        "# API [bold]reference[/bold]\n\n## The [/api/v1] endpoint\n\nThe [/api/v1] endpoint answers quokka queries.\n"
    )
    weird = docs / "[" / "y]"  # a path that reads "[/y]"
    weird.mkdir(parents=True)
    (weird / "bad.pdf").write_bytes(b"%PDF-1.4 garbage")
    home = str(tmp_path / "home")

    ingest = _run("ingest", str(docs), "--home", home)
    assert ingest.exit_code == 1  # one failed file; the run itself finished and said so
    assert "[/y]" in ingest.stderr and "bad.pdf" in ingest.stderr
    assert "Indexed 1 document" in ingest.stdout

    search = _run("search", "quokka endpoint", "--home", home)
    assert search.exit_code == 0, search.stdout
    assert "The [/api/v1] endpoint" in search.stdout

    ask = _run("ask", "Which endpoint answers quokka queries?", "--mode", "quote", "--home", home)
    assert ask.exit_code == 0
    assert "[/api/v1]" in ask.stdout

    listing = _run("docs", "list", "--home", home)
    assert listing.exit_code == 0 and "bad.pdf" in listing.stdout


def test_emoji_codes_in_documents_are_printed_as_written(tmp_path):
    """Rich turns `:date:` into a calendar emoji by default: a quote must show the docs' own characters."""
    docs = tmp_path / "docs"
    docs.mkdir()
    (docs / "fields.md").write_text("# Fields\n\nThe quokka loader reads the :date: field and the :smile: field.\n")
    home = str(tmp_path / "home")
    assert _run("ingest", str(docs), "--home", home).exit_code == 0

    search = _run("search", "quokka loader field", "--home", home)
    assert search.exit_code == 0 and ":date:" in search.stdout and "\N{CALENDAR}" not in search.stdout
    ask = _run("ask", "Which field does the quokka loader read?", "--mode", "quote", "--home", home)
    assert ask.exit_code == 0
    assert ":date:" in ask.stdout and ":smile:" in ask.stdout
    assert "\N{CALENDAR}" not in ask.stdout and "\N{SMILING FACE WITH SMILING EYES}" not in ask.stdout


def test_control_characters_in_file_names_are_neutralised(tmp_path):
    docs = tmp_path / "docs"
    docs.mkdir()
    name = "evil\x1b[31mred\x1b[0m.md"
    (docs / name).write_text("# Evil\n\nA page whose name carries terminal escapes.\n")
    home = str(tmp_path / "home")
    assert _run("ingest", str(docs), "--home", home).exit_code == 0

    listing = _run("docs", "list", "--home", home)
    assert listing.exit_code == 0
    assert "\x1b" not in listing.stdout
    assert "evil" in listing.stdout and "red" in listing.stdout
    # JSON output keeps the real name: it is data, not terminal text
    data = json.loads(_run("docs", "list", "--home", home, "--json").stdout)
    assert data[0]["filename"] == name


def test_home_that_is_a_file_or_unwritable_is_a_clear_error(tmp_path):
    docs = tmp_path / "docs"
    docs.mkdir()
    (docs / "a.md").write_text("# A\n\nText.\n")
    a_file = tmp_path / "home.txt"
    a_file.write_text("not a directory")
    writers = (["ingest", str(docs)], ["docs", "remove", "x"], ["doctor", "--repair"], ["serve"])
    readers = (["docs", "list"], ["search", "text"], ["doctor"])
    # A file, or a path inside one, can never be a home: every command says so. A path that cannot be created
    # (/proc refuses new folders) stops the first writer; to a reader it is simply a home that does not exist.
    cases = [(a_file, writers + readers), (a_file / "sub", writers + readers), (Path("/proc/citewise-home"), writers)]
    for home, commands in cases:
        for args in commands:
            result = runner.invoke(app, [*args, "--home", str(home)])
            assert result.exit_code == 2, (home, args, result.output, result.exception)
            assert result.exception is None or isinstance(result.exception, SystemExit), result.exception
            assert "home" in result.stderr.lower(), result.stderr
            assert str(home) in result.stderr.replace("\n", "")


def test_read_only_commands_do_not_create_a_missing_home(tmp_path):
    home = tmp_path / "nowhere"
    listing = _run("docs", "list", "--home", str(home))
    assert listing.exit_code == 0 and "no citewise home" in listing.stdout.lower()
    assert json.loads(_run("docs", "list", "--home", str(home), "--json").stdout) == []
    search = runner.invoke(app, ["search", "anything", "--home", str(home)])
    assert search.exit_code == 2 and "no citewise home" in search.stderr.lower()
    assert _run("gaps", "--home", str(home)).exit_code == 0
    assert not home.exists()
