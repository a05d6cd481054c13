"""Loaders: one file (or in-memory text) → a `ParsedDocument` of `Block`s in reading order.

Each format goes through a maintained parser and comes out as the same thing: TEXT blocks of readable markdown
(inline code backticks and link URLs kept, because grounding later looks for code identifiers and URLs in chunks),
CODE blocks re-emitted as fenced blocks, TABLE blocks rendered as pipe tables, each under the heading path it sits
in and, for PDFs, on its page.

- Markdown / MDX: python-frontmatter for metadata, markdown-it-py's token stream for structure (MyST and Docusaurus
  directives read as their content). TEXT blocks are
  sliced from the source lines via the tokens' line maps, so what gets indexed is what the author wrote.
- HTML: trafilatura finds the main content and writes it as markdown, which then takes the markdown path.
- PDF: pypdf, text per page. reStructuredText: docutils doctree (Sphinx's directives through stand-ins). Plain text:
  paragraphs.

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

SUPPORTED_SUFFIXES: frozenset[str] = frozenset({".md", ".markdown", ".mdx", ".html", ".htm", ".pdf", ".rst", ".txt"})

# Front matter keys, first match wins. Modification dates come before `date`: a chunk's date says how fresh it is.
_URL_KEYS = ("source_url", "url", "canonical_url", "canonical", "permalink", "link")
_DATE_KEYS = ("last_updated", "last_modified", "lastmod", "modified", "updated", "date")

_WORD = re.compile(r"\w")
_CODE_SPAN = re.compile(r"(`+)[^`\n]+?\1")
_MD_ESCAPE = re.compile(r"\\([\\`*_{}\[\]()#+\-.!<>~|])")
_BLANK_LINES = re.compile(r"\n\s*\n")
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
        raise IngestError(f"{name}: no extractable text{hint}")
    return doc


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
    body = _colon_fences(body)
    outline: list[tuple[int, str]] = []
    blocks, first_h1 = _markdown_blocks(body, mdx=mdx, outline=outline)
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


def _myst_role(name: str, content: str) -> str:
    role = name.rsplit(":", 1)[-1]
    labelled = re.fullmatch(r"(.+?)\s*<[^<>]+>", content)
    if labelled and (role in _MYST_XREF or ":" in name):  # {ref}`Hash-checking mode <hash-mode>`: the words shown
        return labelled.group(1)
    if role in _MYST_NAMED:
        return f"{_MYST_NAMED[role]} {content}"
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


def _unescape_markdown(text: str) -> str:
    """Drop backslash escapes outside code spans: an identifier must read `max_retries`, not `max\\_retries`."""
    return _sub_outside_code_spans(_MD_ESCAPE, lambda m: m.group(1), text)


def _inline_plain(token: Token, md: MarkdownIt, env: dict) -> str:
    # `env` carries the document's link reference definitions, so `[text][ref]` reads as it would in one pass.
    children: list[Token] = []
    md.inline.parse(_myst_roles(token.content), md, env, children)
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
            rows[-1].append(_unescape_markdown(_myst_roles(token.content)).strip())
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
# Colon fences: Docusaurus' admonitions (:::note, :::tip[Title], :::caution Title) and MyST's (:::{warning},
# ::::{tab-set} around :::{tab-item} Unix). Only their marker lines are markup, so `_colon_fences` blanks them (a
# title becomes a bold label on the same line) and leaves the body where it is: headings, code and tables inside
# parse as they would anywhere, under the right heading path. (mdit-py-plugins' colon_fence parses a fence's body as
# one opaque token: an unclosed ':::' swallowed the rest of the page, headings inside lost their place, and deep
# nesting recursed.) A line is an opener only with a name Docusaurus or MyST gives one; lines inside code fences are
# left alone.
_COLON_OPEN = re.compile(
    r"^(?P<indent>[ \t]*):{3,}[ \t]*(?:\{(?P<braced>[A-Za-z][\w:.+-]*)\}|(?P<name>[A-Za-z][\w-]*))"
    r"(?:\[(?P<title>[^\]]*)\]|\{[^}]*\})?[ \t]*(?P<rest>.*)$"
)
_COLON_CLOSE = re.compile(r"^[ \t]*:{3,}[ \t]*$")
_ADMONITIONS = frozenset({"note", "tip", "info", "warning", "danger", "caution", "important", "success", "secondary"})
_CELL_LANGUAGES = frozenset({"python", "r", "julia", "bash", "sh", "sql", "ojs", "javascript", "js"})


def _myst_directive(token: Token) -> tuple[str, str, str] | None:
    """(name, argument, body without its options) of a MyST directive fence; None for any other fence."""
    match = _MYST_FENCE.match(token.info.strip()) if token.type == "fence" else None
    if match is None:
        return None
    lines = token.content.split("\n")
    if lines and lines[0].strip() == "---":  # options as a YAML block
        close = next((i for i in range(1, len(lines)) if lines[i].strip() == "---"), 0)
        lines = lines[close + 1 :]
    while lines and _MYST_OPTION.match(lines[0].strip()):
        lines = lines[1:]
    return match.group(1).lower(), match.group(2).strip(), "\n".join(lines).strip("\n")


def _code_text(token: Token) -> str:
    directive = _myst_directive(token)
    if directive is not None:  # ```{code-block} python: the argument is the language; an unknown name is none
        name, argument, body = directive
        if name in _MYST_CODE:
            return _fenced(body, argument.split()[0] if argument else "")
        return _fenced(body, name if name in _CELL_LANGUAGES else "")  # Quarto's and Jupytext's ```{python}
    language = token.info.split()[0] if token.type == "fence" and token.info.strip() else ""
    return _fenced(token.content, language)


def _colon_fences(body: str) -> str:
    """`body` with colon-fence marker lines blanked (a title kept as a bold label), line for line, so the parser's
    line maps still point at the author's lines."""
    if ":::" not in body:
        return body
    lines = body.split("\n")
    fence: re.Pattern[str] | None = None  # the closing pattern of the code fence we are in
    for index, line in enumerate(lines):
        if fence is not None:
            if fence.match(line):
                fence = None
            continue
        opened = _FENCE_OPEN.match(line)
        if opened:
            fence = _fence_closer(opened.group(1))
            continue
        if _COLON_CLOSE.match(line):
            lines[index] = ""
            continue
        match = _COLON_OPEN.match(line)
        if match is None:
            continue
        name = (match.group("braced") or match.group("name")).lower()
        base = _directive_base(name)
        known = match.group("braced") or name in _ADMONITIONS or base in _MYST_BODY or base in _RST_VERSIONS
        if not known:
            continue  # "::: not a fence": prose
        title = (match.group("title") or match.group("rest") or "").strip()
        if base in _RST_VERSIONS:
            label = _version_label(base, title) + ":"
        elif base in _RST_CONDITIONS or not title:
            label = ""
        else:
            label = f"**{title}**"
        lines[index] = match.group("indent") + label if label else ""
    return "\n".join(lines)


