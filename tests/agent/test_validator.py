"""The validator: citations, the question's constraints, and a general grounded-claims check."""

from __future__ import annotations

import pytest

from citewise.agent.constraints import Constraints, analyze_constraints
from citewise.agent.validator import extract_terms, validate_answer
from citewise.types import REFUSAL_TEXT, ScoredChunk, make_chunk_id, make_doc_id


def chunk(text: str, doc: str, index: int = 0) -> ScoredChunk:
    doc_id = make_doc_id(doc)
    return ScoredChunk(
        chunk_id=make_chunk_id(doc_id, index), doc_id=doc_id, chunk_index=index, text=text, filename=doc, score=0.5
    )


INSTALL = chunk(
    "Orbitron ships as a single daemon, `orbitrond`, and a command-line client, `orbitron`. The daemon listens on "
    "port **7433** by default and stores its journal under `/var/lib/orbitron`. Install version 3.2 from "
    "https://apt.orbitron.example/stable.\n\n```bash\nsudo apt-get install orbitrond=3.2.0\n```",
    "install.md",
)
QUEUES = chunk(
    "Queues are created explicitly; enqueueing to a missing queue fails with error `ORB-404`.\n\n```bash\n"
    "orbitron queue create --name emails --retention 7d\n```\nThe `--retention 7d` flag keeps finished jobs for "
    'seven days. Set `visibility_timeout` to 30s; the docs call it "the lease window". Workers call '
    "`client.ack()` after success. Twelve threads is the default for workerThreads.",
    "queues.md",
)
SOURCES = {1: INSTALL, 2: QUEUES}


def check(text: str, *, constraints: Constraints | None = None, opened: set[str] | None = None, searches: int = 1,
          question: str | None = None, sources=None):  # fmt: skip
    return validate_answer(
        text,
        sources=SOURCES if sources is None else sources,
        opened=opened or set(),
        searches=searches,
        constraints=constraints or Constraints(),
        question=question,
    )


def test_grounded_answer_passes():
    answer = (
        "Create a queue with `orbitron queue create --name emails --retention 7d` [2]; the `--retention 7d` flag "
        "keeps finished jobs for seven days [2]. The daemon listens on port 7433 [1] and installs with "
        "`sudo apt-get install orbitrond=3.2.0` (version 3.2, see https://apt.orbitron.example/stable) [1]. "
        'Set visibility_timeout to 30s, "the lease window" [2], and call client.ack() [2]. A missing queue gives '
        "ORB-404 [2]. The default for workerThreads is 12 threads [2]."
    )
    result = check(answer)
    assert result.ok, result.errors
    assert result.errors == []


def test_citation_outside_sources_is_an_error():
    result = check("The daemon listens on port 7433 [7].")
    assert not result.ok
    assert "Citation [7] does not refer to a retrieved source; cite only [1]-[2]." in result.errors


def test_command_in_no_source_is_rejected():
    result = check("Run `orbitron queue frobnicate --name emails` to reset a queue [2].")
    assert result.errors == [
        "`orbitron queue frobnicate --name emails` does not appear in any source; remove it or search for it."
    ]


def test_command_in_a_code_fence_and_prompt_line_is_checked():
    answer = "Reset it [2]:\n\n```bash\norbitron queue purge emails\n```\n\nor\n\n$ orbitron reset --all\n"
    errors = check(answer).errors
    assert "`orbitron queue purge emails` does not appear in any source; remove it or search for it." in errors
    assert "`orbitron reset --all` does not appear in any source; remove it or search for it." in errors


def test_differing_number_is_rejected_as_a_token():
    result = check("The daemon listens on port 743 [1].")
    assert result.errors == [
        "The number 743 does not appear in any source; use the value the source gives or remove it."
    ]
    assert not check("The daemon listens on port 80 [1].", sources={1: chunk("port 8000", "x.md")}).ok
    assert check("The daemon listens on port 8000 [1].", sources={1: chunk("port 8000", "x.md")}).ok


def test_version_and_units_are_numbers():
    errors = check("Install v3.3, leases last 45s [1].").errors
    assert any("3.3" in e for e in errors) and any("45" in e for e in errors)


