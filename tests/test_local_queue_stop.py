"""LocalQueue spec.stopPolicy (None, Hold, HoldAndDrain; v1beta1 and v1beta2), as Kueue applies it.

Kueue's sources: apis/kueue/v1beta2/localqueue_types.go (LocalQueueSpec.StopPolicy: "HoldAndDrain - Admitted
workloads are evicted and Reserving workloads will cancel the reservation. Hold - Admitted workloads will run to
completion and Reserving workloads will cancel the reservation"); pkg/controller/core/workload_controller.go
reconcileOnLocalQueueActiveState (checked before reconcileOnClusterQueueActiveState: an inadmissible workload
"LocalQueue X is stopped", an admitted one of a HoldAndDrain queue evicted with reason LocalQueueStopped,
WorkloadEvictedByLocalQueueStopped); pkg/controller/core/localqueue_controller.go Update (a stopped LocalQueue is
taken out of the queueing system: its workloads hold no place in the ClusterQueue's queue); Kueue's
test/integration/singlecluster/controller/core/localqueue_controller_test.go "Should stop/hold/drain".
"""
from __future__ import annotations

import pytest

from app.core.admission import decide
from app.scheduler.scheduler import Scheduler
from app.journal import Journal
from app.state.cluster import ClusterState
from builders import ClusterQueue, FlavorQuotas, LocalQueue, Node, Pod, ResourceFlavor, running
from helpers import CPU, apply, decide_pod, make_state, pod_info, workload_info


class RecordingWriter:
    """Binds and evicts as an API server that accepts them would (the watch's echo applied at once)."""

    def __init__(self, state: ClusterState):
        self.state = state
        self.evicted: list[tuple[str, str]] = []

    async def bind(self, pod, node: str) -> None:
        pass

    async def evict(self, pod, reason: str, message: str) -> None:
        self.evicted.append((pod.key, reason))
        self.state.remove_pod(pod.uid)


def cluster(lq_policy: str | None = None, version: str = "v1beta1", strategy: str = "BestEffortFIFO",
            *extra: dict) -> ClusterState:
    """cq (8 CPUs) behind two LocalQueues of team-a: lq (the one stopped) and other."""
    lq = LocalQueue("lq", "team-a").cluster_queue("cq").version(version)
    if lq_policy is not None:
        lq.stop_policy(lq_policy)
    return make_state(ResourceFlavor("default-flavor").obj(), Node("n1").cpu("64").obj(),
                      ClusterQueue("cq").queueing_strategy(strategy)
                      .resource_group(FlavorQuotas("default-flavor").resource("cpu", "8")).obj(),
                      lq.obj(), LocalQueue("other", "team-a").cluster_queue("cq").obj(), *extra)


@pytest.mark.parametrize("version", ["v1beta1", "v1beta2"])
@pytest.mark.parametrize("policy", ["Hold", "HoldAndDrain"])
def test_a_stopped_local_queue_admits_nothing_with_a_reason_an_admin_can_act_on(policy, version):
    """workload_controller.go reconcileOnLocalQueueActiveState: "LocalQueue X is stopped"; the ClusterQueue and
    its other LocalQueues keep admitting."""
    s = cluster(policy, version)
    v = decide_pod(s, Pod("p").queue("lq").cpu("1").obj())
    assert (v.managed, v.admit, v.rule, v.resolvable) == (True, False, "LocalQueueStopped", False), v
    for words in ("LocalQueue team-a/lq", f"stopPolicy {policy}", "set to None"):
        assert words in v.reason, (words, v.reason)
    assert decide_pod(s, Pod("o").queue("other").cpu("1").obj()).admit is True


@pytest.mark.parametrize("policy", [None, "None"])
def test_a_local_queue_whose_stop_policy_is_none_or_removed_admits_again(policy):
    """localqueue_controller.go Update, newStopPolicy == None: the queue is added back to the queueing system."""
    s = cluster("Hold")
    assert decide_pod(s, Pod("p").queue("lq").cpu("1").obj()).rule == "LocalQueueStopped"
    lq = LocalQueue("lq", "team-a").cluster_queue("cq")
    apply(s, (lq.stop_policy(policy) if policy else lq).obj())
    assert decide(s, workload_info(s, "team-a", "p")).admit is True
    assert s.pending["cq"] and s.pending["cq"][0][1] == pod_info(s, "team-a", "p").uid


