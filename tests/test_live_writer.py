"""The live writer (app/act/kube.py) and leader election (app/leader.py) against tests/fakeapi.py.

Writes are idempotent and retried; a PodDisruptionBudget's 429 is refused, not retried; victims
get a DisruptionTarget condition and an Event naming the preemptor; `kubectl get clusterqueues`
reads the status Quotient publishes. One replica leads; a leader that cannot renew steps down.
"""
from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from app.act.kube import KubeWriter
from app.act.writer import WriteError
from app.leader import LeaderElector
from app.objects.pod import decode_pod
from builders import Pod
from fakeapi import FakeApiServer


@pytest.fixture
async def fake(tmp_path):
    async with FakeApiServer() as api:
        client = await api.api_client(tmp_path)
        try:
            yield api, client
        finally:
            await client.close()


async def test_bind_writes_the_binding_and_a_retry_of_it_is_harmless(fake):
    api, client = fake
    api.apply(Pod("p").cpu("1").obj())
    writer = KubeWriter(client, state=None)
    pod = decode_pod(Pod("p").cpu("1").obj())
    await writer.bind(pod, "node-1")
    assert api.get("Pod", "team-a", "p")["spec"]["nodeName"] == "node-1"
    await writer.bind(pod, "node-1")                      # the API answers 409 naming our node: success
    with pytest.raises(WriteError, match="binding team-a/p to node-2"):
        await writer.bind(pod, "node-2")
    assert writer.failures["binding"] == 1


async def test_bind_is_retried_through_a_server_error(fake):
    api, client = fake
    api.apply(Pod("p").cpu("1").obj())
    api.fault("error", resource="pods", verb="write", times=1)
    await KubeWriter(client, state=None).bind(decode_pod(Pod("p").cpu("1").obj()), "node-1")
    assert api.get("Pod", "team-a", "p")["spec"]["nodeName"] == "node-1"


async def test_eviction_says_who_and_why_then_evicts_and_a_retry_is_harmless(fake):
    api, client = fake
    api.apply(Pod("victim").cpu("1").node("node-1").obj())
    writer = KubeWriter(client, state=None)
    victim = decode_pod(Pod("victim").cpu("1").node("node-1").obj())
    message = "Preempted to accommodate pod team-b/b1 (UID: uid-b1) due to reclamation within the cohort"
    status_writes = []
    await writer.evict(victim, "InCohortReclamation", message)
    assert api.get("Pod", "team-a", "victim") is None
    status_writes = [b for m, p, b in api.writes if p.endswith("/pods/victim/status")]
    assert status_writes and status_writes[0]["status"]["conditions"][0]["reason"] == "InCohortReclamation"
    events = api.objects("Event", "events.k8s.io/v1")
    assert any(e.get("reason") == "InCohortReclamation" and "uid-b1" in e.get("note", "") for e in events)
    await writer.evict(victim, "InCohortReclamation", message)       # already gone (404): success


async def test_an_eviction_never_takes_a_pod_recreated_under_the_victims_name(fake):
    """The victim's UID goes as the eviction's precondition: a StatefulSet's pod recreated under the same name
    in the meantime is not evicted in its place, and the eviction counts as done (its victim is gone)."""
    api, client = fake
    api.apply(Pod("web-0").cpu("1").node("node-1").obj())
    victim = decode_pod(api.get("Pod", "team-a", "web-0"))
    api.delete("Pod", "team-a", "web-0")
    successor = {**Pod("web-0").cpu("1").node("node-2").obj(),
                 "metadata": {**Pod("web-0").cpu("1").obj()["metadata"], "uid": "uid-new"}}
    api.apply(successor)
    await KubeWriter(client, state=None).evict(victim, "InCohortReclamation", "Preempted")
    assert api.get("Pod", "team-a", "web-0")["metadata"]["uid"] == "uid-new"      # still there
    (body,) = [b for m, p, b in api.writes if p.endswith("/pods/web-0/eviction")]
    assert body["deleteOptions"]["preconditions"]["uid"] == victim.uid


