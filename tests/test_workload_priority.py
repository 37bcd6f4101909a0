"""Kueue's WorkloadPriorityClass (issue 10, part 2): the label kueue.x-k8s.io/priority-class gives a workload a
priority for queueing and preemption apart from its pods' PriorityClass (keps/973-workload-priority, "How
workloads are created from Jobs"; site concepts/workload_priority_class.md), in admission order, in every
preemption decision, and in /debug; kube-scheduler still sees the pods' own priority."""
from __future__ import annotations

import orjson
import pytest

from app.act.writer import SnapshotWriter
from app.core.cleared import cleared_cause
from app.core.preemption.candidates import find_candidates
from app.api.verbs import Verbs as Wire
from app.scheduler.scheduler import Scheduler
from app.objects import kueue
from app.objects.errors import InvalidObject
from app.sync.snapshot import SnapshotError, read_snapshot
from app.sync.apiserver import make_api_client
from builders import (ClusterQueue, FlavorQuotas, LocalQueue, Namespace, Node, Pod, PriorityClass, ResourceFlavor,
                      WorkloadPriorityClass, as_v1beta2, cpu_queue, extender_args, snapshot_yaml)
from fakeapi import FakeApiServer
from helpers import Verbs, answer_reasons, apply, decide_pod, delete, make_state, pod_info, preemptor_of
from live import Running, until

DEV, PROD = WorkloadPriorityClass("dev", 100), WorkloadPriorityClass("prod", 1000)


# ---- decoding (apis/kueue/v1beta1 and v1beta2 workloadpriorityclass_types.go) ---------------------------

@pytest.mark.parametrize("obj, value", [
    (WorkloadPriorityClass("a", 7).obj(), 7),
    (as_v1beta2(WorkloadPriorityClass("a", -5).obj()), -5),
    (WorkloadPriorityClass("a", 2**31 - 1).obj(), 2**31 - 1),
])
def test_workload_priority_class_decodes_its_value(obj, value):
    assert kueue.decode_workload_priority_class(obj) == kueue.WorkloadPriorityClass("a", value)


@pytest.mark.parametrize("obj, message", [
    (WorkloadPriorityClass("a", None).obj(), "value must be a 32-bit integer (kueue.x-k8s.io/v1beta1), got None"),
    (as_v1beta2(WorkloadPriorityClass("a", None).obj()), "value must be a 32-bit integer (kueue.x-k8s.io/v1beta2), "
                                                          "got None"),
    (WorkloadPriorityClass("a", "high").obj(), "got 'high'"),
    (WorkloadPriorityClass("a", True).obj(), "got True"),
    (WorkloadPriorityClass("a", 2**31).obj(), "got 2147483648"),
    ({**WorkloadPriorityClass("a", 1).obj(), "apiVersion": "kueue.x-k8s.io/v1alpha1"}, "apiVersion must be"),
])
def test_workload_priority_class_refuses_what_kueue_refuses(obj, message):
    with pytest.raises(InvalidObject, match="WorkloadPriorityClass a") as e:
        kueue.decode_workload_priority_class(obj)
    assert message in str(e.value)


# ---- precedence (KEP-973, the three cases of "How workloads are created from Jobs") ----------------------

def queue_state(*objects, quota=8, preemption=None):
    return make_state(Namespace("team-a").obj(), ResourceFlavor("default-flavor").obj(),
                      cpu_queue("cq", quota, **({"preemption": preemption} if preemption else {})),
                      LocalQueue("q", "team-a").cluster_queue("cq").obj(), Node("n1").cpu("16").obj(), *objects)


@pytest.mark.parametrize("pod, priority, source", [
    # 1. both: the WorkloadPriorityClass for the workload, the PriorityClass for the pod
    (Pod("p").queue("q").priority_class("high").workload_priority("dev"), 100, "WorkloadPriorityClass dev"),
    # 2. only the WorkloadPriorityClass
    (Pod("p").queue("q").workload_priority("prod"), 1000, "WorkloadPriorityClass prod"),
    # 3. only the PriorityClass: the pod's priority is the workload's
    (Pod("p").queue("q").priority_class("high"), 5000, "PriorityClass high"),
    (Pod("p").queue("q"), 0, "spec.priority"),
])
def test_the_workload_priority_class_wins_over_the_pods_priority_class(pod, priority, source):
    s = queue_state(PriorityClass("high", 5000).obj(), DEV.obj(), PROD.obj(), pod.obj())
    p = pod_info(s, "team-a", "p")
    assert (p.priority, p.priority_from) == (priority, source)
    assert p.pod_priority == (5000 if "priorityClassName" in pod.obj()["spec"] else 0)


