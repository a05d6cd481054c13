"""The agent's flow as data: its nodes in order, and after each node the routing function that names the next one
(with every node it may name, END included). `graph.py` builds the LangGraph `StateGraph` from this table, and
`run_inline` runs the same nodes with the same routing functions in-process — what a run needs when nothing is
streamed and no checkpointer keeps the session (quote mode's `ask`): no graph machinery is imported for it.

    guard → analyze → retrieve → llm ⇄ tools → validate → ground → END   (any node may end the run early)

A node that ends the run sets `answer`; every routing function sends such a run to END.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping
from typing import Any

from citewise.agent.messages import tool_calls
from citewise.agent.state import KEPT, STATE_KEYS, AgentState

GRAPH_NAME = "citewise"  # the graph's run name: the root run of its streamed events
END = "__end__"  # LangGraph's END
FIRST = "guard"
ANSWER_NODE = "llm"  # the node whose model calls write the answer (a stream's tokens come from it)


def _ended(state: AgentState) -> bool:
    return state.get("answer") is not None


def after_guard(state: AgentState) -> str:
    return END if _ended(state) else "analyze"


def after_analyze(state: AgentState) -> str:
    return END if _ended(state) else "retrieve"


def after_retrieve(state: AgentState) -> str:
    return END if _ended(state) else "llm"


def after_llm(state: AgentState) -> str:
    if _ended(state):
        return END
    if state.get("draft") is not None:
        return "validate"
    scratch = state.get("scratch") or []
    if scratch and tool_calls(scratch[-1]):
        return "tools"
    return "llm"  # a reprompt (unparseable action, empty reply) was queued


def after_tools(state: AgentState) -> str:
    return END if _ended(state) else "llm"


def after_validate(state: AgentState) -> str:
    if _ended(state):
        return END
    return "ground" if state.get("draft") is not None else "llm"


Router = Callable[[AgentState], str]

# node → (its routing function, every node it may route to); None: always END.
ROUTES: dict[str, tuple[Router, tuple[str, ...]] | None] = {
    "guard": (after_guard, ("analyze", END)),
    "analyze": (after_analyze, ("retrieve", END)),
    "retrieve": (after_retrieve, ("llm", END)),
    "llm": (after_llm, ("tools", "validate", "llm", END)),
    "tools": (after_tools, ("llm", END)),
    "validate": (after_validate, ("ground", "llm", END)),
    "ground": None,
}
NODES = tuple(ROUTES)

Node = Callable[[AgentState, Any], Awaitable[dict[str, Any]]]


class RunawayRun(RuntimeError):
    """A run took more steps than its limits allow: a bug, never an answer (LangGraph's GraphRecursionError)."""


async def run_inline(nodes: Mapping[str, Node], state: dict[str, Any], *, max_steps: int) -> dict[str, Any]:
    """Run the flow in-process from `state` to END and return the final state: each node's update is applied as
    LangGraph applies it (`messages` appended, every other key replaced)."""
    state = dict(state)
    node = FIRST
    for _ in range(max_steps):
        update = await nodes[node](state, {})  # type: ignore[arg-type]
        unknown = set(update) - STATE_KEYS
        if unknown:  # pragma: no cover - LangGraph would refuse the update too
            raise KeyError(f"node {node!r} wrote keys the state does not have: {sorted(unknown)}")
        for key, value in update.items():
            state[key] = [*(state.get(key) or []), *value] if key in KEPT else value
        route = ROUTES[node]
        node = route[0](state) if route else END  # type: ignore[arg-type]
        if node == END:
            return state
    raise RunawayRun(f"the run did not end within {max_steps} steps")
