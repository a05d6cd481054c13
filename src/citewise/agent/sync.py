"""One event loop for every sync caller in the process: `run_sync(coro)`.

`Citewise.ask`, `citewise chat` and `eval answers` call async code from sync code. Running each call on a new loop
(`asyncio.run`) breaks vendor clients: langchain-openai (and others) cache one async HTTP client per base URL for
the whole process, and its kept-alive connections belong to the loop that opened them. The second call, on a new
loop, found them bound to a closed one ("Event loop is closed"). So every sync call runs on one long-lived loop,
on a dedicated daemon thread, started on first use and closed cleanly at interpreter exit (pending tasks cancelled,
async generators and the default executor shut down). Several threads may call `run_sync` at once: their
coroutines share the loop, as concurrent requests share a server's.

A process-wide loop rather than one per `Citewise` instance: the vendor caches are process-wide, so a second
instance on a loop of its own would meet the first instance's connections just the same. Other loops in the same
process (a server's) get vendor connections of their own: llm/models.py gives each running loop its own async HTTP
client where the integration takes one (`LoopLocalClient`).
"""

from __future__ import annotations

import asyncio
import atexit
import concurrent.futures
import logging
import threading
from collections.abc import Coroutine
from typing import Any, TypeVar

log = logging.getLogger(__name__)
T = TypeVar("T")


class BackgroundLoop:
    """An asyncio loop running forever on its own daemon thread until `close()`."""

    def __init__(self, name: str = "citewise-sync-loop") -> None:
        self.loop = asyncio.new_event_loop()
        self._ready = threading.Event()
        self._thread = threading.Thread(target=self._run, name=name, daemon=True)
        self._thread.start()
        self._ready.wait()

    def _run(self) -> None:
        asyncio.set_event_loop(self.loop)
        self.loop.call_soon(self._ready.set)
        self.loop.run_forever()

    @property
    def running(self) -> bool:
        return self._thread.is_alive() and not self.loop.is_closed()

    def in_loop_thread(self) -> bool:
        return threading.current_thread() is self._thread

    def run(self, coro: Coroutine[Any, Any, T]) -> T:
        """Run `coro` on the loop and wait for its result (its exception is raised here). An interrupt of the waiting
        thread (Ctrl-C) cancels the coroutine."""
        if self.in_loop_thread():
            coro.close()
            raise RuntimeError("run_sync() was called from async code on its own loop: await the coroutine instead")
        future = asyncio.run_coroutine_threadsafe(coro, self.loop)
        try:
            return future.result()
        except BaseException:
            future.cancel()
            raise

    def close(self, timeout: float = 10.0) -> None:
        """Cancel what still runs, shut down async generators and the default executor, stop and close the loop."""
        if not self.running:
            return

        async def shutdown() -> None:
            tasks = [t for t in asyncio.all_tasks() if t is not asyncio.current_task()]
            for task in tasks:
                task.cancel()
            await asyncio.gather(*tasks, return_exceptions=True)
            await self.loop.shutdown_asyncgens()
            await self.loop.shutdown_default_executor()

        try:
            asyncio.run_coroutine_threadsafe(shutdown(), self.loop).result(timeout)
        except (concurrent.futures.TimeoutError, RuntimeError) as exc:
            log.debug("The sync loop did not shut down cleanly: %r", exc)
        self.loop.call_soon_threadsafe(self.loop.stop)
        self._thread.join(timeout)
        if not self._thread.is_alive():
            self.loop.close()


_loop: BackgroundLoop | None = None
_loop_lock = threading.Lock()


def background_loop() -> BackgroundLoop:
    """The process's loop for sync callers, started on first use."""
    global _loop
    with _loop_lock:
        if _loop is None or not _loop.running:
            _loop = BackgroundLoop()
        return _loop


def run_sync(coro: Coroutine[Any, Any, T]) -> T:
    """Run a coroutine to completion from sync code, on the process's one loop for sync callers. Works from any
    thread, also one that runs an event loop of its own (a notebook): that loop only waits."""
    return background_loop().run(coro)


@atexit.register
def _close_at_exit() -> None:
    with _loop_lock:
        loop = _loop
    if loop is not None:
        loop.close()
