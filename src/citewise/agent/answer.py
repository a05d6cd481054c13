"""The one place an `Answer` is built, and the facts it carries besides the text: status, retryable, closest
sections of a refusal, conflicts among the sources, and the run's determinism fingerprints.

A node that ends the run describes how it ended in an `Ending` and calls `finish`; everything else comes from the
run's state (with the node's own update merged in first) and from the one exit-reason table (limits.py).
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from citewise.agent.conflicts import find_conflicts
from citewise.agent.limits import EXIT_REASONS, RETRIEVAL_OUTAGE, ExitInfo
from citewise.agent.messages import ai, message_text
from citewise.agent.state import AgentState
from citewise.quote.question import question_focus
from citewise.settings import Settings
from citewise.text import content_terms, stem
from citewise.types import (
    REFUSAL_TEXT,
    Answer,
    AnswerMode,
    Chunk,
    Citation,
    Determinism,
    ExitReason,
    RetrievalFailure,
    ScoredChunk,
    SectionRef,
    Status,
    TraceEvent,
    TraceKind,
    trace_event,
)

CLOSEST_SECTIONS = 3


@dataclass(frozen=True)
class Ending:
    """How a run ended, as the node that ends it knows it. An exit reason set earlier in the run wins over
    `reason` (a run that ran out of tool calls and then answered still ends MAX_TOOL_CALLS_REACHED)."""

    reason: ExitReason
    node: str
    text: str | None = None  # None: the exit reason's message
    citations: list[Citation] = field(default_factory=list)
    status: Status | None = None  # None: from the table, else refused/success from the text
    refusal_reason: str | None = None
    retrieval_failure: RetrievalFailure | None = None  # the index could not be searched (an outage)
    retry_after_s: float | None = None  # the provider's own Retry-After, when a provider failure ended the run


def is_refusal(text: str) -> bool:
    return " ".join(REFUSAL_TEXT.split()) in " ".join((text or "").split())


class AnswerBuilder:
    """Builds the Answer of a run from its state; bound to what the fingerprints need (settings, index version)."""

    def __init__(
        self,
        settings: Settings,
        index_version: Callable[[], int],
        revisions: Callable[[Iterable[str]], dict[str, str]] = lambda doc_ids: {},
    ) -> None:
        self.settings = settings
        self._index_version = index_version
        self._revisions = revisions  # doc_id → the Git commit it was read at (Retriever.revisions)

    def finish(self, state: AgentState, ending: Ending, **update: Any) -> dict[str, Any]:
        """The state update that ends the run: `update` (what the node changed) plus the Answer and the exit step."""
        state = {**state, **update}  # type: ignore[typeddict-item]
        reason = ExitReason(state.get("exit_reason") or ending.reason)
        info = RETRIEVAL_OUTAGE if ending.retrieval_failure else EXIT_REASONS[reason]
        text = ending.text
        if text is None:
            text = info.message.format(kind=ending.retrieval_failure) if ending.retrieval_failure else info.message
        citations = self._with_revisions(ending.citations)
        status = ending.status or info.status
        if status is None:
            status = Status.REFUSED if is_refusal(text) and not citations else Status.SUCCESS
        exit_step = trace_event(TraceKind.EXIT, ending.node, exit_reason=reason, status=status)
        trace = [*(state.get("trace") or []), exit_step]
        sources = list(state.get("sources") or [])
        constraints = state.get("constraints") or {}
        request = state["request"]
        refused = status == Status.REFUSED
        answer = Answer(
            question=request.question,
            answer=text,
            status=status,
            exit_reason=reason,
            retryable=info.retryable,
            retry_after_s=_retry_after(ending, info),
            mode=_answerer(state, reason),
            citations=citations,
            sources=sources,
            insufficiencies=list(state.get("insufficiencies") or []),
            refusal_reason=ending.refusal_reason,
            refusal_detail=state.get("refusal_detail") if refused else None,
            closest_sections=(
                closest_sections(sources, state.get("standalone") or request.question, state.get("corrections") or {})
                if refused
                else []
            ),
            empty_retrieval=bool(state.get("empty_retrieval")) and state.get("searches", 0) > 0,
            retrieval_failure=ending.retrieval_failure,
            conflicting_info=find_conflicts(
                self._conflict_sources(state, sources), newest_rule=bool(constraints.get("newest_dated_rule"))
            ),
            determinism=determinism(self.input_payload(state), text, citations, reason),
            trace=[TraceEvent(**e) for e in trace] if request.trace else [],
            session_id=request.session_id,
            cached=state.get("model_calls", 0) > 0 and state.get("cached_calls", 0) == state.get("model_calls", 0),
        )
        out: dict[str, Any] = {**update, "exit_reason": reason, "answer": answer, "trace": trace, "draft": None}
        if request.question.strip():
            out["messages"] = [ai(text)]  # the conversation keeps the answer the user saw
        return out

    @staticmethod
    def _conflict_sources(state: AgentState, sources: list[ScoredChunk]) -> list[ScoredChunk]:
        """What conflicts are looked for in: everything the run found, but in quote mode only the passages it read
        (its searches return twice as many, `quote_search_depth`, for the readable ones to be among them)."""
        if state["request"].mode != AnswerMode.QUOTE:
            return sources
        opened = set(state.get("opened") or [])
        return [chunk for chunk in sources if chunk.chunk_id in opened]

    def _with_revisions(self, citations: list[Citation]) -> list[Citation]:
        """Each citation of a document synced from Git carries the commit it was read at (from its registry row)."""
        if not citations:
            return citations
        revisions = self._revisions({c.doc_id for c in citations})
        return [
            c.model_copy(update={"revision": revisions[c.doc_id]}) if c.doc_id in revisions else c for c in citations
        ]

    def input_payload(self, state: AgentState) -> dict[str, Any]:
        """What decides a run's output: hashed into `determinism.input_hash`."""
        s = self.settings
        request = state["request"]
        selected = request.selected_text
        return {
            "question": request.question,
            "owner": request.owner.id,
            "selected_text_sha256": hashlib.sha256(selected.encode()).hexdigest() if selected else None,
            "style": str(request.style),
            "mode": state.get("answerer"),
            "history": [(m.type, message_text(m)) for m in (state.get("messages") or [])],
            "index_version": self._index_version(),
            "embeddings": s.embeddings,
            "llm": s.llm,
            "llm_fallbacks": list(s.llm_fallbacks),
            "retrieval": s.retrieval.model_dump(mode="json"),
            "agent": s.agent.model_dump(mode="json"),
            "generation": s.generation.model_dump(mode="json", include={"temperature", "seed", "max_tokens"}),
        }


