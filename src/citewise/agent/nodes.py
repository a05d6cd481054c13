"""One function per node of the agent graph. Nodes route and update state; the jobs they hand off live elsewhere:

    answer.py        building the Answer (a node that ends the run describes its `Ending`)
    quote_policy.py  quote mode's turn: which searches, then the composed answer of verbatim sentences
    reply.py         what a model's reply asks for, as one typed value
    tools.py         the lookups, their numbering ledger and their failures

    guard → analyze → retrieve → llm ⇄ tools → validate → ground → END   (flow.py routes between them)

Every node returns a partial state update. The request (`state["request"]`, validated before the run) and
everything that changes during a run live in the state, so a checkpointed session resumes exactly; the settings,
the retriever and the model client live on `AgentNodes`. Quote mode runs the same nodes; only the llm node differs:
instead of a model it runs `QuotePolicy`.
"""

from __future__ import annotations

import logging
import re
import string
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from citewise.agent import messages as msg
from citewise.agent import prompts
from citewise.agent.answer import AnswerBuilder, Ending, is_refusal
from citewise.agent.condense import condense
from citewise.agent.constraints import Constraints, analyze_constraints
from citewise.agent.flow import Node
from citewise.agent.followup import MAX_TURNS as FOLLOWUP_TURNS
from citewise.agent.followup import Standalone, standalone
from citewise.agent.grounding import ground as ground_text
from citewise.agent.grounding import strip_rag_metadata
from citewise.agent.limits import EXIT_REASONS, WELCOME_MESSAGE, exit_reason_for
from citewise.agent.planner import default_plan, parse_plan
from citewise.agent.quote_policy import QuotePolicy, question_asked, question_of, quote_draft, refusal_text
from citewise.agent.state import AgentState
from citewise.agent.tools import (
    MAX_QUERY_CHARS,
    SEARCH_DOCS,
    Ledger,
    SearchDocsArgs,
    ToolContext,
    build_tools,
    call_key,
    invoke,
    validate_call,
)
from citewise.agent.validator import validate_answer
from citewise.errors import ProviderError
from citewise.index.retriever import Retriever
from citewise.settings import Settings
from citewise.types import AnswerMode, AnswerStyle, ExitReason, RetrievalFailure, Status, TraceKind, trace_event

if TYPE_CHECKING:
    from langchain_core.messages import AIMessage
    from langchain_core.runnables import RunnableConfig

log = logging.getLogger(__name__)

PLAN_TAG = "citewise:plan"  # the planner's model call: its tokens are not the answer
_MARKER_RE = re.compile(r"\[\d{1,4}\]")
_PUNCT = str.maketrans("", "", string.punctuation + "،؟!¡¿")


def normalise_greeting(text: str) -> str:
    return " ".join(text.lower().translate(_PUNCT).split())


def _quote(state: AgentState) -> bool:
    return state["request"].mode == AnswerMode.QUOTE


