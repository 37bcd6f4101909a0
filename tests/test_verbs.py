"""The four verbs through HTTP on small snapshots: flavors, quota refusals, exact accounting, bind."""
from __future__ import annotations

import pytest

from app.act.writer import SnapshotWriter, WriteError
from app.config import Configuration
from builders import (ClusterQueue, FlavorQuotas, LocalQueue, Namespace, Node, Pod, ResourceFlavor, binding_args,
                      extender_args, running, snapshot_yaml)
from helpers import FakeClock, uid, usage

CPU = 1000


def node(name: str, labels: dict | None = None, **allocatable) -> dict:
    """An 8-CPU, 32Gi node (more allocatable by resource name)."""
    n = Node(name).cpu("8").memory("32Gi").labels(labels)
    for resource, quantity in allocatable.items():
        n.allocatable(resource, quantity)
    return n.obj()


def head(cluster_queue: str = "cq") -> list[dict]:
    """team-a, flavors spot and on-demand (by instance-type), nodes spot-1, spot-2, od-1 and plain-1 (no
    label), LocalQueue team-a/q -> cluster_queue."""
    return [Namespace("team-a").obj(),
            ResourceFlavor("spot").node_labels({"instance-type": "spot"}).obj(),
            ResourceFlavor("on-demand").node_labels({"instance-type": "on-demand"}).obj(),
            node("spot-1", {"instance-type": "spot"}), node("spot-2", {"instance-type": "spot"}),
            node("od-1", {"instance-type": "on-demand"}), node("plain-1"),
            LocalQueue("q", "team-a").cluster_queue(cluster_queue).obj()]


def flavors(preemption: dict | None = None) -> str:
    """spot first (4 CPUs), then on-demand (8 CPUs), as in examples/flavors.yaml."""
    cq = ClusterQueue("cq").resource_group(FlavorQuotas("spot").resource("cpu", 4),
                                           FlavorQuotas("on-demand").resource("cpu", 8))
    return snapshot_yaml(*head(), (cq.preemption(preemption) if preemption else cq).obj())


def small(*pods: dict, preemption: dict | None = None, **spec) -> str:
    """One flavor without nodeLabels (every node), 4 CPUs, other spec fields by their Kueue names; the pods."""
    cq = ClusterQueue("small-cq").resource_group(FlavorQuotas("default-flavor").resource("cpu", 4)).spec(**spec)
    return snapshot_yaml(*head("small-cq"), ResourceFlavor("default-flavor").obj(),
                         (cq.preemption(preemption) if preemption else cq).obj(), *pods)


RUNNING_3 = running("running", "q", "3", "plain-1").obj()


def borrow() -> str:
    """team-a: nominal 4 + borrowingLimit 2 in a cohort with team-b's 10: at most 6 CPUs."""
    return snapshot_yaml(*head(), ResourceFlavor("default-flavor").obj(),
                         ClusterQueue("cq").cohort("co")
                         .preemption({"withinClusterQueue": "LowerPriority", "reclaimWithinCohort": "Any"})
                         .resource_group(FlavorQuotas("default-flavor").resource("cpu", 4, borrowing=2)).obj(),
                         ClusterQueue("other-cq").cohort("co")
                         .resource_group(FlavorQuotas("default-flavor").resource("cpu", 10)).obj())


def two_groups() -> str:
    """Two resource groups whose flavors live on disjoint nodes: cpu on spot, gpu on gpu nodes."""
    return snapshot_yaml(*head(), ResourceFlavor("gpu").node_labels({"accelerator": "a100"}).obj(),
                         node("gpu-1", {"accelerator": "a100"}, **{"example.com/gpu": "4"}),
                         ClusterQueue("cq").resource_group(FlavorQuotas("spot").resource("cpu", 8))
                         .resource_group(FlavorQuotas("gpu").resource("example.com/gpu", 4)).obj())


LOWER_PRIORITY = {"withinClusterQueue": "LowerPriority"}

ALL_NODES = ["od-1", "spot-1", "plain-1", "spot-2"]