def test_the_label_means_nothing_on_a_pod_in_no_queue():
    """Only a queued pod is a workload (Kueue makes none for another): its priority stays its own."""
    s = queue_state(PROD.obj(), Pod("u").cpu("1").workload_priority("prod").node("n1").obj(),
                    Pod("ghost").cpu("1").workload_priority("ghost").obj())
    u, ghost = pod_info(s, "team-a", "u"), pod_info(s, "team-a", "ghost")
    assert (u.priority, u.priority_from) == (0, "spec.priority") and ghost.missing_priority_class == ""


def test_a_global_default_priority_class_gives_the_pod_priority_unless_a_workload_class_is_named():
    s = queue_state(PriorityClass("default", 7, global_default=True).obj(), DEV.obj(),
                    Pod("plain").queue("q").obj(), Pod("dev").queue("q").workload_priority("dev").obj())
    plain, dev = pod_info(s, "team-a", "plain"), pod_info(s, "team-a", "dev")
    assert (plain.priority, plain.pod_priority, plain.priority_from) == (7, 7, "globalDefault PriorityClass default")
    assert (dev.priority, dev.pod_priority) == (100, 7)


# ---- admission order ------------------------------------------------------------------------------------

def test_the_queue_orders_by_the_workload_priority_not_the_pods():
    """Sorting the workloads in the ClusterQueues (concepts/workload_priority_class, where the priority is used):
    a newer pod of a higher WorkloadPriorityClass is ahead, though its pod priority is lower."""
    s = queue_state(PriorityClass("high", 5000).obj(), DEV.obj(), PROD.obj(),
                    Pod("old-dev").queue("q").cpu("1").priority_class("high").workload_priority("dev").created(1).obj(),
                    Pod("new-prod").queue("q").cpu("1").workload_priority("prod").created(2).obj())
    assert [p.name for p in s.queues.pending_pods("cq")] == ["new-prod", "old-dev"]


def test_a_pod_behind_a_higher_workload_priority_waits_for_it():
    """4 CPUs free, two pending 4-CPU pods: the one of the higher WorkloadPriorityClass has the room, even
    though the other was created first (and kube-scheduler, by pod priority, tries the other first)."""
    s = queue_state(DEV.obj(), PROD.obj(), Pod("run").queue("q").cpu("4").node("n1").obj(),
                    Pod("dev").queue("q").cpu("4").workload_priority("dev").created(1).obj(),
                    Pod("prod").queue("q").cpu("4").workload_priority("prod").created(2).obj())
    dev = decide_pod(s, Pod("dev").queue("q").cpu("4").workload_priority("dev").created(1).obj())
    assert not dev.admit and dev.rule == "QuotaExceeded" and "team-a/prod" in dev.reason
    assert decide_pod(s, Pod("prod").queue("q").cpu("4").workload_priority("prod").created(2).obj()).admit


def test_a_changed_class_value_is_what_the_next_filter_decides_on():
    """A pod's workload is made once per pod record (core.workload.Workload.of_pod) and kept for every filter
    of it: once its class's value changes, the next filter decides on the new priority, not the one kept. 8 CPUs
    run as r (WorkloadPriorityClass prod, 1000); p (dev, 100) may not preempt it, until dev is worth 2000."""
    s = queue_state(DEV.obj(), PROD.obj(), Pod("r").queue("q").cpu("8").workload_priority("prod").node("n1").obj(),
                    preemption={"withinClusterQueue": "LowerPriority"})
    p = Pod("p").queue("q").cpu("4").workload_priority("dev").created(5).obj()
    apply(s, p)
    verbs = Verbs(Scheduler(s, SnapshotWriter(s)))
    assert "preempting" not in answer_reasons(verbs.filter(p, ["n1"]), ["n1"])["n1"]
    apply(s, WorkloadPriorityClass("dev", 2000).obj())
    assert "preempting team-a/r (InClusterQueue)" in answer_reasons(verbs.filter(p, ["n1"]), ["n1"])["n1"]


# ---- preemption -----------------------------------------------------------------------------------------

