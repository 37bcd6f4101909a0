"""High availability as Kubernetes components do it (issue 33 item 4): every replica that has listed the cluster
is Ready (/readyz "ok: leader" / "ok: standby"), and the leader labels its own pod `quotient.dev/leader: "true"`
so that Service `quotient`, which selects that label, sends kube-scheduler's verbs to it alone.

Before, only the leader was Ready (a Deployment of 2 showed 1/2 for ever, no PodDisruptionBudget was possible)
and no pod was ever labelled. The label is judged on the fake API's own Pod objects; the two-replica test runs
two real `quotient serve --leader-elect` processes with POD_NAME naming pods that exist in the fake API."""
from __future__ import annotations

import asyncio
import os
import time

import httpx
import pytest

from app.leader import LeaderElector
from app.leader_label import LABEL, LeaderLabel
from app.observe.metrics import Metrics
from app.state.cluster import ClusterState
from builders import ClusterQueue, FlavorQuotas, LocalQueue, Namespace, Node, Pod, ResourceFlavor
from fakeapi import FakeApiServer
from live import until
from serving import QUOTIENT_BIN, free_port, stop
from test_watch import api_client, fake_api  # noqa: F401  (fixtures)

NS = "quotient-system"
LEASE = ("Lease", NS, "quotient", "coordination.k8s.io/v1")


def replica_pod(name: str, labels: dict | None = None) -> dict:
    """A pod of the Deployment as the API holds it (the replica reads its own name from POD_NAME)."""
    return {"apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": name, "namespace": NS,
                         "labels": {"app.kubernetes.io/name": "quotient", **(labels or {})}},
            "spec": {"nodeName": "n1", "containers": [{"name": "quotient", "image": "quotient"}]},
            "status": {"phase": "Running"}}


def labelled(api: FakeApiServer) -> list[str]:
    """The pods Service `quotient` would select: app.kubernetes.io/name=quotient and quotient.dev/leader=true."""
    return [p["metadata"]["name"] for p in api.objects("Pod")
            if (p["metadata"].get("labels") or {}).get(LABEL) == "true"]


def cluster(api: FakeApiServer) -> None:
    """A queue with room and a real pending pod for filter to admit."""
    for obj in (Namespace(NS).obj(), Namespace("team-a").obj(), Node("n1").cpu("64").obj(),
                ResourceFlavor("default-flavor").obj(),
                ClusterQueue("cq").resource_group(FlavorQuotas("default-flavor").resource("cpu", "8")).obj(),
                LocalQueue("q", "team-a").cluster_queue("cq").obj(), Pod("pending").queue("q").cpu("1").obj()):
        api.apply(obj)


async def spawn(api: FakeApiServer, tmp_path, pod: str | None, *args: str, env: dict | None = None):
    """`quotient serve --kubeconfig ... --leader-elect` on a free port as the replica in `pod`; (proc, port, log)."""
    port, log_path = free_port(), tmp_path / f"{pod or 'local'}-{time.monotonic_ns()}.log"
    environment = {k: v for k, v in os.environ.items() if k not in ("POD_NAME", "POD_NAMESPACE")}
    if pod:
        environment.update(POD_NAME=pod, POD_NAMESPACE=NS)
    environment.update(env or {})
    with open(log_path, "wb") as log:
        proc = await asyncio.create_subprocess_exec(
            str(QUOTIENT_BIN), "serve", "--kubeconfig", api.kubeconfig_path(tmp_path), "--host", "127.0.0.1",
            "--port", str(port), "--leader-elect", "--lease-seconds", "2", *args, env=environment,
            stdout=log, stderr=asyncio.subprocess.STDOUT, stdin=asyncio.subprocess.DEVNULL)
    return proc, port, log_path


def filter_body(api: FakeApiServer) -> dict:
    return {"Pod": api.get("Pod", "team-a", "pending"), "Nodes": None, "NodeNames": ["n1"]}