# ---- a pod that fits ------------------------------------------------------------------------------

async def test_fitting_pod_filter_prioritize_bind(load_extender, api):
    ext = load_extender(flavors())
    pod = Pod("p1").queue("q").cpu("2").wire()
    assert usage(ext, "cq", "spot") == 0
    async with api(ext) as client:
        r = await client.post("/filter", json=extender_args(pod, ALL_NODES))
        assert r.status_code == 200
        answer = r.json()
        # Only the nodes of the assigned flavor (spot, the first with quota), in the offered order.
        assert answer["NodeNames"] == ["spot-1", "spot-2"]
        assert answer["Error"] == ""
        # Nodes outside the flavor are dropped without a reason (kube-scheduler shows reasons only
        # when no node is left, and reads a dropped node as unresolvable).
        assert not answer["FailedNodes"]
        assert not answer["FailedAndUnresolvableNodes"]
        decision = ext.journal.entries[-1]
        assert (decision["outcome"], decision["flavors"], decision["outside_flavor"]) == ("Admitted", {"cpu": "spot"}, 2)
        # The quota is held from filter to bind.
        assert uid(pod) in ext.state.reservations
        assert usage(ext, "cq", "spot") == 2 * CPU

        # kube-scheduler sends prioritize the nodes that passed filter.
        r = await client.post("/prioritize", json=extender_args(pod, answer["NodeNames"]))
        assert r.status_code == 200
        scores = {e["Host"]: e["Score"] for e in r.json()}
        assert [e["Host"] for e in r.json()] == ["spot-1", "spot-2"]
        assert 0 < scores["spot-1"] <= 10 and 0 < scores["spot-2"] <= 10

        r = await client.post("/bind", json=binding_args(pod, "spot-1"))
        assert r.status_code == 200
        assert r.json() == {"Error": ""}
    state = ext.state
    assert uid(pod) in state.admitted
    assert state.admitted[uid(pod)].cluster_queue == "cq"
    assert state.admitted[uid(pod)].flavors == {"cpu": "spot"}
    assert uid(pod) not in state.reservations
    assert usage(ext, "cq", "spot") == 2 * CPU             # charged once: the reservation became the charge
    assert usage(ext, "cq", "on-demand") == 0
    assert state.pods[uid(pod)].node_name == "spot-1"
    assert state.node_requested["spot-1"]["cpu"] == 2 * CPU
    assert ext.writer.bindings == 1


async def test_second_flavor_when_the_first_is_used_up(load_extender, api):
    ext = load_extender(flavors())
    async with api(ext) as client:
        for name in ("p1", "p2"):
            pod = Pod(name).queue("q").cpu("2").wire()
            assert (await client.post("/filter", json=extender_args(pod, ALL_NODES))).json()["NodeNames"]
            assert (await client.post("/bind", json=binding_args(pod, "spot-1"))).json() == {"Error": ""}
        pod = Pod("p3").queue("q").cpu("2").wire()
        answer = (await client.post("/filter", json=extender_args(pod, ALL_NODES))).json()
    assert answer["NodeNames"] == ["od-1"]
    assert answer["FailedAndUnresolvableNodes"] == {} and answer["FailedNodes"] == {}
    assert usage(ext, "cq", "spot") == 4 * CPU and usage(ext, "cq", "on-demand") == 2 * CPU


# ---- refusals ------------------------------------------------------------------------------------------

