"""A short plan for a question: 2-5 steps from the model, read as a JSON array, a numbered list or bullets.

The plan guides the model (it goes into the system prompt) and is recorded in the trace; it never decides what
the agent may do — the graph and its limits do. Anything unusable falls back to `DEFAULT_PLAN`.
"""

from __future__ import annotations

import json
import re

from citewise.agent.prompts import DEFAULT_PLAN

MIN_STEPS, MAX_STEPS = 2, 5
_ITEM_RE = re.compile(r"^\s*(?:\d+[.)]|[-*•+])\s+(.+?)\s*$")
_ARRAY_RE = re.compile(r"\[.*\]", re.S)


def parse_plan(text: str) -> list[str] | None:
    """The steps in `text`, or None when it holds fewer than 2 (more than 5 are cut to 5)."""
    if not isinstance(text, str) or not text.strip():
        return None
    steps: list[str] = []
    match = _ARRAY_RE.search(text)
    if match:
        try:
            data = json.loads(match.group(0))
        except json.JSONDecodeError:
            data = None
        if isinstance(data, list):
            steps = [_step(item) for item in data if _step(item)]
    if not steps:
        steps = [m.group(1).strip() for line in text.splitlines() if (m := _ITEM_RE.match(line))]
    steps = [s for s in steps if s]
    if len(steps) < MIN_STEPS:
        return None
    return steps[:MAX_STEPS]


def _step(item: object) -> str:
    if isinstance(item, str):
        return " ".join(item.split())
    if isinstance(item, dict):  # [{"step": "..."}] — take the first string value
        for value in item.values():
            if isinstance(value, str) and value.strip():
                return " ".join(value.split())
    return ""


def default_plan() -> list[str]:
    return list(DEFAULT_PLAN)
