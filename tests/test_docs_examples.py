"""Docs can't rot silently: every `citewise …` command shown in README.md and docs/ must parse against the real CLI.

Usage synopses (lines with `[...]` or `PATH...`) are skipped; concrete examples are parsed with Click, which fails
on an unknown command, an unknown option or a bad choice/type, exactly as a user typing them would see.
"""

from __future__ import annotations

import re
import shlex
from pathlib import Path

import pytest
import typer

from citewise.cli import app

ROOT = Path(__file__).parents[1]
PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]


def _examples() -> list[tuple[str, str]]:
    found = []
    for page in PAGES:
        in_fence = False
        pending = ""
        for line in page.read_text().splitlines():
            if line.lstrip().startswith("```"):
                in_fence = not in_fence
                continue
            if not in_fence:
                continue
            text = pending + line.strip()
            if text.endswith("\\"):
                pending = text[:-1] + " "
                continue
            pending = ""
            text = re.sub(r"^(\.venv/bin/)", "", text)
            if not text.startswith("citewise ") or "[" in text or "..." in text:
                continue
            command = text.split("|")[0].split("#")[0].strip()
            found.append((page.name, command))
    return found


EXAMPLES = _examples()


def test_the_docs_show_examples():
    assert len(EXAMPLES) >= 20


def _parse(command: str) -> None:
    """Parse like a shell user's invocation would be parsed; raises Click's UsageError on anything unknown."""
    args = shlex.split(command)[1:]
    cmd = typer.main.get_command(app)  # Typer vendors Click, so duck-type groups instead of isinstance checks
    while hasattr(cmd, "get_command") and args and not args[0].startswith("-"):
        name = args.pop(0)
        sub = cmd.get_command(cmd.make_context(cmd.name, [name], resilient_parsing=True), name)
        if sub is None:
            raise LookupError(f"unknown command {name!r}")
        cmd = sub
    if args and args[0] in ("--help", "--version"):
        return
    cmd.make_context(cmd.name, args, resilient_parsing=False)


@pytest.mark.parametrize(
    "command",
    ["citewise serach x", "citewise search x --bogus", "citewise search x --mode semantic", "citewise docs lst"],
)
def test_the_check_catches_mistakes(command):
    with pytest.raises(Exception, match=r"(?i)no such|unknown|invalid|not one of"):
        _parse(command)


@pytest.mark.parametrize(("page", "command"), EXAMPLES, ids=[f"{p}:{c}" for p, c in EXAMPLES])
def test_documented_command_parses(page, command):
    _parse(command)
