"""The index: embeddings, the vector store (LanceDB), the registry, and retrieval over them.

LanceDB's REST namespace client is registered with its package `__init__` deferred before anything here imports
LanceDB: a local index never uses it, and it is a second of every cold start of a writer (see deferred.py; readers
do not import LanceDB at all).
"""

from citewise.index.deferred import REST_CLIENT, defer_package_init

defer_package_init(REST_CLIENT)
