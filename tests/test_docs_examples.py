"""Docs can't rot silently: every code example in README.md and docs/ runs, like FastAPI's docs_src.

1. Every `citewise …` command shown anywhere (code blocks of any language) must parse against the real CLI. Usage
   synopses (lines with `[...]` or `PATH...`) are skipped; concrete examples are parsed with Click, which fails on
   an unknown command, an unknown option or a bad choice/type, exactly as a user typing them would see.
2. Every Python and shell example runs, in order, in one sandbox laid out as the docs assume (a docs/ folder, the
   files the examples name, a home with docs/ ingested): Python blocks are executed (the blocks of one page share
   their names, as in a doctest, and top-level `await` works), shell blocks line by line in bash with the exports
   they make, each line expected to exit 0. An example that can't run here (it installs packages, needs a vendor
   key or a running server, starts a server) says so right above its fence, `<!-- not run: why -->`; the test
   checks that the reason is there.
"""

from __future__ import annotations

import ast
import asyncio
import inspect
import os
import re
import shlex
import shutil
import subprocess
import sys
from dataclasses import dataclass, field
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


# ---------------------------------------------------------------------------------------------------------------
# 2. Python and shell examples run
# ---------------------------------------------------------------------------------------------------------------

RUNNABLE_LANGS = {"python", "bash", "sh", "shell", "console"}
_FENCE = re.compile(r"^(?P<indent>\s*)```(?P<lang>[\w-]*)\s*$")
_MARKER = re.compile(r"^\s*<!-- not run: (?P<reason>.*?) -->\s*$")
FIXTURES = ROOT / "tests" / "fixtures"


@dataclass(frozen=True)
class Example:
    page: str
    line: int
    lang: str
    code: str
    not_run: str | None  # the reason given, when the example is marked as not run

    @property
    def id(self) -> str:
        return f"{self.page}:{self.line}"


def _code_examples() -> list[Example]:
    found = []
    for page in PAGES:
        lines = page.read_text(encoding="utf-8").splitlines()
        i = 0
        while i < len(lines):
            fence = _FENCE.match(lines[i])
            if not fence:
                i += 1
                continue
            end = next(j for j in range(i + 1, len(lines)) if lines[j].strip().startswith("```"))
            if fence["lang"] in RUNNABLE_LANGS:
                indent = len(fence["indent"])
                code = "\n".join(line[indent:] if line[:indent].isspace() else line for line in lines[i + 1 : end])
                marker = _MARKER.match(lines[i - 1]) if i else None
                found.append(
                    Example(page.name, i + 1, fence["lang"], code + "\n", marker["reason"].strip() if marker else None)
                )
            i = end + 1
    return found


CODE_EXAMPLES = _code_examples()
RUN = [e for e in CODE_EXAMPLES if e.not_run is None]


def test_every_example_runs_or_says_why_not():
    assert len(RUN) >= 40, "most examples run"
    for example in CODE_EXAMPLES:
        if example.not_run is not None:
            assert len(example.not_run) >= 12, f"{example.id}: say why the example can't run here"
    anywhere = re.compile(_MARKER.pattern, re.M)
    markers = sum(len(anywhere.findall(page.read_text(encoding="utf-8"))) for page in PAGES)
    marked = sum(e.not_run is not None for e in CODE_EXAMPLES)
    assert markers == marked, "a `not run` marker must stand right above the fence of a Python or shell example"


@dataclass
class Sandbox:
    root: Path
    env: dict[str, str]
    ran: set[tuple] = field(default_factory=set)  # (exports, line) already run: the same line runs once
    namespaces: dict[str, dict] = field(default_factory=dict)  # page → the names its Python blocks share


