"""Which files a folder walk takes: path globs for include/exclude patterns, and the theme and template files it
leaves out unless asked.

Globs: `**` spans folders, `*` and `?` stay inside one. Hand-written (a dozen lines) because the standard library has
no such matcher on Python 3.11: `fnmatch` lets `*` cross `/`, and `PurePath.full_match` arrived in 3.13.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Callable, Iterable
from pathlib import PurePosixPath


@functools.cache
def _compile(pattern: str) -> re.Pattern[str]:
    out, i = [], 0
    pattern = pattern.lstrip("/")
    while i < len(pattern):
        if pattern.startswith("**/", i):
            out.append("(?:.*/)?")
            i += 3
        elif pattern.startswith("**", i):
            out.append(".*")
            i += 2
        elif pattern[i] == "*":
            out.append("[^/]*")
            i += 1
        elif pattern[i] == "?":
            out.append("[^/]")
            i += 1
        else:
            out.append(re.escape(pattern[i]))
            i += 1
    return re.compile("".join(out) + r"\Z")


def glob_match(path: str, pattern: str) -> bool:
    """Whether the relative POSIX `path` (a leading / is ignored on both sides) matches `pattern`."""
    return _compile(pattern).match(path.lstrip("/")) is not None


def any_match(path: str, patterns: Iterable[str]) -> bool:
    return any(glob_match(path, p) for p in patterns)


# Theme and template files: a site generator's page templates, not documentation. Ingested, their Jinja, Liquid or Go
# template tags (`{% block %}`, `{{ page.title }}`) came back as answers. A folder walk (`citewise ingest DIR`, folder
# and Git sources) leaves them out and says how many; a file named on the command line is taken as it is, and so is
# a template that an include glob asks for by its folder or its own name (`overrides/**/*.html`, `_layouts/x.html`).
# HTML files are the templates in folders of these names: MkDocs' `overrides/` (and its `partials/`), a theme's own
# folder, Hugo's `layouts/`, Jekyll's `_includes/`, a project's `templates/` (a docs section called "templates" keeps
# its Markdown pages).
THEME_FOLDERS = frozenset({"overrides", "theme", "themes", "templates", "partials", "layouts", "_includes"})
# Sphinx's `_templates/` and Jekyll's `_layouts/` hold templates alone, whatever their suffix (Sphinx's autosummary
# templates are .rst files of Jinja).
TEMPLATE_FOLDERS = frozenset({"_templates", "_layouts"})
_HTML = (".html", ".htm")
# Elsewhere an HTML file is a template when it holds template tags outside its code, scripts and comments (a page
# about Jinja shows them in <pre> or <code>). Only the first 64 KiB are looked at: a template's tags come early.
_TEMPLATE_TAG = re.compile(rb"\{%-?\s*[A-Za-z_]+|\{\{-?\s*[^{}\n]{1,200}?\s*-?\}\}")
_NOT_TEMPLATE_TEXT = re.compile(
    rb"<(pre|code|script|style|textarea|template)\b(?:.*?</\1\s*>|.*\Z)|<!--(?:.*?-->|.*\Z)", re.DOTALL | re.IGNORECASE
)
_TEMPLATE_HEAD = 65536
_LISTED = 5  # template paths named in the note; the count is exact


def is_theme_path(relative: str) -> bool:
    """Whether a path under a walked folder is a theme or template file by where it is (see `THEME_FOLDERS`)."""
    parts = PurePosixPath(relative.lstrip("/")).parts
    folders = {part.lower() for part in parts[:-1]}
    if folders & TEMPLATE_FOLDERS:
        return True
    return bool(parts) and parts[-1].lower().endswith(_HTML) and bool(folders & THEME_FOLDERS)


def is_template_html(data: bytes) -> bool:
    """Whether an HTML file's text is a page template: Jinja, Liquid, Go or Handlebars tags outside code."""
    return _TEMPLATE_TAG.search(_NOT_TEMPLATE_TEXT.sub(b" ", data[:_TEMPLATE_HEAD])) is not None


def is_theme_template(relative: str, read: Callable[[], bytes]) -> bool:
    """Whether a file a folder walk found is a theme or template file; `read` gives its bytes (asked for an HTML file
    outside the theme folders alone)."""
    if is_theme_path(relative):
        return True
    return relative.lower().endswith(_HTML) and is_template_html(read())


def asks_for_template(relative: str, patterns: Iterable[str]) -> bool:
    """Whether an include glob asks for this template: one that matches it and names its folder, or the file itself
    (a pattern without wildcards). `**/*.html` asks for every HTML file, not for templates."""
    for pattern in patterns:
        if not glob_match(relative, pattern):
            continue
        if not any(char in pattern for char in "*?"):
            return True
        folders = {segment.lower() for segment in pattern.strip("/").split("/")[:-1]}
        if folders & (THEME_FOLDERS | TEMPLATE_FOLDERS):
            return True
    return False


def templates_note(paths: list[str]) -> str:
    """What a folder walk says of the templates it left out: how many, the first few, and how to take them in."""
    shown = ", ".join(paths[:_LISTED]) + (f", and {len(paths) - _LISTED} more" if len(paths) > _LISTED else "")
    files = "file" if len(paths) == 1 else "files"
    return (
        f"{len(paths)} theme/template {files} ({shown}): site templates, not documentation; an include glob that "
        "names their folder (such as 'overrides/**/*.html') takes them in"
    )
