"""Issue 31, point 5: leader election judged on each replica's monotonic clock, as client-go's.

A lease held by another replica expires lease_seconds after this replica last saw its record change
(never by comparing this replica's wall clock with the renewTime another wrote); a leader's own
`leading` counts from the monotonic instant its renewal was sent. Replicas run against
tests/fakeapi.py with their own ApiClient (a fault with agent= partitions one of them) and their own
wall clock, stepped or skewed; a watcher samples every few milliseconds that two never lead at once.
"""
from __future__ import annotations

import asyncio
import contextlib
import time

import pytest

from app.leader import LeaderElector
from app.sync.apiserver import make_api_client
from live import until
from test_watch import fake_api  # noqa: F401  (fixture)

HOUR = 3600.0


class Wall:
    """A replica's wall clock: the real one, offset by `offset` seconds (stepped by setting it)."""

    def __init__(self, offset: float = 0.0):
        self.offset = offset

    def __call__(self) -> float:
        return time.time() + self.offset


class Watch:
    """Samples the replicas' `leading` every 5 ms: instants with two leaders, and who ever led."""

    def __init__(self, electors: list[LeaderElector]):
        self.electors, self.both, self.led = electors, 0, set()
        self.task = asyncio.create_task(self._run())

    async def _run(self) -> None:
        while True:
            leaders = [e.identity for e in self.electors if e.leading]
            self.led.update(leaders)
            self.both += len(leaders) > 1
            await asyncio.sleep(0.005)


@contextlib.asynccontextmanager
async def replicas(api, directory, *walls: Wall, lease=2, renew=1.0, retry=0.1):
    """Electors replica-a, replica-b, ... on one Lease, each with its own client and wall clock (not started)."""
    path = api.kubeconfig_path(directory)
    clients, electors = [], []
    for i, wall in enumerate(walls):
        client = await make_api_client(path)
        client.user_agent = f"quotient/replica-{'abcd'[i]}"
        clients.append(client)
        electors.append(LeaderElector(client, "quotient-system", "quotient", f"replica-{'abcd'[i]}",
                                      lease_seconds=lease, renew_seconds=renew, retry_seconds=retry, clock=wall))
    watch = Watch(electors)
    tasks: dict[str, asyncio.Task] = {}

    def start(e: LeaderElector) -> asyncio.Task:
        tasks[e.identity] = asyncio.create_task(e.run())
        return tasks[e.identity]

    try:
        yield electors, watch, start
    finally:
        watch.task.cancel()
        api.release()
        api.clear_faults()
        for e in electors:
            e.stop()
        await asyncio.gather(*tasks.values(), return_exceptions=True)
        for client in clients:
            await client.close()


def holder(api) -> str | None:
    return (api.get("Lease", "quotient-system", "quotient") or {}).get("spec", {}).get("holderIdentity")


async def test_a_leader_whose_wall_clock_steps_back_while_partitioned_stops_leading(fake_api, tmp_path):
    wall_a = Wall()
    async with replicas(fake_api, tmp_path, wall_a, Wall()) as ((a, b), watch, start):
        start(a)
        await until(lambda: a.leading, what="a leads")
        start(b)
        await asyncio.sleep(0.5)
        assert a.leading and not b.leading
        fake_api.fault("hang", resource="leases", agent="replica-a", times=10**6)   # a is cut off
        cut = time.monotonic()
        wall_a.offset = -HOUR                                                        # and its clock steps back
        await until(lambda: not a.leading, timeout=3, what="a steps down")
        # within renew_seconds of its last renewal (before: a led for as long as the step, an hour)
        assert time.monotonic() - cut < 1.0 + 0.2
        await until(lambda: b.leading, timeout=6, what="b takes over")
        await asyncio.sleep(0.3)
        assert watch.both == 0 and holder(fake_api) == "replica-b" and not a.leading


@pytest.mark.parametrize("ahead", [20.0, HOUR])
async def test_a_replica_whose_clock_runs_ahead_never_takes_a_healthy_lease(fake_api, tmp_path, ahead):
    async with replicas(fake_api, tmp_path, Wall(), Wall(ahead), lease=2, renew=1.2, retry=0.1) \
            as ((a, b), watch, start):
        start(a)
        await until(lambda: a.leading, what="a leads")
        start(b)
        await asyncio.sleep(3.0)                       # more than lease_seconds of b's own observation
        # before: b judged a's renewTime by its own clock, 20 s ahead: expired, taken at once
        assert "replica-b" not in watch.led and watch.both == 0
        assert a.leading and holder(fake_api) == "replica-a"


@pytest.mark.parametrize("behind", [20.0, HOUR])
async def test_a_replica_whose_clock_runs_behind_takes_an_abandoned_lease(fake_api, tmp_path, behind):
    async with replicas(fake_api, tmp_path, Wall(), Wall(-behind)) as ((a, b), watch, start):
        start(a)
        await until(lambda: a.leading, what="a leads")
        start(b)
        await asyncio.sleep(0.3)
        fake_api.fault("hang", resource="leases", agent="replica-a", times=10**6)   # a is gone
        gone = time.monotonic()
        # lease_seconds after b last saw a's record change (before: never, b's clock said the renewal was ahead)
        await until(lambda: b.leading, timeout=5, what="b takes the abandoned lease")
        assert time.monotonic() - gone >= 2.0 - 0.3       # not before the lease could have expired
        assert watch.both == 0 and holder(fake_api) == "replica-b"


@pytest.mark.parametrize("skew", [0.0, 20.0, -HOUR])
async def test_a_released_lease_is_taken_at_once_whatever_the_clocks(fake_api, tmp_path, skew):
    async with replicas(fake_api, tmp_path, Wall(), Wall(skew), lease=10, renew=6.0, retry=0.1) \
            as ((a, b), watch, start):
        run_a = start(a)
        await until(lambda: a.leading, what="a leads")
        start(b)
        await asyncio.sleep(0.3)
        a.stop()
        await run_a                                   # steps down: a lease with no holder
        stopped = time.monotonic()
        await until(lambda: b.leading, timeout=3, what="b takes the released lease")
        assert time.monotonic() - stopped < 1.0       # not the 10 s of the lease
        assert watch.both == 0 and holder(fake_api) == "replica-b"
        lease = fake_api.get("Lease", "quotient-system", "quotient")["spec"]
        assert lease["leaseDurationSeconds"] == 10 and lease["leaseTransitions"] == 1
