"""Fixtures for source tests: a docs site on loopback, and settings whose sources the test declares."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from tests.sources import site_fixture
from tests.support.docs_site import DocsSite

from citewise.settings import ServerSettings, Settings, SourceSpec, SyncSettings


@pytest.fixture
def site() -> Iterator[DocsSite]:
    with DocsSite() as served:
        site_fixture.build(served)
        yield served


@pytest.fixture(autouse=True)
def _config_in_tmp(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # `sources add/remove` edit citewise.toml: never the repository's working directory.
    monkeypatch.setenv("CITEWISE_CONFIG", str(tmp_path / "citewise.toml"))


def source_settings(home: Path, **sources: SourceSpec) -> Settings:
    return Settings(
        home=home,
        sync=SyncSettings(max_page_mb=0.1),
        sources=sources,
        server=ServerSettings(rate_limit_per_minute=0, log_questions=False),
    )