@pytest.mark.parametrize(
    ("answer", "bad"),
    [
        ("Set `max_lease_seconds` to raise it [2].", "`max_lease_seconds`"),
        ("Set max_lease_seconds to raise it [2].", "`max_lease_seconds`"),
        ("Call client.nack() on failure [2].", "`client.nack()`"),
        ("Pass --force to skip checks [2].", "`--force`"),
        ("Docs live at https://orbitron.example/docs [1].", "https://orbitron.example/docs"),
        ('The docs call it "the grace window" [2].', '"the grace window"'),
        ("Set retryBackoff in the config [2].", "`retryBackoff`"),
        ("Failures return ORB-500 [2].", "ORB-500"),
        ("Edit orbitron.yaml first [1].", "`orbitron.yaml`"),
        ("Journals live under /var/lib/orbitrond/journal [1].", "/var/lib/orbitrond/journal"),
    ],
)
def test_each_kind_of_term_is_checked(answer, bad):
    result = check(answer)
    assert not result.ok
    assert len(result.errors) == 1 and bad in result.errors[0]


def test_generic_words_never_trigger():
    answer = (
        "Orbitron is a durable queue service; it works well for most teams, e.g. small ones, and is simple to run "
        "in 2 steps [1]. Queues are created explicitly [2]."
    )
    assert extract_terms(answer) == []
    # No term is flagged; what is flagged is the first sentence as a whole: [1] says nothing of the kind (support).
    assert check(answer).errors == [
        '"Orbitron is a durable queue service; it works well for most teams, e.g. small..." is not what [1] says; '
        "state only what the passages say, in their terms."
    ]


def test_terms_from_the_question_are_allowed():
    answer = "The docs don't mention `orbitron frobnicate`; it is not documented."
    assert check(answer, question="What does `orbitron frobnicate` do?").ok
    assert not check(answer).ok


def test_whitespace_and_case_are_normalised():
    assert check("Run `ORBITRON   queue create --name emails  --retention 7d` [2].").ok


def test_placeholders_in_commands_match_any_value():
    assert check("Run `orbitron queue create --name <queue> --retention 7d` [2].").ok


def test_uncited_answer_is_an_error_but_a_refusal_is_not():
    assert "The answer cites no source" in check("The daemon listens on port 7433.").errors[0]
    assert check(REFUSAL_TEXT).ok
    assert check("The documentation does not say how to rotate keys.").ok


def test_search_and_open_minimums():
    constraints = analyze_constraints("Search for ports and journals separately. Open at least two sources.")
    result = check("Port 7433 [1].", constraints=constraints, searches=1, opened={INSTALL.chunk_id})
    assert result.errors == [
        "The question asks for at least 2 searches (one each for: ports, journals); only 1 done. "
        "Run search_docs before answering.",
        "The question asks to open at least 2 sources; 1 opened. Use open_citation on the most relevant results.",
    ]
    ok = check("Port 7433 [1].", constraints=constraints, searches=2, opened={INSTALL.chunk_id, QUEUES.chunk_id})
    assert ok.ok


def test_exact_quote_must_be_verbatim_in_an_opened_chunk():
    constraints = analyze_constraints("Quote the exact sentence about the journal.")
    verbatim = '"The daemon listens on port **7433** by default" [1]'
    assert check(verbatim, constraints=constraints, opened={INSTALL.chunk_id}).ok
    reworded = '"The daemon listens on port 7433 unless configured" [1]'
    errors = check(reworded, constraints=constraints, opened={INSTALL.chunk_id}).errors
    assert any("not verbatim in an opened source" in e for e in errors)
    # verbatim, but in a source that was not opened while another one was
    errors = check(verbatim, constraints=constraints, opened={QUEUES.chunk_id}).errors
    assert any("not verbatim in an opened source" in e for e in errors)
    assert "exact quote" in check("Port 7433 [1].", constraints=constraints).errors[0]
    # quote mode style: a verbatim sentence followed by its marker counts as the quote
    assert check("Queues are created explicitly; enqueueing to a missing queue fails [2]", constraints=constraints).ok


def test_insufficiency_phrase_required_when_the_answer_is_insufficient():
    constraints = analyze_constraints("How do I rotate keys? Say 'Insufficient documentation' if unknown.")
    errors = check("The documentation does not cover key rotation.", constraints=constraints).errors
    assert errors == [
        'The question asks you to say "Insufficient documentation" when the docs are insufficient; include it exactly.'
    ]
    assert check("Insufficient documentation: the docs do not cover key rotation.", constraints=constraints).ok
    assert check("Port 7433 [1].", constraints=constraints).ok


