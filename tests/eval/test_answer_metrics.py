"""Answer metrics against values worked out by hand (the arithmetic is in the comments)."""

from __future__ import annotations

import pytest

from citewise.eval.metrics import (
    Judged,
    best_token_f1,
    citation_supported,
    citation_validity,
    contains_answer,
    normalize_answer,
    percentiles_ms,
    refusal_scores,
    score_answers,
    token_f1,
)
from citewise.types import REFUSAL_TEXT, Answer, Citation, ExitReason, ScoredChunk, Status


def chunk(chunk_id: str, text: str) -> ScoredChunk:
    return ScoredChunk(chunk_id=chunk_id, doc_id="d", chunk_index=0, text=text, filename="f.md", score=1.0)


def cite(n: int, chunk_id: str) -> Citation:
    return Citation(n=n, doc_id="d", chunk_id=chunk_id, chunk_index=0, filename="f.md")


def answer(
    text: str,
    *,
    status: Status = Status.SUCCESS,
    cites: tuple[str, ...] = (),
    sources: tuple[ScoredChunk, ...] = (),
    exit_reason: ExitReason = ExitReason.COMPLETED,
) -> Answer:
    return Answer(
        question="q",
        answer=text,
        status=status,
        exit_reason=exit_reason,
        citations=[cite(n, c) for n, c in enumerate(cites, 1)],
        sources=list(sources),
    )


# -- normalisation, recall, token F1 -----------------------------------------------------------------------------
def test_squad_normalisation():
    assert normalize_answer("  The Quick,  brown FOX! ") == "quick brown fox"
    assert normalize_answer("An apple a day") == "apple day"


def test_contains_answer_normalises_and_respects_word_boundaries():
    assert contains_answer("The default port is 8,080 [1].", ["8080"])  # punctuation dropped on both sides
    assert contains_answer("Set TIMEOUT to 30 seconds", ["nothing", "timeout to 30"])  # any gold will do
    assert not contains_answer("The default port is 8080.", ["80"])  # "80" is not a word of the answer
    assert not contains_answer("anything", [])
    assert not contains_answer("anything", ["", "  "])  # an empty gold matches nothing


def test_token_f1_by_hand():
    # prediction → "cat sat on mat" (articles and the [1] marker dropped): 4 tokens; gold "a cat on a mat" →
    # "cat on mat": 3 tokens. common = 3 → P = 3/4, R = 3/3 → F1 = 2·0.75·1 / 1.75 = 0.857142…
    assert token_f1("The cat sat on the mat [1]", "a cat on a mat") == pytest.approx(6 / 7)
    # Repeated tokens count as a multiset: common = min(2,1) red + min(1,2) blue = 2 → P = R = 2/3 → F1 = 2/3.
    assert token_f1("red red blue", "red blue blue") == pytest.approx(2 / 3)
    assert token_f1("nothing shared", "other words") == 0.0
    assert token_f1("", "") == 1.0
    assert token_f1("the", "an answer") == 0.0  # only an article: empty after normalisation
    # The best gold wins: vs "cat" → P = 1/4, R = 1 → F1 = 0.4; vs "cat sat" → P = 2/4, R = 1 → 2/3.
    assert best_token_f1("cat sat on mat", ["cat", "cat sat"]) == pytest.approx(2 / 3)
    assert best_token_f1("anything", []) == 0.0


# -- refusal -----------------------------------------------------------------------------------------------------
def test_refusal_precision_recall_f1_by_hand():
    unanswerable = [True, True, True, False, False, False, False]
    refused = [True, True, False, True, False, False, False]
    # tp = q1, q2 (2) · fn = q3 (1) · fp = q4 (1) · tn = q5..q7 (3)
    # P = 2/3, R = 2/3, F1 = 2·2 / (2·2 + 1 + 1) = 4/6 = 2/3
    s = refusal_scores(unanswerable, refused)
    assert (s.tp, s.fp, s.fn, s.tn) == (2, 1, 1, 3)
    assert s.precision == pytest.approx(2 / 3)
    assert s.recall == pytest.approx(2 / 3)
    assert s.f1 == pytest.approx(2 / 3)


