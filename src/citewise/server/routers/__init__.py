"""One router per area: chat (the widget contract), agent (run/stream), documents, health."""
