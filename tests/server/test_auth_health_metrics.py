"""API keys (401), rate limiting (429 + Retry-After), /health, /ready, /metrics, OpenAPI, the web mount."""

from __future__ import annotations

import pytest
from tests.server.conftest import auth

from citewise.server.auth import RateLimiter


def test_with_keys_every_api_request_needs_one(keyed_settings, make_client):
    client = make_client(keyed_settings)
    for method, path in [
        ("get", "/api/documents"),
        ("post", "/api/agent/run"),
        ("post", "/api/agent/stream"),
        ("post", "/chat"),
        ("delete", "/api/documents/00000000-0000-4000-8000-000000000000"),
        ("get", "/api/chunks/00000000-0000-4000-8000-000000000000"),
        ("get", "/metrics"),
    ]:
        response = client.request(method, path, json={"question": "x", "message": "x"})
        assert response.status_code == 401, (path, response.status_code)
        assert response.headers["content-type"] == "application/json"
        assert "API key" in response.json()["detail"]
        assert response.headers["www-authenticate"] == "Bearer"
    wrong = client.get("/api/documents", headers=auth("nope"))
    assert wrong.status_code == 401 and wrong.json() == {"detail": "Invalid API key."}
    # Both header styles work.
    assert client.get("/api/documents", headers=auth("key-alice")).status_code == 200
    assert client.get("/api/documents", headers={"X-API-Key": "key-bob"}).status_code == 200
    # Probes stay open: an orchestrator has no key.
    assert client.get("/health").status_code == 200
    assert client.get("/ready").status_code == 200


def test_without_keys_requests_act_as_public(server_settings, make_client):
    client = make_client(server_settings)
    assert client.get("/api/documents").status_code == 200
    assert client.get("/metrics").status_code == 200


def test_rate_limit_returns_429_with_retry_after(keyed_settings, make_client):
    settings = keyed_settings.model_copy(
        update={"server": keyed_settings.server.model_copy(update={"rate_limit_per_minute": 3})}
    )
    client = make_client(settings)
    for _ in range(3):
        assert client.get("/api/documents", headers=auth("key-alice")).status_code == 200
    limited = client.get("/api/documents", headers=auth("key-alice"))
    assert limited.status_code == 429
    assert int(limited.headers["retry-after"]) >= 1
    assert "3 requests per minute" in limited.json()["detail"]
    # Per key: Bob is not slowed down by Alice.
    assert client.get("/api/documents", headers=auth("key-bob")).status_code == 200
    # Probes are not rate limited.
    assert client.get("/health").status_code == 200


def test_token_bucket_refills_at_the_configured_rate():
    now = [0.0]
    limiter = RateLimiter(6, clock=lambda: now[0])  # one token every 10 s
    assert all(limiter.acquire("k") == 0.0 for _ in range(6))
    assert limiter.acquire("k") == 10.0
    now[0] = 5.0
    assert limiter.acquire("k") == 5.0
    now[0] = 10.0
    assert limiter.acquire("k") == 0.0
    assert RateLimiter(0).acquire("k") == 0.0  # 0 = unlimited


def test_peeking_at_a_bucket_takes_nothing():
    """The gate peeks at an address's failed-auth bucket on every keyed request: only failures may empty it."""
    now = [0.0]
    limiter = RateLimiter(6, clock=lambda: now[0])
    assert limiter.peek("ip") == 0.0  # an address never seen has a full bucket
    assert all(limiter.acquire("ip") == 0.0 for _ in range(5))
    assert [limiter.peek("ip") for _ in range(10)] == [0.0] * 10
    assert limiter.acquire("ip") == 0.0
    assert limiter.peek("ip") == 10.0 and limiter.peek("ip") == 10.0
    now[0] = 4.0
    assert limiter.peek("ip") == pytest.approx(6.0)
    now[0] = 10.0
    assert limiter.peek("ip") == 0.0
    assert RateLimiter(0).peek("ip") == 0.0


