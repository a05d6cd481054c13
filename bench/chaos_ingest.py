"""Fault and abuse probes for the write side: the real `citewise` CLI (and server, where uploads are the point) in
subprocesses, each probe bounded in time, each reporting how many things it tried and how many held.

    .venv/bin/python bench/chaos_ingest.py [--only NAME ...]

`PROBES` is the list bench/chaos.py runs beside its HTTP probes: each is `probe(workdir) -> {"name", "tried",
"held", "detail"}` and leaves nothing running. Run alone, this prints a table and writes
bench/results/chaos_ingest.json.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from pathlib import Path

import httpx

from _common import cli_env, write_result

Probe = Callable[[Path], dict]


def _cli(*args: str, home: Path, timeout: float = 120, **env: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "citewise.cli", *args],
        env=cli_env(home, **env),
        capture_output=True,
        text=True,
        timeout=timeout,
    )


def _clean(result: subprocess.CompletedProcess) -> bool:
    return "Traceback" not in result.stderr and "Traceback" not in result.stdout


def _docs(root: Path, count: int, word: str = "plover") -> Path:
    root.mkdir(parents=True, exist_ok=True)
    for i in range(count):
        (root / f"page{i:03d}.md").write_text(f"# Page {i}\n\nPage {i} sets the {word}{i} limit to {i * 7}.\n")
    return root


def _doctor_clean(home: Path) -> tuple[bool, str]:
    result = _cli("doctor", "--json", home=home)
    if result.returncode != 0:
        return False, f"doctor exit {result.returncode}: {result.stdout[-300:]} {result.stderr[-300:]}"
    report = json.loads(result.stdout)
    return True, f"{report['documents']} documents, {report['chunk_rows']} rows"


def _result(name: str, checks: list[tuple[bool, str]]) -> dict:
    failed = [detail for ok, detail in checks if not ok]
    return {
        "name": name,
        "tried": len(checks),
        "held": len(checks) - len(failed),
        "detail": "; ".join(failed) if failed else "; ".join(detail for _, detail in checks)[:300],
    }


# -- probes ----------------------------------------------------------------------------------------------------
def concurrent_ingests(workdir: Path) -> dict:
    """Two `citewise ingest` runs of the same 300 files into one home, the second started while the first holds the
    write lock: the second says it waits for the first (by pid), then finds everything indexed; no chunk twice,
    doctor clean."""
    docs = _docs(workdir / "docs", 300)
    home = workdir / "home"

    def ingest() -> subprocess.Popen:
        return subprocess.Popen(
            [sys.executable, "-m", "citewise.cli", "ingest", str(docs), "--json"],
            env=cli_env(home),
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )

    first = ingest()
    deadline = time.monotonic() + 120
    lock = home / "write.lock"
    while first.poll() is None and time.monotonic() < deadline:  # the lock file names its holder once it is held
        if lock.exists() and lock.read_text(errors="replace").split("\n", 1)[0].strip() == str(first.pid):
            break
        time.sleep(0.05)
    held = first.poll() is None
    second = ingest()
    procs = [first, second]
    outputs = [p.communicate(timeout=240) for p in procs]
    checks = [
        (p.returncode == 0 and "Traceback" not in err, f"ingest {i} exit {p.returncode} {err[-200:]}")
        for i, (p, (_, err)) in enumerate(zip(procs, outputs, strict=True))
    ]
    checks.append((held, "the first ingest held the lock when the second started"))
    said = " ".join(outputs[1][1].split())
    waited = "Waiting for another writer" in said and f"(pid {first.pid}:" in said
    checks.append((waited, "the second writer waited for the first" if waited else "the second writer never waited"))
    report = json.loads(outputs[1][0].strip().splitlines()[-1]) if second.returncode == 0 else {}
    checks.append((report.get("unchanged") == 300, f"the second found {report.get('unchanged')} documents unchanged"))
    checks.append(_doctor_clean(home))
    listing = json.loads(_cli("docs", "list", "--json", home=home).stdout or "[]")
    checks.append((len(listing) == 300, f"{len(listing)} registry rows"))
    return _result("two concurrent ingests of 300 files", checks)


def kill_after_commit(workdir: Path) -> dict:
    """kill -9 an ingest once its first batch is committed: a reader opened before sees the new rows at once, and
    the rerun finishes the job."""
    from citewise.index.knowledge_base import KnowledgeBase
    from citewise.index.retriever import Retriever
    from citewise.settings import Settings

    docs = _docs(workdir / "docs", 40)
    home = workdir / "home"
    first = _cli("ingest", str(docs / "page000.md"), "--json", home=home)
    checks = [(first.returncode == 0, f"seed ingest exit {first.returncode}")]
    os.environ.setdefault("CITEWISE_MODELS_DIR", cli_env(home)["CITEWISE_MODELS_DIR"])
    reader_kb = KnowledgeBase(Settings(home=home))
    reader = Retriever(reader_kb)
    before = reader.search("plover39 limit", mode="lexical")
    version = reader_kb.version
    proc = subprocess.Popen(
        [sys.executable, "-m", "citewise.cli", "ingest", str(docs), "--json"],
        env=cli_env(home, CITEWISE_INGEST__COMMIT_EVERY="4", CITEWISE_INGEST__EMBED_BATCH_SIZE="4"),
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    deadline = time.monotonic() + 90
    while proc.poll() is None and time.monotonic() < deadline and reader_kb.version == version:
        time.sleep(0.02)
    killed = proc.poll() is None
    if killed:
        proc.send_signal(signal.SIGKILL)
    proc.wait(30)
    checks.append((killed, "killed mid-ingest" if killed else "ingest ended before the kill"))
    after_version = reader_kb.version
    checks.append((after_version != version, f"reader version {version} -> {after_version}"))
    committed = Retriever(reader_kb).search("page limit", 10, mode="lexical")
    seen = {c.filename for c in committed.chunks}
    checks.append((len(seen) > 1, f"reader sees {len(seen)} files after the kill"))
    checks.append((before.empty or "plover39" not in before.chunks[0].text, "nothing stale cached"))
    rerun = _cli("ingest", str(docs), "--json", home=home)
    checks.append((rerun.returncode == 0, f"rerun exit {rerun.returncode}"))
    checks.append(_doctor_clean(home))
    return _result("kill -9 right after a commit", checks)


def vanishing_files(workdir: Path) -> dict:
    """Files deleted while an ingest runs over them: those fail alone, the run ends cleanly."""
    docs = _docs(workdir / "docs", 300)
    home = workdir / "home"
    stop = threading.Event()
    deleted: list[str] = []

    def delete_some() -> None:
        # The ingest takes the home's write lock after discovering its files and before reading them: deleting
        # then lands between discovery and hashing, or between hashing and parsing.
        deadline = time.monotonic() + 120
        while not (home / "write.lock").exists() and not stop.is_set() and time.monotonic() < deadline:
            time.sleep(0.002)
        for path in sorted(docs.glob("*.md"))[::7]:
            path.unlink()
            deleted.append(path.name)

    proc = subprocess.Popen(
        [sys.executable, "-m", "citewise.cli", "ingest", str(docs), "--json"],
        env=cli_env(home),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    deleter = threading.Thread(target=delete_some)
    deleter.start()
    out, err = proc.communicate(timeout=240)
    stop.set()
    deleter.join()
    checks = [(proc.returncode in (0, 1) and "Traceback" not in err, f"exit {proc.returncode} {err[-200:]}")]
    if proc.returncode in (0, 1):
        report = json.loads(out.strip().splitlines()[-1])
        checks.append((report["indexed"] + report["failed"] == report["seen"], f"{report['failed']} failed alone"))
    checks.append(_doctor_clean(home))
    return _result(f"{len(deleted)} files vanishing during an ingest", checks)


def rich_markup(workdir: Path) -> dict:
    """Rich markup in headings, text and paths is printed as text by every command."""
    docs = workdir / "docs"
    weird = docs / "[" / "y]"
    weird.mkdir(parents=True)
    (docs / "api.md").write_text(
        "# The [bold]API[/bold]\n\n## The [/api/v1] endpoint\n\nThe [/api/v1] endpoint serves skuas.\n"
    )
    (weird / "bad.pdf").write_bytes(b"%PDF-1.4 broken")
    home = workdir / "home"
    ingest = _cli("ingest", str(docs), home=home)
    checks = [
        (ingest.returncode == 1 and _clean(ingest) and "[/y]" in ingest.stderr, f"ingest exit {ingest.returncode}")
    ]
    for args in (["search", "endpoint skuas"], ["ask", "Which endpoint serves skuas?", "--mode", "quote"]):
        result = _cli(*args, home=home)
        checks.append((result.returncode == 0 and _clean(result) and "[/api/v1]" in result.stdout, f"{args[0]} ok"))
    for args in (["docs", "list"], ["docs", "list", "--status", "FAILED"], ["doctor"]):
        result = _cli(*args, home=home)
        checks.append((result.returncode == 0 and _clean(result), f"{' '.join(args)} exit {result.returncode}"))
    return _result("Rich markup in headings and paths", checks)


def terminal_escapes(workdir: Path) -> dict:
    """ANSI escapes and control characters in file names never reach the terminal raw."""
    docs = workdir / "docs"
    docs.mkdir()
    (docs / "evil\x1b[31mred\x1b]0;title\x07.md").write_text("# Evil\n\nA page with a hostile name.\n")
    home = workdir / "home"
    checks = [(_cli("ingest", str(docs), home=home).returncode == 0, "ingested")]
    for args in (["docs", "list"], ["search", "hostile name page"]):
        result = _cli(*args, home=home)
        checks.append((result.returncode == 0 and "\x1b" not in result.stdout + result.stderr, " ".join(args)))
    return _result("escape sequences in file names", checks)


def bad_homes(workdir: Path) -> dict:
    """--home at a file, inside a file, or where nothing can be created: exit 2, a message, no traceback; and a
    missing home is never created by a read-only command."""
    a_file = workdir / "home.txt"
    a_file.write_text("not a folder")
    docs = _docs(workdir / "docs", 1)
    checks = []
    for home in (a_file, a_file / "sub"):
        for args in (["ingest", str(docs)], ["docs", "list"], ["search", "x"], ["doctor", "--repair"], ["serve"]):
            result = _cli(*args, "--home", str(home), home=home, timeout=60)
            checks.append((result.returncode == 2 and _clean(result), f"{args[0]} on {home.name}: {result.returncode}"))
    for args in (["ingest", str(docs)], ["docs", "remove", "x"], ["serve", "--port", str(_free_port())]):
        result = _cli(*args, "--home", "/proc/citewise-chaos", home=Path("/proc/citewise-chaos"), timeout=60)
        checks.append((result.returncode == 2 and _clean(result), f"{args[0]} on /proc: {result.returncode}"))
    missing = workdir / "missing-home"
    for args in (["docs", "list"], ["search", "x"], ["doctor"]):
        result = _cli(*args, "--home", str(missing), home=missing)
        checks.append((result.returncode == 0 and not missing.exists(), f"{args[0]} on a missing home"))
    return _result("bad and missing homes", checks)


def owner_reown(workdir: Path) -> dict:
    """Alice's uploads re-ingested without her owner, or as bob, or through a tree holding the home: refused or
    skipped; her documents stay hers."""
    home = workdir / "docs" / "data"  # a home inside the docs tree
    uploads = home / "uploads" / "alice"
    uploads.mkdir(parents=True)
    (uploads / "secret.md").write_text("# Secret\n\nAlice's vault code is 7731.\n")
    (workdir / "docs" / "guide.md").write_text("# Guide\n\nA public guide.\n")
    checks = [(_cli("ingest", str(uploads), "--owner", "alice", home=home).returncode == 0, "alice's upload ingested")]
    for args in (["ingest", str(home / "uploads")], ["ingest", str(uploads), "--owner", "bob"], ["ingest", str(home)]):
        result = _cli(*args, home=home)
        checks.append((result.returncode == 2 and _clean(result), f"{' '.join(args[1:])[-40:]} refused"))
    tree = _cli("ingest", str(workdir / "docs"), home=home)
    checks.append((tree.returncode == 0 and "Skipped" in tree.stderr, "the home inside a docs tree is skipped"))
    listing = json.loads(_cli("docs", "list", "--json", home=home).stdout)
    owners = {d["filename"]: d["owner"] for d in listing}
    checks.append((owners == {"secret.md": "alice", "guide.md": "public"}, f"owners {owners}"))
    public = _cli("search", "vault code", "--json", home=home)
    checks.append(("7731" not in public.stdout, "public search never sees alice's upload"))
    return _result("re-owning documents", checks)


def wide_encodings(workdir: Path) -> dict:
    """UTF-16 and UTF-32 files, with and without a BOM: decoded, not indexed as NUL garbage."""
    docs = workdir / "docs"
    docs.mkdir()
    encodings = ["utf-16-le", "utf-16-be", "utf-16", "utf-32"]
    for i, encoding in enumerate(encodings):
        (docs / f"wide{i}.md").write_text(
            f"# Wide {i}\n\nThe gannet{i} timeout is {i + 40} seconds.\n", encoding=encoding
        )
    home = workdir / "home"
    ingest = _cli("ingest", str(docs), "--json", home=home)
    checks = [(ingest.returncode == 0, f"ingest exit {ingest.returncode}")]
    for i, encoding in enumerate(encodings):
        result = _cli("search", f"gannet{i} timeout", "--mode", "lexical", "--json", home=home)
        chunks = json.loads(result.stdout.strip().splitlines()[-1])["chunks"] if result.returncode == 0 else []
        ok = bool(chunks) and "\\u0000" not in result.stdout and f"gannet{i} timeout is {i + 40}" in chunks[0]["text"]
        checks.append((ok, encoding))
    return _result("UTF-16/UTF-32 text", checks)


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def _serve(home: Path, port: int, **env: str) -> subprocess.Popen:
    proc = subprocess.Popen(
        [sys.executable, "-m", "citewise.cli", "serve", "--port", str(port), "--log-level", "warning"],
        env=cli_env(home, **env),
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
    )
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        try:
            if httpx.get(f"http://127.0.0.1:{port}/health", timeout=1).status_code == 200:
                return proc
        except httpx.HTTPError:
            time.sleep(0.2)
    proc.kill()
    raise RuntimeError("citewise serve did not start")


def _stop(proc: subprocess.Popen, bound_s: float = 30) -> tuple[bool, float]:
    started = time.monotonic()
    proc.send_signal(signal.SIGINT)
    try:
        proc.wait(bound_s)
        return True, time.monotonic() - started
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()
        return False, time.monotonic() - started


def slash_lookalikes(workdir: Path) -> dict:
    """'evil∕slash.md' (U+2215) and 'evil／slash.md' (U+FF0F): two files, two documents, by the CLI and by upload."""
    docs = workdir / "docs"
    docs.mkdir()
    names = ["evil\u2215slash.md", "evil\uff0fslash.md", "evil_slash.md"]
    for i, name in enumerate(names):
        (docs / name).write_text(f"# Note {i}\n\nNote {i} names the skua{i} flag.\n")
    cli_home = workdir / "cli-home"
    _cli("ingest", str(docs), home=cli_home)
    listed = json.loads(_cli("docs", "list", "--json", home=cli_home).stdout)
    checks = [(len({d["doc_id"] for d in listed}) == 3, f"CLI: {len(listed)} documents")]
    port = _free_port()
    server = _serve(workdir / "server-home", port)
    try:
        for name in names:
            body = (docs / name).read_bytes()
            response = httpx.post(
                f"http://127.0.0.1:{port}/api/documents", files=[("files", (name, body, "text/markdown"))], timeout=120
            )
            checks.append((response.status_code in (200, 202), f"upload {response.status_code}"))
        uploaded = httpx.get(f"http://127.0.0.1:{port}/api/documents", timeout=30).json()
        checks.append((len({d["doc_id"] for d in uploaded}) == 3, f"upload: {len(uploaded)} documents"))
    finally:
        stopped, took = _stop(server)
    checks.append((stopped, f"server stopped in {took:.1f}s"))
    return _result("slash look-alike file names", checks)


def _indexed(url: str, filename: str, timeout_s: float) -> dict | None:
    """The listed document named `filename` once it is INDEXED, or None after `timeout_s`."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        for doc in httpx.get(url, timeout=30).json():
            if doc["filename"] == filename and doc["status"] == "INDEXED":
                return doc
        time.sleep(0.3)
    return None


