"""Loaders: one file (or in-memory text) → a `ParsedDocument` of `Block`s in reading order.

Each format goes through a maintained parser and comes out as the same thing: TEXT blocks of readable markdown
(inline code backticks and link URLs kept, because grounding later looks for code identifiers and URLs in chunks),
CODE blocks re-emitted as fenced blocks, TABLE blocks rendered as pipe tables, each under the heading path it sits
in and, for PDFs, on its page.

- Markdown / MDX: python-frontmatter for metadata, markdown-it-py's token stream for structure. The markup of site
  generators (MkDocs' admonitions and tabs, MyST and Docusaurus directives, mkdocstrings, snippets) reads as the text
  a reader of the published page sees: an admonition as a labelled note ("Tip — Gotcha: ..."), a tab under its title,
  an API directive as one "API reference" line, build instructions as nothing. TEXT blocks are sliced from the
  source lines via the tokens' line maps, so what gets indexed is what the author wrote.
- HTML: trafilatura finds the main content and writes it as markdown, which then takes the markdown path.
- PDF: pypdf, text per page. reStructuredText: docutils doctree (Sphinx's directives through stand-ins, admonitions
  as the same labelled notes). Plain text: paragraphs.

Every failure, including a parser's own exception, leaves `load_file` as an `IngestError` naming the file.
trafilatura and pypdf are imported where they are used: together they take ~0.7 s to import. Plain text has a
module of its own (plaintext.py), so what parses only plain text (the selected-text search) imports none of this.
"""

from __future__ import annotations

import contextvars
import copy
import functools
import io
import re
import textwrap
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import date, datetime
from pathlib import Path
from typing import Any

import frontmatter
import lxml.html
from docutils import nodes
from docutils.core import publish_doctree
from docutils.parsers.rst import Directive, directives
from docutils.parsers.rst.directives.body import CodeBlock
from markdown_it import MarkdownIt
from markdown_it.token import Token

from citewise.errors import IngestError
from citewise.ingest.plaintext import normalize_newlines, paragraphs, parse_plain_text, prettify_stem
from citewise.types import Block, BlockKind, ParsedDocument

__all__ = ["SUPPORTED_SUFFIXES", "load_file", "parse_html", "parse_markdown", "parse_plain_text", "parse_rst"]

MARKDOWN_SUFFIXES: frozenset[str] = frozenset({".md", ".markdown", ".mdx"})
SUPPORTED_SUFFIXES: frozenset[str] = MARKDOWN_SUFFIXES | {".html", ".htm", ".pdf", ".rst", ".txt"}

# Front matter keys, first match wins. Modification dates come before `date`: a chunk's date says how fresh it is.
_URL_KEYS = ("source_url", "url", "canonical_url", "canonical", "permalink", "link")
_DATE_KEYS = ("last_updated", "last_modified", "lastmod", "modified", "updated", "date")

_WORD = re.compile(r"\w")
_CODE_SPAN = re.compile(r"(`+)[^`\n]+?\1")
_MD_ESCAPE = re.compile(r"\\([\\`*_{}\[\]()#+\-.!<>~|])")
_BLANK_LINES = re.compile(r"\n\s*\n")
_BLANK_RUN = re.compile(r"\n[ \t]*\n(?:[ \t]*\n)+")
_WHITESPACE = re.compile(r"\s+")
# A picture in prose (`![alt](url "title")`) reads as its alt text, and a link with no text (`[](url)`, a site
# generator's card) as nothing: their addresses (a docs site's image proxy URL runs to hundreds of characters) would
# fill a chunk, its vector and its full-text terms with nothing a reader asks about.
_URL = r"(?:[^()\s]|\([^()\s]*\))*"
_IMAGE = re.compile(rf"!\[([^\]\n]*)\]\(\s*<?{_URL}>?(?:\s+(?:\"[^\"\n]*\"|'[^'\n]*'))?\s*\)")
_EMPTY_LINK = re.compile(rf"[ \t]?(?<!!)\[\s*\]\(\s*<?{_URL}>?(?:\s+(?:\"[^\"\n]*\"|'[^'\n]*'))?\s*\)")


def load_file(path: Path, *, source: str) -> ParsedDocument:
    """Parse the file at `path`. Raises `IngestError` (message starts with the file name) for anything wrong."""
    name = path.name
    suffix = path.suffix.lower()
    if suffix not in SUPPORTED_SUFFIXES:
        supported = " ".join(sorted(SUPPORTED_SUFFIXES))
        raise IngestError(f"{name}: unsupported file type {suffix or '(no suffix)'!r}; supported: {supported}")
    try:
        data = path.read_bytes()
    except OSError as exc:
        raise IngestError(f"{name}: cannot read file: {exc.strerror or exc}") from exc
    return load_bytes(data, name=name, source=source)


def load_bytes(data: bytes, *, name: str, source: str) -> ParsedDocument:
    """Parse a file's bytes (read from a disk, a Git blob or an HTTP body); `name`'s suffix says the format."""
    suffix = Path(name).suffix.lower()
    if suffix not in SUPPORTED_SUFFIXES:
        supported = " ".join(sorted(SUPPORTED_SUFFIXES))
        raise IngestError(f"{name}: unsupported file type {suffix or '(no suffix)'!r}; supported: {supported}")
    if not data.strip():
        raise IngestError(f"{name}: file is empty")
    try:
        if suffix == ".pdf":
            doc = _parse_pdf(data, source=source, filename=name)
        elif suffix in (".html", ".htm"):
            doc = parse_html(_decode_html(data, name), source=source, filename=name)
        else:
            text = _decode(data, name)
            if suffix == ".rst":
                doc = parse_rst(text, source=source, filename=name)
            elif suffix == ".txt":
                doc = parse_plain_text(text, source=source, filename=name)
            else:
                doc = parse_markdown(text, source=source, filename=name, mdx=suffix == ".mdx")
    except IngestError:
        raise
    except Exception as exc:  # a parser's own exception must still say which file, and never escape raw
        raise IngestError(f"{name}: could not parse {suffix[1:].upper()}: {type(exc).__name__}: {exc}") from exc
    if not doc.blocks:
        hint = " (a scanned PDF without a text layer?)" if suffix == ".pdf" else ""
        if (suffix == ".rst" or suffix in MARKDOWN_SUFFIXES) and _INCLUDE.search(_decode(data, name)):
            hint = " (it includes other files, which ingest never reads from a page: ingest those files themselves)"
        raise IngestError(f"{name}: no extractable text{hint}")
    return doc


# `.. include:: ../AUTHORS.rst` (reStructuredText), ```{include} ../README.md (MyST): a page made only of these has no
# text of its own (Sphinx docs folders hold several: authors, changelog, licence).
_INCLUDE = re.compile(r"(?m)^\s*(?:\.\.\s+(?:literal)?include::|[`:]{3,}\s*\{(?:literal)?include\})")


# -- decoding ----------------------------------------------------------------------------------------------------
_BOMS = (  # longest first: the UTF-32-LE mark starts with the UTF-16-LE one
    (b"\xff\xfe\x00\x00", "utf-32"),
    (b"\x00\x00\xfe\xff", "utf-32"),
    (b"\xef\xbb\xbf", "utf-8-sig"),
    (b"\xff\xfe", "utf-16"),
    (b"\xfe\xff", "utf-16"),
)


def _wide_encoding(data: bytes) -> str | None:
    """UTF-16 or UTF-32 written without a byte order mark, told by where its NUL bytes fall: text in those encodings
    is mostly code points below U+0100, each padded with NULs on one side. UTF-8 text has no NUL bytes at all."""
    sample = data[:4096]
    if len(sample) % 4 == 0 and sample[2::4].count(0) + sample[3::4].count(0) > len(sample) * 0.4:
        return "utf-32-le"
    if len(sample) % 4 == 0 and sample[0::4].count(0) + sample[1::4].count(0) > len(sample) * 0.4:
        return "utf-32-be"
    if len(sample) % 2 == 0:
        odd, even = sample[1::2].count(0), sample[0::2].count(0)
        if odd > len(sample) * 0.3 and even < len(sample) * 0.05:
            return "utf-16-le"
        if even > len(sample) * 0.3 and odd < len(sample) * 0.05:
            return "utf-16-be"
    return None


def _decode(data: bytes, name: str) -> str:
    """UTF-8 (with or without a BOM), or UTF-16/UTF-32 with a BOM or recognisably without one. Anything else,
    including NUL bytes left after decoding, fails with a message that says what to do."""
    encoding = next((enc for bom, enc in _BOMS if data.startswith(bom)), None)
    if encoding is None and b"\0" in data:
        encoding = _wide_encoding(data)
        if encoding is None:
            raise IngestError(
                f"{name}: contains NUL bytes, so it is binary or text in an encoding other than UTF-8/UTF-16/UTF-32; "
                "re-save it as UTF-8"
            )
    try:
        text = data.decode(encoding or "utf-8-sig")
    except UnicodeDecodeError as exc:
        wanted = (encoding or "UTF-8").upper().removesuffix("-SIG")
        raise IngestError(f"{name}: not valid {wanted} (bad byte at offset {exc.start}); re-save it as UTF-8") from exc
    if "\0" in text:
        raise IngestError(f"{name}: contains NUL characters; re-save it as plain UTF-8 text")
    return text


_META_CHARSET = re.compile(rb"""<meta[^>]+charset\s*=\s*["']?\s*([A-Za-z0-9_.:-]+)""", re.IGNORECASE)


def _decode_html(data: bytes, name: str) -> str:
    """UTF-8 (or UTF-16/32, as `_decode` recognises them) first; a page that declares another charset in a <meta>
    tag is decoded with that one."""
    try:
        return _decode(data, name)
    except IngestError:
        declared = _META_CHARSET.search(data[:4096])
        if declared:
            try:
                return data.decode(declared.group(1).decode("ascii"))
            except (LookupError, UnicodeDecodeError):
                pass
        return _decode(data, name)


