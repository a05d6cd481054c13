"""Why a run stops, and the bounds that make it stop: the one table of exit reasons and the per-run limits.

Every run ends with exactly one `ExitReason`. Its user-facing message, whether a retry may help, how long to wait
before one, and (when the reason alone decides it) the answer's status come from `EXIT_REASONS` and nowhere else;
docs/answers.md shows this table. A run whose index could not be searched ends COMPLETED (nothing in the run
itself went wrong) with the `RETRIEVAL_OUTAGE` row. A run that raised instead of ending (the stream's `error`
event, an HTTP error) is given the exit reason `exit_reason_for(exc)`, and with it the same row.
"""

from __future__ import annotations

from dataclasses import dataclass

from citewise.errors import ProviderError, RateLimited
from citewise.settings import Settings
from citewise.types import ExitReason, Limits, Status


@dataclass(frozen=True, slots=True)
class ExitInfo:
    retryable: bool
    message: str  # shown to the user when the run could not produce an answer of its own
    status: Status | None  # None: the status follows from the answer (success, or refused when it is a refusal)
    retry_after_s: int | None = None  # how long a client should wait before retrying (HTTP Retry-After)


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
        True,
        "The language model is receiving too many requests right now. Please try again in a minute.",
        Status.ERROR,
        retry_after_s=30,
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

# The index (or its embedding model) could not be searched: the run ends COMPLETED with this row instead of its
# reason's. `{kind}` is the RetrievalFailure.
RETRIEVAL_OUTAGE = ExitInfo(
    True,
    "I couldn't search the documentation just now ({kind}), so I can't answer from it. Please try again shortly.",
    Status.ERROR,
)

WELCOME_MESSAGE = (
    "Hello! Ask me anything about the documentation and I'll answer from it, with a numbered citation for every claim."
)


def exit_reason_for(exc: BaseException) -> ExitReason:
    """The exit reason of a run that raised instead of ending: a rate limit is RATE_LIMITED, anything else the
    catch-all LLM_ERROR."""
    return ExitReason.RATE_LIMITED if isinstance(exc, RateLimited) else ExitReason.LLM_ERROR


def retry_after(exc: BaseException) -> str:
    """The Retry-After header for `exc`: what the provider asked for, when it said, else the exit-reason table's."""
    asked = exc.retry_after_s if isinstance(exc, ProviderError) else None
    if asked is not None:
        return str(max(1, round(asked)))
    return str(EXIT_REASONS[exit_reason_for(exc)].retry_after_s or 1)


def run_limits(settings: Settings) -> Limits:
    agent = settings.agent
    return Limits(
        max_turns=agent.max_turns,
        max_tool_calls=agent.tool_call_limit,
        max_context_chars=agent.max_context_chars,
        max_reprompts=agent.max_reprompts,
        max_question_chars=agent.max_question_chars,
        tool_retries=settings.generation.tool_retries,
    )
