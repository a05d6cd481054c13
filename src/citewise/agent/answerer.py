"""Which answerer a run uses: quote mode (no model) or the configured language model, and whether that model can
be built at all (what `/ready` asks, without the server reaching into `llm/`)."""

from __future__ import annotations

from citewise.settings import QUOTE_ANSWERER, Settings

__all__ = ["QUOTE_ANSWERER", "check_answerer"]


def check_answerer(settings: Settings) -> None:
    """Raise when the configured answerer can't be built (a missing extra, no API key); quote mode always can.
    Builds the model's client only: no request is sent."""
    if settings.llm == QUOTE_ANSWERER:
        return
    from citewise.llm.models import create_chat_model

    create_chat_model(settings, settings.llm)
