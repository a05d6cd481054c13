"""What a question hinges on, from its wording alone: its focus, anchors and parts."""

from __future__ import annotations

import pytest

from citewise.quote import analyse, question_focus, split_parts


@pytest.mark.parametrize(
    ("question", "anchors"),
    [
        ("What is in enclosure 417?", ("417",)),
        ("How do I use --prune with CITEWISE_API_KEYS?", ("--prune", "CITEWISE_API_KEYS")),
        ("What does POST /api/agent/stream return?", ("/api/agent/stream", "POST")),
        ("Is v1.2.3 compatible?", ("v1.2.3",)),
        ("What does error ORB-404 mean?", ("ORB-404",)),
        ("Who won the 2022 Citrus Bowl?", ("2022", "Citrus Bowl")),
        ('What does "insufficient liquidity" mean?', ("insufficient liquidity",)),
        ("How Do I Change The Port?", ()),  # Title Case: capitals name nothing
        ("Who produced Bruno Mars’s first album?", ("Bruno Mars",)),  # a possessive at a name's end is no part of it
        ("Is King's College in London?", ("King's College", "London")),  # but not inside one
        ("how do i change the port", ()),
    ],
)
def test_anchors_are_what_the_evidence_must_name(question, anchors):
    assert analyse(question).anchors == anchors


def test_a_multi_part_question_is_split_and_a_part_that_points_back_gets_its_words():
    assert split_parts("What is quote mode and how do I switch to agent mode?") == [
        "What is quote mode",
        "how do I switch to agent mode?",
    ]
    assert split_parts("What's the default port and how do I change it?") == [
        "What's the default port",
        "how do I change it (default port)?",
    ]
    assert split_parts("What is IceDB and how fast is it?") == ["What is IceDB", "how fast is it (icedb)?"]
    # a condition stays with the question it conditions; a second question after it is still a part
    assert split_parts("If I delete a file, how do I remove it and what happens to its chunks?") == [
        "If I delete a file, how do I remove it",
        "what happens to its chunks (delete file remove)?",
    ]
    # the second question may open with its preposition, when it is a whole question with its verb
    parts = split_parts("What percentage of the supply goes to the team, and over how many months does it vest?")
    assert parts[0] == "What percentage of the supply goes to the team"
    assert parts[1].startswith("over how many months does it vest")
    second = split_parts("What is the default port, and in which file is it set?")[1]
    assert second.startswith("in which file is it set")


@pytest.mark.parametrize(
    "question",
    [
        "How do I ingest a folder of markdown documents?",
        "How do I back up and restore a home?",  # "and" between verbs, not between questions
        "Which embedding model is used?",
        "When a user lacks the scopes @requires asks for, what HTTP status is returned by default?",  # a condition
        "Where do I put the key, in which section of the file?",  # narrows the question, asks no second one
        "In how many days are old logs removed?",
        "What is the TTL, after which cached entries are evicted?",  # a relative clause, not a second question
        "How long is the grace period, during which the old key can still be used?",
    ],
)
def test_a_single_question_stays_whole(question):
    assert split_parts(question) == [question]


def test_the_focus_leaves_the_conversation_around_the_question():
    assert question_focus("I'm new here. How do I change the port?") == "How do I change the port?"
    assert question_focus("Quick question: what is the default port?") == "what is the default port?"
    assert question_focus("If I delete a file, how do I remove it?") == "If I delete a file, how do I remove it?"
