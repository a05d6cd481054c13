"""Site generators' markup reads as its text: admonitions as labelled notes, tabs under their titles, API reference
directives as one line, build instructions as nothing; theme and template files stay out of a folder ingest.

The corpus (tests/fixtures/markup) is the docs of Ferrule, a file-sync daemon that does not exist, one folder per
site generator."""

from __future__ import annotations

import re
import shutil
from pathlib import Path

import pytest

from citewise.ingest.chunking import make_chunks
from citewise.ingest.globs import asks_for_template, is_template_html, is_theme_path, templates_note
from citewise.ingest.loaders import load_file, parse_markdown, parse_rst
from citewise.ingest.pipeline import Ingestor, discover
from citewise.settings import DEFAULT_GLOBS, IngestSettings, Settings, SourceSpec
from citewise.sources.git import GitRepository
from citewise.types import BlockKind

MARKUP = Path(__file__).resolve().parents[1] / "fixtures" / "markup"
TEXT, CODE, TABLE = BlockKind.TEXT, BlockKind.CODE, BlockKind.TABLE
DOCUMENTS = [
    "mkdocs/docs/install.md",
    "mkdocs/docs/reference/client.md",
    "sphinx/api.rst",
    "sphinx/examples.rst",
    "docusaurus/install.mdx",
    "myst/configure.md",
    "jekyll/index.md",
    "site/templating.html",
    "README.md",
]
TEMPLATES = [
    "jekyll/_includes/nav.html",
    "jekyll/_layouts/default.html",
    "mkdocs/overrides/main.html",
    "mkdocs/overrides/partials/footer.html",
    "site/landing.html",
    "sphinx/_templates/autosummary/class.rst",
    "sphinx/_templates/layout.html",
]
# What must never reach an answer as text: the markers of every construct in the corpus.
RAW_MARKUP = re.compile(
    r"!!!|\?\?\?|:::|===|\.\. \w|\{note\}|\{tip\}|\{admonition\}|<TabItem|<Tabs|<summary|<details|--8<--|\*\[|"
    r"\{ ?[#.]|:material-|\{%|\{\{|:docstring:|:members:|show_source|^\(\S+\)=|^% |^\+\+\+",
    re.MULTILINE,
)
_CODE_SPAN = re.compile(r"(`+)[^`\n]+?\1")


def blocks(relative: str) -> list[tuple[BlockKind, str, tuple[str, ...]]]:
    doc = load_file(MARKUP / relative, source=relative)
    return [(b.kind, b.text, b.headings) for b in doc.blocks]


def prose(text: str) -> str:
    """Text without its code spans: the corpus shows some markers as code on purpose."""
    return _CODE_SPAN.sub("", text)


