"""The agent's shape is a snapshot: a change to the graph shows up as a diff of its Mermaid drawing.

To accept an intended change: CITEWISE_UPDATE_SNAPSHOTS=1 pytest tests/agent/test_graph.py
"""

from __future__ import annotations

import itertools
import os
from pathlib import Path

from citewise.agent.graph import mermaid

SNAPSHOT = Path(__file__).parent / "snapshots" / "graph.mmd"


def test_graph_matches_its_mermaid_snapshot(make_agent):
    drawing = mermaid(make_agent().nodes)
    if os.environ.get("CITEWISE_UPDATE_SNAPSHOTS"):
        SNAPSHOT.write_text(drawing)
    assert drawing == SNAPSHOT.read_text()


def test_graph_has_the_documented_nodes_and_early_exits(make_agent):
    graph = make_agent().graph.get_graph()
    assert set(graph.nodes) == {"__start__", "guard", "analyze", "retrieve", "llm", "tools", "validate", "ground",
                                "__end__"}  # fmt: skip
    edges = {(e.source, e.target) for e in graph.edges}
    path = ["__start__", "guard", "analyze", "retrieve", "llm", "tools", "llm", "validate", "ground", "__end__"]
    assert set(itertools.pairwise(path)) <= edges
    for node in ("guard", "analyze", "retrieve", "llm", "tools", "validate"):
        assert (node, "__end__") in edges, f"{node} has no early exit"
    assert ("validate", "llm") in edges  # reprompt
    assert ("llm", "llm") in edges  # a queued reprompt (unparseable action, empty reply)
