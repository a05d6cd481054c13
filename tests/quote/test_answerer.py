"""Quote mode's answerer behind its contract: parts with their passages in, a typed answer out — its text and the
spans it quotes — with the shipped reader, never a stand-in."""

from __future__ import annotations

import pytest

from citewise.quote import Part, Passage, QuoteAnswerer
from citewise.settings import QuoteSettings
from citewise.text import answer_units
from citewise.types import REFUSAL_TEXT, ScoredChunk

CONFIG = (
    "The daemon reads its settings from `/etc/orbitron.toml`. It listens on port 7433 by default.\n\n"
    "To change the port, set `port` in the `[server]` table:\n\n```toml\n[server]\nport = 8080\n```"
)
QUEUES = "Queues are created explicitly. Run `orbitron queue create --name emails` to create one."


def passage(n: int, text: str, chapter: str) -> Passage:
    chunk = ScoredChunk(
        chunk_id=f"c{n}", doc_id=f"d{n}", chunk_index=0, text=text, filename=f"page{n}.md", title="Orbitron guide",
        chapter=chapter, score=1.0 / n, units=answer_units(text),
    )  # fmt: skip
    return Passage(n, chunk)


PASSAGES = [passage(1, CONFIG, "Configuration"), passage(2, QUEUES, "Queues")]


@pytest.fixture(scope="module")
def answerer() -> QuoteAnswerer:
    return QuoteAnswerer(QuoteSettings())


def test_the_answer_is_made_of_verbatim_units_and_says_which(answerer):
    result = answerer.answer([Part("What port does the daemon listen on by default?", PASSAGES)])
    assert not result.refused and "7433" in result.text
    texts = {p.n: p.chunk.text for p in PASSAGES}
    for n, start, end in result.quotes:
        unit = texts[n][start:end]
        assert (start, end) in [(a, b) for a, b, _ in PASSAGES[n - 1].units]
        assert " ".join(unit.split()) in " ".join(result.text.split()) or unit.startswith("```")
    assert result.used == list(dict.fromkeys(n for n, _, _ in result.quotes))
    part = result.parts[0]
    assert "7433" in part.best and part.read == ["c1", "c2"] and set(part.features) >= {"best", "margin"}


def test_a_question_the_passages_do_not_answer_is_refused_in_plain_words(answerer):
    result = answerer.answer([Part("How do I deploy Orbitron on Kubernetes?", PASSAGES)])
    assert result.refused and result.text == REFUSAL_TEXT and result.quotes == []
    assert "Kubernetes" in (result.reason or "")  # the anchor no passage names


def test_each_part_is_answered_from_its_own_passages(answerer):
    result = answerer.answer(
        [Part("What port does the daemon listen on?", PASSAGES[:1]), Part("How do I create a queue?", PASSAGES[1:])]
    )
    assert [p.refused for p in result.parts] == [False, False]
    assert "7433" in result.text and "orbitron queue create" in result.text


def test_the_same_question_gives_the_same_answer(answerer):
    first = answerer.answer([Part("How do I change the port?", PASSAGES)])
    again = QuoteAnswerer(QuoteSettings()).answer([Part("How do I change the port?", PASSAGES)])
    assert (first.text, first.quotes, first.parts) == (again.text, again.quotes, again.parts)