async def test_quota_exceeded_with_preemption_policy_is_failed_nodes(load_extender, api):
    """FailedNodes where kube-scheduler's preemption may act: a node failed its own filters (here one not offered),
    so its dry run may find victims there. With every node offered it can do nothing (its dry run finds the pod
    fits without evicting anyone): a retry, as the pod fits once quota in use frees. The queue's head is a retry
    either way (QueueHead): parked, it would wait for an event kube-scheduler's hints take (issue 34, item 4)."""
    ext = load_extender(small(RUNNING_3, preemption=LOWER_PRIORITY))
    assert usage(ext, "small-cq", "default-flavor") == 3 * CPU
    head = Pod("first").queue("q").cpu("2").created_at("2025-12-31T00:00:00Z").wire()
    pod = Pod("big").queue("q").cpu("2").wire()
    async with api(ext) as client:
        first = (await client.post("/filter", json=extender_args(head, ALL_NODES[1:]))).json()
        every = (await client.post("/filter", json=extender_args(pod, ALL_NODES))).json()
        answer = (await client.post("/filter", json=extender_args(pod, ALL_NODES[1:]))).json()
    assert first["NodeNames"] == [] and not first["FailedNodes"] and not first["FailedAndUnresolvableNodes"]
    assert "request 2 > 1 available" in first["Error"] and first["Error"].endswith("after its backoff, QueueHead)")
    assert every["NodeNames"] == [] and not every["FailedNodes"] and not every["FailedAndUnresolvableNodes"]
    assert "request 2 > 1 available" in every["Error"] and every["Error"].endswith("after its backoff, QuotaInUse)")
    assert answer["NodeNames"] == []
    assert answer["Error"] == ""
    assert not answer["FailedAndUnresolvableNodes"]
    assert set(answer["FailedNodes"]) == set(ALL_NODES[1:])
    for reason in answer["FailedNodes"].values():
        assert "ClusterQueue small-cq" in reason
        assert "cpu" in reason
        assert "request 2 > 1 available" in reason
        assert "uses 3 of its nominal 4" in reason
    assert uid(pod) not in ext.state.reservations
    assert usage(ext, "small-cq", "default-flavor") == 3 * CPU


async def test_quota_exceeded_without_preemption_policy_is_a_retry_and_one_that_never_fits_parks(load_extender, api):
    """The queue's head and the pods behind it fit once quota in use is freed: answered as retries (the Error
    field: kube-scheduler tries them after their backoff), QueueHead and QuotaInUse. A pod larger than the
    ClusterQueue's quota never fits: parked (FailedAndUnresolvableNodes)."""
    ext = load_extender(small(RUNNING_3))
    head = Pod("first").queue("q").cpu("2").created_at("2025-12-31T00:00:00Z").wire()
    pod = Pod("big").queue("q").cpu("2").wire()
    huge = Pod("huge").queue("q").cpu("5").wire()
    async with api(ext) as client:
        first = (await client.post("/filter", json=extender_args(head, ALL_NODES))).json()
        behind = (await client.post("/filter", json=extender_args(pod, ALL_NODES))).json()
        answer = (await client.post("/filter", json=extender_args(huge, ALL_NODES))).json()
    assert behind["NodeNames"] == [] and not behind["FailedNodes"] and not behind["FailedAndUnresolvableNodes"]
    assert "request 2 > 1 available" in behind["Error"] and behind["Error"].endswith("backoff, QuotaInUse)")
    assert answer["NodeNames"] == [] and answer["Error"] == ""
    assert not answer["FailedNodes"]
    assert set(answer["FailedAndUnresolvableNodes"]) == set(ALL_NODES)
    for reason in answer["FailedAndUnresolvableNodes"].values():
        assert "ClusterQueue small-cq" in reason and "cpu" in reason and "request 5" in reason
    assert first["NodeNames"] == [] and not first["FailedNodes"] and not first["FailedAndUnresolvableNodes"]
    assert "request 2 > 1 available" in first["Error"] and first["Error"].endswith("after its backoff, QueueHead)")


async def test_unknown_local_queue_is_unresolvable_and_named(load_extender, api):
    ext = load_extender(flavors(LOWER_PRIORITY))
    pod = Pod("lost").queue("no-such-queue").cpu("1").wire()
    async with api(ext) as client:
        answer = (await client.post("/filter", json=extender_args(pod, ALL_NODES))).json()
    assert answer["NodeNames"] == []
    assert not answer["FailedNodes"]
    assert set(answer["FailedAndUnresolvableNodes"]) == set(ALL_NODES)
    for reason in answer["FailedAndUnresolvableNodes"].values():
        assert "team-a/no-such-queue" in reason
        assert "LocalQueue" in reason
    assert not ext.state.reservations


