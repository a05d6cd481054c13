"""Sources as configuration: `[sources.NAME]` tables in citewise.toml, mirrored in the home.

citewise.toml is what a deployment is rebuilt from; the home keeps a copy of each spec beside its sync state, so
`citewise serve` and `sources list` know every source even when run from another directory. When both hold a
source, citewise.toml wins. `citewise sources add` and `remove` edit the file with tomlkit, which keeps the
comments and layout of the rest of it.

A long-running process (the server's scheduler, `/api/sources`) asks again on every look: the file is read anew,
so a source added or edited there is seen at once, and a source `citewise sources remove` removed — in this process
or any other sharing the state — is not brought back by the settings this process read at its start, which still
hold it, nor by a copy of the file older than the removal (another machine's, or one the server was started with
from another folder).
"""

from __future__ import annotations

import logging
import os
import tomllib
from datetime import UTC, datetime
from pathlib import Path
from urllib.parse import urlsplit, urlunsplit

from citewise.errors import ConfigError
from citewise.settings import SOURCE_NAME_RE, Settings, SourceKind, SourceSpec
from citewise.sources.state import open_source_state

log = logging.getLogger(__name__)


def redact_url(url: str) -> str:
    """`url` with any user name or password in it replaced by ***, for lists, logs and error messages."""
    parts = urlsplit(url)
    if not parts.scheme or "@" not in parts.netloc:
        return url
    host = parts.netloc.rsplit("@", 1)[1]
    return urlunsplit((parts.scheme, f"***@{host}", parts.path, parts.query, parts.fragment))


def config_path() -> Path:
    """The TOML file Settings read: $CITEWISE_CONFIG, else ./citewise.toml."""
    return Path(os.environ.get("CITEWISE_CONFIG", "citewise.toml"))


def check_name(name: str) -> str:
    if not SOURCE_NAME_RE.match(name):
        raise ConfigError(f"Invalid source name {name!r}: use 1-64 lowercase letters, digits, _ or -, e.g. docs-site.")
    return name


def kind_of(spec: SourceSpec) -> SourceKind:
    """The spec's kind, or what its URL says: http(s) → web (git when it ends in .git), git@/ssh:// /git:// → git, a
    folder with a .git inside (or a bare repository) → git, any other folder → folder."""
    if spec.kind is not None:
        return spec.kind
    url = spec.url
    if url.startswith("file:"):
        raise ConfigError(f"{url}: file:// URLs are not crawled. Give the folder's path instead.")
    if url.startswith(("http://", "https://")):
        return SourceKind.GIT if url.rstrip("/").endswith(".git") else SourceKind.WEB
    if url.startswith(("git@", "ssh://", "git://")):
        return SourceKind.GIT
    if "://" in url:
        raise ConfigError(f"{url}: unsupported scheme; a source is an http(s) URL, a Git URL or a local path")
    path = Path(url).expanduser()
    if not path.is_dir():
        raise ConfigError(f"{url}: no such folder (a local source must be a folder or a Git repository)")
    if (path / ".git").exists() or ((path / "HEAD").is_file() and (path / "objects").is_dir()):
        return SourceKind.GIT
    return SourceKind.FOLDER


def all_specs(settings: Settings) -> dict[str, SourceSpec]:
    """Every source declared now: the home's, then `settings.sources` (citewise.toml and the environment as they were
    when these settings were read), then citewise.toml as it is now. A source removed since (`citewise sources
    remove`) is left out of the first two, and out of the file unless the file changed after the removal (a table
    added back by hand); `sources add` and a sync that starts clear the removal."""
    state = open_source_state(settings)
    specs = state.specs()
    removed = state.removed()
    specs.update({name: spec for name, spec in settings.sources.items() if name not in removed})
    declared, changed_at = _declared_in_file(config_path())
    for name, spec in declared.items():
        if name not in removed or (changed_at is not None and changed_at > removed[name]):
            specs[name] = spec
    return dict(sorted(specs.items()))


def _declared_in_file(path: Path) -> tuple[dict[str, SourceSpec], datetime | None]:
    """The `[sources.NAME]` tables of the config file now, and when it last changed. A file that cannot be read or
    holds an invalid source (an edit in progress) counts as declaring nothing new: the process keeps what it knows."""
    try:
        changed_at = datetime.fromtimestamp(path.stat().st_mtime, UTC)
        tables = tomllib.loads(path.read_text(encoding="utf-8")).get("sources") or {}
        return {check_name(n): SourceSpec.model_validate(t) for n, t in tables.items()}, changed_at
    except FileNotFoundError:
        return {}, None
    except (OSError, ValueError, ConfigError, AttributeError) as exc:  # tomllib's and pydantic's errors are ValueErrors
        log.warning("Sources: %s was not read again (%s); using the sources read before", path, exc)
        return {}, None


def spec_of(settings: Settings, name: str) -> SourceSpec:
    specs = all_specs(settings)
    if name not in specs:
        removed = open_source_state(settings).removed().get(name)
        if removed is not None:
            raise ConfigError(
                f"Source {name!r} was removed ({removed.isoformat(timespec='seconds')}, `citewise sources remove`). "
                "Declare it again with `citewise sources add`."
            )
        known = ", ".join(specs) or "none yet"
        raise ConfigError(f"No source named {name!r} (sources: {known}). Add one with `citewise sources add`.")
    return specs[name]


def write_to_config(path: Path, name: str, spec: SourceSpec) -> None:
    import tomlkit

    document = _read_toml(path)
    sources = document.get("sources")
    if sources is None:
        sources = tomlkit.table(is_super_table=True)
        document["sources"] = sources
    table = tomlkit.table()
    for key, value in spec.model_dump(mode="json", exclude_defaults=True).items():
        table[key] = list(value) if isinstance(value, tuple) else value
    sources[name] = table
    _write_toml(path, document)


def remove_from_config(path: Path, name: str) -> bool:
    if not path.exists():
        return False
    document = _read_toml(path)
    sources = document.get("sources")
    if sources is None or name not in sources:
        return False
    del sources[name]
    if not sources:
        del document["sources"]
    _write_toml(path, document)
    return True


def _read_toml(path: Path):
    import tomlkit

    if not path.exists():
        return tomlkit.document()
    try:
        return tomlkit.parse(path.read_text(encoding="utf-8"))
    except Exception as exc:  # tomlkit's ParseError, or an unreadable file
        raise ConfigError(f"Cannot read {path}: {exc}") from exc


def _write_toml(path: Path, document) -> None:
    import tomlkit

    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(tomlkit.dumps(document), encoding="utf-8")
    os.replace(tmp, path)