def decode_html(data: bytes, name: str) -> str:
    """An HTML body as text: UTF-8, or the charset its <meta> tag declares (for pages fetched from the web)."""
    return _decode_html(data, name)


# -- metadata ----------------------------------------------------------------------------------------------------
def _jsonable(value: Any) -> Any:
    if isinstance(value, date | datetime):
        return value.isoformat()
    if isinstance(value, dict):
        return {str(k): _jsonable(v) for k, v in value.items()}
    if isinstance(value, list | tuple | set):
        return [_jsonable(v) for v in value]
    return value


def _iso_date(value: Any) -> str | None:
    if isinstance(value, datetime):
        return value.date().isoformat()
    if isinstance(value, date):
        return value.isoformat()
    if isinstance(value, str):
        try:
            return datetime.fromisoformat(value.strip().replace("Z", "+00:00")).date().isoformat()
        except ValueError:
            return None
    return None


def _split_front_matter(text: str, filename: str) -> tuple[dict[str, Any], str]:
    try:
        post = frontmatter.loads(text)
    except Exception as exc:
        detail = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
        raise IngestError(f"{filename}: invalid front matter: {detail}") from exc
    if not isinstance(post.metadata, dict):
        raise IngestError(f"{filename}: front matter must be a mapping of keys to values")
    return dict(post.metadata), post.content


def _document_fields(meta: dict[str, Any]) -> dict[str, Any]:
    """Front matter → title/source_url/date; whatever is not used for those stays in `metadata`."""
    rest = dict(meta)
    title = rest.pop("title", None)
    source_url = None
    for key in _URL_KEYS:
        value = rest.get(key)
        if isinstance(value, str) and value.strip().startswith(("http://", "https://")):
            source_url = value.strip()
            del rest[key]
            break
    found_date = None
    for key in _DATE_KEYS:
        found_date = _iso_date(rest.get(key))
        if found_date:
            del rest[key]
            break
    return {
        "title": str(title).strip() if title is not None else "",
        "source_url": source_url,
        "date": found_date,
        "metadata": _jsonable(rest),
    }


# -- markdown ----------------------------------------------------------------------------------------------------
@functools.cache
def _markdown_parser(*, mdx: bool) -> MarkdownIt:
    md = MarkdownIt("commonmark").enable(["table", "strikethrough"])
    if mdx:
        md.disable("code")  # MDX has no indented code: component children are often indented prose
    # Block structure only: text is sliced from the source lines, so inline tokens are needed for headings alone,
    # and `_inline_plain` parses those on demand. Inline-parsing every paragraph up front built most of the tokens:
    # a 48 MB file peaked at 750 MB parsing, 400 MB without them, and parses 2.5 times faster.
    md.core.ruler.disable(["inline"])
    return md


def parse_markdown(text: str, *, source: str, filename: str, mdx: bool = False) -> ParsedDocument:
    """Markdown (or MDX) text → document. Front matter supplies title, source_url, date and metadata."""
    meta, body = _split_front_matter(normalize_newlines(text), filename)
    if mdx:
        body = _strip_mdx(body)
    outline: list[tuple[int, str]] = []
    blocks, first_h1 = _markup_blocks(body, mdx=mdx, outline=outline)
    fields = _document_fields(meta)
    fields["title"] = fields["title"] or first_h1 or prettify_stem(filename)
    return ParsedDocument(source=source, filename=filename, blocks=blocks, outline=outline, **fields)


# A MyST role in running text, {role}`content`: {file}`~/.cache/pip`, {ref}`text <target>`, {pep}`440`. Read as
# Sphinx renders it: the content as code (the RST path reads an unknown :role:`x` the same way), a cross-reference's
# text alone, a PEP or RFC by its name. `${name}` (a template literal) is not a role.
_MYST_ROLE = re.compile(r"(?<![\w$])\{([a-z][\w:+-]*)\}$")  # the role's name, just before a code span
_MYST_NAMED = {"pep": "PEP", "rfc": "RFC"}
# Cross-reference roles: `text <target>` shows the text. Any other role keeps its content whole ({samp}`pip <pkg>`).
_MYST_XREF = frozenset(
    {"ref", "doc", "term", "any", "numref", "keyword", "download", "func", "meth", "class", "mod", "attr", "data"}
    | {"exc", "obj", "const", "option", "envvar", "external"}
)


def _myst_roles(text: str) -> str:
    """`text` with each MyST role read as its words; code spans are found first, so `GET /docs/{id}` stays code."""
    out, last = [], 0
    for span in _CODE_SPAN.finditer(text):
        before = text[last : span.start()]
        role = _MYST_ROLE.search(before) if len(span.group(1)) == 1 else None
        if role is None:
            out.append(text[last : span.end()])
        else:
            out.append(before[: role.start()] + _myst_role(role.group(1), span.group(0)[1:-1]))
        last = span.end()
    out.append(text[last:])
    return "".join(out)


# A cross-reference's content: `shown words <target>` (the words may wrap onto the next line), or a name, which a
# `~` shortens to its last part and a `!` leaves unlinked.
_LABELLED = re.compile(r"(.+?)\s*<[^<>]+>", re.DOTALL)
_NAME = re.compile(r"[~!]?[\w.]+(?:\(\))?")


def _myst_role(name: str, content: str) -> str:
    role = name.rsplit(":", 1)[-1]
    labelled = _LABELLED.fullmatch(content)
    xref = role in _MYST_XREF or ":" in name
    if labelled and xref:  # {ref}`Hash-checking mode <hash-mode>`: the words shown
        return " ".join(labelled.group(1).split())
    if role in _MYST_NAMED:
        return f"{_MYST_NAMED[role]} {content}"
    if xref and content[:1] in ("~", "!") and _NAME.fullmatch(content):  # :class:`~pkg.fields.Field` shows `Field`
        content = content[1:].rsplit(".", 1)[-1] if content[0] == "~" else content[1:]
    return f"`{content}`"


def _without_pictures(text: str) -> str:
    """Pictures as their alt text and empty links as nothing, outside code spans ("`![alt](src)` is the syntax"
    keeps its example), though a picture's alt text may hold a code span of its own ("![The `run` button](b.png)")."""
    text = _sub_outside_code_spans(_IMAGE, lambda m: m.group(1).strip(), text)
    return _sub_outside_code_spans(_EMPTY_LINK, lambda m: "", text)


def _sub_outside_code_spans(pattern: re.Pattern, replace, text: str) -> str:
    """`pattern.sub(replace, text)` for the matches no code span of `text` overlaps, but for spans inside a match's
    first group (a picture's alt text): "![a `b](c.png) d` e" is a code span, not a picture, in CommonMark."""
    spans = [m.span() for m in _CODE_SPAN.finditer(text)]

    def inside_group(m: re.Match, a: int, b: int) -> bool:
        return bool(m.re.groups) and m.start(1) <= a and b <= m.end(1)

    def sub(m: re.Match) -> str:
        crossed = any(a < m.end() and m.start() < b and not inside_group(m, a, b) for a, b in spans)
        return m.group(0) if crossed else replace(m)

    return pattern.sub(sub, text)


# Python-Markdown's attribute lists (`## Install { #install }`, `[Start](start.md){ .md-button }`, a `{: .note }` line,
# MyST's `{#anchor}`) and MkDocs Material's icons (`:material-clock-fast:`, `:octicons-gear-16:`) style the page: they
# read as nothing, outside code spans. An attribute list starts with an id, a class or a key=value pair.
_ATTR_VALUE = r"""=(?:"[^"\n]*"|'[^'\n]*'|[^\s{}"']+)"""
_ATTR_LIST = re.compile(
    rf"[ \t]*\{{:?[ \t]*(?:[#.][\w:.-]+|[\w-]+{_ATTR_VALUE})(?:[ \t]+(?:[#.][\w:.-]+|[\w-]+(?:{_ATTR_VALUE})?))*"
    r"[ \t]*\}"
)
# A heading's explicit id, from its attribute list (`{ #install .hero }`) or MyST's and Docusaurus' `{#install}`: gone
# from the heading's text, it stays in the document's outline as `{#install}`, where ingest/anchors.py finds it.
_HEADING_ID = re.compile(r"\{:?[ \t]*(?:[^{}\n]*?[ \t])?#([A-Za-z0-9_:.-]+)(?:[ \t][^{}\n]*)?\}[ \t]*$")
_ICON = re.compile(r"[ \t]?:(?:material|octicons|fontawesome|simple)-[\w-]+:")


def _without_styling(text: str) -> str:
    """`text` without attribute lists and icon shortcodes (outside code spans)."""
    if "{" in text:
        text = _sub_outside_code_spans(_ATTR_LIST, lambda m: "", text)
    if ":" in text:
        text = _sub_outside_code_spans(_ICON, lambda m: "", text)
    return text


def _unescape_markdown(text: str) -> str:
    """Drop backslash escapes outside code spans: an identifier must read `max_retries`, not `max\\_retries`."""
    return _sub_outside_code_spans(_MD_ESCAPE, lambda m: m.group(1), text)


def _inline_plain(token: Token, md: MarkdownIt, env: dict) -> str:
    # `env` carries the document's link reference definitions, so `[text][ref]` reads as it would in one pass.
    children: list[Token] = []
    md.inline.parse(_myst_roles(_without_styling(token.content)), md, env, children)
    parts = []
    for child in children:
        if child.type in ("text", "text_special", "code_inline"):  # text_special: a backslash escape's character
            parts.append(child.content)
        elif child.type in ("softbreak", "hardbreak"):
            parts.append(" ")
    return _WHITESPACE.sub(" ", "".join(parts)).strip()


