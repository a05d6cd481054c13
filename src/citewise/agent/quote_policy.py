"""Quote mode's turn in the agent's loop: the answerer that calls no model.

The retrieve node has searched the whole question (a follow-up made whole with the conversation before it:
`citewise.agent.followup`; a long message condensed to the sentences that ask, its errors and names:
`citewise.agent.condense`; quote mode answers those sentences, never the pasted log). On its turn quote
mode searches each part of a multi-part question on its own (and each topic the question asked to search
separately), through the same search the tools run — real searches, numbered in the run's ledger and traced, not
tool calls staged for another node — then hands each part with the passages its own search found to the answerer
(`citewise.quote.QuoteAnswerer`) and keeps what it returns: the text, and the spans it quotes, which grounding turns
into citations as they are.

An agent run whose model never wrote a usable answer (the forced synthesis) is answered the same way, from every
passage it gathered, the ones it opened first.
"""

from __future__ import annotations

import asyncio
from dataclasses import asdict
from typing import Any

from citewise.agent.condense import condense
from citewise.agent.state import AgentState
from citewise.agent.tools import MAX_QUERY_CHARS, SearchDocsArgs, ToolContext, run_search
from citewise.index.retriever import Retriever, apply_corrections
from citewise.index.vocabulary import VocabularyView
from citewise.quote import Part, Passage, QuoteAnswer, QuoteAnswerer, split_parts
from citewise.settings import Settings
from citewise.text import content_terms
from citewise.types import REFUSAL_TEXT, AnswerMode, AnswerStyle, ScoredChunk, TraceKind, trace_event


def refusal_text(constraints: dict[str, Any]) -> str:
    """The refusal, led by what the question demanded that the docs don't hold ("The docs list no third step")."""
    phrase = constraints.get("insufficiency_phrase")
    return f"{phrase}. {REFUSAL_TEXT}" if phrase else REFUSAL_TEXT


def quote_draft(result: QuoteAnswer, constraints: dict[str, Any]) -> dict[str, Any]:
    """What the run keeps of a quote answer for validation and grounding: the text (or the refusal) and the spans it
    quotes, [citation number, start, end]."""
    text = refusal_text(constraints) if result.refused else result.text
    return {"draft": text, "quotes": [[n, start, end] for n, start, end in result.quotes]}


def question_asked(message: str) -> str:
    """What quote mode answers of a message: the message, or of a long one (a log pasted with the question) the
    sentences that ask, as the run's first search condensed it (`citewise.agent.condense`)."""
    return condense(message, limit=MAX_QUERY_CHARS).question


def question_of(state: AgentState) -> str:
    """What the run answers: a follow-up made whole with the conversation (the retrieve node's `standalone`,
    `citewise.agent.followup`), else the message as asked."""
    return state.get("standalone") or state["request"].question


def _quote(state: AgentState) -> bool:
    return state["request"].mode == AnswerMode.QUOTE


def quote_search_depth(settings: Settings) -> int:
    """Passages a quote-mode search returns: twice the `quote.passages` it reads (a passage with nothing to quote
    gives way to the next), at least `agent.search_top_k`, at most what the retriever allows."""
    return min(settings.retrieval.max_top_k, max(settings.agent.search_top_k, 2 * settings.quote.passages))


class _SelectionWords:
    """The decision's corpus statistics (`citewise.quote.decide.CorpusStats`) of a selected text: one "chunk" holding
    the stems of its content words."""

    chunks = 1

    def __init__(self, text: str) -> None:
        self._stems = content_terms(text)

    def stem_df(self, term: str) -> int:
        return int(term in self._stems)