async def test_every_synced_replica_is_ready_and_only_the_leaders_pod_is_labelled_until_it_goes(tmp_path):
    """Two replicas: both Ready (one "ok: leader", one "ok: standby"), exactly the leader's pod labelled, the
    standby answering the verbs 503; SIGTERM to the leader: its label is removed, the other takes the Lease,
    labels its own pod and answers the verbs."""
    async with FakeApiServer() as api:
        cluster(api)
        for name in ("quotient-a", "quotient-b"):
            api.apply(replica_pod(name))
        replicas = {name: await spawn(api, tmp_path, name) for name in ("quotient-a", "quotient-b")}
        logs = lambda: "\n".join(f"--- {n}\n{r[2].read_text()}" for n, r in replicas.items())  # noqa: E731
        try:
            async with httpx.AsyncClient(trust_env=False, timeout=5) as http:
                async def readyz(name: str):
                    try:
                        r = await http.get(f"http://127.0.0.1:{replicas[name][1]}/readyz")
                    except httpx.TransportError:
                        return None
                    return r.status_code, r.text

                async def verb(name: str) -> int:
                    r = await http.post(f"http://127.0.0.1:{replicas[name][1]}/filter", json=filter_body(api))
                    return r.status_code

                deadline = time.monotonic() + 30
                while sorted([await readyz("quotient-a"), await readyz("quotient-b")], key=str) != \
                        [(200, "ok: leader"), (200, "ok: standby")] or len(labelled(api)) != 1:
                    assert time.monotonic() < deadline, (labelled(api), logs())
                    await asyncio.sleep(0.1)
                holder = api.get(*LEASE)["spec"]["holderIdentity"]
                assert labelled(api) == [holder], logs()
                assert await readyz(holder) == (200, "ok: leader")
                standby = next(n for n in replicas if n != holder)
                assert await verb(holder) == 200
                r = await http.post(f"http://127.0.0.1:{replicas[standby][1]}/filter", json=filter_body(api))
                assert r.status_code == 503 and "not the leader" in r.json()["error"]
                # a caller that reached the standby (the Service not yet updated) is sent to reconnect
                assert r.headers.get("connection") == "close"

                proc = replicas[holder][0]
                proc.terminate()
                assert await asyncio.wait_for(proc.wait(), 15) == 0, logs()
                # the old leader removed its label before exiting (the Service has no endpoint left on it)
                assert holder not in labelled(api), logs()
                await until(lambda: labelled(api) == [standby], timeout=15, what=f"{standby} labelled")
                assert api.get(*LEASE)["spec"]["holderIdentity"] == standby
                assert await readyz(standby) == (200, "ok: leader")
                assert await verb(standby) == 200
        finally:
            for proc, _, _ in replicas.values():
                await stop(proc)


async def test_without_pod_name_no_pod_is_labelled(tmp_path):
    """A local run (or a test) with --leader-elect and no POD_NAME leads but labels nothing."""
    async with FakeApiServer() as api:
        cluster(api)
        api.apply(replica_pod("quotient-a"))
        proc, port, log = await spawn(api, tmp_path, None)
        try:
            async with httpx.AsyncClient(trust_env=False, timeout=5) as http:
                deadline = time.monotonic() + 20
                while True:
                    try:
                        if (await http.get(f"http://127.0.0.1:{port}/readyz")).text == "ok: leader":
                            break
                    except httpx.TransportError:
                        pass
                    assert time.monotonic() < deadline, log.read_text()
                    await asyncio.sleep(0.1)
        finally:
            await stop(proc)
        assert not [w for w in api.writes if "/pods/" in w[1]] and labelled(api) == []


