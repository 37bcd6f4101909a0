"""The live source (app/sync/watch.py) against the fake API server (tests/fakeapi.py) on 127.0.0.1.

Issue "Sync (kubernetes-asyncio)" and its "Proof" and "Bad input" sections: list then watch with
bookmarks, readiness gating, events applied once each in order through drops, garbage, 500s,
hangs and 410 relists, invalid objects skipped and counted, and a seeded fault storm after which
the state equals the state a fresh list builds.
"""
from __future__ import annotations

import asyncio
import random
import time

import httpx
import pytest

from app.act.writer import SnapshotWriter
from app.api.app import create_app
from app.scheduler.scheduler import Scheduler
from app.observe import attach
from app.state.cluster import ClusterState
from app.sync.apiserver import make_api_client
from app.sync.resources import RESOURCES, Resource
from app.sync.watch import WatchSource
from fakeapi import FakeApiServer
from builders import ClusterQueue, FlavorQuotas, LocalQueue, Namespace, Node, Pod, ResourceFlavor
from helpers import CPU
from live import FAST, Running, fingerprint, fresh_state, until


@pytest.fixture
async def fake_api():
    async with FakeApiServer(bookmark_interval=0.3) as api:
        yield api


@pytest.fixture
async def api_client(fake_api, tmp_path):
    client = await make_api_client(fake_api.kubeconfig_path(tmp_path))
    yield client
    await client.close()


def seed(api: FakeApiServer, pods: int = 0) -> None:
    for obj in (Namespace("team-a").obj(), Namespace("team-b").obj(), Node("n1").cpu("64").obj(),
                Node("n2").cpu("64").obj(),
                ResourceFlavor("default-flavor").obj(),
                ClusterQueue("cq-a").resource_group(FlavorQuotas("default-flavor").resource("cpu", "100")).obj(),
                ClusterQueue("cq-b").resource_group(FlavorQuotas("default-flavor").resource("cpu", "100")).obj(),
                LocalQueue("lq", "team-a").cluster_queue("cq-a").obj(),
                LocalQueue("lq", "team-b").cluster_queue("cq-b").obj()):
        api.apply(obj)
    for i in range(pods):
        api.apply(Pod(f"p{i}").queue("lq").cpu("1").node("n1").phase("Running").obj())


def cq_cpu(state: ClusterState, name: str) -> int:
    return sum(v for (f, r), v in state.tree.queues[name].usage.items() if r == "cpu") if name in state.tree.queues \
        else 0


# ---- list, readiness, events -----------------------------------------------------------------

async def test_initial_list_builds_state_and_gates_readiness(fake_api, api_client):
    """Sync: /readyz is 503 until every initial list is applied, 200 after; the list is paged."""
    seed(fake_api, pods=5)
    fake_api.fault("hang", resource="clusterqueues", verb="list")
    state = ClusterState()
    extender = Scheduler(state, SnapshotWriter(state))
    async with Running(api_client, state, request_timeout=30.0) as source:
        app = create_app(extender, ready=lambda: source.health.ready)
        async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://127.0.0.1") as http:
            await until(lambda: any(p.endswith("/pods") for _, p, _ in fake_api.requests), what="pods listed")
            await until(lambda: fake_api.hanging, what="the clusterqueues list held")
            assert not source.health.ready
            assert (await http.get("/readyz")).status_code == 503
            assert not state.cluster_queues        # nothing half-applied while one list is missing
            fake_api.release()                     # the hung list answers 503; the source lists again
            await until(lambda: source.health.ready, what="ready")
            assert (await http.get("/readyz")).status_code == 200
        assert source.health.alive
    assert sorted(state.nodes) == ["n1", "n2"]
    assert sorted(state.cluster_queues) == ["cq-a", "cq-b"]
    assert sorted(state.local_queues) == ["team-a/lq", "team-b/lq"]
    assert len(state.pods) == 5 and cq_cpu(state, "cq-a") == 5 * CPU
    assert source.kinds["ClusterQueue"].errors["http 503"] == 1
    pod_lists = [q for m, p, q in fake_api.requests if p == "/api/v1/pods" and "watch" not in q]
    assert len(pod_lists) == 2 and pod_lists[1].get("continue")     # 5 pods in pages of 3
    assert not source.health.alive                                     # stopped


