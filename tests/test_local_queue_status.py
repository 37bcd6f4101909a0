"""LocalQueue .status, written as Kueue's LocalQueue controller writes it, judged on the API's own objects.

Kueue's sources: pkg/controller/core/localqueue_controller.go (Reconcile: Active False "Stopped" for a stopPolicy,
"ClusterQueueDoesNotExist", "ClusterQueueIsInactive", else True "Ready"; updateStatusIfChanged: pendingWorkloads,
not counted for a stopped queue, reservingWorkloads, admittedWorkloads, flavorsReservation, flavorsUsage, written
only when it changed), pkg/cache/scheduler/cache.go (LocalQueueUsage, filterLocalQueueUsage: every flavor and
covered resource of the ClusterQueue), apis/kueue/v1beta2/localqueue_types.go (LocalQueueStatus; v1beta1 spells
flavorsUsage flavorUsage). A Job's pods, or a pod group's members, are one workload (Kueue makes one Workload).
"""
from __future__ import annotations

from app.act.kube import KubeWriter
from builders import ClusterQueue, FlavorQuotas, Job, LocalQueue, Namespace, Node, Pod, ResourceFlavor
from fakeapi import FakeApiServer
from live import Running, started, until
from test_watch import make_api_client

GROUP_NAME, GROUP_TOTAL = "kueue.x-k8s.io/pod-group-name", "kueue.x-k8s.io/pod-group-total-count"
TRAIN = Job("train").queue("lq").parallelism(3)


def objects(lq_version: str = "v1beta1") -> list[dict]:
    """cq (10 CPUs, 10Gi) behind lq; held (Hold) behind it too; orphan points to a ClusterQueue that does not
    exist. lq has two admitted workloads (Job train's 3 running pods, lone r1) and three pending ones (p1, p2 and
    pod group g's two members); held has one pending pod."""
    member = lambda name: (Pod(name).queue("lq").cpu("1").label(GROUP_NAME, "g")  # noqa: E731
                           .annotation(GROUP_TOTAL, "2"))
    return [Namespace("team-a").obj(), Node("n1").cpu("64").obj(), ResourceFlavor("default-flavor").obj(),
            ClusterQueue("cq").resource_group(FlavorQuotas("default-flavor").resource("cpu", "10")
                                              .resource("memory", "10Gi")).obj(),
            LocalQueue("lq", "team-a").cluster_queue("cq").version(lq_version).obj(),
            LocalQueue("held", "team-a").cluster_queue("cq").stop_policy("Hold").obj(),
            LocalQueue("orphan", "team-a").cluster_queue("ghost").obj(),
            TRAIN.obj(), *(Pod(f"train-{i}").of_job(TRAIN).cpu("1").node("n1").phase("Running").obj() for i in range(3)),
            Pod("r1").queue("lq").cpu("2").node("n1").phase("Running").obj(),
            Pod("p1").queue("lq").cpu("1").obj(), Pod("p2").queue("lq").cpu("1").obj(),
            member("g-0").obj(), member("g-1").obj(),
            Pod("h1").queue("held").cpu("1").obj()]


def status_of(api: FakeApiServer, name: str) -> dict:
    return api.get("LocalQueue", "team-a", name).get("status") or {}


def totals(flavors: list[dict]) -> dict:
    return {(f["name"], r["name"]): r["total"] for f in flavors for r in f["resources"]}


def active(status: dict) -> dict:
    return next(c for c in status["conditions"] if c["type"] == "Active")


async def test_local_queue_status_counts_workloads_as_kueue_does_and_says_whether_it_is_active(tmp_path):
    """A 3-pod Job counts one workload, a pod group one; every flavor and covered resource is listed, zeros too;
    the Active condition carries Kueue's reasons; a status the API holds is not written again."""
    async with started(tmp_path, objects()) as kit:
        writer = kit.ext.writer
        assert await writer.publish_local_queue_status() == 3
        lq = status_of(kit.api, "lq")
        assert (lq["pendingWorkloads"], lq["reservingWorkloads"], lq["admittedWorkloads"]) == (3, 2, 2)
        assert totals(lq["flavorsReservation"]) == {("default-flavor", "cpu"): "5000m", ("default-flavor", "memory"): "0"}
        assert totals(lq["flavorUsage"]) == totals(lq["flavorsReservation"])       # v1beta1's name
        assert "flavorsUsage" not in lq
        assert {k: active(lq)[k] for k in ("status", "reason")} == {"status": "True", "reason": "Ready"}
        assert active(lq)["lastTransitionTime"]

        held = status_of(kit.api, "held")
        assert held["pendingWorkloads"] == 0 and held["admittedWorkloads"] == 0     # Kueue counts none when stopped
        assert (active(held)["status"], active(held)["reason"]) == ("False", "Stopped")
        assert "stopPolicy Hold" in active(held)["message"]

        orphan = status_of(kit.api, "orphan")
        assert (active(orphan)["status"], active(orphan)["reason"]) == ("False", "ClusterQueueDoesNotExist")
        assert "ghost" in active(orphan)["message"] and orphan["flavorsReservation"] == []

        await until(lambda: all(kit.state.local_queues[f"team-a/{n}"].status for n in ("lq", "held", "orphan")),
                    what="the status events")
        since = active(lq)["lastTransitionTime"]
        assert await writer.publish_local_queue_status() == 0                      # the API holds it already

        kit.api.apply(Pod("p1").queue("lq").cpu("1").node("n1").phase("Running").obj())    # p1 bound
        await until(lambda: kit.state.store.pod_by_key("team-a/p1").node_name == "n1", what="p1 bound")
        assert await writer.publish_local_queue_status() == 1                      # only lq changed
        lq = status_of(kit.api, "lq")
        assert (lq["pendingWorkloads"], lq["reservingWorkloads"], lq["admittedWorkloads"]) == (2, 3, 3)
        assert totals(lq["flavorUsage"])[("default-flavor", "cpu")] == "6000m"
        assert active(lq)["lastTransitionTime"] == since                           # still Ready: not a transition


