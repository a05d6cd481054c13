"""Loaders against the fixture corpus (tests/fixtures/corpus) and small in-memory documents."""

from __future__ import annotations

import importlib.util
import re
from pathlib import Path

import pytest

from citewise.errors import IngestError
from citewise.ingest.loaders import (
    SUPPORTED_SUFFIXES,
    load_file,
    parse_html,
    parse_markdown,
    parse_plain_text,
    parse_rst,
)
from citewise.types import Block, BlockKind, ParsedDocument

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures"
CORPUS = FIXTURES / "corpus"
BROKEN = FIXTURES / "broken"


def load(relative: str) -> ParsedDocument:
    return load_file(CORPUS / relative, source=relative)


def of_kind(doc: ParsedDocument, kind: BlockKind) -> list[Block]:
    return [block for block in doc.blocks if block.kind == kind]


def all_text(doc: ParsedDocument) -> str:
    return "\n".join(block.text for block in doc.blocks)


def block_with(doc: ParsedDocument, needle: str) -> Block:
    matches = [block for block in doc.blocks if needle in block.text]
    assert len(matches) == 1, f"expected exactly one block containing {needle!r}, got {len(matches)}"
    return matches[0]


# -- the corpus as a whole ---------------------------------------------------------------------------------------
def test_every_corpus_file_loads_and_the_corpus_stays_small():
    files = sorted(p for p in CORPUS.rglob("*") if p.is_file())
    assert {p.suffix for p in files} == {".md", ".mdx", ".html", ".rst", ".txt", ".pdf"}
    for path in files:
        doc = load_file(path, source=path.relative_to(CORPUS).as_posix())
        assert doc.blocks, path.name
        assert doc.title, path.name
        assert all(block.text.strip() for block in doc.blocks), path.name
    # The real embedding model is slow here: the corpus must stay a few KB of text.
    assert sum(len(all_text(load_file(p, source=p.name))) for p in files) < 15_000


def test_source_and_filename_come_from_the_caller_and_the_path():
    doc = load_file(CORPUS / "notes" / "changelog.txt", source="notes/changelog.txt")
    assert doc.source == "notes/changelog.txt"
    assert doc.filename == "changelog.txt"


def test_supported_suffixes_match_the_dispatch():
    assert frozenset({".md", ".markdown", ".mdx", ".html", ".htm", ".pdf", ".rst", ".txt"}) == SUPPORTED_SUFFIXES


# -- Markdown ----------------------------------------------------------------------------------------------------
def test_front_matter_sets_title_url_date_and_keeps_the_rest_as_metadata():
    doc = load("guide/getting-started.md")
    assert doc.title == "Getting Started with Orbitron"  # front matter beats the H1 ("Orbitron Quickstart")
    assert doc.source_url == "https://docs.orbitron.example/guide/getting-started"
    assert doc.date == "2024-03-18"
    assert doc.metadata == {"author": "Mira Kovalenko", "tags": ["quickstart", "queues"]}
    assert "Mira Kovalenko" not in all_text(doc)


def test_markdown_heading_paths_follow_heading_levels():
    doc = load("guide/getting-started.md")
    assert block_with(doc, "durable job-queue service").headings == ("Orbitron Quickstart",)
    assert block_with(doc, "port **7433**").headings == ("Orbitron Quickstart", "Installation", "Linux packages")
    # An H3 after another H3 replaces it; an H2 pops the H3.
    assert block_with(doc, "ghcr.io/orbitron-labs").headings == (
        "Orbitron Quickstart",
        "Installation",
        "Container image",
    )
    assert block_with(doc, "ORB-404").headings == ("Orbitron Quickstart", "Creating your first queue")


def test_markdown_code_fence_is_one_code_block_with_its_language():
    doc = load("guide/getting-started.md")
    code = [b.text for b in of_kind(doc, BlockKind.CODE)]
    assert "```bash\norbitron queue create --name emails --retention 7d\n```" in code
    assert "```bash\nsudo apt-get install orbitrond=3.2.0\nsudo systemctl enable --now orbitrond\n```" in code
    assert not any("orbitron queue create" in b.text for b in of_kind(doc, BlockKind.TEXT))