def test_preemption_candidates_are_chosen_by_workload_priority():
    """withinClusterQueue LowerPriority compares workload priorities: a running pod of a high pod priority but
    a low WorkloadPriorityClass is a candidate; one of a low pod priority but a high class is not."""
    s = queue_state(PriorityClass("high", 5000).obj(), DEV.obj(), PROD.obj(),
                    Pod("r-dev").queue("q").cpu("4").priority_class("high").workload_priority("dev").node("n1").obj(),
                    Pod("r-prod").queue("q").cpu("4").workload_priority("prod").node("n1").obj(),
                    Pod("p").queue("q").cpu("4").workload_priority("prod").created(5).obj(),
                    preemption={"withinClusterQueue": "LowerPriority"})
    pre = preemptor_of(s, "team-a", "p")
    found = find_candidates(s, pre, set(pre.usage), set())
    assert [c.pod.name for c in found] == ["r-dev"]


async def test_quotient_evicts_for_a_high_workload_priority_that_kube_scheduler_would_not_preempt_for():
    """The preemptor's pod priority is 0 and the victim's 5000, so kube-scheduler's own dry run proposes nothing
    (../shared/wire/README.md); Quotient's filter chooses the victim by workload priority and evicts it."""
    s = queue_state(PriorityClass("high", 5000).obj(), DEV.obj(), PROD.obj(),
                    Pod("r-dev").queue("q").cpu("8").priority_class("high").workload_priority("dev").node("n1").obj(),
                    preemption={"withinClusterQueue": "LowerPriority"})
    writer = SnapshotWriter(s)
    ext = Scheduler(s, writer)
    p = Pod("p").queue("q").cpu("4").workload_priority("prod").created(5).obj()
    answer = orjson.loads(Wire(ext).filter(orjson.dumps(extender_args(p, ["n1"]))))
    assert "preempting team-a/r-dev (InClusterQueue)" in answer_reasons(answer, ["n1"])["n1"]
    await ext.actions.settle()
    assert writer.evictions == 1 and "uid-team-a-r-dev" not in s.pods


async def test_a_pod_in_no_queue_is_preempted_only_for_a_higher_pod_priority():
    """Pods in no queue are no workload: Quotient takes them for room (LowerPriorityOnNode) as kube-scheduler
    would, by pod priority; a WorkloadPriorityClass of 1000 on a pod of priority 0 does not outrank 500."""
    s = queue_state(PriorityClass("mid", 500).obj(), DEV.obj(), PROD.obj(),
                    Pod("r-dev").queue("q").cpu("4").workload_priority("dev").node("n1").obj(),
                    Pod("sys").cpu("12").priority_class("mid").node("n1").obj(),
                    preemption={"withinClusterQueue": "LowerPriority"})
    writer = SnapshotWriter(s)
    ext = Scheduler(s, writer)
    p = Pod("p").queue("q").cpu("8").workload_priority("prod").created(5).obj()
    answer = orjson.loads(Wire(ext).filter(orjson.dumps(extender_args(p, ["n1"]))))
    assert "LowerPriorityOnNode" not in answer_reasons(answer, ["n1"])["n1"]
    await ext.actions.settle()
    assert "uid-team-a-sys" in s.pods and writer.evictions == 0


def test_a_higher_pod_priority_does_not_preempt_a_higher_workload_priority():
    s = queue_state(PriorityClass("high", 5000).obj(), DEV.obj(), PROD.obj(),
                    Pod("r-prod").queue("q").cpu("8").workload_priority("prod").node("n1").obj(),
                    Pod("p").queue("q").cpu("4").priority_class("high").workload_priority("dev").created(5).obj(),
                    preemption={"withinClusterQueue": "LowerPriority"})
    pre = preemptor_of(s, "team-a", "p")
    assert find_candidates(s, pre, set(pre.usage), set()) == []


# ---- changes: the class's value, the label, a missing class ----------------------------------------------

def test_a_changed_class_value_reorders_the_queue_and_updates_running_pods():
    """Kueue's WorkloadPriorityClass controller carries a changed value into the Workloads (kueue#8322)."""
    s = queue_state(DEV.obj(), PROD.obj(), Pod("r").queue("q").cpu("1").workload_priority("dev").node("n1").obj(),
                    Pod("a").queue("q").cpu("1").workload_priority("dev").created(1).obj(),
                    Pod("b").queue("q").cpu("1").workload_priority("prod").created(2).obj())
    assert [p.name for p in s.queues.pending_pods("cq")] == ["b", "a"]
    generation = s.generation
    apply(s, WorkloadPriorityClass("dev", 2000).obj())
    assert [p.name for p in s.queues.pending_pods("cq")] == ["a", "b"]
    assert pod_info(s, "team-a", "r").priority == 2000 and s.generation > generation


