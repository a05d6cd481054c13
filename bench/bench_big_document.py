"""One big document through `citewise ingest`: peak memory and how soon the first chunks are committed.

    .venv/bin/python bench/bench_big_document.py [--mb 48] [--cap-s 300] [--max-load 0.6]

Generates a deterministic markdown file of about `--mb` MB (sections with headings, paragraphs, lists and code
blocks), ingests it with the real CLI in a subprocess into a temporary home, and records the process's peak RSS,
the seconds until the first commit landed in the index (a new LanceDB table version), how many commits happened,
and the total time, or what had been committed when the `--cap-s` limit stopped the run.
Writes bench/results/big_document.json.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from _common import ROOT, wait_for_quiet, write_result

_WORDS = [
    "index",
    "vector",
    "chunk",
    "owner",
    "upload",
    "server",
    "retry",
    "commit",
    "version",
    "manifest",
    "registry",
    "token",
    "query",
    "answer",
    "cite",
    "document",
    "section",
    "heading",
    "paragraph",
    "embedding",
    "model",
    "batch",
    "memory",
    "latency",
    "budget",
    "worker",
    "queue",
    "lock",
    "writer",
    "reader",
    "table",
    "column",
    "filter",
    "score",
    "rank",
    "fusion",
    "lexical",
    "dense",
    "gate",
    "threshold",
    "setting",
    "default",
    "option",
]


def write_markdown(path: Path, megabytes: float, seed: int = 7) -> int:
    """A markdown file of about `megabytes` MB; returns its size in bytes. Same seed → same bytes."""
    rng = random.Random(seed)
    target = int(megabytes * 1024 * 1024)
    size = 0
    with path.open("w", encoding="utf-8") as out:
        out.write("# A very large manual\n\n")
        chapter = 0
        while size < target:
            chapter += 1
            parts = [f"## Chapter {chapter}\n\n"]
            for section in range(1, 6):
                parts.append(f"### Section {chapter}.{section}: {' '.join(rng.choices(_WORDS, k=4))}\n\n")
                for _ in range(rng.randint(2, 5)):
                    words = rng.choices(_WORDS, k=rng.randint(40, 120))
                    parts.append(" ".join(words).capitalize() + f" (ref {chapter}-{section}).\n\n")
                if rng.random() < 0.4:
                    parts.append("".join(f"- {' '.join(rng.choices(_WORDS, k=8))}\n" for _ in range(4)) + "\n")
                if rng.random() < 0.3:
                    body = "\n".join(f"run --{rng.choice(_WORDS)} {rng.randint(1, 999)}" for _ in range(5))
                    parts.append(f"```bash\n{body}\n```\n\n")
            text = "".join(parts)
            out.write(text)
            size += len(text.encode())
    return path.stat().st_size


def _high_water_mark(pid: int) -> int:
    """Peak resident memory so far (VmHWM), in bytes: a high-water mark, so polling misses no spike."""
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) * 1024
    except (OSError, ValueError):
        pass
    return 0


def _versions(home: Path) -> int:
    folder = home / "index" / "lancedb" / "chunks.lance" / "_versions"
    try:
        return sum(1 for p in folder.iterdir() if p.suffix == ".manifest")
    except FileNotFoundError:
        return 0


def warm_models(models: Path, scratch: Path) -> None:
    """Start the models once, outside the measurement: the first run in a fresh models cache keeps ONNX Runtime's
    optimised graph there, which later runs (a user's every run after the first) only load."""
    scratch.mkdir(parents=True, exist_ok=True)
    (scratch / "warm.md").write_text("# Warm\n\nWarm up the model.\n")
    env = {**os.environ, "CITEWISE_HOME": str(scratch / "home"), "CITEWISE_MODELS_DIR": str(models)}
    subprocess.run([sys.executable, "-m", "citewise.cli", "ingest", str(scratch / "warm.md"), "--json"], env=env,
                   check=True, capture_output=True)  # fmt: skip


def measure(file: Path, home: Path, cap_s: float, extra_env: dict[str, str] | None = None) -> dict:
    env = {**os.environ, "CITEWISE_HOME": str(home), "CITEWISE_INGEST__MAX_FILE_MB": "100", **(extra_env or {})}
    started = time.monotonic()
    proc = subprocess.Popen(
        [sys.executable, "-m", "citewise.cli", "ingest", str(file), "--json"],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    first_commit_s = None
    created = None  # the version count right after the (empty) table is created
    capped = False
    peak = 0
    while proc.poll() is None:
        peak = max(peak, _high_water_mark(proc.pid))
        versions = _versions(home)
        if versions and created is None:
            created = versions
        if created is not None and versions > created and first_commit_s is None:
            first_commit_s = time.monotonic() - started
        if time.monotonic() - started > cap_s:
            capped = True
            proc.kill()
            break
        time.sleep(0.1)
    stdout, stderr = proc.communicate()
    elapsed = time.monotonic() - started
    report = None
    if not capped and proc.returncode == 0:
        report = json.loads(stdout.strip().splitlines()[-1])
    return {
        "capped": capped,
        "returncode": proc.returncode,
        "elapsed_s": round(elapsed, 1),
        "peak_rss_mb": round(peak / 2**20),
        "first_commit_s": None if first_commit_s is None else round(first_commit_s, 1),
        "table_versions": _versions(home),
        "chunks": report and report["chunks_total"],
        "stderr_tail": stderr[-500:] if proc.returncode not in (0, None) and not capped else "",
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--mb", type=float, default=48.0, help="size of the generated markdown file")
    parser.add_argument("--cap-s", type=float, default=300.0, help="stop the ingest after this many seconds")
    parser.add_argument("--max-load", type=float, default=0.6, help="wait for a 1-minute load average below this")
    parser.add_argument("--name", default="big_document", help="results file name (bench/results/NAME.json)")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="citewise-big-") as tmp:
        file = Path(tmp) / "manual.md"
        size = write_markdown(file, args.mb)
        models = Path(os.environ.get("CITEWISE_MODELS_DIR") or Path(tmp) / "models")
        warm_models(models, Path(tmp) / "warm")
        load_before = wait_for_quiet(args.max_load, timeout_s=300)
        result = measure(file, Path(tmp) / "home", args.cap_s, {"CITEWISE_MODELS_DIR": str(models)})
    import citewise

    result = {
        "file_mb": round(size / 2**20, 1),
        "cap_s": args.cap_s,
        "code": str(Path(citewise.__file__).parent),
        **result,
    }
    print(json.dumps(result, indent=2))
    write_result(args.name, result, load_before=load_before)
    print(f"wrote {os.path.relpath(ROOT / 'bench' / 'results' / f'{args.name}.json', ROOT)}")


if __name__ == "__main__":
    main()