@pytest.fixture(scope="module")
def sandbox(tmp_path_factory, embedder) -> Sandbox:
    """A working directory laid out as the docs assume, with docs/ already ingested into ./.citewise."""
    from citewise.index.knowledge_base import KnowledgeBase
    from citewise.ingest.pipeline import Ingestor
    from citewise.settings import Settings

    root = tmp_path_factory.mktemp("docs-examples")
    corpus = FIXTURES / "corpus"
    shutil.copytree(corpus, root / "docs")
    shutil.copy(ROOT / "docs" / "questions.jsonl", root / "docs" / "questions.jsonl")
    shutil.copytree(corpus / "guide", root / "my-docs")
    for product in ("product-a", "product-b"):
        shutil.copytree(corpus / "guide", root / product / "docs")
    shutil.copytree(FIXTURES / "agent_corpus" / "alice", root / "team-notes")
    shutil.copytree(FIXTURES / "agent_corpus" / "alice", root / ".citewise" / "uploads" / "alice")
    shutil.copytree(FIXTURES / "beir_tiny", root / "data" / "my-beir-set")
    shutil.copy(ROOT / "README.md", root / "README.md")
    shutil.copy(corpus / "reference" / "manual.pdf", root / "handbook.pdf")
    for name in ("my-questions.jsonl", "faq.jsonl"):
        shutil.copy(FIXTURES / "eval" / "small.jsonl", root / name)
    shutil.copy(FIXTURES / "eval" / "squad2_tiny.json", root / "dev-v2.0.json")
    shutil.copy(FIXTURES / "eval" / "rgb_tiny.jsonl", root / "en_refine.json")
    (root / "notes.txt").write_text("Owners see their own documents and the public ones.\n\nNobody else does.\n")
    (root / "contract.txt").write_text("Refunds are accepted within 30 days of purchase.\n")
    (root / "home").mkdir()
    (root / ".venv").symlink_to(Path(sys.executable).parent.parent)  # `.venv/bin/citewise` as README writes it
    Ingestor(KnowledgeBase(Settings(home=root / ".citewise"), embedder=embedder)).ingest_paths([root / "docs"])

    env = {k: v for k, v in os.environ.items() if not k.startswith("CITEWISE_")}
    env["CITEWISE_MODELS_DIR"] = os.environ["CITEWISE_MODELS_DIR"]  # the exported model every test shares
    env["HOME"] = str(root / "home")
    env["PATH"] = f"{Path(sys.executable).parent}{os.pathsep}{env.get('PATH', '')}"
    env["HF_HUB_OFFLINE"] = "1"
    return Sandbox(root, env)


def _shell_lines(code: str) -> list[str]:
    joined = re.sub(r"\\\n\s*", " ", code)
    return [line.strip() for line in joined.splitlines() if line.strip() and not line.strip().startswith("#")]


_EXPORT = re.compile(r"^export\s+(?P<name>\w+)=(?P<value>.*)$")


def _run_shell(example: Example, sandbox: Sandbox, monkeypatch) -> None:
    env = dict(sandbox.env)
    exports: dict[str, str] = {}
    commands = 0
    for line in _shell_lines(example.code):
        export = _EXPORT.match(line)
        if export:
            value = shlex.split(export["value"], comments=True)
            exports[export["name"]] = os.path.expandvars(value[0] if value else "").replace("$HOME", env["HOME"])
            env[export["name"]] = exports[export["name"]]
            continue
        commands += 1
        key = (tuple(sorted(exports.items())), line)
        if key in sandbox.ran:
            continue
        done = subprocess.run(
            ["bash", "-c", line],
            cwd=sandbox.root,
            env=env,
            stdin=subprocess.DEVNULL,
            capture_output=True,
            text=True,
            timeout=600,
        )
        assert done.returncode == 0, f"{example.id}: `{line}` exited {done.returncode}\n{done.stderr[-3000:]}"
        sandbox.ran.add(key)
    if not commands:  # a block of settings only: Settings must take every one of them
        from citewise.settings import Settings

        for name, value in exports.items():
            monkeypatch.setenv(name, value)
        Settings(home=sandbox.root / ".citewise")


def _run_python(example: Example, sandbox: Sandbox, monkeypatch) -> None:
    monkeypatch.chdir(sandbox.root)
    namespace = sandbox.namespaces.setdefault(example.page, {"__name__": "__docs__"})
    code = compile(example.code, example.id, "exec", flags=ast.PyCF_ALLOW_TOP_LEVEL_AWAIT)
    result = eval(code, namespace)
    if inspect.iscoroutine(result):  # top-level `await` / `async for`: run it as a notebook would
        asyncio.run(result)


@pytest.mark.slow
@pytest.mark.parametrize("example", RUN, ids=[e.id for e in RUN])
def test_documented_example_runs(example, sandbox, monkeypatch):
    if example.lang == "python":
        _run_python(example, sandbox, monkeypatch)
    else:
        _run_shell(example, sandbox, monkeypatch)
