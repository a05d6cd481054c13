"""The API reference at /docs works without internet: its page names no outside URL, and every script, stylesheet and
icon it loads is a file of the package (Swagger UI vendored in citewise/web/vendor/). The browser half, which checks
what a real page actually requests, is tests/web/test_offline.py."""

from __future__ import annotations

import hashlib
import re
from html.parser import HTMLParser
from pathlib import Path

from fastapi.testclient import TestClient

from citewise.server import create_app
from citewise.server.api_docs import ASSETS

VENDOR = Path(__file__).resolve().parents[2] / "src" / "citewise" / "web" / "vendor"


class _Links(HTMLParser):
    """Every src= and href= of the page."""

    def __init__(self) -> None:
        super().__init__()
        self.found: list[str] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.found += [value for name, value in attrs if name in ("src", "href") and value]


def links(html: str) -> list[str]:
    parser = _Links()
    parser.feed(html)
    return parser.found


def test_docs_page_loads_only_files_of_the_server(server_settings, make_client):
    client = make_client(server_settings)
    page = client.get("/docs")
    assert page.status_code == 200 and "SwaggerUIBundle" in page.text
    # No absolute URL anywhere in the page: not in a tag, not in the script (the CDN defaults are gone).
    assert re.findall(r"(?:https?:)?//[\w.-]+", page.text) == []
    found = links(page.text)
    assert sorted(found) == [
        "/docs/assets/favicon.svg",
        "/docs/assets/swagger-ui-bundle.js",
        "/docs/assets/swagger-ui.css",
    ]
    for url in found:
        asset = client.get(url)
        assert asset.status_code == 200 and asset.content, url
    assert client.get("/docs/assets/swagger-ui-bundle.js").headers["content-type"].startswith("text/javascript")
    assert client.get("/docs/assets/swagger-ui.css").headers["content-type"].startswith("text/css")
    # Swagger UI would otherwise send the schema to validator.swagger.io.
    assert '"validatorUrl": null' in page.text
    assert "url: '/openapi.json'" in page.text and client.get("/openapi.json").status_code == 200


def test_docs_assets_are_only_the_listed_files_and_revalidate(server_settings, make_client):
    client = make_client(server_settings)
    for name in ["marked.esm.js", "README.md", "..%2Fapp.js", "..%2F..%2Fserver%2Fapp.py", ""]:
        assert client.get(f"/docs/assets/{name}").status_code == 404, name
    first = client.get("/docs/assets/swagger-ui.css")
    assert first.headers["cache-control"] == "no-cache"
    again = client.get("/docs/assets/swagger-ui.css", headers={"If-None-Match": first.headers["etag"]})
    assert again.status_code == 304 and again.content == b""


def test_redoc_is_off_and_the_oauth2_redirect_stays(server_settings, make_client):
    client = make_client(server_settings)
    assert client.get("/redoc").status_code == 404  # FastAPI's /redoc loads ReDoc and Google Fonts from CDNs
    redirect = client.get("/docs/oauth2-redirect")
    assert redirect.status_code == 200 and "swaggerUIRedirectOauth2" in redirect.text
    assert not re.findall(r"<script[^>]+src=|<link[^>]+href=", redirect.text)


def test_docs_page_needs_no_key(keyed_settings, make_client):
    """As FastAPI's own page was: the reference documents the API, the data stays behind the keys."""
    client = make_client(keyed_settings)
    assert client.get("/docs").status_code == 200
    assert client.get("/docs/assets/swagger-ui-bundle.js").status_code == 200
    assert client.get("/api/documents").status_code == 401


def test_docs_urls_carry_the_root_path(server_settings, make_kb):
    """Behind a proxy that mounts the app under a prefix, the page asks for its files under that prefix."""
    app = create_app(server_settings, kb=make_kb(server_settings))
    with TestClient(app, root_path="/citewise") as client:
        page = client.get("/citewise/docs").text
        assert "/citewise/docs/assets/swagger-ui-bundle.js" in page and "url: '/citewise/openapi.json'" in page
        assert "'/citewise/docs/oauth2-redirect'" in page
        assert client.get("/citewise/docs/assets/swagger-ui-bundle.js").status_code == 200


def test_vendored_files_match_the_readme():
    """Every vendored file is in vendor/README.md with the start of its sha256, and the docs assets exist."""
    readme = (VENDOR / "README.md").read_text(encoding="utf-8")
    rows = dict(re.findall(r"^\| ([\w.-]+) \|.*\| ([0-9a-f]{16})… \|$", readme, re.M))
    for name, digest in rows.items():
        assert hashlib.sha256((VENDOR / name).read_bytes()).hexdigest().startswith(digest), name
    code = {p.name for p in VENDOR.iterdir() if p.suffix in (".js", ".mjs", ".css")}
    assert code <= set(rows), f"not in vendor/README.md: {sorted(code - set(rows))}"
    assert all(path.is_file() for path in ASSETS.values())