def _myst_blocks(token: Token, headings: tuple[str, ...], *, mdx: bool) -> list[Block] | None:
    """The blocks a MyST directive fence stands for, under `headings`; None when it is code (or no directive)."""
    directive = _myst_directive(token)
    if directive is None or directive[0] in _MYST_CODE:
        return None
    name, argument, body = directive
    base = _directive_base(name)
    if _skipped(base):
        return []
    if name == "eval-rst":
        inner = parse_rst(body, source="", filename="", fragment=True).blocks
    elif base in _MYST_BODY or base in _RST_VERSIONS:
        inner = _markdown_blocks(body, mdx=mdx)[0]
    else:
        return None
    inner = [b.model_copy(update={"headings": headings + b.headings}) for b in inner]
    if base in _RST_VERSIONS:
        label = _version_label(base, argument)
        if inner and inner[0].kind == BlockKind.TEXT:
            inner[0] = inner[0].model_copy(update={"text": f"{label}: {inner[0].text}"})
        else:
            inner.insert(0, Block(text=f"{label}.", headings=headings))
    elif argument and base in _RST_CONDITIONS:
        pass
    elif argument and inner:
        inner.insert(0, Block(text=f"**{argument}**", headings=headings))
    elif argument and base in _RST_PROSE:  # ```{seealso} [pip install](install.md) with no body
        inner.append(Block(text=_unescape_markdown(_myst_roles(argument)), headings=headings))
    return inner


