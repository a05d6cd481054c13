"""Load on the streaming endpoint: many concurrent SSE clients against one `citewise serve`, quote mode, loopback.

    .venv/bin/python bench/bench_load.py [--clients 50] [--duration 60] [--per-client 4]

Ingests docs/ into a temp home, starts `citewise serve` as a separate process (so the clients don't share its GIL),
waits for /ready, sends one warm-up question (the agent and the embedding model load on first use), asks
`--baseline` questions from one client alone (the unloaded figure), then starts `--clients` concurrent clients at
once. Each asks up to `--per-client` questions one after another on
`POST /api/agent/stream`, until `--duration` seconds have passed; a request still running then is cut off and counted
as a timeout, so the run is bounded. Every question is a distinct string (documentation questions with varied
phrasing), so the retrieval cache does not answer them.

Per request: time to the first `token` event (TTFT), time to the terminal event (total), the exit reason. In quote
mode the answer is composed before any of it is sent (the server then streams it word by word), so TTFT is close to
the total; with a language model the first token comes while the model writes. Errors are
non-200 replies, `error` events, streams that end without `complete`, and timeouts. The rate limit is switched off
for the run (it is per client address, and every client here is 127.0.0.1).
Writes bench/results/load.json and prints a markdown table.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import httpx
from httpx_sse import aconnect_sse

from _common import ROOT, wait_for_quiet, write_result

BASE_QUESTIONS = [
    "How do I remove deleted files from the index?",
    "Which file types can Citewise ingest?",
    "Where does Citewise keep its data?",
    "How do I switch to a different embedding model?",
    "What does the minimum score setting do?",
    "How are documents split into chunks?",
    "How do I use OpenAI embeddings?",
    "What retrieval modes are there?",
    "How do I evaluate retrieval quality?",
    "How do I keep the index in a fixed place?",
    "What metadata is stored with each chunk?",
    "How do I list the documents in the index?",
]
PHRASINGS = [
    "{q}",
    "Quick question: {q}",
    "{q} Please answer from the docs.",
    "In Citewise, {l}",
    "According to the user guide, {l}",
    "I'm new here. {q}",
]


def questions(count: int) -> list[str]:
    out: list[str] = []
    for i in range(count):
        q = BASE_QUESTIONS[i % len(BASE_QUESTIONS)]
        phrasing = PHRASINGS[(i // len(BASE_QUESTIONS)) % len(PHRASINGS)]
        text = phrasing.format(q=q, l=q[0].lower() + q[1:])
        rounds = i // (len(BASE_QUESTIONS) * len(PHRASINGS))
        out.append(text if rounds == 0 else f"{text} (#{rounds + 1})")
    return out


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def percentile(values: list[float], q: float) -> float | None:
    if not values:
        return None
    if len(values) == 1:
        return round(values[0], 1)
    return round(statistics.quantiles(values, n=100, method="inclusive")[int(q) - 1], 1)


def server_env(home: Path) -> dict[str, str]:
    env = dict(os.environ)
    env.update(
        {
            "CITEWISE_HOME": str(home),
            "CITEWISE_LLM": "extractive",
            "CITEWISE_SERVER__RATE_LIMIT_PER_MINUTE": "0",
            "CITEWISE_SERVER__LOG_QUESTIONS": "false",
            "HF_HUB_OFFLINE": "1",
            "TRANSFORMERS_OFFLINE": "1",
        }
    )
    # Reuse one exported ONNX model across runs instead of exporting it into every temp home.
    env.setdefault("CITEWISE_MODELS_DIR", str(Path(tempfile.gettempdir()) / "citewise-bench-models"))
    return env


def citewise_bin() -> str:
    candidate = Path(sys.executable).with_name("citewise")
    return str(candidate) if candidate.exists() else "citewise"


async def wait_ready(url: str, proc: subprocess.Popen, timeout_s: float = 180) -> None:
    deadline = time.monotonic() + timeout_s
    async with httpx.AsyncClient(timeout=5) as client:
        while time.monotonic() < deadline:
            if proc.poll() is not None:
                raise RuntimeError(f"citewise serve exited with {proc.returncode}")
            try:
                if (await client.get(f"{url}/ready")).status_code == 200:
                    return
            except httpx.TransportError:
                pass
            await asyncio.sleep(0.5)
    raise RuntimeError("citewise serve did not become ready")


async def one_request(client: httpx.AsyncClient, url: str, question: str) -> dict:
    started = time.perf_counter()
    record: dict = {"question": question, "ttft_ms": None, "total_ms": None, "tokens": 0, "outcome": None}
    try:
        async with aconnect_sse(
            client, "POST", f"{url}/api/agent/stream", json={"question": question, "mode": "quote"}
        ) as source:
            if source.response.status_code != 200:
                await source.response.aread()
                record["outcome"] = f"http_{source.response.status_code}"
                return record
            async for event in source.aiter_sse():
                if event.event == "token":
                    if record["ttft_ms"] is None:
                        record["ttft_ms"] = (time.perf_counter() - started) * 1000
                    record["tokens"] += 1
                elif event.event == "complete":
                    answer = event.json()
                    record["total_ms"] = (time.perf_counter() - started) * 1000
                    record["outcome"] = "complete"
                    record["exit_reason"] = answer.get("exit_reason")
                    record["status"] = answer.get("status")
                    record["cached"] = bool(answer.get("cached"))
                    return record
                elif event.event == "error":
                    record["total_ms"] = (time.perf_counter() - started) * 1000
                    record["outcome"] = "error_event"
                    record["error"] = event.data[:300]
                    return record
        record["outcome"] = "no_terminal_event"
    except httpx.TimeoutException:
        record["outcome"] = "timeout"
    except httpx.HTTPError as exc:
        record["outcome"] = f"transport_{type(exc).__name__}"
    return record


async def client_loop(client: httpx.AsyncClient, url: str, mine: list[str], deadline: float) -> list[dict]:
    done: list[dict] = []
    for question in mine:
        remaining = deadline - time.monotonic()
        if remaining <= 0:
            break
        try:
            done.append(await asyncio.wait_for(one_request(client, url, question), timeout=remaining))
        except TimeoutError:
            done.append({"question": question, "ttft_ms": None, "total_ms": None, "tokens": 0, "outcome": "timeout"})
            break
    return done


async def run_load(
    url: str, clients: int, per_client: int, duration_s: float, baseline: int
) -> tuple[list[dict], float, list[dict]]:
    qs = questions(clients * per_client + baseline)
    alone, qs = qs[:baseline], qs[baseline:]
    limits = httpx.Limits(max_connections=clients + 5, max_keepalive_connections=clients + 5)
    timeout = httpx.Timeout(connect=10, read=duration_s, write=10, pool=duration_s)
    async with httpx.AsyncClient(limits=limits, timeout=timeout) as client:
        warm = await one_request(client, url, "How do I install Citewise?")
        if warm["outcome"] != "complete":
            raise RuntimeError(f"warm-up question failed: {warm}")
        # One client alone first: what a single user waits on this machine, for comparison with the loaded figures.
        single = [await one_request(client, url, q) for q in alone]
        started = time.monotonic()
        deadline = started + duration_s
        per = [qs[i * per_client : (i + 1) * per_client] for i in range(clients)]
        results = await asyncio.gather(*(client_loop(client, url, mine, deadline) for mine in per))
        wall = time.monotonic() - started
    return [r for rs in results for r in rs], wall, single


def latency(records: list[dict]) -> dict:
    ok = [r for r in records if r["outcome"] == "complete"]
    ttft = [r["ttft_ms"] for r in ok if r["ttft_ms"] is not None]
    total = [r["total_ms"] for r in ok]
    return {
        "requests": len(records),
        "completed": len(ok),
        "ttft_ms": {"p50": percentile(ttft, 50), "p95": percentile(ttft, 95)},
        "total_ms": {"p50": percentile(total, 50), "p95": percentile(total, 95)},
    }


def summarise(records: list[dict], wall_s: float, args: argparse.Namespace) -> dict:
    ok = [r for r in records if r["outcome"] == "complete"]
    ttft = [r["ttft_ms"] for r in ok if r["ttft_ms"] is not None]
    total = [r["total_ms"] for r in ok]
    errors: dict[str, int] = {}
    for r in records:
        if r["outcome"] != "complete":
            errors[r["outcome"]] = errors.get(r["outcome"], 0) + 1
    exit_reasons: dict[str, int] = {}
    for r in ok:
        key = f"{r.get('exit_reason')}/{r.get('status')}"
        exit_reasons[key] = exit_reasons.get(key, 0) + 1
    return {
        "clients": args.clients,
        "per_client": args.per_client,
        "duration_limit_s": args.duration,
        "mode": "quote",
        "requests": len(records),
        "completed": len(ok),
        "errors": sum(errors.values()),
        "errors_by_kind": errors,
        "exit_reasons": exit_reasons,
        "without_tokens": sum(1 for r in ok if r["ttft_ms"] is None),
        "cached": sum(1 for r in ok if r.get("cached")),
        "wall_s": round(wall_s, 2),
        "throughput_rps": round(len(ok) / wall_s, 2) if wall_s else None,
        "ttft_ms": {
            "p50": percentile(ttft, 50),
            "p95": percentile(ttft, 95),
            "max": round(max(ttft), 1) if ttft else None,
        },
        "total_ms": {
            "p50": percentile(total, 50),
            "p95": percentile(total, 95),
            "max": round(max(total), 1) if total else None,
        },
        "error_samples": [r for r in records if r["outcome"] != "complete"][:5],
    }


def table(s: dict) -> str:
    def ms(v: float | None) -> str:
        return "—" if v is None else f"{v:,.0f} ms"

    one = s["single_client"]
    return "\n".join(
        [
            "| Clients | Requests | Errors | TTFT p50 | TTFT p95 | Total p50 | Total p95 | Throughput |",
            "|---:|---:|---:|---:|---:|---:|---:|---:|",
            f"| 1 (alone) | {one['requests']} | {one['requests'] - one['completed']} | {ms(one['ttft_ms']['p50'])} | "
            f"{ms(one['ttft_ms']['p95'])} | {ms(one['total_ms']['p50'])} | {ms(one['total_ms']['p95'])} | — |",
            f"| {s['clients']} | {s['requests']} | {s['errors']} | {ms(s['ttft_ms']['p50'])} | "
            f"{ms(s['ttft_ms']['p95'])} | {ms(s['total_ms']['p50'])} | {ms(s['total_ms']['p95'])} | "
            f"{s['throughput_rps']} req/s |",
        ]
    )


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--clients", type=int, default=50)
    parser.add_argument("--per-client", type=int, default=4, help="Questions each client asks, one after another.")
    parser.add_argument("--duration", type=float, default=60.0, help="Hard limit on the measured phase, seconds.")
    parser.add_argument("--baseline", type=int, default=10, help="Questions asked by one client alone first.")
    parser.add_argument("--docs", type=Path, default=ROOT / "docs")
    parser.add_argument("--quiet-timeout", type=float, default=120.0, help="Wait up to this for a quiet machine.")
    args = parser.parse_args()

    with tempfile.TemporaryDirectory(prefix="citewise-load-") as tmp:
        home = Path(tmp) / "home"
        env = server_env(home)
        subprocess.run(
            [citewise_bin(), "ingest", str(args.docs), "--home", str(home)],
            env=env,
            check=True,
            stdout=subprocess.DEVNULL,
        )
        port = free_port()
        url = f"http://127.0.0.1:{port}"
        proc = subprocess.Popen(
            [citewise_bin(), "serve", "--home", str(home), "--port", str(port), "--log-level", "warning"],
            env=env,
            stdout=subprocess.DEVNULL,
        )
        try:
            asyncio.run(wait_ready(url, proc))
            load_before = wait_for_quiet(timeout_s=args.quiet_timeout)
            records, wall, single = asyncio.run(
                run_load(url, args.clients, args.per_client, args.duration, args.baseline)
            )
        finally:
            proc.terminate()
            try:
                proc.wait(timeout=20)
            except subprocess.TimeoutExpired:
                proc.kill()

    summary = summarise(records, wall, args)
    summary["single_client"] = latency(single)
    summary["table"] = table(summary)
    write_result("load", summary, load_before=load_before)
    print(summary["table"])
    if summary["errors"]:
        print(f"\nErrors: {summary['errors_by_kind']}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
