"""The agent as an explicit LangGraph `StateGraph`, built from the flow table (flow.py) so its shape is visible and
snapshot-tested.

    guard → analyze → retrieve → llm ⇄ tools → validate → ground → END

Each conditional edge lists every node it can lead to (END included), so the Mermaid drawing shows the early
exits too; tests/agent/snapshots/graph.mmd holds the drawing and a change of shape shows up as a diff.
"""

from __future__ import annotations

from typing import Any

from langgraph.checkpoint.base import BaseCheckpointSaver
from langgraph.graph import END, START, StateGraph

from citewise.agent import flow
from citewise.agent.nodes import AgentNodes
from citewise.agent.state import AgentState

assert flow.END == END


def build_graph(agent: AgentNodes, *, checkpointer: BaseCheckpointSaver | None = None) -> Any:
    graph = StateGraph(AgentState)
    for name in flow.NODES:
        graph.add_node(name, agent.traced(name, agent.node(name)))
    graph.add_edge(START, flow.FIRST)
    for name, route in flow.ROUTES.items():
        if route is None:
            graph.add_edge(name, END)
        else:
            router, targets = route
            graph.add_conditional_edges(name, router, {t: t for t in targets})
    return graph.compile(checkpointer=checkpointer, name=flow.GRAPH_NAME)


def mermaid(agent: AgentNodes) -> str:
    """The graph's Mermaid drawing (what the snapshot test compares)."""
    return build_graph(agent).get_graph().draw_mermaid()
