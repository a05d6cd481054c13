"""Every text the agent puts in front of a model, in one place."""

from __future__ import annotations

from collections.abc import Sequence

from citewise.types import REFUSAL_TEXT, AnswerStyle

SYSTEM_PROMPT = """You are Citewise, a documentation assistant. You answer ONLY from the documentation passages \
returned by your tools in this conversation.

Rules:
- Every sentence that states a fact ends with the number of the passage it comes from, like [1] or [2][3].
  Cite only numbers that appear in the tool results. Never invent a number, a command, a flag, a setting, a value, \
a URL or a name that is not written in a passage.
- If the passages do not contain the answer, reply exactly: "{refusal}"
- Do not mention doc_id, chunk_id, scores or these rules in the answer.
- Use search_docs to look for more (different words, one topic per search) and open_citation to read a passage in \
full before quoting it. You may make at most {max_tool_calls} tool calls for this question; you have \
{remaining} left.
{style}
Plan for this question:
{plan}
{constraints}"""

STYLE_DEFAULT = "- Answer in concise markdown."
STYLE_STRUCTURED = (
    "- Format the answer as markdown with exactly these parts: a '## <Topic>' heading, a '### Key Points' section of "
    "bullets, and a '### Why It Matters' section."
)

REPROMPT = """Your answer can't be shown yet because it failed these checks:
{errors}
Fix it using only the passages above{budget}. If the passages don't hold the answer, reply exactly: "{refusal}\""""

FORCE_FINAL = """You have used all {max_tool_calls} documentation lookups allowed for this question. Write your final \
answer now, using only the passages above and citing them as [n]. Say plainly what the passages do not cover. If \
they don't hold the answer, reply exactly: "{refusal}\""""

REGENERATE = """Your last reply was empty. Write your final answer to the user now, using only the passages above \
and citing them as [n]. If they don't hold the answer, reply exactly: "{refusal}\""""

PROTOCOL_REPROMPT = """Your last reply was not a valid JSON action. Reply with exactly one JSON object and nothing \
else: either {{"type": "tool_call", "tool": "search_docs", "input": {{"query": "..."}}}} or \
{{"type": "final", "answer": "... [1]", "used_citations": [1], "insufficiencies": []}}."""

PLAN_PROMPT = """Write a short plan (2 to 5 steps) for answering this question from product documentation with a \
search tool. Reply with a JSON array of strings and nothing else.

Question: {question}"""

DEFAULT_PLAN = (
    "Search the documentation for the question's key terms.",
    "Open the most relevant passages and read them.",
    "Answer only from those passages, citing each claim with [n], or refuse if they don't hold the answer.",
)


def style_text(style: AnswerStyle | str) -> str:
    return STYLE_STRUCTURED if AnswerStyle(style) == AnswerStyle.STRUCTURED else STYLE_DEFAULT


def constraints_text(constraints: dict) -> str:
    """The user's explicit requirements, restated as instructions (empty when there are none)."""
    lines = []
    if constraints.get("min_searches", 1) > 1:
        topics = ", ".join(constraints.get("search_topics") or [])
        lines.append(
            f"- Make at least {constraints['min_searches']} separate searches" + (f" ({topics})." if topics else ".")
        )
    if constraints.get("min_opened", 0) > 0:
        lines.append(f"- Open at least {constraints['min_opened']} passages with open_citation before answering.")
    if constraints.get("exact_quote"):
        targets = "; ".join(constraints.get("quote_targets") or [])
        lines.append(
            "- Quote the relevant text verbatim, in double quotes, from an opened passage"
            + (f": {targets}." if targets else ".")
        )
    if constraints.get("newest_dated_rule"):
        lines.append("- When passages disagree, follow the one from the newest dated document and say so.")
    if constraints.get("required_sections"):
        lines.append("- Include these sections: " + ", ".join(constraints["required_sections"]) + ".")
    if constraints.get("insufficiency_phrase"):
        lines.append(f'- If something asked for is not in the passages, say "{constraints["insufficiency_phrase"]}".')
    return ("The user's requirements:\n" + "\n".join(lines)) if lines else ""


def system_prompt(
    *, plan: Sequence[str], constraints: dict, style: AnswerStyle | str, max_tool_calls: int, remaining: int
) -> str:
    return SYSTEM_PROMPT.format(
        refusal=REFUSAL_TEXT,
        max_tool_calls=max_tool_calls,
        remaining=max(remaining, 0),
        style=style_text(style),
        plan="\n".join(f"{i}. {step}" for i, step in enumerate(plan, 1)),
        constraints=constraints_text(constraints),
    ).rstrip()


def reprompt(errors: Sequence[str], remaining_tool_calls: int) -> str:
    budget = (
        f" (you may still make {remaining_tool_calls} more tool call(s) to find what is missing)"
        if remaining_tool_calls > 0
        else " (no tool calls are left)"
    )
    return REPROMPT.format(errors="\n".join(f"- {e}" for e in errors), budget=budget, refusal=REFUSAL_TEXT)


def force_final(max_tool_calls: int) -> str:
    return FORCE_FINAL.format(max_tool_calls=max_tool_calls, refusal=REFUSAL_TEXT)


def regenerate() -> str:
    return REGENERATE.format(refusal=REFUSAL_TEXT)


def plan_prompt(question: str) -> str:
    return PLAN_PROMPT.format(question=question)
