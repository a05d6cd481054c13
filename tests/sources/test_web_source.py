"""Website sources against a real HTTP server on loopback serving a small docs site written for the tests.

The site has a sitemap index, robots.txt with a disallowed path, an llms.txt, a redirect, a 404, a page outside
the prefix, a huge page (streamed, no Content-Length), a noindex page, a canonical alias, and nav/footer noise on
every page. The real embedding model, LanceDB and quote mode answer questions from what was synced.
"""

from __future__ import annotations

import itertools
import shutil
import subprocess
import time

import pytest
from tests.sources import site_fixture as sf
from tests.sources.conftest import source_settings

from citewise.agent.runner import Citewise
from citewise.settings import SourceSpec
from citewise.sources.state import SourceState
from citewise.sources.sync import sync_source
from citewise.types import Status

GUIDE_QUESTION = "How often does the frobnicator rotate the quantum signing keys?"


def _spec(site, **extra) -> SourceSpec:
    return SourceSpec(url=site.url("/docs/"), allow_private_network=True, **extra)


def _indexed_urls(kb) -> set[str]:
    return {r.source for r in kb.registry.list() if r.status == "INDEXED"}


def test_first_sync_indexes_the_right_pages_and_the_next_one_syncs_exactly_the_changes(site, tmp_path, make_kb):
    settings = source_settings(tmp_path / "home", acme=_spec(site))
    kb = make_kb(settings)

    first = sync_source(kb, "acme")

    assert first.ok, first.error
    assert _indexed_urls(kb) == {site.url(p) for p in sf.FIRST_INDEXED}
    assert (first.added, first.removed, first.documents) == (5, 0, 5)
    requested = {hit.path for hit in site.log}
    assert "/blog/post.html" not in requested  # linked from every page, outside the prefix
    assert "/docs/private/secret.html" not in requested  # in the sitemap, disallowed by robots.txt
    assert "/docs/troubleshooting.html" in requested  # only llms.txt lists it
    assert first.skipped[site.url("/docs/private/secret.html")] == "disallowed by robots.txt"
    assert first.skipped[site.url("/docs/draft.html")] == "noindex"
    assert "canonical" in first.skipped[site.url("/docs/print/guide.html")]
    assert [f.document for f in first.failures] == [site.url("/docs/huge.html")]
    assert "cap" in first.failures[0].error
    rows = SourceState(settings.index_dir).documents("acme")
    assert rows[site.url("/docs/renamed.html")].redirects == [site.url("/docs/old-name.html")]
    assert site.url("/docs/missing.html") not in rows

    # Nav and footer noise stays out; chunks deep-link to their section with the page's own heading ids.
    agent = Citewise(settings, kb=kb)
    answer = agent.ask(GUIDE_QUESTION)
    assert answer.status == Status.SUCCESS, answer.answer
    assert answer.citations[0].source_url == site.url("/docs/guide.html#key-rotation")
    texts = " ".join(chunk.text for chunk in answer.sources)
    assert "Copyright" not in texts and "Docs home" not in texts
    install = agent.ask("How do I install the Acme command line with pip?")
    assert install.citations and install.citations[0].source_url == site.url("/docs/install.html#with-pip")

    # Change one page, delete one, add one.
    site.page("/docs/install.html", sf.INSTALL_V2)
    site.remove("/docs/guide.html")
    paths = [p for p in sf.SITEMAP_PATHS if p != "/docs/guide.html"] + ["/docs/webhook-retries.html"]
    site.page("/sitemap-docs.xml", sf.urlset(site.base, paths), "application/xml")
    site.page("/docs/webhook-retries.html", sf.WEBHOOK_RETRIES)
    site.clear_log()

    second = sync_source(kb, "acme")

    assert second.ok, second.error
    assert (second.added, second.updated, second.removed) == (1, 1, 1)
    assert _indexed_urls(kb) == {site.url(p) for p in sf.FIRST_INDEXED - {"/docs/guide.html"}} | {
        site.url("/docs/webhook-retries.html")
    }
    new_chunks = next(r.chunk_count for r in kb.registry.list() if r.source.endswith("/webhook-retries.html"))
    assert second.chunks_embedded == new_chunks + 1  # the new page, and the one edited paragraph of install
    assert second.chunks_reused > 0
    for path in ("/docs/", "/docs/renamed.html", "/docs/troubleshooting.html"):
        hits = site.requests_for(path)
        assert len(hits) == 1 and hits[0].headers.get("if-none-match") and hits[0].status == 304, (path, hits)
    assert site.requests_for("/docs/install.html")[0].headers.get("if-none-match")  # asked, and it had changed
    assert second.not_modified >= 3

    refused = Citewise(settings, kb=kb).ask(GUIDE_QUESTION)
    assert refused.status == Status.REFUSED
    assert not any("guide.html" in (c.source_url or "") for c in refused.citations)