async def test_a_stopped_cluster_queue_makes_its_local_queues_inactive():
    """localqueue_controller.go: the ClusterQueue's Active condition False -> ClusterQueueIsInactive."""
    from app.observe.localqueue_status import active_condition
    from helpers import make_state
    state = make_state(ResourceFlavor("default-flavor").obj(),
                       ClusterQueue("cq").resource_group(FlavorQuotas("default-flavor").resource("cpu", "1"))
                       .spec(stopPolicy="HoldAndDrain").obj(),
                       LocalQueue("lq", "team-a").cluster_queue("cq").obj())
    status, reason, message = active_condition(state, state.local_queues["team-a/lq"])
    assert (status, reason) == ("False", "ClusterQueueIsInactive") and "cq is stopped" in message


async def test_a_v1beta2_local_queue_gets_its_status_in_v1beta2(tmp_path):
    """The status is written in the version the LocalQueue was read in (the preferred one): v1beta2's
    flavorsUsage, which a v1beta1 reader sees as flavorUsage (Kueue's conversion)."""
    async with FakeApiServer(bookmark_interval=0.3, kueue_versions=("v1beta1", "v1beta2")) as api:
        for obj in objects("v1beta2"):
            api.apply(obj)
        client = await make_api_client(api.kubeconfig_path(tmp_path))
        try:
            async with Running(client) as source:
                await until(lambda: source.health.ready, what="listed")
                assert source.state.local_queues["team-a/lq"].api_version == "v1beta2"
                assert await KubeWriter(client, source.state).publish_local_queue_status() == 3
        finally:
            await client.close()
        stored = status_of(api, "lq")
        assert "flavorsUsage" in stored and "flavorUsage" not in stored
        assert totals(stored["flavorsUsage"])[("default-flavor", "cpu")] == "5000m"


async def test_reconcile_writes_local_queue_status_rate_limited_like_cluster_queue_status(tmp_path):
    """Scheduler.reconcile publishes LocalQueue status with ClusterQueue status, at most every STATUS_INTERVAL."""
    from app.scheduler.reconcile import STATUS_INTERVAL
    async with started(tmp_path, objects()) as kit:
        patches = lambda: sum(1 for m, p, _ in kit.api.writes  # noqa: E731
                              if m == "PATCH" and "/localqueues/" in p and p.endswith("/status"))
        await kit.ext.reconcile()
        assert patches() == 3
        kit.api.apply(Pod("p1").queue("lq").cpu("1").node("n1").phase("Running").obj())
        await until(lambda: kit.state.store.pod_by_key("team-a/p1").node_name == "n1", what="p1 bound")
        kit.clock.advance(STATUS_INTERVAL / 2)
        await kit.ext.reconcile()
        assert patches() == 3                          # not yet: rate-limited
        kit.clock.advance(STATUS_INTERVAL / 2)
        await kit.ext.reconcile()
        assert patches() == 4 and status_of(kit.api, "lq")["admittedWorkloads"] == 3


async def test_a_status_written_in_v1beta1_is_stored_in_the_objects_own_version(tmp_path):
    """deploy/crds/crds.yaml stores v1beta2: a v1beta1 reader's status write (flavorUsage) is converted by the API
    server (Kueue's conversion) and stored as v1beta2's flavorsUsage, as tests/fakeapi.py now does too."""
    async with FakeApiServer(bookmark_interval=0.3) as api:            # serves v1beta1 only
        for obj in objects("v1beta2"):                                 # lq stored in v1beta2
            api.apply(obj)
        client = await make_api_client(api.kubeconfig_path(tmp_path))
        try:
            async with Running(client) as source:
                await until(lambda: source.health.ready, what="listed")
                assert source.state.local_queues["team-a/lq"].api_version == "v1beta1"
                assert await KubeWriter(client, source.state).publish_local_queue_status() == 3
        finally:
            await client.close()
        stored = api.get("LocalQueue", "team-a", "lq")
        assert stored["apiVersion"] == "kueue.x-k8s.io/v1beta2"
        assert "flavorsUsage" in stored["status"] and "flavorUsage" not in stored["status"]