async def test_request_above_nominal_plus_borrowing_limit_is_unresolvable(load_extender, api):
    ext = load_extender(borrow())
    pod = Pod("huge").queue("q").cpu("7").wire()
    async with api(ext) as client:
        answer = (await client.post("/filter", json=extender_args(pod, ALL_NODES))).json()
        # 6 fits exactly: nominal 4 + borrowing limit 2.
        ok = (await client.post("/filter", json=extender_args(Pod("six").queue("q").cpu("6").wire(), ALL_NODES))).json()
    assert answer["NodeNames"] == []
    assert not answer["FailedNodes"]        # even with preemption policies: no eviction can make 7 fit
    assert set(answer["FailedAndUnresolvableNodes"]) == set(ALL_NODES)
    for reason in answer["FailedAndUnresolvableNodes"].values():
        assert "ClusterQueue cq" in reason and "cpu request 7 > 6 at most" in reason
        assert "borrowing limit 2" in reason
    assert ok["NodeNames"] == ALL_NODES


async def test_no_offered_node_in_the_flavor_mentions_percentage_of_nodes_to_score(load_extender, api):
    ext = load_extender(flavors())
    pod = Pod("p1").queue("q").cpu("2").wire()
    async with api(ext) as client:
        answer = (await client.post("/filter", json=extender_args(pod, ["plain-1"]))).json()
    assert answer["NodeNames"] == []
    assert not answer["FailedNodes"]
    reason = answer["FailedAndUnresolvableNodes"]["plain-1"]
    assert "none of the nodes" in reason
    assert "percentageOfNodesToScore" in reason
    assert "spot" in reason and "on-demand" in reason
    assert not ext.state.reservations


async def test_no_offered_node_in_the_flavor_is_unresolvable_even_with_preemption(load_extender, api):
    """Evicting pods on nodes outside the flavor can never help: FailedAndUnresolvableNodes."""
    ext = load_extender(flavors(LOWER_PRIORITY))
    pod = Pod("p1").queue("q").cpu("2").wire()
    async with api(ext) as client:
        answer = (await client.post("/filter", json=extender_args(pod, ["plain-1"]))).json()
    assert answer["NodeNames"] == []
    assert "percentageOfNodesToScore" in answer["FailedAndUnresolvableNodes"].get("plain-1", "")
    assert not answer["FailedNodes"]


async def test_flavors_of_two_groups_on_disjoint_nodes(load_extender, api):
    """Each offered node is in one assigned flavor, none in both: Quotient's own NoFlavorNodes answer."""
    ext = load_extender(two_groups())
    pod = Pod("mixed").queue("q").cpu("1").requests({"example.com/gpu": "1"}).wire()
    async with api(ext) as client:
        answer = (await client.post("/filter", json=extender_args(pod, ["spot-1", "gpu-1"]))).json()
    assert answer["NodeNames"] == []
    assert set(answer["FailedAndUnresolvableNodes"]) == {"spot-1", "gpu-1"}
    reason = answer["FailedAndUnresolvableNodes"]["spot-1"]
    assert "percentageOfNodesToScore" in reason
    assert "gpu" in reason and "spot" in reason
    assert not ext.state.reservations


# ---- exact accounting: two pods racing for the last quota ------------------------------------------------

async def test_reservation_counts_until_bind(load_extender, api):
    ext = load_extender(small())
    a, b = Pod("a").queue("q").cpu("3").wire(), Pod("b").queue("q").cpu("3").wire()
    async with api(ext) as client:
        ra = (await client.post("/filter", json=extender_args(a, ALL_NODES))).json()
        assert ra["NodeNames"] == ALL_NODES
        assert usage(ext, "small-cq", "default-flavor") == 3 * CPU        # held by a's reservation

        rb = (await client.post("/filter", json=extender_args(b, ALL_NODES))).json()
        assert rb["NodeNames"] == []                                       # a's reservation counts
        assert all("request 3 > 1 available" in why for why in rb["FailedAndUnresolvableNodes"].values())
        assert uid(b) not in ext.state.reservations

        assert (await client.post("/bind", json=binding_args(a, "spot-1"))).json() == {"Error": ""}
        rb = (await client.post("/filter", json=extender_args(b, ALL_NODES))).json()
        assert rb["NodeNames"] == []
        # A bind for b anyway (e.g. a stale scheduler cycle) is refused too.
        bound_b = (await client.post("/bind", json=binding_args(b, "spot-2"))).json()
    assert "quota no longer fits" in bound_b["Error"]
    assert set(ext.state.admitted) == {uid(a)}
    assert usage(ext, "small-cq", "default-flavor") == 3 * CPU
    assert ext.state.pods[uid(b)].node_name == ""


