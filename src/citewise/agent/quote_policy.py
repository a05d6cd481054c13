"""Quote mode's turn in the agent's loop: the deterministic stand-in for a model.

The quote package (`citewise.quote`) is the answerer: given each part of a question and the passages its own search
found, it quotes verbatim sentences or refuses. This module drives it from the run's state, through the same tools a
model uses: search each part of the question (and each topic the question asked to search separately) on its own,
follow a pointer when the only matching sentence says "See [X](x.md)", then compose. An agent run whose model never
wrote a usable answer (the forced synthesis) is composed here too, from everything it gathered.
"""

from __future__ import annotations

from dataclasses import asdict
from typing import Any

from citewise.agent import messages as msg
from citewise.agent.state import AgentState
from citewise.agent.tools import MAX_QUERY_CHARS, SEARCH_DOCS, SearchDocsArgs, call_key, result_key
from citewise.index.retriever import Retriever, apply_corrections
from citewise.quote import Part, Profile, QuoteAnswer, analyse, split_parts
from citewise.quote import answer as answer_quotes
from citewise.settings import Settings
from citewise.types import REFUSAL_TEXT, AnswerMode, AnswerStyle, TraceKind, trace_event


def refusal_text(constraints: dict[str, Any]) -> str:
    """The refusal, led by what the question demanded that the docs don't hold ("The docs list no third step")."""
    phrase = constraints.get("insufficiency_phrase")
    return f"{phrase}. {REFUSAL_TEXT}" if phrase else REFUSAL_TEXT


def _quote(state: AgentState) -> bool:
    return state["request"].mode == AnswerMode.QUOTE


def quote_search_depth(settings: Settings) -> int:
    """Passages a quote-mode search returns: twice the `quote.passages` it reads (`quote.readable`: a passage of page
    furniture alone gives way to the next), at least `agent.search_top_k`, at most what the retriever allows."""
    return min(settings.retrieval.max_top_k, max(settings.agent.search_top_k, 2 * settings.quote.passages))


