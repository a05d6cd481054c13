"""`Citewise`: the library's front door. Ask a question, get an `Answer` (or stream the run's events).

    cw = Citewise(Settings(home="~/.citewise"))
    answer = cw.ask("How do I pin the worker pool?")
    answer.answer, answer.citations, answer.exit_reason

One compiled graph per instance, shared by every call (it holds no per-run data; the state does). Requests are
validated before the graph starts, so a bad owner or an over-long question raises `ValidationError` instead of
producing an Answer.
"""

from __future__ import annotations

import logging
import threading
import time
import uuid
from collections.abc import AsyncIterator, Sequence
from typing import Any

from langchain_core.language_models import BaseChatModel
from langchain_core.messages import AIMessage, AnyMessage, HumanMessage
from langgraph.checkpoint.base import BaseCheckpointSaver

from citewise.agent.graph import GRAPH_NAME, build_graph
from citewise.agent.limits import Limits
from citewise.agent.nodes import QUOTE_MODE, AgentNodes
from citewise.agent.question_log import log_question
from citewise.agent.state import with_session_types
from citewise.agent.sync import run_sync
from citewise.errors import ConfigError, ValidationError
from citewise.index.knowledge_base import KnowledgeBase
from citewise.index.retriever import Retriever
from citewise.index.store import OWNER_RE, validate_owner
from citewise.settings import Settings
from citewise.types import Answer, AnswerStyle, check_selected_text

log = logging.getLogger(__name__)

MODES = ("quote", "extractive", "agent")
PLAN_TAG = "citewise:plan"