async def test_expired_reservation_then_late_bind_is_refused(build_extender, api):
    clock = FakeClock()
    ext = build_extender(small(), config=Configuration(reservation_timeout=5.0), clock=clock)
    # b is older, so once a's reservation is gone a pending a does not hold b back in queue order.
    a = Pod("a").queue("q").cpu("3").created(10).wire()
    b = Pod("b").queue("q").cpu("3").wire()
    async with api(ext) as client:
        assert (await client.post("/filter", json=extender_args(a, ALL_NODES))).json()["NodeNames"] == ALL_NODES
        clock.advance(4.0)
        assert (await client.post("/filter", json=extender_args(b, ALL_NODES))).json()["NodeNames"] == []
        clock.advance(2.0)                       # 6 s after a's filter: its reservation has expired
        rb = (await client.post("/filter", json=extender_args(b, ALL_NODES))).json()
        assert rb["NodeNames"] == ALL_NODES
        assert uid(a) not in ext.state.reservations
        assert (await client.post("/bind", json=binding_args(b, "spot-2"))).json() == {"Error": ""}

        late = (await client.post("/bind", json=binding_args(a, "spot-1"))).json()
    assert "quota no longer fits" in late["Error"]
    assert set(ext.state.admitted) == {uid(b)}                    # never both beyond the 4 CPUs
    assert usage(ext, "small-cq", "default-flavor") == 3 * CPU
    assert ext.state.pods[uid(a)].node_name == ""
    assert ext.state.pods[uid(b)].node_name == "spot-2"
    assert ext.writer.bindings == 1


async def test_bind_within_the_reservation_timeout_keeps_the_reservation(build_extender, api):
    clock = FakeClock()
    ext = build_extender(small(), config=Configuration(reservation_timeout=5.0), clock=clock)
    a = Pod("a").queue("q").cpu("3").wire()
    async with api(ext) as client:
        assert (await client.post("/filter", json=extender_args(a, ALL_NODES))).json()["NodeNames"]
        clock.advance(4.9)
        assert (await client.post("/bind", json=binding_args(a, "spot-1"))).json() == {"Error": ""}
    assert usage(ext, "small-cq", "default-flavor") == 3 * CPU


async def test_late_bind_after_expiry_succeeds_when_quota_is_still_free(build_extender, api):
    clock = FakeClock()
    ext = build_extender(small(), config=Configuration(reservation_timeout=5.0), clock=clock)
    a = Pod("a").queue("q").cpu("3").wire()
    async with api(ext) as client:
        assert (await client.post("/filter", json=extender_args(a, ALL_NODES))).json()["NodeNames"]
        clock.advance(60)
        assert (await client.post("/bind", json=binding_args(a, "spot-1"))).json() == {"Error": ""}
    assert set(ext.state.admitted) == {uid(a)}
    assert usage(ext, "small-cq", "default-flavor") == 3 * CPU


# ---- bind edge cases ------------------------------------------------------------------------------------

async def test_bind_of_a_pod_never_filtered_names_it(load_extender, api):
    ext = load_extender(small())
    async with api(ext) as client:
        r = await client.post("/bind", json=binding_args(Pod("ghost").queue("q").cpu("1").wire(), "spot-1"))
    assert r.status_code == 200
    assert "team-a/ghost" in r.json()["Error"]
    assert not ext.state.admitted


