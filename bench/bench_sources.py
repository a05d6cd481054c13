"""Website source sync on the Somnia docs, served as HTML from a loopback server: first sync, unchanged re-sync,
and a re-sync after 5% of the pages changed.

    .venv/bin/python bench/bench_sources.py [--docs DIR] [--changed 0.05] [--max-load 0.6]

The Markdown pages are rendered to HTML once (markdown-it-py, headings given GitHub-style ids, a nav bar and a
footer around each page, links rewritten to the site's URLs), then served by a small HTTP/1.1 server on 127.0.0.1
with a sitemap, a robots.txt, ETag and Last-Modified, answering 304 to a matching conditional request, as a static
host does. The source is synced into a temporary home through `citewise.sources.sync.sync_source`, the code
`citewise sources sync` runs. The embedding model is loaded (and timed) before the first sync.
Writes bench/results/sources.json.
"""

from __future__ import annotations

import argparse
import hashlib
import os
import random
import statistics
import tempfile
import threading
import time
from email.utils import formatdate
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

from markdown_it import MarkdownIt

from _common import ROOT, SOMNIA, wait_for_quiet, write_result
from citewise.index.embeddings import create_embedder
from citewise.index.knowledge_base import KnowledgeBase
from citewise.ingest.anchors import slugify
from citewise.settings import Settings, SourceSpec
from citewise.sources.sync import sync_source

TARGET_RATIO = 0.05


def page_path(markdown_file: Path) -> str:
    """concepts_litepaper_problem.md → /docs/concepts/litepaper/problem/ (the site's own URL layout)."""
    return "/docs/" + markdown_file.stem.replace("_", "/") + "/"


def render(markdown: str, title: str) -> str:
    md = MarkdownIt("commonmark").enable(["table", "strikethrough"])
    tokens = md.parse(markdown)
    seen: dict[str, int] = {}
    for index, token in enumerate(tokens):
        if token.type == "heading_open":
            slug = slugify(tokens[index + 1].content)
            count = seen.get(slug, 0)
            seen[slug] = count + 1
            token.attrSet("id", slug if not count else f"{slug}-{count}")
        if token.type == "inline":
            for child in token.children or []:
                href = child.attrGet("href") if child.type == "link_open" else None
                if isinstance(href, str) and href.startswith("/") and not href.startswith("/docs/"):
                    child.attrSet("href", "/docs" + href.rstrip("/") + "/")
    body = md.renderer.render(tokens, md.options, {})
    return (
        f"<!doctype html><html><head><meta charset='utf-8'><title>{title} | Somnia Docs</title></head><body>"
        "<nav><a href='/docs/'>Docs</a> <a href='/docs/concepts/'>Concepts</a> "
        "<a href='/docs/developer/'>Developers</a>"
        f"</nav><main><article>{body}</article></main><footer>© Somnia Foundation. All rights reserved.</footer>"
        "</body></html>"
    )


