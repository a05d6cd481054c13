"""GET /pages/…: a docs folder served read-only (`server.pages_dir`, `citewise serve --pages DIR`), so the links of
answers about it open without a docs site: a folder ingested with `--base-url http://HOST:PORT/pages` gets citations
that point here, and the docs' own relative links (`server.md#sessions`) resolve here too.

- Markdown is rendered as a plain HTML page whose headings carry the ids citations and the docs' links use (GitHub's
  slug rule, or an explicit `{#id}`: ingest/anchors.py). Raw HTML inside Markdown is shown as text, never run.
- `/pages/server` finds `server.md` (also .mdx, .markdown, .rst: the suffixes `--base-url` links leave out), a folder
  its index.md or README.md. Other files of the kinds Citewise ingests and pictures are sent as they are, under a
  Content-Security-Policy that runs no script (`sandbox`): the page is on the API's own origin.
- Nothing outside the folder: every path is resolved (symbolic links included) and must stay under it; hidden names
  (a dot first: `.git`, `.env`, `..`) and other file kinds are a 404 like a file that doesn't exist. No listings.
- Like every route, behind the request gate: with API keys set, a browser that follows a link sends no key and gets
  401, so mirror public docs only on a server without keys, or link citations to the published site instead.
"""

from __future__ import annotations

import asyncio
import html
from pathlib import Path
from urllib.parse import quote

import frontmatter
from fastapi import APIRouter, HTTPException
from fastapi.responses import FileResponse, HTMLResponse, RedirectResponse, Response
from markdown_it import MarkdownIt
from markdown_it.token import Token

from citewise.ingest.anchors import page_heading_ids, strip_custom_id
from citewise.ingest.loaders import MARKDOWN_SUFFIXES
from citewise.server.deps import CallerDep, StateDep

router = APIRouter(include_in_schema=False)

MARKDOWN = tuple(sorted(MARKDOWN_SUFFIXES))
LINKED_WITHOUT_SUFFIX = (*MARKDOWN, ".rst")  # what `--base-url` drops from a file's URL (ingest/pipeline.py)
INDEX_NAMES = ("index.md", "README.md", "index.mdx", "index.markdown", "readme.md")
RAW_TYPES = {
    ".rst": "text/plain; charset=utf-8",
    ".txt": "text/plain; charset=utf-8",
    ".html": "text/html; charset=utf-8",
    ".htm": "text/html; charset=utf-8",
    ".pdf": "application/pdf",
    ".png": "image/png",
    ".jpg": "image/jpeg",
    ".jpeg": "image/jpeg",
    ".gif": "image/gif",
    ".webp": "image/webp",
    ".svg": "image/svg+xml",
}
# A page of ours: its own style only. A file as it is (an HTML page, an SVG): no script, no form, no plugin.
PAGE_POLICY = "default-src 'none'; style-src 'unsafe-inline'; img-src 'self' data:; base-uri 'none'; form-action 'none'"
RAW_POLICY = "default-src 'none'; style-src 'unsafe-inline'; img-src 'self' data:; sandbox"
HEADERS = {"X-Content-Type-Options": "nosniff", "Referrer-Policy": "no-referrer", "Cache-Control": "no-cache"}

_NOT_FOUND = "No such page."


@router.get("/pages", name="pages_root")
async def pages_root(caller: CallerDep) -> RedirectResponse:
    return RedirectResponse("/pages/", status_code=308)


@router.get("/pages/{path:path}", name="pages")
async def page(path: str, state: StateDep, caller: CallerDep) -> Response:
    root = state.settings.server.pages_dir
    if root is None:
        raise HTTPException(404, "No pages are served: start the server with --pages DIR (server.pages_dir).")
    found = await asyncio.to_thread(find_page, root.resolve(), path)
    if found is None:
        raise HTTPException(404, _NOT_FOUND)
    if found.is_dir():  # /pages/guide → /pages/guide/, so the page's relative links resolve inside the folder
        return RedirectResponse(f"/pages/{quote(path.rstrip('/'))}/", status_code=308)
    suffix = found.suffix.lower()
    if suffix in MARKDOWN:
        body = await asyncio.to_thread(render_page, found, found.relative_to(root.resolve()).as_posix())
        return HTMLResponse(body, headers={**HEADERS, "Content-Security-Policy": PAGE_POLICY})
    return FileResponse(found, media_type=RAW_TYPES[suffix], headers={**HEADERS, "Content-Security-Policy": RAW_POLICY})