def test_required_sections():
    constraints = Constraints(required_sections=["Summary", "Steps"])
    result = check("## Summary\nPort 7433 [1].\n\nNo steps.", constraints=constraints)
    assert result.errors == ['Add a section headed "Steps"; the question asks for it.']
    assert check(
        "## Summary\nPort 7433 [1].\n\n**Steps**\nQueues are created explicitly [2].", constraints=constraints
    ).ok


def test_empty_answer_and_error_cap():
    assert not check("   ").ok
    many = " ".join(f"Port {7000 + i} [1]." for i in range(20))
    errors = check(many).errors
    assert len(errors) == 9 and errors[-1].startswith("...and 12 more")


def test_a_realistic_grounded_answer_raises_nothing():
    answer = (
        "## Installing\n\n"
        "1. Install version 3.2 from https://apt.orbitron.example/stable [1].\n"
        "2. Run `sudo apt-get install orbitrond=3.2.0` [1].\n\n"
        "**Note:** the daemon (`orbitrond`) listens on port 7433 by default and keeps its journal under "
        "/var/lib/orbitron [1]. Queues are created explicitly, i.e. enqueueing to a missing queue fails "
        "with `ORB-404` [2]. Finished jobs are kept for seven days (`--retention 7d`) [2]."
    )
    result = check(answer)
    assert result.ok, result.errors


# -- support: each cited sentence is what its cited passage says ------------------------------------------------


def test_a_sentence_cited_to_the_wrong_passage_is_sent_back_with_the_right_number():
    result = check("Queues are created explicitly; enqueueing to a missing queue fails with error `ORB-404`. [1]")
    assert not result.ok
    assert any("cited [1] but comes from [2]" in e for e in result.errors), result.errors


def test_a_code_block_after_the_wrong_citation_is_sent_back():
    result = check(
        "Create the queue like this [1]:\n\n```bash\norbitron queue create --name emails --retention 7d\n```"
    )
    assert any("code block after [1] comes from [2]" in e for e in result.errors), result.errors


def test_an_invented_sentence_with_nothing_checkable_is_not_what_the_passage_says():
    text = (
        "The daemon listens on port **7433** by default [1]. This is the approach recommended for every production "
        "deployment [1]."
    )
    result = check(text)
    assert any("is not what [1] says" in e for e in result.errors), result.errors


def test_a_paraphrase_keeping_most_of_the_passage_words_is_accepted():
    text = "By default the Orbitron daemon listens on port 7433 and keeps its journal under `/var/lib/orbitron` [1]."
    assert check(text).ok, check(text).errors


def test_an_uncited_sentence_after_the_last_citation_is_held_to_the_passages():
    text = "The daemon listens on port 7433 by default [1]. Most teams run several daemons behind a load balancer."
    result = check(text)
    assert any("cites no source and no passage says it" in e for e in result.errors), result.errors
    # ...but saying what the docs don't cover is no claim to check.
    assert check("The daemon listens on port 7433 by default [1]. The docs don't say how to change it.").ok


def test_the_question_words_count_as_support():
    text = "Orbitron autoscaling groups resize themselves from latency histograms [2]."
    assert not check(text).ok
    assert check(text, question="Do Orbitron autoscaling groups resize themselves from latency histograms?").ok


def test_a_code_block_after_the_last_citation_is_not_read_as_prose():
    text = "Create the queue like this [2]:\n\n```bash\norbitron queue create --name emails --retention 7d\n```"
    assert check(text).ok, check(text).errors


def test_quote_mode_text_is_not_held_to_the_support_check():
    """Quote mode's units are its passages' own words, placed by their spans; its marks follow its own layout (a
    block that stands alone is cited after it). Read as a model's text, the block below would be "after [1]": in quote
    mode that is no gap in the docs to show the reader, so the check is off there."""
    text = (
        "The daemon listens on port 7433 by default [1].\n\n"
        "```bash\norbitron queue create --name emails --retention 7d\n```\n[2]"
    )
    strict = check(text)
    assert any("code block after [1] comes from [2]" in e for e in strict.errors), strict.errors
    quoted = validate_answer(
        text, sources=SOURCES, opened=set(), searches=1, constraints=Constraints(), check_support=False
    )
    assert quoted.ok, quoted.errors


def test_quote_modes_own_count_of_what_it_left_out_is_no_claim():
    text = "The daemon listens on port 7433 by default [1].\n\n… and 19 more in the source [1]"
    quoted = validate_answer(
        text, sources=SOURCES, opened=set(), searches=1, constraints=Constraints(), check_support=False
    )
    assert quoted.ok, quoted.errors
    assert any("19" in e for e in check(text).errors)  # from a model, an invented number