def test_markdown_table_is_one_pipe_table_block():
    doc = load("guide/getting-started.md")
    (table,) = of_kind(doc, BlockKind.TABLE)
    lines = table.text.split("\n")
    assert lines[0] == "| Setting | Default | Meaning |"
    assert lines[1] == "| --- | --- | --- |"
    assert "| `max_retries` | 5 | Attempts before a job moves to the dead-letter queue |" in lines
    assert "| `visibility_timeout` | 30s | How long a leased job stays invisible to other workers |" in lines
    assert len(lines) == 6
    assert table.headings == ("Orbitron Quickstart", "Creating your first queue", "Queue settings")


def test_markdown_text_keeps_inline_code_and_links():
    doc = load("guide/getting-started.md")
    next_steps = block_with(doc, "configuration guide")
    assert "[configuration guide](https://docs.orbitron.example/guide/configuration)" in next_steps.text
    assert "`orbitron status`" in next_steps.text


def test_title_falls_back_to_the_first_h1_then_the_file_name():
    with_h1 = parse_markdown("Intro.\n\n# Real Title\n\nBody.", source="s", filename="x.md")
    assert with_h1.title == "Real Title"
    without = parse_markdown("## Only a subsection\n\nBody.", source="s", filename="queue_tuning-tips.md")
    assert without.title == "Queue tuning tips"


def test_front_matter_prefers_modification_dates_and_ignores_relative_permalinks():
    text = (
        "---\ndate: 2021-01-01\nlast_updated: 2023-05-06T10:00:00Z\npermalink: /guide/x/\n"
        "url: https://docs.example/x\n---\nBody text."
    )
    doc = parse_markdown(text, source="s", filename="x.md")
    assert doc.date == "2023-05-06"
    assert doc.source_url == "https://docs.example/x"
    assert doc.metadata == {"date": "2021-01-01", "permalink": "/guide/x/"}
    relative_only = parse_markdown("---\npermalink: /guide/x/\n---\nBody.", source="s", filename="x.md")
    assert relative_only.source_url is None  # the pipeline's base_url + path is better than a bare path
    assert relative_only.metadata == {"permalink": "/guide/x/"}


def test_markdown_list_keeps_markers_and_carves_out_nested_code():
    text = "# T\n\n1. Install it:\n\n   ```sh\n   orbitron init\n   ```\n\n2. Start `orbitrond`.\n"
    doc = parse_markdown(text, source="s", filename="x.md")
    assert [b.kind for b in doc.blocks] == [BlockKind.TEXT, BlockKind.CODE, BlockKind.TEXT]
    assert doc.blocks[0].text == "1. Install it:"
    assert doc.blocks[1].text == "```sh\norbitron init\n```"
    assert doc.blocks[2].text == "2. Start `orbitrond`."


def test_markdown_backslash_escapes_are_dropped_outside_code_spans():
    doc = parse_markdown(r"Set max\_retries, not `max\_retries`." + "\n", source="s", filename="x.md")
    assert doc.blocks[0].text == r"Set max_retries, not `max\_retries`."


def test_markdown_html_comments_are_not_content():
    doc = parse_markdown("<!-- TODO: secret reviewer note -->\n\nVisible text.\n", source="s", filename="x.md")
    assert all_text(doc) == "Visible text."


def test_fence_containing_triple_backticks_is_reemitted_with_a_longer_fence():
    doc = parse_markdown("````md\n```py\nx = 1\n```\n````\n", source="s", filename="x.md")
    assert doc.blocks[0].text == "````md\n```py\nx = 1\n```\n````"


