"""`citewise serve` starts a real server process that answers on the port it was given, and stops cleanly."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import httpx


def test_citewise_serve_runs_the_app(tmp_path: Path):
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    citewise = Path(sys.executable).parent / "citewise"
    process = subprocess.Popen(
        [str(citewise), "serve", "--port", str(port), "--home", str(tmp_path / "home")],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        env={**os.environ, "CITEWISE_SERVER__LOG_QUESTIONS": "false"},
    )
    try:
        deadline = time.monotonic() + 120
        while True:
            assert process.poll() is None, process.stdout.read().decode()
            try:
                health = httpx.get(f"http://127.0.0.1:{port}/health")
                break
            except httpx.TransportError:
                assert time.monotonic() < deadline, "citewise serve did not start listening"
                time.sleep(0.2)
        assert health.json()["status"] == "ok"
        ready = httpx.get(f"http://127.0.0.1:{port}/ready")
        assert ready.status_code == 200 and ready.json()["index"]["documents"] == 0
        assert httpx.get(f"http://127.0.0.1:{port}/api/documents").json() == []
    finally:
        process.send_signal(signal.SIGINT)
        output = process.communicate(timeout=60)[0].decode()
    assert process.returncode == 0, output
    assert f"http://127.0.0.1:{port}/" in output


def test_serve_rejects_an_unknown_log_level(tmp_path: Path):
    citewise = Path(sys.executable).parent / "citewise"
    result = subprocess.run(
        [str(citewise), "serve", "--log-level", "loud", "--home", str(tmp_path)], capture_output=True, text=True
    )
    assert result.returncode == 2 and "--log-level" in result.stderr


def test_the_demo_serves_the_pages_its_answers_link_to(tmp_path: Path):
    """`make demo`, small: a folder ingested with --base-url …/pages and served with --pages. Every citation's link
    and every link the quoted docs make relative to their own page open a page of the folder, offline."""
    import re
    from urllib.parse import urljoin

    docs = tmp_path / "docs"
    docs.mkdir()
    (docs / "workers.md").write_text(
        "# Workers\n\n## Pool size\n\nThe worker pool runs twelve threads by default; see "
        "[the server page](server.md#timeouts) for how long each job may run.\n"
    )
    (docs / "server.md").write_text("# Server\n\n## Timeouts\n\nA job may run for ninety seconds.\n")
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    base = f"http://127.0.0.1:{port}/pages"
    citewise = Path(sys.executable).parent / "citewise"
    home = str(tmp_path / "home")
    env = {**os.environ, "CITEWISE_SERVER__LOG_QUESTIONS": "false"}
    ingest = subprocess.run(
        [str(citewise), "ingest", str(docs), "--base-url", base, "--home", home],
        capture_output=True,
        text=True,
        env=env,
    )
    assert ingest.returncode == 0, ingest.stderr
    process = subprocess.Popen(
        [str(citewise), "serve", "--port", str(port), "--home", home, "--pages", str(docs)],
        stdout=subprocess.PIPE, stderr=subprocess.STDOUT, env=env,
    )  # fmt: skip
    try:
        deadline = time.monotonic() + 120
        while True:
            assert process.poll() is None, process.stdout.read().decode()
            try:
                httpx.get(f"http://127.0.0.1:{port}/health")
                break
            except httpx.TransportError:
                assert time.monotonic() < deadline, "citewise serve did not start listening"
                time.sleep(0.2)
        question = {"question": "How many threads does the worker pool run by default?", "mode": "quote"}
        answer = httpx.post(f"http://127.0.0.1:{port}/api/agent/run", json=question, timeout=120).json()
        assert answer["status"] == "success", answer
        urls = [c["source_url"] for c in answer["citations"]]
        assert urls and all(url.startswith(f"{base}/workers") for url in urls)
        links = [urljoin(urls[0], href) for href in re.findall(r"\]\(([^)]+)\)", answer["answer"])]
        assert links == [f"{base}/server.md#timeouts"]  # what the web page makes of the quoted link
        for url in [*urls, *links]:
            page = httpx.get(url)
            assert page.status_code == 200 and page.headers["content-type"].startswith("text/html"), url
        assert 'id="timeouts"' in httpx.get(links[0]).text
        examples = httpx.get(f"http://127.0.0.1:{port}/api/examples").json()["questions"]
        assert examples  # the landing page's questions, from these two pages' headings
    finally:
        process.send_signal(signal.SIGINT)
        output = process.communicate(timeout=60)[0].decode()
    assert process.returncode == 0, output
    assert f"{base}/" in output  # the server says where the pages are


def test_serve_refuses_pages_that_are_no_folder(tmp_path: Path):
    citewise = Path(sys.executable).parent / "citewise"
    result = subprocess.run(
        [str(citewise), "serve", "--pages", str(tmp_path / "nowhere"), "--home", str(tmp_path / "home")],
        capture_output=True, text=True,
    )  # fmt: skip
    assert result.returncode == 2 and "--pages" in result.stderr
    assert not (tmp_path / "home").exists()