def test_loopback_is_refused_without_allow_private_network(site, tmp_path, make_kb):
    settings = source_settings(tmp_path / "home", acme=SourceSpec(url=site.url("/docs/")))
    kb = make_kb(settings)

    report = sync_source(kb, "acme")

    assert not report.ok
    assert "--allow-private-network" in report.error and "127.0.0.1" in report.error
    assert site.log == []  # not one request reached the server
    assert kb.registry.list() == []
    run = SourceState(settings.index_dir).runs({"acme": settings.sources["acme"]})[0]
    assert run.last_ok is False and "refused" in run.last_error


def test_nothing_of_citewise_reaches_a_crawled_host(site, tmp_path, make_kb, monkeypatch):
    monkeypatch.setenv("HTTP_PROXY", "http://127.0.0.1:9")  # ignored: no proxy, no netrc from the environment
    monkeypatch.setenv("OPENAI_API_KEY", "sk-env-secret")
    settings = source_settings(tmp_path / "home", acme=_spec(site)).model_copy(
        update={"api_keys": {"citewise-key-secret": "alice"}, "llm_api_key": "sk-llm-secret"}
    )

    assert sync_source(make_kb(settings), "acme").ok

    assert site.log
    for hit in site.log:
        assert not {"authorization", "cookie", "x-api-key", "proxy-authorization"} & set(hit.headers)
        assert not any("secret" in value for value in hit.headers.values())
        assert hit.headers["user-agent"] == settings.sync.user_agent


def test_a_redirect_out_of_the_source_is_not_followed(site, tmp_path, make_kb):
    site.page("/docs/", sf.INDEX.replace("</article>", '<a href="/docs/away.html">away</a></article>'))
    site.redirect("/docs/away.html", "/blog/post.html", status=302)
    kb = make_kb(source_settings(tmp_path / "home", acme=_spec(site)))

    report = sync_source(kb, "acme")

    assert report.ok
    assert site.requests_for("/blog/post.html") == []
    assert "outside the source" in report.skipped[site.url("/docs/away.html")]


def test_a_failed_sync_keeps_the_previous_index_and_says_why(site, tmp_path, make_kb):
    settings = source_settings(tmp_path / "home", acme=_spec(site))
    kb = make_kb(settings)
    assert sync_source(kb, "acme").ok
    before = {(r.doc_id, r.file_hash) for r in kb.registry.list()}
    site.page("/robots.txt", "down for maintenance", "text/plain", status=503)
    site.remove("/docs/guide.html")  # would be removed by a successful sync

    report = sync_source(kb, "acme")

    assert not report.ok and "503" in report.error and "nothing was changed" in report.error
    assert {(r.doc_id, r.file_hash) for r in kb.registry.list()} == before
    assert Citewise(settings, kb=kb).ask(GUIDE_QUESTION).status == Status.SUCCESS
    run = SourceState(settings.index_dir).runs(settings.sources)[0]
    assert run.last_ok is False and "503" in run.last_error and run.last_success is not None


def test_a_truncated_crawl_removes_nothing(site, tmp_path, make_kb):
    settings = source_settings(tmp_path / "home", acme=_spec(site))
    kb = make_kb(settings)
    assert sync_source(kb, "acme").documents == 5
    limited = settings.model_copy(update={"sources": {"acme": _spec(site, max_pages=2)}})

    report = sync_source(make_kb(limited), "acme")

    assert report.ok and not report.complete
    assert any("max_pages" in note for note in report.notes)
    assert report.removed == 0 and len(_indexed_urls(kb)) == 5


