"""The agent's model paths: fallback, the reply cache, the JSON action protocol, streaming and sessions."""

from __future__ import annotations

import asyncio

from agent_support import PLAN, WORKER_ANSWER, WORKER_QUESTION, call, scripted
from langchain_core.messages import AIMessage, HumanMessage
from langgraph.checkpoint.memory import InMemorySaver

from citewise.llm.cache import SQLiteLLMCache
from citewise.llm.testing import ScriptedChatModel
from citewise.types import ExitReason, Status


class HTTPError(Exception):
    def __init__(self, status_code: int, message: str) -> None:
        super().__init__(message)
        self.status_code = status_code


def _events(agent, question, **options) -> list[dict]:
    async def collect():
        return [e async for e in agent.astream_events(question, **options)]

    return asyncio.run(collect())


def _tokens(events) -> str:
    return "".join(e["data"]["chunk"].content for e in events if e["event"] == "on_chat_model_stream")


def test_fallback_answers_when_the_primary_is_rate_limited(make_agent):
    primary = ScriptedChatModel([HTTPError(429, "quota exceeded")] * 2, model_name="primary")
    secondary = ScriptedChatModel([PLAN, WORKER_ANSWER], model_name="secondary")
    answer = make_agent(primary, fallbacks=[secondary], generation={"llm_retries": 0}).ask(WORKER_QUESTION)
    assert answer.exit_reason == ExitReason.COMPLETED and answer.status == Status.SUCCESS
    assert answer.mode == "scripted:secondary"
    assert "quota" not in answer.answer  # silent to the user ...
    fallback = [e for e in answer.trace if e.type == "fallback"]
    assert fallback and fallback[0].data["answered_by"] == "scripted:secondary"  # ... but on the record
    assert len(primary.calls) == 2 and secondary.remaining == 0


def test_all_models_rate_limited_is_rate_limited(make_agent):
    primary = ScriptedChatModel([HTTPError(429, "quota exceeded")] * 2, model_name="primary")
    secondary = ScriptedChatModel([HTTPError(429, "slow down")] * 2, model_name="secondary")
    answer = make_agent(primary, fallbacks=[secondary], generation={"llm_retries": 1}).ask(WORKER_QUESTION)
    assert answer.exit_reason == ExitReason.RATE_LIMITED and answer.retryable
    assert len(primary.calls) == 2 and len(secondary.calls) == 2  # 1 try + 1 retry each, for the plan


def test_tokens_stream_and_tools_show_up_as_events(make_agent):
    model = scripted(call("search_docs", query="worker threads"), WORKER_ANSWER)
    events = _events(make_agent(model), WORKER_QUESTION)
    final = events[-1]
    assert final["event"] == "on_chain_end" and final["data"]["output"]["answer"].status == Status.SUCCESS
    streamed = [e for e in events if e["event"] == "on_chat_model_stream"]
    assert len(streamed) > 3  # word-sized chunks, not one blob
    assert all(e["metadata"]["langgraph_node"] == "llm" for e in streamed)  # the planner's tokens are dropped
    assert _tokens(events) == WORKER_ANSWER
    tool_starts = [e["name"] for e in events if e["event"] == "on_tool_start"]
    assert tool_starts == ["search_docs", "search_docs"]  # the mandatory search, then the model's


def test_cache_hit_emits_no_token_events(make_agent, tmp_path):
    cache = SQLiteLLMCache(tmp_path / "llm_cache.sqlite3", namespace="scripted")
    model = ScriptedChatModel([PLAN, call("search_docs", query="worker threads"), WORKER_ANSWER], cache=cache)
    agent = make_agent(model)

    first = _events(agent, WORKER_QUESTION)
    assert _tokens(first) == WORKER_ANSWER
    assert first[-1]["data"]["output"]["answer"].cached is False
    assert model.remaining == 0

    # Same question again: every reply comes from the cache (the script is used up, so a real call would fail).
    second = _events(agent, WORKER_QUESTION)
    assert not [e for e in second if e["event"] == "on_chat_model_stream"]
    again = second[-1]["data"]["output"]["answer"]
    assert again.cached is True
    assert again.answer == first[-1]["data"]["output"]["answer"].answer


