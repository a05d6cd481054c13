"""One function per node of the agent graph, and the routing functions between them.

    guard → analyze → retrieve → llm ⇄ tools → validate → ground → END   (any node may end the run early)

Every node returns a partial state update. A node that ends the run sets `exit_reason` and `answer` (built by
`AgentNodes.finish`, the only place an `Answer` is made), and the routing functions send the run to END as soon
as `answer` is set. Which model to call, the retriever and the settings live on `AgentNodes`; everything that
changes during a run lives in the state, so a checkpointed session resumes exactly.

Quote mode runs the same nodes; only the llm node differs: instead of a model it runs a deterministic policy
(open the best retrieved passages through the `open_citation` tool, then compose an answer of verbatim sentences).
"""

from __future__ import annotations

import hashlib
import json
import logging
import re
import string
from collections.abc import Awaitable, Callable
from dataclasses import asdict
from typing import Any

from langchain_core.callbacks import adispatch_custom_event
from langchain_core.messages import AIMessage, AnyMessage, BaseMessage, HumanMessage, SystemMessage, ToolMessage
from langchain_core.runnables import RunnableConfig

from citewise.agent import prompts
from citewise.agent.constraints import Constraints, analyze_constraints
from citewise.agent.grounding import determinism, find_conflicts, strip_rag_metadata
from citewise.agent.grounding import ground as ground_text
from citewise.agent.limits import EXIT_REASONS, WELCOME_MESSAGE, Limits
from citewise.agent.planner import default_plan, parse_plan
from citewise.agent.state import AgentState
from citewise.agent.tools import (
    SEARCH_DOCS,
    Ledger,
    SearchDocsArgs,
    ToolContext,
    build_tools,
    call_key,
    result_key,
    validate_call,
)
from citewise.agent.validator import validate_answer
from citewise.errors import ProviderError, RateLimited, RetrievalError, ValidationError
from citewise.llm.protocol import FinalAction, ToolAction, parse_action, protocol_instructions
from citewise.quote import CorpusStats, Part, Profile, QuoteAnswer, analyse, split_parts
from citewise.quote import answer as answer_quotes
from citewise.settings import Settings
from citewise.types import (
    REFUSAL_TEXT,
    Answer,
    AnswerStyle,
    Citation,
    ExitReason,
    ScoredChunk,
    SectionRef,
    Status,
    TraceEvent,
)

log = logging.getLogger(__name__)

QUOTE_MODE = "extractive"
MAX_QUERY_CHARS = 1000

_MARKER_RE = re.compile(r"\[\d{1,4}\]")
_PUNCT = str.maketrans("", "", string.punctuation + "،؟!¡¿")


def is_quote_mode(mode: str | None) -> bool:
    return mode in (QUOTE_MODE, "quote")


def normalise_greeting(text: str) -> str:
    return " ".join(text.lower().translate(_PUNCT).split())


def is_refusal(text: str) -> bool:
    return " ".join(REFUSAL_TEXT.split()) in " ".join((text or "").split())


def message_text(message: BaseMessage) -> str:
    content = message.content
    if isinstance(content, str):
        return content
    parts = []
    for block in content:
        if isinstance(block, str):
            parts.append(block)
        elif isinstance(block, dict) and block.get("type") == "text":
            parts.append(str(block.get("text", "")))
    return "".join(parts)


def _chars(message: BaseMessage) -> int:
    size = len(message_text(message))
    for call in getattr(message, "tool_calls", None) or []:
        size += len(call["name"]) + len(json.dumps(call["args"], ensure_ascii=False))
    return size


def trim_newest_first(messages: list[AnyMessage], max_chars: int) -> tuple[list[AnyMessage], int]:
    """The newest messages that fit in `max_chars`, in order, and how many older ones were dropped."""
    kept: list[AnyMessage] = []
    total = 0
    for message in reversed(messages):
        size = _chars(message)
        if total + size > max_chars:
            break
        kept.append(message)
        total += size
    kept.reverse()
    return kept, len(messages) - len(kept)


def _event(type_: str, node: str, **data: Any) -> dict[str, Any]:
    return TraceEvent(type=type_, node=node, data=data).model_dump(mode="json")


Node = Callable[[AgentState, RunnableConfig], Awaitable[dict[str, Any]]]


