"""Website sources: find a docs site's pages, fetch what changed, and read each page's main content.

Discovery starts from the start URL, the site's sitemaps (those robots.txt names, else `sitemap.xml` under the
start URL and at the site root; sitemap indexes are followed) and its `llms.txt` (else `llms-full.txt`), then
follows links, breadth first, up to `max_depth` links from a seed. Only URLs inside the source's scope are ever
requested: the start URL's host and path prefix, plus any URL prefix given with --include; --exclude and path
globs narrow it. robots.txt is obeyed (Disallow and Crawl-delay, for `sync.user_agent`), and so are a page's
`noindex` / `nofollow` (meta robots or X-Robots-Tag) and its `<link rel=canonical>`: a page whose canonical URL is
another page in scope is an alias and is not indexed twice.

A page's previous ETag / Last-Modified go out as If-None-Match / If-Modified-Since; a 304, or a body with the same
hash as last time, costs that one request and nothing else (its links are remembered from the last time they were
read). 404 and 410 mean the page is gone. Every other failure leaves the page as it was.

Parsing: ultimate-sitemap-parser reads sitemaps from the text fetched here (it is never given a URL: it fetches
nothing itself), protego reads robots.txt, markdown-it-py reads llms.txt's links, lxml and trafilatura (through
`loaders.parse_html`) read pages.
"""

from __future__ import annotations

import asyncio
import gzip
import hashlib
import io
import logging
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from email.utils import parsedate_to_datetime
from pathlib import PurePosixPath
from urllib.parse import unquote, urljoin, urlsplit, urlunsplit

import lxml.html
from markdown_it import MarkdownIt

from citewise.errors import IngestError, SourceError
from citewise.index.registry import now_iso
from citewise.ingest.anchors import heading_ids, outline_anchors
from citewise.ingest.globs import any_match
from citewise.ingest.loaders import MARKDOWN_SUFFIXES, decode_html, load_bytes, parse_html, parse_plain_text
from citewise.settings import SourceSpec, SyncSettings
from citewise.sources.fetch import Fetcher, Refused, TooLarge, check_scheme
from citewise.sources.state import SourceDocument
from citewise.types import ParsedDocument, make_doc_id

log = logging.getLogger(__name__)

_MAX_LINKS_KEPT = 2000  # links remembered per page (for the pages a 304 leaves unread)
_MAX_SITEMAPS = 50
_ASSET_SUFFIXES = frozenset(
    {".css", ".js", ".mjs", ".map", ".png", ".jpg", ".jpeg", ".gif", ".svg", ".ico", ".webp", ".avif", ".woff"}
    | {".woff2", ".ttf", ".otf", ".eot", ".zip", ".gz", ".tgz", ".tar", ".mp4", ".webm", ".mp3", ".wav", ".json"}
    | {".xml", ".rss", ".atom", ".wasm", ".exe", ".dmg"}
)
_HTML_TYPES = frozenset({"text/html", "application/xhtml+xml"})
_MARKDOWN_TYPES = frozenset({"text/markdown", "text/x-markdown"})


def normalize_url(url: str) -> str:
    """Scheme and host in lower case, default port and fragment dropped, an empty path as "/"."""
    parts = urlsplit(url.strip())
    scheme, host = parts.scheme.lower(), (parts.hostname or "").lower()
    if ":" in host:
        host = f"[{host}]"
    port = parts.port
    netloc = host if port is None or (scheme, port) in (("http", 80), ("https", 443)) else f"{host}:{port}"
    return urlunsplit((scheme, netloc, parts.path or "/", parts.query, ""))


def _origin(url: str) -> str:
    parts = urlsplit(url)
    return f"{parts.scheme}://{parts.netloc}"


def _is_url(pattern: str) -> bool:
    return pattern.startswith(("http://", "https://"))