async def test_empty_pod_namespace_is_unset_so_the_lease_is_in_quotient_system(tmp_path):
    """POD_NAMESPACE= (empty) is treated as unset: the Lease and the pod are looked for in quotient-system,
    not in the namespace "" (which made every Lease request fail)."""
    async with FakeApiServer() as api:
        cluster(api)
        api.apply(replica_pod("quotient-a"))
        proc, port, log = await spawn(api, tmp_path, "quotient-a", env={"POD_NAMESPACE": ""})
        try:
            await until(lambda: labelled(api) == ["quotient-a"], timeout=20, what="quotient-a labelled")
        finally:
            await stop(proc)
        assert api.get(*LEASE) is not None, log.read_text()


# ---- the label alone, against the fake API in-process ------------------------------------------------------

class Leading:
    """A stand-in for LeaderElector.leading that a test switches."""

    def __init__(self, now: bool = False):
        self.now = now

    def __call__(self) -> bool:
        return self.now


async def test_a_restarted_container_removes_the_label_its_pod_kept(fake_api, api_client):
    """A container restarted in place keeps its pod's labels: at start, not leading, the label goes."""
    fake_api.apply(replica_pod("quotient-a", {LABEL: "true"}))
    label = LeaderLabel(api_client, NS, "quotient-a", Leading(False), retry_seconds=0.05)
    task = asyncio.create_task(label.run())
    try:
        await until(lambda: labelled(fake_api) == [], what="stale label removed")
    finally:
        label.stop()
        await task
    assert fake_api.get("Pod", NS, "quotient-a")["metadata"]["labels"] == {"app.kubernetes.io/name": "quotient"}


@pytest.mark.parametrize("fault", ["error", "close"])
async def test_a_failed_patch_is_counted_and_retried_while_leading(fake_api, api_client, fault):
    """The label PATCH fails twice (500, or its connection closed by a server shutting down: before, aiohttp's
    ServerDisconnectedError ended the label's task): counted in quotient_leader_label_failures_total, retried,
    then set; leadership lost (a renewal that failed): the label is removed; stopping leaves it removed."""
    fake_api.apply(replica_pod("quotient-a"))
    metrics = Metrics(ClusterState())
    leading = Leading(True)
    fake_api.fault(fault, resource="pods", verb="write", times=2)
    label = LeaderLabel(api_client, NS, "quotient-a", leading, retry_seconds=0.05, poll=0.05, metrics=metrics)
    task = asyncio.create_task(label.run())
    try:
        await until(lambda: labelled(fake_api) == ["quotient-a"], what="label set after two failures")
        assert metrics.registry.get_sample_value("quotient_leader_label_failures_total") == 2
        leading.now = False
        await until(lambda: labelled(fake_api) == [], what="label removed once not leading")
        leading.now = True
        await until(lambda: labelled(fake_api) == ["quotient-a"], what="label set again")
    finally:
        label.stop()
        await task
    assert labelled(fake_api) == []


async def test_a_leader_whose_renewals_fail_removes_its_label(fake_api, api_client):
    """The elector and the label together: once the Lease cannot be renewed, leading lapses and the label goes
    (the pods are still writable: the lease is the one failing)."""
    fake_api.apply(replica_pod("quotient-a"))
    elector = LeaderElector(api_client, NS, "quotient", "quotient-a", lease_seconds=1.5, renew_seconds=1.0,
                            retry_seconds=0.2)
    label = LeaderLabel(api_client, NS, "quotient-a", lambda: elector.leading, retry_seconds=0.05)
    elector.on_change = label.wake
    tasks = [asyncio.create_task(elector.run()), asyncio.create_task(label.run())]
    try:
        await until(lambda: labelled(fake_api) == ["quotient-a"], what="leader labelled")
        fake_api.fault("error", resource="leases", times=1000)
        await until(lambda: labelled(fake_api) == [], timeout=5, what="label removed after failed renewals")
        assert not elector.leading
    finally:
        fake_api.clear_faults()
        elector.stop()
        label.stop()
        await asyncio.gather(*tasks)


