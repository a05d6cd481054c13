"""A question with an error log pasted around it, up to the 10,000-character limit: the run searches the message
condensed (its question, errors, names), quote mode answers the question sentence, and the model and the Answer keep
the whole message."""

from __future__ import annotations

import time

import pytest
from agent_support import scripted
from tests.support.long_messages import QUESTION, pasted

from citewise.agent.condense import condense
from citewise.agent.tools import MAX_QUERY_CHARS
from citewise.errors import ValidationError
from citewise.settings import Settings
from citewise.types import MAX_QUESTION_CHARS, ExitReason, Status

QUEUE_ANSWER = "Create it first with `orbitron queue create --name emails --retention 7d` [1]."


def _mandatory_search(answer):
    return next(e for e in answer.trace if e.type == "tool_call" and e.data.get("mandatory"))


@pytest.mark.parametrize("where", ["end", "start", "middle"])
def test_a_10000_character_paste_is_answered_in_quote_mode(make_agent, where):
    message = pasted(MAX_QUESTION_CHARS, where=where)
    answer = make_agent().ask(message)

    assert answer.status == Status.SUCCESS, (answer.refusal_detail, answer.trace)
    assert "orbitron queue create" in answer.answer
    assert answer.question == message  # the whole message is kept
    search = _mandatory_search(answer)
    assert search.data["condensed"] is True and search.data["message_chars"] == MAX_QUESTION_CHARS
    query = search.data["args"]["query"]
    assert query == condense(message, limit=MAX_QUERY_CHARS).query
    assert query.startswith(QUESTION) and "ORB-404" in query and "2024-03-18" not in query
    # Quote mode answered the question sentence, not the log.
    compose = next(e for e in answer.trace if e.type == "compose")
    assert [p["question"] for p in compose.data["parts"]] == [QUESTION]


def test_a_short_question_is_searched_as_it_is(make_agent):
    answer = make_agent().ask("  How do I pin the worker pool to a fixed number of threads?  ")
    search = _mandatory_search(answer)
    assert search.data["args"]["query"] == "How do I pin the worker pool to a fixed number of threads?"
    assert "condensed" not in search.data and "message_chars" not in search.data


def test_a_long_paste_costs_little_more_than_its_question(make_agent):
    """Nothing reads the message quadratically: a 10,000-character paste takes about what its question alone does
    (both searched and answered on a warm agent; generous bounds for a busy machine)."""
    agent = make_agent()
    agent.ask(QUESTION)  # warm: the reader model, the vocabulary
    started = time.perf_counter()
    short = agent.ask(QUESTION + " ")
    short_s = time.perf_counter() - started
    started = time.perf_counter()
    long = agent.ask(pasted(MAX_QUESTION_CHARS))
    long_s = time.perf_counter() - started
    assert short.status == long.status == Status.SUCCESS
    assert long_s < 3 * short_s + 2.0, (short_s, long_s)


def test_the_model_gets_the_whole_message_and_the_search_gets_it_condensed(make_agent):
    model = scripted(QUEUE_ANSWER)
    message = pasted(MAX_QUESTION_CHARS)
    answer = make_agent(model).ask(message, mode="agent")

    assert answer.exit_reason == ExitReason.COMPLETED, answer.trace
    assert answer.status == Status.SUCCESS and "orbitron queue create" in answer.answer
    prompt = model.calls[-1]
    assert any(m.content == message for m in prompt)  # the whole paste, for the model to read
    assert _mandatory_search(answer).data["args"]["query"] == condense(message, limit=MAX_QUERY_CHARS).query


def test_the_limit_is_the_setting_and_the_error_says_both_numbers(make_agent):
    assert Settings().agent.max_question_chars == MAX_QUESTION_CHARS == 10_000
    agent = make_agent()
    with pytest.raises(ValidationError) as raised:
        agent.ask(pasted(MAX_QUESTION_CHARS + 1))
    assert str(raised.value) == "The question is 10,001 characters long; the limit is 10,000."
    with pytest.raises(ValidationError, match=r"^The question is 4,915 characters long; the limit is 2,000\.$"):
        make_agent(agent={"max_question_chars": 2000}).ask(pasted(4915))