def test_crawl_delay_spaces_requests_out(site, tmp_path, make_kb):
    site.page("/robots.txt", "User-agent: *\nCrawl-delay: 0.3\nDisallow: /docs/private/\n", "text/plain")
    site.page("/sitemap-docs.xml", sf.urlset(site.base, ["/docs/", "/docs/install.html"]), "application/xml")
    kb = make_kb(source_settings(tmp_path / "home", acme=_spec(site, max_depth=0)))

    report = sync_source(kb, "acme")

    assert report.ok and any("Crawl-delay" in note for note in report.notes)
    times = [hit.at for hit in site.log if hit.path.startswith("/docs/")]
    assert len(times) >= 2
    assert all(later - earlier >= 0.25 for earlier, later in itertools.pairwise(times))


@pytest.mark.parametrize("address", ["127.0.0.1", "10.1.2.3", "169.254.169.254", "100.64.0.1", "::1", "fd00::1"])
def test_private_loopback_and_link_local_addresses_are_not_public(address):
    from citewise.sources.fetch import is_public

    assert not is_public(address)
    assert not is_public("::ffff:" + address) if "." in address else True


def test_public_addresses_pass_and_names_are_checked_after_resolving():
    from citewise.sources.fetch import Refused, is_public, resolve_checked

    assert is_public("93.184.216.34") and is_public("2606:2800:220:1::")
    with pytest.raises(Refused, match="allow-private-network"):
        resolve_checked("localhost", 80, allow_private=False)
    assert resolve_checked("localhost", 80, allow_private=True)
    with pytest.raises(Refused):  # an address literal is checked without resolving anything
        resolve_checked("[::1]", 80, allow_private=False)


def test_file_urls_are_refused():
    from citewise.errors import ConfigError
    from citewise.sources.config import kind_of
    from citewise.sources.fetch import Refused, check_scheme

    with pytest.raises(ConfigError, match="file://"):
        kind_of(SourceSpec(url="file:///etc/passwd"))
    for url in ("file:///etc/passwd", "ftp://example.com/", "gopher://x/"):
        with pytest.raises(Refused):
            check_scheme(url)


@pytest.mark.skipif(shutil.which("flock") is None, reason="needs util-linux flock to hold the lock from outside")
def test_a_sync_is_a_writer_and_waits_for_the_home_lock(site, tmp_path, make_kb):
    settings = source_settings(tmp_path / "home", acme=_spec(site))
    kb = make_kb(settings)
    settings.home.mkdir(parents=True)
    holder = subprocess.Popen(["flock", "-o", str(settings.home / "write.lock"), "sleep", "30"])
    try:
        deadline = time.monotonic() + 10
        while not (settings.home / "write.lock").exists() and time.monotonic() < deadline:
            time.sleep(0.05)
        time.sleep(0.3)  # flock has taken it

        busy = sync_source(kb, "acme", wait_s=0)

        assert not busy.ok and "Another writer" in busy.error
        assert site.log == []  # nothing fetched while another writer holds the home
    finally:
        holder.kill()
        holder.wait()
    assert sync_source(kb, "acme", wait_s=5).ok


def test_pages_behind_a_failing_page_are_kept(site, tmp_path, make_kb):
    # troubleshooting.html is reached only through a hub page; the hub answers 500 on the second sync.
    site.page("/llms.txt", "# Acme\n\n- [Hub](/docs/hub.html)\n", "text/plain")
    site.page(
        "/docs/hub.html", sf.html("Hub", '<h1>Hub</h1><p>Start here: <a href="troubleshooting.html">help</a>.</p>')
    )
    kb = make_kb(source_settings(tmp_path / "home", acme=_spec(site)))
    assert sync_source(kb, "acme").ok
    assert site.url("/docs/troubleshooting.html") in _indexed_urls(kb)
    site.page("/docs/hub.html", "oops", "text/plain", status=500)

    report = sync_source(kb, "acme")

    assert report.ok and report.complete and report.removed == 0
    assert {site.url("/docs/hub.html"), site.url("/docs/troubleshooting.html")} <= _indexed_urls(kb)
    assert {f.document for f in report.failures} == {site.url("/docs/huge.html"), site.url("/docs/hub.html")}