async def test_events_applied_in_order(fake_api, api_client):
    seed(fake_api)
    async with Running(api_client) as source:
        await until(lambda: source.health.ready)
        state = source.state
        fake_api.apply(Pod("a").queue("lq").cpu("1").phase("Pending").obj())
        await until(lambda: "team-a/a" in state.store.uid_by_key, what="ADDED")
        assert cq_cpu(state, "cq-a") == 0
        fake_api.apply(Pod("a").queue("lq").cpu("1").node("n2").phase("Running").obj())
        await until(lambda: cq_cpu(state, "cq-a") == CPU, what="MODIFIED")
        assert state.pods["uid-team-a-a"].node_name == "n2"
        fake_api.delete("Pod", "team-a", "a")
        await until(lambda: not state.pods, what="DELETED")
        assert cq_cpu(state, "cq-a") == 0
        fake_api.apply(ClusterQueue("cq-a").resource_group(FlavorQuotas("default-flavor").resource("cpu", "7")).obj())
        await until(lambda: state.tree.queues["cq-a"].quotas[("default-flavor", "cpu")].nominal == 7 * CPU,
                    what="ClusterQueue MODIFIED")
        assert source.kinds["Pod"].events["ADDED"] == 1 and source.kinds["Pod"].events["MODIFIED"] == 1
        assert source.kinds["Pod"].events["DELETED"] == 1


async def test_bookmarks_advance_resource_version(fake_api, api_client):
    seed(fake_api)
    async with Running(api_client) as source:
        await until(lambda: source.health.ready)
        start = int(source.kinds["Node"].rv)
        for i in range(3):
            fake_api.apply(Pod(f"x{i}").queue("lq").cpu("1")
                               .obj())            # other kinds move the global resourceVersion
        fake_api.bookmark()
        await until(lambda: int(source.kinds["Node"].rv) == fake_api.rv, what="bookmark")
        assert int(source.kinds["Node"].rv) > start and source.kinds["Node"].events["BOOKMARK"] >= 1
        # the next node watch starts from the bookmark, not from the list
        fake_api.drop_watches()
        await until(lambda: any(p == "/api/v1/nodes" and q.get("resourceVersion") == str(fake_api.rv)
                                for _, p, q in fake_api.requests), what="watch from bookmark")
        assert all(q.get("allowWatchBookmarks") == "true" for _, p, q in fake_api.requests if q.get("watch"))


# ---- faults ---------------------------------------------------------------------------------

async def test_dropped_connections_lose_and_double_nothing(fake_api, api_client):
    """Proof: no event lost or doubled through disconnects; quota usage counted exactly."""
    seed(fake_api)
    async with Running(api_client, watch_timeout=1) as source:
        await until(lambda: source.health.ready)
        state = source.state
        for i in range(5):
            fake_api.fault("drop", resource="pods", verb="watch", after=i % 3)
        for i in range(30):
            fake_api.apply(Pod(f"p{i}").queue("lq").cpu("1").node("n1" if i % 2 else "n2").phase("Running").obj())
            if i % 4 == 0:
                await asyncio.sleep(0.02)
        await until(lambda: len(state.pods) == 30 and not fake_api.faults, what="30 pods")
        await until(lambda: source.kinds["Pod"].rv == str(fake_api.rv), what="caught up")
        assert cq_cpu(state, "cq-a") == 30 * CPU
        assert state.node_requested["n1"]["cpu"] == 15 * CPU and state.node_requested["n2"]["cpu"] == 15 * CPU
        assert source.kinds["Pod"].events["ADDED"] == 30           # each exactly once
        # each fault is used by one watch; a watch may end by its timeoutSeconds (1 s) before its cut comes
        assert source.kinds["Pod"].restarts >= 5 and source.kinds["Pod"].errors["connection dropped"] >= 3
        assert source.kinds["Pod"].relists == 0


async def test_a_deleted_object_then_a_dropped_watch_resumes_without_a_relist(fake_api, api_client):
    """The canary read before a watch resumes after an interruption (_went_back_since) must not take a routine
    deletion for a restore: a pod's last events are MODIFIED then DELETED, and its 404 once made every kind relist
    with versions ignored after any dropped connection (found in review; a 404 counts only for an object never
    seen deleted)."""
    seed(fake_api)
    async with Running(api_client) as source:
        await until(lambda: source.health.ready)
        fake_api.apply(Pod("x").queue("lq").cpu("1").node("n1").phase("Running").obj())
        await until(lambda: "uid-team-a-x" in source.state.pods, what="the pod")
        fake_api.delete("Pod", "team-a", "x")
        await until(lambda: "uid-team-a-x" not in source.state.pods, what="the deletion")
        pods = source.kinds["Pod"]
        restarts = pods.restarts
        fake_api.drop_watches()
        await until(lambda: pods.restarts > restarts and not pods.reconnecting and source.health.ready, timeout=10,
                    what="the pods watch resumed")
        assert sum(k.relists for k in source.kinds.values()) == 0 and source.health.ready


