"""A fresh machine's first minutes: `make demo` from a fresh clone to a running server, and what the installs weigh.

    .venv/bin/python bench/bench_install.py [--keep]

1. Clones this repository's HEAD into a temporary folder and runs `make demo PORT=...` there with pip's cache off
   (PIP_NO_CACHE_DIR=1: every wheel downloaded, as on a machine that never installed it), timing it from the start
   to the first 200 from the server's /health; then stops the server. The demo's output is kept (its step lines).
2. Sizes: the clone's .venv (`make install`: the runtime with the dev and postgres extras), and a second fresh venv
   with the runtime alone (`pip install -c constraints.txt .`), each measured with `du` as the disk holds it.
Needs the package index (PyPI); nothing else. Writes bench/results/install.json.
"""

from __future__ import annotations

import argparse
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

from _common import ROOT, wait_for_quiet, write_result

TARGETS = {"demo_s": 150, "dev_install_mb": 1200, "runtime_install_mb": 700}


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def du_mb(path: Path) -> float:
    out = subprocess.run(["du", "-sk", str(path)], capture_output=True, text=True, check=True).stdout
    return round(int(out.split()[0]) / 1024, 1)


def largest(site: Path, n: int = 8) -> list[tuple[str, float]]:
    sizes = [(p.name, du_mb(p)) for p in site.iterdir() if p.is_dir() and not p.name.endswith(".dist-info")]
    return sorted(sizes, key=lambda x: -x[1])[:n]


def lines_tail(log: Path, n: int = 30) -> list[str]:
    return log.read_text(errors="replace").splitlines()[-n:]


def demo(clone: Path, env: dict[str, str]) -> dict:
    port = free_port()
    started = time.perf_counter()
    log = clone / "demo.log"
    with log.open("w") as out:
        proc = subprocess.Popen(
            ["make", "demo", f"PORT={port}"],
            cwd=clone,
            env=env,
            stdout=out,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
        ready_s = None
        try:
            while proc.poll() is None and time.perf_counter() - started < 900:
                try:
                    with urllib.request.urlopen(f"http://127.0.0.1:{port}/health", timeout=2) as reply:
                        if reply.status == 200:
                            ready_s = round(time.perf_counter() - started, 1)
                            break
                except OSError:
                    time.sleep(0.5)
        finally:
            if proc.poll() is None:
                os.killpg(proc.pid, signal.SIGINT)
                try:
                    proc.wait(timeout=30)
                except subprocess.TimeoutExpired:
                    os.killpg(proc.pid, signal.SIGKILL)
    lines = log.read_text(errors="replace").splitlines()
    if ready_s is None:
        raise SystemExit(f"make demo never served /health; its output: {log}\n" + "\n".join(lines_tail(log)))
    return {"ready_s": ready_s, "steps": [ln for ln in lines if ln.startswith("==>")], "output_head": lines[:60]}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--keep", action="store_true", help="keep the temporary folder")
    args = parser.parse_args()
    load_before = wait_for_quiet()
    scratch = Path(tempfile.mkdtemp(prefix="citewise-install-"))
    env = {k: v for k, v in os.environ.items() if not k.startswith(("CITEWISE_", "VIRTUAL_ENV"))}
    env.update(PIP_NO_CACHE_DIR="1", XDG_CACHE_HOME=str(scratch / "cache"))
    try:
        clone = scratch / "citewise"
        subprocess.run(["git", "clone", "--quiet", str(ROOT), str(clone)], check=True)
        commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=clone, capture_output=True, text=True)
        result = demo(clone, env)
        dev = clone / ".venv"
        result["dev_install_mb"] = du_mb(dev)
        result["dev_largest_mb"] = largest(next((dev / "lib").glob("python3*/site-packages")))
        runtime = scratch / "runtime-venv"
        subprocess.run([sys.executable, "-m", "venv", str(runtime)], check=True)
        subprocess.run([runtime / "bin/python", "-m", "pip", "install", "-q", "--upgrade", "pip"], env=env, check=True)
        t0 = time.perf_counter()
        subprocess.run(
            [runtime / "bin/python", "-m", "pip", "install", "-q", "-c", "constraints.txt", "."],
            cwd=clone,
            env=env,
            check=True,
        )
        result["runtime_install_s"] = round(time.perf_counter() - t0, 1)
        result["runtime_install_mb"] = du_mb(runtime)
        site = next((runtime / "lib").glob("python3*/site-packages"))
        result["runtime_largest_mb"] = largest(site)
        heavy = "('torch', 'transformers', 'sentence_transformers')"
        probe = f"import importlib.util as u; print([m for m in {heavy} if u.find_spec(m)])"
        result["runtime_heavy_packages"] = subprocess.run(
            [runtime / "bin/python", "-c", probe], capture_output=True, text=True, check=True
        ).stdout.strip()
    finally:
        if not args.keep:
            shutil.rmtree(scratch, ignore_errors=True)
    result.update(commit=commit.stdout.strip(), targets=TARGETS)
    result["met"] = {
        "demo_s": result["ready_s"] is not None and result["ready_s"] <= TARGETS["demo_s"],
        "dev_install_mb": result["dev_install_mb"] <= TARGETS["dev_install_mb"],
        "runtime_install_mb": result["runtime_install_mb"] <= TARGETS["runtime_install_mb"],
    }
    path = write_result("install", result, load_before=load_before)
    print(
        f"make demo → server up in {result['ready_s']} s; make install {result['dev_install_mb']} MB; "
        f"runtime alone {result['runtime_install_mb']} MB → {path}"
    )


if __name__ == "__main__":
    main()
