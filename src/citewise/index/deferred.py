"""Importing LanceDB without paying for its REST namespace client.

`import lancedb` imports `lance_namespace`, which imports models from `lance_namespace_urllib3_client`, a client
generated from the Lance REST namespace's OpenAPI spec. That package's `__init__` imports its whole REST API
surface (every API class, the urllib3 configuration, the API client): about a second of every cold start that
imports LanceDB (the writers: searches read through `lance`, see lancedb_store.py), for a client that talks to a
LanceDB server, which a home on disk never does. LanceDB's local connection uses the
models only, and those are separate modules.

`defer_package_init(name)` registers the package without running its `__init__`: its submodules import from the
real files as usual, and the first lookup of any name on the package itself runs the real `__init__` then, so
whoever does want the REST client (`from lance_namespace_urllib3_client import ApiClient`) gets exactly the
published package. Nothing is replaced or patched; the package's own code runs, later or never. A package already
imported, or one that is not installed, is left alone. tests/index/test_deferred_import.py checks both paths.
"""

from __future__ import annotations

import importlib.util
import sys
from typing import Any

REST_CLIENT = "lance_namespace_urllib3_client"


def defer_package_init(name: str) -> bool:
    """Register package `name` with its `__init__` not run yet; True when it was deferred."""
    if name in sys.modules:
        return False
    spec = importlib.util.find_spec(name)
    if spec is None or spec.loader is None or spec.submodule_search_locations is None:
        return False
    package = importlib.util.module_from_spec(spec)  # __path__, __spec__, __file__ set; no code run

    def __getattr__(attribute: str) -> Any:
        # The first name asked of the package itself: run its real __init__ now, then answer from it.
        del package.__dict__["__getattr__"]
        spec.loader.exec_module(package)
        return getattr(package, attribute)

    package.__getattr__ = __getattr__  # type: ignore[method-assign]
    sys.modules[name] = package
    return True