async def test_bind_with_another_uid_is_refused(load_extender, api):
    ext = load_extender(small())
    pod = Pod("a").queue("q").cpu("1").wire()
    async with api(ext) as client:
        assert (await client.post("/filter", json=extender_args(pod, ALL_NODES))).json()["NodeNames"]
        body = binding_args(pod, "spot-1") | {"PodUID": "some-other-uid"}
        r = await client.post("/bind", json=body)
    assert "team-a/a" in r.json()["Error"]
    assert not ext.state.admitted


async def test_bind_to_an_unknown_node_is_refused(load_extender, api):
    ext = load_extender(small())
    pod = Pod("a").queue("q").cpu("1").wire()
    async with api(ext) as client:
        assert (await client.post("/filter", json=extender_args(pod, ALL_NODES))).json()["NodeNames"]
        r = await client.post("/bind", json=binding_args(pod, "nowhere-7"))
    assert r.status_code == 200
    assert "nowhere-7" in r.json()["Error"]
    assert not ext.state.admitted
    assert ext.state.pods[uid(pod)].node_name == ""
    assert usage(ext, "small-cq", "default-flavor") == 1 * CPU     # only the reservation, still held


async def test_bind_twice_to_the_same_node_is_idempotent(load_extender, api):
    ext = load_extender(small())
    pod = Pod("a").queue("q").cpu("1").wire()
    async with api(ext) as client:
        assert (await client.post("/filter", json=extender_args(pod, ALL_NODES))).json()["NodeNames"]
        assert (await client.post("/bind", json=binding_args(pod, "spot-1"))).json() == {"Error": ""}
        assert (await client.post("/bind", json=binding_args(pod, "spot-1"))).json() == {"Error": ""}
        elsewhere = (await client.post("/bind", json=binding_args(pod, "spot-2"))).json()
    assert "already bound to spot-1" in elsewhere["Error"]
    assert usage(ext, "small-cq", "default-flavor") == 1 * CPU      # no double charge
    assert list(ext.state.admitted) == [uid(pod)]
    assert ext.state.node_requested["spot-1"]["cpu"] == 1 * CPU
    assert ext.state.node_requested["spot-2"].get("cpu", 0) == 0


async def test_filter_after_bind_keeps_the_charge(load_extender, api):
    """kube-scheduler may retry a bound pod's cycle; the pod keeps its one charge."""
    ext = load_extender(flavors())
    pod = Pod("a").queue("q").cpu("2").wire()
    async with api(ext) as client:
        await client.post("/filter", json=extender_args(pod, ALL_NODES))
        assert (await client.post("/bind", json=binding_args(pod, "spot-1"))).json() == {"Error": ""}
        again = (await client.post("/filter", json=extender_args(pod, ALL_NODES))).json()
    assert again["NodeNames"] == ["spot-1", "spot-2"]
    assert usage(ext, "cq", "spot") == 2 * CPU
    assert not ext.state.reservations


# ---- a failing writer -------------------------------------------------------------------------------------

class FailingWriter:
    def __init__(self, error: Exception | None = None):
        self.calls = 0
        self.error = error or WriteError("pods \"a\" is forbidden: the API server said no")

    async def bind(self, pod, node):
        self.calls += 1
        raise self.error

    async def evict(self, pod, reason, message):
        raise WriteError("no")


@pytest.mark.parametrize("error", [None, RuntimeError("the API server said no (ClientPayloadError)")],
                         ids=["WriteError", "any other exception"])
