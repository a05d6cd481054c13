"""Every exit reason, driven by a scripted model on the real index. Each run ends with exactly one."""

from __future__ import annotations

import pytest
from agent_support import WORKER_ANSWER, WORKER_QUESTION, call, cited_ids_are_sources, scripted
from langchain_core.messages import AIMessage

from citewise.agent.limits import EXIT_REASONS, WELCOME_MESSAGE
from citewise.agent.prompts import FORCE_FINAL
from citewise.errors import RateLimited
from citewise.types import ExitReason, Status


class HTTPError(Exception):
    """What a vendor SDK raises: an exception with a status code (classified by the LLM client)."""

    def __init__(self, status_code: int, message: str) -> None:
        super().__init__(message)
        self.status_code = status_code


def _exits(answer) -> list[str]:
    return [e.data["exit_reason"] for e in answer.trace if e.type == "exit"]


def test_every_exit_reason_has_a_message_a_flag_and_is_documented():
    from pathlib import Path

    docs = (Path(__file__).parents[2] / "docs" / "answers.md").read_text()
    for reason, info in EXIT_REASONS.items():
        assert reason in ExitReason
        assert isinstance(info.retryable, bool)
        assert reason is ExitReason.COMPLETED or info.message
        assert f"`{reason}`" in docs, f"{reason} is missing from docs/answers.md"
        if info.message:
            assert info.message in docs


def test_completed(make_agent):
    model = scripted(call("search_docs", query="worker threads"), WORKER_ANSWER)
    answer = make_agent(model).ask(WORKER_QUESTION)
    assert answer.exit_reason == ExitReason.COMPLETED and _exits(answer) == ["COMPLETED"]
    assert answer.status == Status.SUCCESS
    assert answer.mode == "scripted:scripted"
    assert cited_ids_are_sources(answer) and len(answer.citations) == 1
    assert answer.citations[0].filename == "configuration.mdx"
    assert model.remaining == 0


def test_empty_input_makes_no_model_call(make_agent):
    model = scripted()
    answer = make_agent(model).ask(" ")
    assert answer.exit_reason == ExitReason.EMPTY_INPUT
    assert answer.answer == EXIT_REASONS[ExitReason.EMPTY_INPUT].message
    assert model.calls == []


def test_greeting_makes_no_model_call(make_agent):
    model = scripted()
    answer = make_agent(model).ask("Assalam o Alaikum!")
    assert answer.exit_reason == ExitReason.COMPLETED
    assert answer.answer == WELCOME_MESSAGE
    assert model.calls == []


def test_max_turns_reached(make_agent):
    model = scripted(call("search_docs", query="worker threads"), call("search_docs", query="thread pool size"))
    answer = make_agent(model, agent={"max_turns": 2}).ask(WORKER_QUESTION)
    assert answer.exit_reason == ExitReason.MAX_TURNS_REACHED and _exits(answer) == ["MAX_TURNS_REACHED"]
    assert answer.status == Status.ERROR
    assert answer.answer == EXIT_REASONS[ExitReason.MAX_TURNS_REACHED].message
    assert "rephrase" in answer.answer
    assert model.remaining == 0  # no third model call: the turn limit is checked before calling


@pytest.mark.parametrize(("profile", "limit"), [("default", 3), ("docuchat", 5)])
def test_max_tool_calls_reached_then_forced_final_synthesis(make_agent, profile, limit):
    searches = [call("search_docs", query=f"worker pool threads {i}") for i in range(limit + 1)]
    model = scripted(*searches, WORKER_ANSWER)
    answer = make_agent(model, agent={"profile": profile, "max_turns": 10}).ask(WORKER_QUESTION)
    assert answer.exit_reason == ExitReason.MAX_TOOL_CALLS_REACHED and _exits(answer) == ["MAX_TOOL_CALLS_REACHED"]
    # The forced synthesis answered from what was gathered: a grounded answer, not an error.
    assert answer.status == Status.SUCCESS and answer.citations
    last_prompt = model.calls[-1]
    assert FORCE_FINAL.split(" ")[0] in last_prompt[-1].content and "lookups" in last_prompt[-1].content
    budget = [e for e in answer.trace if e.type == "tool_budget"]
    assert len(budget) == 1
    unique_searches = [e for e in answer.trace if e.type == "tool_result" and e.node == "tools"]
    assert len(unique_searches) == limit