class Site:
    """Static pages on loopback with ETag / Last-Modified and 304s; counts what it served."""

    def __init__(self, pages: dict[str, bytes]) -> None:
        self.pages = pages
        self.versions = dict.fromkeys(pages, 1)
        self.served = {"200": 0, "304": 0, "404": 0}
        lock = threading.Lock()
        site = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def do_GET(self) -> None:
                body = site.pages.get(self.path)
                if body is None:
                    status, headers, body = 404, {}, b"not found"
                else:
                    etag = '"' + hashlib.sha1(body).hexdigest()[:16] + '"'
                    headers = {
                        "ETag": etag,
                        "Last-Modified": formatdate(1_700_000_000 + site.versions[self.path] * 86400, usegmt=True),
                        "Content-Type": "text/plain" if self.path.endswith(".txt") else "text/html; charset=utf-8",
                    }
                    status = 304 if self.headers.get("If-None-Match") == etag else 200
                with lock:
                    site.served[str(status)] += 1
                self.send_response(status)
                for key, value in headers.items():
                    self.send_header(key, value)
                self.send_header("Content-Length", "0" if status == 304 else str(len(body)))
                self.end_headers()
                if status != 304:
                    self.wfile.write(body)

            def log_message(self, format: str, *args: object) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        self.base = f"http://127.0.0.1:{self.server.server_address[1]}"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def change(self, path: str, body: bytes) -> None:
        self.pages[path] = body
        self.versions[path] += 1


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--docs", type=Path, default=SOMNIA / "docs", help="folder of Markdown pages to serve")
    parser.add_argument("--changed", type=float, default=0.05, help="share of pages changed before the last re-sync")
    parser.add_argument("--repeats", type=int, default=3, help="unchanged re-syncs to take the median of")
    parser.add_argument(
        "--max-load", type=float, default=0.6, help="wait until the 1-minute load average is below this (shared box)"
    )
    args = parser.parse_args()

    started = time.perf_counter()
    files = sorted(args.docs.glob("*.md"))
    pages: dict[str, bytes] = {}
    for file in files:
        text = file.read_text(encoding="utf-8")
        title = text.split("\n", 1)[0].lstrip("# ").split("|")[0].strip() or file.stem
        pages[page_path(file)] = render(text, title).encode()
    if "/docs/" not in pages:  # the start URL: a landing page linking every page, as a docs home does
        links = "".join(f"<li><a href='{path}'>{path}</a></li>" for path in sorted(pages))
        pages["/docs/"] = (
            render("# Somnia documentation", "Somnia docs")
            .replace("</article>", f"<ul>{links}</ul></article>")
            .encode()
        )
    render_s = time.perf_counter() - started
    doc_pages = sorted(pages)
    site = Site(pages)
    urls = "".join(f"<url><loc>{site.base}{path}</loc></url>" for path in sorted(pages))
    site.pages["/sitemap.xml"] = (
        f'<?xml version="1.0"?><urlset xmlns="http://www.sitemaps.org/schemas/sitemap/0.9">{urls}</urlset>'
    ).encode()
    site.pages["/robots.txt"] = f"User-agent: *\nAllow: /\nSitemap: {site.base}/sitemap.xml\n".encode()
    site.versions.update({"/sitemap.xml": 1, "/robots.txt": 1})

    load_before = wait_for_quiet(args.max_load, timeout_s=300)
    with tempfile.TemporaryDirectory(prefix="citewise-bench-sources-") as home:
        spec = SourceSpec(url=site.base + "/docs/", allow_private_network=True)
        settings = Settings(home=Path(home), sources={"somnia": spec})
        begun = time.perf_counter()
        embedder = create_embedder(settings)
        embedder.embed_documents(["warm up"])
        model_load_s = time.perf_counter() - begun

        kb = KnowledgeBase(settings, embedder=embedder)
        first = sync_source(kb, "somnia")
        assert first.ok, first.error
        chunks = sum(r.chunk_count for r in kb.registry.list())

        unchanged = [sync_source(KnowledgeBase(settings, embedder=embedder), "somnia") for _ in range(args.repeats)]
        assert all(r.ok for r in unchanged)
        resync = statistics.median(r.elapsed_s for r in unchanged)

        rng = random.Random(13)
        changed = rng.sample(doc_pages, max(1, round(len(doc_pages) * args.changed)))
        for path in changed:
            site.change(path, site.pages[path].replace(b"</article>", b"<p>Updated: this page changed.</p></article>"))
        partial = sync_source(KnowledgeBase(settings, embedder=embedder), "somnia")
        assert partial.ok, partial.error
    site.server.shutdown()

    ratio = resync / first.elapsed_s
    result = {
        "corpus": os.path.relpath(args.docs, ROOT),
        "pages": len(doc_pages),
        "render_s": round(render_s, 2),
        "model_load_s": round(model_load_s, 2),
        "first": {
            "seconds": first.elapsed_s,
            "documents": first.documents,
            "chunks": chunks,
            "requests": first.requests,
            "chunks_embedded": first.chunks_embedded,
            "failed": first.failed,
        },
        "unchanged": {
            "seconds_median": round(resync, 3),
            "seconds": [r.elapsed_s for r in unchanged],
            "requests": unchanged[-1].requests,
            "not_modified": unchanged[-1].not_modified,
            "chunks_embedded": max(r.chunks_embedded for r in unchanged),
            "unchanged": unchanged[-1].unchanged,
        },
        "changed": {
            "pages_changed": len(changed),
            "share": args.changed,
            "seconds": partial.elapsed_s,
            "requests": partial.requests,
            "not_modified": partial.not_modified,
            "updated": partial.updated,
            "chunks_embedded": partial.chunks_embedded,
            "chunks_reused": partial.chunks_reused,
        },
        "resync_ratio": round(ratio, 4),
        "target_ratio": TARGET_RATIO,
        "settings": {"concurrency": settings.sync.concurrency, "embeddings": settings.embeddings},
    }
    path = write_result("sources", result, load_before=load_before)
    print(
        f"first sync {first.elapsed_s:.1f}s ({first.documents} pages, {chunks} chunks, {first.requests} requests); "
        f"unchanged re-sync {resync:.3f}s ({100 * ratio:.2f}%, {unchanged[-1].not_modified} × 304, "
        f"{result['unchanged']['chunks_embedded']} chunks embedded); {len(changed)} pages changed: "
        f"{partial.elapsed_s:.2f}s, {partial.chunks_embedded} chunks embedded → {path}"
    )


if __name__ == "__main__":
    main()