# -- the corpus, construct by construct ----------------------------------------------------------------------------
def test_mkdocs_material_admonitions_tabs_and_build_markup_read_as_labelled_text():
    top, tabs, syntax = (
        ("Installing Ferrule",),
        ("Installing Ferrule", "Install with a package manager"),
        (
            "Installing Ferrule",
            "Writing an admonition",
        ),
    )
    assert blocks("mkdocs/docs/install.md") == [
        # the heading's attribute list and the icon with its attribute list are styling: gone
        (TEXT, "Ferrule runs as a small daemon next to your files. It needs Python 3.11.", top),
        # an admonition is one labelled note: its paragraphs together, its label in front
        (
            TEXT,
            "Note: Ferrule never uploads file contents, only their hashes.\n\n"
            "The daemon stores its state in `~/.ferrule/state.db`.",
            top,
        ),
        (TEXT, "Tip — Gotcha: Stop the daemon before you move the sync folder:", top),
        (CODE, "```bash\nferrule stop\n```", top),  # code inside a note stays code
        (TEXT, "Warning — Collapsed by default: A second daemon on the same folder corrupts the index.", top),
        (TEXT, "Info: The open collapsible holds the release channel: `stable`.", top),
        (TEXT, "Note: An inline note with an empty title still reads as a note.", top),
        # content tabs: the tab's title in bold over its body, its code as code
        (TEXT, "**pip**", tabs),
        (CODE, "```bash\npip install ferrule\n```", tabs),
        (TEXT, "**pipx**\n\nUse pipx to keep Ferrule in its own environment.", tabs),
        (CODE, "```bash\npipx install ferrule\n```", tabs),
        (TEXT, "Example — Nested: The outer example explains the layout.", tabs),
        (TEXT, "Danger: Never point two folders at one state file.", tabs),  # a nested admonition
        # the snippet line and the abbreviation's definition are gone; the link keeps its text, not its classes
        (
            TEXT,
            "Start the daemon with `ferrule start`; the HTML dashboard then listens on port 7080.\n"
            "[Open the dashboard](http://localhost:7080)",
            tabs,
        ),
        (TEXT, "The syntax itself, shown as an example, stays code:", syntax),
        (CODE, "```markdown\n!!! note\n    Shown as code.\n```", syntax),
    ]
    doc = load_file(MARKUP / "mkdocs/docs/install.md", source="install.md")
    assert doc.outline == [  # the heading's id stays in the outline (ingest/anchors.py links with it)
        (1, "Installing Ferrule {#install}"),
        (2, "Install with a package manager"),
        (2, "Writing an admonition"),
    ]


def test_mkdocstrings_and_mkautodoc_lines_read_as_api_references_without_their_options():
    head = ("Client reference",)
    assert blocks("mkdocs/docs/reference/client.md") == [
        (TEXT, "The client talks to the daemon over a local socket.", head),
        (TEXT, "API reference: `ferrule.client.Client`", head),
        (TEXT, "API reference: `ferrule.sync`", head),  # mkautodoc's `:docstring:` / `:members:` gone too
        (TEXT, "API reference: `ferrule.errors`", head),  # the heading form
    ]


def test_sphinx_autodoc_and_admonitions_read_as_api_references_and_labelled_notes():
    api, retries = ("API reference",), ("API reference", "Retries")
    assert blocks("sphinx/api.rst") == [
        (TEXT, "API reference: `ferrule.sync`", api),
        (TEXT, "API reference: `ferrule.client.Client`", api),
        (TEXT, "The client keeps one socket open per folder.", api),  # an autodoc directive's own prose stays
        (TEXT, "API reference: `ferrule.connect`", api),  # (autosummary, a generated table, is left out)
        (TEXT, "Tip — Backoff: Retries wait 2, 4, then 8 seconds.", retries),  # a generic admonition, :class: tip
        (TEXT, "Warning: Do not run two daemons on one folder.", retries),
        (CODE, "```bash\nferrule stop --all\n```", retries),
        (TEXT, "Note: The daemon logs to `~/.ferrule/log`.", retries),
        (TEXT, "See also: The sync guide.", retries),  # a cross-reference reads as its text
    ]


def test_sphinx_doctest_blocks_are_code_and_their_hidden_set_up_is_left_out():
    """sphinx.ext.doctest: `testcode`, `testoutput` and `doctest` show as code on the rendered page (their argument is
    a test group, not a language); `testsetup`, `testcleanup` and a `:hide:` block are not shown, so not indexed."""
    head = ("Examples", "Retrying a sync")
    assert blocks("sphinx/examples.rst") == [
        (TEXT, "Stop after three attempts:", head),
        (CODE, "```python\n@retry(stop=stop_after(3))\ndef sync_folder():\n    raise OSError\n```", head),
        (CODE, "```text\nGave up after 3 attempts...\n```", head),
        (TEXT, "At the prompt:", head),
        (CODE, "```pycon\n>>> stop_after(3).limit\n3\n```", head),
        (TEXT, "A sync that gave up raises `RetryError`.", ("Examples", "Giving up")),
    ]


