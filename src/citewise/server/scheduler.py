"""Scheduled syncs: `citewise serve` keeps the sources that have `every` up to date, in the background.

One asyncio task per app, started and stopped by the app's lifespan. It wakes when the next source is due (and at
least every `_MAX_SLEEP_S`, so a source added with `citewise sources add --every` while the server runs is picked
up), runs the due syncs one after another in a worker thread, and sleeps again. Each round asks which sources are
declared now (`sources.config.all_specs`: citewise.toml read again, removals recorded in the state), never the
settings the server started with alone: a source `citewise sources remove` removed while the server runs is not
synced back, and a sync already waiting when it was removed stands down. An asyncio task rather than
APScheduler: the work is one timer and a queue of one; "one at a time" is the loop awaiting each sync, shutdown is
one event, and the schedule is the home's own record of each source's last start, so there is no second job store
to keep in step with it.

A sync is a writer: it runs as a job of the server's write queue (server/writer.py), after the uploads and deletes
already waiting, and holds the home's write lock, so it never overlaps them or a `citewise sources sync` /
`citewise ingest` in another process. Queries do not wait: they
read the index the last commit left, and a sync's commits replace documents atomically.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import threading
from datetime import UTC, datetime

from citewise.server.deps import ServerState

log = logging.getLogger(__name__)

_MAX_SLEEP_S = 30.0
_MIN_SLEEP_S = 0.5


class SourceScheduler:
    def __init__(self, state: ServerState) -> None:
        self.state = state
        self.running: str | None = None  # the source being synced now
        self._stop = threading.Event()  # read by the sync thread too (it stops fetching when set)
        self._wake = asyncio.Event()
        self._task: asyncio.Task | None = None

    def start(self) -> None:
        self._stop.clear()
        self._wake = asyncio.Event()
        self._task = asyncio.create_task(self._loop(), name="citewise-source-scheduler")

    async def stop(self) -> None:
        self._stop.set()
        self._wake.set()
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
            self._task = None

    async def _loop(self) -> None:
        while not self._stop.is_set():
            try:
                due, wait_s = await asyncio.to_thread(self._due)
                for name in due:
                    if self._stop.is_set():
                        return
                    await self._sync(name)
                if due:
                    continue  # look again at once: a long sync may have made another source due
            except asyncio.CancelledError:
                raise
            except Exception:  # the schedule itself must survive anything; the next round tries again
                log.exception("Source scheduler: a round failed")
                wait_s = _MAX_SLEEP_S
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._wake.wait(), timeout=wait_s)

    def _due(self) -> tuple[list[str], float]:
        """The sources due now, and how long to sleep until the next one is."""
        from citewise.sources.sync import next_run, runs

        now = datetime.now(UTC)
        due, wait_s = [], _MAX_SLEEP_S
        for run in runs(self.state.settings):
            upcoming = next_run(run, now=now)
            if upcoming is None:
                continue
            delay = (upcoming - now).total_seconds()
            if delay <= 0:
                due.append(run.name)
            else:
                wait_s = min(wait_s, delay)
        return due, max(wait_s, _MIN_SLEEP_S)

    async def _sync(self, name: str) -> None:
        """Run one sync as a job of the server's write queue (after the uploads and deletes already waiting, never
        beside them), and wait for it without holding the event loop."""
        from citewise.server.writer import QueueFull
        from citewise.sources.sync import sync_source

        metrics = self.state.metrics

        def job(should_stop) -> object:
            self.running = name
            metrics.sync_running.set(1)
            try:
                return sync_source(
                    self.state.kb, name, should_stop=lambda: should_stop() or self._stop.is_set(), only_if_due=True
                )
            finally:
                self.running = None
                metrics.sync_running.set(0)

        writer = self.state.writer
        if writer is None:
            return
        try:
            future = writer.submit(job)
        except QueueFull as exc:  # uploads first; the source is still due and is tried again shortly
            log.info("Source %s: sync postponed, the write queue is full (%s)", name, exc)
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._wake.wait(), timeout=_MAX_SLEEP_S)
            return
        try:
            report = await asyncio.wrap_future(future)
        except Exception as exc:  # the server is shutting down (queued writes are abandoned), or a bug
            log.warning("Source %s: sync did not run: %s", name, exc)
            return
        if not report.ran:  # another replica synced it while this one waited for the write lock
            log.info("Source %s: %s", name, "; ".join(report.notes))
            return
        metrics.observe_sync(report)
        if report.ok:
            log.info(
                "Source %s synced: %d added, %d updated, %d removed, %d failed (%.1fs)",
                name, report.added, report.updated, report.removed, report.failed, report.elapsed_s,
            )  # fmt: skip
        else:
            log.warning("Source %s: sync failed, the index keeps its last good sync: %s", name, report.error)