def _retry_after(ending: Ending, info: ExitInfo) -> float | None:
    """How long to wait before a retry: the provider's own Retry-After, else the row's; None when one won't help."""
    if not info.retryable:
        return None
    return ending.retry_after_s if ending.retry_after_s is not None else info.retry_after_s


def _answerer(state: AgentState, reason: ExitReason) -> str:
    """Who answered: quote mode's name, else the model that wrote the last reply (a fallback, when the primary
    failed), else the configured one."""
    answerer = str(state.get("answerer") or "")
    if reason == ExitReason.EMPTY_INPUT or state["request"].mode == AnswerMode.QUOTE:
        return answerer
    return state.get("model_used") or answerer


def subject_terms(question: str, corrections: Mapping[str, str] | None = None) -> set[str]:
    """What the question is about, as stems: the content words of its focus (`question_focus`: without "Hi, quick
    question:" and the like; stop words left out), a misspelt word counted as the index word searched instead."""
    terms = content_terms(question_focus(question))
    for wrong, right in (corrections or {}).items():
        if stem(wrong) in terms:
            terms.discard(stem(wrong))
            terms |= content_terms(right)
    return terms


def on_subject(chunk: Chunk, terms: set[str]) -> bool:
    """Whether a section is on the question's subject: it holds (in its headings, title, file name or text) more
    than half of the question's subject terms. A sourdough-bread question's subject is sourdough and bread: a
    "Recipes" section that shares only "recipe" is not on it; "How do I rotate the API key?" and an "API keys"
    section share two of three."""
    if not terms:
        return False
    held = terms & content_terms(" ".join((chunk.filename, chunk.title, chunk.chapter, chunk.text)))
    return len(held) * 2 > len(terms)


def closest_sections(
    sources: Sequence[ScoredChunk], question: str, corrections: Mapping[str, str] | None = None
) -> list[SectionRef]:
    """The first few distinct sections among what the run found that are on the question's subject (`on_subject`),
    in the order it found them (the first search's best first): where a reader may look when the docs don't answer
    the question itself. None when nothing found is on its subject: a section that merely came closest is no place
    to look."""
    terms = subject_terms(question, corrections)
    seen: set[tuple[str, str]] = set()
    out: list[SectionRef] = []
    for chunk in sources:
        if chunk.section in seen or not on_subject(chunk, terms):  # another chunk of a section may be on it
            continue
        seen.add(chunk.section)
        out.append(SectionRef.of(chunk))
        if len(out) == CLOSEST_SECTIONS:
            break
    return out


def _canonical(value: Any) -> bytes:
    return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False, default=str).encode()


def determinism(
    input_payload: Mapping[str, Any], answer_text: str, citations: Sequence[Citation], exit_reason: Any
) -> Determinism:
    """sha256 of the canonical JSON of the run's input (question, options, index version, model settings) and of its
    output (answer text, citations, exit reason): two runs that should be identical have equal hashes."""
    output = {
        "answer": answer_text,
        "citations": [c.model_dump(mode="json") for c in citations],
        "exit_reason": str(exit_reason),
    }
    return Determinism(
        input_hash=hashlib.sha256(_canonical(dict(input_payload))).hexdigest(),
        output_hash=hashlib.sha256(_canonical(output)).hexdigest(),
    )