class AgentNodes:
    """The graph's nodes, bound to what they work with: settings, the retriever and the model client."""

    def __init__(
        self,
        settings: Settings,
        *,
        retriever: Any,
        llm_client: Callable[[], Any],
        index_version: Callable[[], int],
    ) -> None:
        self.settings = settings
        self.limits = Limits.from_settings(settings)
        self.retriever = retriever
        self._llm_client = llm_client  # built on first use: quote mode never needs a model
        self._index_version = index_version

    # -- helpers ---------------------------------------------------------------------------------------------------
    def traced(self, name: str, fn: Node) -> Node:
        """Wrap a node so every trace event it adds is also streamed as an `on_custom_event` named "trace"."""

        async def node(state: AgentState, config: RunnableConfig) -> dict[str, Any]:
            before = len(state.get("trace") or [])
            update = await fn(state, config)
            for event in (update.get("trace") or [])[before:]:
                await adispatch_custom_event("trace", event, config=config)
            return update

        node.__name__ = name
        return node

    def tool_context(self, state: AgentState, ledger: Ledger) -> ToolContext:
        return ToolContext(
            retriever=self.retriever,
            ledger=ledger,
            owner=state.get("owner"),
            selected_text=state.get("selected_text"),
            tool_retries=self.limits.tool_retries,
        )

    def input_payload(self, state: AgentState) -> dict[str, Any]:
        """What decides a run's output: hashed into `determinism.input_hash`."""
        s = self.settings
        history = [(m.type, message_text(m)) for m in (state.get("messages") or [])]
        selected = state.get("selected_text")
        return {
            "question": state.get("question", ""),
            "owner": state.get("owner"),
            "selected_text_sha256": hashlib.sha256(selected.encode()).hexdigest() if selected else None,
            "style": str(state.get("style", "")),
            "mode": state.get("mode"),
            "history": history,
            "index_version": self._index_version(),
            "embeddings": s.embeddings,
            "llm": s.llm,
            "llm_fallbacks": list(s.llm_fallbacks),
            "retrieval": s.retrieval.model_dump(mode="json"),
            "agent": s.agent.model_dump(mode="json"),
            "generation": s.generation.model_dump(mode="json", include={"temperature", "seed", "max_tokens"}),
        }

    def answer_mode(self, state: AgentState) -> str:
        if is_quote_mode(state.get("mode")):
            return QUOTE_MODE
        return state.get("model_used") or str(state.get("mode") or "")

    def finish(
        self,
        state: AgentState,
        reason: ExitReason,
        *,
        node: str,
        text: str | None = None,
        citations: list[Citation] | None = None,
        status: Status | None = None,
        refusal_reason: str | None = None,
        retryable: bool | None = None,
        trace: list[dict[str, Any]] | None = None,
        insufficiencies: list[str] | None = None,
        extra: dict[str, Any] | None = None,
    ) -> dict[str, Any]:
        """End the run: the one place an `Answer` is built. An exit reason set earlier in the run wins (a run that
        ran out of tool calls and then answered still ends MAX_TOOL_CALLS_REACHED)."""
        reason = ExitReason(state.get("exit_reason") or reason)
        info = EXIT_REASONS[reason]
        text = info.message if text is None else text
        citations = self._with_revisions(citations or [])
        if status is None:
            status = info.status or (Status.REFUSED if is_refusal(text) and not citations else Status.SUCCESS)
        trace = list(trace if trace is not None else state.get("trace") or [])
        trace.append(_event("exit", node, exit_reason=str(reason), status=str(status)))
        sources = list(state.get("sources") or [])
        constraints = state.get("constraints") or {}
        conflicts = find_conflicts(sources, newest_rule=bool(constraints.get("newest_dated_rule")))
        refused = status == Status.REFUSED
        answer = Answer(
            question=state.get("question", ""),
            answer=text,
            status=status,
            exit_reason=reason,
            retryable=info.retryable if retryable is None else retryable,
            mode=self.answer_mode(state) if reason not in (ExitReason.EMPTY_INPUT,) else str(state.get("mode", "")),
            citations=citations,
            sources=sources,
            insufficiencies=list(
                insufficiencies if insufficiencies is not None else state.get("insufficiencies") or []
            ),
            refusal_reason=refusal_reason,
            refusal_detail=state.get("refusal_detail") if refused else None,
            closest_sections=closest_sections(sources) if refused else [],
            empty_retrieval=bool(state.get("empty_retrieval")) and state.get("searches", 0) > 0,
            conflicting_info=conflicts,
            determinism=determinism(self.input_payload(state), text, citations, reason),
            trace=[TraceEvent(**e) for e in trace] if state.get("include_trace", True) else [],
            session_id=state.get("session_id"),
            cached=state.get("model_calls", 0) > 0 and state.get("cached_calls", 0) == state.get("model_calls", 0),
        )
        update: dict[str, Any] = {"exit_reason": reason, "answer": answer, "trace": trace, "draft": None}
        if state.get("question", "").strip():
            update["messages"] = [AIMessage(content=text)]  # the conversation keeps the answer the user saw
        return {**update, **(extra or {})}

    def _with_revisions(self, citations: list[Citation]) -> list[Citation]:
        """Each citation of a document synced from Git carries the commit it was read at (from its registry row)."""
        kb = getattr(self.retriever, "kb", None)
        if not citations or kb is None:
            return citations
        revisions = kb.registry.revisions({c.doc_id for c in citations})
        return [
            c.model_copy(update={"revision": revisions[c.doc_id]}) if c.doc_id in revisions else c for c in citations
        ]

    # -- guard -----------------------------------------------------------------------------------------------------
    async def guard(self, state: AgentState, config: RunnableConfig) -> dict[str, Any]:
        question = state.get("question") or ""
        trace = list(state.get("trace") or [])
        if not question.strip():
            trace.append(_event("guard", "guard", outcome="empty_input"))
            return self.finish(state, ExitReason.EMPTY_INPUT, node="guard", trace=trace)
        if len(question) > self.limits.max_question_chars:
            raise ValidationError(
                f"The question is {len(question)} characters long; the limit is {self.limits.max_question_chars}."
            )
        greetings = {normalise_greeting(g) for g in self.settings.agent.greetings}
        if normalise_greeting(question) in greetings:
            trace.append(_event("guard", "guard", outcome="greeting"))
            return self.finish(
                state, ExitReason.COMPLETED, node="guard", text=WELCOME_MESSAGE, status=Status.SUCCESS, trace=trace
            )
        trace.append(_event("guard", "guard", outcome="question"))
        return {"trace": trace}

    # -- analyze ---------------------------------------------------------------------------------------------------
    async def analyze(self, state: AgentState, config: RunnableConfig) -> dict[str, Any]:
        question = state["question"]
        constraints = analyze_constraints(question).model_dump(mode="json")
        trace = list(state.get("trace") or [])
        trace.append(_event("constraints", "analyze", **constraints))
        counts: dict[str, int] = {}
        if is_quote_mode(state.get("mode")):
            plan, source = default_plan(), "default"
        else:
            try:
                reply = await self._llm_client().ainvoke(
                    [HumanMessage(content=prompts.plan_prompt(question))],
                    timeout=self.settings.generation.plan_timeout_s,
                    config={**config, "tags": [*(config.get("tags") or []), "citewise:plan"]},
                )
            except ProviderError as exc:
                return self._provider_failure(state, exc, node="analyze", trace=trace)
            parsed = parse_plan(message_text(reply))
            plan, source = (parsed, "model") if parsed else (default_plan(), "default")
            counts = _count_reply(state, reply)
        trace.append(_event("plan", "analyze", steps=plan, source=source))
        return {"constraints": constraints, "plan": plan, "trace": trace, **counts}

    def _provider_failure(
        self, state: AgentState, exc: ProviderError, *, node: str, trace: list[dict[str, Any]]
    ) -> dict[str, Any]:
        reason = ExitReason.RATE_LIMITED if isinstance(exc, RateLimited) else ExitReason.LLM_ERROR
        log.warning("LLM call failed for good (%s): %s", reason, exc)
        trace = [*trace, _event("llm_error", node, error=type(exc).__name__, message=str(exc)[:300])]
        return self.finish(state, reason, node=node, trace=trace)

    # -- retrieve: the first search is mandatory and happens in code -------------------------------------------------
    async def retrieve(self, state: AgentState, config: RunnableConfig) -> dict[str, Any]:
        ledger = Ledger.from_state(state)
        ctx = self.tool_context(state, ledger)
        selected = state.get("selected_text")
        args = SearchDocsArgs.model_construct(
            query=state["question"].strip()[:MAX_QUERY_CHARS],
            top_k=self._search_depth(state),
            selected_text_only=bool(selected),
            selected_text_content=None,
        ).model_dump()
        call = {"name": SEARCH_DOCS, "args": args, "id": "call_retrieve", "type": "tool_call"}
        ledger.trace.append(_event("tool_call", "retrieve", tool=SEARCH_DOCS, args=args, mandatory=True))
        tool = build_tools(ctx, node="retrieve")[0]
        result: ToolMessage = await tool.ainvoke(call, config=config)
        update = ledger.update()
        if ctx.failure:
            return self._retrieval_failed(state, update, ctx.failure, node="retrieve")
        scratch = [AIMessage(content="", tool_calls=[call]), result]
        return {**update, "scratch": scratch, "tool_log": {call_key(SEARCH_DOCS, args): message_text(result)}}

    def _retrieval_failed(
        self, state: AgentState, update: dict[str, Any], failure: dict[str, Any], *, node: str
    ) -> dict[str, Any]:
        merged = {**state, **update}
        return self.finish(
            merged,  # type: ignore[arg-type]
            ExitReason.COMPLETED,
            node=node,
            text=prompts.RETRIEVAL_FAILED.format(kind=failure["kind"]),
            status=Status.ERROR,
            refusal_reason=f"retrieval_failed:{failure['kind']}",
            retryable=True,
            trace=update["trace"],
            extra={k: v for k, v in update.items() if k != "trace"},
        )

    # -- llm ---------------------------------------------------------------------------------------------------------
    async def llm(self, state: AgentState, config: RunnableConfig) -> dict[str, Any]:
        if is_quote_mode(state.get("mode")):
            return self._quote_policy(state)
        return await self._agent_turn(state, config)

    def _remaining_tool_calls(self, state: AgentState) -> int:
        return self.limits.max_tool_calls - state.get("tool_calls", 0)

    async def _agent_turn(self, state: AgentState, config: RunnableConfig) -> dict[str, Any]:
        trace = list(state.get("trace") or [])
        turns = state.get("turns", 0) + 1
        if turns > self.limits.max_turns:
            if self._budget_spent(state):
                return self._synthesize_found(state, trace, why="max_turns")
            return self.finish(state, ExitReason.MAX_TURNS_REACHED, node="llm", trace=trace)

        client = self._llm_client()
        native = client.native_tools
        scratch = list(state.get("scratch") or [])
        history = [_without_markers(m) for m in (state.get("messages") or [])]
        context = history + (scratch if native else _as_protocol(scratch))
        kept, dropped = trim_newest_first(context, self.limits.max_context_chars)
        if dropped:
            trace.append(_event("context", "llm", dropped_messages=dropped, max_chars=self.limits.max_context_chars))
            return self.finish(state, ExitReason.MAX_CONTEXT_REACHED, node="llm", trace=trace)

        force_final = bool(state.get("force_final"))
        tools = build_tools(None)
        system = prompts.system_prompt(
            plan=state.get("plan") or default_plan(),
            constraints=state.get("constraints") or {},
            style=state.get("style") or AnswerStyle.DEFAULT,
            max_tool_calls=self.limits.max_tool_calls,
            remaining=0 if force_final else self._remaining_tool_calls(state),
        )
        if not native:
            system += "\n\n" + protocol_instructions(tools)
        # The system prompt goes in after trimming, so it is never what gets cut.
        messages = [SystemMessage(content=system), *kept]
        try:
            # Tools stay bound even when no more calls are allowed: some vendors reject a history holding tool calls
            # without tool definitions. A call made anyway is ignored (the prompt says the budget is spent).
            reply = await client.ainvoke(
                messages,
                tools=tools,
                timeout=self.settings.generation.chat_timeout_s,
                config=config,
            )
        except ProviderError as exc:
            return self._provider_failure(state, exc, node="llm", trace=trace)
        # Which model answered rides on the reply (the client is shared by concurrent runs).
        answered_by = (reply.response_metadata or {}).get("model_spec") or client.name
        if answered_by != client.name:
            trace.append(_event("fallback", "llm", primary=client.name, answered_by=answered_by))

        base = {"turns": turns, "trace": trace, "model_used": answered_by, **_count_reply(state, reply)}
        text = message_text(reply).strip()
        if native:
            calls, invalid = list(reply.tool_calls), list(getattr(reply, "invalid_tool_calls", None) or [])
            if invalid and not force_final:
                bad = invalid[0]
                trace.append(_event("invalid_tool_call", "llm", tool=bad.get("name"), error=bad.get("error")))
                return self.finish(state, ExitReason.INVALID_TOOL_CALL, node="llm", trace=trace)
            if calls and not force_final:
                calls = [{**c, "id": c.get("id") or f"call_{turns}_{i}"} for i, c in enumerate(calls)]
                ai = AIMessage(content=reply.content, tool_calls=calls, id=reply.id)
                trace.extend(_event("tool_call", "llm", tool=c["name"], args=c["args"]) for c in calls)
                return {**base, "scratch": [*scratch, ai]}
            insufficiencies: list[str] = []
        else:
            action = parse_action(text) if text else None
            if isinstance(action, ToolAction) and not force_final:
                call = {"name": action.tool, "args": action.input, "id": f"call_{turns}_0", "type": "tool_call"}
                trace.append(_event("tool_call", "llm", tool=action.tool, args=action.input, protocol=True))
                return {**base, "scratch": [*scratch, AIMessage(content=text, tool_calls=[call])]}
            if isinstance(action, FinalAction):
                text = (action.answer or "").strip()
                insufficiencies = [str(i) for i in (action.insufficiencies or []) if str(i).strip()]
            elif text and not force_final:
                if state.get("protocol_retries", 0) < 1:
                    trace.append(_event("reprompt", "llm", reason="unparseable_action", output=text[:300]))
                    reprompt = HumanMessage(content=prompts.PROTOCOL_REPROMPT)
                    return {
                        **base,
                        "scratch": [*scratch, AIMessage(content=text), reprompt],
                        "protocol_retries": state.get("protocol_retries", 0) + 1,
                    }
                trace.append(_event("invalid_tool_call", "llm", error="unparseable JSON action", output=text[:300]))
                return self.finish(state, ExitReason.INVALID_TOOL_CALL, node="llm", trace=trace)
            else:
                # Forced final answer from a protocol model that still wrote prose or a tool call: take prose as is.
                # (a tool call after the budget is spent has no answer in it: treated as an empty reply)
                text = "" if action is not None else text
                insufficiencies = []

        if not text:
            if not state.get("regenerated"):
                trace.append(_event("generation_failure", "llm", action="regenerate"))
                return {
                    **base,
                    "scratch": [*scratch, HumanMessage(content=prompts.regenerate())],
                    "regenerated": True,
                    "force_final": True,
                    "exit_reason": state.get("exit_reason") or ExitReason.LLM_GENERATION_FAILURE,
                }
            trace.append(_event("generation_failure", "llm", action="give_up"))
            if self._budget_spent(state):
                return {**base, **self._synthesize_found(state, trace, why="no_answer")}
            state = {**state, "exit_reason": state.get("exit_reason") or ExitReason.LLM_GENERATION_FAILURE}
            return self.finish(
                state,  # type: ignore[arg-type]
                ExitReason.LLM_GENERATION_FAILURE,
                node="llm",
                trace=trace,
                text=EXIT_REASONS[ExitReason.LLM_GENERATION_FAILURE].message,
                status=Status.ERROR,
            )
        trace.append(_event("draft", "llm", chars=len(text)))
        merged = list(state.get("insufficiencies") or []) + [i for i in insufficiencies if i]
        return {**base, "draft": text, "insufficiencies": merged}

    # -- the quote-mode policy -----------------------------------------------------------------------------------------
    def _quote_policy(self, state: AgentState) -> dict[str, Any]:
        """Deterministic stand-in for a model: search each part of the question (and each topic it asked to search
        separately) on its own, then answer every part with verbatim sentences of the passages its search found,
        or refuse it."""
        trace = list(state.get("trace") or [])
        turns = state.get("turns", 0) + 1
        base = {"turns": turns, "trace": trace}
        scratch = list(state.get("scratch") or [])
        constraints = state.get("constraints") or {}
        remaining = self._remaining_tool_calls(state)
        done = set((state.get("tool_log") or {}).keys())
        calls: list[dict[str, Any]] = []
        if not state.get("force_final"):
            wanted = [*self._part_queries(state)[1:]]
            if constraints.get("min_searches", 1) > state.get("searches", 0):
                wanted += list(constraints.get("search_topics") or [])
            for query in dict.fromkeys(wanted):
                args = SearchDocsArgs(query=query[:MAX_QUERY_CHARS], top_k=self._search_depth(state))
                dumped = args.model_dump()
                if call_key(SEARCH_DOCS, dumped) not in done and len(calls) < remaining:
                    calls.append({"name": SEARCH_DOCS, "args": dumped})
        if calls:
            calls = [{**c, "id": f"quote_{turns}_{i}", "type": "tool_call"} for i, c in enumerate(calls)]
            trace.extend(_event("tool_call", "llm", tool=c["name"], args=c["args"]) for c in calls)
            return {**base, "scratch": [*scratch, AIMessage(content="", tool_calls=calls)]}

        result, read = self._compose_quotes(state)
        follow = self._pointer_searches(state, result, remaining, done, turns)
        if follow:  # the only sentences that matched point to another page: read that page first
            trace.extend(_event("tool_call", "llm", tool=c["name"], args=c["args"], pointer=True) for c in follow)
            return {**base, "scratch": [*scratch, AIMessage(content="", tool_calls=follow)]}
        opened = list(dict.fromkeys([*(state.get("opened") or []), *read]))
        trace.append(
            _event(
                "compose",
                "llm",
                used=list(result.used),
                refused=result.refused,
                reason=result.reason,
                read=read,
                parts=[asdict(p) for p in result.parts],
            )
        )
        text = _refusal_text(constraints) if result.refused else result.text
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
        queries = self._part_queries(state)
        parts = queries[1:] if len(queries) > 1 else queries
        for part, report in zip(parts, result.parts, strict=False):
            for target in report.pointers:
                args = SearchDocsArgs(query=part[:MAX_QUERY_CHARS], top_k=self._search_depth(state), filename=target)
                dumped = args.model_dump()
                if call_key(SEARCH_DOCS, dumped) not in done and len(calls) < remaining:
                    calls.append({"name": SEARCH_DOCS, "args": dumped})
        return [{**c, "id": f"quote_{turns}_p{i}", "type": "tool_call"} for i, c in enumerate(calls)]

    def _search_depth(self, state: AgentState) -> int:
        """Passages a search returns: quote mode reads `quote.passages` of them (it weighs every sentence; a model
        reads what it is shown, so agent mode keeps `agent.search_top_k`)."""
        if is_quote_mode(state.get("mode")):
            return max(self.settings.agent.search_top_k, self.settings.quote.passages)
        return self.settings.agent.search_top_k

    def _part_queries(self, state: AgentState) -> list[str]:
        """What quote mode searches for: the question (the mandatory search), then each of its parts when it asks
        several things, with the spelling the first search corrected."""
        question = state["question"].strip()
        parts = split_parts(question)
        if len(parts) < 2:
            return [question]
        corrections = state.get("corrections") or {}
        return [question, *(_apply_corrections(p, corrections) for p in parts)]

    def _compose_quotes(self, state: AgentState) -> tuple[QuoteAnswer, list[str]]:
        """Verbatim sentences for every part of the question, from the passages its own search found (numbered as
        the run numbered its sources), and the chunk ids read to compose them. Quote mode's answer and an agent
        run's forced synthesis share this."""
        numbered = {c.chunk_id: (i + 1, c) for i, c in enumerate(state.get("sources") or [])}
        results = state.get("search_results") or {}
        profiles = state.get("search_profiles") or {}
        corrections = state.get("corrections") or {}
        queries = self._part_queries(state)
        questions = queries[1:] if len(queries) > 1 else queries
        limit = self.settings.quote.passages
        parts: list[Part] = []
        read: list[str] = []
        quote = is_quote_mode(state.get("mode"))
        for query in questions:
            ids = results.get(query[:MAX_QUERY_CHARS]) or results.get(state["question"].strip()[:MAX_QUERY_CHARS])
            if ids is None or not quote:  # an agent run's searches: everything it gathered, opened passages first
                opened = set(state.get("opened") or [])
                ordered = sorted(numbered.values(), key=lambda nc: (nc[1].chunk_id not in opened, nc[0]))
                chunks = ordered[:limit]
            else:
                prefix = result_key(query[:MAX_QUERY_CHARS], "\x00").split("\x00")[0]  # "<query> [in "
                followed = [i for key, found in results.items() if key.startswith(prefix) for i in found]
                pointed = [numbered[i] for i in dict.fromkeys(followed) if i in numbered]
                own = [numbered[i] for i in ids if i in numbered and i not in followed]
                chunks = pointed + own
            read += [c.chunk_id for _, c in chunks]
            profile = profiles.get(query[:MAX_QUERY_CHARS]) or {}
            parts.append(
                Part(
                    question=analyse(_apply_corrections(query, corrections)),
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
            style=AnswerStyle(state.get("style") or AnswerStyle.DEFAULT),
            corpus=self._corpus(state.get("owner")),
        )
        return result, list(dict.fromkeys(read))

    def _corpus(self, owner: str | None) -> CorpusStats | None:
        """The caller's view of the index vocabulary (chunk counts per word), or None when it can't be read: then
        quote mode weighs words by the passages alone."""
        kb = getattr(self.retriever, "kb", None)
        if kb is None or kb.manifest is None:
            return None
        try:
            return kb.vocabulary.view(owner)
        except (RetrievalError, OSError):
            return None

    # -- tools -------------------------------------------------------------------------------------------------------
    async def tools(self, state: AgentState, config: RunnableConfig) -> dict[str, Any]:
        scratch = list(state.get("scratch") or [])
        request: AIMessage = scratch[-1]
        ledger = Ledger.from_state(state)
        # Every call is checked before any runs: one invalid call ends the run with nothing half-done.
        checked = []
        for call in request.tool_calls:
            args, error = validate_call(call["name"], call.get("args"))
            if error:
                ledger.trace.append(_event("invalid_tool_call", "tools", tool=call["name"], error=error))
                return self.finish(state, ExitReason.INVALID_TOOL_CALL, node="tools", trace=ledger.trace)
            checked.append((call, args))

        ctx = self.tool_context(state, ledger)
        by_name = {t.name: t for t in build_tools(ctx, node="tools")}
        tool_log = dict(state.get("tool_log") or {})
        used = state.get("tool_calls", 0)
        exhausted = False
        results: list[ToolMessage] = []
        for call, args in checked:
            key = call_key(call["name"], args)
            if key in tool_log:  # the same call again: answered from the log, not counted
                ledger.trace.append(_event("tool_repeat", "tools", tool=call["name"], args=args))
                content = "(Same call as before; same result.)\n" + tool_log[key]
                results.append(ToolMessage(content=content, tool_call_id=call["id"], name=call["name"]))
                continue
            if used >= self.limits.max_tool_calls:
                exhausted = True
                ledger.trace.append(_event("tool_budget", "tools", tool=call["name"], limit=self.limits.max_tool_calls))
                content = f"TOOL_BUDGET_EXHAUSTED: the limit of {self.limits.max_tool_calls} tool calls is reached."
                results.append(ToolMessage(content=content, tool_call_id=call["id"], name=call["name"]))
                continue
            used += 1
            message = await by_name[call["name"]].ainvoke({**call, "args": args, "type": "tool_call"}, config=config)
            tool_log[key] = message_text(message)
            results.append(message)
            if ctx.failure:
                update = {**ledger.update(), "tool_calls": used, "tool_log": tool_log}
                return self._retrieval_failed(state, update, ctx.failure, node="tools")

        update: dict[str, Any] = {
            **ledger.update(),
            "scratch": [*scratch, *results],
            "tool_calls": used,
            "tool_log": tool_log,
        }
        if exhausted:
            update["force_final"] = True
            update["exit_reason"] = state.get("exit_reason") or ExitReason.MAX_TOOL_CALLS_REACHED
            if not is_quote_mode(state.get("mode")):
                update["scratch"].append(HumanMessage(content=prompts.force_final(self.limits.max_tool_calls)))
        return update

    # -- validate ----------------------------------------------------------------------------------------------------
    async def validate(self, state: AgentState, config: RunnableConfig) -> dict[str, Any]:
        # Plumbing the model echoed ("Similarity score: 0.83") is removed before the answer is shown, so it is
        # removed before it is judged too: it is not a claim.
        draft = strip_rag_metadata(state.get("draft") or "")
        trace = list(state.get("trace") or [])
        if state.get("synthesized"):  # verbatim sentences of the sources: grounded by construction, nothing to repair
            trace.append(_event("validation", "validate", ok=True, synthesized=True, errors=[]))
            return {"trace": trace}
        if is_refusal(draft) and not _MARKER_RE.search(draft):
            trace.append(_event("validation", "validate", ok=True, refusal=True, errors=[]))
            return {"trace": trace}
        numbered = {i + 1: c for i, c in enumerate(state.get("sources") or [])}
        result = validate_answer(
            draft,
            sources=numbered,
            opened=set(state.get("opened") or []),
            searches=state.get("searches", 0),
            constraints=Constraints(**(state.get("constraints") or {})),
        )
        errors = list(result.errors)
        if not _MARKER_RE.search(draft):
            errors.append("The answer cites no passage: end every factual sentence with its [n].")
        trace.append(_event("validation", "validate", ok=not errors, errors=errors))
        if not errors:
            return {"trace": trace}

        if is_quote_mode(state.get("mode")):
            # Verbatim sentences are grounded by construction; what failed is a requirement the docs couldn't meet.
            merged = list(state.get("insufficiencies") or []) + [
                e for e in errors if e not in (state.get("insufficiencies") or [])
            ]
            return {"trace": trace, "insufficiencies": merged}

        reprompts = state.get("reprompts", 0)
        if reprompts < self.limits.max_reprompts:
            remaining = 0 if state.get("force_final") else self._remaining_tool_calls(state)
            trace.append(_event("reprompt", "validate", attempt=reprompts + 1, errors=errors))
            scratch = [
                *(state.get("scratch") or []),
                AIMessage(content=draft),
                HumanMessage(content=prompts.reprompt(errors, remaining)),
            ]
            return {"trace": trace, "scratch": scratch, "reprompts": reprompts + 1, "draft": None}
        return self._forced_synthesis(state, errors, trace)

    @staticmethod
    def _budget_spent(state: AgentState) -> bool:
        return state.get("exit_reason") == ExitReason.MAX_TOOL_CALLS_REACHED

    def _synthesize_found(self, state: AgentState, trace: list[dict[str, Any]], *, why: str) -> dict[str, Any]:
        """The lookup budget is spent and the model did not write the answer (empty replies, or the turns ran out):
        MAX_TOOL_CALLS_REACHED promises an answer from what was found, so compose it from the gathered passages —
        verbatim and cited, or the refusal — as the forced synthesis does after failed validations."""
        result, _ = self._compose_quotes(state)
        text = _refusal_text(state.get("constraints") or {}) if result.refused else result.text
        trace = [*trace, _event("forced_synthesis", "llm", used=list(result.used), refused=result.refused, why=why)]
        return {"trace": trace, "draft": text, "synthesized": True}

    def _forced_synthesis(self, state: AgentState, errors: list[str], trace: list[dict[str, Any]]) -> dict[str, Any]:
        """The model could not produce an answer that passes validation: answer with verbatim sentences from what
        was gathered instead (grounded by construction), and say what was missing."""
        result, _ = self._compose_quotes(state)
        text = _refusal_text(state.get("constraints") or {}) if result.refused else result.text
        insufficiencies = list(state.get("insufficiencies") or []) + [
            e for e in errors if e not in (state.get("insufficiencies") or [])
        ]
        trace.append(_event("forced_synthesis", "validate", used=list(result.used), refused=result.refused))
        return {"trace": trace, "draft": text, "insufficiencies": insufficiencies, "synthesized": True}

    # -- ground ------------------------------------------------------------------------------------------------------
    async def ground(self, state: AgentState, config: RunnableConfig) -> dict[str, Any]:
        numbered = {i + 1: c for i, c in enumerate(state.get("sources") or [])}
        text, citations = ground_text(state.get("draft") or "", numbered)
        trace = list(state.get("trace") or [])
        refusal_reason = None
        if is_refusal(text) and not citations:
            refusal_reason = state.get("quote_refusal") or (
                "empty_retrieval" if state.get("empty_retrieval") else "not_in_documentation"
            )
        elif not citations:
            # An answer that cites nothing can't be checked against the docs: it does not leave the agent.
            trace.append(_event("uncited_answer", "ground", chars=len(text)))
            text, refusal_reason = _refusal_text(state.get("constraints") or {}), "uncited_answer"
        trace.append(_event("grounded", "ground", citations=[c.chunk_id for c in citations]))
        return self.finish(
            state,
            ExitReason.COMPLETED,
            node="ground",
            text=text,
            citations=citations,
            refusal_reason=refusal_reason,
            trace=trace,
        )


def _count_reply(state: AgentState, reply: AIMessage) -> dict[str, int]:
    """Model replies of the run, and how many came from the reply cache (LangChain zeroes a hit's cost)."""
    hit = (reply.usage_metadata or {}).get("total_cost") == 0
    return {
        "model_calls": state.get("model_calls", 0) + 1,
        "cached_calls": state.get("cached_calls", 0) + (1 if hit else 0),
    }


CLOSEST_SECTIONS = 3


def closest_sections(sources: list[ScoredChunk]) -> list[SectionRef]:
    """The first few distinct sections among what the run found, in the order it found them (the first search's
    best first): where a reader may look when the docs don't answer the question itself."""
    seen: set[tuple[str, str]] = set()
    out: list[SectionRef] = []
    for chunk in sources:
        key = (chunk.doc_id, chunk.chapter)
        if key in seen:
            continue
        seen.add(key)
        out.append(SectionRef.of(chunk))
        if len(out) == CLOSEST_SECTIONS:
            break
    return out


def _apply_corrections(text: str, corrections: dict[str, str]) -> str:
    """`text` with the misspelled words a search corrected replaced the same way."""
    if not corrections:
        return text
    pattern = re.compile(r"\b(" + "|".join(map(re.escape, corrections)) + r")\b")
    return pattern.sub(lambda m: corrections[m.group(1)], text)


def _refusal_text(constraints: dict[str, Any]) -> str:
    phrase = constraints.get("insufficiency_phrase")
    return f"{phrase}. {REFUSAL_TEXT}" if phrase else REFUSAL_TEXT


def _without_markers(message: AnyMessage) -> AnyMessage:
    """Earlier answers of a session cite sources of earlier runs: their [n] would mean other passages now."""
    if isinstance(message, AIMessage) and isinstance(message.content, str) and _MARKER_RE.search(message.content):
        return AIMessage(content=_MARKER_RE.sub("", message.content), id=message.id)
    return message


def _as_protocol(scratch: list[AnyMessage]) -> list[AnyMessage]:
    """The working transcript as a model without native tools sees it: its own JSON actions and plain-text tool
    results, never tool-call structures its chat template may not know."""
    out: list[AnyMessage] = []
    for message in scratch:
        if isinstance(message, AIMessage) and message.tool_calls:
            for call in message.tool_calls:
                action = {"type": "tool_call", "tool": call["name"], "input": call["args"]}
                out.append(AIMessage(content=json.dumps(action, ensure_ascii=False)))
        elif isinstance(message, ToolMessage):
            out.append(HumanMessage(content=f"TOOL RESULT ({message.name or 'tool'}):\n{message_text(message)}"))
        else:
            out.append(message)
    return out


# -- routing ---------------------------------------------------------------------------------------------------------


def _ended(state: AgentState) -> bool:
    return state.get("answer") is not None


def after_guard(state: AgentState) -> str:
    return "__end__" if _ended(state) else "analyze"


def after_analyze(state: AgentState) -> str:
    return "__end__" if _ended(state) else "retrieve"


def after_retrieve(state: AgentState) -> str:
    return "__end__" if _ended(state) else "llm"


def after_llm(state: AgentState) -> str:
    if _ended(state):
        return "__end__"
    if state.get("draft") is not None:
        return "validate"
    scratch = state.get("scratch") or []
    if scratch and isinstance(scratch[-1], AIMessage) and scratch[-1].tool_calls:
        return "tools"
    return "llm"  # a reprompt (unparseable action, empty reply) was queued


def after_tools(state: AgentState) -> str:
    return "__end__" if _ended(state) else "llm"


def after_validate(state: AgentState) -> str:
    if _ended(state):
        return "__end__"
    return "ground" if state.get("draft") is not None else "llm"
