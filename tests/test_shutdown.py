"""SIGTERM (a rollout, a drained node): `quotient serve` stops serving and then cleans up before it exits, so the
leader's Lease is released at once for a quick hand-over (deploy/README.md), rather than the process being
killed by the signal uvicorn raised again once it stopped."""
from __future__ import annotations

import asyncio

from fakeapi import FakeApiServer
from serving import served_live


async def test_sigterm_releases_the_leaders_lease_and_exits_cleanly(tmp_path):
    async with FakeApiServer() as api:
        async with served_live(api, tmp_path, "--leader-elect", "--lease", "quotient-system/quotient",
                               "--lease-seconds", "15") as (proc, _, log_path):     # ready = leading
            lease = api.get("Lease", "quotient-system", "quotient", "coordination.k8s.io/v1")
            assert lease["spec"]["holderIdentity"]
            proc.terminate()
            assert await asyncio.wait_for(proc.wait(), 10) == 0, log_path.read_text()
            spec = api.get("Lease", "quotient-system", "quotient", "coordination.k8s.io/v1")["spec"]
            # released as client-go releases: no holder (another replica takes it at once, whatever its clock)
            assert not spec.get("holderIdentity") and spec["leaseDurationSeconds"] == 1, \
                f"the Lease was not released: {spec}"
