"""One router per area: chat (the widget contract), agent (run/stream), documents, examples (questions to start
from), feedback, health, openai_compat (/v1), pages (a docs folder served read-only), sources."""
