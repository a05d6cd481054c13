"""Imports point one way: down the layers ARCHITECTURE.md draws, never back up.

The allowed graph is read from ARCHITECTURE.md itself (the "may import" block), so the drawing and the rule cannot
drift apart. Every import counts: module level, inside functions (a lazy import still is an arrow) and under
`TYPE_CHECKING`. Vendor SDKs are imported only where STYLE.md says (llm/ and index/embeddings.py).
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

ROOT = Path(__file__).parents[1]
SRC = ROOT / "src" / "citewise"
ARCHITECTURE = ROOT / "ARCHITECTURE.md"

# Vendor integrations: model SDKs, their LangChain adapters and the local model runtimes. (LangChain's core and
# LangGraph are the agent's framework, not vendors.)
VENDORS = frozenset(
    {
        "anthropic",
        "cohere",
        "google",
        "langchain",
        "langchain_anthropic",
        "langchain_community",
        "langchain_google_genai",
        "langchain_mistralai",
        "langchain_ollama",
        "langchain_openai",
        "llama_cpp",
        "mistralai",
        "ollama",
        "openai",
        "sentence_transformers",
        "torch",
        "transformers",
        "voyageai",
    }
)
VENDOR_SITES = ("llm/", "index/embeddings.py", "index/export.py")
# Storage engines are the index's own business: everyone else sees the VectorStore protocol and the KnowledgeBase.
ENGINES = ("citewise.index.lancedb_store",)
# ...and of `citewise migrate`, which reads one engine and writes the other.
ENGINE_USERS = ("index", "migrate")


def _allowed() -> dict[str, set[str]]:
    """{layer: the layers it may import} from ARCHITECTURE.md's block between the two marker lines."""
    text = ARCHITECTURE.read_text(encoding="utf-8")
    block = re.search(r"<!-- layers -->\s*```[^\n]*\n(.*?)```", text, re.S)
    assert block, "ARCHITECTURE.md lost its <!-- layers --> block"
    allowed: dict[str, set[str]] = {}
    for line in block.group(1).splitlines():
        if "may import" not in line:
            continue
        layer, _, targets = line.partition("may import")
        names = {t.strip(" ,.") for t in targets.replace(",", " ").split()} - {"nothing", "and", ""}
        allowed[layer.strip()] = names
    return allowed


ALLOWED = _allowed()


def layer_of(module: str) -> str:
    """`citewise.agent.nodes` → "agent"; `citewise.types` → "types"; `citewise` (the package's front door) → ""."""
    parts = module.split(".")
    return parts[1] if len(parts) > 1 else ""


def _module_name(path: Path) -> str:
    rel = path.relative_to(SRC.parent).with_suffix("")
    parts = list(rel.parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def _imports(path: Path) -> list[tuple[int, str]]:
    """(line, absolute module) of every import in the file, wherever it stands."""
    tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
    package = _module_name(path) if path.name == "__init__.py" else _module_name(path).rpartition(".")[0]
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found += [(node.lineno, alias.name) for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            if node.level:  # relative: resolve against the importing package
                base = package.split(".")
                base = base[: len(base) - (node.level - 1)]
                target = ".".join([*base, node.module] if node.module else base)
            else:
                target = node.module or ""
            found.append((node.lineno, target))
            # `from citewise import quote` imports the subpackage: count it as such (`__version__` is no module).
            if target == "citewise":
                found += [
                    (node.lineno, f"citewise.{alias.name}")
                    for alias in node.names
                    if (SRC / alias.name).is_dir() or (SRC / f"{alias.name}.py").is_file()
                ]
    return found


def _sources() -> list[Path]:
    return sorted(SRC.rglob("*.py"))


def violations() -> list[str]:
    found = []
    for path in _sources():
        importer = _module_name(path)
        layer = layer_of(importer)
        rel = path.relative_to(SRC).as_posix()
        for line, target in _imports(path):
            top = target.split(".")[0]
            if top in VENDORS and not rel.startswith(VENDOR_SITES):
                found.append(f"{rel}:{line} imports the vendor package {target}")
            if target.startswith(ENGINES) and layer not in ENGINE_USERS:
                found.append(f"{rel}:{line} imports the storage engine {target} (use the VectorStore protocol)")
            if top != "citewise" or target == "citewise" or not layer:
                continue
            other = layer_of(target)
            if other == layer:
                continue
            if other not in ALLOWED.get(layer, set()):
                found.append(f"{rel}:{line} {layer} → {other} ({target})")
    return found


def test_every_layer_is_drawn():
    packages = {layer_of(_module_name(p)) for p in _sources()} - {""}
    assert packages == set(ALLOWED), "ARCHITECTURE.md's layers block must name every module and package once"


def test_the_layers_form_no_cycle():
    seen: dict[str, int] = {}

    def depth(layer: str, path: tuple[str, ...] = ()) -> int:
        assert layer not in path, f"cycle: {' → '.join([*path, layer])}"
        if layer not in seen:
            seen[layer] = 1 + max((depth(t, (*path, layer)) for t in ALLOWED[layer]), default=0)
        return seen[layer]

    for layer in ALLOWED:
        depth(layer)


def test_imports_point_down_the_layers():
    assert violations() == []


@pytest.mark.parametrize(
    ("rel", "source", "expected"),
    [
        ("index/x.py", "from citewise.ingest.pipeline import make_chunks\n", "index → ingest"),
        ("agent/x.py", "def f():\n    from citewise.eval.gaps import log_question\n", "agent → eval"),
        ("server/x.py", "from citewise.llm import models\n", "server → llm"),
        ("quote/x.py", "from ..index import store\n", "quote → index"),
        ("server/x.py", "import openai\n", "vendor package openai"),
        ("ingest/x.py", "from citewise.index.lancedb_store import search_text\n", "storage engine"),
    ],
)
def test_the_check_catches_an_arrow_running_back_up(tmp_path, monkeypatch, rel, source, expected):
    fake = tmp_path / "citewise"
    target = fake / rel
    target.parent.mkdir(parents=True)
    (fake / "__init__.py").write_text("")
    (target.parent / "__init__.py").write_text("")
    target.write_text(source)
    monkeypatch.setattr(__import__(__name__, fromlist=["SRC"]), "SRC", fake)
    assert any(expected in v for v in violations())
