"""What a question asks for, from its wording alone: kind, subject, anchors, expected answer, parts."""

from __future__ import annotations

import pytest

from citewise.quote import QuestionKind, analyse, split_parts


@pytest.mark.parametrize(
    ("question", "kind"),
    [
        ("What is quote mode?", QuestionKind.DEFINITION),
        ("what's reentrancy", QuestionKind.DEFINITION),
        ("What does MAX_TURNS_REACHED mean?", QuestionKind.DEFINITION),
        ("quote mode", QuestionKind.DEFINITION),
        ("How do I ingest a folder of markdown documents?", QuestionKind.PROCEDURE),
        ("how to change the port", QuestionKind.PROCEDURE),
        ("thirdweb cli deploy command", QuestionKind.PROCEDURE),
        ("What is the default chunk size?", QuestionKind.VALUE),
        ("Which port does the daemon listen on?", QuestionKind.VALUE),
        ("How many dimensions do the vectors have?", QuestionKind.VALUE),
        ("somi total supply", QuestionKind.VALUE),
        ("When was the neutron discovered?", QuestionKind.VALUE),
        ("Does Citewise need internet access?", QuestionKind.YES_NO),
        ("Which file types are supported?", QuestionKind.LIST),
        ("Why is the first ingest slow?", QuestionKind.REASON),
        ("Who founded Citewise?", QuestionKind.ENTITY),
        # a condition before the question: the question after it says the kind
        ("When a user lacks the scopes @requires asks for, what is the default status code?", QuestionKind.VALUE),
        ("If I delete a file, how do I remove it from the index?", QuestionKind.PROCEDURE),
        ("Once the server is up, does it reload settings?", QuestionKind.YES_NO),
        ("When was the index built, and how?", QuestionKind.VALUE),  # a question starting "When was" is one
        ("For what reason does the server return 403?", QuestionKind.GENERAL),  # an idiom, not "which reason"
        # a plural noun asked about: a list, whatever value noun qualifies it ("path")
        ("Which path parameter convertors come built in?", QuestionKind.LIST),
        ("What fees does the network charge?", QuestionKind.VALUE),  # the plural is a value noun's
        ("What is the default path?", QuestionKind.VALUE),
        ("What percentage of validators must sign a block?", QuestionKind.VALUE),  # the value noun is the head
        ("What number of retries does the client make?", QuestionKind.VALUE),
        # "what is X called?" asks for X's name, not what X is
        ("What is the testnet token called?", QuestionKind.VALUE),
        ("What's the daemon's config file named?", QuestionKind.VALUE),
        ("What is the function called by the router?", QuestionKind.DEFINITION),
        ("What is returned when the handler is called?", QuestionKind.DEFINITION),  # a clause, not a name asked for
        ("What is the order in which middleware is called?", QuestionKind.DEFINITION),
        ("What’s the daemon called?", QuestionKind.VALUE),
        # "key" is a value (an API key), and an adjective before a plural: then the question asks for a list
        ("What are the key innovations behind Orbitron's speed?", QuestionKind.LIST),
        ("What are the key features of the daemon?", QuestionKind.LIST),
        ("Which key does the widget use?", QuestionKind.VALUE),
        ("What is the API key?", QuestionKind.VALUE),
        ("What happens when keys are rotated?", QuestionKind.GENERAL),  # a condition's plural
    ],
)
def test_kinds(question, kind):
    assert analyse(question).kind == kind


def test_a_definition_names_its_subject():
    assert analyse("What is the quote mode?").subject == "quote mode"
    assert analyse("What does `--prune` mean?").subject == "--prune"


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


@pytest.mark.parametrize(
    ("question", "expects"),
    [
        ("When was the neutron discovered?", "date"),
        ("How many stanzas are there?", "number"),
        ("How long are backups kept?", "duration"),
        ("Who plays Jethalal?", "name"),
        ("Where does the web chat keep the key?", "location"),
        ("Which developer made the game?", "name_or_value"),
        ("What is the default port?", "value"),
        ("How do I change the port?", None),
        ("When a user lacks the required scopes, what HTTP status is returned?", "name_or_value"),  # not a date
        ("When was the index built?", "date"),
        ("Since which release can state be read like a dict?", "name_or_value"),  # the question word after "Since"
        ("In what year was the bridge moved?", "date"),
        ("To whom did Lee surrender?", "name"),
        ("Since when is the flag deprecated?", "date"),
        ("To what extent does the timeout apply?", None),  # an idiom: no value asked for
        ("If I use Jinja2, in which file do I put templates?", "name_or_value"),  # a condition, then a preposition
        ("What is the testnet token called?", "name"),
        ("How is the test network known as?", "name"),
    ],
)
def test_what_the_answer_must_state(question, expects):
    assert analyse(question).expects == expects


def test_negation():
    assert analyse("Which notion does the trope not embody?").negated
    assert not analyse("Which notion does the trope embody?").negated


def test_a_multi_part_question_is_split_and_a_part_that_points_back_gets_its_words():
    assert split_parts("What is quote mode and how do I switch to agent mode?") == [
        "What is quote mode",
        "how do I switch to agent mode?",
    ]
    assert split_parts("What's the default port and how do I change it?") == [
        "What's the default port",
        "how do I change it (default port)?",
    ]
    assert [analyse(p).kind for p in split_parts("What is IceDB and how fast is it?")] == [
        QuestionKind.DEFINITION,
        QuestionKind.VALUE,
    ]
    # a condition stays with the question it conditions; a second question after it is still a part
    assert split_parts("If I delete a file, how do I remove it and what happens to its chunks?") == [
        "If I delete a file, how do I remove it",
        "what happens to its chunks (delete file remove)?",
    ]
    # the second question may open with its preposition, when it is a whole question with its verb
    parts = split_parts("What percentage of the supply goes to the team, and over how many months does it vest?")
    assert parts[0] == "What percentage of the supply goes to the team"
    assert parts[1].startswith("over how many months does it vest")
    assert analyse(parts[1]).kind == QuestionKind.VALUE and analyse(parts[1]).expects == "number"
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
