"""The JSON action protocol: how a model without native tool calling drives the agent's tool loop.

Owns the instructions such a model gets (`protocol_instructions`) and the parser of its replies (`parse_action`).
Each turn the model replies with exactly one JSON object, in one of two forms:

    {"type": "tool_call", "tool": "search_docs", "input": {"query": "install on Windows", "top_k": 5}}

    {"type": "final", "answer": "Run `pip install citewise` [1].", "used_citations": [1],
     "insufficiencies": ["The docs do not say which Python versions are supported."]}

`tool` names one of the tools listed in the instructions and `input` holds its arguments; `answer` is the reply to
the user in markdown citing sources as [n]; `used_citations` lists those n; `insufficiencies` says what the
documentation does not cover (may be empty).

Parsing is lenient about packaging, strict about content: code fences, prose before or after, a missing "type"
(inferred from "tool" or "answer"), common key spellings ("name"/"args"/"arguments"), `input` given as a JSON string,
citations written as "[2]" are all accepted; the first balanced {...} object that reads as an action wins. Single
quotes, comments and other non-JSON are not repaired. `None` means no action could be read — the agent reprompts
once, then ends the run with INVALID_TOOL_CALL. Whether the tool exists and its input fits the schema is the
agent's check, not the parser's.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from langchain_core.tools import BaseTool


@dataclass(frozen=True)
class ToolAction:
    """The model asks to run `tool` with `input`."""

    tool: str
    input: dict[str, Any]

    def to_json(self) -> str:
        return json.dumps({"type": "tool_call", "tool": self.tool, "input": self.input}, ensure_ascii=False)


@dataclass(frozen=True)
class FinalAction:
    """The model's answer to the user."""

    answer: str
    used_citations: list[int] = field(default_factory=list)
    insufficiencies: list[str] = field(default_factory=list)

    def to_json(self) -> str:
        payload = {
            "type": "final",
            "answer": self.answer,
            "used_citations": self.used_citations,
            "insufficiencies": self.insufficiencies,
        }
        return json.dumps(payload, ensure_ascii=False)


Action = ToolAction | FinalAction


def _tool_spec(tool: BaseTool | dict[str, Any]) -> dict[str, Any]:
    # LangChain's schema conversion loads its tracing stack (a third of a second): only the instructions need it,
    # never the parser, which quote mode's runs and the server's stream use.
    from langchain_core.utils.function_calling import convert_to_openai_tool

    return convert_to_openai_tool(tool)["function"]


def _describe_arguments(tool: BaseTool | dict[str, Any]) -> tuple[str, str, str]:
    spec = _tool_spec(tool)
    params = spec.get("parameters", {}) or {}
    required = set(params.get("required", []))
    parts = []
    for name, schema in (params.get("properties") or {}).items():
        kind = schema.get("type", "any")
        note = "required" if name in required else "optional"
        if "description" in schema:
            note += f"; {schema['description']}"
        parts.append(f'"{name}": {kind} ({note})')
    return spec["name"], (spec.get("description") or "").strip().split("\n")[0], ", ".join(parts)


def _example_call(tool: BaseTool | dict[str, Any]) -> str:
    spec = _tool_spec(tool)
    params = spec.get("parameters", {}) or {}
    placeholders = {"integer": 5, "number": 1.0, "boolean": True, "array": [], "object": {}}
    example = {
        name: placeholders.get(schema.get("type", "string"), "...")
        for name, schema in (params.get("properties") or {}).items()
        if name in set(params.get("required", []))
    }
    return json.dumps({"type": "tool_call", "tool": spec["name"], "input": example})