def test_a_page_that_answers_410_is_removed(site, tmp_path, make_kb):
    kb = make_kb(source_settings(tmp_path / "home", acme=_spec(site)))
    assert sync_source(kb, "acme").ok
    assert site.url("/docs/install.html") in _indexed_urls(kb)
    site.page("/docs/install.html", sf.html("Gone", "<h1>Gone</h1><p>This page was retired.</p>"), status=410)

    report = sync_source(kb, "acme")

    assert report.ok and report.removed == 1
    assert site.requests_for("/docs/install.html")[-1].status == 410
    assert _indexed_urls(kb) == {site.url(p) for p in sf.FIRST_INDEXED - {"/docs/install.html"}}
    assert site.url("/docs/install.html") not in SourceState(kb.settings.index_dir).documents("acme")


def test_llms_full_txt_is_read_when_there_is_no_llms_txt(site, tmp_path, make_kb):
    site.remove("/llms.txt")
    full = "# Acme\n\n## Help\n\nIf the agent does not start, see [Troubleshooting](/docs/troubleshooting.html).\n"
    site.page("/llms-full.txt", full, "text/plain")
    kb = make_kb(source_settings(tmp_path / "home", acme=_spec(site)))

    report = sync_source(kb, "acme")

    assert report.ok
    assert site.requests_for("/llms-full.txt")  # asked for once llms.txt answered 404
    assert site.url("/docs/troubleshooting.html") in _indexed_urls(kb)  # linked from llms-full.txt only


def test_x_robots_tag_noindex_keeps_a_page_out_and_removes_one_that_turned_noindex(site, tmp_path, make_kb):
    # A new page with the header is never indexed; an indexed page whose server starts sending it is removed, also
    # when its body (and so its ETag) did not change and the server answers the conditional request with a 304.
    site.page("/docs/webhook-retries.html", sf.WEBHOOK_RETRIES, headers={"X-Robots-Tag": "noindex"})
    site.page("/sitemap-docs.xml", sf.urlset(site.base, [*sf.SITEMAP_PATHS, "/docs/webhook-retries.html"]))
    kb = make_kb(source_settings(tmp_path / "home", acme=_spec(site)))
    first = sync_source(kb, "acme")
    assert first.ok and first.skipped[site.url("/docs/webhook-retries.html")] == "noindex"
    assert _indexed_urls(kb) == {site.url(p) for p in sf.FIRST_INDEXED}
    site.page("/docs/guide.html", sf.GUIDE, headers={"X-Robots-Tag": "noindex"})  # same bytes as before
    site.clear_log()

    second = sync_source(kb, "acme")

    assert second.ok and second.removed == 1
    assert site.requests_for("/docs/guide.html")[0].status == 304
    assert site.url("/docs/guide.html") not in _indexed_urls(kb)
    assert "noindex" in second.skipped[site.url("/docs/guide.html")]


def test_a_gzipped_sitemap_is_read(site, tmp_path, make_kb):
    import gzip

    robots = f"User-agent: *\nDisallow: /docs/private/\nSitemap: {site.base}/sitemap.xml.gz\n"
    site.page("/robots.txt", robots, "text/plain")
    paths = [*sf.SITEMAP_PATHS, "/docs/webhook-retries.html"]
    site.page("/sitemap.xml.gz", gzip.compress(sf.urlset(site.base, paths).encode()), "application/gzip")
    site.page("/docs/webhook-retries.html", sf.WEBHOOK_RETRIES)  # listed in the .xml.gz only, linked from nowhere
    kb = make_kb(source_settings(tmp_path / "home", acme=_spec(site)))

    report = sync_source(kb, "acme")

    assert report.ok
    assert site.requests_for("/sitemap.xml") == []  # robots.txt named the .xml.gz: nothing else was guessed
    assert _indexed_urls(kb) == {site.url(p) for p in sf.FIRST_INDEXED | {"/docs/webhook-retries.html"}}