def test_the_local_queue_is_checked_before_its_cluster_queue():
    """reconcileOnLocalQueueActiveState runs before reconcileOnClusterQueueActiveState: a held LocalQueue of a
    missing ClusterQueue is refused as stopped."""
    s = make_state(LocalQueue("lq", "team-a").cluster_queue("ghost").stop_policy("Hold").obj())
    assert decide_pod(s, Pod("p").queue("lq").cpu("1").obj()).rule == "LocalQueueStopped"


def test_an_unknown_stop_policy_is_refused_as_kueue_validates_it():
    """localqueue_types.go: +kubebuilder:validation:Enum=None;Hold;HoldAndDrain."""
    from app.objects.errors import InvalidObject
    from app.objects.kueue import decode_local_queue
    with pytest.raises(InvalidObject, match="stopPolicy"):
        decode_local_queue(LocalQueue("lq", "team-a").cluster_queue("cq").stop_policy("Pause").obj())


def test_pending_pods_of_a_stopped_local_queue_hold_no_place_in_the_cluster_queue():
    """localqueue_controller.go Update (stopping: queues.DeleteLocalQueue): under StrictFIFO, a big pod held in a
    stopped LocalQueue does not block the pods of the ClusterQueue's other LocalQueues behind it."""
    s = cluster(None, "v1beta1", "StrictFIFO")
    apply(s, Pod("big").queue("lq").cpu("9").created(0).obj())         # never fits 8 CPUs: blocks StrictFIFO
    assert decide_pod(s, Pod("small").queue("other").cpu("1").created(5).obj()).rule == "StrictFIFO"
    apply(s, LocalQueue("lq", "team-a").cluster_queue("cq").stop_policy("Hold").obj())
    assert decide(s, workload_info(s, "team-a", "small")).admit is True
    assert [uid for _, uid in s.pending["cq"]] == [pod_info(s, "team-a", "small").uid]


async def test_hold_and_drain_evicts_the_local_queues_admitted_pods_with_reason_local_queue_stopped():
    """reconcileOnLocalQueueActiveState: an admitted workload of a HoldAndDrain LocalQueue is evicted with reason
    LocalQueueStopped ("The LocalQueue is stopped"); the ClusterQueue's other LocalQueue keeps its pods."""
    s = cluster(None, "v1beta2", "BestEffortFIFO", running("a1", "lq", "2").obj(), running("a2", "lq", "2").obj(),
                                                   running("o1", "other", "2").obj())
    ext = Scheduler(s, RecordingWriter(s), Journal())
    assert await ext.reconcile() == 0
    apply(s, LocalQueue("lq", "team-a").cluster_queue("cq").version("v1beta2").stop_policy("HoldAndDrain").obj())
    assert await ext.reconcile() == 2
    assert sorted(ext.writer.evicted) == [("team-a/a1", "LocalQueueStopped"), ("team-a/a2", "LocalQueueStopped")]
    assert {p.name for p in s.pods.values()} == {"o1"}
    entry = ext.journal.entries[-1]
    assert entry["outcome"] == "Evicted" and "LocalQueue team-a/lq" in entry["reason"] and entry["verb"] == "drain"
    assert await ext.reconcile() == 0


async def test_hold_lets_the_local_queues_admitted_pods_run_to_completion():
    """localqueue_types.go: "Hold - Admitted workloads will run to completion"."""
    s = cluster("Hold", "v1beta1", "BestEffortFIFO", running("a1", "lq", "2").obj())
    ext = Scheduler(s, RecordingWriter(s), Journal())
    assert await ext.reconcile() == 0 and ext.writer.evicted == []
    assert s.admitted[pod_info(s, "team-a", "a1").uid].usage[("default-flavor", "cpu")] == 2 * CPU


def test_a_reservation_made_before_the_local_queue_stopped_is_cancelled_at_bind():
    """localqueue_types.go: "Reserving workloads will cancel the reservation": a pod that passed filter before its
    LocalQueue was stopped is not bound on that reservation."""
    from app.core.binding import changed_refusal
    from app.core.flavors import Charge
    s = cluster()
    v = decide_pod(s, Pod("p").queue("lq").cpu("1").obj())
    pod = pod_info(s, "team-a", "p")
    s.workloads.reserve(pod.uid, Charge("cq", v.assignment.flavors, v.assignment.usage))
    assert changed_refusal(s, pod) == ""
    apply(s, LocalQueue("lq", "team-a").cluster_queue("cq").stop_policy("Hold").obj())
    assert "LocalQueue team-a/lq is stopped" in changed_refusal(s, pod_info(s, "team-a", "p"))