class Scope:
    """Which URLs a web source may request: inside a prefix (the start URL's, or an --include URL prefix), not under
    an --exclude URL prefix, and matching the path globs."""

    def __init__(self, spec: SourceSpec) -> None:
        start = normalize_url(spec.url)
        self.start = start
        self.prefixes = [self._prefix(start)] + [self._prefix(normalize_url(p)) for p in spec.include if _is_url(p)]
        self.excluded = [self._prefix(normalize_url(p)) for p in spec.exclude if _is_url(p)]
        self.include_globs = [p for p in spec.include if not _is_url(p)]
        self.exclude_globs = [p for p in spec.exclude if not _is_url(p)]
        self.origins = sorted({origin for origin, _ in self.prefixes})

    @staticmethod
    def _prefix(url: str) -> tuple[str, str]:
        return _origin(url), urlsplit(url).path.rstrip("/")

    @staticmethod
    def _under(url: str, prefix: tuple[str, str]) -> bool:
        origin, base = prefix
        path = urlsplit(url).path
        return _origin(url) == origin and (not base or path == base or path.startswith(base + "/"))

    def refuses(self, url: str) -> str | None:
        """Why `url` is out of bounds, or None when it may be requested."""
        if urlsplit(url).scheme not in ("http", "https"):
            return "not http(s)"
        if not any(self._under(url, p) for p in self.prefixes):
            return "outside the source"
        path = unquote(urlsplit(url).path)
        if any(self._under(url, p) for p in self.excluded) or any_match(path, self.exclude_globs):
            return "excluded"
        if self.include_globs and not any_match(path, self.include_globs) and url != self.start:
            return "not included"
        return None

    def allows(self, url: str) -> bool:
        return self.refuses(url) is None

    def on_allowed_host(self, url: str) -> bool:
        return _origin(normalize_url(url)) in self.origins


@dataclass
class Page:
    """A page fetched this sync. `doc` is None when nothing needs re-indexing (304, or the same bytes as before)."""

    url: str
    record: SourceDocument
    doc: ParsedDocument | None = None

    @property
    def indexed(self) -> bool:
        return bool(self.record.doc_id)


@dataclass
class Crawl:
    pages: dict[str, Page] = field(default_factory=dict)  # final URL → page (indexed or not)
    gone: set[str] = field(default_factory=set)  # answered 404 / 410
    failed: dict[str, str] = field(default_factory=dict)  # URL → why; a document there stays as it was
    skipped: dict[str, str] = field(default_factory=dict)  # URL → why it was not fetched or not indexed
    outside: int = 0  # links seen that lead outside the source (never requested)
    complete: bool = True  # discovery ran to its end: what it did not find is gone
    requests: int = 0
    not_modified: int = 0
    notes: list[str] = field(default_factory=list)
    log: list[tuple[str, int]] = field(default_factory=list)


@dataclass
class _Read:
    doc: ParsedDocument | None
    links: list[str]
    note: str = ""  # why the page is not indexed (noindex, canonical alias)
    canonical: str | None = None