def test_refusal_undefined_ratios_are_none():
    # Nothing refused: precision is 0/0 (None); one unanswerable question answered: recall 0/1 = 0; F1 = 0/1 = 0.
    s = refusal_scores([True, False], [False, False])
    assert s.precision is None
    assert s.recall == 0.0
    assert s.f1 == 0.0
    # All answerable and all answered: nothing to detect, nothing detected → every ratio undefined.
    s = refusal_scores([False, False], [False, False])
    assert (s.precision, s.recall, s.f1) == (None, None, None)
    with pytest.raises(ValueError):
        refusal_scores([True], [])


# -- citations ---------------------------------------------------------------------------------------------------
def test_citation_validity_by_hand():
    c1, c2, c3 = chunk("c1", "one"), chunk("c2", "two"), chunk("c3", "three")
    answers = [
        answer("a [1] b [2]", cites=("c1", "c2"), sources=(c1, c2, c3)),  # 2 valid of 2
        answer("c [1]", cites=("c9",), sources=(c1,)),  # c9 was never retrieved: 0 of 1
        answer("no citations"),  # contributes nothing
    ]
    assert citation_validity(answers) == pytest.approx(2 / 3)  # 2 valid of 3 citations
    assert citation_validity(answers[:1]) == 1.0
    assert citation_validity([answer("none")]) is None


def test_citation_support():
    port = chunk("c1", "The server listens on port 8080 by default.")
    other = chunk("c2", "Logs rotate daily.")
    assert citation_supported(answer("[1]", cites=("c1",), sources=(port, other)), ["8080"])
    assert not citation_supported(answer("[1]", cites=("c2",), sources=(port, other)), ["8080"])
    # A citation to a chunk outside the sources supports nothing, even if that chunk id exists elsewhere.
    assert not citation_supported(answer("[1]", cites=("c1",), sources=(other,)), ["8080"])


def test_percentiles_by_hand():
    # numpy's linear interpolation: p50 at index 1.5 → 25; p95 at index 0.95·3 = 2.85 → 30 + 0.85·10 = 38.5
    assert percentiles_ms([40, 10, 30, 20]) == (25.0, 38.5)
    assert percentiles_ms([]) == (0.0, 0.0)


