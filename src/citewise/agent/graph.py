"""The agent as an explicit LangGraph `StateGraph`, built by hand so its shape is visible and snapshot-tested.

    guard → analyze → retrieve → llm ⇄ tools → validate → ground → END

Each conditional edge lists every node it can lead to (END included), so the Mermaid drawing shows the early
exits too; tests/agent/snapshots/graph.mmd holds the drawing and a change of shape shows up as a diff.
"""

from __future__ import annotations

from typing import Any

from langgraph.checkpoint.base import BaseCheckpointSaver
from langgraph.graph import END, START, StateGraph

from citewise.agent import nodes as n
from citewise.agent.state import AgentState

GRAPH_NAME = "citewise"


def build_graph(agent: n.AgentNodes, *, checkpointer: BaseCheckpointSaver | None = None) -> Any:
    graph = StateGraph(AgentState)
    for name in ("guard", "analyze", "retrieve", "llm", "tools", "validate", "ground"):
        graph.add_node(name, agent.traced(name, getattr(agent, name)))
    graph.add_edge(START, "guard")
    graph.add_conditional_edges("guard", n.after_guard, {"analyze": "analyze", END: END})
    graph.add_conditional_edges("analyze", n.after_analyze, {"retrieve": "retrieve", END: END})
    graph.add_conditional_edges("retrieve", n.after_retrieve, {"llm": "llm", END: END})
    graph.add_conditional_edges("llm", n.after_llm, {"tools": "tools", "validate": "validate", "llm": "llm", END: END})
    graph.add_conditional_edges("tools", n.after_tools, {"llm": "llm", END: END})
    graph.add_conditional_edges("validate", n.after_validate, {"ground": "ground", "llm": "llm", END: END})
    graph.add_edge("ground", END)
    return graph.compile(checkpointer=checkpointer, name=GRAPH_NAME)


def mermaid(agent: n.AgentNodes) -> str:
    """The graph's Mermaid drawing (what the snapshot test compares)."""
    return build_graph(agent).get_graph().draw_mermaid()