async def test_gone_relists_and_reconciles(fake_api, api_client):
    """410 while disconnected: deleted objects removed, changed ones updated, new ones added, none twice."""
    seed(fake_api, pods=4)
    async with Running(api_client) as source:
        await until(lambda: source.health.ready)
        state = source.state
        assert cq_cpu(state, "cq-a") == 4 * CPU
        fake_api.fault("error", resource="pods", verb="watch", times=10_000, code=429)     # resumed, not relisted
        fake_api.drop_watches()
        await until(lambda: source.kinds["Pod"].errors["http 429"] >= 1, what="disconnected")
        fake_api.delete("Pod", "team-a", "p0")
        fake_api.apply(Pod("p1").queue("lq").cpu("3").node("n2").phase("Running").obj())
        fake_api.apply(Pod("p9").queue("lq").cpu("1").node("n1").phase("Running").obj())
        old = fake_api.get("Pod", "team-a", "p2")
        fake_api.delete("Pod", "team-a", "p2")
        fake_api.apply({**Pod("p2").queue("lq").cpu("2").node("n1").phase("Running").obj(), "metadata": {
            **old["metadata"], "uid": "new-uid", "resourceVersion": None}})       # recreated, new uid
        fake_api.expire()
        fake_api.clear_faults()
        await until(lambda: source.kinds["Pod"].relists == 1, what="relist")
        assert sorted(p.name for p in state.pods.values()) == ["p1", "p2", "p3", "p9"]
        assert state.pods["uid-team-a-p1"].node_name == "n2"
        assert state.store.uid_by_key["team-a/p2"] == "new-uid" and "uid-team-a-p2" not in state.pods
        assert cq_cpu(state, "cq-a") == (3 + 2 + 1 + 1) * CPU
        assert fingerprint(state) == fingerprint(await fresh_state(api_client))
        assert source.kinds["Pod"].errors["expired"] == 1


async def test_list_continue_expired_lists_again(fake_api, api_client):
    seed(fake_api, pods=7)
    api = fake_api
    original = api._list

    def expiring(request, k, ns):        # compact between the first and second page of the pods list
        if k.plural == "pods" and request.query.get("continue") and not getattr(api, "_expired_once", False):
            api._expired_once = True
            api.apply(Pod("late").queue("lq").cpu("1").phase("Pending").obj())
            api.expire()
        return original(request, k, ns)

    api._list = expiring
    async with Running(api_client) as source:
        await until(lambda: source.health.ready)
        assert len(source.state.pods) == 8 and source.kinds["Pod"].errors["list continue expired"] == 1


