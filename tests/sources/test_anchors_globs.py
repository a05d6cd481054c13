"""Section anchors as the common generators make them, and the include/exclude globs."""

from __future__ import annotations

import lxml.html
import pytest

from citewise.ingest.anchors import heading_ids, outline_anchors, slugify
from citewise.ingest.chunking import section_url
from citewise.ingest.globs import any_match, glob_match
from citewise.ingest.loaders import parse_html, parse_markdown


@pytest.mark.parametrize(
    ("text", "github", "mkdocs"),
    [
        ("Install the `acme` CLI", "install-the-acme-cli", "install-the-acme-cli"),
        ("What's new in 2.0?", "whats-new-in-20", "whats-new-in-20"),
        ("Ports  and  protocols", "ports--and--protocols", "ports-and-protocols"),
        ("Café & crème", "café--crème", "cafe-creme"),
        ("snake_case_name", "snake_case_name", "snake_case_name"),
    ],
)
def test_slugs_follow_github_and_mkdocs(text, github, mkdocs):
    assert slugify(text, "github") == github
    assert slugify(text, "mkdocs") == mkdocs


def test_markdown_anchors_number_duplicates_and_honour_custom_ids():
    doc = parse_markdown(
        "# Guide\n\n## Example\n\ntext\n\n## Example\n\nmore\n\n## Tokens {#api-tokens}\n\nrotate\n",
        source="g",
        filename="g.md",
    )
    github = outline_anchors(doc.outline)
    assert github["Guide > Example"] == "example"
    assert doc.outline[-1] == (2, "Tokens {#api-tokens}")  # the id stays in the outline, not in a chunk's headings
    assert outline_anchors(doc.outline, style="mkdocs")["Guide > Tokens"] == "api-tokens"
    # The second "Example" shares its path with the first: the first keeps it, as the pipeline finds it first.
    assert list(github.values()).count("example") == 1
    assert section_url("https://x/g", github, ("Guide", "Example")) == "https://x/g#example"
    assert section_url("https://x/g", github, ("Guide", "Unknown")) == "https://x/g#guide"  # the nearest above
    assert section_url("https://x/g", {}, ("Guide",)) == "https://x/g"


def test_page_heading_ids_are_read_the_way_generators_write_them():
    html = """<html><body><main><article>
    <h1>Page<a class="hash-link" href="#page">\u200b</a></h1><p>Intro text for the page.</p>
    <h2 id="docusaurus-id">Docusaurus style<a class="hash-link" href="#docusaurus-id">\u200b</a></h2><p>One.</p>
    <h2 id="mkdocs-id">MkDocs style<a class="headerlink" href="#mkdocs-id" title="Permanent link">¶</a></h2><p>Two.</p>
    <section id="sphinx-id"><h2>Sphinx style<a class="headerlink" href="#sphinx-id">¶</a></h2><p>Three.</p></section>
    <h2><a id="inner-id"></a>Anchor inside</h2><p>Four.</p>
    <h2>No id at all</h2><p>Five.</p>
    </article></main></body></html>"""
    tree = lxml.html.document_fromstring(html)
    ids = heading_ids(tree)
    assert ids == [
        ("page", "page"),
        ("docusaurus style", "docusaurus-id"),
        ("mkdocs style", "mkdocs-id"),
        ("sphinx style", "sphinx-id"),
        ("anchor inside", "inner-id"),
        ("no id at all", None),
    ]
    doc = parse_html(lxml.html.tostring(tree, encoding="unicode"), source="p", filename="p.html")
    assert "¶" not in " ".join(b.text for b in doc.blocks) + " ".join(t for _, t in doc.outline)
    anchors = outline_anchors(doc.outline, page_ids=ids)
    assert anchors["Page > MkDocs style"] == "mkdocs-id"
    assert anchors["Page > Sphinx style"] == "sphinx-id"
    assert anchors["Page > No id at all"] == "no-id-at-all"  # no id on the page: the slug rule


@pytest.mark.parametrize(
    ("path", "pattern", "matches"),
    [
        ("intro.md", "**/*.md", True),
        ("guide/setup.md", "**/*.md", True),
        ("guide/setup.md", "*.md", False),
        ("docs/a/b/c.md", "docs/**", True),
        ("/docs/blog/post.html", "/docs/blog/**", True),
        ("/docs/blog.html", "/docs/blog/**", False),
        ("reference/api.html", "reference/*.htm?", True),
    ],
)
def test_globs(path, pattern, matches):
    assert glob_match(path, pattern) is matches
    assert any_match(path, ["nothing", pattern]) is matches