def test_a_held_local_queues_admitted_job_keeps_its_places():
    """localqueue_types.go: "Hold - Admitted workloads will run to completion": a pod of an admitted Job (one of
    its pods is bound) binds on its reservation after the LocalQueue is held; only reserving workloads lose it."""
    from app.core.binding import changed_refusal
    from app.core.flavors import Charge
    from builders import Job
    job = Job("train").queue("lq").parallelism(2)
    s = cluster(None, "v1beta1", "BestEffortFIFO", job.obj(), Pod("train-0").of_job(job).cpu("1").node("n1").obj(),
                Pod("train-1").of_job(job).cpu("1").obj())
    pod = pod_info(s, "team-a", "train-1")
    assert pod.job and pod_info(s, "team-a", "train-0").uid in s.admitted
    s.workloads.reserve(pod.uid, Charge("cq", {"cpu": "default-flavor"}, {("default-flavor", "cpu"): CPU}))
    apply(s, LocalQueue("lq", "team-a").cluster_queue("cq").stop_policy("Hold").obj())
    assert changed_refusal(s, pod_info(s, "team-a", "train-1")) == ""


async def test_hold_and_drain_live_the_api_evicts_the_pods_with_reason_local_queue_stopped(tmp_path):
    """Live against the fake API server: the LocalQueue set to HoldAndDrain after its pods run; reconcile writes
    the evictions (DisruptionTarget reason LocalQueueStopped, an Event), the other LocalQueue's pod stays, and
    quotient_local_queue_evicted_workloads_total counts the Job's two pods as one workload even when the watch
    removes them before the eviction's answer."""
    from app.observe import attach
    from builders import Job, Namespace, ResourceFlavor as RF
    from live import started, until
    job = Job("train").queue("lq").parallelism(2)
    objs = [Namespace("team-a").obj(), RF("default-flavor").obj(), Node("n1").cpu("64").obj(),
            ClusterQueue("cq").resource_group(FlavorQuotas("default-flavor").resource("cpu", "8")).obj(),
            LocalQueue("lq", "team-a").cluster_queue("cq").obj(), LocalQueue("other", "team-a").cluster_queue("cq").obj(),
            job.obj(), *(Pod(f"train-{i}").of_job(job).cpu("1").node("n1").phase("Running").obj() for i in range(2)),
            Pod("o1").queue("other").cpu("1").node("n1").phase("Running").obj()]
    async with started(tmp_path, objs) as kit:
        metrics = attach(kit.ext).metrics
        metrics.render()                                     # a scrape: the admitted pods are known
        kit.api.apply(LocalQueue("lq", "team-a").cluster_queue("cq").stop_policy("HoldAndDrain").obj())
        await until(lambda: kit.state.local_queues["team-a/lq"].stop_policy == "HoldAndDrain", what="the stop")
        assert await kit.ext.reconcile() == 2
        await until(lambda: kit.api.get("Pod", "team-a", "train-0") is None
                    and kit.api.get("Pod", "team-a", "train-1") is None, what="evicted")
        assert kit.api.get("Pod", "team-a", "o1") is not None
        conditions = [b["status"]["conditions"][0] for m, p, b in kit.api.writes
                      if m == "PATCH" and p.endswith("/pods/train-0/status")]
        assert conditions and conditions[0]["type"] == "DisruptionTarget" and conditions[0]["reason"] == "LocalQueueStopped"
        assert any(e.get("reason") == "LocalQueueStopped" for e in kit.api.objects("Event", "events.k8s.io/v1"))
        evicted = {tuple(sorted(m.labels.items())): m.value for f in metrics.registry.collect()
                   for m in f.samples if m.name == "quotient_local_queue_evicted_workloads_total"}
        assert evicted == {(("name", "lq"), ("namespace", "team-a"), ("priority_class", ""),
                            ("reason", "LocalQueueStopped"), ("underlying_cause", "")): 1}