async def test_garbage_unknown_fields_and_wrong_types(fake_api, api_client, caplog):
    """Bad input: garbage lines and invalid objects are counted skips; the loop survives and keeps the
    last good state; an unknown field is tolerated (newer API versions add fields)."""
    seed(fake_api)
    good = ClusterQueue("cq-c").resource_group(FlavorQuotas("default-flavor").resource("cpu", "5")).obj()
    fake_api.apply(good)
    async with Running(api_client, watch_timeout=1) as source:
        await until(lambda: source.health.ready)
        state = source.state
        fake_api.fault("garbage", resource="pods", verb="watch")
        fake_api.fault("garbage", resource="pods", verb="watch", line=b'{"type": "ADDED"}')
        fake_api.fault("garbage", resource="pods", verb="watch", line=b'[1, 2]')
        fake_api.apply(Pod("u").queue("lq").cpu("1").requests({}).node("n1").phase("Running")
                           .obj() | {"someFutureField": {"x": 1}})
        bad = ClusterQueue("cq-c").resource_group(FlavorQuotas("default-flavor").resource("cpu", "5")).obj()
        bad["spec"]["cohort"] = 5                                          # wrong type
        fake_api.apply(bad)
        fake_api.apply(Pod("w").queue("lq").cpu("1").node("n1").phase("Running").obj() | {"spec": "not a mapping"})
        fake_api.apply(Pod("v").queue("lq").cpu("1").node("n1").phase("Running").obj())
        await until(lambda: "team-a/v" in state.store.uid_by_key and not fake_api.faults, what="after garbage")
        assert "team-a/u" in state.store.uid_by_key and "team-a/w" not in state.store.uid_by_key
        assert cq_cpu(state, "cq-a") == 2 * CPU
        assert source.kinds["Pod"].errors["undecodable event"] == 3
        assert state.cluster_queues["cq-c"].cohort == ""                   # last good version kept
        assert source.kinds["ClusterQueue"].errors["invalid object"] == 1
        assert any("spec.cohort must be a string" in r for r in state.skips)
        fake_api.apply(ClusterQueue("cq-c").cohort("co")
                           .resource_group(FlavorQuotas("default-flavor").resource("cpu", "5")).obj())
        await until(lambda: state.cluster_queues["cq-c"].cohort == "co", what="fixed ClusterQueue")
        fake_api.apply(bad)
        fake_api.delete("ClusterQueue", None, "cq-c")        # its newest version was invalid: still removed
        await until(lambda: "cq-c" not in state.cluster_queues, what="deleted")
        assert source.health.alive
    warnings = [r.getMessage() for r in caplog.records if r.name == "quotient.sync.watch" and r.levelname == "WARNING"]
    assert sum("undecodable event" in w for w in warnings) == 1            # logged once per cause


async def test_server_errors_and_hangs_back_off_and_recover(fake_api, api_client):
    """Bad input: a 500 and a hanging apiserver (bounded timeouts) are counted, backed off, recovered."""
    seed(fake_api)
    fake_api.fault("error", resource="nodes", verb="list", times=2)
    fake_api.fault("hang", resource="namespaces", verb="list")
    async with Running(api_client, request_timeout=0.5) as source:
        await until(lambda: source.health.ready)
        assert source.kinds["Node"].errors["http 500"] == 2 and source.kinds["Namespace"].errors["timeout"] == 1
        state = source.state
        fake_api.fault("error", resource="pods", verb="watch", times=3)
        fake_api.fault("hang", resource="pods", verb="watch")
        fake_api.fault("slow", resource="pods", verb="watch", delay=0.05)
        fake_api.drop_watches()
        for i in range(4):
            fake_api.apply(Pod(f"s{i}").queue("lq").cpu("1").node("n1").phase("Running").obj())
        await until(lambda: len(state.pods) == 4 and not fake_api.faults and source.health.ready, timeout=10,
                    what="recovered")
        assert cq_cpu(state, "cq-a") == 4 * CPU
        assert source.kinds["Pod"].errors["http 500"] == 3
        assert source.kinds["Pod"].relist_reasons["http 500"] >= 1       # a server error relists (issue 16.10)
        assert source.kinds["Pod"].errors["watch idle"] + source.kinds["Pod"].errors["timeout"] == 1
        assert source.health.alive


async def test_absent_crd_is_empty_then_picked_up(fake_api, api_client):
    """PodGroups where used: a resource the server does not serve counts as empty; found later."""
    seed(fake_api)
    pg = Resource("PodGroup", "scheduling.x-k8s.io", "v1alpha9", "podgroups", True, optional=True)
    resources = [r for r in RESOURCES if r.kind != "PodGroup"] + [pg]
    async with Running(api_client, resources=resources) as source:
        await until(lambda: source.health.ready)
        assert not source.kinds["PodGroup"].rv
        await asyncio.sleep(0.3)
        assert source.health.ready and source.health.alive


async def test_restart_and_relist_metrics(fake_api, api_client):
    seed(fake_api)
    state = ClusterState()
    extender = Scheduler(state, SnapshotWriter(state))
    metrics = attach(extender).metrics
    async with Running(api_client, state, metrics=metrics) as source:
        await until(lambda: source.health.ready and fake_api.open_watches == len(RESOURCES), what="watching")
        fake_api.fault("drop", resource="pods", verb="watch")
        fake_api.fault("gone", resource="nodes", verb="watch")
        fake_api.drop_watches()
        await until(lambda: source.kinds["Node"].relists == 1 and source.kinds["Pod"].errors["connection dropped"] >= 1,
                    what="relist and drop")
        text = metrics.render().decode()
        assert 'quotient_watch_relists_total{kind="Node",reason="expired"} 1.0' in text
        assert 'quotient_watch_restarts_total{kind="Pod"}' in text
        assert 'quotient_watch_errors_total{cause="connection dropped",kind="Pod"}' in text


