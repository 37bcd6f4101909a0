"""SIGTERM (a rollout, a drained node): `quotient serve` stops serving and then cleans up before it exits, so the
leader's Lease is released at once for a quick hand-over (deploy/README.md), rather than the process being
killed by the signal uvicorn raised again once it stopped."""
from __future__ import annotations

import asyncio
from datetime import datetime, timezone

import httpx

from fakeapi import FakeApiServer
from serving import QUOTIENT_BIN, free_port, stop


async def test_sigterm_releases_the_leaders_lease_and_exits_cleanly(tmp_path):
    async with FakeApiServer() as api:
        port = free_port()
        log_path = tmp_path / "serve.log"
        with open(log_path, "wb") as log:
            proc = await asyncio.create_subprocess_exec(
                str(QUOTIENT_BIN), "serve", "--kubeconfig", api.kubeconfig_path(tmp_path), "--host", "127.0.0.1",
                "--port", str(port), "--leader-elect", "--lease", "quotient-system/quotient", "--lease-seconds", "15",
                stdout=log, stderr=asyncio.subprocess.STDOUT, stdin=asyncio.subprocess.DEVNULL)
        try:
            async with httpx.AsyncClient(trust_env=False, timeout=5) as http:
                for _ in range(150):        # ready = leading (the Service's only endpoint is the leader)
                    try:
                        if (await http.get(f"http://127.0.0.1:{port}/readyz")).status_code == 200:
                            break
                    except httpx.TransportError:
                        pass
                    assert proc.returncode is None, log_path.read_text()
                    await asyncio.sleep(0.1)
            lease = api.get("Lease", "quotient-system", "quotient", "coordination.k8s.io/v1")
            assert lease["spec"]["holderIdentity"]
            proc.terminate()
            assert await asyncio.wait_for(proc.wait(), 10) == 0, log_path.read_text()
            spec = api.get("Lease", "quotient-system", "quotient", "coordination.k8s.io/v1")["spec"]
            renewed = datetime.fromisoformat(spec["renewTime"].replace("Z", "+00:00"))
            expired_for = (datetime.now(timezone.utc) - renewed).total_seconds() - spec["leaseDurationSeconds"]
            assert expired_for > 0, f"the Lease was not released: {spec}"
        finally:
            await stop(proc)