def _fenced(code: str, language: str = "") -> str:
    longest = max((len(run) for run in re.findall(r"`{3,}", code)), default=0)
    fence = "`" * max(3, longest + 1)
    return f"{fence}{language}\n{code.rstrip(chr(10))}\n{fence}"


def _pipe_table(rows: Sequence[Sequence[str]]) -> str:
    width = max(len(row) for row in rows)
    padded = [[cell.replace("|", "\\|") for cell in row] + [""] * (width - len(row)) for row in rows]
    lines = ["| " + " | ".join(row) + " |" for row in padded]
    lines.insert(1, "| " + " | ".join(["---"] * width) + " |")
    return "\n".join(lines)


def _markdown_table(tokens: Sequence[Token]) -> str:
    rows: list[list[str]] = []
    for token in tokens:
        if token.type == "tr_open":
            rows.append([])
        elif token.type == "inline" and rows:
            rows[-1].append(_unescape_markdown(_myst_roles(_without_styling(token.content))).strip())
    return _pipe_table(rows) if rows else ""


def _closing_index(tokens: Sequence[Token], start: int) -> int:
    if tokens[start].nesting != 1:
        return start
    depth = 0
    for index in range(start, len(tokens)):
        depth += tokens[index].nesting
        if depth == 0:
            return index
    return len(tokens) - 1


# Admonitions, however a docs tool spells them (MkDocs' `!!! tip "Gotcha"`, Docusaurus' `:::tip[Gotcha]`, MyST's
# ```{tip}```, Sphinx's `.. tip::`), read as one labelled note: "Tip — Gotcha: <body>" ("Note: <body>" without a
# title; a generic admonition by its title alone), the label leading the note's first paragraph and the note's
# paragraphs kept in one block, so a chunk holds the note whole with its label. Tabs, cards and dropdowns keep their
# title as a bold label above their body.
_NOTE_KINDS = frozenset(
    {"note", "tip", "info", "warning", "danger", "caution", "important", "success", "secondary", "hint", "attention"}
    | {"error", "seealso", "todo", "abstract", "summary", "tldr", "question", "help", "faq", "check", "done"}
    | {"failure", "fail", "missing", "bug", "example", "quote", "cite", "admonition"}
)
_NOTE_WORDS = {"seealso": "See also", "tldr": "TL;DR", "faq": "FAQ", "todo": "To do", "secondary": "Note"}


def _note_label(kind: str, title: str = "") -> str:
    """ "Tip — Gotcha:" for a tip titled Gotcha, "Note:" for an untitled note, "Gotcha:" for a generic admonition."""
    title = _WHITESPACE.sub(" ", title).strip()
    if kind == "admonition":
        word, title = title or "Note", ""
    else:
        word = _NOTE_WORDS.get(kind) or kind.replace("_", " ").replace("-", " ").strip().capitalize() or "Note"
    if title and title.casefold() != word.casefold():
        word = f"{word} — {title}"
    return word if word[-1] in ".:?!" else word + ":"


def _block_label(base: str, title: str) -> tuple[str, bool]:
    """How a directive's or admonition's title reads: (its label, whether the label leads the first paragraph)."""
    if base in _RST_VERSIONS:
        return _version_label(base, title) + ":", True
    if base in _RST_CONDITIONS:
        return "", False
    if base in _NOTE_KINDS:
        return _note_label(base, title), True
    return (f"**{title}**" if title else ""), False


def _without_colon(label: str) -> str:
    """A lead label with nothing to lead: "Tip — Use a venv." stands as a sentence."""
    return label[:-1] + "." if label.endswith(":") else label


# Not the start of a paragraph a label can lead: a heading, quote, table, HTML, list item, rule, code or another
# block's marker (the label then stands on a line of its own).
_NOT_PLAIN = re.compile(
    r"^[ \t]*(?:[#>|<{]|[-*+](?:[ \t]|$)|\d{1,9}[.)](?:[ \t]|$)|([-*_=])[ \t]*(?:\1[ \t]*){2,}$|`{3}|~{3}|:{3}|!!!"
    r"|\?\?\?|===|\[[^\]\n]*\]:|-+8<)"
)
_HEADING_LINE = re.compile(r"^[ \t]{0,3}#{1,6}(?:[ \t]|$)")


def _plain(text: str) -> bool:
    return bool(text.strip()) and not _NOT_PLAIN.match(text) and "|" not in text.split("\n", 1)[0]


def _labelled(blocks: Sequence[Block], label: str, lead: bool, headings: tuple[str, ...]) -> list[Block]:
    """A labelled block's content as `_markdown_blocks` reads a labelled note's lines: a lead label ("Note:") in
    front of its first paragraph, a title label ("**Unix**") above it, and consecutive paragraphs in one block."""
    out = [Block(text=label, headings=headings)] if label else []
    for block in blocks:
        previous = out[-1] if out else None
        if not (previous and previous.kind == block.kind == BlockKind.TEXT and previous.headings == block.headings):
            out.append(block)
            continue
        first = previous.text == label and len(out) == 1
        joint = (" " if _plain(block.text) else "\n\n") if first and lead else "\n" if first else "\n\n"
        out[-1] = previous.model_copy(update={"text": previous.text + joint + block.text})
    if lead and len(out) == 1 and label and out[0].text == label:
        out[0] = out[0].model_copy(update={"text": _without_colon(label)})
    return out


# MyST (Sphinx's markdown) writes directives as fences: ```{note}, ```{versionadded} 22.3, ```{code-block} python,
# ```{eval-rst}. markdown-it reads them as code fences in a language called "{note}"; myst-parser, which knows them,
# needs Sphinx, so the few that matter are read here. A directive's options (`:key: value` lines, or a `---` YAML
# block) open its body. Unknown names stay code blocks, as a reader of the raw file would see them.
_MYST_FENCE = re.compile(r"^\{([A-Za-z][\w:.+-]*)\}\s*(.*)$")
_MYST_CODE = frozenset({"code", "code-block", "sourcecode", "code-cell"})
_MYST_BODY = frozenset(
    {"note", "warning", "caution", "tip", "important", "hint", "attention", "danger", "error", "seealso", "todo"}
    | {"admonition", "tab", "tab-set", "tab-item", "dropdown", "card", "grid", "grid-item", "grid-item-card"}
    | {"only", "topic", "sidebar", "margin", "epigraph", "glossary", "div", "container", "rubric"}
)
_MYST_OPTION = re.compile(r"^:[\w-]+:.*$")
# Colon fences: Docusaurus' admonitions (:::note, :::tip[Title], :::caution Title), MyST's (:::{warning},
# ::::{tab-set} around :::{tab-item} Unix) and VitePress' (::: details Title). Only their marker lines are markup, so
# `_markup_lines` blanks them (a label goes where `_labelled` would put it) and leaves the body where it is:
# headings, code and tables inside parse as they would anywhere, under the right heading path. (mdit-py-plugins'
# colon_fence parses a fence's body as one opaque token: an unclosed ':::' swallowed the rest of the page, headings
# inside lost their place, and deep nesting recursed.) A line is an opener only with a name Docusaurus, MyST or
# VitePress gives one; lines inside code fences are left alone.
_COLON_OPEN = re.compile(
    r"^(?P<indent>[ \t]*):{3,}[ \t]*(?:\{(?P<braced>[A-Za-z][\w:.+-]*)\}|(?P<name>[A-Za-z][\w-]*))"
    r"(?:\[(?P<title>[^\]]*)\]|\{[^}]*\})?[ \t]*(?P<rest>.*)$"
)
_COLON_CLOSE = re.compile(r"^[ \t]*:{3,}[ \t]*$")
_ADMONITIONS = frozenset({"note", "tip", "info", "warning", "danger", "caution", "important", "success", "secondary"})
_COLON_NAMES = _ADMONITIONS | {"details"}  # unbraced: Docusaurus' admonitions, VitePress' `::: details Title`
_CELL_LANGUAGES = frozenset({"python", "r", "julia", "bash", "sh", "sql", "ojs", "javascript", "js"})
# Python-Markdown's blocks, as MkDocs (Material) writes them: admonitions (`!!! tip "Gotcha"`), collapsible ones
# (`??? warning "Closed"`, `???+ note` open) and content tabs (`=== "pip"`), each with its body indented four
# spaces under its marker line. Read as Python-Markdown reads them: the body is the lines indented past the marker,
# which `_markup_lines` moves back out, line for line, so that it parses as markdown and not as an indented code
# block. (mdit-py-plugins' admon plugin knows `!!!` and `???`, not `===`, and makes nested tokens of them; but the
# loader reads a list or a quote as its author's lines, where the markers would still show, and colon fences are
# read by their lines already: one pass over the lines serves them all, with one way of labelling.)
_INDENTED_OPEN = re.compile(r"^(?P<indent>[ \t]*)(?P<marker>!!!|\?\?\?\+?|===[!+]?)[ \t]*(?P<rest>.*?)[ \t]*$")
_ADMONITION_ARGS = re.compile(r'(?P<kinds>[\w-]+(?:[ \t]+[\w-]+)*)?(?:[ \t]*"(?P<title>.*)")?')
_TAB_ARGS = re.compile(r'"(?P<title>.*)"')
_LIST_ITEM = re.compile(r"^([ \t]*(?:[-*+]|\d{1,9}[.)])[ \t]+)\S")
# mkdocstrings (`::: orbitron.queue.Queue`, its options indented under it) and mkautodoc (`::: orbitron.enqueue`,
# with `:docstring:` and `:members:` under it) fill a page from docstrings when the site is built: text Citewise
# never sees. The line reads "API reference: `orbitron.queue.Queue`", which says what the page documents by the
# name a question uses (as Sphinx's autodoc directives read, below), and its options go.
_API_LINE = re.compile(r"^(?P<indent>[ \t]*)(?:#{1,6}[ \t]+)?(?<!:):::(?!:)[ \t]*(?P<id>[A-Za-z_][\w.:/-]*)[ \t]*$")
# pymdownx.snippets pastes other files in when the site is built: `--8<-- "path.md"` lines (in code blocks too), or
# a block of file names between two bare `--8<--` lines. The pasted file is a document of its own (or no
# documentation at all), so the lines go; `;--8<--`, the escaped form, reads as the marker it shows.
_SNIPPET = re.compile(r"""^[ \t]*-+8<-+[ \t]+(?:"[^"\n]*"|'[^'\n]*'|\S+)[ \t]*$""")
_SNIPPET_BLOCK = re.compile(r"^[ \t]*-+8<-+[ \t]*$")
_SNIPPET_ESCAPED = re.compile(r"^([ \t]*);(;*-+8<-)")
# Lines that only instruct the site generator: abbreviation definitions (`*[HTML]: Hyper Text Markup Language`, which
# Python-Markdown turns into tooltips), and MyST's targets (`(queues)=`), comments (`% ...`) and block breaks (`+++`).
_ABBREVIATION = re.compile(r"^[ \t]{0,3}\*\[[^\]\n]+\]:")
_MYST_LINE = re.compile(r"^(?:\([^()\s]+\)=[ \t]*|%(?:[ \t].*)?|\+\+\+.*)$")
_MARKUP_HINTS = ("!!!", "???", "===", ":::", "8<-", "*[", ")=", "%", "+++")
_MARKUP_STARTS = frozenset("!?=:#*(%+`~")  # the first characters of the lines `_markup_lines` reads


