"""Path globs for include/exclude patterns: `**` spans folders, `*` and `?` stay inside one.

Hand-written (a dozen lines) because the standard library has no such matcher on Python 3.11: `fnmatch` lets `*`
cross `/`, and `PurePath.full_match` arrived in 3.13.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Iterable


@functools.cache
def _compile(pattern: str) -> re.Pattern[str]:
    out, i = [], 0
    pattern = pattern.lstrip("/")
    while i < len(pattern):
        if pattern.startswith("**/", i):
            out.append("(?:.*/)?")
            i += 3
        elif pattern.startswith("**", i):
            out.append(".*")
            i += 2
        elif pattern[i] == "*":
            out.append("[^/]*")
            i += 1
        elif pattern[i] == "?":
            out.append("[^/]")
            i += 1
        else:
            out.append(re.escape(pattern[i]))
            i += 1
    return re.compile("".join(out) + r"\Z")


def glob_match(path: str, pattern: str) -> bool:
    """Whether the relative POSIX `path` (a leading / is ignored on both sides) matches `pattern`."""
    return _compile(pattern).match(path.lstrip("/")) is not None


def any_match(path: str, patterns: Iterable[str]) -> bool:
    return any(glob_match(path, p) for p in patterns)
