"""One timer per watch stream (app.sync.stall, issue 32): a stream silent for the stall timeout is cancelled and
read as stalled; one that shows something before is not, however long it runs; a cancellation by anyone else
stands as a cancellation."""
from __future__ import annotations

import asyncio
import time

from app.sync.stall import StallGuard

LIMIT = 0.3


async def test_a_silent_stream_is_stalled_after_the_limit_and_not_before():
    seen = time.monotonic()
    t0 = time.monotonic()
    with StallGuard(LIMIT, lambda: seen) as guard:
        try:
            await asyncio.sleep(10)
        except asyncio.CancelledError:
            assert guard.stalled()
    waited = time.monotonic() - t0
    assert LIMIT * 0.9 <= waited < LIMIT + 0.5
    assert asyncio.current_task().cancelling() == 0      # its cancellation taken back


async def test_a_stream_that_shows_something_within_the_limit_runs_on():
    seen = [time.monotonic()]
    with StallGuard(LIMIT, lambda: seen[0]) as guard:
        for _ in range(6):                                  # 6 x LIMIT/2: past the limit from the start, twice over
            await asyncio.sleep(LIMIT / 2)
            seen[0] = time.monotonic()
        assert not guard.fired
        t0 = time.monotonic()
        try:
            await asyncio.sleep(10)                         # then silent
        except asyncio.CancelledError:
            assert guard.stalled()
        assert LIMIT * 0.9 <= time.monotonic() - t0 < LIMIT + 0.5


async def test_a_cancellation_by_another_stands():
    async def reader(guard_box):
        with StallGuard(LIMIT, lambda: None) as guard:
            guard_box.append(guard)
            try:
                await asyncio.sleep(10)
            except asyncio.CancelledError:
                if guard.stalled():
                    return "stalled"
                raise
    box: list = []
    task = asyncio.create_task(reader(box))
    await asyncio.sleep(LIMIT / 3)
    task.cancel()                                           # a shutdown, before the limit
    try:
        await task
        raise AssertionError("the shutdown's cancellation was swallowed")
    except asyncio.CancelledError:
        pass
    assert not box[0].fired