async def test_eviction_waits_for_the_condition_not_for_the_event(fake):
    """Issue 21: the eviction request follows the DisruptionTarget condition (on the pod before it goes),
    while the Event, about the pod, is written alongside: an Event the API is slow to take does not hold
    the eviction back, and is still written."""
    api, client = fake
    api.apply(Pod("victim").cpu("1").node("node-1").obj())
    writer = KubeWriter(client, state=None)
    api.fault("pause", resource="events", verb="write")
    evicting = asyncio.create_task(writer.evict(decode_pod(Pod("victim").cpu("1").node("node-1").obj()),
                                                "InClusterQueue", "m"))
    await api.paused_request()
    for _ in range(200):
        if api.get("Pod", "team-a", "victim") is None:
            break
        await asyncio.sleep(0.01)
    assert api.get("Pod", "team-a", "victim") is None            # evicted while the Event waits
    paths = [p for _, p, _ in api.writes]
    assert paths.index("/api/v1/namespaces/team-a/pods/victim/status") < \
        paths.index("/api/v1/namespaces/team-a/pods/victim/eviction")
    assert not evicting.done()                                    # evict() returns once the Event is written
    api.resume()
    await asyncio.wait_for(evicting, 5)
    assert [e["reason"] for e in api.objects("Event", "events.k8s.io/v1")] == ["InClusterQueue"]
    assert len(api.write_times) == len(api.writes)                # each write stamped with its arrival


async def test_eviction_refused_by_a_pod_disruption_budget_is_not_forced(fake):
    api, client = fake
    api.apply(Pod("guarded").cpu("1").label("app", "db").node("node-1").obj())
    api.apply({"apiVersion": "policy/v1", "kind": "PodDisruptionBudget",
               "metadata": {"name": "db", "namespace": "team-a"},
               "spec": {"minAvailable": 1, "selector": {"matchLabels": {"app": "db"}}}})
    writer = KubeWriter(client, state=None)
    with pytest.raises(WriteError, match="PodDisruptionBudget"):
        await writer.evict(decode_pod(Pod("guarded").cpu("1").label("app", "db").node("node-1").obj()),
                           "InClusterQueue", "m")
    assert api.get("Pod", "team-a", "guarded") is not None
    assert writer.failures["eviction"] == 1
    with pytest.raises(WriteError, match="PodDisruptionBudget"):     # the next reconcile tries again
        await writer.evict(decode_pod(Pod("guarded").cpu("1").label("app", "db").node("node-1").obj()),
                           "InClusterQueue", "m")
    events = [e for e in api.objects("Event", "events.k8s.io/v1") if e.get("reason") == "InClusterQueue"]
    assert len(events) == 1                                             # said once, not once per try


def reclaim_example(load_extender, api=None):
    """The reclaim example loaded as the extender's state; api given: its ClusterQueues exist there too."""
    ext = load_extender((Path(__file__).parents[2] / "shared" / "scenarios" / "examples" / "reclaim.yaml").read_text())
    for name in ext.state.cluster_queues if api is not None else ():
        api.apply({"apiVersion": "kueue.x-k8s.io/v1beta1", "kind": "ClusterQueue", "metadata": {"name": name},
                   "spec": {}})
    return ext


async def test_cluster_queue_status_tells_kubectl_the_usage(fake, load_extender):
    api, client = fake
    ext = reclaim_example(load_extender, api)
    written = await KubeWriter(client, ext.state).publish_status()
    assert written == 2
    status = api.get("ClusterQueue", None, "team-a-cq")["status"]
    usage = {r["name"]: r for f in status["flavorsUsage"] for r in f["resources"]}
    assert usage["cpu"]["total"] == "21000m" and usage["cpu"]["borrowed"] == "12000m"
    assert status["admittedWorkloads"] == 7 and status["fairSharing"]["weightedShare"] > 0