def test_docusaurus_admonitions_tabs_and_details_read_as_their_text():
    head = ("Install Ferrule",)
    assert blocks("docusaurus/install.mdx") == [
        (TEXT, "Note — Before you start: Ferrule needs Python 3.11 or newer.", head),
        (TEXT, "Tip: Run `ferrule doctor` after installing.", head),
        (TEXT, "**Debian**", head),  # a TabItem's label, not its value
        (CODE, "```bash\nsudo apt install ferrule\n```", head),
        (TEXT, "**macOS**", head),
        (CODE, "```bash\nbrew install ferrule\n```", head),
        (TEXT, "**Why a daemon?**", head),  # a <details> block's <summary>
        (TEXT, "A daemon notices changes the moment they happen.", head),
    ]


def test_myst_directives_targets_and_comments_read_as_their_text():
    head = ("Configuring Ferrule", "The configuration file")
    assert blocks("myst/configure.md") == [
        (TEXT, "Ferrule reads `~/.ferrule/config.toml` at start.", head),  # the target and the comment are gone
        (TEXT, "Note: Changes take effect after `ferrule reload`.", head),
        (TEXT, "Tip: Keep the file under version control.", head),
        (
            TEXT,
            "Warning — Exclusions: Patterns in `exclude` are matched against paths relative to the sync folder.",
            head,
        ),
        (TEXT, "New in version 2.1: The `max_file_mb` setting.", head),
        (TEXT, "**Linux**\nThe file lives in `~/.config/ferrule`.", head),
        (TEXT, "**Windows**\nThe file lives in `%APPDATA%\\ferrule`.", head),
        (TEXT, "API reference: `ferrule.config.Config`", head),
        (TEXT, "The end of the page.", head),
    ]


@pytest.mark.parametrize("relative", DOCUMENTS)
def test_no_document_of_the_corpus_keeps_raw_markup_in_its_text_or_chunks(relative):
    doc = load_file(MARKUP / relative, source=relative)
    for block in doc.blocks:
        if block.kind == TEXT:
            assert not RAW_MARKUP.search(prose(block.text)), block.text
        assert not any(RAW_MARKUP.search(heading) for heading in block.headings)
    chunks = make_chunks(doc, IngestSettings(chunk_size=400, chunk_overlap=40), doc_id="d", filename=relative)
    for chunk in chunks:
        outside_code = re.sub(r"```.*?```", "", chunk.text, flags=re.DOTALL)
        assert not RAW_MARKUP.search(prose(outside_code)), chunk.text


def test_a_note_is_one_block_so_a_chunk_keeps_it_with_its_label():
    note = '!!! warning "Disk space"\n' + "".join(f"    Paragraph {i} of the warning.\n\n" for i in range(4))
    doc = parse_markdown(f"# Space\n\nIntro.\n\n{note}After.\n", source="s", filename="space.md")
    assert [b.text for b in doc.blocks] == [
        "Intro.",
        "Warning — Disk space: Paragraph 0 of the warning.\n\n"
        + "\n\n".join(f"Paragraph {i} of the warning." for i in range(1, 4)),
        "After.",
    ]
    chunks = make_chunks(doc, IngestSettings(chunk_size=200, chunk_overlap=20), doc_id="d", filename="space.md")
    assert any("Warning — Disk space: Paragraph 0" in c.text and "Paragraph 3" in c.text for c in chunks)


# -- edge cases ----------------------------------------------------------------------------------------------------
def md(text: str, **kwargs) -> list[tuple[BlockKind, str]]:
    return [(b.kind, b.text) for b in parse_markdown(text, source="s", filename="t.md", **kwargs).blocks]


def test_admonition_syntax_in_code_stays_code_and_prose_with_bangs_stays_prose():
    assert md("Write:\n\n    !!! note\n        Body\n\n```md\n??? tip\n    Body\n```\n\n!!! Read this: now.\n") == [
        (TEXT, "Write:"),
        (CODE, "```\n!!! note\n    Body\n```"),  # an indented code block, not an admonition
        (CODE, "```md\n??? tip\n    Body\n```"),
        (TEXT, "!!! Read this: now."),
    ]