class QuotePolicy:
    """What quote mode does on its turn, bound to the settings and to the retriever (for corpus statistics)."""

    def __init__(self, settings: Settings, retriever: Retriever) -> None:
        self.settings = settings
        self.retriever = retriever
        self._answerer: QuoteAnswerer | None = None

    @property
    def answerer(self) -> QuoteAnswerer:
        if self._answerer is None:  # the reader model loads on the first answer, not with the agent
            self._answerer = QuoteAnswerer(self.settings.quote, models_dir=self.settings.model_cache_dir)
        return self._answerer

    def search_depth(self, state: AgentState) -> int:
        """Passages a search returns: quote mode reads `quote.passages` of them; a model reads what it is shown, so
        agent mode keeps `agent.search_top_k`."""
        if _quote(state):
            return quote_search_depth(self.settings)
        return self.settings.agent.search_top_k

    async def turn(self, state: AgentState, ctx: ToolContext) -> dict[str, Any]:
        """Search each part of the question (and each topic it asked to search separately) on its own, then answer
        every part with verbatim units of the passages its search found, or refuse it."""
        request = state["request"]
        ledger = ctx.ledger
        trace = ledger.trace
        turns = state.get("turns", 0) + 1
        constraints = state.get("constraints") or {}
        budget = request.limits.max_tool_calls - state.get("tool_calls", 0)
        used = 0
        numbered = {c.chunk_id: i + 1 for i, c in enumerate(ledger.sources)}
        parts = self.part_queries(question_asked(question_of(state)), ledger.corrections)
        first = ledger.found[0] if ledger.found else []
        found: list[list[tuple[int, ScoredChunk]]] = []

        def stopped() -> dict[str, Any]:  # a search failed: the node ends the run with the outage's message
            return {"turns": turns, "tool_calls": state.get("tool_calls", 0) + used, **ledger.update()}

        if len(parts) == 1:
            found.append([(numbered[i], ledger.sources[numbered[i] - 1]) for i in first if i in numbered])
        else:
            for part in parts:
                if used >= budget:
                    found.append([])
                    continue
                args = SearchDocsArgs(
                    query=part[:MAX_QUERY_CHARS],
                    top_k=self.search_depth(state),
                    selected_text_only=bool(request.selected_text),  # a selection's parts are looked for in it
                )
                found.append(await self._search(ctx, args))
                used += 1
                if ctx.failure:
                    return stopped()
        if constraints.get("min_searches", 1) > ledger.searches:  # "compare X and Y": each topic searched too
            for topic in list(dict.fromkeys(constraints.get("search_topics") or [])):
                if used >= budget or ledger.searches >= constraints.get("min_searches", 1):
                    break
                await self._search(ctx, SearchDocsArgs(query=topic[:MAX_QUERY_CHARS], top_k=self.search_depth(state)))
                used += 1
                if ctx.failure:
                    return stopped()

        asked = [Part(q, [Passage(n, c) for n, c in hits]) for q, hits in zip(parts, found, strict=True)]
        # The reader runs for a few hundred milliseconds: off the event loop, so other requests go on meanwhile.
        style, corpus = self.answer_settings(state)
        result = await asyncio.to_thread(self.answerer.answer, asked, style=style, corpus=corpus)
        read = list(dict.fromkeys(chunk_id for part in result.parts for chunk_id in part.read))
        opened = list(dict.fromkeys([*ledger.opened, *read]))
        ledger.opened = opened
        trace.append(
            trace_event(
                TraceKind.COMPOSE,
                "llm",
                used=list(result.used),
                refused=result.refused,
                reason=result.reason,
                read=read,
                parts=[asdict(p) for p in result.parts],
            )
        )
        refusal = None
        if result.refused:  # the answerer's own words are in the trace and the Answer; this is the stable code
            refusal = "empty_retrieval" if ledger.empty_retrieval else "weak_evidence"
        missing = [f"The documentation does not answer: {part}" for part in result.missing_parts]
        return {
            **ledger.update(),
            "turns": turns,
            "tool_calls": state.get("tool_calls", 0) + used,
            **quote_draft(result, constraints),
            "quote_refusal": refusal,
            "refusal_detail": result.reason,
            "insufficiencies": [*(state.get("insufficiencies") or []), *missing],
        }

    @staticmethod
    async def _search(ctx: ToolContext, args: SearchDocsArgs) -> list[tuple[int, ScoredChunk]]:
        """One search of quote mode's turn, traced as the search tool a model would call."""
        ctx.ledger.trace.append(trace_event(TraceKind.TOOL_CALL, "llm", tool="search_docs", args=args.model_dump()))
        _, hits = await run_search(ctx, args, node="llm")
        return hits

    def part_queries(self, question: str, corrections: dict[str, str]) -> list[str]:
        """What quote mode answers: the question, or each of its parts when it asks several things, with the
        spelling the first search corrected."""
        parts = split_parts(question)
        return [apply_corrections(p, corrections) for p in parts]

    def answer_settings(self, state: AgentState) -> tuple[AnswerStyle, VocabularyView | _SelectionWords | None]:
        """The answer's style and the words of what the answer may come from: the documents the asker sees (an
        in-memory view, safe to read from another thread), or the selected text when the question is about one
        (what the index never mentions says nothing about a selection that does)."""
        request = state["request"]
        style = AnswerStyle(request.style or AnswerStyle.DEFAULT)
        if request.selected_text:
            return style, _SelectionWords(request.selected_text)
        return style, self.retriever.vocabulary(request.owner)

    def answer(self, state: AgentState, parts: list[Part]) -> QuoteAnswer:
        style, corpus = self.answer_settings(state)
        return self.answerer.answer(parts, style=style, corpus=corpus)

    def missing_anchors(self, state: AgentState) -> tuple[str, ...]:
        """What the question names (identifiers, numbers, quoted strings, names) that no passage of the run holds —
        quote mode's anchor guard, asked of a model's answer: the docs it was shown never mention them."""
        from citewise.quote.compose import Passage
        from citewise.quote.decide import missing_anchors
        from citewise.quote.question import analyse

        sources = state.get("sources") or []
        if not sources:
            return ()
        _, corpus = self.answer_settings(state)
        asked = apply_corrections(question_asked(question_of(state)), state.get("corrections") or {})
        question = analyse(asked)  # a misspelt name the search corrected is not missing
        return missing_anchors(question, [Passage(i + 1, c) for i, c in enumerate(sources)], corpus)

    def synthesize(self, state: AgentState) -> QuoteAnswer:
        """An agent run's answer from everything it gathered (the passages it opened first), when its model never
        wrote one that passed validation: verbatim units, cited, or the refusal."""
        opened = set(state.get("opened") or [])
        numbered = list(enumerate(state.get("sources") or [], start=1))
        ordered = sorted(numbered, key=lambda nc: (nc[1].chunk_id not in opened, nc[0]))
        question = question_asked(question_of(state))
        return self.answer(state, [Part(question, [Passage(n, c) for n, c in ordered])])