async def test_cluster_queue_status_counts_every_pending_pod_and_reserving_includes_admitted(fake, load_extender):
    """pendingWorkloads is the whole queue, not the maxQueueScan window decisions walk; reservingWorkloads
    counts every pod holding quota (Kueue: admitted workloads reserve quota too)."""
    api, client = fake
    ext = reclaim_example(load_extender, api)
    queued = {name: len(items) for name, items in ext.state.pending.items()}
    name = max(queued, key=queued.get)
    assert queued[name] >= 2
    ext.state.config.max_queue_scan = 1
    await KubeWriter(client, ext.state).publish_status()
    status = api.get("ClusterQueue", None, name)["status"]
    assert status["pendingWorkloads"] == queued[name]
    reserved = sum(r.charge.cluster_queue == name for r in ext.state.reservations.values())
    assert status["admittedWorkloads"] == len(ext.state.admitted.by_queue.get(name, ()))
    assert status["reservingWorkloads"] == reserved + status["admittedWorkloads"]


async def test_a_status_write_whose_connection_is_closed_is_sent_again(fake, load_extender):
    """The API server closes the connection of a ClusterQueue's status write (it is shutting down): the client
    sees the connection end (aiohttp's ServerDisconnectedError, no OSError). Before: it escaped the retries and
    the reconcile that published the status (the fault run found it); now it is retried as a timeout is."""
    api, client = fake
    ext = reclaim_example(load_extender, api)
    api.fault("close", resource="clusterqueues", verb="write")
    assert await KubeWriter(client, ext.state).publish_status() == 2
    assert all(api.get("ClusterQueue", None, name).get("status") for name in ext.state.cluster_queues)


async def test_cluster_queue_status_failure_is_counted_once(fake, load_extender):
    api, client = fake
    ext = reclaim_example(load_extender)
    api.fault("error", resource="clusterqueues", verb="write", times=100)
    writer = KubeWriter(client, ext.state)
    assert await writer.publish_status() == 0
    assert writer.failures["status"] == len(ext.state.cluster_queues)


@pytest.mark.parametrize("reason, action", [("LowerPriorityOnNode", "Preempt"), ("InClusterQueue", "Preempt"),
                                            ("PodsReadyTimeout", "Evict")])
async def test_eviction_event_action_says_preempt_for_every_preemption_reason(fake, reason, action):
    api, client = fake
    api.apply(Pod("victim").cpu("1").node("node-1").obj())
    await KubeWriter(client, state=None).evict(decode_pod(Pod("victim").cpu("1").node("node-1").obj()), reason, "m")
    events = [e for e in api.objects("Event", "events.k8s.io/v1") if e.get("reason") == reason]
    assert [e["action"] for e in events] == [action]


async def test_one_replica_leads_and_a_stopped_leader_hands_over(fake):
    api, client = fake
    a = LeaderElector(client, "quotient-system", "quotient", "replica-a", lease_seconds=1, renew_seconds=0.8,
                      retry_seconds=0.1)
    b = LeaderElector(client, "quotient-system", "quotient", "replica-b", lease_seconds=1, renew_seconds=0.8,
                      retry_seconds=0.1)
    run_a = asyncio.create_task(a.run())
    await asyncio.sleep(0.3)
    run_b = asyncio.create_task(b.run())
    await asyncio.sleep(0.5)
    assert a.leading and not b.leading
    a.stop()
    await run_a                                        # steps down: its lease is released at once
    for _ in range(40):
        if b.leading:
            break
        await asyncio.sleep(0.1)
    assert b.leading and not a.leading
    assert api.get("Lease", "quotient-system", "quotient")["spec"]["holderIdentity"] == "replica-b"
    b.stop()
    await run_b


async def test_a_renewal_whose_connection_is_closed_is_tried_again(fake):
    """The API server closes the connection of the leader's renewal (it is shutting down): aiohttp's
    ServerDisconnectedError (no OSError). Before: it escaped run(), the election task ended, and the replica never led again; now it is one
    failed try, and the next renews."""
    api, client = fake
    a = LeaderElector(client, "quotient-system", "quotient", "replica-a", lease_seconds=1, renew_seconds=0.8,
                      retry_seconds=0.1)
    run_a = asyncio.create_task(a.run())
    for _ in range(40):
        if a.leading:
            break
        await asyncio.sleep(0.05)
    assert a.leading
    api.fault("close", resource="leases", verb="write", times=2)     # aiohttp itself sends a PUT again once
    await asyncio.sleep(0.5)
    assert not api.faults                 # the renewal met it
    assert not run_a.done(), run_a
    for _ in range(40):
        if a.leading:
            break
        await asyncio.sleep(0.05)
    assert a.leading
    a.stop()
    await run_a