# -- MDX ---------------------------------------------------------------------------------------------------------
def test_mdx_noise_is_stripped_but_component_text_is_kept():
    doc = load("guide/configuration.mdx")
    prose = "\n".join(b.text for b in of_kind(doc, BlockKind.TEXT))
    for noise in ("import ", "export ", "<Tabs", "TabItem", "Callout", "VersionBadge", "{/*", "doc writers", "toc"):
        assert noise not in prose, noise
    assert block_with(doc, "worker_threads = 12").headings == ("Configuring Orbitron", "Worker pool")
    assert block_with(doc, "ORBITRON_WORKER_THREADS").kind == BlockKind.TEXT
    assert "Enable `encrypt_payloads = true`" in block_with(doc, "256-bit key").text
    assert doc.title == "Configuring Orbitron"
    assert doc.date == "2024-04-02"
    assert doc.metadata == {"sidebar_position": 2}


def test_mdx_code_fence_survives_byte_for_byte():
    source = (CORPUS / "guide" / "configuration.mdx").read_text()
    fence = re.search(r"```jsx\n.*?\n```", source, re.DOTALL)
    assert fence is not None
    (code,) = of_kind(load("guide/configuration.mdx"), BlockKind.CODE)
    assert code.text == fence.group(0)
    assert '<QueueBadge name="emails" refreshSeconds={15} />' in code.text
    assert "import { QueueBadge } from '@orbitron/console';" in code.text


def test_mdx_keeps_inline_code_that_looks_like_jsx_and_dedents_component_children():
    text = (
        "import X from 'x';\n\n<Note>\n    Use the `<Tabs>` component.\n\n    ```python\n    print('<Tab>')\n"
        '    ```\n</Note>\n\n<Multi\n  a="1"\n  b={{x: 2}}\n>\nInside {/* a\nmulti-line comment */} text.\n</Multi>\n'
    )
    doc = parse_markdown(text, source="s", filename="x.mdx", mdx=True)
    assert [(b.kind, b.text) for b in doc.blocks] == [
        (BlockKind.TEXT, "Use the `<Tabs>` component."),
        (BlockKind.CODE, "```python\nprint('<Tab>')\n```"),
        (BlockKind.TEXT, "Inside  text."),
    ]


# -- HTML --------------------------------------------------------------------------------------------------------
def test_html_keeps_main_content_and_drops_page_chrome():
    doc = load("reference/api.html")
    text = all_text(doc)
    for chrome in ("Pricing plans", "Careers", "all systems nominal", "Copyright 2024", "privacy policy"):
        assert chrome not in text, chrome
    for script_or_style in ("tp-55123", "analytics loaded", "fs-7781", "stylesheet-marker-zq", "magenta"):
        assert script_or_style not in text, script_or_style
    assert doc.title == "Orbitron HTTP API Reference"
    assert block_with(doc, "Tokens expire after 90 days").text == (
        "Send your API token in the `X-Orbitron-Token` header. Tokens expire after 90 days and can be rotated from "
        "the console without downtime."
    )
    assert block_with(doc, "Tokens expire after 90 days").headings == ("HTTP API", "Authentication")


def test_html_code_block_and_table_survive_extraction():
    doc = load("reference/api.html")
    (code,) = of_kind(doc, BlockKind.CODE)
    assert code.text.startswith("```\ncurl -X POST https://api.orbitron.example/v2/queues/emails/jobs \\\n")
    assert code.text.endswith('"delay": "10s"}\'\n```')
    assert code.headings == ("HTTP API", "Enqueue a job")
    (table,) = of_kind(doc, BlockKind.TABLE)
    assert table.text.split("\n")[:3] == [
        "| Endpoint | Limit |",
        "| --- | --- |",
        "| POST /v2/queues/{name}/jobs | 1200 requests per minute |",
    ]
    assert table.headings == ("HTTP API", "Rate limits")


def test_html_text_is_unwrapped_and_unescaped():
    doc = load("reference/api.html")
    backoff = block_with(doc, "retry_backoff")  # trafilatura writes retry\_backoff; identifiers must stay findable
    assert backoff.text == (
        'Set the optional field retry_backoff to "exponential" to double the wait between attempts, starting at '
        "2 seconds."
    )


def test_html_in_a_declared_legacy_charset_is_decoded_with_it(tmp_path):
    path = tmp_path / "legacy.html"
    html = (
        '<html><head><meta charset="windows-1252"><title>Café</title></head><body><p>Déjà vu – naïve.</p></body></html>'
    )
    path.write_bytes(html.encode("cp1252"))
    doc = load_file(path, source="legacy.html")
    assert doc.title == "Café"
    assert all_text(doc) == "Déjà vu – naïve."


