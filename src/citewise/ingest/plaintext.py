"""Plain text → a `ParsedDocument`: one TEXT block per paragraph. Its own module because it needs none of the
format parsers loaders.py imports (markdown-it, docutils, lxml): the selected-text search and the eval sets parse
plain text only, and shouldn't pay for them.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path

from citewise.types import Block, ParsedDocument

_TITLE_FROM_FIRST_LINE_MAX = 80
_BLANK_LINES = re.compile(r"\n\s*\n")
_WHITESPACE = re.compile(r"\s+")


def normalize_newlines(text: str) -> str:
    return text.replace("\r\n", "\n").replace("\r", "\n")


def prettify_stem(filename: str) -> str:
    stem = _WHITESPACE.sub(" ", re.sub(r"[-_.]+", " ", Path(filename).stem)).strip()
    return stem[:1].upper() + stem[1:] if stem else filename


def paragraphs(text: str) -> Iterator[str]:
    for paragraph in _BLANK_LINES.split(normalize_newlines(text)):
        paragraph = "\n".join(line.rstrip() for line in paragraph.strip().split("\n"))
        if paragraph:
            yield paragraph


def parse_plain_text(text: str, *, source: str, filename: str, title: str = "") -> ParsedDocument:
    """Plain text → one TEXT block per paragraph (paragraphs are separated by blank lines)."""
    found = list(paragraphs(text))
    if not title and found:
        first_line = found[0].split("\n", 1)[0].strip()
        title = first_line if len(first_line) <= _TITLE_FROM_FIRST_LINE_MAX else ""
    return ParsedDocument(
        source=source,
        filename=filename,
        title=title or prettify_stem(filename),
        blocks=[Block(text=p) for p in found],
    )
