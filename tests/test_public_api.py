import subprocess
import sys

import citewise


def test_public_surface_is_small_and_deliberate():
    assert sorted(citewise.__all__) == [
        "Answer",
        "Chunk",
        "Citewise",
        "DocStatus",
        "ExitReason",
        "RetrievalMode",
        "ScoredChunk",
        "SearchResult",
        "Settings",
    ]
    for name in citewise.__all__:
        assert getattr(citewise, name) is not None


def test_citewise_is_exported_lazily():
    """`import citewise` imports no agent machinery; `citewise.Citewise` loads the agent on first use, and still not
    LangGraph's graph (a second of imports): only a streamed or checkpointed run needs it."""
    code = (
        "import sys, citewise; assert 'langchain_core' not in sys.modules, 'eager'; "
        "from citewise import Citewise; assert 'langgraph.graph' not in sys.modules, 'graph'; print(Citewise.__name__)"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "Citewise"


def test_importing_citewise_loads_none_of_its_names():
    """`import citewise` runs before every `import citewise.<module>` (the CLI's `--help` too): the names it exports
    load on first use, so it imports neither pydantic nor the types, and they are the types' own objects."""
    code = (
        "import sys, citewise; assert 'pydantic' not in sys.modules and 'citewise.types' not in sys.modules, 'eager'; "
        "from citewise import Answer, Chunk; import citewise.types as types; "
        "assert Answer is types.Answer and citewise.Chunk is types.Chunk; "
        "assert set(citewise.__all__) <= set(dir(citewise)); print('ok')"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "ok"