def test_peeking_at_a_shared_bucket_takes_nothing(pg_settings):
    from citewise.server.auth import SharedRateLimiter
    from citewise.state.database import Database

    url = pg_settings.database_url.get_secret_value()
    Database(url).check_schema()
    one = SharedRateLimiter(3, Database(url), prefix="auth-failures")
    two = SharedRateLimiter(3, Database(url), prefix="auth-failures")  # another replica
    assert one.peek("ip:203.0.113.7") == 0.0
    assert [one.acquire("ip:203.0.113.7") for _ in range(2)] == [0.0, 0.0]
    assert [two.peek("ip:203.0.113.7") for _ in range(5)] == [0.0] * 5
    assert two.acquire("ip:203.0.113.7") == 0.0
    waits = [one.peek("ip:203.0.113.7"), two.peek("ip:203.0.113.7")]
    assert all(19.0 < wait <= 20.0 for wait in waits), waits  # 3 a minute: the next token in about 20 s
    assert two.peek("ip:198.51.100.1") == 0.0
    assert SharedRateLimiter(0, Database(url), prefix="auth-failures").peek("ip:203.0.113.7") == 0.0


def test_health_and_ready(server_settings, make_client, ingest_corpus):
    client = make_client(server_settings)
    assert client.get("/health").json()["status"] == "ok"
    ready = client.get("/ready")
    assert ready.status_code == 200
    assert ready.json()["index"] == {"ok": True, "documents": 0, "chunks": 0}
    assert ready.json()["model"]["answerer"] == "extractive"

    ingest_corpus(server_settings)  # another process (the CLI) fills the index while the server runs
    index = client.get("/ready").json()["index"]
    assert index["documents"] >= 5 and index["chunks"] > index["documents"]


def test_ready_is_503_when_the_index_cannot_be_opened(server_settings, make_client, ingest_corpus):
    ingest_corpus(server_settings)
    # Make the vector table unreadable: replace its folder with a file.
    lance = server_settings.index_dir / "lancedb"
    import shutil

    shutil.rmtree(lance)
    lance.write_text("not a database")
    client = make_client(server_settings)
    ready = client.get("/ready")
    assert ready.status_code == 503
    assert ready.json()["status"] == "not ready" and ready.json()["index"]["ok"] is False
    assert "lancedb" not in ready.text  # reasons go to the log, not to an unauthenticated probe


def test_ready_is_503_when_the_answerer_cannot_be_built(server_settings, make_client):
    settings = server_settings.model_copy(update={"llm": "nonexistent_vendor:some-model"})
    client = make_client(settings)
    ready = client.get("/ready")
    assert ready.status_code == 503
    assert ready.json()["model"]["ok"] is False


def test_metrics_count_requests_by_route_template(server_settings, make_client):
    client = make_client(server_settings)
    client.get("/api/documents")
    client.delete("/api/documents/00000000-0000-4000-8000-000000000000")
    text = client.get("/metrics").text
    assert 'citewise_http_requests_total{method="GET",route="/api/documents",status="200"} 1.0' in text
    assert 'citewise_http_requests_total{method="DELETE",route="/api/documents/{doc_id}",status="404"} 1.0' in text
    assert "citewise_http_request_duration_seconds_bucket" in text
    assert "citewise_llm_cache_hit_ratio" in text


def test_two_apps_have_separate_metrics(server_settings, make_client, tmp_path):
    first = make_client(server_settings)
    second = make_client(server_settings.model_copy(update={"home": tmp_path / "other"}))
    first.get("/api/documents")
    assert 'route="/api/documents"' not in second.get("/metrics").text


def test_openapi_lists_every_endpoint(server_settings, make_client, tmp_path):
    web = tmp_path / "web"
    web.mkdir()
    (web / "index.html").write_text("<!doctype html>")
    client = make_client(server_settings, web_dir=web)
    assert "swagger" in client.get("/docs").text.lower()  # the page mounted at / does not hide the API reference
    paths = client.get("/openapi.json").json()["paths"]
    for path in ["/chat", "/api/agent/run", "/api/agent/stream", "/api/documents", "/api/documents/{doc_id}"]:
        assert path in paths
    assert "text/event-stream" in str(paths["/api/agent/stream"])


def test_web_page_is_served_after_the_api(server_settings, make_client, tmp_path):
    web = tmp_path / "web"
    web.mkdir()
    (web / "index.html").write_text("<!doctype html><title>Citewise</title>")
    client = make_client(server_settings, web_dir=web)
    page = client.get("/")
    assert page.status_code == 200 and "<title>Citewise</title>" in page.text
    assert client.get("/health").json()["status"] == "ok"  # the mount at / does not shadow the API
    # No folder: the API still works.
    bare = make_client(server_settings, web_dir=tmp_path / "missing")
    assert bare.get("/").status_code == 404
    assert bare.get("/health").status_code == 200
