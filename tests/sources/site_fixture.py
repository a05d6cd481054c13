"""The small documentation site the website-source tests crawl (and the pages they change between syncs)."""

from __future__ import annotations

from tests.support.docs_site import DocsSite

NAV = """<nav class="navbar"><a href="/docs/">Docs home</a> <a href="/docs/install.html">Install</a>
<a href="/docs/guide.html">Guide</a> <a href="/blog/post.html">Blog</a> <a href="/docs/missing.html">Old link</a>
<a href="/docs/private/secret.html">Internal</a> <a href="/docs/old-name.html">Webhooks</a></nav>"""
FOOTER = "<footer>Copyright 2024 Acme Widgets Inc. All rights reserved. Privacy policy. Terms of service.</footer>"


def html(title: str, body: str, head: str = "") -> str:
    return (
        f"<!doctype html><html><head><title>{title} | Acme</title>{head}</head><body>{NAV}"
        f"<main><article>{body}</article></main>{FOOTER}</body></html>"
    )


INDEX = html(
    "Acme docs",
    """<h1 id="acme-documentation">Acme documentation</h1>
<p>Welcome to the Acme documentation. Start with <a href="install.html">installing Acme</a>, then read
<a href="guide.html">the operations guide</a>.</p>""",
)

INSTALL = html(
    "Install",
    """<h1 id="install">Install<a class="hash-link" href="#install">\u200b</a></h1>
<p>Acme runs on Linux and macOS. Install it with the package manager of your choice.</p>
<h2 class="anchor" id="with-pip">With pip<a class="hash-link" href="#with-pip">\u200b</a></h2>
<p>Install the Acme command line with pip: run <code>pip install acme-cli</code> in a virtual environment.</p>
<pre><code>pip install acme-cli</code></pre>
<h2 id="system-requirements">System requirements<a class="headerlink" href="#system-requirements">¶</a></h2>
<table><tr><th>Resource</th><th>Minimum</th></tr><tr><td>Memory</td><td>2 GB</td></tr></table>""",
)

INSTALL_V2 = INSTALL.replace("Acme runs on Linux and macOS.", "Acme runs on Linux, macOS and Windows.")

GUIDE = html(
    "Operations guide",
    """<h1 id="operations-guide">Operations guide</h1>
<p>This guide covers day-to-day operation of an Acme cluster.</p>
<section id="key-rotation"><h2>Key rotation<a class="headerlink" href="#key-rotation">¶</a></h2>
<p>The frobnicator rotates the quantum signing keys every 42 minutes. Rotation never interrupts traffic.</p>
</section>""",
)

RENAMED = html(
    "Webhooks",
    """<h1 id="webhooks">Webhooks</h1>
<p>Acme sends a webhook for every deployment. Each webhook is signed with HMAC-SHA256 over the request body.</p>""",
)

TROUBLESHOOTING = html(
    "Troubleshooting",
    """<h1 id="troubleshooting">Troubleshooting</h1>
<h2 id="the-agent-does-not-start">The agent does not start</h2>
<p>If the Acme agent does not start, check that port 7443 is free and that the license file is readable.</p>""",
)

SECRET = html("Internal", "<h1>Internal</h1><p>The staging cluster password policy is internal only.</p>")
BLOG = html("Blog", "<h1>Release party</h1><p>We had cake to celebrate the release.</p>")
NOINDEX = html(
    "Draft",
    "<h1>Draft</h1><p>This draft page must stay out of the index.</p>",
    '<meta name="robots" content="noindex">',
)
ALIAS = html(
    "Guide (print)",
    "<h1>Operations guide</h1><p>Printable copy of the guide.</p>",
    '<link rel="canonical" href="/docs/guide.html">',
)
WEBHOOK_RETRIES = html(
    "Webhook retries",
    """<h1 id="webhook-retries">Webhook retries</h1>
<p>A failed webhook delivery is retried five times with exponential backoff, starting after 30 seconds.</p>""",
)

SITEMAP_INDEX = """<?xml version="1.0" encoding="UTF-8"?>
<sitemapindex xmlns="http://www.sitemaps.org/schemas/sitemap/0.9">
<sitemap><loc>{base}/sitemap-docs.xml</loc></sitemap></sitemapindex>"""


def urlset(base: str, paths: list[str]) -> str:
    entries = "".join(f"<url><loc>{base}{path}</loc></url>" for path in paths)
    return (
        '<?xml version="1.0" encoding="UTF-8"?>'
        f'<urlset xmlns="http://www.sitemaps.org/schemas/sitemap/0.9">{entries}</urlset>'
    )


SITEMAP_PATHS = [
    "/docs/",
    "/docs/install.html",
    "/docs/guide.html",
    "/docs/old-name.html",
    "/docs/private/secret.html",
    "/docs/huge.html",
    "/docs/draft.html",
    "/docs/print/guide.html",
]

# What the first sync must index, exactly (the redirect is indexed under its target).
FIRST_INDEXED = {"/docs/", "/docs/install.html", "/docs/guide.html", "/docs/renamed.html", "/docs/troubleshooting.html"}


def build(site: DocsSite, *, huge_bytes: int = 200_000) -> None:
    base = site.base
    site.page("/robots.txt", f"User-agent: *\nDisallow: /docs/private/\nSitemap: {base}/sitemap.xml\n", "text/plain")
    site.page("/sitemap.xml", SITEMAP_INDEX.format(base=base), "application/xml")
    site.page("/sitemap-docs.xml", urlset(base, SITEMAP_PATHS), "application/xml")
    llms = "# Acme\n\n> Acme docs for LLMs.\n\n- [Troubleshooting](/docs/troubleshooting.html)\n"
    site.page("/llms.txt", llms, "text/plain")
    site.page("/docs/", INDEX)
    site.page("/docs/install.html", INSTALL)
    site.page("/docs/guide.html", GUIDE)
    site.redirect("/docs/old-name.html", "/docs/renamed.html")
    site.page("/docs/renamed.html", RENAMED)
    site.page("/docs/troubleshooting.html", TROUBLESHOOTING)
    site.page("/docs/private/secret.html", SECRET)
    site.page("/blog/post.html", BLOG)
    site.page("/docs/draft.html", NOINDEX)
    site.page("/docs/print/guide.html", ALIAS)
    filler = "<p>" + "All work and no play makes a huge page. " * 50 + "</p>"
    site.page("/docs/huge.html", html("Huge", filler * (huge_bytes // len(filler) + 1)), stream=True)