def test_html_falls_back_to_body_text_when_trafilatura_keeps_nothing():
    # trafilatura 2.x returns only "# Tiny page" here (it drops one-cell tables), which alone makes no block.
    html = "<html><body><nav>Menu</nav><h1>Tiny page</h1><table><tr><td>lonely</td></tr></table></body></html>"
    doc = parse_html(html, source="s", filename="tiny-page.html")
    assert [(b.text, b.headings) for b in doc.blocks] == [("lonely", ("Tiny page",))]
    assert doc.title == "Tiny page"
    assert doc.metadata["extractor"] == "lxml"


# -- PDF ---------------------------------------------------------------------------------------------------------
def test_pdf_blocks_carry_their_page_numbers():
    doc = load("reference/manual.pdf")
    assert doc.title == "Orbitron Operations Manual"  # from the PDF's /Info dictionary
    assert doc.metadata["pages"] == 2
    assert {b.page for b in doc.blocks} == {1, 2}
    assert block_with(doc, "every 6 hours").page == 1
    assert block_with(doc, "port 9464").page == 1
    assert block_with(doc, "recovery point objective for a single node is 20 minutes").page == 2
    assert block_with(doc, "orbitron verify --deep").page == 2


def test_pdf_fixture_is_what_make_pdf_writes():
    spec = importlib.util.spec_from_file_location("make_pdf", FIXTURES / "make_pdf.py")
    assert spec is not None and spec.loader is not None
    make_pdf = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(make_pdf)
    assert make_pdf.build_pdf(make_pdf.PAGES, make_pdf.TITLE) == (CORPUS / "reference" / "manual.pdf").read_bytes()


# -- reStructuredText --------------------------------------------------------------------------------------------
def test_rst_sections_become_heading_paths_under_the_document_title():
    doc = load("reference/cli.rst")
    assert doc.title == "Orbitron CLI Reference"
    assert block_with(doc, "profiles.ini").headings == ("Orbitron CLI Reference",)
    assert "`--profile NAME`" in block_with(doc, "profiles.ini").text
    drain = ("Orbitron CLI Reference", "Queue commands", "orbitron drain")
    assert block_with(doc, "45 seconds").headings == drain
    assert block_with(doc, "--since 2h").text.startswith("- `--since 2h` replays only jobs")


def test_rst_literal_block_and_table():
    doc = load("reference/cli.rst")
    (code,) = of_kind(doc, BlockKind.CODE)
    assert code.text == "```\norbitron drain emails --timeout 120s --force\n```"
    assert code.headings == ("Orbitron CLI Reference", "Queue commands", "orbitron drain")
    (table,) = of_kind(doc, BlockKind.TABLE)
    assert table.text.split("\n") == [
        "| Code | Meaning |",
        "| --- | --- |",
        "| 0 | The command succeeded. |",
        "| 3 | The named queue does not exist. |",
        "| 7 | Another client holds the queue lock. |",
    ]
    assert table.headings == ("Orbitron CLI Reference", "Exit codes")


def test_rst_is_robust_to_sloppy_and_sphinx_only_markup(tmp_path):
    secret = tmp_path / "secret.txt"
    secret.write_text("TOP-SECRET-CONTENT")
    text = (
        "Bad title\n=====\n\nCall :func:`orbitron.enqueue` first.\n\n.. code-block:: python\n\n   import orbitron\n\n"
        f".. toctree::\n\n   a\n\n.. include:: {secret}\n\n"
        ".. note:: Mind ``--force``.\n\n   ::\n\n      orbitron note\n"
    )
    doc = parse_rst(text, source="s", filename="sloppy.rst")
    assert [(b.kind, b.text) for b in doc.blocks] == [
        (BlockKind.TEXT, "Call `orbitron.enqueue` first."),
        (BlockKind.CODE, "```python\nimport orbitron\n```"),
        (BlockKind.TEXT, "Note: Mind `--force`."),  # an admonition is a labelled note
        (BlockKind.CODE, "```\norbitron note\n```"),
    ]
    assert "TOP-SECRET" not in all_text(doc)  # `.. include::` must never read files