def test_protocol_model_drives_the_loop_with_json_actions(make_agent):
    model = scripted(
        'I will search first. {"type": "tool_call", "tool": "search_docs", "input": {"query": "worker threads"}}',
        '```json\n{"type": "final", "answer": "' + WORKER_ANSWER.replace("`", "`") + '", "used_citations": [1], '
        '"insufficiencies": ["The docs give no upper limit."]}\n```',
        supports_tools=False,
    )
    answer = make_agent(model).ask(WORKER_QUESTION)
    assert answer.exit_reason == ExitReason.COMPLETED and answer.status == Status.SUCCESS
    assert answer.citations and "twelve threads" in answer.answer
    assert answer.insufficiencies == ["The docs give no upper limit."]
    assert model.bound_tools is None  # no native tool binding
    system = model.calls[1][0].content
    assert '"type"' in system and "search_docs" in system  # protocol instructions in the system prompt
    # Tool results reach a protocol model as plain text, never as tool messages its template may not know.
    assert all(m.type in ("system", "human", "ai") for m in model.calls[-1])
    assert any("DOCUMENTATION_SEARCH_RESULT" in m.content for m in model.calls[-1] if isinstance(m, HumanMessage))


def test_protocol_model_one_reprompt_then_valid(make_agent):
    model = scripted("Let me think.", '{"type": "final", "answer": "' + WORKER_ANSWER + '"}', supports_tools=False)
    answer = make_agent(model).ask(WORKER_QUESTION)
    assert answer.exit_reason == ExitReason.COMPLETED and answer.status == Status.SUCCESS
    assert any(e.type == "reprompt" and e.data["reason"] == "unparseable_action" for e in answer.trace)


def test_session_keeps_the_conversation_and_resets_the_counters(make_agent):
    saver = InMemorySaver()
    override = "The environment variable `ORBITRON_WORKER_THREADS` overrides the file [1]."
    model = scripted(call("search_docs", query="worker threads"), WORKER_ANSWER, PLAN, override)
    agent = make_agent(model, checkpointer=saver, agent={"max_turns": 2})
    first = agent.ask(WORKER_QUESTION, session_id="s-1")
    second = agent.ask("Which environment variable overrides worker_threads?", session_id="s-1")
    assert first.exit_reason == second.exit_reason == ExitReason.COMPLETED
    assert second.session_id == "s-1"
    # The second run saw the first question and answer ...
    contents = [m.content for m in model.calls[-1]]
    assert WORKER_QUESTION in contents
    assert any(isinstance(m, AIMessage) and "twelve threads" in m.content for m in model.calls[-1])
    # ... without the first run's [n] (they meant that run's sources) and without its tool traffic.
    assert not any(isinstance(m, AIMessage) and "[1]" in m.content for m in model.calls[-1][:-3])
    # Per-run state was reset: a fresh trace, and max_turns=2 did not carry over the first run's turns.
    assert [e.type for e in second.trace].count("exit") == 1
    assert sum(1 for e in second.trace if e.type == "plan") == 1
    state = agent.graph.get_state({"configurable": {"thread_id": "s-1"}}).values
    assert [m.type for m in state["messages"]] == ["human", "ai", "human", "ai"]


def test_only_a_run_with_a_session_writes_a_checkpoint_thread(make_agent):
    """A run without a session_id has no conversation to keep: asked or streamed, quote mode or agent, it writes no
    LangGraph thread even though the agent has a checkpointer (every call used to write a fresh `oneoff-` one)."""
    saver = InMemorySaver()
    agent = make_agent(scripted(PLAN, WORKER_ANSWER, PLAN, WORKER_ANSWER, PLAN, WORKER_ANSWER), checkpointer=saver)
    assert agent.ask(WORKER_QUESTION, mode="quote").exit_reason == ExitReason.COMPLETED
    assert agent.ask(WORKER_QUESTION, mode="agent").exit_reason == ExitReason.COMPLETED
    _events(agent, WORKER_QUESTION, mode="agent")
    _events(agent, WORKER_QUESTION, mode="quote")
    assert list(saver.list(None)) == []

    kept = agent.ask(WORKER_QUESTION, mode="agent", session_id="s-1")
    assert kept.exit_reason == ExitReason.COMPLETED and kept.session_id == "s-1"
    assert {c.config["configurable"]["thread_id"] for c in saver.list(None)} == {"s-1"}


def test_history_is_passed_to_the_model(make_agent):
    model = scripted(WORKER_ANSWER)
    history = [{"role": "user", "content": "We run Orbitron 3.2."}, {"role": "assistant", "content": "Noted."}]
    make_agent(model).ask(WORKER_QUESTION, history=history)
    contents = [m.content for m in model.calls[-1]]
    assert "We run Orbitron 3.2." in contents and "Noted." in contents
