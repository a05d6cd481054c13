"""A refusal's closest sections are places to read on the question's subject, never whatever merely came closest; and
every refusal's reason is written in a reader's words (issue 33, part 5)."""

from __future__ import annotations

import re

from citewise.agent.answer import closest_sections, on_subject, subject_terms
from citewise.feedback.analytics import REFUSAL_WORDS
from citewise.types import ScoredChunk

# Words that make sense to whoever built the index, not to a reader of the docs.
JARGON = re.compile(r"passage|chunk|retriev|score|evidence|index|quote|token|embedding", re.I)


def section(chapter: str, text: str, *, doc: str = "guide.md", index: int = 0) -> ScoredChunk:
    return ScoredChunk(
        chunk_id=f"{doc}-{index}", doc_id=doc, chunk_index=index, text=text, filename=doc, chapter=chapter, score=0.5
    )


RECIPES = section("Configuration > Common recipes", "Recipes for common setups: larger chunks, a stricter cutoff.")
KEYS = section("Server > API keys", "Each API key maps to an owner. Keys are read from CITEWISE_API_KEYS.", index=1)
TLS = section("Server > TLS", "Put a reverse proxy in front of the server to terminate TLS.", index=2)


def test_a_section_that_shares_only_an_incidental_word_is_not_on_the_subject():
    terms = subject_terms("Is there a recipe for sourdough bread?")
    assert terms == {"recip", "sourdough", "bread"}
    assert not on_subject(RECIPES, terms)  # one word of three: "recipe" is not what the question is about
    assert closest_sections([RECIPES], "Is there a recipe for sourdough bread?") == []


def test_a_section_that_holds_most_of_the_subject_is_shown():
    sections = closest_sections([TLS, KEYS, RECIPES], "How do I rotate an API key?")
    assert [s.chapter for s in sections] == ["Server > API keys"]  # "api" and "key": two of three


def test_the_subject_is_the_questions_focus_with_misspellings_corrected():
    # The conversation around the question says nothing about its subject; a misspelt word counts as the index
    # word the search used instead.
    plain = subject_terms("How do I rotate an API key?")
    assert subject_terms("Hi! Quick question: how do I rotate an API key?") == plain
    assert subject_terms("How do I rotaet an API key?", {"rotaet": "rotate"}) == {"rotat", "api", "key"}
    assert subject_terms("How?") == set()
    assert closest_sections([KEYS], "How?") == []


def test_closest_sections_are_distinct_in_the_order_found_and_at_most_three():
    chunks = [section(f"Keys > Part {i}", "API keys and their owners.", doc=f"d{i}.md") for i in range(5)]
    chunks.insert(1, section("Keys > Part 0", "More about API keys.", doc="d0.md", index=1))  # same section again
    shown = closest_sections(chunks, "Which owner does an API key map to?")
    assert [s.chapter for s in shown] == ["Keys > Part 0", "Keys > Part 1", "Keys > Part 2"]


def test_a_sections_later_chunk_may_put_it_on_the_subject():
    first = section("Server > Owners", "Owners are listed in citewise.toml.", doc="s.md")
    later = section("Server > Owners", "To rotate an API key, add the new key, then remove the old one.", doc="s.md")
    later.chunk_id, later.chunk_index = "s.md-1", 1
    shown = closest_sections([first, later], "How do I rotate an API key?")
    assert [s.chunk_id for s in shown] == ["s.md-1"]


def test_refusal_words_are_a_readers_words():
    for code, words in REFUSAL_WORDS.items():
        assert not JARGON.search(words), (code, words)
        assert words.endswith(".") and words[0].isupper()