async def test_failed_write_rolls_the_charge_back(build_extender, api, error):
    """Whatever the writer raised (a client library's own error included), the charge is taken back."""
    writer = FailingWriter(error)
    ext = build_extender(small(), writer=writer)
    pod = Pod("a").queue("q").cpu("3").wire()
    before = usage(ext, "small-cq", "default-flavor")
    async with api(ext) as client:
        assert (await client.post("/filter", json=extender_args(pod, ALL_NODES))).json()["NodeNames"]
        r = await client.post("/bind", json=binding_args(pod, "spot-1"))
        assert r.status_code == 200
        error = r.json()["Error"]
        assert "the API server said no" in error and "team-a/a" in error
        assert writer.calls == 1
        assert usage(ext, "small-cq", "default-flavor") == before
        assert uid(pod) not in ext.state.admitted
        assert uid(pod) not in ext.state.reservations
        assert ext.state.pods[uid(pod)].node_name == ""
        assert ext.state.node_requested["spot-1"].get("cpu", 0) == 0

        # kube-scheduler retries the whole cycle; with a working writer it goes through, charged once.
        ext.writer = SnapshotWriter(ext.state)
        assert (await client.post("/filter", json=extender_args(pod, ALL_NODES))).json()["NodeNames"]
        assert (await client.post("/bind", json=binding_args(pod, "spot-1"))).json() == {"Error": ""}
    assert usage(ext, "small-cq", "default-flavor") == before + 3 * CPU
    assert ext.state.node_requested["spot-1"]["cpu"] == 3 * CPU


# ---- serving -------------------------------------------------------------------------------------------------

async def test_path_prefix(load_extender, api):
    ext = load_extender(small())
    body = extender_args(Pod("free").cpu("1").wire(), ["spot-1"])
    async with api(ext, "/scheduler") as client:
        r = await client.post("/scheduler/filter", json=body)
        assert r.status_code == 200 and r.json()["NodeNames"] == ["spot-1"]
        assert (await client.post("/filter", json=body)).status_code == 404
        for verb in ("prioritize", "preempt", "bind"):
            assert (await client.post(f"/{verb}", json={})).status_code == 404
            assert (await client.post(f"/scheduler/{verb}", json={})).status_code == 400
        assert (await client.get("/livez")).status_code == 200


async def test_path_prefix_with_trailing_slash(load_extender, api):
    ext = load_extender(small())
    async with api(ext, "/scheduler/") as client:
        r = await client.post("/scheduler/filter", json=extender_args(Pod("free").cpu("1").wire(), ["spot-1"]))
    assert r.status_code == 200


async def test_health_endpoints(load_extender, api):
    ext = load_extender(small())
    async with api(ext) as client:
        r = await client.get("/livez")
        assert r.status_code == 200
        r = await client.get("/readyz")
        assert r.status_code == 200 and r.text == "ok"
    ready = {"value": False}
    async with api(ext, ready=lambda: ready["value"]) as client:
        assert (await client.get("/readyz")).status_code == 503
        assert (await client.get("/livez")).status_code == 200
        ready["value"] = True
        assert (await client.get("/readyz")).status_code == 200


async def test_prioritize_packs_onto_the_fuller_node(load_extender, api):
    """prioritize scores round(10 x (used + request) / allocatable) on the fullest requested resource."""
    ext = load_extender(flavors())
    async with api(ext) as client:
        first = Pod("p1").queue("q").cpu("2").wire()
        assert (await client.post("/filter", json=extender_args(first, ["spot-1", "spot-2"]))).json()["NodeNames"]
        assert (await client.post("/bind", json=binding_args(first, "spot-1"))).json() == {"Error": ""}
        second = Pod("p2").queue("q").cpu("1").wire()
        r = await client.post("/prioritize", json=extender_args(second, ["spot-1", "spot-2"]))
    scores = {e["Host"]: e["Score"] for e in r.json()}
    alloc = ext.state.nodes["spot-1"].allocatable["cpu"]
    assert scores["spot-1"] == round(10 * 3000 / alloc) and scores["spot-2"] == round(10 * 1000 / alloc)
    assert scores["spot-1"] > scores["spot-2"]


