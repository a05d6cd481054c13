"""LanceDB is imported without running its REST client package's __init__, and the package stays whole for anyone
who asks for it (citewise/index/deferred.py)."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap

from citewise.index.deferred import defer_package_init


def _run(code: str) -> dict:
    done = subprocess.run([sys.executable, "-c", textwrap.dedent(code)], capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout.strip().splitlines()[-1])


def test_a_local_index_works_without_the_rest_client(tmp_path):
    result = _run(
        f"""
        import json, sys
        import numpy as np
        from citewise.index.lancedb_store import LanceStore
        from citewise.types import Chunk

        store = LanceStore({str(tmp_path / "db")!r})
        chunk = Chunk(chunk_id="c1", doc_id="d1", chunk_index=0, text="The harbour opens at dawn.", filename="a.md")
        store.replace_documents(["d1"], [chunk], np.ones((1, 4), dtype=np.float32) / 2)
        store.optimize()
        hits = [h.chunk_id for h in store.lexical("harbour", 5, None)]
        dense = [h.chunk_id for h in store.dense(np.ones(4, dtype=np.float32) / 2, 5, None)]
        rest = sorted(m for m in sys.modules if m.startswith("lance_namespace_urllib3_client.api"))
        print(json.dumps({{"lexical": hits, "dense": dense, "rest": rest}}))
        """
    )
    assert result == {"lexical": ["c1"], "dense": ["c1"], "rest": []}


def test_the_deferred_package_is_the_published_one_when_asked_for():
    result = _run(
        """
        import json, sys
        import citewise.index.lancedb_store  # defers the package, imports lancedb
        import lance_namespace_urllib3_client as client
        from lance_namespace_urllib3_client import ApiClient  # a name of the package itself: its __init__ runs now

        print(json.dumps({
            "class": f"{ApiClient.__module__}.{ApiClient.__name__}",
            "version": client.__version__,
            "apis": "lance_namespace_urllib3_client.api.table_api" in sys.modules,
        }))
        """
    )
    assert result["class"] == "lance_namespace_urllib3_client.api_client.ApiClient"
    assert result["version"] and result["apis"]


def test_an_imported_or_missing_package_is_left_alone():
    assert defer_package_init("json") is False  # already imported
    assert defer_package_init("no_such_package_anywhere") is False
    assert defer_package_init("citewise.text") is False  # imported, and a module, not a package