def test_repeated_identical_calls_do_not_count(make_agent):
    same = call("search_docs", query="worker threads")
    model = scripted(same, same, same, call("search_docs", query="thread pool"), same, WORKER_ANSWER)
    answer = make_agent(model, agent={"max_turns": 10}).ask(WORKER_QUESTION)
    assert answer.exit_reason == ExitReason.COMPLETED
    repeats = [e for e in answer.trace if e.type == "tool_repeat"]
    assert len(repeats) == 3
    executed = [e for e in answer.trace if e.type == "tool_result" and e.node == "tools"]
    assert len(executed) == 2


def test_max_context_reached(make_agent):
    history = [
        {"role": "user", "content": "Tell me everything about queues."},
        {"role": "assistant", "content": "Queues hold jobs. " * 80},
    ]
    model = scripted()
    answer = make_agent(model, agent={"max_context_chars": 1000}).ask(WORKER_QUESTION, history=history)
    assert answer.exit_reason == ExitReason.MAX_CONTEXT_REACHED and _exits(answer) == ["MAX_CONTEXT_REACHED"]
    assert answer.status == Status.ERROR
    assert "start over" in answer.answer
    assert len(model.calls) == 1  # the plan; the answering call never happened


def test_rate_limited_after_retries(make_agent):
    model = scripted(*[HTTPError(429, "Too Many Requests")] * 3)
    answer = make_agent(model).ask(WORKER_QUESTION)
    assert answer.exit_reason == ExitReason.RATE_LIMITED and _exits(answer) == ["RATE_LIMITED"]
    assert answer.status == Status.ERROR and answer.retryable
    assert answer.answer == EXIT_REASONS[ExitReason.RATE_LIMITED].message
    assert answer.retry_after_s == EXIT_REASONS[ExitReason.RATE_LIMITED].retry_after_s  # the vendor named no wait
    assert len(model.calls) == 4  # the plan + 1 try + 2 retries (generation.llm_retries)


def test_a_rate_limited_run_keeps_the_providers_own_retry_after(make_agent):
    """The vendor's Retry-After rides on the Answer (the HTTP layer sends it), not the exit-reason table's guess.
    45 s is longer than generation.max_retry_after_s, so the client does not wait it out: one call, then the end."""
    model = scripted(RateLimited("429 from vendor", retry_after_s=45.0), plan=None)
    answer = make_agent(model).ask(WORKER_QUESTION)
    assert answer.exit_reason == ExitReason.RATE_LIMITED and answer.retryable
    assert answer.retry_after_s == 45.0 and len(model.calls) == 1


def test_llm_error_is_not_retried_when_not_retryable(make_agent):
    model = scripted(HTTPError(400, "Bad request: unknown parameter"))
    answer = make_agent(model).ask(WORKER_QUESTION)
    assert answer.exit_reason == ExitReason.LLM_ERROR and _exits(answer) == ["LLM_ERROR"]
    assert answer.status == Status.ERROR
    assert "Bad request" not in answer.answer  # a generic message, not the vendor's
    assert answer.retry_after_s is None  # nothing to wait for
    assert len(model.calls) == 2


def test_llm_error_after_retried_server_errors(make_agent):
    model = scripted(*[HTTPError(503, "Service Unavailable")] * 2)
    answer = make_agent(model, generation={"llm_retries": 1}).ask(WORKER_QUESTION)
    assert answer.exit_reason == ExitReason.LLM_ERROR
    assert len(model.calls) == 3


def test_planner_rate_limit_ends_the_run(make_agent):
    model = scripted(*[RateLimited()] * 3, plan=None)
    answer = make_agent(model).ask(WORKER_QUESTION)
    assert answer.exit_reason == ExitReason.RATE_LIMITED
    assert not any(e.type == "tool_call" for e in answer.trace)  # nothing retrieved for a run that can't answer


def test_generation_failure_recovered_by_one_reinvocation(make_agent):
    model = scripted("", WORKER_ANSWER)
    answer = make_agent(model).ask(WORKER_QUESTION)
    assert answer.exit_reason == ExitReason.LLM_GENERATION_FAILURE and _exits(answer) == ["LLM_GENERATION_FAILURE"]
    assert answer.status == Status.SUCCESS and answer.citations
    assert "empty" in model.calls[-1][-1].content  # the re-invocation asked for a final answer


def test_generation_failure_twice_gives_the_canned_message(make_agent):
    model = scripted("", AIMessage(content="   "))
    answer = make_agent(model).ask(WORKER_QUESTION)
    assert answer.exit_reason == ExitReason.LLM_GENERATION_FAILURE
    assert answer.status == Status.ERROR
    assert answer.answer == EXIT_REASONS[ExitReason.LLM_GENERATION_FAILURE].message
    assert model.remaining == 0


