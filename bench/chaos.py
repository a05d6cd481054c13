"""Fault and abuse probes against a real server and the real CLI, in bounded time: `make chaos`.

    .venv/bin/python bench/chaos.py [--only NAME ...]

Starts `citewise serve` (uvicorn on loopback, API keys on) over a home with the test corpus, and a second one with a
low rate limit, then runs the HTTP probes below, the CLI's sync agent mode against a misbehaving OpenAI-compatible
server (tests/support/fake_openai.py, the tests' own), and the write-side probes of bench/chaos_ingest.py (a run
that can't import them fails, rather than report the rest as everything). Each probe returns {"name", "tried",
"held", "detail"}; the run writes bench/results/chaos.json and exits non-zero unless every probe held.
bench/report.py turns the JSON into BENCHMARKS.md's table.

What "held" means is in each probe's docstring. The whole run takes a few minutes on a 2-core machine.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import random
import socket
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import httpx
import psutil

from _common import ROOT, cli_env, write_result

sys.path.insert(0, str(ROOT))  # the tests' fake OpenAI-compatible server is a probe tool here too
from tests.support.fake_openai import FakeOpenAI, Fault, Reply
from tests.support.sse import literal_client

Probe = Callable[[Path], dict]
KEYS = {"k-alice": "alice", "k-bob": "bob", "k-ops": "public", "k-widget": "alice"}
ASK_ONLY_KEYS = ["k-widget"]  # a key as the widget has it: in public page source, so it may only ask
ALICE, BOB = {"Authorization": "Bearer k-alice"}, {"Authorization": "Bearer k-bob"}
WIDGET = {"Authorization": "Bearer k-widget"}
CORPUS = ROOT / "tests" / "fixtures" / "corpus"
SECRET_DOC = ROOT / "tests" / "fixtures" / "agent_corpus" / "alice" / "vault-notes.md"
QUESTION = "How do I pin the worker pool to a fixed number of threads?"
MB = 1024 * 1024


def _env(home: Path, **extra: str) -> dict[str, str]:
    return cli_env(home, CITEWISE_SERVER__LOG_QUESTIONS="false", **extra)


def _cli(*args: str, home: Path, timeout: float = 180, stdin: str | None = None, **env: str):
    return subprocess.run(
        [sys.executable, "-m", "citewise.cli", *args],
        env=_env(home, **env),
        input=stdin,
        capture_output=True,
        text=True,
        timeout=timeout,
    )


def _result(name: str, checks: list[tuple[bool, str]]) -> dict:
    failed = [detail for ok, detail in checks if not ok]
    return {
        "name": name,
        "tried": len(checks),
        "held": len(checks) - len(failed),
        "detail": "; ".join(failed) if failed else "; ".join(detail for _, detail in checks)[:400],
    }


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


# -- the servers -------------------------------------------------------------------------------------------------
class Server:
    """`citewise serve` in a subprocess on a free loopback port; its stderr goes to a log file."""

    def __init__(self, home: Path, log: Path, **env: str) -> None:
        self.port = _free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.log = log
        self._log_file = log.open("w")
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "citewise.cli", "serve", "--port", str(self.port), "--log-level", "info"],
            env=_env(home, **env),
            stdout=self._log_file,
            stderr=subprocess.STDOUT,
        )
        deadline = time.monotonic() + 120
        while True:
            with contextlib.suppress(httpx.HTTPError):
                if httpx.get(f"{self.url}/health", timeout=2).status_code == 200:
                    break
            if self.proc.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError(f"citewise serve did not start: {log.read_text()[-2000:]}")
            time.sleep(0.2)

    @property
    def rss_mb(self) -> float:
        return round(psutil.Process(self.proc.pid).memory_info().rss / MB, 1)

    def stop(self) -> None:
        self.proc.terminate()
        try:
            self.proc.wait(30)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait(10)
        self._log_file.close()

    def log_problems(self) -> list[str]:
        """ERROR lines and tracebacks the server logged."""
        lines = self.log.read_text(errors="replace").splitlines()
        return [line for line in lines if line.startswith("ERROR") or "Traceback" in line]


SERVERS: dict[str, Server] = {}


@contextlib.contextmanager
def servers(workdir: Path) -> Iterator[None]:
    home = workdir / "home"
    done = _cli("ingest", str(CORPUS), home=home, timeout=600)
    if done.returncode != 0:
        raise RuntimeError(f"ingest failed: {done.stderr[-2000:]}")
    timeouts = {"CITEWISE_SERVER__HEADER_TIMEOUT_S": "3", "CITEWISE_SERVER__BODY_TIMEOUT_S": "3"}
    SERVERS["keyed"] = Server(
        home,
        workdir / "keyed.log",
        CITEWISE_API_KEYS=json.dumps(KEYS),
        CITEWISE_ASK_ONLY_KEYS=json.dumps(ASK_ONLY_KEYS),
        CITEWISE_SERVER__RATE_LIMIT_PER_MINUTE="0",
        **timeouts,
    )
    SERVERS["limited"] = Server(home, workdir / "limited.log", CITEWISE_SERVER__RATE_LIMIT_PER_MINUTE="10", **timeouts)
    try:
        yield
    finally:
        for server in SERVERS.values():
            server.stop()


def _raw(url: str, head: str, body: bytes = b"", *, send_all: int = 0, wait_s: float = 30) -> tuple[int, bool]:
    """One request on a fresh connection: `head`, `body`, then `send_all` more bytes (in a thread, as a real client
    would keep sending); returns (status, whether the server closed the connection after answering)."""
    host, port = url.removeprefix("http://").split(":")
    sock = socket.create_connection((host, int(port)), timeout=wait_s)

    def pump() -> None:
        chunk = b" " * MB
        with contextlib.suppress(OSError):
            for _ in range(send_all // MB):
                sock.sendall(chunk)

    try:
        sock.sendall(head.replace("\n", "\r\n").encode() + b"\r\n" + body)
        if send_all:
            threading.Thread(target=pump, daemon=True).start()
        received = b""
        while b"\r\n\r\n" not in received:
            chunk = sock.recv(65536)
            if not chunk:
                break
            received += chunk
        status = int(received.split(b" ", 2)[1]) if received.startswith(b"HTTP/1.1 ") else 0
        try:
            while sock.recv(65536):
                pass
        except TimeoutError:
            return status, False  # still open: the server is reading what we send
        except OSError:
            pass  # reset: closed while we were still sending
        return status, True
    finally:
        sock.close()


def _head(
    path: str,
    *,
    length: int | None = None,
    chunked: bool = False,
    key: str | None = None,
    method: str = "POST",
    kind: str = "application/json",
) -> str:
    lines = [f"{method} {path} HTTP/1.1", "Host: chaos", f"Content-Type: {kind}"]
    if length is not None:
        lines.append(f"Content-Length: {length}")
    if chunked:
        lines.append("Transfer-Encoding: chunked")
    if key:
        lines.append(f"Authorization: Bearer {key}")
    return "\n".join(lines) + "\n"


# -- HTTP probes -------------------------------------------------------------------------------------------------
def huge_bodies_without_key(workdir: Path) -> dict:
    """200 MB bodies without a key, one alone then four at once, to each route class: 401, the rest never read
    (the server closes the connection), server RSS grows by less than 50 MB."""
    server = SERVERS["keyed"]
    before = server.rss_mb
    checks = []
    for path in ("/api/agent/run", "/chat", "/api/documents"):
        status, closed = _raw(server.url, _head(path, length=200 * MB), b"{", send_all=200 * MB)
        checks.append((status == 401 and closed, f"{path}: {status}, closed={closed}"))
    with ThreadPoolExecutor(4) as pool:
        statuses = list(
            pool.map(lambda _: _raw(server.url, _head("/chat", length=200 * MB), b"{", send_all=200 * MB), range(4))
        )
    checks.append((all(s == 401 for s, _ in statuses), f"4 at once: {[s for s, _ in statuses]}"))
    after = server.rss_mb
    checks.append((after - before < 50, f"server RSS {before} MB before, {after} MB after"))
    return {**_result("huge bodies without a key → 401, unread", checks), "rss_mb": [before, after]}


def huge_bodies_with_key(workdir: Path) -> dict:
    """With a valid key: a 200 MB Content-Length → 413 before reading; a chunked body past the limit → 413."""
    server = SERVERS["keyed"]
    before = server.rss_mb
    status, closed = _raw(server.url, _head("/api/agent/run", length=200 * MB, key="k-alice"), send_all=200 * MB)
    checks = [(status == 413 and closed, f"Content-Length 200 MB: {status}")]
    chunk = b" " * (512 * 1024)
    chunks = b"".join(b"%x\r\n%s\r\n" % (len(chunk), chunk) for _ in range(6)) + b"0\r\n\r\n"
    status, _ = _raw(server.url, _head("/chat", chunked=True, key="k-alice"), chunks)
    checks.append((status == 413, f"chunked 3 MB: {status}"))
    after = server.rss_mb
    checks.append((after - before < 50, f"server RSS {before} → {after} MB"))
    return _result("huge bodies with a key → 413", checks)


def hostile_json(workdir: Path) -> dict:
    """Lone surrogates, malformed JSON and wrong content types on every JSON route: 4xx, never 5xx."""
    server = SERVERS["keyed"]
    bodies = [
        (b'{"question": "\\ud800"}', "application/json"),
        (b'{"message": "\\udfff x", "question": "\\ud800"}', "application/json"),
        (b'{"question": ', "application/json"),
        (b"\xff\xfe{}", "application/json"),
        (b"[1, 2, 3]", "application/json"),
        (b'{"question": "' + b"x" * 20_000 + b'"}', "application/json"),
        (b"question=hi", "application/x-www-form-urlencoded"),
        (b"hi", "text/plain"),
        (b"--x\r\nContent-Disposition: form-data; name=files\r\n\r\nhi\r\n--x--", "multipart/form-data; boundary=x"),
    ]
    checks = []
    with httpx.Client(base_url=server.url, headers=ALICE, timeout=60) as client:
        for path in ("/chat", "/api/agent/run", "/api/agent/stream"):
            for body, kind in bodies:
                field = body.replace(b'"question"', b'"message"') if path == "/chat" else body
                status = client.post(path, content=field, headers={"content-type": kind}).status_code
                checks.append((400 <= status < 500, f"{path} {body[:24]!r}: {status}"))
        response = client.post("/api/documents", json={"files": "x"})
        checks.append((400 <= response.status_code < 500, f"JSON to the upload route: {response.status_code}"))
        for name in ("C:\\evil.md", "../evil.md", "a/b.md"):
            status = client.post("/api/documents", files=[("files", (name, b"# x\n\ny.", "text/markdown"))])
            checks.append((status.status_code == 400, f"upload name {name!r}: {status.status_code}"))
    return _result("hostile JSON, content types, names → 4xx", checks)


def slow_clients(workdir: Path) -> dict:
    """Slowloris: 150 connections that never finish their headers, 20 that never finish their body. All are cut
    off (header/body timeouts at 3 s on this server), and a normal request during the attack is served."""
    server = SERVERS["keyed"]
    slow: list[socket.socket] = []
    for _ in range(150):
        sock = socket.create_connection(("127.0.0.1", server.port), timeout=15)
        sock.sendall(b"POST /chat HTTP/1.1\r\nHost: chaos\r\nX-Slow: ")
        slow.append(sock)
    bodies = []
    for _ in range(20):
        sock = socket.create_connection(("127.0.0.1", server.port), timeout=15)
        sock.sendall(_head("/chat", length=1000, key="k-alice").replace("\n", "\r\n").encode() + b"\r\n{")
        bodies.append(sock)
    during = httpx.get(f"{server.url}/health", timeout=10).status_code
    time.sleep(4.5)
    closed = 0
    for sock in slow:
        with contextlib.suppress(OSError):
            sock.settimeout(5)
            closed += sock.recv(1024) == b""
        sock.close()
    timed_out = 0
    for sock in bodies:
        with contextlib.suppress(OSError):
            sock.settimeout(5)
            timed_out += b" 408 " in sock.recv(4096)
        sock.close()
    return _result(
        "slowloris headers and bodies are cut off",
        [
            (during == 200, f"a request during the attack: {during}"),
            (closed == len(slow), f"{closed}/{len(slow)} header-slow connections closed"),
            (timed_out == len(bodies), f"{timed_out}/{len(bodies)} body-slow requests got 408"),
        ],
    )


def concurrent_clients(workdir: Path) -> dict:
    """100 concurrent clients asking (quote mode), listing and opening documents: every request answered, no 5xx."""
    server = SERVERS["keyed"]

    def one(i: int) -> int:
        headers = ALICE if i % 2 else BOB
        with httpx.Client(base_url=server.url, headers=headers, timeout=180) as client:
            if i % 3 == 0:
                return client.get("/api/documents").status_code
            body = {"question": QUESTION, "mode": "quote"}
            return client.post("/api/agent/run", json=body).status_code

    with ThreadPoolExecutor(100) as pool:
        statuses = list(pool.map(one, range(100)))
    ok = sum(s == 200 for s in statuses)
    return _result("100 concurrent clients", [(ok == 100, f"{ok}/100 answered 200; others {sorted(set(statuses))}")])


def cross_owner(workdir: Path) -> dict:
    """Alice uploads a private note; Bob can't list it, open its chunks, delete it, retrieve it or continue Alice's
    session; Alice can."""
    server = SERVERS["keyed"]
    secret = "kestrel-vault-7"
    question = "Which command rotates the journal encryption key in the vault?"
    checks = []
    with httpx.Client(base_url=server.url, timeout=180) as client:
        upload = client.post(
            "/api/documents", headers=ALICE, files=[("files", (SECRET_DOC.name, SECRET_DOC.read_bytes()))]
        )
        checks.append((upload.status_code == 200, f"alice uploads: {upload.status_code}"))
        doc_id = (
            upload.json()["documents"][0]["doc_id"]
            if upload.status_code == 200
            else "00000000-0000-0000-0000-000000000000"
        )
        alice = client.post("/api/agent/run", headers=ALICE, json={"question": question, "mode": "quote"}).json()
        checks.append((secret in alice["answer"], "alice's own answer cites her note"))
        chunk_ids = [c["chunk_id"] for c in alice.get("citations", []) if c["doc_id"] == doc_id]
        bob_docs = client.get("/api/documents", headers=BOB).json()
        checks.append((all(d["doc_id"] != doc_id for d in bob_docs), "bob's list lacks it"))
        for chunk_id in chunk_ids[:2]:
            status = client.get(f"/api/chunks/{chunk_id}", headers=BOB).status_code
            checks.append((status == 404, f"bob opens alice's chunk: {status}"))
        status = client.delete(f"/api/documents/{doc_id}", headers=BOB).status_code
        checks.append((status == 404, f"bob deletes alice's document: {status}"))
        bob = client.post("/api/agent/run", headers=BOB, json={"question": question, "mode": "quote"}).json()
        leaked = secret in json.dumps(bob)
        checks.append((not leaked, "bob's answer holds nothing of alice's note"))
        session = alice.get("session_id")
        follow = client.post(
            "/api/agent/run", headers=BOB, json={"question": "And what did I just ask?", "session_id": session}
        ).json()
        checks.append((secret not in json.dumps(follow), "bob on alice's session id sees an empty conversation"))
        unauth = client.get("/api/documents").status_code
        checks.append((unauth == 401, f"no key: {unauth}"))
    return _result("cross-owner access", checks)


def aborted_streams(workdir: Path) -> dict:
    """60 SSE streams aborted at random points (some after reading nothing, some mid-stream, some after the client
    stopped reading): the server stays up, logs no error, and its RSS does not creep."""
    server = SERVERS["keyed"]
    before = server.rss_mb
    rnd = random.Random(7)
    body = json.dumps({"question": QUESTION, "mode": "quote", "returnTrace": True}).encode()
    for _ in range(60):
        sock = socket.socket()
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 2048)
        sock.connect(("127.0.0.1", server.port))
        head = _head("/api/agent/stream", length=len(body), key="k-alice").replace("\n", "\r\n").encode()
        sock.sendall(head + b"\r\n" + body)
        if rnd.random() < 0.5:
            with contextlib.suppress(OSError):
                sock.settimeout(2)
                sock.recv(rnd.choice([1, 200, 4000]))
        time.sleep(rnd.random() * 0.4)
        sock.close()
    time.sleep(2)
    alive = httpx.get(f"{server.url}/health", timeout=10).status_code
    after = server.rss_mb
    problems = server.log_problems()
    return _result(
        "aborted SSE streams",
        [
            (alive == 200, f"server answers afterwards: {alive}"),
            (not problems, f"{len(problems)} ERROR/traceback lines in the server log"),
            (after - before < 100, f"server RSS {before} → {after} MB"),
        ],
    )


def ask_only_key(workdir: Path) -> dict:
    """A key in `ask_only_keys` (the widget's kind) asks and opens citations as its owner, but a 200 MB upload with it
    is 403 from the headers (connection closed, nothing read) and a delete of its owner's document is 403."""
    server = SERVERS["keyed"]
    checks = []
    with httpx.Client(base_url=server.url, timeout=180) as client:
        asked = client.post("/api/agent/run", headers=WIDGET, json={"question": QUESTION, "mode": "quote"})
        checks.append((asked.status_code == 200, f"asks: {asked.status_code}"))
        citations = asked.json().get("citations", []) if asked.status_code == 200 else []
        if citations:
            opened = client.get(f"/api/chunks/{citations[0]['chunk_id']}", headers=WIDGET).status_code
            checks.append((opened == 200, f"opens a citation: {opened}"))
        own = [d for d in client.get("/api/documents", headers=ALICE).json() if d["owner"] == "alice"]
        doc_id = own[0]["doc_id"] if own else "00000000-0000-4000-8000-000000000000"
        deleted = client.delete(f"/api/documents/{doc_id}", headers=WIDGET).status_code
        checks.append((deleted == 403, f"deletes its owner's document: {deleted}"))
        analytics = client.get("/api/analytics", headers=WIDGET).status_code
        checks.append((analytics == 403, f"analytics: {analytics}"))
    before = server.rss_mb
    upload = _head("/api/documents", length=200 * MB, key="k-widget", kind="multipart/form-data; boundary=x")
    status, closed = _raw(server.url, upload, b"--x\r\n", send_all=200 * MB)
    checks.append((status == 403 and closed, f"200 MB upload: {status}, closed={closed}"))
    after = server.rss_mb
    checks.append((after - before < 50, f"server RSS {before} → {after} MB"))
    return _result("ask-only key: asks, never writes", checks)


def wrong_methods(workdir: Path) -> dict:
    """OPTIONS (and other methods a route does not take) on API paths: 405 with the route's own Allow, not the web
    page's `GET, HEAD`; decided before authentication."""
    server = SERVERS["keyed"]
    cases = [
        ("OPTIONS", "/chat", "POST"),
        ("OPTIONS", "/api/agent/run", "POST"),
        ("OPTIONS", "/api/documents", "GET, POST"),
        ("PUT", "/api/documents", "GET, POST"),
        ("PATCH", "/api/documents/0b9e3a52-7d1c-5f4e-9a6b-2c8d1e0f3a47", "DELETE"),
    ]
    checks = []
    with httpx.Client(base_url=server.url, timeout=30) as client:
        for method, path, allow in cases:
            response = client.request(method, path)
            got = response.headers.get("allow")
            checks.append(
                (response.status_code == 405 and got == allow, f"{method} {path}: {response.status_code} {got}")
            )
    return _result("wrong methods → 405 with Allow", checks)


def validation_errors(workdir: Path) -> dict:
    """Every 422 has the schema's shape: `detail` is an array of {loc, msg, type}, whoever found the problem (the
    request schema, the agent's own question limit, the feedback route)."""
    server = SERVERS["keyed"]
    cases = [
        ("/api/agent/run", {}),
        ("/api/agent/run", {"question": "ok", "mode": "sideways"}),
        ("/api/agent/run", {"question": "why " * 1000}),  # within the schema, over agent.max_question_chars
        ("/api/agent/stream", {"question": "ok", "top_k": "many"}),
        ("/chat", {"message": 7, "history": "no"}),
        ("/api/feedback", {"answer_id": "x", "rating": "meh"}),
    ]
    checks = []
    with httpx.Client(base_url=server.url, headers=ALICE, timeout=60) as client:
        for path, body in cases:
            response = client.post(path, json=body)
            detail = response.json().get("detail") if response.status_code == 422 else None
            shaped = isinstance(detail, list) and all({"loc", "msg", "type"} <= set(d) for d in detail)
            checks.append((shaped, f"{path} {json.dumps(body)[:30]}: {response.status_code} {type(detail).__name__}"))
    return _result("422 detail is an array", checks)


def stream_discard(workdir: Path) -> dict:
    """A client following docs/server.md's SSE rule literally ends with exactly the answer, on every path that
    replaces streamed text: a provider's reply cut off mid-stream and retried, text written beside a lookup, and a
    draft the validator refuses (forced synthesis, with no reprompts allowed). Agent mode, a real
    OpenAI-compatible server on loopback."""
    invented = "Run `orbitron pool --pin 99` to pin the pool [1]."  # a command no source holds: never stands
    plan = Fault(hang_s=0.01)  # the planner's call: answered normally
    lookup = Reply(text="Let me look that up first.", tool_calls=[{"name": "search_docs", "args": {"query": "pool"}}])
    cases = [
        ("reply cut off, retried", [plan, Fault(truncate=True)]),
        ("text beside a lookup", [plan, lookup]),
        ("draft refused, forced synthesis", [plan, Reply(text=invented)]),
    ]
    checks = []
    with FakeOpenAI() as fake:
        env = _vendor_env(fake, CITEWISE_AGENT__MAX_REPROMPTS="0")
        server = Server(workdir / "home", workdir / "vendor.log", **env)
        try:
            for label, script in cases:
                fake.script(*script)
                shown, answer, names = literal_client(server.url, {"question": QUESTION, "mode": "agent"})
                expected = "" if answer.get("status") == "error" or answer.get("cached") else answer.get("answer")
                ok = "discard" in names and shown == expected and answer.get("status") in ("success", "refused")
                checks.append(
                    (ok, f"{label}: {answer.get('exit_reason')}, shown {'=' if shown == expected else '≠'} answer")
                )
        finally:
            server.stop()
        problems = server.log_problems()
    checks.append((not problems, f"{len(problems)} ERROR/traceback lines in its log"))
    return _result("a literal SSE client ends with the answer", checks)


def forged_addresses(workdir: Path) -> dict:
    """X-Forwarded-For from an untrusted peer is ignored: 30 requests with 30 forged addresses against a 10/min
    limit get at most 10 through; and failed keys are limited per address (10/min) on the keyed server, the right
    key included once they are used up (a 200 among the 429s would tell the guesser which key is right). Runs last
    of the keyed server's probes: afterwards this address is held back on it for a minute."""
    limited = SERVERS["limited"]
    with httpx.Client(base_url=limited.url, timeout=30) as client:
        codes = [
            client.get("/api/documents", headers={"X-Forwarded-For": f"203.0.113.{i}"}).status_code for i in range(30)
        ]
    passed = sum(c == 200 for c in codes)
    with httpx.Client(base_url=SERVERS["keyed"].url, timeout=30) as client:
        guesses = [client.get("/api/documents", headers={"X-API-Key": f"guess-{i}"}).status_code for i in range(30)]
        right = client.get("/api/documents", headers={"X-API-Key": "k-alice"}).status_code
    return _result(
        "X-Forwarded-For spoofing and key guessing",
        [
            (passed <= 10, f"{passed}/30 forged-address requests passed a 10/min limit"),
            (
                guesses.count(401) <= 10 and 429 in guesses,
                f"key guesses: {guesses.count(401)}×401, {guesses.count(429)}×429",
            ),
            (right == 429, f"the right key after the guesses: {right}"),
        ],
    )


# -- the CLI against a misbehaving provider ---------------------------------------------------------------------
def _vendor_env(fake: FakeOpenAI, **extra: str) -> dict[str, str]:
    return {
        "CITEWISE_LLM": "openai:gpt-chaos",
        "CITEWISE_LLM_BASE_URL": fake.url,
        "CITEWISE_LLM_API_KEY": "sk-chaos",
        "CITEWISE_GENERATION__CACHE": "false",
        "CITEWISE_GENERATION__LLM_RETRY_WAIT_S": "0.2",
        "CITEWISE_GENERATION__CHAT_TIMEOUT_S": "2",
        **extra,
    }


def provider_faults(workdir: Path) -> dict:
    """`citewise ask --json` in agent mode against a fake OpenAI-compatible server that answers 429 with
    Retry-After, 500s, hangs, garbage JSON and truncated streams: each ends with the right exit reason, and the
    Retry-After is waited for."""
    home = workdir / "home"
    _cli("ingest", str(CORPUS), home=home, timeout=600)
    plan = Fault(hang_s=0.01)  # the planner's call: answered normally
    cases = [
        ("429 + Retry-After: 2, then OK", [plan, Fault(status=429, headers={"Retry-After": "2"})], "COMPLETED", False),
        ("500 every time", [plan, *[Fault(status=500)] * 3], "LLM_ERROR", False),
        ("429 every time", [plan, *[Fault(status=429)] * 3], "RATE_LIMITED", False),
        ("hangs past the timeout", [plan, *[Fault(hang_s=4)] * 3], "LLM_ERROR", False),
        ("garbage JSON", [plan, *[Fault(garbage=True)] * 3], "LLM_ERROR", False),
        ("truncated stream, then OK", [plan, Fault(truncate=True)], "COMPLETED", True),
    ]
    checks = []
    for label, script, expected, stream in cases:
        with FakeOpenAI() as fake:
            fake.script(*script)
            args = ["ask", QUESTION, "--json", "--mode", "agent", *(["--trace"] if stream else [])]
            done = _cli(*args, home=home, timeout=120, **_vendor_env(fake))
            try:
                answer = json.loads(done.stdout.strip().splitlines()[-1])
                reason = answer["exit_reason"]
            except (ValueError, IndexError, KeyError):
                reason = f"no answer (exit {done.returncode}): {done.stderr[-200:]}"
            ok = reason == expected and "Traceback" not in done.stderr
            if "Retry-After" in label:
                gap = fake.requests[2].at - fake.requests[1].at if len(fake.requests) > 2 else 0.0
                ok = ok and gap >= 1.9
                label += f" (waited {gap:.1f} s)"
            checks.append((ok, f"{label}: {reason}"))
    return _result("provider faults → exit reasons", checks)


def sync_questions(workdir: Path) -> dict:
    """`citewise chat` with an OpenAI-compatible model: three questions in a row all answered (each used to run on a
    new event loop, and the vendor's cached client broke from the second question on)."""
    home = workdir / "home"
    _cli("ingest", str(CORPUS), home=home, timeout=600)
    with FakeOpenAI() as fake:
        done = _cli("chat", home=home, stdin=f"{QUESTION}\n" * 3 + "exit\n", timeout=240, **_vendor_env(fake))
    answered = done.stdout.count("Sources")
    return _result(
        "citewise chat, 3 questions, vendor model",
        [
            (answered == 3, f"{answered}/3 answered"),
            ("Event loop is closed" not in done.stderr + done.stdout, "no closed-loop errors"),
            ("unregistered type" not in done.stderr, "no LangGraph deserialization warnings"),
        ],
    )


def tool_budget(workdir: Path) -> dict:
    """A model that keeps looking things up past agent.max_tool_calls and then writes nothing: the run ends with
    MAX_TOOL_CALLS_REACHED and status success or refused, answered from what the lookups found (not `error`)."""
    home = workdir / "home"
    _cli("ingest", str(CORPUS), home=home, timeout=600)
    plan = Fault(hang_s=0.01)
    searches = [
        Reply(tool_calls=[{"name": "search_docs", "args": {"query": f"worker pool threads {i}"}}]) for i in range(4)
    ]
    checks = []
    for label, after in (
        ("then two empty replies", [Reply(), Reply()]),
        (
            "then one more lookup and nothing",
            [Reply(tool_calls=[{"name": "search_docs", "args": {"query": "more"}}]), Reply()],
        ),
    ):
        with FakeOpenAI() as fake:
            fake.script(plan, *searches, *after)
            env = _vendor_env(fake, CITEWISE_AGENT__MAX_TURNS="10")
            done = _cli("ask", QUESTION, "--json", "--mode", "agent", home=home, timeout=120, **env)
        try:
            answer = json.loads(done.stdout.strip().splitlines()[-1])
        except (ValueError, IndexError):
            answer = {"exit_reason": f"no answer (exit {done.returncode}): {done.stderr[-200:]}"}
        ok = answer.get("exit_reason") == "MAX_TOOL_CALLS_REACHED" and answer.get("status") in ("success", "refused")
        checks.append(
            (ok and "Traceback" not in done.stderr, f"{label}: {answer.get('exit_reason')}, {answer.get('status')}")
        )
    return _result("lookup budget spent → success or refused", checks)


def start_up_errors(workdir: Path) -> dict:
    """Configuration a process can't run with stops it at once with exit 2 and a message, never a traceback: an
    `openai:` fallback without OPENAI_API_KEY (ask, agent mode), and `citewise serve` with an invalid owner id in
    CITEWISE_API_KEYS or an ask-only key that is not a key (the message names the setting, never the key)."""
    home = workdir / "home"
    env = {k: v for k, v in _env(home).items() if k != "OPENAI_API_KEY"}
    fallback = {
        "CITEWISE_LLM": "openai:gpt-chaos",
        "CITEWISE_LLM_API_KEY": "sk-chaos",
        "CITEWISE_LLM_BASE_URL": "http://127.0.0.1:9/v1",
        "CITEWISE_LLM_FALLBACKS": "openai:gpt-other",
    }
    done = subprocess.run(
        [sys.executable, "-m", "citewise.cli", "ask", QUESTION, "--mode", "agent", "--json"],
        env={**env, **fallback},
        capture_output=True,
        text=True,
        timeout=120,
    )
    said = " ".join(done.stderr.split())
    checks = [
        (
            done.returncode == 2 and "OPENAI_API_KEY" in said and "Traceback" not in said,
            f"openai fallback without a key: exit {done.returncode}",
        )
    ]
    bad = [
        ("invalid owner id", {"CITEWISE_API_KEYS": json.dumps({"k-secret-1": "alice smith"})}, "invalid owner id"),
        (
            "ask-only key not a key",
            {"CITEWISE_API_KEYS": json.dumps({"k-secret-1": "alice"}), "CITEWISE_ASK_ONLY_KEYS": '["k-secret-2"]'},
            "ask_only_keys",
        ),
    ]
    for label, extra, expected in bad:
        done = _cli("serve", "--port", str(_free_port()), home=home, timeout=60, **extra)
        said = " ".join(done.stderr.split())
        ok = done.returncode == 2 and expected in said and "k-secret" not in said and "Traceback" not in said
        checks.append((ok, f"serve with {label}: exit {done.returncode}"))
    return _result("start-up configuration errors → exit 2", checks)


def server_logs(workdir: Path) -> dict:
    """After every HTTP probe: nothing the servers logged is an ERROR or a traceback."""
    problems = [f"{name}: {line[:120]}" for name, s in SERVERS.items() for line in s.log_problems()]
    return _result("server logs clean", [(not problems, "; ".join(problems[:5]) or "no ERROR lines")])


HTTP_PROBES: list[Probe] = [
    huge_bodies_without_key,
    huge_bodies_with_key,
    hostile_json,
    slow_clients,
    concurrent_clients,
    cross_owner,
    aborted_streams,
    ask_only_key,
    wrong_methods,
    validation_errors,
    stream_discard,
    forged_addresses,  # last on the keyed server: it uses up this address's failed authentications there
    server_logs,
]
CLI_PROBES: list[Probe] = [provider_faults, sync_questions, tool_budget, start_up_errors]


def _ingest_probes() -> list[Probe]:
    """The write-side probes (bench/chaos_ingest.py). If they can't be imported, one probe that did not hold takes
    their place: a run that silently left out the write side would still report every probe held."""
    try:
        import chaos_ingest
    except Exception as exc:
        reason = f"{type(exc).__name__}: {exc}"

        def chaos_ingest_probes(workdir: Path) -> dict:
            return {"name": "write-side probes (bench/chaos_ingest.py)", "tried": 1, "held": 0, "detail": reason}

        return [chaos_ingest_probes]
    return list(chaos_ingest.PROBES)


def _run(probe: Probe, workdir: Path) -> dict:
    started = time.monotonic()
    try:
        result = probe(workdir)
    except Exception as exc:  # a probe that breaks is a probe that did not hold
        result = {"name": probe.__name__, "tried": 1, "held": 0, "detail": f"{type(exc).__name__}: {exc}"}
    result["seconds"] = round(time.monotonic() - started, 1)
    print(f"{result['held']:>3}/{result['tried']:<3} {result['seconds']:>6.1f}s  {result['name']}", flush=True)
    return result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--only", nargs="*", help="probe function names to run")
    args = parser.parse_args()

    def wanted(probes: list[Probe]) -> list[Probe]:
        return [p for p in probes if not args.only or p.__name__ in args.only]

    started = time.monotonic()
    results: list[dict] = []
    with tempfile.TemporaryDirectory(prefix="citewise-chaos-") as tmp:
        workdir = Path(tmp)
        if wanted(HTTP_PROBES):
            with servers(workdir / "http"):
                results += [_run(p, workdir / "http") for p in wanted(HTTP_PROBES)]
        for probe in wanted(CLI_PROBES) + wanted(_ingest_probes()):
            with tempfile.TemporaryDirectory(dir=tmp, prefix=f"{probe.__name__}-") as own:
                results.append(_run(probe, Path(own)))
    tried, held = sum(r["tried"] for r in results), sum(r["held"] for r in results)
    print(f"\n{'probe':<50} {'tried':>5} {'held':>5}")
    for r in results:
        print(f"{r['name']:<50} {r['tried']:>5} {r['held']:>5}")
    print(f"{'total':<50} {tried:>5} {held:>5}   ({time.monotonic() - started:.0f} s)")
    payload = {"tried": tried, "held": held, "seconds": round(time.monotonic() - started, 1), "probes": results}
    if not args.only:
        write_result("chaos", payload)
    sys.exit(0 if tried == held else 1)


if __name__ == "__main__":
    main()
