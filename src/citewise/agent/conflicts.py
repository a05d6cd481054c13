"""Retrieved passages of different documents that disagree about one setting (`find_conflicts`), with the
"newest dated document" rule a question may ask for. An Answer reports them; nothing is silently picked.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence

from citewise.types import ConflictInfo, ConflictValue, ScoredChunk

NEWEST_RULE = "newest dated document"

_KEY = r"[A-Za-z_][A-Za-z0-9_]*(?:[.\-][A-Za-z0-9_]+)*"
_SCALAR = (
    r"-?\d+(?:\.\d+)*(?:\s?(?:ms|milliseconds?|s|secs?|seconds?|m|mins?|minutes?|h|hrs?|hours?|d|days?|"
    r"kb|mb|gb|tb|kib|mib|gib|%|percent))?(?![\w.])"
    r"|true|false|yes|no|on|off|enabled|disabled|none|null"
)
# `worker_threads = 12`, `max_retries: 5` — the key must look like a setting (has _ or ., or is backticked).
_ASSIGN_RE = re.compile(
    rf"(?:`(?P<bkey>{_KEY})`|(?<![\w.\-])(?P<key>{_KEY}))\s*(?:=|:)\s*`?(?P<value>\"[^\"\n]{{1,40}}\"|'[^'\n]{{1,40}}'|"
    rf"(?:{_SCALAR})|[\w./-]+)`?",
    re.I,
)
# Start of a line in config style: `timeout: 30s` — plain keys allowed, but only scalar values.
_LINE_RE = re.compile(
    rf"^[ \t]*(?:[-*][ \t]+)?(?P<key>[a-z][a-z0-9_.\-]*)[ \t]*[:=][ \t]*(?P<value>{_SCALAR})[ \t]*$", re.I | re.M
)
# "The `timeout` setting defaults to 30 seconds", "max_retries defaults to 5", "the default port is 7433".
_DEFAULTS_RE = re.compile(
    rf"(?:`(?P<bkey>{_KEY})`|(?P<key>{_KEY}))(?:\s+(?:setting|option|parameter|field|flag|variable|value))?"
    rf"\s+(?:defaults\s+to|is\s+set\s+to\s+(?:\S+\s+)?by\s+default|has\s+a\s+default\s+(?:value\s+)?of)\s+"
    rf"`?(?P<value>{_SCALAR}|\"[^\"\n]{{1,40}}\")`?",
    re.I,
)
# "The default port is 7433", "the default visibility timeout is 30 seconds": numbers and booleans only.
_DEFAULT_IS_RE = re.compile(
    rf"\bthe\s+default\s+(?P<key>[a-z][a-z_-]*(?:\s+[a-z][a-z_-]*){{0,2}})\s+(?:is|was|of)\s+"
    rf"(?:now\s+|still\s+)?\**`?(?P<value>{_SCALAR})`?\**",
    re.I,
)
_UNITS = {
    "ms": "ms", "millisecond": "ms", "milliseconds": "ms",
    "s": "s", "sec": "s", "secs": "s", "second": "s", "seconds": "s",
    "m": "min", "min": "min", "mins": "min", "minute": "min", "minutes": "min",
    "h": "h", "hr": "h", "hrs": "h", "hour": "h", "hours": "h",
    "d": "d", "day": "d", "days": "d", "percent": "%",
}  # fmt: skip
_BOOLS = {"true": "true", "yes": "true", "on": "true", "enabled": "true",
          "false": "false", "no": "false", "off": "false", "disabled": "false"}  # fmt: skip


def _normalise_value(value: str) -> str:
    value = value.strip().strip("`\"'").rstrip(".,;").strip().lower()
    if value in _BOOLS:
        return _BOOLS[value]
    match = re.fullmatch(r"(-?\d+(?:\.\d+)*)\s?([a-z%]+)?", value)
    if match:
        number, unit = match.groups()
        return number + (_UNITS.get(unit, unit) if unit else "")
    return value


def _is_setting_key(key: str) -> bool:
    return "_" in key or "." in key.strip(".") or (key.isupper() and len(key) >= 3)


def _table_pairs(text: str) -> Iterable[tuple[str, str]]:
    """(key, default) from markdown tables whose header has a Default/Value column."""
    lines = text.split("\n")
    for i, line in enumerate(lines[:-1]):
        if not line.lstrip().startswith("|") or not re.match(r"^\s*\|?\s*:?-{2,}", lines[i + 1]):
            continue
        header = [c.strip().lower() for c in line.strip().strip("|").split("|")]
        col = next((j for j, h in enumerate(header) if h in ("default", "default value", "value")), None)
        if col is None or col == 0:
            continue
        for row in lines[i + 2 :]:
            if not row.lstrip().startswith("|"):
                break
            cells = [c.strip() for c in row.strip().strip("|").split("|")]
            if len(cells) > col:
                key = cells[0].strip("`* ")
                if re.fullmatch(_KEY, key) and re.fullmatch(rf"`?(?:{_SCALAR}|[\w./-]+)`?", cells[col], re.I):
                    yield key, cells[col]


def _key_values(text: str) -> list[tuple[str, str]]:
    pairs: list[tuple[str, str]] = []
    for match in _ASSIGN_RE.finditer(text):
        key = match.group("bkey") or match.group("key")
        if match.group("bkey") or _is_setting_key(key):
            pairs.append((key, match.group("value")))
    for match in _LINE_RE.finditer(text):
        pairs.append((match.group("key"), match.group("value")))
    for match in _DEFAULTS_RE.finditer(text):
        key = match.group("bkey") or match.group("key")
        if match.group("bkey") or _is_setting_key(key):
            pairs.append((key, match.group("value")))
    for match in _DEFAULT_IS_RE.finditer(text):
        pairs.append((match.group("key").lower(), match.group("value")))
    pairs.extend(_table_pairs(text))
    return [(k, v) for k, v in pairs if not re.fullmatch(r"https?|ftp|mailto", k, re.I)]


def find_conflicts(chunks: Sequence[ScoredChunk], *, newest_rule: bool = False) -> list[ConflictInfo]:
    """Settings that different documents among `chunks` give different values.

    Conservative on purpose: only setting-shaped keys (`snake_case`, dotted, backticked, config lines, tables with
    a Default column, "the default <thing> is <number>") with short values count, values are compared after
    normalising units and booleans ("30 seconds" = "30s", "on" = "true"), and differences inside one document are
    not conflicts. With `newest_rule` the value of the newest dated document wins (no winner when the newest date
    itself disagrees).
    """
    by_key: dict[str, dict[tuple[str, str], ConflictValue]] = {}
    subjects: dict[str, str] = {}
    for chunk in chunks:
        for key, raw in _key_values(chunk.text):
            norm_key = key.lower().replace("-", "_")
            subjects.setdefault(norm_key, key)
            value = _normalise_value(raw)
            entry = (chunk.doc_id, value)
            if value and entry not in by_key.setdefault(norm_key, {}):
                by_key[norm_key][entry] = ConflictValue(
                    value=raw.strip().strip("`").rstrip(".,;"),
                    chunk_id=chunk.chunk_id,
                    doc_id=chunk.doc_id,
                    filename=chunk.filename,
                    date=chunk.modified,
                )
    conflicts: list[ConflictInfo] = []
    for norm_key, entries in by_key.items():
        docs_by_value: dict[str, set[str]] = {}
        for doc_id, value in entries:
            docs_by_value.setdefault(value, set()).add(doc_id)
        if len(docs_by_value) < 2 or len({doc for doc, _ in entries}) < 2:
            continue
        values = list(entries.values())
        info = ConflictInfo(subject=subjects[norm_key], values=values)
        if newest_rule:
            dated = [(v.date, norm) for (_, norm), v in entries.items() if v.date]
            if dated:
                newest = max(date for date, _ in dated)
                winners = {norm for date, norm in dated if date == newest}
                if len(winners) == 1:
                    winner = winners.pop()
                    info.resolved_value = next(v.value for (_, norm), v in entries.items() if norm == winner)
                    info.rule = NEWEST_RULE
        conflicts.append(info)
    return conflicts