@pytest.mark.parametrize("patch_type", ["application/merge-patch+json", "application/strategic-merge-patch+json"])
async def test_the_fake_api_patches_pod_labels_and_reports_it_to_watches(fake_api, patch_type):
    """tests/fakeapi.py: a PATCH of metadata.labels merges (null removes a label) and a pods watch sees it."""
    fake_api.apply(replica_pod("quotient-a", {"keep": "yes", "gone": "soon"}))
    async with httpx.AsyncClient(base_url=fake_api.url, trust_env=False, timeout=5,
                                 headers={"Authorization": f"Bearer {fake_api.token}"}) as http:
        rv = fake_api.get("Pod", NS, "quotient-a")["metadata"]["resourceVersion"]
        async with http.stream("GET", f"/api/v1/namespaces/{NS}/pods", params={"watch": "1", "resourceVersion": rv}) \
                as watch:
            r = await http.patch(f"/api/v1/namespaces/{NS}/pods/quotient-a", headers={"Content-Type": patch_type},
                                 content=b'{"metadata":{"labels":{"gone":null,"' + LABEL.encode() + b'":"true"}}}')
            assert r.status_code == 200
            lines = watch.aiter_lines()
            event = __import__("orjson").loads(await asyncio.wait_for(lines.__anext__(), 5))
    assert event["type"] == "MODIFIED"
    assert event["object"]["metadata"]["labels"] == {"app.kubernetes.io/name": "quotient", "keep": "yes", LABEL: "true"}


async def test_a_leader_cut_off_from_the_api_keeps_its_label_answers_503_and_removes_it_once_back(fake_api, tmp_path):
    """A partition (the old leader reaches no API server, the standby does): the old leader cannot remove its
    label, so the Service has two endpoints; the old one no longer leads (its renewals fail) and answers the
    verbs 503 with the connection closed, so the caller's next connection may reach the new leader. Once the
    API is reachable again the stale label goes."""
    from app.api.app import create_app
    from app.scheduler.scheduler import Scheduler
    from app.act.writer import SnapshotWriter
    from app.sync.apiserver import make_api_client

    path = fake_api.kubeconfig_path(tmp_path)
    parts = []
    for name in ("quotient-a", "quotient-b"):
        fake_api.apply(replica_pod(name))
        client = await make_api_client(path)
        client.user_agent = f"quotient/{name}"
        elector = LeaderElector(client, NS, "quotient", name, lease_seconds=1.5, renew_seconds=1.0, retry_seconds=0.1)
        label = LeaderLabel(client, NS, name, lambda e=elector: e.leading, retry_seconds=0.1, poll=0.1)
        elector.on_change = label.wake
        parts.append((client, elector, label))
    (client_a, a, label_a), (client_b, b, label_b) = parts
    tasks = [asyncio.create_task(a.run()), asyncio.create_task(label_a.run())]
    try:
        await until(lambda: labelled(fake_api) == ["quotient-a"], what="a leads and is labelled")
        tasks += [asyncio.create_task(b.run()), asyncio.create_task(label_b.run())]
        fake_api.fault("error", agent="quotient-a", code=503, times=10**6)       # a is cut off
        await until(lambda: labelled(fake_api) == ["quotient-a", "quotient-b"], timeout=10,
                    what="b labelled while a's label stays")
        assert not a.leading and b.leading
        state = ClusterState()
        app = create_app(Scheduler(state, SnapshotWriter(state)), leading=lambda: a.leading)
        async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://a") as http:
            r = await http.post("/filter", json={"Pod": replica_pod("x"), "Nodes": None, "NodeNames": ["n1"]})
        assert r.status_code == 503 and r.headers["connection"] == "close"
        fake_api.clear_faults()                                                   # the partition heals
        await until(lambda: labelled(fake_api) == ["quotient-b"], timeout=10, what="a's stale label removed")
        assert b.leading and not a.leading
    finally:
        fake_api.clear_faults()
        for _, elector, label in parts:
            elector.stop()
            label.stop()
        await asyncio.gather(*tasks)
        for client, _, _ in parts:
            await client.close()