def test_admonitions_and_tabs_inside_lists_and_each_other():
    assert md("1. Install:\n\n    !!! tip\n        Use a venv.\n\n2. Run it.\n") == [
        (TEXT, "1. Install:\n\n    Tip: Use a venv.\n\n2. Run it.")
    ]
    text = (
        '!!! example\n    === "pip"\n        ```\n        pip install ferrule\n        ```\n'
        '    === "uv"\n        Use uv.\n'
    )
    assert md(text) == [
        (TEXT, "Example:\n**pip**"),
        (CODE, "```\npip install ferrule\n```"),
        (TEXT, "**uv**\nUse uv."),
    ]


def test_labels_with_lists_tables_empty_bodies_and_no_title():
    text = (
        "!!! note\n\n    - one\n    - two\n\n"
        '???+ tip "Open"\n    | a | b |\n    |---|---|\n    | 1 | 2 |\n\n'
        '!!! tip "Use a venv"\n\n'
        '??? "Why?"\n    Because.\n\n'
        '!!! info inline end "Lorem"\n    Dolor.\n'
    )
    assert md(text) == [
        (TEXT, "Note:\n\n- one\n- two"),
        (TEXT, "Tip — Open:"),
        (TABLE, "| a | b |\n| --- | --- |\n| 1 | 2 |"),
        (TEXT, "Tip — Use a venv."),  # a title alone reads as a sentence
        (TEXT, "**Why?**\nBecause."),  # a collapsible of no kind: its title, in bold
        (TEXT, "Info — Lorem: Dolor."),  # Material's modifiers are not part of the label
    ]


def test_snippets_are_dropped_even_in_code_and_their_escape_shows_the_marker():
    text = '```python\n--8<-- "examples/x.py"\n```\n\n--8<--\nincludes/a.md\nincludes/b.md\n--8<--\n\n;--8<-- "x.md"\n'
    assert md(text) == [(TEXT, '--8<-- "x.md"')]


def test_api_lines_need_a_dotted_name_options_or_no_closing_fence():
    assert md("::: httpx\n\nText.\n") == [(TEXT, "API reference: `httpx`"), (TEXT, "Text.")]
    # a fence of a kind no generator here gives, closed later: not an API reference (left as the author wrote it)
    assert "API reference" not in md("::: orbitron-widget\nText.\n:::\n")[0][1]
    assert md("::: details Click me\nHidden.\n:::\n\n::: warning\nCareful.\n:::\n") == [
        (TEXT, "**Click me**\nHidden."),  # VitePress
        (TEXT, "Warning: Careful."),
    ]


def test_myst_generic_admonition_takes_its_kind_from_its_class():
    text = ":::{admonition} Retries\n:class: tip\nBack off.\n:::\n\n```{note} One line.\n```\n"
    assert md(text) == [(TEXT, "Tip — Retries: Back off."), (TEXT, "Note: One line.")]


def test_rst_admonitions_in_lists_and_generated_summaries():
    text = (
        "- Step one\n\n  .. note:: Inside a list.\n\n"
        ".. autosummary::\n   :toctree: generated\n\n   ferrule.client\n\n"
        ".. admonition:: Plain title\n\n   Body.\n"
    )
    doc = parse_rst(text, source="s", filename="t.rst")
    assert [b.text for b in doc.blocks] == ["- Step one\n  Note: Inside a list.", "Plain title: Body."]


# -- theme and template files --------------------------------------------------------------------------------------
def test_theme_and_template_files_are_told_by_folder_or_by_their_tags():
    assert all(is_theme_path(p) for p in ["overrides/partials/x.html", "_templates/autosummary/class.rst"])
    assert all(is_theme_path(p) for p in ["theme/base.html", "docs/_layouts/page.md", "layouts/partials/nav.htm"])
    assert not any(is_theme_path(p) for p in ["docs/templates/intro.md", "guide/index.html", "overrides.html"])
    assert is_template_html(b'{% extends "base.html" %}') and is_template_html(b"<title>{{ page.title }}</title>")
    assert not is_template_html(b"<p>Use <code>{{ name }}</code>.</p><pre>{% block x %}")  # shown as code
    assert not is_template_html(b"<p>Plain page</p><script>var t = '{{ x }}';</script><!-- {% y %} -->")
    assert not asks_for_template("overrides/main.html", DEFAULT_GLOBS)
    assert asks_for_template("overrides/main.html", ["overrides/**/*.html"])
    assert asks_for_template("site/landing.html", ["site/landing.html"])