def test_a_changed_label_takes_the_new_class():
    s = queue_state(DEV.obj(), PROD.obj(), Pod("a").queue("q").cpu("1").workload_priority("dev").obj())
    apply(s, Pod("a").queue("q").cpu("1").workload_priority("prod").obj())
    assert (pod_info(s, "team-a", "a").priority, pod_info(s, "team-a", "a").priority_from) == \
        (1000, "WorkloadPriorityClass prod")


def test_a_missing_class_keeps_a_new_pod_out_of_the_queue_with_a_reason_until_it_exists():
    """Kueue creates no Workload while the named class does not exist: the pod is refused with a reason, holds no
    place in the queue (under StrictFIFO it would block everyone behind it), and is queued once the class
    appears."""
    s = make_state(Namespace("team-a").obj(), ResourceFlavor("default-flavor").obj(),
                   ClusterQueue("cq").queueing_strategy("StrictFIFO")
                   .resource_group(FlavorQuotas("default-flavor").resource("cpu", 8)).obj(),
                   LocalQueue("q", "team-a").cluster_queue("cq").obj(), Node("n1").cpu("16").obj(),
                   Pod("typo").queue("q").cpu("4").workload_priority("urgnet").created(1).obj())
    typo = decide_pod(s, Pod("typo").queue("q").cpu("4").workload_priority("urgnet").created(1).obj())
    assert (typo.admit, typo.rule) == (False, "WorkloadPriorityClassNotFound")
    assert typo.reason == ("WorkloadPriorityClass urgnet does not exist (pod label kueue.x-k8s.io/priority-class); "
                           "like Kueue, Quotient queues no workload until it does: create it, or fix the label")
    assert list(s.queues.pending_pods("cq")) == []
    assert decide_pod(s, Pod("next").queue("q").cpu("4").created(2).obj()).admit
    cleared = lambda: cleared_cause(s, pod_info(s, "team-a", "typo"), typo.rule, typo.reason, set())  # noqa: E731
    assert cleared() == ""
    apply(s, WorkloadPriorityClass("urgnet", 10).obj())
    assert cleared() == "WorkloadPriorityClassCreated"      # /debug and quotient_refusals_cleared_total say so
    assert [p.name for p in s.queues.pending_pods("cq")] == ["typo", "next"]
    assert decide_pod(s, Pod("typo").queue("q").cpu("4").workload_priority("urgnet").created(1).obj()).admit


def test_a_label_naming_a_missing_class_leaves_a_queued_pod_its_place():
    """The pod's Workload exists already: Kueue's reconcile of the label fails (NotFound) and the Workload keeps
    its priority and its place; the same when the label moves from one class to a missing one."""
    s = queue_state(DEV.obj(), Pod("a").queue("q").cpu("1").obj(),
                    Pod("b").queue("q").cpu("1").workload_priority("dev").obj())
    apply(s, Pod("a").queue("q").cpu("1").workload_priority("ghost").obj(),
          Pod("b").queue("q").cpu("1").workload_priority("ghost").obj())
    assert [(p.name, p.priority, p.priority_from, p.missing_priority_class) for p in s.queues.pending_pods("cq")] == [
        ("b", 100, "WorkloadPriorityClass dev", ""), ("a", 0, "spec.priority", "")]


def test_a_pod_group_is_queued_only_once_every_members_class_exists():
    """A group is one workload: a member naming a missing class keeps the whole group out, whatever its age."""
    def member(name, created, wpc):
        return Pod(name).queue("q").cpu("1").created(created).workload_priority(wpc) \
            .label("kueue.x-k8s.io/pod-group-name", "g").annotation("kueue.x-k8s.io/pod-group-total-count", "2")
    s = queue_state(DEV.obj(), member("g-0", 0, "dev").obj(), member("g-1", 1, "ghost").obj())
    verbs = Verbs(Scheduler(s, SnapshotWriter(s)))
    for name, created, wpc in (("g-0", 0, "dev"), ("g-1", 1, "ghost")):
        answer = verbs.filter(member(name, created, wpc).obj(), ["n1"])
        assert answer["NodeNames"] == [] and "WorkloadPriorityClass ghost does not exist" in \
            answer_reasons(answer, ["n1"])["n1"]
    assert s.holds == {}
    apply(s, WorkloadPriorityClass("ghost", 5).obj())
    assert verbs.filter(member("g-1", 1, "ghost").obj(), ["n1"])["NodeNames"] == ["n1"]


