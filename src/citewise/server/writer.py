"""The server's write path: uploads and deletes go through one bounded queue, run in order by one worker thread.

- In order and one at a time, because every write holds the home's write lock anyway (index/write_lock.py).
- Bounded: a full queue answers 503 with Retry-After instead of piling up work and memory. An upload takes its
  place in the queue (`reserve`) before it stores its files, so a refused upload leaves nothing on disk for the
  next start to ingest.
- A request waits for its job at most `server.write_wait_s`; then it gets 202 (the job stays queued, and
  GET /api/documents shows its documents PENDING until it lands). A small upload behind a 50 MB one no longer
  times out.
- Shutdown is bounded: the worker is told to stop; an ingest stops between two commits (its unfinished
  documents stay PENDING), queued jobs are abandoned, and the next start re-ingests uploads that never landed.
  The worker is a daemon thread, so a job that will not stop in `server.shutdown_grace_s` cannot hold the process.
"""

from __future__ import annotations

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


class Slot:
    """A place in the queue, held from `WriteQueue.reserve` until `submit` hands it a job (the place is then the
    job's until the worker takes it) or `release` gives it back. Use it as a context manager: leaving the block
    without submitting releases it."""

    def __init__(self, writes: WriteQueue) -> None:
        self._writes = writes
        self._held = True

    def submit(self, job: Job) -> Future:
        """Queue `job` in this place. QueueFull (and the place released) when the server began shutting down."""
        if not self._held:
            raise RuntimeError("this slot was already used or released")
        self._held = False
        try:
            return self._writes._put(job)
        except BaseException:
            self._writes._slots.release()
            raise

    def release(self) -> None:
        if self._held:
            self._held = False
            self._writes._slots.release()

    def __enter__(self) -> Slot:
        return self

    def __exit__(self, *exc: object) -> None:
        self.release()


class WriteQueue:
    def __init__(self, size: int) -> None:
        self.size = size
        # Unbounded itself: the bound is the slots, counted from `reserve` (before an upload stores its files) until
        # the worker takes the job, so a job that was given a place can always be put.
        self._jobs: queue.Queue[tuple[Job, Future] | None] = queue.Queue()
        self._slots = threading.BoundedSemaphore(size)
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    @property
    def depth(self) -> int:
        return self._jobs.qsize()

    def start(self) -> None:
        self._stop.clear()
        self._thread = threading.Thread(target=self._work, name="citewise-writer", daemon=True)
        self._thread.start()

    def reserve(self) -> Slot:
        """A place for one job, or QueueFull when `size` jobs are queued or about to be."""
        if self._stopping:
            raise QueueFull("The server is shutting down.")
        if not self._slots.acquire(blocking=False):
            raise QueueFull(f"{self.size} writes are already queued.")
        return Slot(self)

    def submit(self, job: Job) -> Future:
        """Reserve a place and queue `job` in it: QueueFull when there is none."""
        return self.reserve().submit(job)

    @property
    def _stopping(self) -> bool:
        return self._stop.is_set() or self._thread is None

    def _put(self, job: Job) -> Future:
        if self._stopping:
            raise QueueFull("The server is shutting down.")
        future: Future = Future()
        self._jobs.put_nowait((job, future))
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
                self._slots.release()
                item[1].set_exception(HomeBusyError("The server shut down before this write ran; retry it."))
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
            self._slots.release()  # running, no longer waiting: its place is free for the next write
            job, future = item
            if not future.set_running_or_notify_cancel():
                continue
            try:
                future.set_result(job(self._stop.is_set))
            except BaseException as exc:  # delivered to the request that queued it
                future.set_exception(exc)
