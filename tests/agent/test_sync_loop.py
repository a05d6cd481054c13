"""`run_sync`: the one event loop sync callers share (agent/sync.py)."""

from __future__ import annotations

import asyncio
import threading

import pytest

from citewise.agent.sync import BackgroundLoop, background_loop, run_sync


def test_every_call_runs_on_the_same_loop_from_any_thread():
    async def current():
        return asyncio.get_running_loop()

    loops = [run_sync(current()) for _ in range(3)]
    threads_saw: list = []
    workers = [threading.Thread(target=lambda: threads_saw.append(run_sync(current()))) for _ in range(4)]
    for w in workers:
        w.start()
    for w in workers:
        w.join()
    assert len({id(loop) for loop in loops + threads_saw}) == 1
    assert loops[0] is background_loop().loop


def test_errors_are_raised_in_the_caller():
    async def fail():
        raise ValueError("from the loop")

    with pytest.raises(ValueError, match="from the loop"):
        run_sync(fail())


def test_calling_it_from_its_own_loop_is_refused_not_a_deadlock():
    async def nested():
        inner = asyncio.sleep(0)
        run_sync(inner)

    with pytest.raises(RuntimeError, match="await the coroutine instead"):
        run_sync(nested())


def test_close_cancels_what_runs_and_stops_the_thread():
    loop = BackgroundLoop(name="citewise-test-loop")
    cancelled = threading.Event()

    async def forever():
        try:
            await asyncio.Event().wait()
        except asyncio.CancelledError:
            cancelled.set()
            raise

    future = asyncio.run_coroutine_threadsafe(forever(), loop.loop)
    loop.close()
    assert cancelled.is_set() and future.cancelled()
    assert not loop.running and loop.loop.is_closed()
