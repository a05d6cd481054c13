"""`citewise sources add | list | sync | remove` as a user runs them: citewise.toml is the declaration (comments
kept), the home keeps the state, and removing a source removes its documents."""

from __future__ import annotations

import json
import os
import tomllib
from pathlib import Path

from typer.testing import CliRunner

from citewise.cli import app
from citewise.index.registry import Registry

runner = CliRunner()


def cli(*args: str):
    return runner.invoke(app, list(args), catch_exceptions=False)


def test_add_sync_list_remove_a_website(site, tmp_path, monkeypatch):
    monkeypatch.setenv("CITEWISE_SYNC__MAX_PAGE_MB", "0.1")  # the site's huge page fails at the cap
    config = Path(os.environ["CITEWISE_CONFIG"])
    config.write_text('# our deployment\n[retrieval]\nmode = "hybrid"  # keep hybrid\n')
    home = str(tmp_path / "home")

    url = site.url("/docs/")
    added = cli("sources", "add", "acme", url, "--allow-private-network", "--every", "6h", "--home", home)
    assert added.exit_code == 0, added.output
    text = config.read_text()
    assert "# our deployment" in text and "# keep hybrid" in text
    declared = tomllib.loads(text)["sources"]["acme"]
    assert declared == {"url": site.url("/docs/"), "kind": "web", "every": "6h", "allow_private_network": True}
    again = cli("sources", "add", "acme", site.url("/docs/"), "--home", home)
    assert again.exit_code == 2 and "exists already" in again.output

    synced = cli("sources", "sync", "acme", "--home", home, "--json")
    assert synced.exit_code == 0, synced.output
    report = json.loads(synced.stdout.strip().splitlines()[-1])[0]
    assert report["ok"] and report["documents"] == 5 and report["failed"] == 1

    listed = json.loads(cli("sources", "list", "--home", home, "--json").stdout)
    assert [row["name"] for row in listed] == ["acme"]
    row = listed[0]
    assert row["last_ok"] is True and row["documents"] == 5 and row["failures"] == 1 and row["next_run"]
    table = cli("sources", "list", "--home", home)
    assert "acme" in table.output and "6h" in table.output

    # Reproducible from the config alone: another home sees the declared source, never synced yet.
    fresh = json.loads(cli("sources", "list", "--home", str(tmp_path / "other"), "--json").stdout)
    assert fresh[0]["name"] == "acme" and fresh[0]["last_ok"] is None

    removed = cli("sources", "remove", "acme", "--home", home)
    assert removed.exit_code == 0 and "5 document(s)" in removed.output
    assert Registry(Path(home) / "index" / "registry.sqlite3").list() == []
    assert "sources" not in tomllib.loads(config.read_text())
    assert json.loads(cli("sources", "list", "--home", home, "--json").stdout) == []


def test_a_folder_source_is_todays_ingest_declared(tmp_path, corpus):
    home = str(tmp_path / "home")
    assert cli("sources", "add", "handbook", str(corpus), "--exclude", "reference/**", "--home", home).exit_code == 0
    first = json.loads(cli("sources", "sync", "handbook", "--home", home, "--json").stdout.strip().splitlines()[-1])[0]
    assert first["ok"] and first["kind"] == "folder" and first["documents"] >= 3
    indexed = {r.filename for r in Registry(Path(home) / "index" / "registry.sqlite3").list()}
    assert "changelog.txt" in indexed and not indexed & {"api.html", "cli.rst", "manual.pdf"}
    (corpus / "notes" / "changelog.txt").unlink()
    second = json.loads(cli("sources", "sync", "--home", home, "--json").stdout.strip().splitlines()[-1])[0]
    assert second["removed"] == 1 and second["documents"] == first["documents"] - 1
    assert cli("sources", "remove", "handbook", "--home", home).exit_code == 0
    assert Registry(Path(home) / "index" / "registry.sqlite3").list() == []


def test_bad_sources_are_refused_with_a_clear_message(tmp_path):
    home = str(tmp_path / "home")
    cases = [
        (("sources", "add", "Bad Name", "https://example.com/docs/"), "Invalid source name"),
        (("sources", "add", "docs", "https://example.com/docs/", "--every", "5x"), "not a duration"),
        (("sources", "add", "docs", "file:///etc/passwd"), "file://"),
        (("sources", "add", "docs", str(tmp_path / "missing")), "no such folder"),
        (("sources", "add", "docs", "https://example.com/", "--url-template", "{nope}"), "unknown placeholder"),
        (("sources", "sync", "nothing-here"), "No source named"),
        (("sources", "remove", "nothing-here"), "No source named"),
    ]
    for args, message in cases:
        result = cli(*args, "--home", home)
        assert result.exit_code == 2, (args, result.output)
        # The message is wrapped at the terminal's width, wherever the temp path's length puts a break.
        assert message in " ".join(result.output.split()), (args, result.output)
    assert not Path(os.environ["CITEWISE_CONFIG"]).exists()