def big_upload_queue(workdir: Path) -> dict:
    """A big upload holds the write path: a small upload and a delete behind it are answered in bounded time, and
    the server stops on SIGINT without a SIGKILL, leaving the big document PENDING for the next start."""
    from bench_big_document import write_markdown

    big = workdir / "big.md"
    write_markdown(big, 4)
    port = _free_port()
    home = workdir / "home"
    server = _serve(home, port, CITEWISE_SERVER__WRITE_WAIT_S="3", CITEWISE_SERVER__SHUTDOWN_GRACE_S="10")
    url = f"http://127.0.0.1:{port}/api/documents"
    checks = []
    try:
        first = httpx.post(
            url, files=[("files", ("small.md", b"# Small\n\nA small note.\n", "text/markdown"))], timeout=60
        )
        # The first write of a fresh home loads the embedding model: on a busy machine it can outlast write_wait_s
        # (202). Either way it must land before the big upload starts, so that deleting it is a write behind the big.
        landed = _indexed(url, "small.md", 60) if first.status_code in (200, 202) else None
        doc_id = landed["doc_id"] if landed else None
        checks.append((landed is not None, f"first small upload {first.status_code}, indexed={landed is not None}"))
        uploader = threading.Thread(
            target=lambda: httpx.post(
                url, files=[("files", ("big.md", big.read_bytes(), "text/markdown"))], timeout=60
            ),
            daemon=True,
        )
        uploader.start()
        time.sleep(1.0)
        started = time.monotonic()
        second = httpx.post(
            url, files=[("files", ("late.md", b"# Late\n\nA late note.\n", "text/markdown"))], timeout=60
        )
        took = time.monotonic() - started
        checks.append(
            (
                second.status_code in (200, 202) and took < 30,
                f"small upload behind big: {second.status_code} in {took:.1f}s",
            )
        )
        started = time.monotonic()
        removal = httpx.delete(f"{url}/{doc_id or '00000000-0000-4000-8000-000000000000'}", timeout=60)
        took = time.monotonic() - started
        checks.append(
            (
                doc_id is not None and removal.status_code in (200, 202) and took < 30,
                f"delete behind big: {removal.status_code} in {took:.1f}s",
            )
        )
        uploader.join(60)
    finally:
        stopped, took = _stop(server, bound_s=40)
    checks.append((stopped, f"SIGINT stopped the server in {took:.1f}s"))
    listing = json.loads(_cli("docs", "list", "--json", home=home).stdout or "[]")
    statuses = {d["filename"]: d["status"] for d in listing}
    checks.append((statuses.get("big.md") in (None, "PENDING", "INDEXED"), f"big.md {statuses.get('big.md')}"))
    checks.append(_doctor_clean(home))
    return _result("a big upload holding the write path", checks)


