"""Real `citewise serve` processes sharing one PostgreSQL: the replica tests, `make cluster` and the cluster bench
start them with this. Each replica is its own process with its own (stateless) home; everything shared goes
through the database named in its environment.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import httpx
from tests.support.local_postgres import free_port


def replica_env(database_url: str, **settings: str) -> dict[str, str]:
    """The environment of a replica: all state in PostgreSQL, plus any CITEWISE_* settings given by name."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("CITEWISE_") or k == "CITEWISE_MODELS_DIR"}
    env.update({"CITEWISE_STORE": "postgres", "CITEWISE_DATABASE_URL": database_url, "HF_HUB_OFFLINE": "1"})
    env.update({f"CITEWISE_{name.upper()}": value for name, value in settings.items()})
    return env


class Replica:
    def __init__(self, name: str, home: Path, env: dict[str, str], *, port: int | None = None) -> None:
        self.name = name
        self.home = home
        self.env = env
        self.port = port or free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.log = home.parent / f"{name}.log"
        self.proc: subprocess.Popen | None = None

    def start(self) -> Replica:
        self.home.mkdir(parents=True, exist_ok=True)
        self.proc = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "citewise.cli",
                "serve",
                "--port",
                str(self.port),
                "--home",
                str(self.home),
                "--log-level",
                "warning",
            ],
            env=self.env,
            stdout=self.log.open("w"),
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
        return self

    def wait_ready(self, timeout_s: float = 120) -> Replica:
        deadline = time.monotonic() + timeout_s
        while True:
            if self.proc is not None and self.proc.poll() is not None:
                raise RuntimeError(f"replica {self.name} exited ({self.proc.returncode}):\n{self.log.read_text()}")
            try:
                if httpx.get(self.url + "/health", timeout=2).status_code == 200:
                    return self
            except httpx.HTTPError:
                pass
            if time.monotonic() > deadline:
                raise RuntimeError(f"replica {self.name} did not start:\n{self.log.read_text()}")
            time.sleep(0.2)

    def kill(self) -> None:
        """kill -9: no shutdown, no cleanup, as a crash or an OOM kill."""
        if self.proc is not None and self.proc.poll() is None:
            os.kill(self.proc.pid, signal.SIGKILL)
            self.proc.wait(30)

    def stop(self) -> None:
        if self.proc is None or self.proc.poll() is not None:
            return
        self.proc.send_signal(signal.SIGTERM)
        try:
            self.proc.wait(30)
        except subprocess.TimeoutExpired:
            self.kill()


def start_replicas(replicas: list[Replica], timeout_s: float = 120) -> list[Replica]:
    for replica in replicas:
        replica.start()
    for replica in replicas:
        replica.wait_ready(timeout_s)
    return replicas
