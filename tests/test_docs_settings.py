"""docs/configuration.md can't rot: every setting is documented under its environment variable name, with its real
default, and every `CITEWISE_*` name the page mentions is a real setting.

Names are derived from `Settings.model_fields` the way pydantic-settings reads the environment (prefix `CITEWISE_`,
nested sections joined with `__`, upper case), so a new, renamed or removed field fails here until the page follows.
"""

from __future__ import annotations

import re
from enum import Enum
from pathlib import Path
from typing import Any

import pytest
from pydantic import BaseModel

from citewise.settings import Settings

PAGE = Path(__file__).parents[1] / "docs" / "configuration.md"
PREFIX = "CITEWISE_"
# Read by Citewise but not fields: CITEWISE_CONFIG names the TOML file. CITEWISE_HOME is also a field (`home`).
SPECIAL = {"CITEWISE_CONFIG", "CITEWISE_HOME"}
# The page's own examples of misspelt names ("... is not an error: it is simply ignored").
MISSPELT_ON_PURPOSE = {"CITEWISE_EMBEDING", "CITEWISE_INGEST__CHUNKSIZE"}


def _section_model(annotation: Any) -> type[BaseModel] | None:
    return annotation if isinstance(annotation, type) and issubclass(annotation, BaseModel) else None


def setting_fields(model: type[BaseModel] = Settings, path: tuple[str, ...] = ()) -> dict[str, tuple[Any, ...]]:
    """Environment variable name → (dotted setting name, field info), walking nested sections recursively."""
    found: dict[str, tuple[Any, ...]] = {}
    for name, field in model.model_fields.items():
        section = _section_model(field.annotation)
        if section is not None:
            found |= setting_fields(section, (*path, name))
        else:
            env = PREFIX + "__".join((*path, name)).upper()
            found[env] = (".".join((*path, name)), field)
    return found


def section_prefixes(model: type[BaseModel] = Settings, path: tuple[str, ...] = ()) -> set[str]:
    """`CITEWISE_INGEST__`, … — the prefixes the page may show with a placeholder (`CITEWISE_INGEST__<NAME>`)."""
    found = set()
    for name, field in model.model_fields.items():
        section = _section_model(field.annotation)
        if section is not None:
            found.add(PREFIX + "__".join((*path, name)).upper() + "__")
            found |= section_prefixes(section, (*path, name))
    return found


FIELDS = setting_fields()
PREFIXES = section_prefixes()


def _page() -> str:
    return PAGE.read_text()


def _documented_names(text: str) -> set[str]:
    return set(re.findall(r"\bCITEWISE_[A-Z0-9_]*", text))


def _table_row(text: str, env: str) -> list[str] | None:
    """The cells of the settings-table row whose environment-variable column is exactly `env`."""
    for line in text.splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if line.lstrip().startswith("|") and len(cells) >= 3 and cells[1] == f"`{env}`":
            return cells
    return None


def _default_is_documented(default: Any, cell: str) -> bool:
    """Whether the page's Default cell states `default`: scalars and list items in backticks, as in a TOML file;
    an empty list as "none"; a None default (computed at run time, e.g. `CITEWISE_HOME/models`) as anything."""
    if default is None:
        return bool(cell)
    if isinstance(default, list | tuple | dict | set):
        return all(f"`{item}`" in cell for item in default) if default else cell == "none"
    if isinstance(default, bool):
        return f"`{str(default).lower()}`" in cell
    if isinstance(default, Enum):
        return f"`{default.value}`" in cell
    return f"`{default}`" in cell  # int, float, str, Path


def test_the_walk_finds_nested_settings():
    # A guard on the walk itself: if it stopped recursing, the checks below would pass vacuously.
    assert {"CITEWISE_LLM", "CITEWISE_AGENT__MAX_TURNS", "CITEWISE_SERVER__PORT", "CITEWISE_INGEST__CHUNK_SIZE"} <= set(
        FIELDS
    )
    assert "CITEWISE_AGENT" not in FIELDS and "CITEWISE_AGENT__" in PREFIXES
    assert len(FIELDS) >= 50


@pytest.mark.parametrize("env", sorted(FIELDS))
def test_every_setting_is_documented_in_a_table(env):
    row = _table_row(_page(), env)
    dotted = FIELDS[env][0]
    assert row is not None, f"{dotted} ({env}) has no row in docs/configuration.md"
    assert row[0] == f"`{dotted.rsplit('.', 1)[-1]}`", f"the row for {env} names another setting: {row[0]}"


@pytest.mark.parametrize("env", sorted(FIELDS))
def test_documented_defaults_are_the_real_ones(env):
    dotted, field = FIELDS[env]
    default = field.get_default(call_default_factory=True)
    row = _table_row(_page(), env)
    assert row is not None, f"{dotted} ({env}) has no row in docs/configuration.md"
    assert _default_is_documented(default, row[2]), f"{dotted}: the page says {row[2]!r}, the code says {default!r}"


def test_every_documented_name_is_a_real_setting():
    unknown = set()
    for name in _documented_names(_page()):
        if name in FIELDS or name in SPECIAL or name in MISSPELT_ON_PURPOSE:
            continue
        if name.endswith("_") and (name == PREFIX or name in PREFIXES):
            continue  # `CITEWISE_*` or `CITEWISE_INGEST__<NAME>`: a placeholder, not a name
        unknown.add(name)
    assert not unknown, f"docs/configuration.md names settings that do not exist: {sorted(unknown)}"


def test_the_checks_catch_a_missing_row_a_wrong_default_and_an_invented_name():
    text = _page()
    row_line = next(line for line in text.splitlines() if line.startswith("| `max_turns` |"))
    assert _table_row(text.replace(row_line + "\n", ""), "CITEWISE_AGENT__MAX_TURNS") is None
    assert not _default_is_documented(
        6, _table_row(text.replace(row_line, row_line.replace("`6`", "`8`")), "CITEWISE_AGENT__MAX_TURNS")[2]
    )
    invented = _documented_names(text + "\nexport CITEWISE_AGENT__MAX_TURNZ=3\n") - set(FIELDS) - SPECIAL
    assert "CITEWISE_AGENT__MAX_TURNZ" in invented
    assert not MISSPELT_ON_PURPOSE & set(FIELDS)