PROBES: list[Probe] = [
    concurrent_ingests,
    kill_after_commit,
    vanishing_files,
    rich_markup,
    terminal_escapes,
    bad_homes,
    owner_reown,
    wide_encodings,
    slash_lookalikes,
    big_upload_queue,
]


def run(probes: list[Probe]) -> list[dict]:
    results = []
    for probe in probes:
        started = time.monotonic()
        with tempfile.TemporaryDirectory(prefix=f"chaos-{probe.__name__}-") as tmp:
            try:
                result = probe(Path(tmp))
            except Exception as exc:  # a probe that breaks is a probe that did not hold
                result = {"name": probe.__name__, "tried": 1, "held": 0, "detail": f"{type(exc).__name__}: {exc}"}
        result["seconds"] = round(time.monotonic() - started, 1)
        results.append(result)
        print(f"{result['held']:>3}/{result['tried']:<3} {result['seconds']:>6.1f}s  {result['name']}", flush=True)
    return results


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--only", nargs="*", help="probe function names to run")
    args = parser.parse_args()
    probes = [p for p in PROBES if not args.only or p.__name__ in args.only]
    results = run(probes)
    print()
    print(f"{'probe':<45} {'tried':>5} {'held':>5}")
    for r in results:
        print(f"{r['name']:<45} {r['tried']:>5} {r['held']:>5}")
    tried, held = sum(r["tried"] for r in results), sum(r["held"] for r in results)
    print(f"{'total':<45} {tried:>5} {held:>5}")
    if not args.only:  # a partial run must not replace the whole run's results
        write_result("chaos_ingest", {"tried": tried, "held": held, "probes": results})
    sys.exit(0 if tried == held else 1)


if __name__ == "__main__":
    main()