def test_a_folder_walk_leaves_templates_out_and_says_how_many():
    skipped: list[str] = []
    templates: list[str] = []
    found = discover([MARKUP], DEFAULT_GLOBS, skipped=skipped, templates=templates)
    assert sorted(file.relative_to(MARKUP).as_posix() for _, file in found) == sorted(DOCUMENTS)
    assert templates == TEMPLATES
    assert skipped == [templates_note(TEMPLATES)]
    assert skipped[0].startswith("7 theme/template files (jekyll/_includes/nav.html, ")
    # a glob that names their folder, or a file by its name, takes them in
    asked = discover([MARKUP], ["**/overrides/**/*.html", "site/landing.html"], templates=(none := []))
    assert [file.relative_to(MARKUP).as_posix() for _, file in asked] == [
        "mkdocs/overrides/main.html",
        "mkdocs/overrides/partials/footer.html",
        "site/landing.html",
    ]
    assert none == []
    # a template named on the command line is taken as it is
    assert [file for _, file in discover([MARKUP / "mkdocs/overrides/main.html"], DEFAULT_GLOBS)] == [
        (MARKUP / "mkdocs/overrides/main.html").resolve()
    ]


def test_an_ingest_skips_the_theme_and_reports_the_count(kb, tmp_path):
    docs = tmp_path / "site"
    shutil.copytree(MARKUP / "mkdocs", docs)
    report = Ingestor(kb).ingest_paths([docs])
    assert report.indexed == 2 and report.failed == 0
    assert report.templates_skipped == 2
    assert report.skipped == [templates_note(["overrides/main.html", "overrides/partials/footer.html"])]
    assert report.skipped[0].startswith("2 theme/template files (overrides/main.html, overrides/partials/footer.html)")
    assert sorted(Path(r.path).name for r in kb.registry.list()) == ["client.md", "install.md"]
    assert '"templates_skipped":2' in report.model_dump_json()


def test_a_git_source_leaves_templates_out_too(tmp_path):
    from dulwich import porcelain

    repo_dir = tmp_path / "repo"
    shutil.copytree(MARKUP / "mkdocs", repo_dir)
    (repo_dir / "site").mkdir()
    shutil.copy(MARKUP / "site/landing.html", repo_dir / "site/landing.html")
    repo = porcelain.init(str(repo_dir))
    porcelain.add(repo, paths=[str(p) for p in repo_dir.rglob("*") if p.is_file() and ".git" not in p.parts])
    porcelain.commit(repo, message=b"docs", author=b"Docs <docs@example.com>", committer=b"Docs <docs@example.com>")
    repo.close()
    settings = Settings(home=tmp_path / "home")
    snapshot = GitRepository("ferrule", SourceSpec(url=str(repo_dir)), settings).snapshot()
    assert sorted(snapshot.files) == ["docs/install.md", "docs/reference/client.md"]
    assert snapshot.templates == ["overrides/main.html", "overrides/partials/footer.html", "site/landing.html"]
    asked = SourceSpec(url=str(repo_dir), include=("docs/**/*.md", "overrides/**/*.html"))
    snapshot = GitRepository("ferrule", asked, settings).snapshot()
    assert "overrides/main.html" in snapshot.files and snapshot.templates == []


def test_myst_comments_go_but_a_line_that_goes_on_a_paragraph_with_a_percent_stays():
    assert md("% a comment\n% and more\n\nAround 40\n% of users sync daily.\n") == [
        (TEXT, "Around 40\n% of users sync daily.")
    ]
