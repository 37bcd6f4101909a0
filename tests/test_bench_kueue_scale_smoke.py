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


def test_the_gated_design_admits_every_workload_through_the_webhook_and_the_ungate_loop():
    """--gates at a tiny scale: the fake API calls Quotient's /mutate-pods at each pod's creation, kube-scheduler's
    model parks the gated pods untried, Quotient removes the gates of those its ClusterQueues admit, and every
    workload is admitted within quota; a pod is filtered only once ungated."""
    done = subprocess.run([sys.executable, str(REPO / "tests" / "bench" / "bench_kueue_scale.py"), "--scale", "0.002",
                           "--timeout", "150", "--gates"], capture_output=True, text=True, timeout=240, cwd=str(REPO))
    out = done.stdout + done.stderr
    assert done.returncode == 0, out
    assert re.search(r": 36/36 workloads admitted", out) and "TIMED OUT" not in out, out
    calls, failures = map(int, re.search(r"webhook: (\d+) AdmissionReviews, (\d+) failed", out).groups())
    assert calls >= 36 and failures == 0, out
    gated, ungated = map(int, re.search(r"pods gated (\d+), ungated (\d+)", out).groups())
    assert gated >= 36 and ungated == gated, out         # every pod came gated (an evicted one anew) and was let go
    peak, quota = map(int, re.search(r"peak cpu bound at once (\d+) \(the cohorts' nominal quota (\d+)\)", out).groups())
    assert 0 < peak <= quota, out
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