@pytest.mark.parametrize(
    "reply",
    [
        call("delete_docs", query="everything"),  # unknown tool
        call("search_docs", query="worker threads", top_k=50),  # top_k out of range
        call("search_docs", top_k=3),  # required argument missing
        call("open_citation", doc_id="1", chunk_id="not-a-uuid"),  # ids must be full UUIDs
    ],
    ids=["unknown-tool", "top_k-range", "missing-query", "bad-uuid"],
)
def test_invalid_tool_call(make_agent, reply):
    model = scripted(reply)
    answer = make_agent(model).ask(WORKER_QUESTION)
    assert answer.exit_reason == ExitReason.INVALID_TOOL_CALL and _exits(answer) == ["INVALID_TOOL_CALL"]
    assert answer.status == Status.ERROR
    invalid = [e for e in answer.trace if e.type == "invalid_tool_call"]
    assert invalid and invalid[0].data["error"]
    assert not any(e.type == "tool_result" and e.node == "tools" for e in answer.trace)  # nothing ran


def test_protocol_model_unparseable_twice_is_invalid_tool_call(make_agent):
    model = scripted("I think I will search.", "Still thinking about it.", supports_tools=False)
    answer = make_agent(model).ask(WORKER_QUESTION)
    assert answer.exit_reason == ExitReason.INVALID_TOOL_CALL
    assert model.remaining == 0
    assert "JSON" in model.calls[-1][-1].content  # the one reprompt asked for a JSON action


def test_tool_call_after_the_budget_is_spent_is_ignored(make_agent):
    searches = [call("search_docs", query=f"worker pool threads {i}") for i in range(4)]
    model = scripted(*searches, call("search_docs", query="one more, please"), WORKER_ANSWER)
    answer = make_agent(model, agent={"max_turns": 10}).ask(WORKER_QUESTION)
    assert answer.exit_reason == ExitReason.MAX_TOOL_CALLS_REACHED
    assert answer.status == Status.SUCCESS
    assert not any(e.type == "tool_result" and e.data.get("query") == "one more, please" for e in answer.trace)
    assert model.remaining == 0


@pytest.mark.parametrize(
    ("after_budget", "max_turns"),
    [(["", ""], 10), ([call("search_docs", query="more"), ""], 10), ([""], 5)],
    ids=["two-empty-replies", "tool-call-then-empty", "turns-run-out"],
)
def test_max_tool_calls_reached_answers_with_what_was_found(make_agent, after_budget, max_turns):
    """The contract of MAX_TOOL_CALLS_REACHED: success or refused, with what the lookups found — also when the model
    then fails to write the answer (it ended with status error, or with "here is what I found" and nothing)."""
    searches = [call("search_docs", query=f"worker pool threads {i}") for i in range(4)]
    model = scripted(*searches, *after_budget)
    answer = make_agent(model, agent={"max_turns": max_turns}).ask(WORKER_QUESTION)
    assert answer.exit_reason == ExitReason.MAX_TOOL_CALLS_REACHED and _exits(answer) == ["MAX_TOOL_CALLS_REACHED"]
    assert answer.status in (Status.SUCCESS, Status.REFUSED)
    assert answer.status == Status.REFUSED or (answer.citations and cited_ids_are_sources(answer))
    assert "worker_threads" in answer.answer  # verbatim from the passages the lookups found
    assert any(e.type == "forced_synthesis" for e in answer.trace)


def test_retry_after_comes_from_the_provider_or_the_table():
    from citewise.agent.limits import exit_reason_for, retry_after
    from citewise.errors import ProviderUnavailable, RateLimited, RetrievalError

    assert retry_after(RateLimited()) == str(EXIT_REASONS[ExitReason.RATE_LIMITED].retry_after_s) == "30"
    assert retry_after(RateLimited(retry_after_s=7.4)) == "7"
    assert exit_reason_for(RateLimited()) is ExitReason.RATE_LIMITED
    assert exit_reason_for(ProviderUnavailable()) is exit_reason_for(RetrievalError("x")) is ExitReason.LLM_ERROR


def test_every_trace_step_is_documented():
    from pathlib import Path

    from citewise.types import TraceKind

    docs = (Path(__file__).parents[2] / "docs" / "answers.md").read_text()
    for kind in TraceKind:
        assert f"| `{kind}` |" in docs, f"trace step {kind} is missing from docs/answers.md"