def test_a_deleted_class_leaves_the_priority_it_gave():
    """A Workload keeps its spec.priority when its class goes; only a pod first seen without the class waits."""
    s = queue_state(DEV.obj(), Pod("run").queue("q").cpu("1").workload_priority("dev").node("n1").obj(),
                    Pod("wait").queue("q").cpu("1").workload_priority("dev").obj())
    delete(s, DEV.obj())
    apply(s, Pod("wait").queue("q").cpu("1").workload_priority("dev").phase("Pending").obj())
    for name in ("run", "wait"):
        p = pod_info(s, "team-a", name)
        assert (p.priority, p.priority_from, p.missing_priority_class) == (100, "WorkloadPriorityClass dev", "")
    assert [p.name for p in s.queues.pending_pods("cq")] == ["wait"]


def test_a_snapshot_pod_naming_no_workload_priority_class_is_an_error(tmp_path):
    path = tmp_path / "s.yaml"
    path.write_text(snapshot_yaml(Namespace("team-a").obj(), ResourceFlavor("default-flavor").obj(),
                                  cpu_queue("cq", 8), LocalQueue("q", "team-a").cluster_queue("cq").obj(),
                                  Pod("p").queue("q").workload_priority("ghost").obj()))
    with pytest.raises(SnapshotError, match="label kueue.x-k8s.io/priority-class=ghost is not defined by any "
                                            "WorkloadPriorityClass document"):
        read_snapshot(str(path))


# ---- /debug ---------------------------------------------------------------------------------------------

async def test_debug_shows_which_priority_was_used_and_where_it_came_from(api):
    s = queue_state(PriorityClass("high", 5000).obj(), DEV.obj(),
                    Pod("p").queue("q").cpu("1").priority_class("high").workload_priority("dev").obj(),
                    Pod("lost").queue("q").cpu("1").workload_priority("ghost").obj())
    async with api(Scheduler(s, SnapshotWriter(s))) as c:
        pod = (await c.get("/debug/pods/team-a/p")).json()
        queue = (await c.get("/debug/queues/cq")).json()
        lost = (await c.get("/debug/pods/team-a/lost")).json()
        explained = (await c.post("/debug/explain", content=snapshot_yaml(
            Pod("p").queue("q").cpu("1").priority_class("high").workload_priority("dev").obj()))).json()
    expected = {"priority": 100, "priorityFrom": "WorkloadPriorityClass dev", "podPriority": 5000,
                "workloadPriorityClass": "dev"}
    assert {k: pod[k] for k in expected} == expected
    assert {k: queue["pendingPods"][0][k] for k in expected} == expected
    assert {k: explained[k] for k in expected} == expected
    assert lost["missingWorkloadPriorityClass"] == "ghost"
    assert lost["now"]["rule"] == "WorkloadPriorityClassNotFound"
    assert lost["statusDetail"] == "waits for WorkloadPriorityClass ghost to exist; not queued meanwhile"


# ---- live mode --------------------------------------------------------------------------------------------

async def test_live_mode_watches_workload_priority_classes_in_the_served_version(tmp_path):
    """An API server serving only v1beta2 (Kueue 0.16+): the class is listed, then its change and deletion come
    through the watch, and the queue follows."""
    async with FakeApiServer(bookmark_interval=0.3, kueue_versions=("v1beta2",)) as api:
        for obj in (Namespace("team-a").obj(), ResourceFlavor("default-flavor").obj(), cpu_queue("cq", 8),
                    LocalQueue("q", "team-a").cluster_queue("cq").obj(), Node("n1").cpu("16").obj(),
                    DEV.obj(), PROD.obj(),
                    Pod("a").queue("q").cpu("1").workload_priority("dev").created(1).obj(),
                    Pod("b").queue("q").cpu("1").workload_priority("prod").created(2).obj()):
            api.apply(as_v1beta2(obj))
        client = await make_api_client(api.kubeconfig_path(tmp_path))
        try:
            async with Running(client) as source:
                await until(lambda: source.health.ready, what="initial list")
                state = source.state
                assert [p.name for p in state.queues.pending_pods("cq")] == ["b", "a"]
                api.apply(as_v1beta2(WorkloadPriorityClass("dev", 5000).obj()))
                await until(lambda: [p.name for p in state.queues.pending_pods("cq")] == ["a", "b"], what="reordered")
                api.delete("WorkloadPriorityClass", None, "dev", "kueue.x-k8s.io/v1beta2")
                await until(lambda: "dev" not in state.store.workload_priority_classes, what="deleted")
                assert pod_info(state, "team-a", "a").priority == 5000
        finally:
            await client.close()