@dataclass
class _Open:
    """A block `_markup_lines` is inside: an admonition, a tab, a colon fence."""

    region: int  # the number its lines share (0: none of its own)
    marker: int  # its marker line
    indent: str  # the marker line's indentation, once moved out
    body: int = 0  # Python-Markdown's: the indentation its lines need (0: a colon fence, closed by a `:::` line)
    dedent: int = 0  # the columns its lines are moved out by
    label: str = ""  # a lead label still to place: on its first paragraph's line, else on its marker line


def _indent_width(line: str) -> int:
    width = 0
    for char in line:
        if char == " ":
            width += 1
        elif char == "\t":
            width += 4 - width % 4
        else:
            break
    return width


def _dedent_line(line: str, columns: int) -> str:
    width = index = 0
    while index < len(line) and line[index] in " \t" and width < columns:
        width += 1 if line[index] == " " else 4 - width % 4
        index += 1
    return " " * max(width - columns, 0) + line[index:]


def _admonition_label(match: re.Match[str]) -> tuple[str, bool] | None:
    """The label of a `!!!`, `???` or `===` line; None when the line is no such marker ("!!! Read this: ...")."""
    marker, rest = match.group("marker"), match.group("rest")
    if marker.startswith("="):
        tab = _TAB_ARGS.fullmatch(rest)
        return None if tab is None else _block_label("tab", tab.group("title").strip())
    args = _ADMONITION_ARGS.fullmatch(rest)
    if args is None:
        return None
    kinds, title = args.group("kinds"), args.group("title")
    if kinds:
        return _note_label(kinds.split()[0].lower(), title or ""), True
    if marker == "!!!" or title is None:
        return None
    return _block_label("details", title.strip())  # `??? "Title"`: a collapsible block of no kind


def _colon_label(match: re.Match[str], classes: Sequence[str] = ()) -> tuple[str, bool] | None:
    """The label of a colon fence's opening line (`classes`: its MyST options'); None for a line that opens none
    ("::: not a fence")."""
    name = (match.group("braced") or match.group("name")).lower()
    base = _directive_base(name)
    if not (match.group("braced") or name in _COLON_NAMES or base in _MYST_BODY or base in _RST_VERSIONS):
        return None
    title = (match.group("title") or match.group("rest") or "").strip()
    if match.group("braced") and title and base in _NOTE_KINDS and base != "admonition":
        return f"{_note_label(base)} {title}", False  # MyST's `:::{note} Text`: the text is the note's first line
    if base == "admonition":
        return _note_label(_admonition_kind(classes), title), True
    return _block_label(base, title)


def _admonition_kind(classes: Sequence[str]) -> str:
    """A generic admonition's kind: the first of its classes that names one (`:class: tip`), else "admonition"."""
    return next((c for c in classes if c in _NOTE_KINDS and c != "admonition"), "admonition")


_MYST_CLASS = re.compile(r"^:?class:[ \t]*(.*)$")


def _myst_options(lines: Sequence[str], start: int) -> tuple[int, list[str]]:
    """A MyST directive's options from line `start` on (`:class: tip` lines, or a `---` YAML block): the line its
    body starts at, and the classes they give."""
    index, options = start, []
    if index < len(lines) and lines[index].strip() == "---":
        close = next((k for k in range(index + 1, min(index + 100, len(lines))) if lines[k].strip() == "---"), 0)
        if close:
            index, options = close + 1, [line.strip() for line in lines[start + 1 : close]]
    while index < len(lines) and _MYST_OPTION.match(lines[index].strip()):
        options.append(lines[index].strip())
        index += 1
    classes = [c for option in options if (found := _MYST_CLASS.match(option)) for c in found.group(1).split()]
    return index, classes


def _in_list_item(lines: Sequence[str], index: int, width: int) -> bool:
    """Whether a marker line indented four columns or more sits in a list item's body (a marker), rather than in
    an indented code block (an example of the syntax)."""
    for above in reversed(lines[max(index - 2000, 0) : index]):
        if not above.strip() or _indent_width(above) >= width:
            continue
        item = _LIST_ITEM.match(above)
        if item:
            return width < len(item.group(1).expandtabs(4)) + 4
        return _indent_width(above) > 0 and width - _indent_width(above) < 4
    return False


def _snippet_block_end(lines: Sequence[str], index: int) -> int | None:
    """The closing line of a block of snippet file names opened at `index`, if there is one."""
    for end in range(index + 1, min(index + 200, len(lines))):
        if _SNIPPET_BLOCK.match(lines[end]):
            return end
        if len(lines[end].split()) > 1:  # prose: the opener stood alone
            return None
    return None


def _markup_lines(body: str) -> tuple[str, list[int]]:
    """`body` with the markup of admonitions, tabs, colon fences, mkdocstrings, snippets, abbreviations and MyST's
    targets and comments rewritten line for line, so the parser's line maps still point at the author's lines: a
    marker line blanked or made its label, an indented body moved out, a line that only instructs the site
    generator blanked. Lines inside code fences are left alone, but for snippet markers (the site pastes those in
    code too). With it, each line's region: the lines of one labelled block share a number (0: none, and no list at
    all when there is no such markup), by which `_markdown_blocks` keeps the block's paragraphs together."""
    if not any(hint in body for hint in _MARKUP_HINTS):
        return body, []
    lines = body.split("\n")
    regions = [0] * len(lines)
    stack: list[_Open] = []
    indented: list[int] = []  # positions in `stack` of Python-Markdown's blocks, whose bodies end by indentation
    shift = 0  # columns the current line is moved out by: the dedent of every open block
    fence: re.Pattern[str] | None = None  # the closing line of the code fence we are in
    fence_depth = 0  # how many blocks were open when it opened
    last_close = max((i for i, line in enumerate(lines) if _COLON_CLOSE.match(line)), default=-1)
    count = 0

    def close(depth: int) -> None:  # leave the blocks from `depth` on; a label still pending says its title alone
        nonlocal fence, shift
        for entry in stack[depth:]:
            if entry.label:
                lines[entry.marker] = entry.indent + _without_colon(entry.label)
            shift -= entry.dedent
        del stack[depth:]
        while indented and indented[-1] >= depth:
            indented.pop()
        if fence is not None and fence_depth > depth:
            fence = None

    def open_block(index: int, indent: str, label: str, lead: bool, body: int = 0, dedent: int = 0) -> None:
        nonlocal count, shift
        if label:
            count += 1
        entry = _Open(count if label else (stack[-1].region if stack else 0), index, indent, body, dedent)
        if lead and label:
            entry.label = label
            lines[index] = ""
        else:
            lines[index] = indent + label if label else ""
        if body:
            indented.append(len(stack))
        stack.append(entry)
        shift += dedent
        regions[index] = entry.region

    index = 0
    while index < len(lines):
        line = lines[index]
        stripped = line.lstrip()
        if stripped and indented and _indent_width(line) < stack[indented[-1]].body:
            cut = indented[-1]
            while indented and _indent_width(line) < stack[indented[-1]].body:
                cut = indented.pop()
            close(cut)
        regions[index] = stack[-1].region if stack else 0
        if not stripped:
            index += 1
            continue
        if shift:
            line = lines[index] = _dedent_line(line, shift)
        first = stripped[0]
        if first in "-;":  # snippet markers, in code too
            escaped = _SNIPPET_ESCAPED.match(line)
            if escaped:
                line = lines[index] = escaped.group(1) + escaped.group(2) + line[escaped.end() :]
            elif _SNIPPET.match(line):
                lines[index] = ""
                index += 1
                continue
            elif _SNIPPET_BLOCK.match(line):
                end = _snippet_block_end(lines, index)
                for k in range(index, index + 1 if end is None else end + 1):
                    lines[k], regions[k] = "", regions[index]
                index = index + 1 if end is None else end + 1
                continue
        if fence is not None:
            if fence.match(line):
                fence = None
            index += 1
            continue
        top = stack[-1] if stack else None
        if top is not None and top.label and not _COLON_CLOSE.match(line) and not _HEADING_LINE.match(line):
            if _plain(line) and _indent_width(line) - _indent_width(top.indent) < 4:
                lead = len(line) - len(line.lstrip())
                line = lines[index] = f"{line[:lead]}{top.label} {line[lead:]}"
            else:
                lines[top.marker] = top.indent + top.label
            top.label = ""
        if first not in _MARKUP_STARTS:
            index += 1
            continue
        opened = _FENCE_OPEN.match(line)
        indented_open = _INDENTED_OPEN.match(line) if not opened else None
        label = _admonition_label(indented_open) if indented_open else None
        api = _API_LINE.match(line) if not opened and label is None else None
        if opened:
            fence, fence_depth = _fence_closer(opened.group(1)), len(stack)
        elif label is not None and (_indent_width(line) < 4 or _in_list_item(lines, index, _indent_width(line))):
            width = _indent_width(line)
            following = next((k for k in range(index + 1, len(lines)) if lines[k].strip()), None)
            inner = _indent_width(lines[following]) - shift if following is not None else 0
            dedent = min(inner, width + 4) - width if inner > width else 0
            open_block(index, indented_open.group("indent"), *label, body=shift + width + max(dedent, 1), dedent=dedent)
        elif api and _api_line(api, lines, index, shift, last_close):
            lines[index] = f"{api.group('indent')}API reference: `{api.group('id')}`"
            width = _indent_width(line) + shift
            index += 1
            while index < len(lines) and lines[index].strip() and _indent_width(lines[index]) > width:
                lines[index], regions[index] = "", regions[index - 1]
                index += 1
            continue
        elif _COLON_CLOSE.match(line):
            lines[index] = ""
            colon = next((k for k in range(len(stack) - 1, -1, -1) if not stack[k].body), None)
            if colon is not None:
                close(colon)
        elif (colon_open := _COLON_OPEN.match(line)) and _colon_label(colon_open) is not None:
            body, classes = _myst_options(lines, index + 1) if colon_open.group("braced") else (index + 1, [])
            for k in range(index + 1, body):  # MyST's options open the body: `:class: tip`
                lines[k] = ""
            open_block(index, colon_open.group("indent"), *_colon_label(colon_open, classes))
        elif _ABBREVIATION.match(line) or (
            _MYST_LINE.match(line) and (first != "%" or index == 0 or not lines[index - 1].strip())
        ):  # (a "% of ..." line that goes on a paragraph is prose)
            lines[index] = ""
        index += 1
    close(0)
    return "\n".join(lines), regions