def test_rst_sphinx_directives_keep_their_content_and_never_index_parser_errors():
    # Sphinx's tabs, version notes and object descriptions are unknown to plain docutils; before, each became an
    # error node whose text ("Unknown directive type", the raw `.. tab::` source) was indexed.
    text = (
        "Install\n=======\n\n"
        ".. tab:: Unix/macOS\n   :sync: unix\n\n   .. code-block:: shell\n\n      python -m orbitron up\n\n"
        "#. Start the daemon\n\n   .. tab:: Windows\n\n      .. code-block:: shell\n\n         py -m orbitron up\n\n"
        "   Then check it.\n\n"
        ".. versionadded:: 2.3\n\n   The ``--python`` option.\n\n"
        ".. deprecated:: 3.0\n\n"
        ".. option:: --user\n\n   Install into the user site.\n\n"
        ".. toctree::\n   :maxdepth: 2\n\n   usage\n\n"
        ".. orbitron-command-usage:: up\n"
    )
    doc = parse_rst(text, source="s", filename="install.rst")
    assert [(b.kind, b.text) for b in doc.blocks] == [
        (BlockKind.TEXT, "**Unix/macOS**"),
        (BlockKind.CODE, "```shell\npython -m orbitron up\n```"),
        (BlockKind.TEXT, "1. Start the daemon\n   **Windows**"),  # a list's code is its own CODE block
        (BlockKind.CODE, "```shell\npy -m orbitron up\n```"),
        (BlockKind.TEXT, "Then check it."),
        (BlockKind.TEXT, "New in version 2.3: The `--python` option."),
        (BlockKind.TEXT, "Deprecated since version 3.0."),
        (BlockKind.TEXT, "`--user`"),
        (BlockKind.TEXT, "Install into the user site."),
    ]
    assert all(b.headings == ("Install",) for b in doc.blocks)


def test_rst_stand_ins_follow_sphinx_and_leave_docutils_own_directives_alone():
    text = (
        ".. rst-class:: lead\n\n   Lead paragraph.\n\n"  # docutils' own `class`, under its English alias
        ".. versionchanged:: 2.0\n   Accepts ``--python`` now.\n\n"
        ".. seealso:: The ``zipfile`` module.\n\n"
        ".. py:currentmodule:: orbitron.queue\n\n"
        ".. only:: latex\n\n   Printed edition only.\n\n"
        ".. only:: html\n\n   Web edition.\n\n"
        ".. code-block:: python\n   :caption: setup.py\n   :linenos:\n   :emphasize-lines: 1\n\n   import orbitron\n\n"
        "- top\n\n  - sub::\n\n      orbitron sub\n"
    )
    doc = parse_rst(text, source="s", filename="sphinx.rst")
    assert [(b.kind, b.text) for b in doc.blocks] == [
        (BlockKind.TEXT, "Lead paragraph."),
        (BlockKind.TEXT, "Changed in version 2.0: Accepts `--python` now."),
        (BlockKind.TEXT, "See also: The `zipfile` module."),
        (BlockKind.TEXT, "Web edition."),
        (BlockKind.CODE, "```python\nimport orbitron\n```"),  # Sphinx's code-block options no longer drop it
        (BlockKind.TEXT, "- top\n  - sub:"),
        (BlockKind.CODE, "```\norbitron sub\n```"),
    ]
    # The stand-ins exist only while Citewise parses: docutils itself still reports an unknown directive.
    from docutils.core import publish_doctree
    from docutils.nodes import system_message

    tree = publish_doctree(".. tab:: Unix\n\n   Text.\n", settings_overrides={"report_level": 5})
    assert any(True for _ in tree.findall(system_message))