class WebCrawler:
    def __init__(
        self,
        spec: SourceSpec,
        sync: SyncSettings,
        known: dict[str, SourceDocument],
        *,
        should_stop: Callable[[], bool] | None = None,
    ) -> None:
        check_scheme(spec.url)
        self.spec = spec
        self.sync = sync
        self.known = known
        self.scope = Scope(spec)
        self.max_pages = spec.max_pages or sync.max_pages
        self.max_depth = sync.max_depth if spec.max_depth is None else spec.max_depth
        self.page_cap = int(sync.max_page_mb * 1024 * 1024)
        self.file_cap = int(sync.max_sitemap_mb * 1024 * 1024)
        self.should_stop = should_stop or (lambda: False)
        self.result = Crawl()
        self._robots: dict[str, object | None] = {}
        self._seen: set[str] = set()
        self._fetched = 0
        self._queue: asyncio.Queue[tuple[str, int]] = asyncio.Queue()
        self._fetcher: Fetcher | None = None

    # -- the run -----------------------------------------------------------------------------------------------
    async def run(self, *, deadline_s: float) -> Crawl:
        """Discover and fetch, for at most `deadline_s` (sync.max_sync_s) from the first request: robots.txt and
        the sitemaps count too, since a slow site (or a long Crawl-delay) can spend it all there."""
        async with Fetcher(
            allow_private=self.spec.allow_private_network,
            user_agent=self.sync.user_agent,
            timeout_s=self.sync.request_timeout_s,
            max_redirects=self.sync.max_redirects,
            concurrency=self.sync.concurrency,
            in_scope=self.scope.allows,
        ) as fetcher:
            self._fetcher = fetcher
            try:
                await asyncio.wait_for(self._crawl(), timeout=deadline_s)
            except TimeoutError:
                self.result.complete = False
                self.result.notes.append(
                    f"stopped after {deadline_s:g}s (sync.max_sync_s): pages not reached this time are kept"
                )
            finally:
                self.result.requests = fetcher.requests
                self.result.log = list(fetcher.log)
        return self.result

    async def _crawl(self) -> None:
        sitemaps: list[str] = []
        for origin in self.scope.origins:
            sitemaps += await self._read_robots(origin)
        self._add(self.scope.start, 0)
        for url in await self._sitemap_pages(sitemaps):
            self._add(url, 0)
        for url in await self._llms_links():
            self._add(url, 0)
        workers = [asyncio.create_task(self._work()) for _ in range(self.sync.concurrency)]
        try:
            await self._queue.join()
        finally:
            for worker in workers:
                worker.cancel()
            await asyncio.gather(*workers, return_exceptions=True)

    def _add(self, url: str, depth: int) -> None:
        url = normalize_url(url)
        if url in self._seen:
            return
        reason = self.scope.refuses(url)
        if reason is not None:
            if reason == "outside the source" or reason == "not http(s)":
                self.result.outside += 1
            else:
                self.result.skipped.setdefault(url, reason)
            return
        if PurePosixPath(urlsplit(url).path).suffix.lower() in _ASSET_SUFFIXES:
            return
        self._seen.add(url)
        if self._fetched >= self.max_pages:
            if self.result.complete:
                self.result.complete = False
                self.result.notes.append(
                    f"stopped at {self.max_pages} pages (max_pages): pages not reached this time are kept"
                )
            return
        self._fetched += 1
        self._queue.put_nowait((url, depth))

    async def _work(self) -> None:
        while True:
            url, depth = await self._queue.get()
            try:
                if self.should_stop():
                    self.result.complete = False
                    continue
                await self._visit(url, depth)
            except asyncio.CancelledError:
                raise
            except Exception as exc:  # one page's surprise must not end the crawl; it is reported with its URL
                log.warning("web source: %s failed unexpectedly", url, exc_info=exc)
                self.result.failed[url] = f"unexpected {type(exc).__name__}: {exc}"
            finally:
                self._queue.task_done()

    # -- one page ----------------------------------------------------------------------------------------------
    async def _visit(self, url: str, depth: int) -> None:
        result = self.result
        if not self._robots_allow(url):
            result.skipped[url] = "disallowed by robots.txt"
            return
        assert self._fetcher is not None
        try:
            response = await self._fetcher.get(url, max_bytes=self.page_cap, conditional=self._conditional)
        except Refused as exc:
            result.skipped[url] = str(exc)
            return
        except (TooLarge, SourceError) as exc:
            result.failed[url] = str(exc)
            self._follow_known(url, depth)
            return
        final = normalize_url(response.url)
        if final != url:
            if final in result.pages or final in result.gone or final in result.failed:
                return  # reached another way already
            self._seen.add(final)
            if not self._robots_allow(final):
                result.skipped[final] = "disallowed by robots.txt"
                return
        if response.status in (404, 410):
            result.gone.update({url, final})
            return
        known = self.known.get(final)
        headers = response.headers
        robots_header = headers.get("x-robots-tag", "").lower()
        if response.status == 304:
            if known is None:
                result.failed[final] = "HTTP 304 to a request that was not conditional"
                return
            result.not_modified += 1
            record = replace(known, redirects=response.redirects, updated_at=now_iso())
            self._unchanged(final, record, robots_header, depth)
            return
        if response.status != 200:
            result.failed[final] = f"HTTP {response.status}"
            self._follow_known(final, depth)
            return
        kind = _kind(headers.get("content-type", ""), final)
        if kind is None:
            result.skipped[final] = f"not a document ({headers.get('content-type', 'no content type')})"
            return
        digest = hashlib.sha256(response.body).hexdigest()
        record = SourceDocument(
            key=final,
            url=final,
            etag=headers.get("etag", ""),
            last_modified=headers.get("last-modified", ""),
            content_hash=digest,
            redirects=response.redirects,
            updated_at=now_iso(),
        )
        if known is not None and known.content_hash == digest:
            # Same bytes as last time (a server without conditional requests): nothing to read again.
            self._unchanged(final, replace(record, doc_id=known.doc_id, links=known.links, note=known.note),
                            robots_header, depth)  # fmt: skip
            return
        try:
            read = await asyncio.to_thread(_read_page, response.body, final, kind, robots_header)
        except IngestError as exc:
            result.failed[final] = str(exc)
            return
        record.links = read.links[:_MAX_LINKS_KEPT]
        self._follow(record.links, depth)
        if read.canonical is not None:
            self._add(read.canonical, depth)
        if read.doc is None:
            record.note = read.note
            result.skipped[final] = read.note
            result.pages[final] = Page(final, record)
            return
        if not read.doc.date and record.last_modified:
            read.doc.date = _http_date(record.last_modified)
        record.doc_id = make_doc_id(final)
        result.pages[final] = Page(final, record, read.doc)

    def _unchanged(self, url: str, record: SourceDocument, robots_header: str, depth: int) -> None:
        """A page with the same content as last time (a 304, or the same bytes): kept as it was, unless its
        X-Robots-Tag now says noindex, which a server may start sending without changing the page (or its ETag)."""
        if _robots_directives(robots_header) & {"noindex", "none"} and record.doc_id:
            record = replace(record, doc_id="", note="noindex (X-Robots-Tag)")
        if record.note and not record.doc_id:
            self.result.skipped[url] = record.note
        self.result.pages[url] = Page(url, record)
        self._follow(record.links, depth)

    def _follow_known(self, url: str, depth: int) -> None:
        """A page that failed for now still leads where it led last time: the pages only it links to must not look
        gone (and be removed) because it answered 500 once."""
        known = self.known.get(url)
        if known is not None:
            self._follow(known.links, depth)

    def _follow(self, links: list[str], depth: int) -> None:
        if depth >= self.max_depth:
            return
        for link in links:
            self._add(link, depth + 1)

    def _conditional(self, url: str) -> dict[str, str]:
        known = self.known.get(normalize_url(url))
        if known is None:
            return {}
        headers = {}
        if known.etag:
            headers["If-None-Match"] = known.etag
        if known.last_modified:
            headers["If-Modified-Since"] = known.last_modified
        return headers

    # -- robots.txt, sitemaps, llms.txt ------------------------------------------------------------------------
    async def _read_robots(self, origin: str) -> list[str]:
        """Read `origin`'s robots.txt; its Sitemap lines come back. A robots.txt that cannot be read (a network error,
        a 5xx) fails the sync: crawling without knowing what is disallowed would be impolite."""
        from protego import Protego

        assert self._fetcher is not None
        url = origin + "/robots.txt"
        try:
            response = await self._fetcher.get(url, max_bytes=self.file_cap, allowed=self.scope.on_allowed_host)
        except Refused:
            raise
        except SourceError as exc:
            raise SourceError(f"robots.txt of {origin} could not be read ({exc}); nothing was changed") from exc
        if response.status >= 500 or response.status == 429:
            raise SourceError(f"robots.txt of {origin} answered HTTP {response.status}; nothing was changed")
        if response.status != 200:
            self._robots[origin] = None  # no robots.txt: everything is allowed
            return []
        rules = Protego.parse(response.body.decode("utf-8", "replace"))
        self._robots[origin] = rules
        delay = rules.crawl_delay(self.sync.user_agent)
        if delay:
            self._fetcher.set_delay(urlsplit(origin).hostname or "", float(delay))
            self.result.notes.append(f"{origin} asks for {float(delay):g}s between requests (Crawl-delay)")
        return [s for s in rules.sitemaps if self.scope.on_allowed_host(s)]

    def _robots_allow(self, url: str) -> bool:
        rules = self._robots.get(_origin(url))
        return rules is None or rules.can_fetch(url, self.sync.user_agent)  # type: ignore[attr-defined]

    def _discovery_urls(self, name: str) -> list[str]:
        start = self.scope.start
        prefix = start if start.endswith("/") else start.rsplit("/", 1)[0] + "/"
        return list(dict.fromkeys([urljoin(prefix, name), urljoin(_origin(start) + "/", name)]))

    async def _fetch_text(self, url: str) -> str | None:
        assert self._fetcher is not None
        try:
            response = await self._fetcher.get(url, max_bytes=self.file_cap, allowed=self.scope.on_allowed_host)
        except SourceError as exc:
            self.result.notes.append(f"{url}: {exc}")
            return None
        if response.status != 200 or not self.scope.on_allowed_host(response.url):
            return None
        body = response.body
        if body[:2] == b"\x1f\x8b":  # a .xml.gz sitemap served as is
            try:
                body = _gunzip(body, self.file_cap)
            except (OSError, TooLarge) as exc:
                self.result.notes.append(f"{url}: {exc}")
                return None
        return body.decode("utf-8", "replace")

    async def _sitemap_pages(self, listed: list[str]) -> list[str]:
        from usp.objects.sitemap import InvalidSitemap
        from usp.tree import sitemap_from_str

        queue = [(url, 0) for url in (listed or self._discovery_urls("sitemap.xml"))]
        done: set[str] = set()
        pages: list[str] = []
        while queue and len(done) < _MAX_SITEMAPS:
            url, level = queue.pop(0)
            if url in done or not self.scope.on_allowed_host(url):
                continue
            done.add(url)
            text = await self._fetch_text(url)
            if not text or not text.strip():
                continue
            sitemap = sitemap_from_str(text)  # parses only: the sub-sitemaps of an index come back unfetched
            pages += [page.url for page in sitemap.all_pages()]
            for sub in getattr(sitemap, "sub_sitemaps", []):
                if isinstance(sub, InvalidSitemap) and level < 3:
                    queue.append((sub.url, level + 1))
        return pages

    async def _llms_links(self) -> list[str]:
        for name in ("llms.txt", "llms-full.txt"):
            for url in self._discovery_urls(name):
                text = await self._fetch_text(url)
                if text and text.strip():
                    return [urljoin(url, href) for href in _markdown_links(text)]
        return []