def _api_line(match: re.Match[str], lines: Sequence[str], index: int, shift: int, last_close: int) -> bool:
    """Whether a `::: name` line is mkdocstrings' (or mkautodoc's): a dotted name, or options under it, or a name no
    colon fence takes with no `:::` line after it to close one."""
    name = match.group("id")
    if "." in name or "/" in name or "::" in name:
        return True
    if name.lower() in _COLON_NAMES or _directive_base(name) in _MYST_BODY or _directive_base(name) in _RST_VERSIONS:
        return False
    following = lines[index + 1] if index + 1 < len(lines) else ""
    if following.strip() and _indent_width(following) - shift > _indent_width(lines[index]):
        return True
    return index > last_close


def _api_reference(base: str) -> bool:
    """Sphinx's autodoc directives (`autoclass`, `automodule`, ...), not the summaries (`autosummary`): each reads
    "API reference: `orbitron.Queue`" over its body, as mkdocstrings' `:::` lines do."""
    return base.startswith("auto") and not base.endswith("summary")


def _api_text(name: str) -> str:
    return f"API reference: `{name}`"


def _myst_directive(token: Token) -> tuple[str, str, str, list[str]] | None:
    """(name, argument, body without its options, the classes its options give) of a MyST directive fence; None for
    any other fence."""
    match = _MYST_FENCE.match(token.info.strip()) if token.type == "fence" else None
    if match is None:
        return None
    lines = token.content.split("\n")
    start, classes = _myst_options(lines, 0)
    return match.group(1).lower(), match.group(2).strip(), "\n".join(lines[start:]).strip("\n"), classes


def _code_text(token: Token) -> str:
    directive = _myst_directive(token)
    if directive is not None:  # ```{code-block} python: the argument is the language; an unknown name is none
        name, argument, body, _ = directive
        if name in _MYST_CODE:
            return _fenced(body, argument.split()[0] if argument else "")
        return _fenced(body, name if name in _CELL_LANGUAGES else "")  # Quarto's and Jupytext's ```{python}
    language = token.info.split()[0] if token.type == "fence" and token.info.strip() else ""
    return _fenced(token.content, language)


def _myst_blocks(token: Token, headings: tuple[str, ...], *, mdx: bool) -> list[Block] | None:
    """The blocks a MyST directive fence stands for, under `headings`; None when it is code (or no directive)."""
    directive = _myst_directive(token)
    if directive is None or directive[0] in _MYST_CODE:
        return None
    name, argument, body, classes = directive
    base = _directive_base(name)
    if _skipped(base):
        return []
    if base in _NOTE_KINDS and base != "admonition" and argument:  # ```{note} Text: the note's first line
        body, argument = f"{argument}\n{body}", ""
    if name == "eval-rst":
        inner = parse_rst(body, source="", filename="", fragment=True).blocks
    elif base in _MYST_BODY or base in _RST_VERSIONS or base in _NOTE_KINDS or _api_reference(base):
        inner = _markup_blocks(body, mdx=mdx)[0]
    else:
        return None
    inner = [b.model_copy(update={"headings": headings + b.headings}) for b in inner]
    if name == "eval-rst":
        return inner
    if _api_reference(base):  # ```{autoclass} orbitron.Queue: its docstring is generated
        return [Block(text=_api_text(argument), headings=headings), *inner] if argument else inner
    if argument and not inner and base in _RST_PROSE:  # ```{seealso} [pip install](install.md) with no body
        inner = [Block(text=_unescape_markdown(_myst_roles(argument)), headings=headings)]
        argument = ""
    if base == "admonition":  # a generic one, of the kind its class names (`:class: tip`)
        label, lead = _note_label(_admonition_kind(classes), argument), True
    else:
        label, lead = _block_label(base, argument)
    return _labelled(inner, label, lead, headings) if label or lead else inner


def _markup_blocks(
    body: str, *, mdx: bool = False, outline: list[tuple[int, str]] | None = None
) -> tuple[list[Block], str]:
    """`_markdown_blocks` of a body whose admonitions, tabs and other site-generator markup `_markup_lines` reads."""
    body, regions = _markup_lines(body)
    return _markdown_blocks(body, mdx=mdx, outline=outline, regions=regions)


def _markdown_blocks(
    body: str,
    *,
    mdx: bool = False,
    outline: list[tuple[int, str]] | None = None,
    regions: Sequence[int] = (),
) -> tuple[list[Block], str]:
    """The body's blocks and its first H1; every heading, as (level, text), is appended to `outline` if given.
    Consecutive paragraphs of one labelled block (`regions`, by line) are kept in one block."""
    md = _markdown_parser(mdx=mdx)
    env: dict = {}
    tokens = md.parse(body, env)
    lines = body.split("\n")
    blocks: list[Block] = []
    path: list[tuple[int, str]] = []  # (heading level, heading text), outermost first
    first_h1 = ""
    last_region = 0

    def emit(block: Block, line: int) -> None:
        nonlocal last_region
        region = regions[line] if 0 <= line < len(regions) else 0
        previous = blocks[-1] if blocks else None
        if (
            region
            and region == last_region
            and previous is not None
            and previous.kind == block.kind == BlockKind.TEXT
            and previous.headings == block.headings
        ):
            blocks[-1] = previous.model_copy(update={"text": f"{previous.text}\n\n{block.text}"})
        else:
            blocks.append(block)
        last_region = region

    def add(kind: BlockKind, text: str, line: int) -> None:
        if kind == BlockKind.TEXT:
            text = _without_styling(_without_pictures(text))
            text = _unescape_markdown(_myst_roles(textwrap.dedent(text))).strip()
            if not _WORD.search(text):  # leftover markup ("---", a lone ">") says nothing
                return
            text = _BLANK_RUN.sub("\n\n", text)  # a marker line blanked inside a list leaves one more
        if text.strip():
            emit(Block(kind=kind, text=text, headings=tuple(t for _, t in path)), line)

    def add_fence(token: Token) -> None:  # a code block, or the blocks of the MyST directive it is
        line = token.map[0] if token.map else -1
        directive = _myst_blocks(token, tuple(t for _, t in path), mdx=mdx)
        if directive is not None:
            for block in directive:
                emit(block, line)
        elif token.content.strip():  # a fence left empty (its snippet line gone) says nothing
            add(BlockKind.CODE, _code_text(token), line)

    def add_html(raw: str, line: int) -> None:
        raw = _html_labels(re.sub(r"<!--.*?-->", " ", raw, flags=re.DOTALL))
        add(BlockKind.TEXT, re.sub(r"<[^>]*>", " ", raw), line)

    index = 0
    while index < len(tokens):
        token = tokens[index]
        end = _closing_index(tokens, index)
        start = token.map[0] if token.map else -1
        if token.type == "heading_open":
            level, text = int(token.tag[1:]), _inline_plain(tokens[index + 1], md, env)
            path[:] = [(lvl, t) for lvl, t in path if lvl < level]
            if text:
                path.append((level, text))
                if outline is not None:  # an explicit id stays in the outline, whose anchors it makes
                    explicit = _HEADING_ID.search(_CODE_SPAN.sub("", tokens[index + 1].content))
                    outline.append((level, f"{text} {{#{explicit.group(1)}}}" if explicit else text))
            if level == 1 and not first_h1:
                first_h1 = text
        elif token.type in ("fence", "code_block"):
            add_fence(token)
        elif token.type == "table_open":
            add(BlockKind.TABLE, _markdown_table(tokens[index : end + 1]), start)
        elif token.type == "html_block":
            add_html(token.content, start)
        elif token.map and token.type != "hr":
            # A paragraph, list or blockquote: the author's own lines, except that code and tables nested inside a
            # list or quote are carved out so they stay atomic CODE/TABLE blocks.
            cursor, stop = token.map
            inner = index + 1
            while inner < end:
                nested = tokens[inner]
                if nested.map and nested.type in ("fence", "code_block", "table_open"):
                    add(BlockKind.TEXT, "\n".join(lines[cursor : nested.map[0]]), cursor)
                    if nested.type == "table_open":
                        table_end = _closing_index(tokens, inner)
                        add(BlockKind.TABLE, _markdown_table(tokens[inner : table_end + 1]), nested.map[0])
                        inner = table_end
                    else:
                        add_fence(nested)
                    cursor = nested.map[1]
                inner += 1
            add(BlockKind.TEXT, "\n".join(lines[cursor:stop]), cursor)
        index = end + 1
    return blocks, first_h1