class Citewise:
    """Grounded answers from the ingested docs: quote mode (no model) or an LLM agent, through one bounded graph."""

    def __init__(
        self,
        settings: Settings | None = None,
        *,
        kb: KnowledgeBase | None = None,
        chat_model: BaseChatModel | None = None,
        fallbacks: list[BaseChatModel] | None = None,
        checkpointer: BaseCheckpointSaver | None = None,
    ) -> None:
        self.settings = settings or (kb.settings if kb is not None else Settings())
        self.kb = kb or KnowledgeBase(self.settings)
        self.retriever = Retriever(self.kb)
        self.checkpointer = checkpointer
        self._chat_model = chat_model
        self._fallbacks = fallbacks
        self._client: Any = None
        self._client_lock = threading.Lock()
        self.limits = Limits.from_settings(self.settings)
        self.nodes = AgentNodes(
            self.settings, retriever=self.retriever, llm_client=self.llm_client, index_version=lambda: self.kb.version
        )
        self._graphs: dict[int, tuple[Any, Any]] = {}

    @property
    def graph(self) -> Any:
        """The compiled graph for the current `checkpointer` (a plain attribute the server may set after building
        this instance: each run reads it when it starts)."""
        saver = self.checkpointer
        cached = self._graphs.get(id(saver))
        if cached is None or cached[0] is not saver:
            graph = build_graph(self.nodes, checkpointer=with_session_types(saver) if saver is not None else None)
            cached = self._graphs[id(saver)] = (saver, graph)
        return cached[1]

    # -- the model ---------------------------------------------------------------------------------------------------
    def llm_client(self) -> Any:
        """The LLM client (retries, fallbacks, cache), built on first use: quote mode never builds one."""
        with self._client_lock:
            if self._client is None:
                from citewise.llm.models import LLMClient

                if self._chat_model is None and self.settings.llm == QUOTE_MODE:
                    raise ConfigError(
                        'Agent mode needs a language model: set CITEWISE_LLM to "local" or "provider:model" '
                        '(e.g. "openai:gpt-4o-mini"), or use quote mode.'
                    )
                self._client = LLMClient(self.settings, chat_model=self._chat_model, fallbacks=self._fallbacks)
            return self._client

    def resolve_mode(self, mode: str | None) -> str:
        """The answerer a request runs with: "extractive" (quote mode) or the model's spec."""
        if mode is not None and mode not in MODES:
            raise ValidationError(f"Unknown mode {mode!r}; use quote or agent")
        if mode in ("quote", "extractive"):
            return QUOTE_MODE
        if mode is None and self._chat_model is None and self.settings.llm == QUOTE_MODE:
            return QUOTE_MODE
        return self.llm_client().name

    # -- requests ----------------------------------------------------------------------------------------------------
    def prepare(
        self,
        question: str,
        *,
        owner: str | None = None,
        selected_text: str | None = None,
        history: Sequence[dict[str, str]] | None = None,
        style: AnswerStyle | str | None = None,
        mode: str | None = None,
        session_id: str | None = None,
        trace: bool = True,
    ) -> tuple[dict[str, Any], dict[str, Any]]:
        """(graph input, run config) for a request, or ValidationError."""
        if not isinstance(question, str):
            raise ValidationError("The question must be a string.")
        if len(question) > self.limits.max_question_chars:
            raise ValidationError(
                f"The question is {len(question)} characters long; the limit is {self.limits.max_question_chars}."
            )
        _check_text("The question", question)
        validate_owner(owner)
        if selected_text is not None:
            check_selected_text(selected_text)
        try:
            style = AnswerStyle(style or self.settings.agent.style)
        except ValueError:
            raise ValidationError(f"Unknown style {style!r}; use default or structured") from None
        if session_id is not None and not OWNER_RE.match(session_id):
            raise ValidationError("session_id must be 1-128 letters, digits or the characters _ . @ -")
        messages = _history_messages(history) if history else []
        if question.strip():
            messages.append(HumanMessage(content=question))
        state: dict[str, Any] = {
            "messages": messages,
            "question": question,
            "owner": owner,
            "selected_text": selected_text,
            "style": str(style),
            "mode": self.resolve_mode(mode),
            "session_id": session_id,
            "include_trace": trace,
            # Everything below belongs to one run: reset here even when a checkpointer resumes a session.
            "scratch": [],
            "turns": 0,
            "tool_calls": 0,
            "tool_log": {},
            "searches": 0,
            "queries": [],
            "opened": [],
            "sources": [],
            "empty_retrieval": True,
            "constraints": {},
            "plan": [],
            "reprompts": 0,
            "protocol_retries": 0,
            "force_final": False,
            "regenerated": False,
            "draft": None,
            "synthesized": False,
            "search_results": {},
            "search_profiles": {},
            "corrections": {},
            "quote_refusal": None,
            "refusal_detail": None,
            "insufficiencies": [],
            "model_used": None,
            "model_calls": 0,
            "cached_calls": 0,
            "exit_reason": None,
            "trace": [],
            "answer": None,
        }
        steps = self.limits.max_turns + self.limits.max_reprompts + 4
        config: dict[str, Any] = {"recursion_limit": 12 + 4 * steps, "run_name": GRAPH_NAME}
        if self.checkpointer is not None:
            # A run without a session still needs a thread for the checkpointer: a fresh one, used once.
            config["configurable"] = {"thread_id": session_id or f"oneoff-{uuid.uuid4()}"}
        return state, config

    async def aask(self, question: str, **options: Any) -> Answer:
        """The answer to `question` (see `ask` for the options)."""
        graph = self.graph
        state, config = self.prepare(question, **options)
        start = time.perf_counter()
        final = await graph.ainvoke(state, config)
        return self._finished(final, start, owner=options.get("owner"))

    def ask(
        self,
        question: str,
        *,
        owner: str | None = None,
        selected_text: str | None = None,
        history: Sequence[dict[str, str]] | None = None,
        style: AnswerStyle | str | None = None,
        mode: str | None = None,
        session_id: str | None = None,
        trace: bool = True,
    ) -> Answer:
        """Answer `question` from the docs.

        owner: also search this owner's documents (else public ones only). selected_text: search only inside this
        text. history: earlier turns, [{"role": "user"|"assistant", "content": ...}]. style: "default" or
        "structured". mode: "quote" (no model), "agent" (settings.llm or the injected chat model), None (the
        injected chat model if any, else settings.llm). session_id: continue a conversation kept by the
        checkpointer. trace: include the step-by-step trace in the Answer.
        """
        options = dict(
            owner=owner, selected_text=selected_text, history=history, style=style, mode=mode,
            session_id=session_id, trace=trace,
        )  # fmt: skip
        # One long-lived loop for every sync call (agent/sync.py): vendor HTTP clients outlive a single call.
        return run_sync(self.aask(question, **options))

    async def astream_events(self, question: str, **options: Any) -> AsyncIterator[dict[str, Any]]:
        """The run as LangGraph v2 events: `on_chat_model_stream` tokens (provisional: the answer that counts is the
        final one), `on_tool_start`/`on_tool_end`, `on_custom_event` named "trace" for each trace step, and last
        the graph's `on_chain_end` whose `data.output` is the final state, `answer` (an `Answer`) included.
        A reply served from the LLM cache streams no tokens."""
        graph = self.graph
        state, config = self.prepare(question, **options)
        start = time.perf_counter()
        final_event = None
        async for event in graph.astream_events(state, config, version="v2"):
            kind = event["event"]
            if kind == "on_chat_model_stream" and PLAN_TAG in (event.get("tags") or []):
                continue  # the planner's reply is not the answer
            if kind == "on_chain_end" and event.get("name") == GRAPH_NAME and not event.get("parent_ids"):
                final_event = event
                continue
            yield event
        if final_event is None:  # pragma: no cover - LangGraph always ends a run with its on_chain_end
            raise RuntimeError("the agent graph ended without a final event")
        output = final_event["data"]["output"]
        self._finished(output, start, owner=options.get("owner"))
        yield final_event

    def _finished(self, final: dict[str, Any], start: float, *, owner: str | None) -> Answer:
        answer: Answer = final["answer"]
        answer.timing_ms = round((time.perf_counter() - start) * 1000, 1)
        self._log(answer, final.get("queries") or [], owner)
        return answer

    def _log(self, answer: Answer, queries: list[str], owner: str | None) -> None:
        log_question(self.settings, answer, queries, owner=owner)


def _check_text(name: str, text: Any) -> None:
    """Text must be valid Unicode: a lone surrogate (JSON's "\\ud800") can't be encoded, embedded or logged."""
    if isinstance(text, str):
        try:
            text.encode("utf-8")
        except UnicodeEncodeError as exc:
            raise ValidationError(f"{name} is not valid text: a lone surrogate at position {exc.start}.") from None


def _history_messages(history: Sequence[dict[str, str]]) -> list[AnyMessage]:
    messages: list[AnyMessage] = []
    for i, turn in enumerate(history):
        if not isinstance(turn, dict) or turn.get("role") not in ("user", "assistant"):
            raise ValidationError(f"history[{i}] must be {{'role': 'user'|'assistant', 'content': str}}")
        content = turn.get("content")
        if not isinstance(content, str):
            raise ValidationError(f"history[{i}].content must be a string")
        _check_text(f"history[{i}].content", content)
        messages.append(HumanMessage(content=content) if turn["role"] == "user" else AIMessage(content=content))
    return messages