class AgentNodes:
    """The graph's nodes, bound to what they work with: settings, the retriever and the model client."""

    def __init__(
        self,
        settings: Settings,
        *,
        retriever: Retriever,
        llm_client: Callable[[], Any],
        index_version: Callable[[], int],
    ) -> None:
        self.settings = settings
        self.retriever = retriever
        self._llm_client = llm_client  # built on first use: quote mode never needs a model
        self.answers = AnswerBuilder(settings, index_version, revisions=retriever.revisions)
        self.quote = QuotePolicy(settings, retriever)
        self.finish = self.answers.finish

    def node(self, name: str) -> Node:
        """The node function called `name` (flow.NODES)."""
        return getattr(self, name)

    # -- helpers ---------------------------------------------------------------------------------------------------
    def traced(self, name: str, fn: Node) -> Node:
        """Wrap a node so every trace event it adds is also streamed as an `on_custom_event` named "trace" (the
        LangGraph path only: the in-process runner streams nothing)."""
        from langchain_core.callbacks import adispatch_custom_event

        async def node(state: AgentState, config: RunnableConfig) -> dict[str, Any]:
            before = len(state.get("trace") or [])
            update = await fn(state, config)
            for event in (update.get("trace") or [])[before:]:
                await adispatch_custom_event("trace", event, config=config)
            return update

        node.__name__ = name
        return node

    def tool_context(self, state: AgentState, ledger: Ledger) -> ToolContext:
        request = state["request"]
        return ToolContext(
            retriever=self.retriever,
            ledger=ledger,
            owner=request.owner,
            selected_text=request.selected_text,
            tool_retries=request.limits.tool_retries,
        )

    # -- guard -----------------------------------------------------------------------------------------------------
    async def guard(self, state: AgentState, config: RunnableConfig) -> dict[str, Any]:
        question = state["request"].question
        trace = list(state.get("trace") or [])
        if not question.strip():
            trace.append(trace_event(TraceKind.GUARD, "guard", outcome="empty_input"))
            return self.finish(state, Ending(ExitReason.EMPTY_INPUT, "guard"), trace=trace)
        greetings = {normalise_greeting(g) for g in self.settings.agent.greetings}
        if normalise_greeting(question) in greetings:
            trace.append(trace_event(TraceKind.GUARD, "guard", outcome="greeting"))
            ending = Ending(ExitReason.COMPLETED, "guard", text=WELCOME_MESSAGE, status=Status.SUCCESS)
            return self.finish(state, ending, trace=trace)
        trace.append(trace_event(TraceKind.GUARD, "guard", outcome="question"))
        return {"trace": trace}

    # -- analyze ---------------------------------------------------------------------------------------------------
    async def analyze(self, state: AgentState, config: RunnableConfig) -> dict[str, Any]:
        question = state["request"].question
        constraints = analyze_constraints(question).model_dump(mode="json")
        trace = list(state.get("trace") or [])
        trace.append(trace_event(TraceKind.CONSTRAINTS, "analyze", **constraints))
        counts: dict[str, int] = {}
        if _quote(state):
            plan, source = default_plan(), "default"
        else:
            from langchain_core.messages import HumanMessage  # a model's call: agent mode only

            try:
                reply = await self._llm_client().ainvoke(
                    [HumanMessage(content=prompts.plan_prompt(question))],
                    timeout=self.settings.generation.plan_timeout_s,
                    config={**config, "tags": [*(config.get("tags") or []), PLAN_TAG]},
                )
            except ProviderError as exc:
                return self._provider_failure(state, exc, node="analyze", trace=trace)
            parsed = parse_plan(msg.message_text(reply))
            plan, source = (parsed, "model") if parsed else (default_plan(), "default")
            counts = _count_reply(state, reply)
        trace.append(trace_event(TraceKind.PLAN, "analyze", steps=plan, source=source))
        return {"constraints": constraints, "plan": plan, "trace": trace, **counts}

    def _provider_failure(
        self, state: AgentState, exc: ProviderError, *, node: str, trace: list[dict[str, Any]]
    ) -> dict[str, Any]:
        reason = exit_reason_for(exc)
        log.warning("LLM call failed for good (%s): %s", reason, exc)
        trace = [*trace, trace_event(TraceKind.LLM_ERROR, node, error=type(exc).__name__, message=str(exc)[:300])]
        # The provider's own wait rides on the Answer: the HTTP layer's Retry-After is that, not the table's guess.
        return self.finish(state, Ending(reason, node, retry_after_s=exc.retry_after_s), trace=trace)

    # -- retrieve: the first search is mandatory and happens in code -------------------------------------------------
    async def retrieve(self, state: AgentState, config: RunnableConfig) -> dict[str, Any]:
        request = state["request"]
        ledger = Ledger.from_state(state)
        ctx = self.tool_context(state, ledger)
        # A follow-up ("Is it enabled by default?") is searched, and answered in quote mode, made whole with the
        # conversation before it; a model still reads the whole conversation.
        made_whole = self._standalone(state)
        if made_whole is not None:
            ledger.trace.append(
                trace_event(
                    TraceKind.STANDALONE,
                    "retrieve",
                    question=made_whole.question,
                    reason=made_whole.reason,
                    from_turns=list(made_whole.from_turns),
                )
            )
            state = {**state, "standalone": made_whole.question}  # type: ignore[typeddict-item]
        # A long message (an error log pasted with the question) is searched condensed: its question, errors and
        # names. The answerer still gets the whole message; the trace says the search was condensed, and from what.
        condensed = condense(question_of(state), limit=MAX_QUERY_CHARS)
        args = SearchDocsArgs.model_construct(
            query=condensed.query,
            top_k=self.quote.search_depth(state),
            selected_text_only=bool(request.selected_text),
            selected_text_content=None,
        ).model_dump()
        call = {"name": SEARCH_DOCS, "args": args, "id": "call_retrieve", "type": "tool_call"}
        shown = {"condensed": True, "message_chars": len(request.question)} if condensed.condensed else {}
        ledger.trace.append(
            trace_event(TraceKind.TOOL_CALL, "retrieve", tool=SEARCH_DOCS, args=args, mandatory=True, **shown)
        )
        result = await invoke(ctx, call, node="retrieve", config=config)
        update = ledger.update()
        if ctx.failure:
            return self._retrieval_failed(state, update, ctx.failure, node="retrieve")
        scratch = [msg.ai("", [call]), result]
        return {
            **update,
            "scratch": scratch,
            "tool_log": {call_key(SEARCH_DOCS, args): msg.message_text(result)},
            "standalone": state.get("standalone"),
        }

    @staticmethod
    def _standalone(state: AgentState) -> Standalone | None:
        """The question made whole when it is a follow-up of the conversation's earlier questions, else None. Not a
        question about a selected text ("What does this passage mean?" points at the selection), nor a long message
        (what a pasted log is about is in it)."""
        request = state["request"]
        if request.selected_text or condense(request.question, limit=MAX_QUERY_CHARS).condensed:
            return None
        messages = list(state.get("messages") or [])
        if messages and messages[-1].type == "human":
            messages = messages[:-1]  # the question this run answers
        asked = [m for m in messages if m.type == "human"][-FOLLOWUP_TURNS:]
        made_whole = standalone(request.question, [question_asked(msg.message_text(m)) for m in asked])
        return made_whole if made_whole.followup else None

    def _retrieval_failed(
        self, state: AgentState, update: dict[str, Any], failure: RetrievalFailure, *, node: str
    ) -> dict[str, Any]:
        """The index could not be searched: the run ends with the outage's message (status error, retryable)."""
        ending = Ending(
            ExitReason.COMPLETED, node, refusal_reason=f"retrieval_failed:{failure}", retrieval_failure=failure
        )
        return self.finish(state, ending, **update)

    # -- llm ---------------------------------------------------------------------------------------------------------
    async def llm(self, state: AgentState, config: RunnableConfig) -> dict[str, Any]:
        if _quote(state):
            ctx = self.tool_context(state, Ledger.from_state(state))
            update = await self.quote.turn(state, ctx)
            if ctx.failure:
                return self._retrieval_failed(state, update, ctx.failure, node="llm")
            return update
        return await self._agent_turn(state, config)

    @staticmethod
    def _remaining_tool_calls(state: AgentState) -> int:
        return state["request"].limits.max_tool_calls - state.get("tool_calls", 0)

    async def _agent_turn(self, state: AgentState, config: RunnableConfig) -> dict[str, Any]:
        # A model's turn: quote mode never loads the reply adapter, the JSON protocol or LangChain's messages.
        from langchain_core.messages import SystemMessage

        from citewise.agent.reply import (
            Draft,
            Empty,
            Invalid,
            ToolCalls,
            Unparseable,
            as_protocol,
            read_reply,
            trim_newest_first,
            without_markers,
        )
        from citewise.llm.protocol import protocol_instructions

        limits = state["request"].limits
        trace = list(state.get("trace") or [])
        turns = state.get("turns", 0) + 1
        if turns > limits.max_turns:
            if self._budget_spent(state):
                return self._synthesize_found(state, trace, why="max_turns")
            return self.finish(state, Ending(ExitReason.MAX_TURNS_REACHED, "llm"), trace=trace)

        client = self._llm_client()
        native = client.native_tools
        scratch = list(state.get("scratch") or [])
        history = [without_markers(m) for m in (state.get("messages") or [])]
        kept, dropped = trim_newest_first(
            history + (scratch if native else as_protocol(scratch)), limits.max_context_chars
        )
        if dropped:
            trace.append(
                trace_event(TraceKind.CONTEXT, "llm", dropped_messages=dropped, max_chars=limits.max_context_chars)
            )
            return self.finish(state, Ending(ExitReason.MAX_CONTEXT_REACHED, "llm"), trace=trace)

        force_final = bool(state.get("force_final"))
        tools = build_tools(None)
        system = prompts.system_prompt(
            plan=state.get("plan") or default_plan(),
            constraints=state.get("constraints") or {},
            style=state["request"].style or AnswerStyle.DEFAULT,
            max_tool_calls=limits.max_tool_calls,
            remaining=0 if force_final else self._remaining_tool_calls(state),
        )
        if not native:
            system += "\n\n" + protocol_instructions(tools)
        # The system prompt goes in after trimming, so it is never what gets cut. Tools stay bound even when no more
        # calls are allowed: some vendors reject a history holding tool calls without tool definitions. A call made
        # anyway is ignored (the prompt says the budget is spent).
        try:
            message = await client.ainvoke(
                [SystemMessage(content=system), *kept],
                tools=tools,
                timeout=self.settings.generation.chat_timeout_s,
                config=config,
            )
        except ProviderError as exc:
            return self._provider_failure(state, exc, node="llm", trace=trace)
        # Which model answered rides on the reply (the client is shared by concurrent runs).
        answered_by = (message.response_metadata or {}).get("model_spec") or client.name
        if answered_by != client.name:
            trace.append(trace_event(TraceKind.FALLBACK, "llm", primary=client.name, answered_by=answered_by))
        base = {"turns": turns, "trace": trace, "model_used": answered_by, **_count_reply(state, message)}

        match read_reply(message, native=native, force_final=force_final, turn=turns):
            case ToolCalls(calls=calls, message=ai, protocol=protocol):
                extra = {"protocol": True} if protocol else {}
                trace.extend(
                    trace_event(TraceKind.TOOL_CALL, "llm", tool=c["name"], args=c["args"], **extra) for c in calls
                )
                return {**base, "scratch": [*scratch, ai]}
            case Invalid(tool=tool, error=error):
                trace.append(trace_event(TraceKind.INVALID_TOOL_CALL, "llm", tool=tool, error=error))
                return self.finish(state, Ending(ExitReason.INVALID_TOOL_CALL, "llm"), trace=trace)
            case Unparseable(output=output) if state.get("protocol_retries", 0) < 1:
                trace.append(trace_event(TraceKind.REPROMPT, "llm", reason="unparseable_action", output=output[:300]))
                return {
                    **base,
                    "scratch": [*scratch, msg.ai(output), msg.human(prompts.PROTOCOL_REPROMPT)],
                    "protocol_retries": state.get("protocol_retries", 0) + 1,
                }
            case Unparseable(output=output):
                error = "unparseable JSON action"
                trace.append(trace_event(TraceKind.INVALID_TOOL_CALL, "llm", error=error, output=output[:300]))
                return self.finish(state, Ending(ExitReason.INVALID_TOOL_CALL, "llm"), trace=trace)
            case Empty():
                return self._no_answer(state, base, scratch, trace)
            case Draft(text=text, insufficiencies=insufficiencies):
                trace.append(trace_event(TraceKind.DRAFT, "llm", chars=len(text)))
                merged = list(state.get("insufficiencies") or []) + [i for i in insufficiencies if i]
                return {**base, "draft": text, "insufficiencies": merged}
        raise AssertionError("unreachable: read_reply returns one of the Reply types")  # pragma: no cover

    def _no_answer(
        self, state: AgentState, base: dict[str, Any], scratch: list, trace: list[dict[str, Any]]
    ) -> dict[str, Any]:
        """An empty reply: asked once more (answer now, no tools), then the run gives up — composing what it found
        when the lookup budget promised an answer from it."""
        if not state.get("regenerated"):
            trace.append(trace_event(TraceKind.GENERATION_FAILURE, "llm", action="regenerate"))
            return {
                **base,
                "scratch": [*scratch, msg.human(prompts.regenerate())],
                "regenerated": True,
                "force_final": True,
                "exit_reason": state.get("exit_reason") or ExitReason.LLM_GENERATION_FAILURE,
            }
        trace.append(trace_event(TraceKind.GENERATION_FAILURE, "llm", action="give_up"))
        if self._budget_spent(state):
            return {**base, **self._synthesize_found(state, trace, why="no_answer")}
        state = {**state, "exit_reason": state.get("exit_reason") or ExitReason.LLM_GENERATION_FAILURE}  # type: ignore[typeddict-item]
        reason = ExitReason.LLM_GENERATION_FAILURE
        ending = Ending(reason, "llm", text=EXIT_REASONS[reason].message, status=Status.ERROR)
        return self.finish(state, ending, trace=trace)

    # -- tools -------------------------------------------------------------------------------------------------------
    async def tools(self, state: AgentState, config: RunnableConfig) -> dict[str, Any]:
        max_tool_calls = state["request"].limits.max_tool_calls
        scratch = list(state.get("scratch") or [])
        request = scratch[-1]
        ledger = Ledger.from_state(state)
        # Every call is checked before any runs: one invalid call ends the run with nothing half-done.
        checked = []
        for call in msg.tool_calls(request):
            args, error = validate_call(call["name"], call.get("args"))
            if error:
                ledger.trace.append(trace_event(TraceKind.INVALID_TOOL_CALL, "tools", tool=call["name"], error=error))
                return self.finish(state, Ending(ExitReason.INVALID_TOOL_CALL, "tools"), trace=ledger.trace)
            checked.append((call, args))

        ctx = self.tool_context(state, ledger)
        tool_log = dict(state.get("tool_log") or {})
        used = state.get("tool_calls", 0)
        exhausted = False
        results: list[msg.Message] = []
        for call, args in checked:
            key = call_key(call["name"], args)
            if key in tool_log:  # the same call again: answered from the log, not counted
                ledger.trace.append(trace_event(TraceKind.TOOL_REPEAT, "tools", tool=call["name"], args=args))
                results.append(msg.tool_result("(Same call as before; same result.)\n" + tool_log[key], call))
                continue
            if used >= max_tool_calls:
                exhausted = True
                ledger.trace.append(
                    trace_event(TraceKind.TOOL_BUDGET, "tools", tool=call["name"], limit=max_tool_calls)
                )
                content = f"TOOL_BUDGET_EXHAUSTED: the limit of {max_tool_calls} tool calls is reached."
                results.append(msg.tool_result(content, call))
                continue
            used += 1
            message = await invoke(ctx, {**call, "args": args}, node="tools", config=config)
            tool_log[key] = msg.message_text(message)
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
            if not _quote(state):
                update["scratch"].append(msg.human(prompts.force_final(max_tool_calls)))
        return update

    # -- validate ----------------------------------------------------------------------------------------------------
    async def validate(self, state: AgentState, config: RunnableConfig) -> dict[str, Any]:
        # Plumbing the model echoed ("Similarity score: 0.83") is removed before the answer is shown, so it is
        # removed before it is judged too: it is not a claim.
        draft = strip_rag_metadata(state.get("draft") or "")
        trace = list(state.get("trace") or [])
        if state.get("synthesized"):  # verbatim sentences of the sources: grounded by construction, nothing to repair
            trace.append(trace_event(TraceKind.VALIDATION, "validate", ok=True, synthesized=True, errors=[]))
            return {"trace": trace}
        if is_refusal(draft) and not _MARKER_RE.search(draft):
            trace.append(trace_event(TraceKind.VALIDATION, "validate", ok=True, refusal=True, errors=[]))
            return {"trace": trace}
        numbered = {i + 1: c for i, c in enumerate(state.get("sources") or [])}
        result = validate_answer(
            draft,
            sources=numbered,
            opened=set(state.get("opened") or []),
            searches=state.get("searches", 0),
            constraints=Constraints(**(state.get("constraints") or {})),
            question=question_asked(question_of(state)),  # a follow-up made whole; of a pasted log, what asks
            check_support=not _quote(state),
        )
        errors = list(result.errors)
        if not _MARKER_RE.search(draft):
            errors.append("The answer cites no passage: end every factual sentence with its [n].")
        elif not _quote(state) and not _warned_of_anchors(trace) and (missing := self.quote.missing_anchors(state)):
            # Said once: a model told, that answers anyway from what it read (the docs say "3.14+" to a question
            # about 3.12), keeps its answer rather than losing it to the fallback.
            named = ", ".join(f"“{a}”" for a in missing[:3])
            errors.append(f"{ANCHOR_WARNING} {named}, which no passage found mentions: search for it, or if the docs "
                          "don't cover it, say so.")  # fmt: skip
        trace.append(trace_event(TraceKind.VALIDATION, "validate", ok=not errors, errors=errors))
        if not errors:
            return {"trace": trace}

        if _quote(state):
            # Verbatim sentences are grounded by construction; what failed is a requirement the docs couldn't meet.
            merged = list(state.get("insufficiencies") or []) + [
                e for e in errors if e not in (state.get("insufficiencies") or [])
            ]
            return {"trace": trace, "insufficiencies": merged}

        reprompts = state.get("reprompts", 0)
        if reprompts < state["request"].limits.max_reprompts:
            remaining = 0 if state.get("force_final") else self._remaining_tool_calls(state)
            trace.append(trace_event(TraceKind.REPROMPT, "validate", attempt=reprompts + 1, errors=errors))
            scratch = [
                *(state.get("scratch") or []),
                msg.ai(draft),
                msg.human(prompts.reprompt(errors, remaining)),
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
        result = self.quote.synthesize(state)
        event = trace_event(TraceKind.FORCED_SYNTHESIS, "llm", used=list(result.used), refused=result.refused, why=why)
        return {"trace": [*trace, event], **quote_draft(result, state.get("constraints") or {}), "synthesized": True}

    def _forced_synthesis(self, state: AgentState, errors: list[str], trace: list[dict[str, Any]]) -> dict[str, Any]:
        """The model could not produce an answer that passes validation: answer with verbatim sentences from what
        was gathered instead (grounded by construction), and say what was missing."""
        result = self.quote.synthesize(state)
        insufficiencies = list(state.get("insufficiencies") or []) + [
            e for e in errors if e not in (state.get("insufficiencies") or [])
        ]
        trace.append(
            trace_event(TraceKind.FORCED_SYNTHESIS, "validate", used=list(result.used), refused=result.refused)
        )
        return {
            "trace": trace,
            **quote_draft(result, state.get("constraints") or {}),
            "insufficiencies": insufficiencies,
            "synthesized": True,
        }

    # -- ground ------------------------------------------------------------------------------------------------------
    async def ground(self, state: AgentState, config: RunnableConfig) -> dict[str, Any]:
        numbered = {i + 1: c for i, c in enumerate(state.get("sources") or [])}
        spans: dict[int, list[tuple[int, int]]] = {}
        for n, start, end in state.get("quotes") or []:  # quote mode says what it quoted: nothing to find again
            spans.setdefault(n, []).append((start, end))
        text, citations = ground_text(state.get("draft") or "", numbered, spans=spans)
        trace = list(state.get("trace") or [])
        refusal_reason = None
        if is_refusal(text) and not citations:
            refusal_reason = state.get("quote_refusal") or (
                "empty_retrieval" if state.get("empty_retrieval") else "not_in_documentation"
            )
        elif not citations:
            # An answer that cites nothing can't be checked against the docs: it does not leave the agent.
            trace.append(trace_event(TraceKind.UNCITED_ANSWER, "ground", chars=len(text)))
            text, refusal_reason = refusal_text(state.get("constraints") or {}), "uncited_answer"
        trace.append(trace_event(TraceKind.GROUNDED, "ground", citations=[c.chunk_id for c in citations]))
        ending = Ending(ExitReason.COMPLETED, "ground", text=text, citations=citations, refusal_reason=refusal_reason)
        return self.finish(state, ending, trace=trace)


ANCHOR_WARNING = "The question names"


def _warned_of_anchors(trace: list[dict[str, Any]]) -> bool:
    """Whether this run's validator already sent an answer back for naming what no passage mentions."""
    return any(
        e.get("type") == TraceKind.VALIDATION and any(str(x).startswith(ANCHOR_WARNING) for x in e["data"]["errors"])
        for e in trace
    )


def _count_reply(state: AgentState, reply: AIMessage) -> dict[str, int]:
    """Model replies of the run, and how many came from the reply cache (LangChain zeroes a hit's cost)."""
    hit = (reply.usage_metadata or {}).get("total_cost") == 0
    return {
        "model_calls": state.get("model_calls", 0) + 1,
        "cached_calls": state.get("cached_calls", 0) + (1 if hit else 0),
    }
