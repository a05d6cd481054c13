"""The condenser: a long message (an error log pasted with the question) as a search query — the sentences that ask,
the error lines, the commands and the names it holds — pure, deterministic, bounded and linear."""

from __future__ import annotations

import time

import pytest
from tests.support.long_messages import ERROR, QUESTION, TRACEBACK, pasted

from citewise.agent.condense import QUESTION_CHARS, SHORT_CHARS, condense
from citewise.agent.tools import MAX_QUERY_CHARS

LIMIT = MAX_QUERY_CHARS


def test_a_short_question_passes_unchanged():
    for question in ["How do I pin the worker pool?", "  What port does orbitrond use?\n", "x" * SHORT_CHARS]:
        condensed = condense(question, limit=LIMIT)
        assert condensed.query == condensed.question == question.strip()
        assert condensed.condensed is False
    three_lines = "Hi!\nWhich flag keeps finished jobs?\nThanks"
    assert condense(three_lines, limit=LIMIT).query == three_lines


def test_a_traceback_with_its_question():
    message = f"My producer crashes when it enqueues:\n\n```\n{TRACEBACK}\n```\n\nWhat am I doing wrong?"
    condensed = condense(message, limit=LIMIT)
    assert condensed.condensed
    assert condensed.question == "What am I doing wrong?"
    lines = condensed.query.split("\n")
    assert lines[0] == "What am I doing wrong?"  # the question first: what the embedding model reads first
    assert "orbitron.errors.QueueError: ORB-404: queue 'emails' does not exist" in lines
    assert condensed.errors == ("orbitron.errors.QueueError: ORB-404: queue 'emails' does not exist",)
    for where in ["producer.py", "line 42", "client.enqueue", "resp.code"]:  # frames and their code: where, not what
        assert where not in condensed.query
    assert "My producer crashes when it enqueues:" in lines  # the prose that names what failed


@pytest.mark.parametrize("where", ["start", "middle", "end"])
def test_the_question_is_found_wherever_it_is_in_the_paste(where):
    message = pasted(10_000, where=where)
    condensed = condense(message, limit=LIMIT)
    assert condensed.question == QUESTION
    assert condensed.query.startswith(QUESTION + "\n")
    assert len(condensed.query) <= 600  # a few lines, not 10,000 characters of log
    # Each error once (the log repeats it with other times and attempt counts), without its time stamp and level.
    assert sum(ERROR in e for e in condensed.errors) == 1
    assert not any(e.startswith(("2024", "ERROR", "[")) for e in condensed.errors)
    assert "2024-03-18" not in condensed.query and "leased job" not in condensed.query


def test_deterministic():
    message = pasted(10_000, where="middle")
    first = condense(message, limit=LIMIT)
    assert all(condense(message, limit=LIMIT) == first for _ in range(5))
    assert condense(message + "\n\n", limit=LIMIT) == first  # surrounding blank space is no difference


def test_a_question_without_a_question_mark_still_asks():
    log = "\n".join(f"2024-05-01 12:00:{i:02d} INFO worker {i} idle" for i in range(12))
    message = f"{log}\nERROR worker 7: lease expired after 30s\n\nhow do I make a leased job stay invisible longer"
    condensed = condense(message, limit=LIMIT)
    assert condensed.question == "how do I make a leased job stay invisible longer"
    assert "worker 7: lease expired after 30s" in condensed.errors


def test_nothing_asks_then_the_prose_around_the_paste_and_the_errors():
    message = (
        "Since the upgrade to 3.2 the daemon refuses to start on one host.\n"
        "```\n"
        + "\n".join(f"Mar 18 10:02:{i:02d} host1 orbitrond[812]: INFO loading segment {i}" for i in range(30))
        + "\nMar 18 10:02:31 host1 orbitrond[812]: FATAL cannot open journal /var/lib/orbitron: permission denied\n"
        "```\n"
        "I already checked the disk, it has plenty of space left."
    )
    condensed = condense(message, limit=LIMIT)
    assert condensed.query.startswith(
        "Since the upgrade to 3.2 the daemon refuses to start on one host.\n"
        "I already checked the disk, it has plenty of space left.\n"
    )
    assert condensed.errors == ("cannot open journal /var/lib/orbitron: permission denied",)
    assert condensed.question == condensed.query  # what quote mode answers when no sentence asks


def test_commands_and_names_from_the_paste():
    config = "\n".join(
        [
            *("[queue.emails]", "max_retries = 5", 'visibility_timeout = "30s"', "batch_ceiling = 250", "[daemon]"),
            *("port = 7433", "worker_threads = 12", "encrypt_payloads = true", "ORBITRON_KEY_FILE = /etc/orbitron/k"),
        ]
    )
    command = "$ orbitron queue create --name emails --retention 7d"
    message = f"Which setting keeps a leased job invisible?\n\n{command}\n{config}"
    condensed = condense(message, limit=LIMIT)
    assert condensed.commands == ("orbitron queue create --name emails --retention 7d",)
    for name in ["max_retries", "visibility_timeout", "worker_threads", "ORBITRON_KEY_FILE"]:
        assert name in condensed.identifiers
    # Numbers, time stamps, hashes and ids name nothing the docs would hold.
    noisy = "What went wrong?\n" + "\n".join(
        f"2024-03-18T10:00:{i:02d}Z job 7f3a9c2e-1b4d-4e8f-9a6b-{i:012d} hash 0x5f3e2a1b9c8d id 1234567{i}"
        for i in range(10)
    )
    assert condense(noisy, limit=LIMIT).identifiers == ()


def test_bounded_by_the_limit():
    many = "\n".join(f"ERROR module_{i}.handler_{i}: failed to reach service_{i} at /srv/path_{i}" for i in range(400))
    message = "Why does everything fail? " * 40 + "\n" + many
    for limit in (LIMIT, 200):
        condensed = condense(message, limit=limit)
        assert 0 < len(condensed.query) <= limit
    assert len(condense(message, limit=LIMIT).errors) <= 3


@pytest.mark.parametrize(
    "message",
    ["a" * 10_000, "? " * 5_000, "[" * 10_000, "a: " * 3_333, "\n".join(["x"] * 5_000), "ERROR: x\n" * 1_100],
    ids=["one-word", "question-marks", "brackets", "colons", "lines", "errors"],
)
def test_linear_on_pathological_input(message):
    started = time.perf_counter()
    condensed = condense(message, limit=LIMIT)
    assert time.perf_counter() - started < 0.5
    assert condensed.query and len(condensed.query) <= LIMIT


def test_a_paste_ten_times_longer_takes_about_ten_times_as_long():
    def took(message: str) -> float:
        started = time.perf_counter()
        for _ in range(3):
            condense(message, limit=LIMIT)
        return time.perf_counter() - started

    small, large = pasted(10_000), pasted(100_000)
    took(small)  # warm the regular expressions
    assert took(large) < 30 * took(small) + 0.05


def test_a_long_question_with_nothing_pasted_keeps_its_words():
    clauses = [
        "we run three daemons behind one load balancer",
        "each host has its own journal on a local disk",
        "the producers enqueue about two hundred jobs a second",
        "the workers lease them in batches of fifty",
        "and the dead-letter queue grows every night between two and four",
    ] * 2
    question = "How should I size the worker pool when " + ", ".join(clauses) + "?"
    assert len(question) > QUESTION_CHARS > SHORT_CHARS  # longer than the room a question gets beside a paste
    condensed = condense(question, limit=LIMIT)
    assert condensed.condensed and condensed.query == condensed.question == question
