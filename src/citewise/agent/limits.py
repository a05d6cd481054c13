"""Why a run stops, and the bounds that make it stop: the one table of exit reasons and the per-run limits.

Every run ends with exactly one `ExitReason`. Its user-facing message, its retryable flag and (when the reason
alone decides it) the answer's status come from `EXIT_REASONS` and nowhere else; docs/answers.md shows this table.
"""

from __future__ import annotations

from dataclasses import dataclass

from citewise.settings import Settings
from citewise.types import ExitReason, Status


@dataclass(frozen=True, slots=True)
class ExitInfo:
    retryable: bool
    message: str  # shown to the user when the run could not produce an answer of its own
    status: Status | None  # None: the status follows from the answer (success, or refused when it is a refusal)


EXIT_REASONS: dict[ExitReason, ExitInfo] = {
    ExitReason.COMPLETED: ExitInfo(False, "", None),
    ExitReason.MAX_TURNS_REACHED: ExitInfo(
        False,
        "I couldn't finish answering within the allowed number of steps. Please rephrase or narrow your question.",
        Status.ERROR,
    ),
    ExitReason.MAX_TOOL_CALLS_REACHED: ExitInfo(
        False,
        "I reached the limit of documentation lookups for one question. Here is what I found so far.",
        None,
    ),
    ExitReason.MAX_CONTEXT_REACHED: ExitInfo(
        False,
        "This conversation has grown too long for me to keep track of. Please start over with a new conversation.",
        Status.ERROR,
    ),
    ExitReason.EMPTY_INPUT: ExitInfo(False, "Please type a question about the documentation.", Status.ERROR),
    ExitReason.RATE_LIMITED: ExitInfo(
        True, "The language model is receiving too many requests right now. Please try again in a minute.", Status.ERROR
    ),
    ExitReason.LLM_ERROR: ExitInfo(
        True, "Something went wrong while generating the answer. Please try again.", Status.ERROR
    ),
    ExitReason.LLM_GENERATION_FAILURE: ExitInfo(
        True, "The language model did not produce a usable answer. Please try again or rephrase.", None
    ),
    ExitReason.INVALID_TOOL_CALL: ExitInfo(
        True, "The language model made an invalid documentation lookup, so I stopped. Please try again.", Status.ERROR
    ),
}

assert set(EXIT_REASONS) == set(ExitReason), "every exit reason needs a row"

WELCOME_MESSAGE = (
    "Hello! Ask me anything about the documentation and I'll answer from it, with a numbered citation for every claim."
)


@dataclass(frozen=True, slots=True)
class Limits:
    max_turns: int
    max_tool_calls: int
    max_context_chars: int
    max_reprompts: int
    max_question_chars: int
    tool_retries: int

    @classmethod
    def from_settings(cls, settings: Settings) -> Limits:
        agent = settings.agent
        return cls(
            max_turns=agent.max_turns,
            max_tool_calls=agent.tool_call_limit,
            max_context_chars=agent.max_context_chars,
            max_reprompts=agent.max_reprompts,
            max_question_chars=agent.max_question_chars,
            tool_retries=settings.generation.tool_retries,
        )