# ---- the storm ------------------------------------------------------------------------------

@pytest.mark.parametrize("seed_value", [1, 2, 3])
async def test_fault_storm_ends_equal_to_a_fresh_list(fake_api, api_client, seed_value):
    """Proof: after a seeded random sequence of faults and mutations, the state equals a fresh list's."""
    rng = random.Random(seed_value)
    seed(fake_api)
    fake_api.history_size = 40          # small history: watches fall behind and get 410s
    for i in range(3, 6):
        fake_api.apply(Node(f"n{i}").cpu("64").labels({"zone": "a"}).obj())
    async with Running(api_client, read_timeout=0.3, rng=random.Random(seed_value)) as source:
        await until(lambda: source.health.ready)
        names = [f"p{i}" for i in range(25)]
        for step in range(160):
            r = rng.random()
            name, ns = rng.choice(names), rng.choice(["team-a", "team-b"])
            if r < 0.30:
                nodename = rng.choice([None, "n1", "n2", "n3", "n4"])
                fake_api.apply(Pod(name, ns).queue("lq").cpu(str(rng.randint(1, 4))).created(rng.randint(0, 100))
                                   .node(nodename).phase("Running" if nodename else "Pending").obj())
            elif r < 0.40:
                fake_api.delete("Pod", ns, name)
            elif r < 0.45:
                old = fake_api.delete("Pod", ns, name)
                if old is not None:            # recreated under the same name with a new uid
                    fake_api.apply(Pod(name, ns).queue("lq").cpu("1").node("n1").phase("Running").uid(f"re-{step}")
                                       .obj())
            elif r < 0.50:
                fake_api.apply(Pod(name, ns).queue("lq").cpu("1").node(rng.choice(["n1", "n2"])).phase("Succeeded")
                                   .obj())
            elif r < 0.55:
                fake_api.apply(Node(rng.choice(["n3", "n4", "n5"])).cpu(str(rng.choice([32, 64])))
                                   .labels({"zone": rng.choice("ab")}).obj())
            elif r < 0.58:
                fake_api.apply(ClusterQueue(rng.choice(["cq-a", "cq-b"]))
                                   .resource_group(FlavorQuotas("default-flavor")
                                                       .resource("cpu", str(rng.randint(5, 100))))
                                   .obj())
            elif r < 0.66:
                fake_api.fault("drop", resource=rng.choice(["pods", "nodes", None]), verb="watch",
                               after=rng.randint(0, 3))
                if rng.random() < 0.5:
                    fake_api.drop_watches()
            elif r < 0.70:
                fake_api.fault("garbage", resource=rng.choice(["pods", "nodes"]), verb="watch",
                               after=rng.randint(0, 2))
            elif r < 0.74:
                fake_api.fault("error", resource=rng.choice(["pods", "clusterqueues", None]),
                               verb=rng.choice(["watch", "list"]), code=rng.choice([500, 503]))
                fake_api.drop_watches()
            elif r < 0.77:
                fake_api.fault("gone", resource=rng.choice(["pods", "nodes", "clusterqueues"]), verb="watch")
                fake_api.drop_watches()
            elif r < 0.80:
                fake_api.expire()
                if rng.random() < 0.5:
                    fake_api.drop_watches()
            elif r < 0.82:
                fake_api.fault("hang", resource="pods", verb="watch")
                fake_api.drop_watches()
            elif r < 0.85:
                fake_api.fault("slow", resource="pods", verb="watch", delay=0.01)
            elif r < 0.88:
                fake_api.bookmark()
            if rng.random() < 0.3:
                await asyncio.sleep(rng.random() * 0.03)
        fake_api.clear_faults()
        fake_api.release()
        fresh = fingerprint(await fresh_state(api_client))
        await until(lambda: fingerprint(source.state) == fresh, timeout=15, what="state equal to a fresh list")
        # A relist still in flight (started by the storm's last fault) keeps it not ready a moment longer.
        await until(lambda: source.health.ready, timeout=15, what="the source ready again")
        assert source.health.alive and fingerprint(source.state) == fresh
        assert sum(k.restarts for k in source.kinds.values()) > 5