def find_page(root: Path, path: str) -> Path | None:
    """The file (or the folder, to redirect to with a slash) `path` names inside `root`, or None: outside the folder
    once resolved, hidden, of a kind not served, or not there. A file wins over a folder of the same name:
    `/pages/guide` is guide.md when there is one."""
    parts = [p for p in path.split("/") if p]
    if any(p.startswith(".") or "\\" in p or "\x00" in p for p in parts):
        return None
    try:
        target = root.joinpath(*parts)
        candidates = [target]
        if target.suffix.lower() not in (*LINKED_WITHOUT_SUFFIX, *RAW_TYPES):
            candidates += [target.with_name(target.name + suffix) for suffix in LINKED_WITHOUT_SUFFIX]
        for candidate in candidates if not path.endswith("/") else ():  # "guide.md/" names a folder, or nothing
            resolved = _inside(root, candidate)
            if resolved is not None and resolved.is_file() and resolved.suffix.lower() in (*MARKDOWN, *RAW_TYPES):
                return resolved
        folder = _inside(root, target)
        if folder is None or not folder.is_dir():
            return None
        if parts and not path.endswith("/"):
            return folder
        for name in INDEX_NAMES:
            index = _inside(root, folder / name)
            if index is not None and index.is_file():
                return index
    except (OSError, ValueError):  # a name the file system refuses: no such page
        return None
    return None


def _inside(root: Path, path: Path) -> Path | None:
    """`path` resolved (symbolic links followed), if it is `root` or lies under it."""
    resolved = path.resolve()
    return resolved if resolved == root or root in resolved.parents else None


_MD = MarkdownIt("commonmark", {"html": False}).enable(["table", "strikethrough"])


def _heading_text(inline: Token) -> str:
    """A heading's text as a reader sees it (code spans without their backticks, links as their text)."""
    return "".join(
        child.content if child.type in ("text", "code_inline") else " " if child.type == "softbreak" else ""
        for child in inline.children or []
    )


def render_markdown(text: str) -> tuple[str, str | None]:
    """(the HTML, the first heading's text) of a Markdown page; every heading gets its anchor id: its `{#id}` when
    it has one (what a docs site gives it, and the docs' own links use), else the slug of its text. The loader
    drops a `{#id}` from the heading it indexes, so a citation links to the slug: a heading with an `{#id}` carries
    that slug too, on an anchor of its own."""
    tokens = _MD.parse(text)
    headings = [i for i, t in enumerate(tokens) if t.type == "heading_open"]
    texts = [_heading_text(tokens[i + 1]) for i in headings]
    slugs = page_heading_ids([strip_custom_id(t) for t in texts])
    for index, ident, slug in zip(headings, page_heading_ids(texts), slugs, strict=True):
        if ident:
            tokens[index].attrSet("id", ident)
        inline = tokens[index + 1]
        children = inline.children or []
        if children and children[-1].type == "text":
            children[-1].content = strip_custom_id(children[-1].content)
        if slug and slug != ident:
            alias = Token("html_inline", "", 0, content=f'<a id="{html.escape(slug)}"></a>')
            inline.children = [alias, *children]
    first = strip_custom_id(texts[0]).strip() if texts else None
    return _MD.renderer.render(tokens, _MD.options, {}), first


def render_page(path: Path, relative: str) -> str:
    post = frontmatter.loads(path.read_text(encoding="utf-8", errors="replace"))
    body, first_heading = render_markdown(post.content)
    title = str(post.metadata.get("title") or first_heading or path.stem)
    return PAGE.format(title=html.escape(title), path=html.escape(relative), body=body)


PAGE = """<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<meta name="color-scheme" content="light dark">
<title>{title}</title>
<style>
  body {{ margin: 0; font: 16px/1.6 system-ui, -apple-system, "Segoe UI", sans-serif; }}
  header {{ padding: 10px 24px; border-bottom: 1px solid #8884; font-size: 14px; }}
  main {{ max-width: 860px; margin: 0 auto; padding: 8px 24px 64px; }}
  pre {{ overflow-x: auto; padding: 12px; border-radius: 6px; background: #8881; }}
  code {{ font: 0.9em ui-monospace, SFMono-Regular, Menlo, monospace; }}
  table {{ border-collapse: collapse; display: block; overflow-x: auto; }}
  th, td {{ border: 1px solid #8886; padding: 4px 8px; text-align: left; vertical-align: top; }}
  :target {{ scroll-margin-top: 12px; background: #ffd54a33; }}
</style>
</head>
<body>
<header><a href="/">Citewise</a> · <span>{path}</span></header>
<main>
{body}
</main>
</body>
</html>
"""