class QuotePolicy:
    """What quote mode does on its turn, bound to the settings and to the retriever (for corpus statistics)."""

    def __init__(self, settings: Settings, retriever: Retriever) -> None:
        self.settings = settings
        self.retriever = retriever

    def search_depth(self, state: AgentState) -> int:
        """Passages a search returns: quote mode reads `quote.passages` of them (it weighs every sentence; a model
        reads what it is shown, so agent mode keeps `agent.search_top_k`), the first that hold something to quote
        (`quote_search_depth`)."""
        if _quote(state):
            return quote_search_depth(self.settings)
        return self.settings.agent.search_top_k

    def turn(self, state: AgentState) -> dict[str, Any]:
        """Search each part of the question (and each topic it asked to search separately) on its own, then answer
        every part with verbatim sentences of the passages its search found, or refuse it."""
        trace = list(state.get("trace") or [])
        turns = state.get("turns", 0) + 1
        base = {"turns": turns, "trace": trace}
        scratch = list(state.get("scratch") or [])
        constraints = state.get("constraints") or {}
        remaining = state["request"].limits.max_tool_calls - state.get("tool_calls", 0)
        done = set((state.get("tool_log") or {}).keys())
        calls: list[dict[str, Any]] = []
        if not state.get("force_final"):
            wanted = [*self.part_queries(state)[1:]]
            if constraints.get("min_searches", 1) > state.get("searches", 0):
                wanted += list(constraints.get("search_topics") or [])
            for query in dict.fromkeys(wanted):
                args = SearchDocsArgs(query=query[:MAX_QUERY_CHARS], top_k=self.search_depth(state))
                dumped = args.model_dump()
                if call_key(SEARCH_DOCS, dumped) not in done and len(calls) < remaining:
                    calls.append({"name": SEARCH_DOCS, "args": dumped})
        if calls:
            calls = [{**c, "id": f"quote_{turns}_{i}", "type": "tool_call"} for i, c in enumerate(calls)]
            trace.extend(trace_event(TraceKind.TOOL_CALL, "llm", tool=c["name"], args=c["args"]) for c in calls)
            return {**base, "scratch": [*scratch, msg.ai("", calls)]}

        result, read = self.compose(state)
        follow = self._pointer_searches(state, result, remaining, done, turns)
        if follow:  # the only sentences that matched point to another page: read that page first
            trace.extend(
                trace_event(TraceKind.TOOL_CALL, "llm", tool=c["name"], args=c["args"], pointer=True) for c in follow
            )
            return {**base, "scratch": [*scratch, msg.ai("", follow)]}
        opened = list(dict.fromkeys([*(state.get("opened") or []), *read]))
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
        text = refusal_text(constraints) if result.refused else result.text
        refusal = None
        if result.refused:  # the composer's own words are in the trace and the Answer; this is the stable code
            refusal = "empty_retrieval" if state.get("empty_retrieval") else "weak_evidence"
        missing = [f"The documentation does not answer: {part}" for part in result.missing_parts]
        insufficiencies = [*(state.get("insufficiencies") or []), *missing]
        return {
            **base,
            "draft": text,
            "quote_refusal": refusal,
            "refusal_detail": result.reason,
            "opened": opened,
            "insufficiencies": insufficiencies,
        }

    def _pointer_searches(
        self, state: AgentState, result: QuoteAnswer, remaining: int, done: set[str], turns: int
    ) -> list[dict[str, Any]]:
        """Searches inside the documents a part's only quotes point to ("See [Asking questions](answers.md) for …"),
        once each and within the budget: a pointer is quoted only when the page it names doesn't answer either."""
        calls: list[dict[str, Any]] = []
        queries = self.part_queries(state)
        parts = queries[1:] if len(queries) > 1 else queries
        for part, report in zip(parts, result.parts, strict=False):
            for target in report.pointers:
                args = SearchDocsArgs(query=part[:MAX_QUERY_CHARS], top_k=self.search_depth(state), filename=target)
                dumped = args.model_dump()
                if call_key(SEARCH_DOCS, dumped) not in done and len(calls) < remaining:
                    calls.append({"name": SEARCH_DOCS, "args": dumped})
        return [{**c, "id": f"quote_{turns}_p{i}", "type": "tool_call"} for i, c in enumerate(calls)]

    def part_queries(self, state: AgentState) -> list[str]:
        """What quote mode searches for: the question (the mandatory search), then each of its parts when it asks
        several things, with the spelling the first search corrected."""
        question = state["request"].question.strip()
        parts = split_parts(question)
        if len(parts) < 2:
            return [question]
        corrections = state.get("corrections") or {}
        return [question, *(apply_corrections(p, corrections) for p in parts)]

    def compose(self, state: AgentState) -> tuple[QuoteAnswer, list[str]]:
        """Verbatim sentences for every part of the question, from the passages its own search found (numbered as
        the run numbered its sources), and the chunk ids read to compose them. Quote mode's answer and an agent
        run's forced synthesis share this."""
        request = state["request"]
        numbered = {c.chunk_id: (i + 1, c) for i, c in enumerate(state.get("sources") or [])}
        results = state.get("search_results") or {}
        profiles = state.get("search_profiles") or {}
        corrections = state.get("corrections") or {}
        queries = self.part_queries(state)
        questions = queries[1:] if len(queries) > 1 else queries
        parts: list[Part] = []
        quote = _quote(state)
        for query in questions:
            ids = results.get(query[:MAX_QUERY_CHARS]) or results.get(request.question.strip()[:MAX_QUERY_CHARS])
            if ids is None or not quote:  # an agent run's searches: everything it gathered, opened passages first
                opened = set(state.get("opened") or [])
                chunks = sorted(numbered.values(), key=lambda nc: (nc[1].chunk_id not in opened, nc[0]))
            else:
                prefix = result_key(query[:MAX_QUERY_CHARS], "\x00").split("\x00")[0]  # "<query> [in "
                followed = [i for key, found in results.items() if key.startswith(prefix) for i in found]
                pointed = [numbered[i] for i in dict.fromkeys(followed) if i in numbered]
                own = [numbered[i] for i in ids if i in numbered and i not in followed]
                chunks = pointed + own
            profile = profiles.get(query[:MAX_QUERY_CHARS]) or {}
            parts.append(
                Part(
                    question=analyse(apply_corrections(query, corrections)),
                    chunks=chunks,
                    profile=Profile(
                        dense=tuple(profile.get("dense") or ()),
                        dense_top=tuple(profile.get("dense_top") or ()),
                        lexical_top=tuple(profile.get("lexical_top") or ()),
                    )
                    if profile
                    else None,
                )
            )
        result = answer_quotes(
            parts,
            self.settings.quote,
            style=AnswerStyle(request.style or AnswerStyle.DEFAULT),
            corpus=self.retriever.vocabulary(request.owner),
        )
        return result, list(dict.fromkeys(chunk_id for part in result.parts for chunk_id in part.read))
