"""One writer at a time per home, across processes: the lock every write to CITEWISE_HOME holds.

Two `citewise ingest` runs into one home used to both insert the same new chunks (each merged against the version
it had read) and leave every passage twice. Every writer — `citewise ingest`, `docs remove`, `doctor --repair`, the
server's uploads and deletes, and the index optimisation that ends an ingest — now holds `HOME/write.lock` for its
whole run, and re-reads the index once it holds it. Readers (search, ask, the server's queries) never take it.

The lock is an OS file lock (`flock` through the `filelock` package): the kernel releases it when its holder exits,
however it exits, so a kill -9 never leaves a stale lock behind. Its file holds the holder's pid and command line,
which a waiting writer shows. The shell's `flock HOME/write.lock COMMAND` takes the same lock (backups use it).
"""

from __future__ import annotations

import logging
import os
import sys
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

from citewise.errors import ConfigError, HomeBusyError

log = logging.getLogger(__name__)

LOCK_NAME = "write.lock"
_POLL_S = 0.2


def _holder_record(fd: int) -> None:
    """Runs with the lock held: write who holds it, for the writers that will wait on it."""
    command = " ".join(Path(sys.argv[0]).name if i == 0 else arg for i, arg in enumerate(sys.argv))[:300]
    os.ftruncate(fd, 0)
    os.pwrite(fd, f"{os.getpid()}\n{command}\n".encode(errors="replace"), 0)


def holder(home: Path) -> str:
    """'pid 1234: citewise ingest docs' for the process that holds (or last held) the lock, or 'unknown'."""
    try:
        pid, _, command = (home / LOCK_NAME).read_text(errors="replace").partition("\n")
    except OSError:
        return "unknown"
    command = command.strip()
    return f"pid {pid.strip()}" + (f": {command}" if command else "") if pid.strip() else "unknown"


def prepare_home(home: Path) -> None:
    """Create the home for a writer, or say plainly why it cannot be written to."""
    try:
        home.mkdir(parents=True, exist_ok=True)
        probe = home / LOCK_NAME
        with probe.open("a"):
            pass
    except OSError as exc:
        raise ConfigError(
            f"Cannot write to the home {home}: {exc.strerror or exc}. Point --home (CITEWISE_HOME) at a folder "
            "you can write to."
        ) from exc


@contextmanager
def write_lock(
    home: Path,
    *,
    wait_s: float,
    on_wait: Callable[[str], None] | None = None,
    cancelled: Callable[[], bool] | None = None,
) -> Iterator[None]:
    """Hold the home's write lock for the block. Waits up to `wait_s` seconds (0: not at all) for another writer,
    telling `on_wait` once who it waits for; raises HomeBusyError when it gives up or `cancelled()` says stop.

    Re-entrant within a thread (an ingest's own optimise step, a delete run by the server's writer)."""
    from filelock import FileLock, Timeout  # only writers lock: a reader (search, ask) never pays this import

    prepare_home(home)
    lock = FileLock(home / LOCK_NAME, is_singleton=True, on_acquired=_holder_record)
    try:
        lock.acquire(timeout=0)
    except Timeout:
        who = holder(home)
        if wait_s <= 0:
            raise HomeBusyError(
                f"Another writer ({who}) is writing to {home}; not waiting for it (--no-wait). Try again when it "
                "has finished."
            ) from None
        message = f"Waiting for another writer on {home} ({who}) to finish…"
        (on_wait or log.info)(message)
        started = time.monotonic()
        try:
            lock.acquire(timeout=wait_s, poll_interval=_POLL_S, cancel_check=cancelled)
        except Timeout:
            if cancelled is not None and cancelled():
                raise HomeBusyError(f"Stopped waiting for another writer on {home} ({who}).") from None
            raise HomeBusyError(
                f"Another writer ({holder(home)}) held the write lock on {home} for {time.monotonic() - started:.0f}s;"
                " gave up waiting (ingest.write_lock_wait_s). Try again when it has finished."
            ) from None
    try:
        yield
    finally:
        lock.release()
