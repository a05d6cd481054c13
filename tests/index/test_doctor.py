"""`citewise doctor` shows what a home holds on disk, part by part: a small home whose every file has a known size,
a real (empty) registry so the command runs its checks too, and a symbolic link that must count as itself only."""

from __future__ import annotations

import json
import os
from pathlib import Path

from typer.testing import CliRunner

from citewise.cli import app
from citewise.index.doctor import HOME_PARTS, home_usage, human_bytes
from citewise.index.registry import Registry
from citewise.settings import Settings

runner = CliRunner()

# Path under the home → (part, bytes). SQLite's -wal/-shm files belong to their database's part.
FILES = {
    "index/lancedb/chunks.lance/data/0.lance": ("index", 40_000),
    "index/lancedb/chunks.lance/_versions/1.manifest": ("index", 120),
    "index/sources.sqlite3": ("registry", 8192),
    "index/sources.sqlite3-wal": ("registry", 4096),
    "sessions.sqlite3": ("sessions", 20_480),
    "sessions.sqlite3-wal": ("sessions", 1000),
    "sessions.sqlite3-shm": ("sessions", 32_768),
    "feedback.sqlite3": ("feedback", 12_288),
    "llm_cache.sqlite3": ("llm_cache", 3_000_000),
    "questions.jsonl": ("question_log", 777),
    "sources/git/site.git/HEAD": ("sources", 23),
    "uploads/alice/notes.md": ("uploads", 2048),
    "models/minilm/model.onnx": ("models", 90_000),
    "write.lock": ("other", 30),
    "notes-of-the-admin.txt": ("other", 11),
}


def _small_home(tmp_path: Path) -> Settings:
    home = tmp_path / "home"
    for rel, (_, size) in FILES.items():
        path = home / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(b"x" * size)
    Registry(home / "index" / "registry.sqlite3").upsert([])  # a real, empty registry: doctor runs its checks
    big = tmp_path / "outside.bin"
    big.write_bytes(b"y" * 1_000_000)
    (home / "uploads" / "alice" / "linked.bin").symlink_to(big)  # counts as the link, not the million bytes
    return Settings(home=home, models_dir=home / "models")


def _expected(home: Path) -> dict[str, int]:
    expected = dict.fromkeys(HOME_PARTS, 0)
    for part, size in FILES.values():
        expected[part] += size
    expected["registry"] += (home / "index" / "registry.sqlite3").stat().st_size
    expected["uploads"] += (home / "uploads" / "alice" / "linked.bin").lstat().st_size
    return expected


def test_home_usage_counts_every_part_and_follows_no_link(tmp_path):
    settings = _small_home(tmp_path)
    usage = home_usage(settings)
    expected = _expected(settings.home)
    assert usage is not None and usage.parts == expected
    assert usage.total == sum(expected.values()) < 1_000_000 + 3_300_000  # the linked million is not in it
    assert list(usage.parts) == list(HOME_PARTS)


def test_parts_moved_out_of_the_home_are_not_the_homes(tmp_path):
    settings = _small_home(tmp_path)
    moved = settings.model_copy(update={"models_dir": tmp_path / "cache", "uploads_dir": tmp_path / "uploads"})
    usage = home_usage(moved)
    expected = _expected(settings.home)
    # home/uploads is now just a folder in the home: counted, as "other", never as the uploads. home/models is
    # still the models: where every home kept them before they moved to the machine's cache.
    assert usage.parts["uploads"] == 0 and usage.parts["models"] == expected["models"]
    assert usage.parts["other"] == expected["other"] + expected["uploads"]


def test_no_home_no_usage_and_nothing_created(tmp_path):
    assert home_usage(Settings(home=tmp_path / "nowhere")) is None
    assert not (tmp_path / "nowhere").exists()


def test_doctor_shows_the_parts_and_their_sizes(tmp_path, monkeypatch):
    settings = _small_home(tmp_path)
    monkeypatch.setenv("CITEWISE_MODELS_DIR", str(settings.home / "models"))
    home = str(settings.home)
    expected = _expected(settings.home)

    as_json = runner.invoke(app, ["doctor", "--home", home, "--json"])
    assert as_json.exit_code == 0, as_json.output
    report = json.loads(as_json.stdout)
    assert report["problems"] == []
    assert report["home_usage"] == {
        "home": os.path.abspath(home),
        "parts": expected,
        "total": sum(expected.values()),
    }

    text = runner.invoke(app, ["doctor", "--home", home], terminal_width=200)
    assert text.exit_code == 0, text.output
    assert "No problems found" in text.stdout
    lines = {line.strip("│ ").split("│")[0].strip(): line for line in text.stdout.splitlines() if "│" in line}
    for part, label in HOME_PARTS.items():
        assert human_bytes(expected[part]) in lines[label], (label, lines.get(label))
    assert human_bytes(sum(expected.values())) in lines["total"]
    assert "2.9 MB" in lines["LLM cache"] and "53.0 KB" in lines["conversation sessions"]


def test_doctor_on_a_missing_home_reports_no_usage(tmp_path):
    result = runner.invoke(app, ["doctor", "--home", str(tmp_path / "nowhere"), "--json"])
    assert result.exit_code == 0
    assert json.loads(result.stdout)["home_usage"] is None
    assert not (tmp_path / "nowhere").exists()


def test_human_bytes():
    assert [human_bytes(n) for n in (0, 1023, 1536, 5 * 1048576, 3 * 1024**3, 2 * 1024**4)] == [
        "0 B",
        "1023 B",
        "1.5 KB",
        "5.0 MB",
        "3.0 GB",
        "2.0 TB",
    ]