def test_myst_directive_fences_are_read_as_their_content():
    text = (
        "# Cache\n\n"
        "```{versionadded} 22.3\nThe `--python` option.\n```\n\n"
        "```{note}\n:class: dropdown\nMind the **cache**.\n```\n\n"
        "```{code-block} python\n:linenos:\nimport orbitron\n```\n\n"
        "```{toctree}\n:hidden:\nusage\n```\n\n"
        "```{orbitron-cli}\n$ orbitron cache dir\n```\n\n"
        "```{eval-rst}\n.. tab:: Unix\n\n   .. code-block:: shell\n\n      orbitron up\n```\n"
    )
    doc = parse_markdown(text, source="s", filename="cache.md")
    assert [(b.kind, b.text) for b in doc.blocks] == [
        (BlockKind.TEXT, "New in version 22.3: The `--python` option."),
        (BlockKind.TEXT, "Note: Mind the **cache**."),
        (BlockKind.CODE, "```python\nimport orbitron\n```"),
        (BlockKind.CODE, "```\n$ orbitron cache dir\n```"),  # a directive Citewise doesn't know: its text, as code
        (BlockKind.TEXT, "**Unix**"),
        (BlockKind.CODE, "```shell\norbitron up\n```"),
    ]
    assert all(b.headings == ("Cache",) for b in doc.blocks)


def test_myst_directives_inside_lists_eval_rst_fields_and_one_line_directives():
    text = (
        "# Guide\n\n"
        "- Step one\n\n  ```{note}\n  Mind the queue.\n  ```\n\n"
        "```{eval-rst}\n:param name: the queue's name\n```\n\n"
        "```{seealso} [Queues](queues.md)\n```\n\n"
        "```{python}\nimport orbitron\n```\n"
    )
    doc = parse_markdown(text, source="s", filename="guide.md")
    assert [(b.kind, b.text) for b in doc.blocks] == [
        (BlockKind.TEXT, "- Step one"),
        (BlockKind.TEXT, "Note: Mind the queue."),
        (BlockKind.TEXT, "param name\n  the queue's name"),
        (BlockKind.TEXT, "See also: [Queues](queues.md)"),
        (BlockKind.CODE, "```python\nimport orbitron\n```"),
    ]


@pytest.mark.parametrize("mdx", [False, True])
def test_colon_fence_admonitions_lose_their_markers_and_keep_their_content(mdx):
    # Docusaurus (:::note, :::tip[Title]) and MyST (:::{warning}) admonitions: the markers were indexed as text.
    text = (
        "# Guide\n\n:::note\nMind the `queue`.\n:::\n\n:::tip[Retries]\nBack off.\n:::\n\n"
        "::::{tab-set}\n:::{tab-item} Unix\n```bash\norbitron up\n```\n:::\n::::\n\n"
        ":::{versionadded} 2.1\nThe `--python` option.\n:::\n\n"
        ":::tip[Syntax]\n```md\n:::note\nShown as code.\n:::\n```\n:::\n\n"  # markers inside code are code
        "::: not a fence, just prose\n"
    )
    doc = parse_markdown(text, source="s", filename="guide.mdx" if mdx else "guide.md", mdx=mdx)
    assert [(b.kind, b.text) for b in doc.blocks] == [
        (BlockKind.TEXT, "Note: Mind the `queue`."),
        (BlockKind.TEXT, "Tip — Retries: Back off."),
        (BlockKind.TEXT, "**Unix**"),
        (BlockKind.CODE, "```bash\norbitron up\n```"),
        (BlockKind.TEXT, "New in version 2.1: The `--python` option."),
        (BlockKind.TEXT, "Tip — Syntax:"),
        (BlockKind.CODE, "```md\n:::note\nShown as code.\n:::\n```"),
        (BlockKind.TEXT, "::: not a fence, just prose"),
    ]
    assert all(b.headings == ("Guide",) for b in doc.blocks)


