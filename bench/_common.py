"""What every bench script shares: where things are, a description of the machine, and writing results."""

from __future__ import annotations

import json
import os
import platform
import sys
import tempfile
import time
from datetime import UTC, datetime
from importlib import metadata
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
SOMNIA = ROOT.parent / "shared" / "eval" / "somnia"
RESULTS = ROOT / "bench" / "results"

# The bench must never reach for a model hub, exactly like the product.
os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")


def _cpu_model() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def _ram_gb() -> float:
    try:
        return round(os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") / 2**30, 1)
    except (ValueError, OSError, AttributeError):
        return 0.0


def _version(package: str) -> str:
    try:
        return metadata.version(package)
    except metadata.PackageNotFoundError:
        return "not installed"


def machine() -> dict:
    return {
        "cpu": _cpu_model(),
        "cores": os.cpu_count(),
        "ram_gb": _ram_gb(),
        "os": f"{platform.system()} {platform.release()}",
        "python": sys.version.split()[0],
        "torch": _version("torch"),
        "sentence_transformers": _version("sentence-transformers"),
        "lancedb": _version("lancedb"),
        "pylance": _version("pylance"),
    }


def wait_for_quiet(max_load: float = 0.6, timeout_s: float = 900) -> float:
    """Wait until the 1-minute load average drops below `max_load` (other work on a 2-core box skews every
    timing), up to `timeout_s`; returns the load average measurement starts at, which goes into the results."""
    deadline = time.monotonic() + timeout_s
    while os.getloadavg()[0] > max_load and time.monotonic() < deadline:
        time.sleep(10)
    return round(os.getloadavg()[0], 2)


def cli_env(home: Path, **extra: str) -> dict[str, str]:
    """The environment for a `citewise` subprocess of a bench on `home`: offline, and one models cache shared by every
    run (ONNX Runtime's optimised graphs of the shipped models, kept by the first run as on a user's machine)."""
    models = os.environ.get("CITEWISE_MODELS_DIR") or str(Path(tempfile.gettempdir()) / "citewise-bench-models")
    return {
        **os.environ,
        "CITEWISE_HOME": str(home),
        "CITEWISE_MODELS_DIR": models,
        "HF_HUB_OFFLINE": "1",
        "TRANSFORMERS_OFFLINE": "1",
        **extra,
    }


def write_result(name: str, payload: dict, *, load_before: float | None = None) -> Path:
    RESULTS.mkdir(parents=True, exist_ok=True)
    path = RESULTS / f"{name}.json"
    payload = {
        "measured_at": datetime.now(UTC).isoformat(timespec="seconds"),
        "machine": machine(),
        "load_average_before": load_before,
        "load_average_after": round(os.getloadavg()[0], 2),
        **payload,
    }
    path.write_text(json.dumps(payload, indent=2) + "\n")
    return path