def protocol_instructions(tools: Sequence[BaseTool | dict[str, Any]]) -> str:
    """System-prompt text that teaches the protocol and lists the tools with their arguments."""
    lines = [
        "You cannot call functions directly. Every reply you write is exactly ONE JSON object and nothing else:",
        "no text before or after it, double quotes only.",
        "",
        "To use a tool, reply:",
        '{"type": "tool_call", "tool": "<tool name>", "input": {<arguments>}}',
        "",
        "To give your final answer, reply:",
        '{"type": "final", "answer": "<answer in markdown, citing sources as [n]>", "used_citations": [<n>, ...], '
        '"insufficiencies": ["<what the documentation does not say>", ...]}',
        "",
        "Tools:",
    ]
    for tool in tools:
        name, description, arguments = _describe_arguments(tool)
        lines.append(f"- {name}: {description}" if description else f"- {name}")
        lines.append(f"  input: {{{arguments}}}")
    if tools:
        lines += ["", f"Example of a tool call: {_example_call(tools[0])}"]
    lines += [
        "",
        'Example of a final answer: {"type": "final", "answer": "Run `citewise ingest docs/` [1].", '
        '"used_citations": [1], "insufficiencies": []}',
    ]
    return "\n".join(lines)


_FENCE = re.compile(r"```(?:json|JSON)?\s*\n?(.*?)```", re.DOTALL)
_DECODER = json.JSONDecoder()


def _objects(text: str) -> Iterator[Any]:
    """Every JSON value that starts at a "{" in the text, in order; what follows a value (prose) is ignored.

    raw_decode gives up at the first character that cannot continue the JSON, so scanning every brace stays cheap
    even on long replies full of stray braces."""
    start = text.find("{")
    while start != -1:
        try:
            value, _ = _DECODER.raw_decode(text, start)
        except ValueError:
            value = None
        if value is not None:
            yield value
        start = text.find("{", start + 1)


def _candidates(text: str) -> Iterator[Any]:
    for source in [*_FENCE.findall(text), text]:
        yield from _objects(source)


def _citation_numbers(value: Any) -> list[int] | None:
    if value is None:
        return []
    if not isinstance(value, list):
        value = [value]
    numbers: list[int] = []
    for item in value:
        if isinstance(item, bool):
            return None
        if isinstance(item, int):
            numbers.append(item)
        elif isinstance(item, str) and (found := re.fullmatch(r"\s*\[?\s*(\d+)\s*\]?\s*", item)):
            numbers.append(int(found.group(1)))
        else:
            return None
    return numbers


def _to_action(obj: Any) -> Action | None:
    if not isinstance(obj, dict):
        return None
    kind = str(obj.get("type", "")).strip().lower()
    tool = obj.get("tool", obj.get("tool_name", obj.get("name")))
    if kind in ("tool_call", "tool", "action") or (not kind and tool is not None and "answer" not in obj):
        if not isinstance(tool, str) or not tool.strip():
            return None
        raw = next((obj[k] for k in ("input", "args", "arguments", "parameters") if k in obj), {})
        if isinstance(raw, str):
            try:
                raw = json.loads(raw) if raw.strip() else {}
            except ValueError:
                return None
        if raw is None:
            raw = {}
        if not isinstance(raw, dict):
            return None
        return ToolAction(tool=tool.strip(), input=raw)
    if kind in ("final", "final_answer", "answer") or (not kind and "answer" in obj):
        answer = obj.get("answer")
        if not isinstance(answer, str):
            return None
        citations = _citation_numbers(obj.get("used_citations", obj.get("citations")))
        if citations is None:
            return None
        gaps = obj.get("insufficiencies") or []
        if isinstance(gaps, str):
            gaps = [gaps]
        if not isinstance(gaps, list):
            return None
        return FinalAction(
            answer=answer,
            used_citations=citations,
            insufficiencies=[str(gap).strip() for gap in gaps if str(gap).strip()],
        )
    return None


def parse_action(text: str) -> Action | None:
    """The first action in a model reply, or None when there is none (see the module docstring for the rules)."""
    if not text or "{" not in text:
        return None
    for candidate in _candidates(text):
        action = _to_action(candidate)
        if action is not None:
            return action
    return None