def _markdown_blocks(
    body: str, *, mdx: bool = False, outline: list[tuple[int, str]] | None = None
) -> tuple[list[Block], str]:
    """The body's blocks and its first H1; every heading, as (level, text), is appended to `outline` if given."""
    md = _markdown_parser(mdx=mdx)
    env: dict = {}
    tokens = md.parse(body, env)
    lines = body.split("\n")
    blocks: list[Block] = []
    path: list[tuple[int, str]] = []  # (heading level, heading text), outermost first
    first_h1 = ""

    def add(kind: BlockKind, text: str) -> None:
        if kind == BlockKind.TEXT:
            text = _without_pictures(text)
            text = _unescape_markdown(_myst_roles(textwrap.dedent(text))).strip()
            if not _WORD.search(text):  # leftover markup ("---", a lone ">") says nothing
                return
        if text.strip():
            blocks.append(Block(kind=kind, text=text, headings=tuple(t for _, t in path)))

    def add_fence(token: Token) -> None:  # a code block, or the blocks of the MyST directive it is
        directive = _myst_blocks(token, tuple(t for _, t in path), mdx=mdx)
        if directive is None:
            add(BlockKind.CODE, _code_text(token))
        else:
            blocks.extend(directive)

    def add_html(raw: str) -> None:
        add(BlockKind.TEXT, re.sub(r"<[^>]*>", " ", re.sub(r"<!--.*?-->", " ", raw, flags=re.DOTALL)))

    index = 0
    while index < len(tokens):
        token = tokens[index]
        end = _closing_index(tokens, index)
        if token.type == "heading_open":
            level, text = int(token.tag[1:]), _inline_plain(tokens[index + 1], md, env)
            path[:] = [(lvl, t) for lvl, t in path if lvl < level]
            if text:
                path.append((level, text))
                if outline is not None:
                    outline.append((level, text))
            if level == 1 and not first_h1:
                first_h1 = text
        elif token.type in ("fence", "code_block"):
            add_fence(token)
        elif token.type == "table_open":
            add(BlockKind.TABLE, _markdown_table(tokens[index : end + 1]))
        elif token.type == "html_block":
            add_html(token.content)
        elif token.map and token.type != "hr":
            # A paragraph, list or blockquote: the author's own lines, except that code and tables nested inside a
            # list or quote are carved out so they stay atomic CODE/TABLE blocks.
            cursor, stop = token.map
            inner = index + 1
            while inner < end:
                nested = tokens[inner]
                if nested.map and nested.type in ("fence", "code_block", "table_open"):
                    add(BlockKind.TEXT, "\n".join(lines[cursor : nested.map[0]]))
                    if nested.type == "table_open":
                        table_end = _closing_index(tokens, inner)
                        add(BlockKind.TABLE, _markdown_table(tokens[inner : table_end + 1]))
                        inner = table_end
                    else:
                        add_fence(nested)
                    cursor = nested.map[1]
                inner += 1
            add(BlockKind.TEXT, "\n".join(lines[cursor:stop]))
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
            out.append(_MDX_NOISE.sub(lambda m: m.group("code") or "", "\n".join(prose)))
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


# Sphinx spells docutils' `code` directive `code-block`; unregistered, its code would vanish into an error node.
# (Checked first so a Sphinx running in the same process keeps its own directive.)
for _sphinx_name in ("code-block", "sourcecode"):
    if directives._directives.get(_sphinx_name) is None:
        directives.register_directive(_sphinx_name, _SphinxCodeBlock)

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
    | {"module", "default-domain", "program", "inheritance-diagram", "automodule"}
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
    """Directives whose content Citewise can't produce or shouldn't index (see `_RST_SKIPPED`)."""
    return base in _RST_SKIPPED or base.startswith("auto")


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
        elif base in _RST_SIGNATURES or ":" in name:
            body.insert(0, nodes.paragraph("", "", nodes.literal(text=argument)))
        elif body.children:  # a tab's or a card's title: the label above its body
            body.insert(0, nodes.paragraph("", "", nodes.strong(text=argument)))
        elif base in _RST_PROSE:
            inline, _ = self.state.inline_text(argument, self.lineno)
            body.insert(0, nodes.paragraph("", "", *inline))
        # else: a project's own directive with only an argument (`.. pip-command-usage:: wheel`): its output is
        # generated by code Citewise can't run, and the argument alone says nothing
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
        elif isinstance(child, nodes.container | nodes.Admonition | nodes.block_quote | nodes.compound):
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
        elif isinstance(child, nodes.problematic):
            # An unknown (usually Sphinx) role such as :func:`orbitron.enqueue`: its target is code-like.
            role = re.fullmatch(r":[\w.:+-]+:`(.+)`", child.astext(), re.DOTALL)
            parts.append(f"`{role.group(1)}`" if role else child.astext())
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
