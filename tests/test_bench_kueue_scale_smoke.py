"""tests/bench/bench_kueue_scale.py in a tiny mode (36 workloads in one cohort of 6 ClusterQueues): the fake
API, `quotient serve` and the kube-scheduler queue model run end to end; the test reads what it printed.
Nothing is timed: every workload must be admitted, within quota, with every verb answered."""
import re
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]


def test_kueue_baseline_replays_end_to_end_in_a_tiny_mode():
    done = subprocess.run([sys.executable, str(REPO / "tests" / "bench" / "bench_kueue_scale.py"), "--scale", "0.002",
                           "--timeout", "150"], capture_output=True, text=True, timeout=240, cwd=str(REPO))
    out = done.stdout + done.stderr
    assert done.returncode == 0, out
    assert "quotient: 36/36 workloads admitted" in out and "TIMED OUT" not in out, out
    peak, quota = map(int, re.search(r"peak cpu bound at once (\d+) \(the cohorts' nominal quota (\d+)\)", out).groups())
    assert 0 < peak <= quota, out
    outcomes = re.search(r"outcomes: (.*)", out).group(1)
    assert "transport error" not in outcomes and "HTTP" not in outcomes, out
    assert re.search(r"API errors 0\b", out), out
    for cls in ("small", "medium", "large"):
        assert re.search(rf"{cls}\s+time to admission avg\s+[\d.]+ s", out), out


def test_the_gated_design_runs_pregated_and_says_which_design_ran():
    """--pregated at a tiny scale: pods are created with Kueue's admission gate and kube-scheduler's model parks
    them without a filter call. What is admitted then depends on Quotient's ungate loop (the lead's side), so
    this asserts only the bench's own side: the design printed, every pod seen gated, none filtered while gated,
    no API error. Once the ungate loop lands, tighten it to 36/36 admitted like the extender run."""
    done = subprocess.run([sys.executable, str(REPO / "tests" / "bench" / "bench_kueue_scale.py"), "--scale", "0.002",
                           "--timeout", "20", "--pregated"], capture_output=True, text=True, timeout=240, cwd=str(REPO))
    out = done.stdout + done.stderr
    assert done.returncode == 0, out
    assert "design: gated (--pregated: pods created gated, no webhook)" in out, out
    gated, ungated = map(int, re.search(r"pods gated (\d+), ungated (\d+)", out).groups())
    assert gated == 36, out
    calls = int(re.search(r"filter calls (\d+) = ", out).group(1))
    admitted = int(re.search(r"quotient-gated-pregated: (\d+)/36 workloads admitted", out).group(1))
    assert admitted <= ungated and calls >= admitted, out   # only an ungated pod is ever filtered and bound
    assert re.search(r"API errors 0\b", out), out


async def test_the_queue_model_parks_gated_pods_untried_and_queues_an_ungated_one_at_once(tmp_path):
    """kube-scheduler's queue for gated pods, in-process against the fake API and a stub extender that admits
    everything: a gated pod gets no filter call however long it waits; removing its gate (the lead's strategic
    merge PATCH) puts it in activeQ at once, with no backoff, and it is bound."""
    import asyncio

    import orjson
    from aiohttp import ClientSession, web

    sys.path.insert(0, str(REPO / "tests" / "bench"))
    import bench_kueue_scale as bench
    from fakeapi import FakeApiServer

    filtered = []
    async with FakeApiServer() as api:
        async def filter_(request):
            body = orjson.loads(await request.read())
            filtered.append(body["Pod"]["metadata"]["name"])
            return web.json_response({"NodeNames": body["NodeNames"]})

        async def bind(request):
            b = orjson.loads(await request.read())
            async with ClientSession(headers={"Authorization": f"Bearer {api.token}"}) as s:
                async with s.post(f"{api.url}/api/v1/namespaces/{b['PodNamespace']}/pods/{b['PodName']}/binding",
                                  json={"metadata": {"name": b["PodName"], "uid": b["PodUID"]},
                                        "target": {"kind": "Node", "name": b["Node"]}}) as r:
                    ok = r.status == 201
            return web.json_response({} if ok else {"Error": "binding failed"})
        app = web.Application()
        app.router.add_post("/filter", filter_)
        app.router.add_post("/bind", bind)
        runner = web.AppRunner(app)
        await runner.setup()
        site = web.TCPSite(runner, "127.0.0.1", 0)
        await site.start()
        port = site._server.sockets[0].getsockname()[1]
        sched = bench.Scheduler(api.url, api.token, port, ["node-000"], pregated=True)
        tasks = [asyncio.ensure_future(t) for t in (sched.informer(), sched.flusher(), sched.run())]
        try:
            await asyncio.sleep(0.3)
            wl = bench.Workload("small", "team-a", "w1", 0.0, 60.0, 1, 50)
            await sched.create(wl, "w1")
            await asyncio.sleep(1.5)
            p = sched.pods[("team-a", "w1")]
            assert p.where == "gated" and filtered == [] and p.attempts == 0 and sched.stats.gated == 1
            uid = api.get("Pod", "team-a", "w1")["metadata"]["uid"]
            async with ClientSession(headers={"Authorization": f"Bearer {api.token}"}) as s:
                async with s.patch(f"{api.url}/api/v1/namespaces/team-a/pods/w1", data=orjson.dumps(
                        {"metadata": {"uid": uid}, "spec": {"schedulingGates": [
                            {"$patch": "delete", "name": bench.ADMISSION_GATE}]}}),
                        headers={"Content-Type": "application/strategic-merge-patch+json"}) as r:
                    assert r.status == 200, await r.text()
            for _ in range(50):
                if p.where == "bound":
                    break
                await asyncio.sleep(0.02)
            assert p.where == "bound" and filtered == ["w1"] and p.attempts == 1, (p.where, filtered)
            assert sched.stats.ungated == 1 and len(sched.stats.ungate_to_bind) == 1
            assert sched.stats.ungate_to_bind[0] < 0.9        # no backoff: well under the 1 s first backoff
            assert api.get("Pod", "team-a", "w1")["spec"]["nodeName"] == "node-000"
        finally:
            for t in tasks + list(sched.tasks):
                t.cancel()
            await asyncio.gather(*tasks, *sched.tasks, return_exceptions=True)
            await sched.http.close()
            await runner.cleanup()