# -- MDX ---------------------------------------------------------------------------------------------------------
_FENCE_OPEN = re.compile(r"^\s*(`{3,}|~{3,})")


def _fence_closer(marker: str) -> re.Pattern[str]:
    """The line that closes a code fence opened with `marker`: the same character, at least as many of them."""
    return re.compile(rf"^\s*{re.escape(marker[0])}{{{len(marker)},}}\s*$")


_ESM_LINE = re.compile(r"^(import|export)\b")
_JSX_ATTRS = r"""(?:\s+[^\s=>/]+(?:\s*=\s*(?:"[^"]*"|'[^']*'|\{(?:[^{}]|\{[^{}]*\})*\}|[^\s>]+))?)*"""
_MDX_NOISE = re.compile(
    r"(?P<code>(`+)[^`\n]+?\2)"  # inline code is content: matched first so nothing inside it is stripped
    r"|(?P<comment>\{/\*.*?\*/\})"
    rf"|(?P<tag></?[A-Za-z][\w.:-]*{_JSX_ATTRS}\s*/?>|<>|</>)",
    re.DOTALL,
)


# Components whose attributes are text: Docusaurus' `<TabItem value="apt" label="Debian">` (its label, else its value,
# in bold above the tab, as a tab's title reads elsewhere), `<Admonition type="tip" title="Retries">` (a labelled
# note) and HTML's `<summary>` (a collapsible block's title, in bold). Stripping the tags alone lost the tab's name.
_LABELLED_TAG = re.compile(
    rf"<summary\b[^>]*>(?P<summary>[^<\n]*)</summary>|<(?P<name>TabItem|Tab|Admonition)\b(?P<attrs>{_JSX_ATTRS})\s*/?>"
)


def _jsx_attribute(attrs: str, name: str) -> str:
    """A JSX attribute's string value: `label="Debian"`, `label='Debian'` or `label={"Debian"}`."""
    value = r"""(?:"([^"]*)"|'([^']*)'|\{\s*(?:"([^"]*)"|'([^']*)'|`([^`]*)`)\s*\})"""
    found = re.search(rf"(?:^|\s){name}\s*=\s*{value}", attrs)
    return next((value for value in found.groups() if value is not None), "").strip() if found else ""


def _tag_label(match: re.Match[str]) -> str:
    if match.group("summary") is not None:
        return f"**{match.group('summary').strip()}**" if match.group("summary").strip() else ""
    attrs = match.group("attrs")
    if match.group("name") == "Admonition":
        return _note_label(_jsx_attribute(attrs, "type").lower() or "note", _jsx_attribute(attrs, "title"))
    title = _jsx_attribute(attrs, "label") or _jsx_attribute(attrs, "value")
    return f"**{title}**" if title else ""


def _html_labels(text: str) -> str:
    """`text` with the tags of `_LABELLED_TAG` read as their labels (outside code spans)."""
    if "<" not in text:
        return text
    return _sub_outside_code_spans(_LABELLED_TAG, _tag_label, text)


def _bracket_depth(line: str) -> int:
    return sum(line.count(c) for c in "{[(") - sum(line.count(c) for c in "}])")


def _strip_mdx(body: str) -> str:
    """Remove MDX-only syntax (ESM import/export, JSX tags, `{/* */}` comments); keep the text inside components.

    Code fences pass through untouched. Indented component children need no dedent: with markdown-it's indented-code
    rule disabled (as MDX itself does), indented paragraphs and fences parse as such.
    """
    out: list[str] = []
    prose: list[str] = []

    def flush_prose() -> None:
        if prose:
            out.append(_MDX_NOISE.sub(lambda m: m.group("code") or "", _html_labels("\n".join(prose))))
            prose.clear()

    lines = body.split("\n")
    index = 0
    while index < len(lines):
        line = lines[index]
        fence = _FENCE_OPEN.match(line)
        if fence:
            flush_prose()
            closing = _fence_closer(fence.group(1))
            end = index + 1
            while end < len(lines) and not closing.match(lines[end]):
                end += 1
            out.append("\n".join(lines[index : end + 1]))
            index = end + 1
            continue
        if _ESM_LINE.match(line):
            # An import/export statement may span lines; it ends when its brackets balance.
            depth = _bracket_depth(line)
            while depth > 0 and index + 1 < len(lines):
                index += 1
                depth += _bracket_depth(lines[index])
            index += 1
            continue
        prose.append(line)
        index += 1
    flush_prose()
    return "\n".join(out)


# -- HTML --------------------------------------------------------------------------------------------------------
_PRESERVE_WHITESPACE = frozenset({"pre", "textarea", "listing", "xmp", "plaintext"})
_NEVER_CONTENT = frozenset({"script", "style", "noscript", "template", "nav", "iframe", "svg", "button"})
_BLOCK_TAGS = frozenset(
    {"address", "article", "aside", "blockquote", "body", "dd", "div", "dl", "dt", "figcaption", "figure", "hr"}
    | {"h1", "h2", "h3", "h4", "h5", "h6", "li", "main", "ol", "p", "pre", "section", "table", "tbody", "td"}
    | {"tfoot", "th", "thead", "tr", "ul"}
)


def parse_html(html: str, *, source: str, filename: str) -> ParsedDocument:
    """HTML page → document: trafilatura's main-content markdown, or the body text if trafilatura finds none."""
    import trafilatura

    html = re.sub(r"^\s*<\?xml[^>]*\?>", "", html)  # lxml refuses str input that declares an encoding
    tree = lxml.html.document_fromstring(html)
    title_el = tree.find(".//title")
    page_title = _WHITESPACE.sub(" ", title_el.text_content()).strip() if title_el is not None else ""
    _clean_html_tree(tree)
    markdown = trafilatura.extract(
        copy.deepcopy(tree),
        output_format="markdown",
        include_tables=True,
        include_formatting=True,
        include_links=True,
        include_comments=False,
        favor_recall=True,
        config=_trafilatura_config(),
    )
    extractor = "trafilatura"
    outline: list[tuple[int, str]] = []
    blocks, first_h1 = _markdown_blocks(markdown or "", outline=outline)
    if not blocks:  # trafilatura keeps nothing (or only a heading) of some tiny pages: take the body text instead
        extractor = "lxml"
        outline = []
        blocks, first_h1 = _markdown_blocks(_html_fallback_markdown(tree), outline=outline)
    return ParsedDocument(
        source=source,
        filename=filename,
        title=page_title or first_h1 or prettify_stem(filename),
        blocks=blocks,
        metadata={"extractor": extractor},
        outline=outline,
    )


@functools.cache
def _trafilatura_config() -> Any:
    from trafilatura.settings import DEFAULT_CONFIG

    config = copy.deepcopy(DEFAULT_CONFIG)
    # Docs pages are often short; under the default 250 chars trafilatura swaps to a structure-less baseline.
    config["DEFAULT"]["MIN_EXTRACTED_SIZE"] = "1"
    return config


def _clean_html_tree(tree: Any) -> None:
    """Drop what is never content, and collapse insignificant whitespace so paragraphs come out unwrapped."""
    for element in list(tree.iter()):
        if not isinstance(element.tag, str):
            continue
        tag = element.tag.lower()
        chrome = tag in ("header", "footer") and not any(a.tag in ("article", "main") for a in element.iterancestors())
        if tag in _NEVER_CONTENT or chrome:
            element.drop_tree()
    for element in tree.iter():
        if not isinstance(element.tag, str):
            continue
        in_pre = any(a.tag in _PRESERVE_WHITESPACE for a in element.iterancestors())
        if element.text and not in_pre and element.tag not in _PRESERVE_WHITESPACE:
            element.text = _WHITESPACE.sub(" ", element.text)
        if element.tail and not in_pre:
            element.tail = _WHITESPACE.sub(" ", element.tail)


def _html_fallback_markdown(tree: Any) -> str:
    """Body text with headings and preformatted blocks kept, for pages trafilatura finds nothing in."""
    parts: list[str] = []

    def walk(element: Any) -> None:
        tag = element.tag.lower() if isinstance(element.tag, str) else ""
        if tag == "pre":
            parts.append("\n\n" + _fenced(element.text_content()) + "\n\n")
            return
        block = tag in _BLOCK_TAGS
        if block:
            parts.append("\n\n" + ("#" * int(tag[1]) + " " if re.fullmatch(r"h[1-6]", tag) else ""))
        if element.text and tag:
            parts.append(element.text)
        for child in element:
            walk(child)
            if child.tail:
                parts.append(child.tail)
        if block:
            parts.append("\n\n")

    body = tree.find(".//body")
    walk(body if body is not None else tree)
    return "\n\n".join(p.strip() for p in _BLANK_LINES.split("".join(parts)) if p.strip())