def test_a_sync_that_runs_out_of_time_removes_nothing_and_says_so(site, tmp_path, make_kb):
    settings = source_settings(tmp_path / "home", acme=_spec(site))
    kb = make_kb(settings)
    assert sync_source(kb, "acme").documents == 5
    # troubleshooting.html leaves the site (a full sync would remove it); the site now asks for a second between
    # requests, and the sync may take 1.5 s: it runs out of time while still reading the sitemaps.
    site.remove("/docs/troubleshooting.html")
    site.page("/llms.txt", "# Acme\n", "text/plain")
    site.page("/robots.txt", "User-agent: *\nCrawl-delay: 1\nDisallow: /docs/private/\n", "text/plain")
    site.clear_log()
    hurried = settings.model_copy(update={"sync": settings.sync.model_copy(update={"max_sync_s": 1.5})})

    report = sync_source(make_kb(hurried), "acme")

    assert report.ok and not report.complete and report.removed == 0
    assert any("max_sync_s" in note for note in report.notes)
    assert _indexed_urls(kb) == {site.url(p) for p in sf.FIRST_INDEXED}
    # The deadline bounds discovery too: requests are a second apart, so the third one would start after it.
    assert len([hit for hit in site.log if hit.path != "/robots.txt"]) <= 2
    assert site.requests_for("/llms.txt") == []


def test_a_page_dropped_from_the_sitemap_is_removed_only_when_nothing_links_to_it(site, tmp_path, make_kb):
    """docs/sources.md: a page "no longer found at all (dropped from the sitemap and no longer linked)" is removed,
    even though it would still answer 200: the sitemap and the links are the site's table of contents, and a page
    left out of both is unpublished. A page dropped from the sitemap but still linked is still found, and stays."""
    orphan = sf.html("Changelog", "<h1>Changelog</h1><p>Version 2 added the frobnicator's key rotation.</p>")
    site.page("/docs/changelog.html", orphan)
    site.page("/sitemap-docs.xml", sf.urlset(site.base, [*sf.SITEMAP_PATHS, "/docs/changelog.html"]))
    kb = make_kb(source_settings(tmp_path / "home", acme=_spec(site)))
    assert sync_source(kb, "acme").ok
    assert site.url("/docs/changelog.html") in _indexed_urls(kb)
    kept = [p for p in sf.SITEMAP_PATHS if p != "/docs/install.html"]  # install.html: still in every page's nav
    site.page("/sitemap-docs.xml", sf.urlset(site.base, kept))
    site.clear_log()

    report = sync_source(kb, "acme")

    assert report.ok and report.complete and report.removed == 1
    assert site.requests_for("/docs/changelog.html") == []  # still served (200), but no longer published
    assert _indexed_urls(kb) == {site.url(p) for p in sf.FIRST_INDEXED}


def test_pages_read_under_other_ingest_settings_are_read_again_not_kept(site, tmp_path, make_kb):
    """A 304 (or the same bytes) says the page did not change, not that what is stored was made the way this run
    would make it: after a change of the ingest fingerprint (chunking here; an embedding model's build likewise),
    the next sync fetches every page in full and ingests it again, then goes back to conditional requests."""
    settings = source_settings(tmp_path / "home", acme=_spec(site))
    assert sync_source(make_kb(settings), "acme").ok
    pages = len(_indexed_urls(make_kb(settings)))

    wider = settings.model_copy(update={"ingest": settings.ingest.model_copy(update={"chunk_size": 1400})})
    site.clear_log()
    again = sync_source(make_kb(wider), "acme")
    assert again.ok, again.error
    assert again.updated == pages and again.not_modified == 0
    assert not any(hit.headers.get("if-none-match") for hit in site.log)

    site.clear_log()
    steady = sync_source(make_kb(wider), "acme")
    assert steady.ok and (steady.added, steady.updated) == (0, 0) and steady.not_modified >= 3