def test_colon_fences_never_swallow_the_page_or_its_headings():
    # An unclosed or bare ':::' (a closing marker out-dented out of a list item) must not turn the rest of the page
    # into one block, and headings inside an admonition keep their place in the outline.
    text = (
        "# A\n\n1. Install:\n   :::tip\n   Use a venv.\n:::\n\n## B\n\n```py\nx = 1\n```\n\n:::note\n## C\n\nText C\n"
    )
    doc = parse_markdown(text, source="s", filename="page.md")
    assert [(b.kind, b.text, b.headings) for b in doc.blocks] == [
        (BlockKind.TEXT, "1. Install:\n\n   Tip: Use a venv.", ("A",)),
        (BlockKind.CODE, "```py\nx = 1\n```", ("A", "B")),
        (BlockKind.TEXT, "Note: Text C", ("A", "C")),  # the label leads the note's first paragraph
    ]
    assert doc.outline == [(1, "A"), (2, "B"), (2, "C")]
    deep = ":::note\nx\n" * 10_000  # no recursion: deep or unclosed nesting is just lines
    assert [b.text for b in parse_markdown(deep, source="s", filename="deep.md").blocks] == ["Note: x"] * 10_000


def test_myst_roles_read_as_sphinx_renders_them_and_code_spans_are_left_alone():
    text = (
        "Reads {file}`/etc/orbitron.conf`, then {ref}`the queue guide <queues>` and {pep}`440`; run "
        "{samp}`orbitron add <queue>`; "
        "`DELETE /api/documents/{id}` and `0x${string}` are code.\n"
    )
    doc = parse_markdown(text, source="s", filename="roles.md")
    assert [b.text for b in doc.blocks] == [
        "Reads `/etc/orbitron.conf`, then the queue guide and PEP 440; run `orbitron add <queue>`; "
        "`DELETE /api/documents/{id}` and `0x${string}` are code."
    ]


def test_rst_cross_references_read_as_sphinx_shows_them():
    """Single backticks are the default role, which Sphinx projects make a cross-reference: `Title <target>` shows
    its title, not the target in angle brackets; a `~` shortens a dotted name to its last part."""
    text = (
        "Fields\n======\n\nUse `Schema.validate <marshmallow.Schema.validate>` or :meth:`dump <Schema.dump>`. "
        "Subclass `~marshmallow.fields.Field` or :class:`~marshmallow.fields.String`; `plain` is code, "
        "`The Art of Serialization` a title.\n"
    )
    doc = parse_rst(text, source="s", filename="fields.rst")
    assert [b.text for b in doc.blocks] == [
        "Use Schema.validate or dump. Subclass `Field` or `String`; `plain` is code, The Art of Serialization a title."
    ]
    wrapped = "Guide\n=====\n\nRead `Dependency\nresolution <topics/deps>` and :ref:`the quick\nstart <qs>`.\n"
    assert [b.text for b in parse_rst(wrapped, source="s", filename="g.rst").blocks] == [
        "Read Dependency resolution and the quick start."
    ]


def test_rst_docinfo_gives_date_and_metadata():
    text = "=====\nTitle\n=====\n\n:Author: Mira Kovalenko\n:Date: 2024-02-03\n:Audience: operators\n\nBody text.\n"
    doc = parse_rst(text, source="s", filename="t.rst")
    assert doc.title == "Title"
    assert doc.date == "2024-02-03"
    assert doc.metadata == {"author": "Mira Kovalenko", "audience": "operators"}
    assert [b.text for b in doc.blocks] == ["Body text."]


# -- plain text --------------------------------------------------------------------------------------------------
def test_plain_text_is_one_block_per_paragraph_titled_by_its_first_line():
    doc = load("notes/changelog.txt")
    assert doc.title == "Orbitron changelog"
    assert len(doc.blocks) == 5
    assert all(b.kind == BlockKind.TEXT and b.headings == () and b.page is None for b in doc.blocks)
    assert block_with(doc, "memory leak").text.startswith("3.1.4 (2024-01-22)\n")


def test_plain_text_title_falls_back_to_the_file_name_or_takes_the_given_one():
    long_first_line = "word " * 30
    assert parse_plain_text(long_first_line, source="s", filename="release-notes.txt").title == "Release notes"
    assert parse_plain_text("a\n\nb", source="s", filename="f.txt", title="Selected text").title == "Selected text"
    assert parse_plain_text("   \n\n  ", source="s", filename="f.txt").blocks == []