# -- PDF ---------------------------------------------------------------------------------------------------------
def _parse_pdf(data: bytes, *, source: str, filename: str) -> ParsedDocument:
    from pypdf import PdfReader
    from pypdf.errors import PyPdfError

    try:
        reader = PdfReader(io.BytesIO(data))
        if reader.is_encrypted and not reader.decrypt(""):
            raise IngestError(f"{filename}: PDF is password-protected")
        pages = [page.extract_text() or "" for page in reader.pages]
        info_title = (reader.metadata or {}).get("/Title")
    except IngestError:
        raise
    except (PyPdfError, ValueError, KeyError, TypeError, AttributeError, IndexError) as exc:
        raise IngestError(f"{filename}: broken or unreadable PDF ({type(exc).__name__}: {exc})") from exc
    blocks = [
        Block(text=paragraph, page=number)
        for number, text in enumerate(pages, 1)
        for paragraph in paragraphs(text.replace("\x00", ""))
    ]
    title = str(info_title).strip() if info_title else ""
    return ParsedDocument(
        source=source,
        filename=filename,
        title=title or prettify_stem(filename),
        blocks=blocks,
        metadata={"pages": len(pages)},
    )


# -- reStructuredText --------------------------------------------------------------------------------------------
class _AnyOptions(dict):
    """An option spec that takes any option: a stand-in doesn't know its directive's options, and must not fail."""

    def __missing__(self, key: str) -> Any:
        return directives.unchanged

    def __bool__(self) -> bool:  # docutils reads options only when the spec is truthy
        return True


class _SphinxCodeBlock(CodeBlock):
    """docutils' `code` under Sphinx's names, taking Sphinx's options too (`:caption:`, `:linenos:`,
    `:emphasize-lines:`): with docutils' own option list, one of them dropped the whole block."""

    option_spec = _AnyOptions(CodeBlock.option_spec)


class _DoctestCode(Directive):
    """sphinx.ext.doctest's shown blocks: `testcode` (Python), `doctest` (a console session), `testoutput` (what the
    code prints). The argument is a test group's name, not a language; the options steer the test run."""

    optional_arguments = 1
    final_argument_whitespace = True
    option_spec = _AnyOptions()
    has_content = True

    def run(self) -> list[Any]:
        if "hide" in self.options or not "".join(self.content).strip():
            return []  # rendered pages don't show it (or there is nothing to show)
        language = {"testcode": "python", "doctest": "pycon"}.get(self.name.lower(), "text")
        return [nodes.literal_block("", "\n".join(self.content), classes=["code", language])]


# Sphinx spells docutils' `code` directive `code-block`; unregistered, its code would vanish into an error node.
# sphinx.ext.doctest's blocks are code too: a stand-in would read `@retry(stop=...)` as a paragraph of prose.
# (Checked first so a Sphinx running in the same process keeps its own directive.)
for _sphinx_name, _directive in (
    ("code-block", _SphinxCodeBlock),
    ("sourcecode", _SphinxCodeBlock),
    ("testcode", _DoctestCode),
    ("testoutput", _DoctestCode),
    ("doctest", _DoctestCode),
):
    if directives._directives.get(_sphinx_name) is None:
        directives.register_directive(_sphinx_name, _directive)

# Sphinx and its extensions add directives plain docutils doesn't know (`.. tab::`, `.. versionadded::`,
# `.. option::`, `.. toctree::`, a project's own `.. pip-command-usage::`). Unknown, docutils turns each into an error
# node holding the directive's source, so `python -m pip wheel` inside a tab was indexed as a raw ".. tab::" block
# after the words "Unknown directive type". Docutils has no catch-all hook, so its directive lookup is wrapped: while
# Citewise parses (a context variable, so another docutils user in the process and other threads see docutils as it
# is), a name docutils resolves to nothing gets a stand-in: its body parsed as reStructuredText (tabs, admonitions and
# the like, a title argument kept as a label), a Sphinx version note ("New in version 22.3: ..."), or nothing (a
# table of contents, an include, generated API docs: content Citewise can't produce). Nothing is registered, so the
# registry doesn't grow with the names files use.
_RST_SKIPPED = frozenset(
    {"toctree", "autosummary", "literalinclude", "include", "index", "highlight", "currentmodule", "tabularcolumns"}
    | {"sectionauthor", "codeauthor", "moduleauthor", "graphviz", "mermaid", "plantuml", "uml", "jupyter-execute"}
    | {"module", "default-domain", "program", "inheritance-diagram"}
    | {"testsetup", "testcleanup"}  # sphinx.ext.doctest's hidden set-up: not on the rendered page
)
_RST_VERSIONS = {
    "versionadded": "New in version",
    "versionchanged": "Changed in version",
    "deprecated": "Deprecated since version",
    "versionremoved": "Removed in version",
}
# Object descriptions: the argument is a signature (an option, a variable, a function), code-like and worth keeping.
_RST_SIGNATURES = frozenset(
    {"option", "cmdoption", "envvar", "confval", "describe", "object", "function", "class", "method", "attribute"}
    | {"data", "exception", "decorator", "setting", "property"}
)
# Directives whose argument is prose to show even without a body (`.. seealso:: The zipfile module.`).
_RST_PROSE = frozenset(
    {"seealso", "todo", "rubric", "centered", "tab", "tab-item", "group-tab", "code-tab", "dropdown", "card"}
    | {"grid-item-card", "admonition", "hlist", "glossary"}
)
_RST_CONDITIONS = frozenset({"only", "ifconfig"})  # the argument is a build condition, not text
_RST_OTHER_BUILDERS = re.compile(r"\b(latex|man|texinfo|epub|text|xml|pdf)\b")
_STAND_INS: contextvars.ContextVar[bool] = contextvars.ContextVar("citewise_rst_stand_ins", default=False)


def _directive_base(name: str) -> str:
    """A directive's name without its domain, lowercased: `py:function` → `function`."""
    return name.lower().rsplit(":", 1)[-1]


def _skipped(base: str) -> bool:
    """Directives whose content Citewise can't produce or shouldn't index (see `_RST_SKIPPED`), generated summary
    tables among them (`autosummary`, `autoapisummary`)."""
    return base in _RST_SKIPPED or (base.startswith("auto") and base.endswith("summary"))


def _version_label(base: str, version: str) -> str:
    """ "New in version 2.3" for a version note (`_RST_VERSIONS`) of that version."""
    return f"{_RST_VERSIONS[base]} {version}".strip()


class _StandIn(Directive):
    """A directive docutils doesn't know: its body parsed as reStructuredText, its argument shown as fits its kind."""

    optional_arguments = 1
    final_argument_whitespace = True
    option_spec = _AnyOptions()
    has_content = True

    def run(self) -> list[Any]:
        name, base = self.name.lower(), _directive_base(self.name)
        if _skipped(base):
            return []
        argument = " ".join(self.arguments).strip()
        if base == "only" and "html" not in argument and _RST_OTHER_BUILDERS.search(argument):
            return []  # the same text for another builder (an html twin usually sits beside it)
        body = nodes.container()
        if self.content:
            self.state.nested_parse(self.content, self.content_offset, body)
        if not argument or base in _RST_CONDITIONS:
            pass
        elif _api_reference(base):  # autodoc: the docstring is generated; the body adds to it
            body.insert(0, nodes.paragraph("", "", nodes.Text("API reference: "), nodes.literal(text=argument)))
        elif base in _RST_SIGNATURES or ":" in name:
            body.insert(0, nodes.paragraph("", "", nodes.literal(text=argument)))
        elif body.children and base not in _NOTE_KINDS:  # a tab's or a card's title: the label above its body
            body.insert(0, nodes.paragraph("", "", nodes.strong(text=argument)))
        elif base in _RST_PROSE or base in _NOTE_KINDS:  # `.. seealso:: The zipfile module.`: its first line
            inline, _ = self.state.inline_text(argument, self.lineno)
            body.insert(0, nodes.paragraph("", "", *inline))
        # else: a project's own directive with only an argument (`.. pip-command-usage:: wheel`): its output is
        # generated by code Citewise can't run, and the argument alone says nothing
        if base in _NOTE_KINDS and body.children:  # an admonition docutils doesn't know (Sphinx's seealso, todo)
            return [nodes.admonition("", *body.children, classes=[base])]
        return [body] if body.children else []


class _VersionNote(Directive):
    """Sphinx's versionadded / versionchanged / deprecated / versionremoved: "Changed in version 2.0: <text>"."""

    required_arguments = 1
    optional_arguments = 1
    final_argument_whitespace = True
    option_spec = _AnyOptions()
    has_content = True

    def run(self) -> list[Any]:
        label = _version_label(_directive_base(self.name), self.arguments[0])
        body = nodes.container()
        if self.content:
            self.state.nested_parse(self.content, self.content_offset, body)
        if len(self.arguments) > 1:  # the note's text on the directive's lines
            inline, _ = self.state.inline_text(self.arguments[1], self.lineno)
            body.insert(0, nodes.paragraph("", "", nodes.Text(f"{label}: "), *inline))
        elif body.children and isinstance(body[0], nodes.paragraph):
            body[0].insert(0, nodes.Text(f"{label}: "))
        else:
            body.insert(0, nodes.paragraph(text=f"{label}."))
        return [body]


_docutils_directive = getattr(directives.directive, "__wrapped__", directives.directive)


@functools.wraps(_docutils_directive)
def _directive_or_stand_in(directive_name: str, language_module: Any, document: Any) -> tuple[Any, list[Any]]:
    found, messages = _docutils_directive(directive_name, language_module, document)
    if found is None and _STAND_INS.get():
        return (_VersionNote if _directive_base(directive_name) in _RST_VERSIONS else _StandIn), []
    return found, messages


directives.directive = _directive_or_stand_in


_RST_SETTINGS = {
    "report_level": 5,  # parser complaints go nowhere: a sloppy file still yields its text
    "halt_level": 5,
    "warning_stream": False,
    "file_insertion_enabled": False,  # `.. include::` must not read files outside the corpus
    "raw_enabled": False,
    "syntax_highlight": "none",
}


