"""Constraint analysis: process requirements stated in the question become checkable fields."""

from __future__ import annotations

import pytest

from citewise.agent.constraints import Constraints, analyze_constraints


def test_plain_question_has_default_constraints():
    c = analyze_constraints("How do I create a queue?")
    assert c == Constraints()
    assert not c.any
    assert c.min_searches == 1 and c.min_opened == 0 and c.insufficiency_phrase is None


@pytest.mark.parametrize(
    ("question", "searches", "topics"),
    [
        ("Compare retries and timeouts. Do separate searches for each topic.", 2, []),
        ("Search for retries and visibility timeout separately, then compare.", 2, ["retries", "visibility timeout"]),
        ("Run separate searches for ports, journals and badges.", 3, ["ports", "journals", "badges"]),
        ("Do separate searches for each topic: encryption, retention.", 2, ["encryption", "retention"]),
        ("Use at least three searches before answering.", 3, []),
    ],
)
def test_search_requirements(question, searches, topics):
    c = analyze_constraints(question)
    assert c.min_searches == searches
    assert c.search_topics == topics


@pytest.mark.parametrize(
    ("question", "opened"),
    [
        ("Open at least two citations before you answer.", 2),
        ("open at least 3 sources", 3),
        ("Please open the top two results and summarise.", 2),
        ("Open the source and tell me the port.", 1),
        ("Which port does it open?", 0),
    ],
)
def test_open_requirements(question, opened):
    assert analyze_constraints(question).min_opened == opened


def test_exact_quote_and_target():
    c = analyze_constraints("Quote the exact error message from the queue docs.")
    assert c.exact_quote and c.quote_targets == ["error message"]
    assert analyze_constraints("Give the retention rule verbatim.").exact_quote
    assert analyze_constraints("Answer word for word from the docs.").exact_quote
    assert not analyze_constraints("What is the exact port?").exact_quote


def test_newest_dated_rule():
    assert analyze_constraints("If sources disagree, use the newest dated document.").newest_dated_rule
    assert analyze_constraints("Go by the most recent document.").newest_dated_rule
    assert not analyze_constraints("What is new in the latest release?").newest_dated_rule


def test_required_sections():
    c = analyze_constraints("Include sections Summary, Steps and Caveats.")
    assert c.required_sections == ["Summary", "Steps", "Caveats"]
    c = analyze_constraints("Answer with the following sections: 'Overview', 'Risks'.")
    assert c.required_sections == ["Overview", "Risks"]
    assert analyze_constraints("Write it with a 'Limitations' section.").required_sections == ["Limitations"]


def test_insufficiency_phrase():
    c = analyze_constraints("If the docs don't say, say 'Insufficient documentation'.")
    assert c.insufficiency_phrase == "Insufficient documentation"
    c = analyze_constraints('Respond with "Not covered" when unsure.')
    assert c.insufficiency_phrase == "Not covered"
    assert analyze_constraints("say insufficient documentation if unknown").insufficiency_phrase == (
        "Insufficient documentation"
    )


def test_everything_at_once():
    c = analyze_constraints(
        "Search for encryption and retention separately, open at least two sources, quote the exact "
        "warning, use the most recent dated document, include sections Answer and Evidence, and say "
        '"Insufficient documentation" if the docs do not cover it.'
    )
    assert c.min_searches == 2 and c.search_topics == ["encryption", "retention"]
    assert c.min_opened == 2
    assert c.exact_quote and c.quote_targets == ["warning"]
    assert c.newest_dated_rule
    assert c.required_sections == ["Answer", "Evidence"]
    assert c.insufficiency_phrase == "Insufficient documentation"
    assert c.any