# ---- quotient serve --kubeconfig ------------------------------------------------------------

async def test_serve_kubeconfig_end_to_end(fake_api, tmp_path):
    """`quotient serve --kubeconfig`: not ready while an initial list hangs, ready after; /livez from the loop;
    a bind through the verbs is written to the API server (KubeWriter) and comes back through the watch."""
    from serving import QUOTIENT_BIN, free_port, stop

    seed(fake_api)
    fake_api.apply(Pod("e2e").queue("lq").cpu("1").phase("Pending").obj())
    fake_api.fault("hang", resource="clusterqueues", verb="list")
    port = free_port()
    log_path = tmp_path / "serve.log"
    with open(log_path, "wb") as log:
        proc = await asyncio.create_subprocess_exec(
            str(QUOTIENT_BIN), "serve", "--kubeconfig", fake_api.kubeconfig_path(tmp_path), "--host", "127.0.0.1",
            "--port", str(port), stdout=log, stderr=asyncio.subprocess.STDOUT, stdin=asyncio.subprocess.DEVNULL)
    base = f"http://127.0.0.1:{port}"
    try:
        async with httpx.AsyncClient(base_url=base, trust_env=False, timeout=5) as http:
            async def status(path):
                try:
                    return (await http.get(path)).status_code
                except httpx.TransportError:
                    return None

            deadline = time.monotonic() + 15
            while await status("/livez") != 200:
                assert proc.returncode is None and time.monotonic() < deadline, log_path.read_text()
                await asyncio.sleep(0.1)
            assert await status("/readyz") == 503
            await until(lambda: fake_api.hanging, timeout=15, what="the clusterqueues list held")
            fake_api.release()                      # frees only the requests held by then
            deadline = time.monotonic() + 15
            while await status("/readyz") != 200:
                assert time.monotonic() < deadline, log_path.read_text()
                await asyncio.sleep(0.1)
            r = await http.post("/bind", json={"PodName": "e2e", "PodNamespace": "team-a", "PodUID": "uid-team-a-e2e",
                                               "Node": "n1"})
            assert r.status_code == 200, r.text
            assert fake_api.get("Pod", "team-a", "e2e")["spec"]["nodeName"] == "n1"
    finally:
        await stop(proc)


def test_serve_kubeconfig_unreadable_exits_2(tmp_path):
    import subprocess

    from serving import QUOTIENT_BIN

    out = subprocess.run([str(QUOTIENT_BIN), "serve", "--kubeconfig", str(tmp_path / "missing")],
                         capture_output=True, text=True, timeout=60)
    assert out.returncode == 2 and "cannot load kubeconfig" in out.stderr


def test_a_deletion_known_by_key_alone_takes_out_every_kind():
    """A DELETED event (or a relist without it) leaves only kind, key and uid: remove_object takes the
    object out without decoding anything, for each kind the watch reads."""
    from app.sync.dispatch import apply_object, remove_object

    objects = [Namespace("team-a").obj(), ResourceFlavor("default-flavor").obj(),
               ClusterQueue("cq").resource_group(FlavorQuotas("default-flavor").resource("cpu", "9")).obj(),
               LocalQueue("lq", "team-a").cluster_queue("cq").obj(), Node("n1").obj(),
               Pod("p").queue("lq").cpu("1").node("n1").obj(),
               {"apiVersion": "scheduling.k8s.io/v1", "kind": "PriorityClass", "metadata": {"name": "high"},
                "value": 1000},
               {"apiVersion": "policy/v1", "kind": "PodDisruptionBudget",
                "metadata": {"name": "db", "namespace": "team-a"}, "spec": {"minAvailable": 1}}]
    state = ClusterState()
    for obj in objects:
        apply_object(state, obj)
    assert state.pods and state.admitted and state.local_queues and state.priority_classes \
        and state.budgets.budgets["team-a/db"]
    for obj in reversed(objects):
        meta = obj["metadata"]
        key = f"{meta['namespace']}/{meta['name']}" if meta.get("namespace") else meta["name"]
        remove_object(state, obj["kind"], key, meta.get("uid", ""))
    empty = ClusterState()
    for table in ("pods", "nodes", "namespaces", "priority_classes", "cluster_queues", "local_queues", "flavors"):
        assert getattr(state, table) == getattr(empty, table), table
    assert not state.budgets and not state.admitted
