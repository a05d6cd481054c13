"""Section anchors: which `#fragment` a published page gives each heading, so a citation opens at its section.

A page's own heading ids are the truth when there is HTML to read (a website source): `heading_ids` reads them the
way the common generators write them (an `id` on the heading, on an anchor inside it, on its permalink's href, or
on the `<section>` it opens, as Sphinx does). For Markdown read from Git, the id is what the site that renders it
would make of the heading text: GitHub's rule (also Docusaurus' github-slugger) or MkDocs' (Python-Markdown `toc`).
An explicit `{#custom-id}` after a heading wins, as both generators honour it.

`outline_anchors` keys the result by heading path (" > "-joined, like a chunk's `chapter`); the pipeline looks a
chunk's path up, innermost heading first.
"""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Sequence
from typing import Any, Literal

SlugStyle = Literal["github", "mkdocs"]

_CUSTOM_ID = re.compile(r"\s*\{#([A-Za-z0-9_:.-]+)\}\s*$")
_INVISIBLE = re.compile("[\u200b\u200c\u200d\u2060\ufeff]")
_SPACES = re.compile(r"\s+")
# Permalink decorations generators append to headings (Docusaurus "#"/zero-width, MkDocs and Sphinx "¶", "§", 🔗).
_PERMALINK_TEXT = frozenset({"", "#", "¶", "§", "🔗", "link", "permalink"})
_PERMALINK_CLASSES = frozenset({"headerlink", "hash-link", "anchor", "anchor-link", "heading-anchor", "permalink"})


def slugify(text: str, style: SlugStyle = "github") -> str:
    if style == "mkdocs":  # markdown.extensions.toc.slugify (MkDocs' default)
        value = unicodedata.normalize("NFKD", text).encode("ascii", "ignore").decode("ascii")
        value = re.sub(r"[^\w\s-]", "", value).strip().lower()
        return re.sub(r"[-\s]+", "-", value)
    # github-slugger (GitHub, Docusaurus): lower case, drop punctuation and symbols but - and _, one - per space
    value = re.sub(r"[^\w\- ]", "", text.lower().strip())
    return value.replace(" ", "-")


def normalize_heading(text: str) -> str:
    """A heading's text as the match key between the HTML and the extracted outline."""
    text = _SPACES.sub(" ", _INVISIBLE.sub("", text)).strip()
    return text.strip("#¶§🔗").strip().casefold()


def outline_anchors(
    outline: Sequence[tuple[int, str]],
    *,
    style: SlugStyle = "github",
    page_ids: Sequence[tuple[str, str | None]] | None = None,
) -> dict[str, str]:
    """Heading path → fragment for every heading in `outline` (level, text), in reading order.

    With `page_ids` ((normalized text, id) of the page's headings in order), each heading takes the id of the next
    page heading with the same text; one the page has no id for falls back to the slug rule."""
    anchors: dict[str, str] = {}
    seen: dict[str, int] = {}
    path: list[tuple[int, str]] = []
    cursor = 0
    for level, text in outline:
        # The loader keeps an explicit id in the outline alone: a chunk's headings are the text without it.
        custom = _CUSTOM_ID.search(text)
        text = _CUSTOM_ID.sub("", text) if custom else text
        path[:] = [(lvl, t) for lvl, t in path if lvl < level]
        path.append((level, text))
        fragment = None
        if page_ids is not None:
            key = normalize_heading(text)
            for index in range(cursor, len(page_ids)):
                if page_ids[index][0] == key:
                    fragment, cursor = page_ids[index][1], index + 1
                    break
        if not fragment:
            fragment = custom.group(1) if custom else _unique(slugify(text, style), seen, style)
        if fragment:
            anchors.setdefault(" > ".join(t for _, t in path), fragment)
    return anchors


def page_heading_ids(headings: Sequence[str], style: SlugStyle = "github") -> list[str]:
    """The id each heading of a page rendered here gets (`citewise serve`'s /pages), in reading order: its explicit
    `{#custom-id}`, else the slug rule with repeats numbered — the fragments `outline_anchors` gives sections when
    the page has no ids of its own, and the ones the docs' own `page.md#section` links were written against."""
    seen: dict[str, int] = {}
    ids = []
    for text in headings:
        custom = _CUSTOM_ID.search(text)
        ids.append(custom.group(1) if custom else _unique(slugify(text, style), seen, style))
    return ids


def strip_custom_id(text: str) -> str:
    """A heading's text without its `{#custom-id}`, as a generator shows it."""
    return _CUSTOM_ID.sub("", text)


def _unique(slug: str, seen: dict[str, int], style: SlugStyle) -> str:
    if not slug:
        return ""
    count = seen.get(slug, 0)
    seen[slug] = count + 1
    if not count:
        return slug
    return f"{slug}_{count}" if style == "mkdocs" else f"{slug}-{count}"


def heading_ids(tree: Any) -> list[tuple[str, str | None]]:
    """(normalized text, id or None) of every h1-h6 in an lxml HTML tree, in order. Permalink decorations are removed
    from the tree as a side effect, so the extracted text does not end in "¶" or "#"."""
    found: list[tuple[str, str | None]] = []
    for heading in tree.iter("h1", "h2", "h3", "h4", "h5", "h6"):
        ident = heading.get("id") or None
        for link in list(heading.iter("a")):
            href = link.get("href") or ""
            text = _INVISIBLE.sub("", link.text_content()).strip().lower()
            classes = set((link.get("class") or "").split())
            decoration = href.startswith("#") and (text in _PERMALINK_TEXT or classes & _PERMALINK_CLASSES)
            if not ident:
                ident = link.get("id") or link.get("name") or (href[1:] if decoration and len(href) > 1 else None)
            if decoration or (not text and (link.get("id") or link.get("name"))):
                link.drop_tree()
        parent = heading.getparent()
        if not ident and parent is not None and parent.tag in ("section", "div") and parent.get("id"):
            first = next((child for child in parent if isinstance(child.tag, str)), None)
            if first is heading:
                ident = parent.get("id")
        found.append((normalize_heading(heading.text_content()), ident))
    return found
