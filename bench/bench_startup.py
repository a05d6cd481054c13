"""Cold start: how long a fresh `citewise` process takes to answer, beside the floor of what any search imports.

    .venv/bin/python bench/bench_startup.py [--runs 9] [--home DIR]

Every command runs in a new process (a cold interpreter) against a warm index: docs/ ingested once into the home
(kept under bench/data/startup/ and reused), the embedding model exported, and every command run once before
timing, so the OS file cache holds what they read and Python's bytecode cache what they import (as an installed
package has it: see `environment`). The commands, timed in interleaved rounds so that load on a shared machine falls
on all of them alike:

    floor   python -c "import lance, onnxruntime"   the index engine and the model runtime: any search needs both
    help    citewise --help
    search  citewise search QUESTION
    ask     citewise ask QUESTION --mode quote

The targets are ratios of medians of the same rounds: search ≤ 1.6 × floor, quote-mode ask ≤ 1.3 × search.
Where each command spends its imports is recorded too (`python -X importtime`, per top-level package), so a miss
can be located. Writes bench/results/startup.json.
"""

from __future__ import annotations

import argparse
import os
import re
import statistics
import subprocess
import sys
import time
from collections import defaultdict
from pathlib import Path

from _common import ROOT, wait_for_quiet, write_result

QUESTION = "How do I delete a document from the index?"
TARGET_SEARCH_OVER_FLOOR = 1.6
TARGET_ASK_OVER_SEARCH = 1.3


def citewise_command() -> list[str]:
    """The `citewise` console script of this interpreter's environment, else the module (same code either way)."""
    script = Path(sys.executable).with_name("citewise")
    return [str(script)] if script.is_file() else [sys.executable, "-m", "citewise.cli"]


def commands(home: Path) -> dict[str, list[str]]:
    cli = citewise_command()
    return {
        "floor": [sys.executable, "-c", "import lance, onnxruntime"],
        "help": [*cli, "--help"],
        "search": [*cli, "search", QUESTION, "--home", str(home)],
        "ask": [*cli, "ask", QUESTION, "--mode", "quote", "--home", str(home)],
    }


def environment(bytecode: Path) -> dict[str, str]:
    env = dict(os.environ)
    env.setdefault("HF_HUB_OFFLINE", "1")
    env["CITEWISE_SERVER__LOG_QUESTIONS"] = "false"  # the bench's questions are no docs gaps
    # Compiled bytecode, as an installed package has it (pip compiles it at install, a first run writes it). Under
    # PYTHONDONTWRITEBYTECODE, as the machines running this set it, every timed start compiled Citewise's modules
    # from source (an editable install has no bytecode) while the floor's packages loaded theirs compiled. The
    # untimed first run of each command writes the cache, kept beside the bench's home, not in the source tree.
    env.pop("PYTHONDONTWRITEBYTECODE", None)
    env["PYTHONPYCACHEPREFIX"] = str(bytecode)
    return env


def prepare_home(home: Path, env: dict[str, str]) -> None:
    """docs/ ingested (once: a rerun finds every file unchanged and embeds nothing)."""
    cli = citewise_command()
    done = subprocess.run(
        [*cli, "ingest", str(ROOT / "docs"), "--home", str(home), "--json"],
        capture_output=True,
        text=True,
        env=env,
        check=False,
    )
    if done.returncode != 0:
        raise SystemExit(f"ingest failed:\n{done.stderr}")


def timed(argv: list[str], env: dict[str, str]) -> float:
    start = time.perf_counter()
    done = subprocess.run(argv, capture_output=True, env=env, check=False)
    elapsed = time.perf_counter() - start
    if done.returncode != 0:
        raise SystemExit(f"{' '.join(argv)} failed ({done.returncode}):\n{done.stderr.decode()[-2000:]}")
    return elapsed


_IMPORT_LINE = re.compile(r"^import time:\s+(\d+)\s+\|\s+(\d+)\s+\|( *)(\S+)")  # self µs, cumulative µs, name


def import_profile(argv: list[str], env: dict[str, str], top: int = 10) -> list[tuple[str, float]]:
    """The packages a command spends its imports in: the self time (ms) of every module imported, summed per
    top-level package, slowest first."""
    python_argv = argv
    if argv[0] != sys.executable:  # the console script: run its module under the same interpreter
        python_argv = [sys.executable, "-m", "citewise.cli", *argv[1:]]
    python_argv = [python_argv[0], "-X", "importtime", *python_argv[1:]]
    done = subprocess.run(python_argv, capture_output=True, text=True, env=env, check=False)
    totals: dict[str, float] = defaultdict(float)
    for line in done.stderr.splitlines():
        match = _IMPORT_LINE.match(line)
        if match:
            totals[match.group(4).split(".")[0]] += int(match.group(1)) / 1000
    return sorted(((name, round(ms, 1)) for name, ms in totals.items()), key=lambda item: -item[1])[:top]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=9, help="timed rounds (each runs every command once)")
    parser.add_argument("--home", type=Path, default=ROOT / "bench" / "data" / "startup" / "home")
    parser.add_argument("--no-wait", action="store_true", help="start at once, whatever the machine's load")
    parser.add_argument(
        "--output",
        default="startup",
        help="results name (bench/results/NAME.json); 'startup_before' with PYTHONPATH=<older checkout>/src "
        "measures older code for the report's Before column",
    )
    args = parser.parse_args()

    args.home.parent.mkdir(parents=True, exist_ok=True)
    env = environment(args.home.parent / "bytecode")
    prepare_home(args.home, env)
    argv = commands(args.home)
    for command in argv.values():  # warm the file cache; nothing of this is timed
        timed(command, env)
    load = round(os.getloadavg()[0], 2) if args.no_wait else wait_for_quiet(max_load=1.5, timeout_s=600)
    times: dict[str, list[float]] = {name: [] for name in argv}
    for _ in range(args.runs):
        for name, command in argv.items():
            times[name].append(timed(command, env))
    medians = {name: statistics.median(values) for name, values in times.items()}
    ratios = {
        "search_over_floor": medians["search"] / medians["floor"],
        "ask_over_search": medians["ask"] / medians["search"],
        "help_over_floor": medians["help"] / medians["floor"],
    }
    result = {
        "question": QUESTION,
        "runs": args.runs,
        "commands": {name: " ".join([Path(c[0]).name, *c[1:]]) for name, c in argv.items()},
        "seconds": {
            name: {"min": round(min(v), 3), "median": round(medians[name], 3), "max": round(max(v), 3)}
            for name, v in times.items()
        },
        "ratios": {name: round(value, 2) for name, value in ratios.items()},
        "targets": {
            "search_over_floor": TARGET_SEARCH_OVER_FLOOR,
            "ask_over_search": TARGET_ASK_OVER_SEARCH,
        },
        "met": {
            "search_over_floor": ratios["search_over_floor"] <= TARGET_SEARCH_OVER_FLOOR,
            "ask_over_search": ratios["ask_over_search"] <= TARGET_ASK_OVER_SEARCH,
        },
        "imports_ms": {name: import_profile(command, env) for name, command in argv.items()},
    }
    path = write_result(args.output, result, load_before=load)
    for name in argv:
        s = result["seconds"][name]
        print(f"{name:7} median {s['median']:.2f} s  (min {s['min']:.2f}, max {s['max']:.2f})")
    print(", ".join(f"{k} {v}" for k, v in result["ratios"].items()), f"-> {path}")


if __name__ == "__main__":
    main()