async def test_a_learned_pod_kube_scheduler_stops_asking_about_is_forgotten(build_extender, api):
    """Pods known only from filter requests (a snapshot has no watch to report deletions) are forgotten
    learnedPodTimeout after they were first learned, so a deleted pod cannot hold its place in queue order;
    one still asked about is learned anew (issue 16 point 7: a ghost asked about for ever is forgotten too)."""
    clock = FakeClock()
    ext = build_extender(small(queueingStrategy="StrictFIFO"),
                         config=Configuration(learned_pod_timeout=600.0, reservation_timeout=5.0), clock=clock)
    assert ext.state.cluster_queues["small-cq"].queueing_strategy == "StrictFIFO"
    old = Pod("old").queue("q").cpu("9").wire()        # never fits the 4-CPU queue
    new = Pod("new").queue("q").cpu("1").created(10).wire()
    async with api(ext) as client:
        assert (await client.post("/filter", json=extender_args(old, ALL_NODES))).json()["NodeNames"] == []
        clock.advance(300)                                                # still asked about: kept
        blocked = (await client.post("/filter", json=extender_args(new, ALL_NODES))).json()
        assert blocked["NodeNames"] == [] and "StrictFIFO: team-a/old" in str(blocked)
        assert uid(old) in ext.state.pods
        clock.advance(601)                                                # old has gone quiet
        r = (await client.post("/filter", json=extender_args(new, ALL_NODES))).json()
    assert r["NodeNames"] == ALL_NODES
    assert uid(old) not in ext.state.pods and ext.state.skips["learned pod forgotten"] == 2   # old and new
    assert ext.state.learned[uid(new)] == clock()                        # new, asked about, learned anew


async def test_hold_and_drain_evicts_what_the_queue_admitted(load_extender):
    """stopPolicy HoldAndDrain (seed 001 停止策略): "它还会触发已接纳工作负载的驱逐" - reconcile evicts the
    ClusterQueue's admitted pods through the writer and their quota is released; Hold leaves them running."""
    ext = load_extender(small(running("running", "q", "2", "spot-1").obj(), stopPolicy="HoldAndDrain"))
    assert usage(ext, "small-cq", "default-flavor") == 2 * CPU
    assert await ext.reconcile() == 1
    assert ext.state.store.pod_by_key("team-a/running") is None
    assert usage(ext, "small-cq", "default-flavor") == 0 and ext.writer.evictions == 1
    assert ext.journal.entries[-1]["outcome"] == "Evicted" and "HoldAndDrain" in ext.journal.entries[-1]["reason"]
    assert await ext.reconcile() == 0


async def test_a_replica_that_does_not_lead_answers_no_verb_and_is_ready_as_standby(load_extender):
    """High availability: only the leader answers the verbs; a standby (or a leader whose lease lapsed)
    answers 503 and is ready all the same ("ok: standby"): the Service routes to the leader by its pod's label
    (app/leader_label.py), and every synced replica counts as available for a rollout or a disruption budget."""
    import httpx

    from app.api.app import create_app

    ext = load_extender(small())
    leading = {"now": False}
    app = create_app(ext, leading=lambda: leading["now"])
    async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://test") as client:
        pod = Pod("a").queue("q").cpu("1").wire()
        r = await client.post("/filter", json=extender_args(pod, ALL_NODES))
        assert r.status_code == 503 and "not the leader" in r.json()["error"]
        r = await client.get("/readyz")
        assert r.status_code == 200 and r.text == "ok: standby"
        assert uid(pod) not in ext.state.pods                      # nothing decided, nothing learned
        leading["now"] = True
        r = await client.post("/filter", json=extender_args(pod, ALL_NODES))
        assert r.status_code == 200 and r.json()["NodeNames"] == ALL_NODES
        assert (await client.get("/readyz")).text == "ok: leader"


async def test_livez_answers_from_the_sources_liveness(load_extender):
    """`serve --kubeconfig` passes the watch loop's liveness: a stopped loop is a 503 naming it, so the
    kubelet restarts the pod; the snapshot server (no alive hook) is always live."""
    import httpx

    from app.api.app import create_app

    ext = load_extender(small())
    loop_running = [True]
    for app, expect_dead in ((create_app(ext, alive=lambda: loop_running[0]), True), (create_app(ext), False)):
        async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://test") as client:
            assert (await client.get("/livez")).json() == {"live": True}
            loop_running[0] = False
            r = await client.get("/livez")
            loop_running[0] = True
        if expect_dead:
            assert r.status_code == 503 and r.json() == {"live": False, "reason": "watch loop not running"}
        else:
            assert r.status_code == 200