# -- reading one page ------------------------------------------------------------------------------------------
def _kind(content_type: str, url: str) -> str | None:
    main = content_type.split(";", 1)[0].strip().lower()
    suffix = PurePosixPath(urlsplit(url).path).suffix.lower()
    if main in _HTML_TYPES:
        return "html"
    if main in _MARKDOWN_TYPES or (main == "text/plain" and suffix in MARKDOWN_SUFFIXES):
        return "markdown"
    if main == "text/plain":
        return "text"
    if main == "application/pdf":
        return "pdf"
    return None


def page_filename(url: str) -> str:
    parts = urlsplit(url)
    segments = [unquote(s) for s in parts.path.split("/") if s]
    return segments[-1] if segments else parts.hostname or url


def _read_page(body: bytes, url: str, kind: str, robots_header: str) -> _Read:
    name = page_filename(url)
    if kind != "html":
        if "noindex" in robots_header:
            return _Read(None, [], note="noindex (X-Robots-Tag)")
        if kind == "text":
            text = body.decode("utf-8", "replace")
            doc = parse_plain_text(text, source=url, filename=name)
        else:
            suffix = ".pdf" if kind == "pdf" else ".md"
            doc = load_bytes(body, name=name if name.lower().endswith(suffix) else name + suffix, source=url)
            doc.filename = name
        if kind == "markdown":
            doc.anchors = outline_anchors(doc.outline)
        doc.source_url = url
        return _Read(doc, [])
    html = decode_html(body, name)
    tree = lxml.html.document_fromstring(html.encode("utf-8"), parser=_utf8_parser())
    base = url
    for element in tree.iter("base"):
        if element.get("href"):
            base = urljoin(url, element.get("href"))
            break
    directives = _robots_directives(robots_header)
    canonical = None
    for meta in tree.iter("meta"):
        if (meta.get("name") or "").lower() == "robots":
            directives |= set((meta.get("content") or "").lower().replace(",", " ").split())
    for link in tree.iter("link"):
        if "canonical" in (link.get("rel") or "").lower().split() and link.get("href"):
            canonical = normalize_url(urljoin(base, link.get("href")))
            break
    links: list[str] = []
    if "nofollow" not in directives and "none" not in directives:
        for anchor in tree.iter("a"):
            href = (anchor.get("href") or "").strip()
            if not href or href.startswith(("#", "mailto:", "javascript:", "tel:", "data:")):
                continue
            if "nofollow" in (anchor.get("rel") or "").lower().split():
                continue
            links.append(normalize_url(urljoin(base, href)))
        links = list(dict.fromkeys(links))
    if "noindex" in directives or "none" in directives:
        return _Read(None, links, note="noindex")
    if canonical is not None and canonical != normalize_url(url):
        return _Read(None, links, note=f"alias of its canonical URL {canonical}", canonical=canonical)
    ids = heading_ids(tree)  # also strips permalink decorations ("¶", "#") before the text is extracted
    doc = parse_html(lxml.html.tostring(tree, encoding="unicode"), source=url, filename=name)
    doc.source_url = url
    doc.anchors = outline_anchors(doc.outline, page_ids=ids)
    return _Read(doc, links)


def _robots_directives(value: str) -> set[str]:
    """The directives of a robots meta tag's content or an X-Robots-Tag header: "noindex, nofollow" → both."""
    return set(value.lower().replace(",", " ").split())


def _utf8_parser() -> lxml.html.HTMLParser:
    return lxml.html.HTMLParser(encoding="utf-8")


def _markdown_links(text: str) -> list[str]:
    """Link targets in a Markdown file (llms.txt), in order."""
    found: list[str] = []

    def walk(tokens) -> None:
        for token in tokens:
            if token.type == "link_open" and token.attrGet("href"):
                found.append(str(token.attrGet("href")))
            if token.children:
                walk(token.children)

    walk(MarkdownIt("commonmark").parse(text))
    return found


def _gunzip(data: bytes, cap: int) -> bytes:
    out = bytearray()
    with gzip.GzipFile(fileobj=io.BytesIO(data)) as stream:
        while part := stream.read(65536):
            out += part
            if len(out) > cap:
                raise TooLarge(f"decompressed over the {cap / 1048576:g} MB cap")
    return bytes(out)


def _http_date(value: str) -> str | None:
    try:
        return parsedate_to_datetime(value).date().isoformat()
    except (TypeError, ValueError, IndexError):
        return None