# -- failures ----------------------------------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("path", "reason"),
    [
        (BROKEN / "broken.pdf", "broken or unreadable PDF"),
        (BROKEN / "empty.md", "empty"),
        (BROKEN / "binary.txt", "not valid UTF-8"),
        (BROKEN / "missing.md", "cannot read"),
    ],
)
def test_bad_files_raise_ingest_error_naming_the_file(path, reason):
    with pytest.raises(IngestError) as excinfo:
        load_file(path, source=path.name)
    message = str(excinfo.value)
    assert message.startswith(f"{path.name}: ")
    assert reason in message
    assert "\n" not in message


def test_unsupported_suffix_is_rejected_before_reading(tmp_path):
    path = tmp_path / "slides.pptx"
    path.write_bytes(b"PK\x03\x04")
    with pytest.raises(IngestError, match=r"^slides\.pptx: unsupported file type '\.pptx'"):
        load_file(path, source="slides.pptx")


@pytest.mark.parametrize(
    ("name", "content", "reason"),
    [
        ("blank.md", "\n   \n\t\n", "empty"),
        ("only-markup.md", "---\ntitle: Nothing here\n---\n\n# Heading only\n\n---\n", "no extractable text"),
        ("chrome.html", "<html><body><nav>Home</nav><footer>(c) 2024</footer></body></html>", "no extractable text"),
        ("bad-yaml.md", "---\ntitle: [unclosed\n---\nBody.", "invalid front matter"),
        # a Sphinx docs folder's authors.rst: the page is another file, which ingest never reads from a page
        ("authors.rst", ".. include:: ../AUTHORS.rst\n", "includes other files, which ingest never reads"),
        ("changes.md", "```{include} ../CHANGES.md\n```\n", "ingest those files themselves"),
    ],
)
def test_files_without_usable_content_raise_ingest_error(tmp_path, name, content, reason):
    path = tmp_path / name
    path.write_text(content)
    with pytest.raises(IngestError) as excinfo:
        load_file(path, source=name)
    assert str(excinfo.value).startswith(f"{name}: ")
    assert reason in str(excinfo.value)


def test_utf8_bom_is_not_content(tmp_path):
    path = tmp_path / "bom.md"
    path.write_bytes("\ufeff# Título\n\nCafé con leche.\n".encode())
    doc = load_file(path, source="bom.md")
    assert doc.title == "Título"
    assert doc.blocks[0].text == "Café con leche."


def test_pictures_read_as_their_alt_text_and_empty_links_as_nothing():
    proxy = "https://docs.example.org/~gitbook/image?url=https%3A%2F%2Fcdn.example.org%2F" + "A" * 400 + "&width=768"
    text = (
        "# Intro\n\n"
        f"![]({proxy})\n\n"
        'Orbitron is a job queue. See ![Architecture diagram](img/arch.png "The parts") for its parts.\n\n'
        "Start here [](/get-started/install) and read [the guide](guide.md).\n\n"
        "Write `![alt](src.png)` for a picture; `[](x)` is an empty link.\n\n"
        f"Press ![the `run` button]({proxy}) to start.\n\n"
        "A span that opens in the brackets is code: ![a `b](c.png) d` e.\n\n"
        "```md\n![](kept-in-code.png)\n```\n"
    )
    blocks = parse_markdown(text, source="s", filename="intro.md").blocks
    prose = [b.text for b in blocks if b.kind == BlockKind.TEXT]
    assert prose == [
        "Orbitron is a job queue. See Architecture diagram for its parts.",
        "Start here and read [the guide](guide.md).",
        "Write `![alt](src.png)` for a picture; `[](x)` is an empty link.",  # examples in code spans stay
        "Press the `run` button to start.",  # a code span in the alt text, not around the picture
        "A span that opens in the brackets is code: ![a `b](c.png) d` e.",
    ]
    assert "gitbook" not in " ".join(b.text for b in blocks)
    assert [b.text for b in blocks if b.kind == BlockKind.CODE] == ["```md\n![](kept-in-code.png)\n```"]
