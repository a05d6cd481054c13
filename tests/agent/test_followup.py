"""A follow-up made whole with the questions before it (citewise.agent.followup): pure and deterministic; a
self-contained question passes unchanged."""

from __future__ import annotations

import pytest

from citewise.agent.followup import elliptic, standalone, topic_words


@pytest.mark.parametrize(
    ("first", "followup", "expected"),
    [
        ("How do I enable payload encryption?", "Is it enabled by default?",
         "Is it enabled by default (payload encryption)?"),
        ("What is the default chunk size?", "How do I change it?", "How do I change it (default chunk size)?"),
        ("Where does the daemon keep its journal?", "Can I move them?", "Can I move them (daemon keep journal)?"),
        ("How do I turn on API keys?", "What happens when a request doesn't send one?",
         "What happens when a request doesn't send one (turn API keys)?"),
        ("How many retries does a job get?", "Which setting controls that?",
         "Which setting controls that (retries job)?"),
        ("How do I remove a document from the index?", "Where do I find its id?",
         "Where do I find its id (remove document index)?"),
    ],
)  # fmt: skip
def test_a_pronoun_points_at_the_question_before(first, followup, expected):
    made = standalone(followup, [first])
    assert made.followup and made.reason == "pronoun"
    assert made.question == expected
    assert made.asked == followup and made.from_turns == (first,)


@pytest.mark.parametrize(
    ("first", "followup", "expected"),
    [
        ("What is the default chunk size?", "And the overlap?", "What is the default overlap size?"),
        ("Where does pip keep its cache on Linux?", "And on macOS?", "Where does pip keep its cache on macOS?"),
        ("How many tool calls may the agent make per question?", "And with the docuchat profile?",
         "How many tool calls may the agent make per question with the docuchat profile?"),
        ("Which Python version does Citewise need?", "And which PyTorch?", "Which PyTorch version does Citewise need?"),
        ("How do I answer with OpenAI?", "What about Ollama?", "How do I answer with Ollama?"),
        ("Which file types can I ingest?", "What about scanned PDFs?", "What about scanned PDFs (file types ingest)?"),
    ],
)  # fmt: skip
def test_a_continuation_asks_the_question_before_of_something_else(first, followup, expected):
    made = standalone(followup, [first])
    assert made.followup and made.reason == "ellipsis"
    assert made.question == expected


def test_a_question_that_names_nothing_gets_the_topic_before():
    assert elliptic("What's the default?") == "bare"
    assert standalone("What's the size limit?", ["How do I upload a document?"]).question == (
        "What's the size limit (upload document)?"
    )
    assert elliptic("On Windows?") == "fragment"
    assert standalone("On Windows?", ["How do I install the daemon on Linux?"]).question == (
        "How do I install the daemon on Windows?"
    )


@pytest.mark.parametrize(
    "question",
    [
        "What port does the Orbitron daemon listen on by default?",
        "How do I create a queue?",
        "Is it possible to ingest PDF files?",  # an "it" that points nowhere
        "How long does it take to rebuild the index?",
        "What's the default port and how do I change it?",  # its parts point at each other
        "I get MissingExtraError for openai. How do I fix it?",  # it names what "it" is
        "How long does `orbitron drain` wait before it gives up?",
        "How long are dead-lettered jobs kept before they are deleted?",
        "Is there a flag that skips hidden files when I ingest a folder?",  # a relative "that"
        "How do I know that the index is current?",  # a conjunction
        "Can I run more than one worker per queue?",  # "one" as a number
        "Does Citewise support PostgreSQL and MySQL for sessions and the index?",
        "What does `make install` do?",
    ],
)
def test_a_self_contained_question_passes_unchanged(question):
    made = standalone(question, ["How do I enable payload encryption?"])
    assert not made.followup, made
    assert made.question == made.asked == question and made.from_turns == ()


def test_without_an_earlier_question_nothing_changes():
    for question in ("How do I change it?", "And the overlap?", "What's the default?"):
        made = standalone(question, [])
        assert (made.question, made.followup, made.reason) == (question, False, "")
    # a greeting names no topic to lean on
    assert not standalone("How do I change it?", ["hi", "  "]).followup


def test_a_chain_of_follow_ups_keeps_its_topic():
    earlier = ["How do I enable payload encryption?", "Is it enabled by default?"]
    made = standalone("How do I turn it off?", earlier)
    assert made.followup
    assert "payload encryption" in made.question
    assert made.from_turns == tuple(earlier)
    # a self-contained question in between starts a new topic
    made = standalone("How do I change it?", [*earlier, "What is the default chunk size?"])
    assert made.question == "How do I change it (default chunk size)?"
    assert made.from_turns == ("What is the default chunk size?",)


def test_it_is_deterministic():
    earlier = ["Where do the server's sessions live by default?"]
    first = standalone("How do I keep them in PostgreSQL instead?", earlier)
    assert all(standalone("How do I keep them in PostgreSQL instead?", earlier) == first for _ in range(20))
    assert first.question == "How do I keep them in PostgreSQL instead (server's sessions live)?"


def test_a_long_message_states_its_own_question():
    message = "How do I change it? " + "I tried the settings page and the config file and nothing changed at all."
    assert not standalone(message, ["What is the default chunk size?"]).followup


def test_topic_words_keep_identifiers_whole_and_drop_words_that_only_ask():
    assert topic_words("What does the --prune flag of citewise ingest do?") == ["--prune", "flag", "citewise", "ingest"]
    assert topic_words("Where do sessions live by default?") == ["sessions", "live"]
    assert topic_words("How do I set CITEWISE_API_KEYS?") == ["set", "CITEWISE_API_KEYS"]