# -- a whole run -------------------------------------------------------------------------------------------------
def test_score_answers_by_hand():
    port = chunk("c1", "The server listens on port 8080 by default.")
    logs = chunk("c2", "Logs rotate daily at midnight.")
    judged = [
        # answerable, answered correctly, cites the chunk with the gold answer, which is its own passage
        Judged(
            answer("The server listens on port 8080 [1].", cites=("c1",), sources=(port,)),
            ("8080",),
            True,
            10.0,
            frozenset({"c1"}),
        ),
        # answerable, answered wrongly (gold absent), citing a chunk without the gold
        Judged(answer("Logs rotate daily [1].", cites=("c2",), sources=(logs,)), ("weekly",), True, 20.0),
        # answerable but refused: a false positive for refusal
        Judged(answer(REFUSAL_TEXT, status=Status.REFUSED), ("midnight",), True, 30.0, frozenset({"c2"})),
        # unanswerable and refused: a true positive
        Judged(answer(REFUSAL_TEXT, status=Status.REFUSED), (), False, 40.0),
        # unanswerable but answered, with a citation to a chunk that was never retrieved: fn, invalid citation
        Judged(
            answer("Probably 42 [1].", cites=("c9",), sources=(logs,), exit_reason=ExitReason.MAX_TURNS_REACHED),
            (),
            False,
            50.0,
        ),
    ]
    r = score_answers(judged)
    assert (r["questions"], r["answerable"], r["unanswerable"], r["refused"]) == (5, 3, 2, 2)
    # tp 1, fp 1, fn 1, tn 2 → P = 1/2, R = 1/2, F1 = 2 / (2 + 1 + 1) = 0.5
    assert r["refusal"] == {"precision": 0.5, "recall": 0.5, "f1": 0.5, "tp": 1, "fp": 1, "fn": 1, "tn": 2}
    # Answer recall over the 3 answerable: 1, 0, 0 → 1/3. Over the 2 answered (not refused): 1, 0 → 1/2.
    assert r["answer_recall"] == pytest.approx(0.3333)
    assert r["answer_recall_answered"] == 0.5
    # Token F1 of q1: "server listens on port 8080" (5) vs "8080" (1): P = 1/5, R = 1 → F1 = 2·0.2/1.2 = 1/3.
    # q2 and q3 share no token with their golds → 0. Mean over 3 answerable = 1/9; over 2 answered = 1/6.
    assert r["token_f1"] == pytest.approx(round(1 / 9, 4))
    assert r["token_f1_answered"] == pytest.approx(round(1 / 6, 4))
    # Citations: c1 valid, c2 valid, c9 invalid → 2/3.
    assert r["citations"] == 3
    assert r["citation_validity"] == pytest.approx(0.6667)
    # Support over the 3 answerable: only q1's cited chunk holds its gold → 1/3.
    assert r["citation_support"] == pytest.approx(0.3333)
    # Own-passage citation, among answerable questions with a known passage (q1, q3): q1 yes, q3 no → 1/2.
    assert r["context_citation"] == 0.5
    assert r["exit_reasons"] == {"COMPLETED": 4, "MAX_TURNS_REACHED": 1}
    assert r["statuses"] == {"refused": 2, "success": 3}
    assert (r["latency_p50_ms"], r["latency_p95_ms"]) == (30.0, 48.0)  # p95: index 3.8 → 40 + 0.8·10


def _answer(text: str, status: str = "success") -> Answer:
    return Answer(question="q", answer=text, status=status, exit_reason="COMPLETED")


def test_judge_docs_questions():
    from citewise.eval.metrics import judge

    right = _answer("Run `citewise serve --port 8080` [1].")
    assert judge(right, answerable=True, expect_any=["--PORT"]) == "right"  # case and markdown ignored
    assert judge(right, answerable=True, expect_any=["--host"]) == "wrong"
    assert judge(right, answerable=True, expect_all=[["serve"], ["8080", "9090"]]) == "right"
    assert judge(right, answerable=True, expect_all=[["serve"], ["9090"]]) == "wrong"  # one part missing
    refused = _answer("I don't have enough information in the current documentation to answer that.", "refused")
    assert judge(refused, answerable=True, expect_any=["--port"]) == "refused"
    assert judge(refused, answerable=False) == "refused"
    assert judge(right, answerable=False) == "answered"
    assert judge(_answer("failed", "error"), answerable=True, expect_any=["x"]) == "refused"
    # A gold answer: contained, or half its words present.
    gold = ["Verbatim sentences from the documents"]
    assert judge(_answer("Quote mode quotes verbatim sentences [1]."), answerable=True, golds=gold) == "right"
    assert judge(_answer("Quote mode needs no model [1]."), answerable=True, golds=gold) == "wrong"


def test_score_docs_counts_and_shares():
    from citewise.eval.metrics import score_docs

    figures = score_docs([(True, "right"), (True, "wrong"), (True, "refused"), (True, "right"), (False, "refused")])
    assert figures["answerable"] == {
        "questions": 4,
        "right": 2,
        "right_share": 0.5,
        "wrong": 1,
        "wrong_share": 0.25,
        "refused": 1,
        "refused_share": 0.25,
    }
    assert figures["unanswerable"]["refused_share"] == 1.0 and figures["unanswerable"]["answered"] == 0
