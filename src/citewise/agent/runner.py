"""`Citewise`: the library's front door. Ask a question, get an `Answer` (or stream the run's events).

    cw = Citewise(Settings(home="~/.citewise"))
    answer = cw.ask("How do I pin the worker pool?")
    answer.answer, answer.citations, answer.exit_reason

A question becomes a `RunRequest` once, in `request()` (a bad owner or an over-long question raises
`ValidationError` there, before anything runs), and the run gets the request whole. Only a request with a
`session_id` uses the checkpointer: a run without one has no conversation to keep, so it writes no thread. A run
goes through the LangGraph graph (one compiled graph per checkpointer, or none, shared by every call: it holds no
per-run data) when its events are streamed or its session is kept; otherwise the same nodes and routing functions
run in-process (`flow.run_inline`), so quote mode's `ask` never loads the graph machinery.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import AsyncIterator, Sequence
from typing import TYPE_CHECKING, Any

from citewise.agent import messages as msg
from citewise.agent.answerer import QUOTE_ANSWERER
from citewise.agent.flow import GRAPH_NAME, NODES, run_inline
from citewise.agent.limits import run_limits
from citewise.agent.nodes import PLAN_TAG, AgentNodes
from citewise.agent.question_log import log_question
from citewise.agent.state import fresh_run
from citewise.agent.sync import run_sync
from citewise.errors import ConfigError
from citewise.index.knowledge_base import KnowledgeBase
from citewise.index.retriever import Retriever
from citewise.settings import Settings
from citewise.types import Answer, AnswerMode, AnswerStyle, HistoryTurn, Owner, RunRequest

if TYPE_CHECKING:
    from langchain_core.language_models import BaseChatModel
    from langgraph.checkpoint.base import BaseCheckpointSaver

log = logging.getLogger(__name__)


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
        self.limits = run_limits(self.settings)
        self.nodes = AgentNodes(
            self.settings, retriever=self.retriever, llm_client=self.llm_client, index_version=lambda: self.kb.version
        )
        self._graphs: dict[int, tuple[Any, Any]] = {}

    @property
    def graph(self) -> Any:
        """The compiled graph for the current `checkpointer` (a plain attribute the server may set after building
        this instance: each run reads it when it starts)."""
        return self._compiled(self.checkpointer)

    def _graph_for(self, request: RunRequest) -> Any:
        """The graph `request` runs on: with the checkpointer only when it has a session to keep."""
        return self._compiled(self._saver(request))

    def _saver(self, request: RunRequest) -> BaseCheckpointSaver | None:
        return self.checkpointer if request.session_id is not None else None

    def _compiled(self, saver: BaseCheckpointSaver | None) -> Any:
        from citewise.agent.graph import build_graph
        from citewise.agent.state import with_session_types

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

                if self._chat_model is None and self.settings.llm == QUOTE_ANSWERER:
                    raise ConfigError(
                        'Agent mode needs a language model: set CITEWISE_LLM to "local" or "provider:model" '
                        '(e.g. "openai:gpt-4o-mini"), or use quote mode.'
                    )
                self._client = LLMClient(self.settings, chat_model=self._chat_model, fallbacks=self._fallbacks)
            return self._client

    @property
    def default_mode(self) -> AnswerMode:
        """Who answers when a request doesn't say: the injected chat model, else `settings.llm`."""
        if self._chat_model is None and self.settings.llm == QUOTE_ANSWERER:
            return AnswerMode.QUOTE
        return AnswerMode.AGENT

    def answerer(self, request: RunRequest) -> str:
        """The answerer's name for `request`: quote mode's, or the model client's spec (built here, so agent mode
        without a configured model is a ConfigError before the run starts)."""
        return QUOTE_ANSWERER if request.mode == AnswerMode.QUOTE else self.llm_client().name

    # -- requests ----------------------------------------------------------------------------------------------------
    def request(self, question: str, **options: Any) -> RunRequest:
        """The validated request for `question` (see `ask` for the options), or ValidationError / ConfigError."""
        request = RunRequest.checked(
            question,
            limits=self.limits,
            default_mode=self.default_mode,
            default_style=self.settings.agent.style,
            **options,
        )
        self.answerer(request)
        self.kb.require_current()  # an index an older Citewise wrote is upgraded first (the error says how)
        return request

    def _start(self, request: RunRequest) -> tuple[dict[str, Any], dict[str, Any]]:
        """(the run's input state, its LangGraph config)."""
        messages = [
            msg.human(turn.content) if turn.role == "user" else msg.ai(turn.content) for turn in request.history
        ]
        if request.question.strip():
            messages.append(msg.human(request.question))
        # Everything but the conversation belongs to one run: reset here even when a checkpointer resumes a session.
        state = {**fresh_run(), "messages": messages, "request": request, "answerer": self.answerer(request)}
        config: dict[str, Any] = {"recursion_limit": self._max_steps(request), "run_name": GRAPH_NAME}
        if self._saver(request) is not None:
            config["configurable"] = {"thread_id": request.session_id}
        return state, config

    @staticmethod
    def _max_steps(request: RunRequest) -> int:
        limits = request.limits
        return 12 + 4 * (limits.max_turns + limits.max_reprompts + 4)

    def _inline(self, request: RunRequest) -> bool:
        """Run in-process: quote mode with no session to keep (nothing to stream, nothing to checkpoint)."""
        return request.mode == AnswerMode.QUOTE and self._saver(request) is None

    async def arun(self, request: RunRequest) -> Answer:
        """The answer to a validated request."""
        state, config = self._start(request)
        start = time.perf_counter()
        if self._inline(request):
            nodes = {name: self.nodes.node(name) for name in NODES}
            final = await run_inline(nodes, state, max_steps=self._max_steps(request))
        else:
            final = await self._graph_for(request).ainvoke(state, config)
        return self._finished(final, start)

    async def aask(self, question: str, **options: Any) -> Answer:
        """The answer to `question` (see `ask` for the options)."""
        return await self.arun(self.request(question, **options))

    def ask(
        self,
        question: str,
        *,
        owner: Owner | str | None = None,
        selected_text: str | None = None,
        history: Sequence[HistoryTurn | dict[str, str]] | None = None,
        style: AnswerStyle | str | None = None,
        mode: AnswerMode | str | None = None,
        session_id: str | None = None,
        trace: bool = True,
    ) -> Answer:
        """Answer `question` from the docs.

        owner: also search this owner's documents (else public ones only). selected_text: search only inside this
        text. history: earlier turns, [{"role": "user"|"assistant", "content": ...}]. style: "default" or
        "structured". mode: "quote" (no model), "agent" (settings.llm or the injected chat model), None (the
        injected chat model if any, else settings.llm). session_id: continue a conversation kept by the
        checkpointer (without one, the run keeps nothing). trace: include the step-by-step trace in the Answer.
        """
        request = self.request(
            question, owner=owner, selected_text=selected_text, history=history, style=style, mode=mode,
            session_id=session_id, trace=trace,
        )  # fmt: skip
        # One long-lived loop for every sync call (agent/sync.py): vendor HTTP clients outlive a single call.
        return run_sync(self.arun(request))

    async def astream_events(self, question: str | RunRequest, **options: Any) -> AsyncIterator[dict[str, Any]]:
        """The run as LangGraph v2 events: `on_chat_model_stream` tokens (provisional: the answer that counts is the
        final one), `on_tool_start`/`on_tool_end`, `on_custom_event` named "trace" for each trace step, and last
        the graph's `on_chain_end` whose `data.output` is the final state, `answer` (an `Answer`) included.
        A reply served from the LLM cache streams no tokens. Takes a question and options, or a RunRequest."""
        request = question if isinstance(question, RunRequest) else self.request(question, **options)
        graph = self._graph_for(request)
        state, config = self._start(request)
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
        self._finished(final_event["data"]["output"], start)
        yield final_event

    def _finished(self, final: dict[str, Any], start: float) -> Answer:
        answer: Answer = final["answer"]
        answer.timing_ms = round((time.perf_counter() - start) * 1000, 1)
        log_question(self.settings, answer, final.get("queries") or [], owner=final["request"].owner)
        return answer