async def test_a_leader_that_cannot_renew_stops_leading_at_once(fake):
    api, client = fake
    a = LeaderElector(client, "quotient-system", "quotient", "replica-a", lease_seconds=2, renew_seconds=0.6,
                      retry_seconds=0.1)
    run_a = asyncio.create_task(a.run())
    await asyncio.sleep(0.3)
    assert a.leading
    api.fault("error", resource="leases", times=100)   # the apiserver fails every renewal
    await asyncio.sleep(1.0)
    assert not a.leading                               # before its 2 s lease could have expired elsewhere
    api.clear_faults()
    a.stop()
    await run_a


async def test_two_replicas_one_leads_and_hands_over(tmp_path):
    """High availability with the real CLI: two `quotient serve --kubeconfig --leader-elect` on one Lease;
    both are ready, exactly one answers the verbs, the standby answers 503; when the leader stops, the
    standby takes the lease and answers."""
    import time

    import httpx

    from serving import QUOTIENT_BIN, free_port

    async with FakeApiServer() as api:
        api.apply({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "team-a"}})
        procs, ports = [], []
        for name in ("replica-a", "replica-b"):
            port = free_port()
            log = open(tmp_path / f"{name}.log", "wb")
            procs.append(await asyncio.create_subprocess_exec(
                str(QUOTIENT_BIN), "serve", "--kubeconfig", api.kubeconfig_path(tmp_path), "--port", str(port),
                "--leader-elect", "--lease", "quotient-system/quotient", "--lease-seconds", "2",
                stdout=log, stderr=asyncio.subprocess.STDOUT, stdin=asyncio.subprocess.DEVNULL))
            ports.append(port)
            await asyncio.sleep(1.0 if name == "replica-a" else 0)
        body = {"Pod": {"metadata": {"name": "p", "namespace": "team-a", "uid": "u-p"}}, "Nodes": None,
                "NodeNames": []}
        try:
            async with httpx.AsyncClient(trust_env=False, timeout=5) as http:
                async def states() -> list:
                    out = []
                    for port in ports:
                        try:
                            ready = (await http.get(f"http://127.0.0.1:{port}/readyz")).status_code
                            verb = (await http.post(f"http://127.0.0.1:{port}/filter", json=body)).status_code
                        except httpx.TransportError:
                            ready = verb = None
                        out.append((ready, verb))
                    return out

                deadline = time.monotonic() + 20
                while set(await states()) != {(200, 200), (200, 503)}:
                    assert time.monotonic() < deadline, [(tmp_path / f).read_text() for f in ("replica-a.log",
                                                                                             "replica-b.log")]
                    await asyncio.sleep(0.2)
                leader = [s[1] for s in await states()].index(200)
                procs[leader].terminate()
                await procs[leader].wait()
                other = 1 - leader
                deadline = time.monotonic() + 20
                while (await states())[other] != (200, 200):
                    assert time.monotonic() < deadline, (tmp_path / "replica-b.log").read_text()
                    await asyncio.sleep(0.2)
        finally:
            for p in procs:
                if p.returncode is None:
                    p.terminate()
                    try:
                        await asyncio.wait_for(p.wait(), 10)
                    except asyncio.TimeoutError:
                        p.kill()
                        await p.wait()


async def test_the_environment_is_read_once_not_per_request(fake, tmp_path, monkeypatch):
    """Issue 21: the API client looks the environment's proxy up when it is made, not on every request
    (aiohttp's trust_env asks the environment and ~/.netrc in a worker thread per request, most of an
    eviction's CPU when 100 are written at once)."""
    import aiohttp.client

    from app.sync.apiserver import make_api_client

    api, _ = fake
    for var in ("HTTP_PROXY", "HTTPS_PROXY", "http_proxy", "https_proxy", "ALL_PROXY", "all_proxy"):
        monkeypatch.delenv(var, raising=False)
    monkeypatch.setenv("NO_PROXY", "127.0.0.1")
    lookups = []

    def no_proxy(url):
        lookups.append(url)
        raise LookupError("no proxy")
    monkeypatch.setattr(aiohttp.client, "get_env_proxy_for_url", no_proxy)
    client = await make_api_client(api.kubeconfig_path(tmp_path))
    try:
        api.apply(Pod("victim").cpu("1").node("node-1").obj())
        await KubeWriter(client,
                         state=None).evict(decode_pod(Pod("victim").cpu("1").node("node-1").obj()), "InClusterQueue",
                                           "m")
        assert api.get("Pod", "team-a", "victim") is None
        assert lookups == [] and client.rest_client.proxy is None
    finally:
        await client.close()


