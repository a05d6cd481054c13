"""The server's write path: uploads and deletes go through one bounded queue, run in order by one worker thread.

- In order and one at a time, because every write holds the home's write lock anyway (index/write_lock.py).
- Bounded: a full queue answers 503 with Retry-After instead of piling up work and memory.
- A request waits for its job at most `server.write_wait_s`; then it gets 202 (the job stays queued, and
  GET /api/documents shows its documents PENDING until it lands). A small upload behind a 50 MB one no longer
  times out.
- Shutdown is bounded: the worker is told to stop; an ingest stops between two commits (its unfinished
  documents stay PENDING), queued jobs are abandoned, and the next start re-ingests uploads that never landed.
  The worker is a daemon thread, so a job that will not stop in `server.shutdown_grace_s` cannot hold the process.
"""

from __future__ import annotations

import contextlib
import logging
import queue
import threading
from collections.abc import Callable
from concurrent.futures import Future
from typing import Any

from citewise.errors import HomeBusyError

log = logging.getLogger(__name__)

Job = Callable[[Callable[[], bool]], Any]  # gets `should_stop`; its return value is the job's result


class QueueFull(Exception):
    """The write queue holds `server.write_queue_size` jobs already."""


class WriteQueue:
    def __init__(self, size: int) -> None:
        self._jobs: queue.Queue[tuple[Job, Future] | None] = queue.Queue(maxsize=size)
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    @property
    def depth(self) -> int:
        return self._jobs.qsize()

    def start(self) -> None:
        self._stop.clear()
        self._thread = threading.Thread(target=self._work, name="citewise-writer", daemon=True)
        self._thread.start()

    def submit(self, job: Job) -> Future:
        if self._stop.is_set() or self._thread is None:
            raise QueueFull("The server is shutting down.")
        future: Future = Future()
        try:
            self._jobs.put_nowait((job, future))
        except queue.Full:
            raise QueueFull(f"{self._jobs.maxsize} writes are already queued.") from None
        return future

    def stop(self, grace_s: float) -> bool:
        """Stop taking jobs, abandon the queued ones, let the running one stop at its next checkpoint. True when
        the worker ended within `grace_s`."""
        self._stop.set()
        while True:
            try:
                item = self._jobs.get_nowait()
            except queue.Empty:
                break
            if item is not None:
                item[1].set_exception(HomeBusyError("The server shut down before this write ran; retry it."))
        with contextlib.suppress(queue.Full):
            self._jobs.put_nowait(None)  # wakes the worker if it is idle
        if self._thread is None:
            return True
        self._thread.join(grace_s)
        stopped = not self._thread.is_alive()
        if not stopped:
            log.warning("The write in progress did not stop within %.0fs; leaving it (it is crash-safe)", grace_s)
        return stopped

    def _work(self) -> None:
        while not self._stop.is_set():
            item = self._jobs.get()
            if item is None:
                continue
            job, future = item
            if not future.set_running_or_notify_cancel():
                continue
            try:
                future.set_result(job(self._stop.is_set))
            except BaseException as exc:  # delivered to the request that queued it
                future.set_exception(exc)