def parse_rst(text: str, *, source: str, filename: str, fragment: bool = False) -> ParsedDocument:
    """reStructuredText → document, walking the docutils doctree. A `fragment` (a MyST ```{eval-rst} block) has no
    document title or docinfo: a leading field list or section title is content."""
    overrides = {**_RST_SETTINGS, "docinfo_xform": False, "doctitle_xform": False} if fragment else _RST_SETTINGS
    token = _STAND_INS.set(True)
    try:
        doctree = publish_doctree(text, settings_overrides=overrides)
    finally:
        _STAND_INS.reset(token)
    title = str(doctree.get("title", "")).strip()
    metadata: dict[str, Any] = {}
    doc_date = None
    for info in doctree.findall(nodes.docinfo):
        for field in info.children:
            if isinstance(field, nodes.field):
                key, value = field[0].astext().strip().lower(), field[1].astext().strip()
            else:
                key, value = field.tagname, field.astext().strip()
            if key == "date" and _iso_date(value):
                doc_date = _iso_date(value)
            else:
                metadata[key] = value
    blocks: list[Block] = []
    _rst_walk(doctree, (title,) if title else (), blocks)
    return ParsedDocument(
        source=source,
        filename=filename,
        title=title or prettify_stem(filename),
        blocks=blocks,
        date=doc_date,
        metadata=metadata,
    )


def _rst_walk(node: Any, headings: tuple[str, ...], blocks: list[Block]) -> None:
    skipped = (
        nodes.title,
        nodes.subtitle,
        nodes.docinfo,
        nodes.comment,
        nodes.system_message,
        nodes.target,
        nodes.substitution_definition,
        nodes.raw,
        nodes.decoration,
    )
    containers = (nodes.Admonition, nodes.block_quote, nodes.container, nodes.topic, nodes.sidebar, nodes.compound)
    for child in node.children:
        if isinstance(child, nodes.section):
            _rst_walk(child, (*headings, child[0].astext().strip()), blocks)
        elif isinstance(child, skipped):
            continue
        elif isinstance(child, nodes.literal_block | nodes.doctest_block):
            blocks.append(Block(kind=BlockKind.CODE, text=_rst_code(child), headings=headings))
        elif isinstance(child, nodes.table):
            table = _rst_table(child)
            if table:
                blocks.append(Block(kind=BlockKind.TABLE, text=table, headings=headings))
        elif isinstance(child, nodes.Admonition):  # a labelled note: "Tip — Title: ..." in one block
            inner: list[Block] = []
            _rst_walk(child, headings, inner)
            blocks.extend(_labelled(inner, _rst_note_label(child), True, headings))
        elif isinstance(child, containers):
            _rst_walk(child, headings, blocks)  # a note's literal block is still a CODE block
        elif isinstance(child, nodes.bullet_list | nodes.enumerated_list) and any(
            True for _ in child.findall(nodes.literal_block)
        ):
            _rst_list(child, headings, blocks)
        else:
            text = _rst_text(child).strip()
            if _WORD.search(text):
                blocks.append(Block(text=text, headings=headings))


def _rst_note_label(node: Any) -> str:
    """An admonition's label: its kind ("Warning:"), with a generic admonition's title ("Tip — Retries:" when its
    class names a kind, else "Retries:")."""
    title = next((_rst_inline(c) for c in node.children if isinstance(c, nodes.title)), "")
    if node.tagname != "admonition":
        return _note_label(node.tagname, title)
    return _note_label(_admonition_kind(node.get("classes", [])), title)


def _rst_list(node: Any, headings: tuple[str, ...], blocks: list[Block]) -> None:
    """A list that holds code, as the markdown path carves one: the items' text as TEXT (markers and nesting kept),
    each code block inside it as its own CODE block, in reading order, so no command ends up inside a paragraph."""
    for kind, text in _rst_list_parts(node):
        if kind == BlockKind.CODE or _WORD.search(text):
            blocks.append(Block(kind=kind, text=text, headings=headings))


def _rst_list_parts(node: Any) -> list[tuple[BlockKind, str]]:
    parts: list[tuple[BlockKind, str]] = []
    for number, item in enumerate(node.children, node.get("start", 1)):
        marker = _rst_marker(node, number) + " "
        for kind, text in _rst_item_parts(item):
            if kind == BlockKind.TEXT and marker:  # the item's first text carries its marker; its lines hang under it
                text, marker = marker + text.replace("\n", "\n" + " " * len(marker)), ""
            _add_part(parts, kind, text)
    return parts


def _rst_item_parts(parent: Any) -> list[tuple[BlockKind, str]]:
    """A list item's content in reading order: runs of text joined, each code block on its own."""
    parts: list[tuple[BlockKind, str]] = []
    for child in parent.children:
        if isinstance(child, nodes.system_message | nodes.comment | nodes.target):
            continue
        if isinstance(child, nodes.literal_block | nodes.doctest_block):
            inner = [(BlockKind.CODE, _rst_code(child))]
        elif isinstance(child, nodes.Admonition):
            note = [Block(kind=kind, text=text) for kind, text in _rst_item_parts(child)]
            inner = [(b.kind, b.text) for b in _labelled(note, _rst_note_label(child), True, ())]
        elif isinstance(child, nodes.container | nodes.block_quote | nodes.compound):
            inner = _rst_item_parts(child)
        elif isinstance(child, nodes.bullet_list | nodes.enumerated_list):
            inner = _rst_list_parts(child)
        else:
            inner = [(BlockKind.TEXT, _rst_text(child).strip())]
        for kind, text in inner:
            _add_part(parts, kind, text)
    return parts


def _rst_marker(node: Any, number: int) -> str:
    """A list item's marker: `-` in a bullet list, `3.` for the third item of a numbered one."""
    return "-" if isinstance(node, nodes.bullet_list) else f"{number}."


def _add_part(parts: list[tuple[BlockKind, str]], kind: BlockKind, text: str) -> None:
    if kind == BlockKind.TEXT and parts and parts[-1][0] == BlockKind.TEXT:
        parts[-1] = (kind, f"{parts[-1][1]}\n{text}".strip())
    elif text.strip():
        parts.append((kind, text))


def _rst_code(node: Any) -> str:
    classes = [c for c in node.get("classes", []) if c != "code"]
    return _fenced(node.astext(), classes[0] if classes else "")


def _rst_inline(node: Any) -> str:
    parts = []
    for child in node.children:
        if isinstance(child, nodes.Text):
            parts.append(child.astext())
        elif isinstance(child, nodes.literal):
            parts.append(f"`{child.astext()}`")
        elif isinstance(child, nodes.reference):
            text, uri = _rst_inline(child), child.get("refuri")
            parts.append(f"[{text}]({uri})" if uri and uri != text else text)
        elif isinstance(child, nodes.strong):
            parts.append(f"**{_rst_inline(child)}**")
        elif isinstance(child, nodes.emphasis):
            parts.append(f"*{_rst_inline(child)}*")
        elif isinstance(child, nodes.title_reference):
            # `text` in single backticks: the default role, which Sphinx projects set to a cross-reference
            # (default_role = "py:obj" and the like). `Schema.validate <marshmallow.Schema.validate>` shows its text,
            # a name reads as code; anything else (plain docutils' book title) as the words it is.
            content = child.astext()
            named = _LABELLED.fullmatch(content) or _NAME.fullmatch(content)
            parts.append(_myst_role("any", content) if named else content)
        elif isinstance(child, nodes.problematic):
            # An unknown (usually Sphinx) role such as :func:`orbitron.enqueue`: its target is code-like, and a
            # cross-reference's shown text is its text (:doc:`the sync guide <sync>`), as MyST's roles read.
            role = re.fullmatch(r":([\w.:+-]+):`(.+)`", child.astext(), re.DOTALL)
            parts.append(_myst_role(role.group(1), role.group(2)) if role else child.astext())
        elif isinstance(child, nodes.system_message | nodes.target):
            continue
        elif isinstance(child, nodes.Element):
            parts.append(_rst_inline(child))
    return "".join(parts)


def _rst_text(node: Any) -> str:
    """A body element as readable markdown: paragraphs keep inline code and links, lists keep their markers."""
    if isinstance(node, nodes.paragraph):
        return _rst_inline(node)
    if isinstance(node, nodes.literal_block | nodes.doctest_block):
        return _rst_code(node)
    if isinstance(node, nodes.bullet_list | nodes.enumerated_list):
        items = []
        for number, item in enumerate(node.children, node.get("start", 1)):
            marker = _rst_marker(node, number)
            body = "\n".join(_rst_text(p) for p in item.children if not isinstance(p, nodes.system_message))
            items.append(f"{marker} " + body.replace("\n", "\n" + " " * (len(marker) + 1)))
        return "\n".join(items)
    if isinstance(node, nodes.definition_list_item | nodes.field):
        term = _rst_inline(node[0])
        body = "\n".join(_rst_text(p) for p in node[-1].children if not isinstance(p, nodes.system_message))
        return f"{term}\n  " + body.replace("\n", "\n  ")
    if isinstance(node, nodes.Admonition):
        parts = [_rst_text(c) for c in node.children if not isinstance(c, nodes.system_message | nodes.title)]
        return _labelled([Block(text=p) for p in parts if p.strip()], _rst_note_label(node), True, ())[0].text
    if isinstance(node, nodes.Element) and any(isinstance(c, nodes.Element) for c in node.children):
        return "\n".join(_rst_text(c) for c in node.children if not isinstance(c, nodes.system_message))
    return node.astext()


def _rst_table(node: Any) -> str:
    rows = [
        [" ".join(_rst_text(part).replace("\n", " ") for part in entry.children).strip() for entry in row.children]
        for row in node.findall(nodes.row)
    ]
    rows = [row for row in rows if row]
    return _pipe_table(rows) if rows else ""


# -- plain text --------------------------------------------------------------------------------------------------