async def test_a_proxy_the_environment_names_is_kept(tmp_path, monkeypatch):
    """HTTP_PROXY (with its credentials) still applies to the API server, read once; NO_PROXY still exempts it."""
    from app.sync.apiserver import make_api_client

    for var in ("HTTPS_PROXY", "https_proxy", "ALL_PROXY", "all_proxy", "NO_PROXY", "no_proxy", "http_proxy"):
        monkeypatch.delenv(var, raising=False)
    monkeypatch.setenv("HTTP_PROXY", "http://user:secret@proxy.example:3128")
    monkeypatch.setenv("NETRC", str(tmp_path / "no-netrc"))
    server = FakeApiServer()          # not started: only its kubeconfig is read
    server.port = 6443
    client = await make_api_client(server.kubeconfig_path(tmp_path))
    try:
        assert client.rest_client.proxy == "http://proxy.example:3128"
        assert client.rest_client.proxy_headers["Proxy-Authorization"].startswith("Basic ")
        assert not client.rest_client.pool_manager.trust_env
    finally:
        await client.close()
    monkeypatch.setenv("NO_PROXY", "127.0.0.1")
    client = await make_api_client(server.kubeconfig_path(tmp_path))
    try:
        assert client.rest_client.proxy is None
    finally:
        await client.close()


async def test_a_gate_removal_is_one_patch_that_keeps_other_gates_and_names_its_pod(fake):
    """Issue 32: the gate's removal is written as ready bytes on Quotient's own connections (as the Binding is),
    a strategic merge patch that deletes Kueue's gate alone; the pod's uid is its precondition, so a pod
    recreated under the name is not ungated on a decision made for another."""
    api, client = fake
    obj = Pod("g").cpu("1").gated("kueue.x-k8s.io/admission", "example.com/other").obj()
    api.apply(obj)
    writer = KubeWriter(client, state=None)
    await writer.ungate(decode_pod(api.get("Pod", "team-a", "g")))
    assert api.get("Pod", "team-a", "g")["spec"]["schedulingGates"] == [{"name": "example.com/other"}]
    assert writer.poster is not None and writer.poster.idle     # written on a kept-alive connection of its own

    stale = decode_pod(api.get("Pod", "team-a", "g"))
    api.delete("Pod", "team-a", "g")
    api.apply(Pod("g").cpu("1").uid("uid-again").gated().obj())     # recreated: another uid
    with pytest.raises(WriteError, match="removing the admission gate of team-a/g: HTTP 422"):
        await writer.ungate(stale)
    assert api.get("Pod", "team-a", "g")["spec"]["schedulingGates"] == [{"name": "kueue.x-k8s.io/admission"}]


async def test_through_a_proxy_the_gate_removal_and_the_binding_are_written(fake):
    """With a proxy configured the writes go through the ApiClient's session, method and content type kept (the
    fake API answers an absolute-form request as a forward proxy passes it on)."""
    api, client = fake
    api.apply(Pod("g").cpu("1").gated().obj())
    client.rest_client.proxy = api.url
    writer = KubeWriter(client, state=None)
    await writer.ungate(decode_pod(api.get("Pod", "team-a", "g")))
    assert not api.get("Pod", "team-a", "g")["spec"].get("schedulingGates")
    await writer.bind(decode_pod(api.get("Pod", "team-a", "g")), "node-1")
    assert api.get("Pod", "team-a", "g")["spec"]["nodeName"] == "node-1"
    assert writer.poster is None                                 # nothing went on Quotient's own connections
