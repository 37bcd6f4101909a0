"""app.core.preemption: which running pods make room for a pending one, and the preempt verb over HTTP.

Seeds: 000 (Kueue preemption: candidates, order, the classic heuristics, minimisation, fair sharing),
001 (ClusterQueue preemption policies), 002 (YuniKorn: the seven laws, fences, delay, allow-preemption,
per-node victim groups), 004 (ACK: preemption modes). States are built from plain Kubernetes/Kueue dicts
through app.sync.dispatch.apply_object (tests/helpers.py). Every decision that is only computed must
leave the state as it found it: `unchanged(state)` checks the quota tree usage, the charges, the
reservations and the holds around each call.
"""
from __future__ import annotations

import contextlib
from pathlib import Path

import pytest

from app.act.writer import SnapshotWriter
from app.config import Configuration
from app.core import preemption
from app.core.preemption import choose
from app.core.preemption import oracle as oracle_module
from app.core.preemption.candidates import find_candidates
from app.core.preemption.fair_order import share
from app.core.preemption.fair_targets import strategy_allows
from app.core.preemption.laws import may_preempt, opted_out, preemption_fence
from app.core.rules import (IN_CLUSTER_QUEUE, IN_COHORT_FAIR_SHARING, IN_COHORT_RECLAIM_WHILE_BORROWING,
                            IN_COHORT_RECLAMATION, LOWER_PRIORITY_ON_NODE)
from app.objects.annotations import DELAY, FENCE
from app.core.preemption.nodes import node_plans
from app.core.preemption.ordering import order
from app.core.preemption.quota_targets import quota_targets as quota_targets_of
from app.core.preemption.targets import Candidate, Preemptor, Target
from app.core.resource_node import available
from app.core.admission import assign, decide
from app.core.flavors import Charge
from app.scheduler.scheduler import Scheduler
from app.sim.run import differences, simulate
from app.sim.scenario import load_scenario

from builders import (BASE_TIME, ClusterQueue, Cohort, FlavorQuotas, LocalQueue, Namespace, Node, Pod, ResourceFlavor,
                      cpu_queue, extender_args, snapshot_yaml)
from helpers import (CPU, FakeClock, Verbs, all_usage, answer_reasons, apply, delete, make_state, one_queue, pod_info,
                     refused, uid, workload_info)

FR = ("default-flavor", "cpu")
REPO = Path(__file__).resolve().parents[1]
OWN = REPO / "tests" / "scenarios"
EXAMPLES = REPO.parent / "shared" / "scenarios" / "examples"


# ---- helpers ----------------------------------------------------------------------------------------------

def state_of(*objects, config=None, clock=None):
    return make_state(ResourceFlavor("default-flavor").obj(), *objects, config=config, clock=clock)


def preemptor(state, ns, name) -> Preemptor:
    p = workload_info(state, ns, name)
    _, c = state.store.queue_of(p.template)
    a = assign(state, p, c)
    return Preemptor(p, c, state.ledger.quota_node(c.name), a.usage, set(a.flavors.values()))


def needs_of(pre: Preemptor) -> set:
    return {fr for fr, v in pre.usage.items() if v > available(pre.node, fr)}


def keys(items) -> list[str]:
    return [(t.candidate if isinstance(t, Target) else t).pod.key for t in items]


def why(targets) -> dict[str, str]:
    return {t.candidate.pod.key: t.reason for t in targets}


def fingerprint(state):
    return (all_usage(state), {u: (c.cluster_queue, dict(c.usage)) for u, c in state.admitted.items()},
            sorted(state.reservations), sorted(state.holds))


@contextlib.contextmanager
def unchanged(state):
    """The block only computes a decision: quota usage, charges, reservations and holds stay as they were."""
    before = fingerprint(state)
    yield
    assert fingerprint(state) == before


def candidates(state, ns, name, spent=frozenset()):
    pre = preemptor(state, ns, name)
    with unchanged(state):
        return find_candidates(state, pre, needs_of(pre) or set(pre.usage), set(spent))


def quota_targets(state, ns, name):
    pre = preemptor(state, ns, name)
    with unchanged(state):
        found = find_candidates(state, pre, needs_of(pre) or set(pre.usage), set())
        return quota_targets_of(state, pre, found)


def plans(state, ns, name, nodes=None, every=False):
    p = workload_info(state, ns, name)
    _, c = state.store.queue_of(p.template)
    a = assign(state, p, c)
    with unchanged(state):
        return preemption.plans(state, p, c, a, sorted(state.nodes) if nodes is None else nodes,
                       lambda n: state.workloads.room(n, p.uid), every)


def owned(obj: dict, owner: str, kind: str = "ReplicaSet") -> dict:
    obj["metadata"]["ownerReferences"] = [{"apiVersion": "apps/v1", "kind": kind, "name": owner,
                                           "uid": f"uid-{owner}", "controller": True}]
    return obj


def labelled(obj: dict, **labels) -> dict:
    obj["metadata"]["labels"].update(labels)
    return obj


def priority_class(name, value, **annotations):
    return {"apiVersion": "scheduling.k8s.io/v1", "kind": "PriorityClass",
            "metadata": {"name": name, "annotations": annotations}, "value": value}


def pdb(name, ns, selector: dict, **spec):
    return {"apiVersion": "policy/v1", "kind": "PodDisruptionBudget", "metadata": {"name": name, "namespace": ns},
            "spec": {"selector": {"matchLabels": selector}, **spec}}


def annotated(obj: dict, **annotations) -> dict:
    obj["metadata"].setdefault("annotations", {}).update(annotations)
    return obj


# ---- candidate eligibility per policy value (seed 001 抢占, seed 000 候选者) ----------------------------------

def own_queue_state(policy: str):
    """cq (8 CPUs, no cohort) full with four 2-CPU pods of several priorities; p (priority 100, created at
    5s) pending."""
    return state_of(Node("n1").cpu("64").obj(), cpu_queue("cq", 8, preemption={"withinClusterQueue": policy}),
                    LocalQueue("lq", "team-a").cluster_queue("cq").obj(),
                    Pod("low").queue("lq").cpu("2").priority(10).created(1).node("n1").obj(),
                    Pod("equal-older").queue("lq").cpu("2").priority(100).created(2).node("n1").obj(),
                    Pod("equal-newer").queue("lq").cpu("2").priority(100).created(9).node("n1").obj(),
                    Pod("higher").queue("lq").cpu("2").priority(1000).created(3).node("n1").obj(),
                    Pod("p").queue("lq").cpu("2").priority(100).created(5).obj())


def test_within_cluster_queue_never_offers_no_candidate():
    """seed 001 抢占: withinClusterQueue "Never(默认):不要预留 ClusterQueue 中的 Workloads"."""
    assert candidates(own_queue_state("Never"), "team-a", "p") == []


def test_within_cluster_queue_lower_priority_offers_only_lower_priority():
    """seed 001 抢占: "LowerPriority:仅预留 ClusterQueue 中优先级较低的 Workloads" - an equal-priority pod is
    spared even when newer than the preemptor."""
    assert keys(candidates(own_queue_state("LowerPriority"), "team-a", "p")) == ["team-a/low"]


def test_within_cluster_queue_lower_or_newer_equal_priority_adds_newer_equal_ones():
    """seed 001 抢占: "LowerOrNewerEqualPriority:仅预留 ClusterQueue 中优先级较低或等于待处理工作负载的 Workloads":
    an equal-priority pod newer than the preemptor is a candidate, an older one or a higher one is not."""
    found = keys(candidates(own_queue_state("LowerOrNewerEqualPriority"), "team-a", "p"))
    assert sorted(found) == ["team-a/equal-newer", "team-a/low"]


def cohort_state(policy: dict, b_borrowing: bool = True):
    """Cohort co: a (4 CPUs, the preemptor's), b (4), c (8). b runs b-low (10) and b-high (1000), 3 CPUs
    each: 6 of 4, borrowing, and the cohort is full; or 1 CPU each when b_borrowing is False, when no queue
    borrows and p fits the quota. a runs a-low (priority 10, 2 CPUs); p (priority 100, 2 CPUs) is pending."""
    objs = [Node("n1").cpu("64").obj(), cpu_queue("a", 4, "co", preemption=policy), cpu_queue("b", 4, "co"),
            cpu_queue("c", 8, "co"),
            LocalQueue("lq", "team-a").cluster_queue("a").obj(), LocalQueue("lq", "team-b").cluster_queue("b").obj(),
            LocalQueue("lq", "team-c").cluster_queue("c").obj(),
            Pod("a-low").queue("lq").cpu("2").priority(10).created(1).node("n1").obj()]
    if b_borrowing:
        objs += [Pod("b-low", "team-b").queue("lq").cpu("3").priority(10).created(2).node("n1").obj(),
                 Pod("b-high", "team-b").queue("lq").cpu("3").priority(1000).created(3).node("n1").obj(),
                 Pod("c1", "team-c").queue("lq").cpu("8").priority(0).created(4).node("n1").obj()]
    else:
        objs += [Pod("b-low", "team-b").queue("lq").cpu("1").priority(10).created(2).node("n1").obj(),
                 Pod("b-high", "team-b").queue("lq").cpu("1").priority(1000).created(3).node("n1").obj(),
                 Pod("c1", "team-c").queue("lq").cpu("8").priority(0).created(4).node("n1").obj()]
    return state_of(*objs, Pod("p").queue("lq").cpu("2").priority(100).created(10).obj())


def test_reclaim_within_cohort_never_offers_no_cohort_candidate():
    """seed 001 抢占: reclaimWithinCohort "Never(默认):不要预留 cohort 中的 Workloads" - only the own queue's."""
    s = cohort_state({"withinClusterQueue": "LowerPriority", "reclaimWithinCohort": "Never"})
    assert keys(candidates(s, "team-a", "p")) == ["team-a/a-low"]


def test_reclaim_within_cohort_lower_priority_offers_only_lower_priority_pods_of_borrowing_queues():
    """seed 001 抢占: reclaimWithinCohort "LowerPriority:... 则仅预留 cohort 中优先级较低的 Workloads"."""
    s = cohort_state({"reclaimWithinCohort": "LowerPriority"})
    assert keys(candidates(s, "team-a", "p")) == ["team-b/b-low"]


def test_reclaim_within_cohort_any_offers_every_pod_of_a_borrowing_queue_whatever_its_priority():
    """seed 001 抢占: reclaimWithinCohort "Any:... 预留 cohort 中的任何 Workloads,无论优先级如何"; c is within its
    nominal quota, so its pods are no candidates (seed 000 候选者: "cohort 内其他正在借用的 ClusterQueue")."""
    s = cohort_state({"reclaimWithinCohort": "Any"})
    assert keys(candidates(s, "team-a", "p")) == ["team-b/b-low", "team-b/b-high"]


def test_reclaim_within_cohort_any_offers_nothing_from_a_queue_that_is_not_borrowing():
    """seed 000 抢占的原因 / 候选者: a cohort queue loses pods only while it uses more than its nominal quota
    (YuniKorn's law 5, seed 002: "除非队列超过保证容量,否则底下的任务不能被抢佔") - even for a pod that only needs room on
    a node (its quota fits), whatever the pods' priorities."""
    s = cohort_state({"reclaimWithinCohort": "Any"}, b_borrowing=False)
    assert decide(s, workload_info(s, "team-a", "p")).admit
    assert candidates(s, "team-a", "p") == []


def test_candidates_must_use_a_resource_the_preemptor_lacks():
    """seed 000 抢占的原因: the victim's queue must be over nominal in "该资源是被抢占者和抢占者都需要的" - a pod
    that holds only memory frees no CPU."""
    s = state_of(Node("n1").cpu("64").memory("512Gi").obj(),
                 ClusterQueue("a").cohort("co")
                     .resource_group(FlavorQuotas("default-flavor").resource("cpu", "4").resource("memory", "64Gi"))
                     .preemption({"reclaimWithinCohort": "Any"}).obj(),
                 ClusterQueue("b").cohort("co")
                     .resource_group(FlavorQuotas("default-flavor").resource("cpu", "4").resource("memory", "64Gi"))
                     .obj(),
                 LocalQueue("lq", "team-a").cluster_queue("a").obj(),
                 LocalQueue("lq", "team-b").cluster_queue("b").obj(),
                 Pod("b-cpu", "team-b").queue("lq").cpu("8").created(1).node("n1").obj(),
                 Pod("b-mem", "team-b").queue("lq").memory("80Gi").created(2).node("n1").obj(),
                 Pod("p").queue("lq").cpu("2").priority(100).created(10).obj())
    assert keys(candidates(s, "team-a", "p")) == ["team-b/b-cpu"]


# ---- candidate order (seed 000 候选者: 正在借用的队列, 优先级最低, 最近被准入) ----------------------------------

def test_candidates_are_ordered_borrowing_queues_first_then_lowest_priority_then_most_recently_admitted():
    """seed 000 候选者: "cohort 内正在借用的队列中的 Workload / 优先级最低的 Workload / 最近被准入的 Workload"."""
    s = state_of(Node("n1").cpu("64").obj(),
                 cpu_queue("a", 4, "co", preemption={"withinClusterQueue": "LowerPriority", "reclaimWithinCohort": "Any"}),
                 cpu_queue("b", 2, "co"), LocalQueue("lq", "team-a").cluster_queue("a").obj(),
                 LocalQueue("lq", "team-b").cluster_queue("b").obj(),
                 Pod("a-old").queue("lq").cpu("1").priority(0).created(1).node("n1").obj(),
                 Pod("a-new").queue("lq").cpu("1").priority(0).created(2).node("n1").obj(),
                 Pod("a-mid").queue("lq").cpu("1").priority(50).created(3).node("n1").obj(),
                 Pod("b-mid", "team-b").queue("lq").cpu("1").priority(50).created(4).node("n1").obj(),
                 Pod("b-low-old", "team-b").queue("lq").cpu("1").priority(0).created(5).node("n1").obj(),
                 Pod("b-low-new", "team-b").queue("lq").cpu("1").priority(0).created(6).node("n1").obj(),
                 Pod("p").queue("lq").cpu("2").priority(100).created(10).obj())
    found = candidates(s, "team-a", "p")
    assert keys(found) == ["team-b/b-low-new", "team-b/b-low-old", "team-b/b-mid",
                           "team-a/a-new", "team-a/a-old", "team-a/a-mid"]
    assert [c.rank for c in found] == list(range(6))


def test_most_recently_admitted_means_the_charge_time_not_the_creation_time():
    """seed 000 候选者 "最近被准入的 Workload": x was created first but admitted (bound) last, so it goes first
    (Charge.admitted_at, Kueue's quota reservation time)."""
    clock = FakeClock(BASE_TIME + 100)
    s = state_of(Node("n1").cpu("64").obj(), cpu_queue("cq", 4, preemption={"withinClusterQueue": "LowerPriority"}),
                 LocalQueue("lq", "team-a").cluster_queue("cq").obj(),
                 Pod("x").queue("lq").cpu("2").priority(0).created(1).obj(),
                 Pod("y").queue("lq").cpu("2").priority(0).created(5).node("n1").obj(), clock=clock)
    v = decide(s, workload_info(s, "team-a", "x"))
    assert v.admit
    s.bindings.commit("uid-team-a-x", "n1", Charge("cq", v.assignment.flavors, v.assignment.usage))
    assert s.admitted["uid-team-a-x"].admitted_at == BASE_TIME + 100
    assert s.admitted["uid-team-a-y"].admitted_at == BASE_TIME + 5
    apply(s, Pod("p").queue("lq").cpu("2").priority(100).created(50).obj())
    assert keys(candidates(s, "team-a", "p")) == ["team-a/x", "team-a/y"]


def test_order_sorts_candidates_by_kueues_keys_and_ranks_them():
    """seed 000 候选者: order() itself, on hand-made candidates."""
    s = own_queue_state("LowerPriority")
    pods = {k: pod_info(s, "team-a", k) for k in ("low", "equal-older", "higher")}
    made = [Candidate(pods["low"], "cq", {FR: 1}, 10.0), Candidate(pods["equal-older"], "other", {FR: 1}, 1.0),
            Candidate(pods["higher"], "cq", {FR: 1}, 20.0), Candidate(pods["equal-older"], "cq", {FR: 1}, 30.0)]
    ordered = order(list(made), "cq")
    assert [(c.cluster_queue, c.admitted_at) for c in ordered] == [("other", 1.0), ("cq", 10.0), ("cq", 30.0),
                                                                  ("cq", 20.0)]
    assert [c.rank for c in ordered] == [0, 1, 2, 3]


# ---- the classic heuristics (seed 000 经典抢占 目标 1-4) and minimisation ----------------------------------------

def test_heuristic_1_all_candidates_in_own_queue_allows_borrowing():
    """seed 000 目标 1: "如果所有候选者都属于目标队列,则 Kueue 会贪婪地选择候选者 ... 允许 ClusterQueue 的使用量超过名义
    配额,直至 borrowingLimit". a (4 CPUs) holds a-keep (priority 1000, 2) and a-low (priority 0, 2); b is at its
    nominal; the cohort has 2 CPUs free. p (4 CPUs) fits after a-low only by borrowing 2."""
    s = state_of(Node("n1").cpu("64").obj(),
                 cpu_queue("a", 4, "co", preemption={"withinClusterQueue": "LowerPriority", "reclaimWithinCohort": "Any"}),
                 cpu_queue("b", 4, "co"), cpu_queue("c", 2, "co"), LocalQueue("lq", "team-a").cluster_queue("a").obj(),
                 LocalQueue("lq", "team-b").cluster_queue("b").obj(),
                 Pod("a-keep").queue("lq").cpu("2").priority(1000).created(1).node("n1").obj(),
                 Pod("a-low").queue("lq").cpu("2").priority(0).created(2).node("n1").obj(),
                 Pod("b1", "team-b").queue("lq").cpu("4").priority(0).created(3).node("n1").obj(),
                 Pod("p").queue("lq").cpu("4").priority(100).created(10).obj())
    targets = quota_targets(s, "team-a", "p")
    assert why(targets) == {"team-a/a-low": IN_CLUSTER_QUEUE}
    node_a = s.ledger.quota_node("a")
    assert node_a.usage[FR] - 2 * CPU + 4 * CPU > node_a.subtree[FR]       # it borrows once admitted


def borrow_state(threshold=100, b_pods=(("b-low", 50), ("b-high", 500))):
    """Cohort org, 16 CPUs: a 4 (borrowWithinCohort LowerPriority, threshold), b 2, c 10. a1 (1000) fills a;
    b's pods (4 CPUs each) borrow; c1 (50) sits within c's nominal. a2 (priority 1000, 4 CPUs) must borrow."""
    bwc = {"policy": "LowerPriority"}
    if threshold is not None:
        bwc["maxPriorityThreshold"] = threshold
    objs = [Node("n1").cpu("64").obj(),
            cpu_queue("a", 4, "org", preemption={"reclaimWithinCohort": "Any", "borrowWithinCohort": bwc}),
            cpu_queue("b", 2, "org"), cpu_queue("c", 10, "org"),
            LocalQueue("lq", "team-a").cluster_queue("a").obj(), LocalQueue("lq", "team-b").cluster_queue("b").obj(),
            LocalQueue("lq", "team-c").cluster_queue("c").obj(),
            Pod("a1").queue("lq").cpu("4").priority(1000).created(1).node("n1").obj(),
            Pod("c1", "team-c").queue("lq").cpu("4").priority(50).created(9).node("n1").obj()]
    objs += [Pod(n, "team-b").queue("lq").cpu("4").priority(prio).created(2 + i).node("n1").obj() for i,
             (n, prio) in enumerate(b_pods)]
    return state_of(*objs, Pod("a2").queue("lq").cpu("4").priority(1000).created(20).obj())


def test_heuristic_2_borrow_within_cohort_takes_a_pod_below_the_threshold():
    """seed 000 目标 2 / seed 001 borrowWithinCohort: a preemptor that must borrow takes pods of borrowing queues
    strictly below maxPriorityThreshold + 1 (here priority <= 100): b-low (50), reason
    InCohortReclaimWhileBorrowing. c1 (50) is below the threshold too, but c is not borrowing."""
    assert why(quota_targets(borrow_state(), "team-a", "a2")) == {"team-b/b-low": IN_COHORT_RECLAIM_WHILE_BORROWING}


def test_heuristic_2_borrow_within_cohort_never_takes_a_pod_above_the_threshold():
    """seed 001 borrowWithinCohort: "仅在配置的优先级阈值内可以预留该场景中的工作负载" - b-high (500 > 100) stays, so
    the borrowing preemptor gets nothing although its priority (1000) is higher."""
    s = borrow_state(b_pods=(("b-high", 500), ("b-high2", 500)))
    assert quota_targets(s, "team-a", "a2") is None
    found, reason = plans(s, "team-a", "a2")
    assert found == [] and "frees enough quota" in reason


def test_heuristic_2_without_max_priority_threshold_the_preemptors_priority_is_the_bound():
    """seed 001 borrowWithinCohort LowerPriority: "则仅预留 cohort 中优先级较低的 Workloads" - without a threshold,
    any lower-priority pod of a borrowing queue (b-high, 500 < 1000)."""
    s = borrow_state(threshold=None, b_pods=(("b-high", 500), ("b-high2", 500)))
    assert why(quota_targets(s, "team-a", "a2")) == {"team-b/b-high2": IN_COHORT_RECLAIM_WHILE_BORROWING}


def test_heuristic_2_a_pod_above_the_threshold_is_taken_only_if_the_preemptor_then_needs_no_borrowing():
    """Kueue's minimalPreemptions with allowBorrowingBelowPriority (seed 000 目标 2): a target at or above the
    threshold switches borrowing off. a uses 2 of 6, so p (3 CPUs) fits within nominal once b-high2 (500) is
    gone: taken, with the plain InCohortReclamation reason."""
    s = state_of(Node("n1").cpu("64").obj(),
                 cpu_queue("a", 6, "org", preemption={"reclaimWithinCohort": "Any",
                                                  "borrowWithinCohort": {"policy": "LowerPriority",
                                                                         "maxPriorityThreshold": 100}}),
                 cpu_queue("b", 2, "org"), LocalQueue("lq", "team-a").cluster_queue("a").obj(),
                 LocalQueue("lq", "team-b").cluster_queue("b").obj(),
                 Pod("a1").queue("lq").cpu("2").priority(1000).created(1).node("n1").obj(),
                 Pod("b-high", "team-b").queue("lq").cpu("3").priority(500).created(2).node("n1").obj(),
                 Pod("b-high2", "team-b").queue("lq").cpu("3").priority(500).created(3).node("n1").obj(),
                 Pod("p").queue("lq").cpu("3").priority(1000).created(10).obj())
    assert why(quota_targets(s, "team-a", "p")) == {"team-b/b-high2": IN_COHORT_RECLAMATION}


def test_heuristic_3_under_nominal_reclaims_without_borrowing():
    """seed 000 目标 3: "如果目标队列当前的使用量低于名义配额,则 Kueue 会贪婪地选择候选者,直到抢占者 Workload 能够适配,
    不允许借用". a uses 2 of 4; b uses 6 of 4. Taking b3 alone would leave p (4 CPUs) borrowing, and b
    stops being a candidate once at its nominal, so a's own a-low goes too: p then fits within its 4."""
    s = state_of(Node("n1").cpu("64").obj(),
                 cpu_queue("a", 4, "co", preemption={"withinClusterQueue": "LowerPriority", "reclaimWithinCohort": "Any"}),
                 cpu_queue("b", 4, "co"), LocalQueue("lq", "team-a").cluster_queue("a").obj(),
                 LocalQueue("lq", "team-b").cluster_queue("b").obj(),
                 Pod("a-low").queue("lq").cpu("2").priority(0).created(1).node("n1").obj(),
                 *[Pod(f"b{i}", "team-b").queue("lq").cpu("2").priority(0).created(1 + i).node("n1")
                       .obj() for i in range(1, 4)],
                 Pod("p").queue("lq").cpu("4").priority(100).created(10).obj())
    targets = quota_targets(s, "team-a", "p")
    assert why(targets) == {"team-b/b3": IN_COHORT_RECLAMATION, "team-a/a-low": IN_CLUSTER_QUEUE}
    assert keys(targets) == ["team-b/b3", "team-a/a-low"]


def test_heuristic_4_final_attempt_takes_only_own_queue_pods_with_borrowing():
    """seed 000 目标 4: "如果通过上述方法仍无法适配,Kueue 只会贪婪地选择属于抢占 ClusterQueue 的候选者,直到抢占者
    Workload 能够适配,允许借用". a is at its nominal 4 (not under it, so heuristic 3 is skipped); b borrows 1;
    the cohort has 1 CPU free. b1 comes first in candidate order but is left alone: a-low goes, and p
    (2 CPUs) borrows 1."""
    s = state_of(Node("n1").cpu("64").obj(),
                 cpu_queue("a", 4, "co", preemption={"withinClusterQueue": "LowerPriority", "reclaimWithinCohort": "Any"}),
                 cpu_queue("b", 1, "co"), cpu_queue("c", 3, "co"),
                 LocalQueue("lq", "team-a").cluster_queue("a").obj(),
                 LocalQueue("lq", "team-b").cluster_queue("b").obj(),
                 LocalQueue("lq", "team-c").cluster_queue("c").obj(),
                 Pod("a-keep").queue("lq").cpu("3").priority(1000).created(1).node("n1").obj(),
                 Pod("a-low").queue("lq").cpu("1").priority(0).created(2).node("n1").obj(),
                 Pod("b1", "team-b").queue("lq").cpu("2").priority(0).created(3).node("n1").obj(),
                 Pod("c1", "team-c").queue("lq").cpu("1").priority(0).created(4).node("n1").obj(),
                 Pod("p").queue("lq").cpu("2").priority(100).created(10).obj())
    assert keys(candidates(s, "team-a", "p")) == ["team-b/b1", "team-a/a-low"]
    assert why(quota_targets(s, "team-a", "p")) == {"team-a/a-low": IN_CLUSTER_QUEUE}


def test_classic_preemption_needs_the_request_within_nominal_quota():
    """seed 000 经典抢占: "该 Workload 的请求低于 flavor 的名义配额, 或 启用了 borrowWithinCohort" - a 6-CPU pod in a
    4-CPU queue may not preempt even its own lower-priority pods."""
    s = state_of(Node("n1").cpu("64").obj(), cpu_queue("a", 4, "co", preemption={"withinClusterQueue": "LowerPriority"}),
                 cpu_queue("b", 8, "co"), LocalQueue("lq", "team-a").cluster_queue("a").obj(),
                 LocalQueue("lq", "team-b").cluster_queue("b").obj(),
                 Pod("a-low").queue("lq").cpu("4").priority(0).created(1).node("n1").obj(),
                 Pod("b1", "team-b").queue("lq").cpu("8").priority(0).created(2).node("n1").obj(),
                 Pod("p").queue("lq").cpu("6").priority(100).created(10).obj())
    assert keys(candidates(s, "team-a", "p")) == ["team-a/a-low"]
    assert quota_targets(s, "team-a", "p") is None


def test_minimisation_gives_back_a_target_the_pod_fits_without():
    """seed 000 目标: "算法的最后一步是最小化目标集合 ... 反向遍历初始目标列表,并在抢占者 Workload 仍能适配的情况下,将目标
    Workload 从目标列表中移除". small (1 CPU) is first in order but p (4 CPUs) fits with big alone."""
    s = state_of(Node("n1").cpu("64").obj(), cpu_queue("cq", 5, preemption={"withinClusterQueue": "LowerPriority"}),
                 LocalQueue("lq", "team-a").cluster_queue("cq").obj(),
                 Pod("big").queue("lq").cpu("4").priority(0).created(1).node("n1").obj(),
                 Pod("small").queue("lq").cpu("1").priority(0).created(2).node("n1").obj(),
                 Pod("p").queue("lq").cpu("4").priority(100).created(10).obj())
    assert keys(candidates(s, "team-a", "p")) == ["team-a/small", "team-a/big"]
    assert keys(quota_targets(s, "team-a", "p")) == ["team-a/big"]


def test_quota_targets_is_empty_when_the_quota_fits_already():
    """seed 000 抢占: preemption is for a workload that "无法适配未使用配额"; one that fits needs no quota target."""
    s = nodes_state()
    assert quota_targets(s, "team-a", "h") == []


# ---- fair sharing (seed 000 公平共享) ---------------------------------------------------------------------------

FAIR = Configuration(fair_sharing=True)


def fair_shares_state(config=FAIR, weight_b=None):
    """seed 000 公平共享 numbers: cohort org 12 CPUs; a 6 (reclaimWithinCohort Any), b 3, c 3. b runs b1..b7
    (1 CPU, older): share 4/12 = 333; c runs c1..c5 (1 CPU, newer): share 2/12 = 166. a1 (2 CPUs) pending."""
    b_spec = {"fairSharing": {"weight": weight_b}} if weight_b is not None else {}
    return state_of(Node("n1").cpu("64").obj(), cpu_queue("a", 6, "org", preemption={"reclaimWithinCohort": "Any"}),
                    cpu_queue("b", 3, "org", **b_spec), cpu_queue("c", 3, "org"),
                    LocalQueue("lq", "team-a").cluster_queue("a").obj(),
                    LocalQueue("lq", "team-b").cluster_queue("b").obj(),
                    LocalQueue("lq", "team-c").cluster_queue("c").obj(),
                    *[Pod(f"b{i}", "team-b").queue("lq").cpu("1").created(i).node("n1").obj() for i in range(1, 8)],
                    *[Pod(f"c{i}", "team-c").queue("lq").cpu("1").created(10 + i).node("n1")
                          .obj() for i in range(1, 6)],
                    Pod("a1").queue("lq").cpu("2").created(30).obj(), config=config)


def test_fair_sharing_takes_from_the_queue_with_the_highest_share():
    """seed 000 公平共享: "在抢占过程中,Kueue 优先从份额值最高的 ClusterQueue 中抢占 Workload"; 算法概述: after each
    target the shares are compared again. b (333) loses b7, still above c (250 > 166), then b6. a1 stays within
    a's nominal quota, so the reason is reclamation, as in Kueue's TestFairPreemptions "reclaim nominal from user
    using the most" (its FairSharingPreemptWithinNominal, on by default)."""
    s = fair_shares_state()
    assert share(s, s.ledger.quota_node("b")).rounded == 333 and share(s, s.ledger.quota_node("c")).rounded == 166
    targets = quota_targets(s, "team-a", "a1")
    assert why(targets) == {"team-b/b7": IN_COHORT_RECLAMATION, "team-b/b6": IN_COHORT_RECLAMATION}


def test_classic_preemption_on_the_same_cluster_takes_the_most_recently_admitted():
    """seed 000 候选者 (contrast with the fair-sharing test above): without fair sharing c's newer pods go."""
    s = fair_shares_state(config=Configuration())
    assert sorted(keys(quota_targets(s, "team-a", "a1"))) == ["team-c/c4", "team-c/c5"]


def test_fair_sharing_weight_divides_a_queues_share():
    """seed 000 ClusterQueue 份额值: "份额值会根据 ClusterQueue 中定义的 .spec.fairSharing.weight 进行加权" - with
    weight 3, b's 333 becomes 111, below c's 166: c loses its newest pods first."""
    s = fair_shares_state(weight_b=3)
    assert share(s, s.ledger.quota_node("b")).rounded == 111
    assert keys(quota_targets(s, "team-a", "a1"))[0] == "team-c/c5"


def strategy_state(strategies):
    """seed 000 抢占策略 numbers: cohort 12 CPUs, a/b/c 4 each. a runs a1 (4); b runs b1, b2 (4 each, share 333).
    a2 (2 CPUs) would make a borrow 2 (share 166); taking a b pod leaves b at share 0."""
    return state_of(Node("n1").cpu("64").obj(), cpu_queue("a", 4, "org", preemption={"reclaimWithinCohort": "Any"}),
                    cpu_queue("b", 4, "org"), cpu_queue("c", 4, "org"),
                    LocalQueue("lq", "team-a").cluster_queue("a").obj(),
                    LocalQueue("lq", "team-b").cluster_queue("b").obj(),
                    Pod("a1").queue("lq").cpu("4").created(1).node("n1").obj(),
                    Pod("b1", "team-b").queue("lq").cpu("4").created(2).node("n1").obj(),
                    Pod("b2", "team-b").queue("lq").cpu("4").created(3).node("n1").obj(),
                    Pod("a2").queue("lq").cpu("2").created(10).obj(),
                    config=Configuration(fair_sharing=True, preemption_strategies=tuple(strategies)))


def test_less_than_or_equal_to_final_share_alone_refuses():
    """seed 000 抢占策略 LessThanOrEqualToFinalShare: 166 <= 0 is false for both b pods: no target."""
    s = strategy_state(["LessThanOrEqualToFinalShare"])
    assert quota_targets(s, "team-a", "a2") is None


def test_less_than_initial_share_as_the_next_strategy_takes_the_first_candidate():
    """seed 000 抢占策略: "抢占算法只有在当前策略下没有更多满足条件的抢占候选且抢占者仍无法适配时,才会使用下一个策略";
    LessThanInitialShare: 166 < 333, and it takes b's first candidate (the most recently admitted, b2)."""
    s = strategy_state(["LessThanOrEqualToFinalShare", "LessThanInitialShare"])
    assert why(quota_targets(s, "team-a", "a2")) == {"team-b/b2": IN_COHORT_FAIR_SHARING}


def test_less_than_initial_share_alone_allows_it_too():
    """seed 000 抢占策略: LessThanInitialShare "不依赖于被抢占 Workload 的份额使用情况"."""
    s = strategy_state(["LessThanInitialShare"])
    assert keys(quota_targets(s, "team-a", "a2")) == ["team-b/b2"]


@pytest.mark.parametrize("strategy,preemptor_new,target_old,target_new,allowed", [
    ("LessThanOrEqualToFinalShare", 166, 333, 0, False),
    ("LessThanOrEqualToFinalShare", 166, 333, 166, True),
    ("LessThanOrEqualToFinalShare", 167, 333, 166, False),
    ("LessThanInitialShare", 166, 333, 0, True),
    ("LessThanInitialShare", 333, 333, 0, False),
])
def test_strategy_predicates(strategy, preemptor_new, target_old, target_new, allowed):
    """seed 000 抢占策略: "小于等于目标 ClusterQueue 在移除被抢占 Workload 后的份额" / "严格小于目标 ClusterQueue 的份额"."""
    assert strategy_allows(strategy, preemptor_new, target_old, target_new) is allowed


# ---- YuniKorn's laws (seed 002 抢占法则) -------------------------------------------------------------------------

def test_own_owner_is_never_a_victim():
    """seed 002 law 3: "触发抢占的任务和被抢佔的任务不能来自同一应用程序" - a pod never preempts a sibling of its own
    ReplicaSet, even one the policy would allow (equal priority, newer); another ReplicaSet's pod may go."""
    s = state_of(Node("n1").cpu("64").obj(),
                 cpu_queue("cq", 4, preemption={"withinClusterQueue": "LowerOrNewerEqualPriority"}),
                 LocalQueue("lq", "team-a").cluster_queue("cq").obj(),
                 owned(Pod("web-2").queue("lq").cpu("2").priority(100).created(8).node("n1").obj(), "web"),
                 owned(Pod("api-1").queue("lq").cpu("2").priority(100).created(9).node("n1").obj(), "api"),
                 owned(Pod("web-3").queue("lq").cpu("2").priority(100).created(5).obj(), "web"))
    assert keys(candidates(s, "team-a", "web-3")) == ["team-a/api-1"]
    assert keys(quota_targets(s, "team-a", "web-3")) == ["team-a/api-1"]


def test_own_gang_is_never_a_victim():
    """seed 002 law 3 for gangs (kueue.x-k8s.io/pod-group-name): a member never preempts its own group."""
    s = state_of(Node("n1").cpu("64").obj(), cpu_queue("cq", 4, preemption={"withinClusterQueue": "LowerPriority"}),
                 LocalQueue("lq", "team-a").cluster_queue("cq").obj(),
                 labelled(Pod("g-0").queue("lq").cpu("2").priority(10).created(1).node("n1").obj(),
                          **{"kueue.x-k8s.io/pod-group-name": "g"}),
                 Pod("other").queue("lq").cpu("2").priority(10).created(2).node("n1").obj(),
                 labelled(Pod("g-1").queue("lq").cpu("2").priority(100).created(3).obj(),
                          **{"kueue.x-k8s.io/pod-group-name": "g"}))
    assert keys(candidates(s, "team-a", "g-1")) == ["team-a/other"]


def fenced_state(fence_on: str):
    """Cohort org (4 CPUs of its own) holds t2 (4, using 8 with t2-1..t2-4, 2 CPUs each), sys (2) and cohort
    tenant-1, which holds t1 (0) and t1b (0, using 2 with t1b-1): tenant-1 as a whole borrows 2 from org, so
    its borrowing queue is in reach from outside (Kueue enters no subtree within its own quota). The tree
    is full. fence_on names the Cohort or ClusterQueue fenced."""
    any_ = {"reclaimWithinCohort": "Any"}
    t1 = cpu_queue("t1", 0, "tenant-1", preemption=any_)
    tenant = Cohort("tenant-1").parent("org").obj()
    for obj in (t1, tenant):
        if obj["metadata"]["name"] == fence_on:
            annotated(obj, **{FENCE: "true"})
    return state_of(Node("n1").cpu("64").obj(),
                    Cohort("org").resource_group(FlavorQuotas("default-flavor").resource("cpu", "4")).obj(), tenant, t1,
                    cpu_queue("t1b", 0, "tenant-1"),
                    cpu_queue("t2", 4, "org"), cpu_queue("sys", 2, "org", preemption=any_),
                    LocalQueue("lq", "tenant-1").cluster_queue("t1").obj(),
                    LocalQueue("lqb", "tenant-1").cluster_queue("t1b").obj(),
                    LocalQueue("lq", "team-2").cluster_queue("t2").obj(),
                    LocalQueue("lq", "system").cluster_queue("sys").obj(),
                    *[Pod(f"t2-{i}", "team-2").queue("lq").cpu("2").created(i).node("n1").obj() for i in range(1, 5)],
                    Pod("t1b-1", "tenant-1").queue("lqb").cpu("2").created(7).node("n1").obj(),
                    Pod("t1-p", "tenant-1").queue("lq").cpu("2").created(10).obj(),
                    Pod("s1", "system").queue("lq").cpu("2").created(11).obj())


def test_fence_keeps_a_preemptor_inside_from_taking_victims_outside():
    """seed 002 抢占范围 / law 7: "任务不能抢占其抢占范围外的任务" - t1 sits under the fenced cohort tenant-1:
    of the borrowing queues only t1b (inside) offers candidates, never t2 (outside)."""
    s = fenced_state("tenant-1")
    assert preemption_fence(s, s.cluster_queues["t1"]) is s.ledger.quota_tree().cohorts["tenant-1"]
    assert keys(candidates(s, "tenant-1", "t1-p")) == ["tenant-1/t1b-1"]


def test_fence_is_one_way_a_preemptor_outside_may_take_victims_inside():
    """seed 002 抢占范围: "抢占范围是单向的,它阻止向外 ... 移动,但不会阻止向内(或向下)移动" - sys, outside any fence,
    takes from t2 and from t1b inside tenant-1 alike."""
    s = fenced_state("tenant-1")
    assert preemption_fence(s, s.cluster_queues["sys"]) is None
    assert sorted(keys(candidates(s, "system", "s1"))) == ["team-2/t2-1", "team-2/t2-2", "team-2/t2-3",
                                                          "team-2/t2-4", "tenant-1/t1b-1"]


def test_fence_on_a_cluster_queue_confines_its_pods_to_their_own_queue():
    """seed 002 抢占范围: a fence on a leaf queue (队列 A) limits preemption to inside that queue."""
    s = fenced_state("t1")
    assert preemption_fence(s, s.cluster_queues["t1"]) is s.ledger.quota_node("t1")
    assert candidates(s, "tenant-1", "t1-p") == []


def test_without_a_fence_the_whole_cohort_tree_is_searched():
    """seed 002 抢占范围: "如果没有设置抢佔策略 则使用 default 值" - no fence, no limit."""
    s = fenced_state("none")
    assert len(candidates(s, "tenant-1", "t1-p")) == 5


def delayed_state(delay="30s", clock=None):
    return state_of(Node("n1").cpu("8").obj(),
                    annotated(cpu_queue("cq", 8, preemption={"withinClusterQueue": "LowerPriority"}),
                                               **({DELAY: delay} if delay else {})),
                    LocalQueue("lq", "team-a").cluster_queue("cq").obj(),
                    Pod("l1").queue("lq").cpu("8").priority(0).created(1).node("n1").obj(),
                    Pod("h").queue("lq").cpu("4").priority(100).created(100).obj(), clock=clock)


def test_delay_forbids_preemption_until_the_pod_has_waited_that_long():
    """seed 002 抢占逻辑: "只有在延迟之后才会触发抢占。在触发抢占之前,必须至少经过一个抢占延迟单位" (preemption.delay as
    quotient.dev/preemption-delay on the preemptor's ClusterQueue). h was created at 100s."""
    clock = FakeClock(BASE_TIME + 110)
    s = delayed_state(clock=clock)
    h, c = workload_info(s, "team-a", "h"), s.cluster_queues["cq"]
    with unchanged(s):
        reason = may_preempt(s, h, c, clock())
    assert "preemption delay" in reason and "30s after it was created, 20s from now" in reason
    clock.advance(20)
    assert may_preempt(s, h, c, clock()) == ""


def test_no_delay_annotation_means_no_wait():
    """seed 002 抢占配置: the delay is per queue; Quotient's ClusterQueues have none unless annotated."""
    clock = FakeClock(BASE_TIME + 100)
    s = delayed_state(delay=None, clock=clock)
    assert may_preempt(s, workload_info(s, "team-a", "h"), s.cluster_queues["cq"], clock()) == ""


@pytest.mark.parametrize("value", ["soon", "-5s"])
def test_an_unparsable_delay_means_the_default_30s(value):
    """seed 002 抢占配置: "如果没有指定 preemption.delay 属性,则使用默认的 30s。如果字符串解析失败,一样使用 30s"."""
    clock = FakeClock(BASE_TIME + 110)
    s = delayed_state(delay=value, clock=clock)
    h, c = workload_info(s, "team-a", "h"), s.cluster_queues["cq"]
    assert "20s from now" in may_preempt(s, h, c, clock())
    clock.advance(20)
    assert may_preempt(s, h, c, clock()) == ""


@pytest.mark.parametrize("mode,queued,allowed", [
    ("None", True, False), ("None", False, False),
    ("Quota", True, True), ("Quota", False, False),
    ("Auto", True, True), ("Auto", False, True),
    ("Priority", True, False), ("Priority", False, True),
])
def test_may_preempt_per_mode(mode, queued, allowed):
    """seed 004 (ACK): None disables preemption; ElasticQuota (Quota): "Pod yang melakukan preemption tidak
    termasuk dalam Quota apa pun: Preemption tidak diizinkan"; Default (Priority) is kube-scheduler's own,
    so Quotient does not preempt for queued pods itself; Auto: quota rules for queued pods, Default else."""
    s = delayed_state(delay=None)
    s.config.preemption_mode = mode
    h = workload_info(s, "team-a", "h")
    reason = may_preempt(s, h, s.cluster_queues["cq"] if queued else None, BASE_TIME + 1000)
    assert (reason == "") is allowed, reason


def test_a_pod_with_preemption_policy_never_may_not_preempt():
    """seed 002 优先级类: PriorityClass preemptionPolicy Never - "仅允许 Pod 在调度阶段可以选择不抢占其他优先级较低的 Pod"."""
    s = delayed_state(delay=None)
    apply(s, priority_class("meek", 100) | {"preemptionPolicy": "Never"})
    meek = Pod("meek").queue("lq").cpu("4").created(101).obj()
    meek["spec"]["priorityClassName"] = "meek"
    apply(s, meek)
    assert "preemptionPolicy is Never" in may_preempt(s, workload_info(s, "team-a", "meek"), s.cluster_queues["cq"], 0)


def opt_out_state(with_plain=True):
    """cq 12 CPUs (LowerPriority) on n1 (12): l1 (class low, oldest), p1, p2 (class protected: allow-preemption
    "false"), 4 CPUs each at priority 10; h (1000, 4 CPUs) pending."""
    objs = [Node("n1").cpu("12").obj(), cpu_queue("cq", 12, preemption={"withinClusterQueue": "LowerPriority"}),
            LocalQueue("lq", "team-a").cluster_queue("cq").obj(), priority_class("low", 10),
            priority_class("protected", 10, **{"yunikorn.apache.org/allow-preemption": "false"})]
    pods = [("l1", "low"), ("p1", "protected"), ("p2", "protected")] if with_plain else \
        [("p0", "protected"), ("p1", "protected"), ("p2", "protected")]
    for i, (name, klass) in enumerate(pods):
        obj = Pod(name).queue("lq").cpu("4").created(1 + i).node("n1").obj()
        obj["spec"]["priorityClassName"] = klass
        objs.append(obj)
    return state_of(*objs, Pod("h").queue("lq").cpu("4").priority(1000).created(10).obj())


def test_opted_out_pods_are_spared_while_another_victim_set_exists():
    """seed 002 优先级类: yunikorn.apache.org/allow-preemption "false" asks not to be preempted: p2 (first in
    Kueue's order) is spared; l1 is taken."""
    s = opt_out_state()
    assert [c.last_resort for c in candidates(s, "team-a", "h")] == [True, True, False]
    found, reason = plans(s, "team-a", "h")
    assert reason == "" and keys(found[0].targets) == ["team-a/l1"]


def test_opted_out_pods_are_taken_as_a_last_resort():
    """seed 002 抢占策略只是强烈建议: "如果没有其他解决方案,这会是最后的手段" - only opted-out pods: the most recently
    admitted one goes."""
    s = opt_out_state(with_plain=False)
    found, reason = plans(s, "team-a", "h")
    assert reason == "" and keys(found[0].targets) == ["team-a/p2"]
    assert opted_out(s, pod_info(s, "team-a", "p2"))


def guarantee_state(protect: bool):
    """prod 6, test 6 (cohort parent). test runs test-1, test-2 (4 CPUs each: 8 of 6); prod runs 4 x 1 CPU and
    prod-5 (1 CPU) is pending: taking a test pod would leave test at 4 < 6 (seed 002 防止抢占循环, case 2)."""
    return state_of(Node("n1").cpu("64").obj(), cpu_queue("prod", 6, "parent", preemption={"reclaimWithinCohort": "Any"}),
                    cpu_queue("test", 6, "parent", preemption={"reclaimWithinCohort": "Any"}),
                    LocalQueue("lq", "prod").cluster_queue("prod").obj(),
                    LocalQueue("lq", "test").cluster_queue("test").obj(),
                    *[Pod(f"test-{i}", "test").queue("lq").cpu("4").created(i).node("n1").obj() for i in (1, 2)],
                    *[Pod(f"prod-{i}", "prod").queue("lq").cpu("1").created(2 + i).node("n1")
                          .obj() for i in range(1, 5)],
                    Pod("prod-5", "prod").queue("lq").cpu("1").created(10).obj(),
                    config=Configuration(guarantee_protection=protect))


def test_guarantee_protection_never_takes_a_queue_below_its_nominal_quota():
    """seed 002 law 2: "当一个任务被考虑成为抢占受害者时,从队列中移除该任务后,队列的使用量不得低于其保证资源容量"."""
    s = guarantee_state(True)
    assert quota_targets(s, "prod", "prod-5") is None
    assert plans(s, "prod", "prod-5")[0] == []


def test_without_guarantee_protection_kueue_reclaims_below_nominal():
    """seed 000 经典抢占 (contrast): Kueue alone takes test-2, leaving test at 4 of its 6."""
    s = guarantee_state(False)
    assert keys(quota_targets(s, "prod", "prod-5")) == ["test/test-2"]


def test_fair_sharing_respects_guarantee_protection_too():
    """seed 002 law 2 with fair sharing on: b (4 nominal) runs two 3-CPU pods; taking one would leave it at 3."""
    cfg = Configuration(fair_sharing=True, guarantee_protection=True)
    objs = [Node("n1").cpu("64").obj(), cpu_queue("a", 6, "co", preemption={"reclaimWithinCohort": "Any"}),
            cpu_queue("b", 4, "co"),
            LocalQueue("lq", "team-a").cluster_queue("a").obj(), LocalQueue("lq", "team-b").cluster_queue("b").obj(),
            Pod("b1", "team-b").queue("lq").cpu("3").created(1).node("n1").obj(),
            Pod("b2", "team-b").queue("lq").cpu("3").created(2).node("n1").obj(),
            Pod("a1").queue("lq").cpu("4").created(3).node("n1").obj(),
            Pod("a2").queue("lq").cpu("2").created(10).obj()]
    assert quota_targets(state_of(*objs, config=cfg), "team-a", "a2") is None
    assert keys(quota_targets(state_of(*objs, config=FAIR), "team-a", "a2")) == ["team-b/b2"]


def test_victims_for_room_on_a_node_come_only_from_queues_still_borrowing():
    """seed 000 候选者 ("cohort 内其他正在借用的 ClusterQueue") and seed 002 law 2, for the victims a node needs for
    room: test (4 nominal) runs t1, t2 on n1 and t3 on n2 (2 CPUs each, 6 of 4). prod's p (4 CPUs) fits its
    quota, but n1 has room only without both t1 and t2, which would leave test at 2 < 4: no plan."""
    objs = [Node("n1").cpu("4").obj(), Node("n2").cpu("2").obj(),
            cpu_queue("prod", 8, "co", preemption={"reclaimWithinCohort": "Any"}), cpu_queue("test", 4, "co"),
            LocalQueue("lq", "prod").cluster_queue("prod").obj(), LocalQueue("lq", "test").cluster_queue("test").obj(),
            Pod("t1", "test").queue("lq").cpu("2").created(1).node("n1").obj(),
            Pod("t2", "test").queue("lq").cpu("2").created(2).node("n1").obj(),
            Pod("t3", "test").queue("lq").cpu("2").created(3).node("n2").obj(),
            Pod("p", "prod").queue("lq").cpu("4").priority(100).created(10).obj()]
    for cfg in (Configuration(), Configuration(guarantee_protection=True)):
        s = state_of(*objs, config=cfg)
        found, reason = plans(s, "prod", "p", every=True)
        assert found == [], [keys(p.targets) for p in found]
    s = state_of(*objs[:-1],
                 Pod("p", "prod").queue("lq").cpu("2").priority(100).created(10).obj())   # one test pod is enough
    found, _ = plans(s, "prod", "p", every=True)
    assert {p.node: keys(p.targets) for p in found} == {"n1": ["test/t2"], "n2": ["test/t3"]}


# ---- PodDisruptionBudgets -------------------------------------------------------------------------------------

def pdb_state(*extra):
    """cq 8 CPUs (LowerPriority). n1 (4): db-1, db-2 (app=db, newest); n2 (4): web-1, web-2 (older); 2 CPUs each,
    priority 10. h (1000, 4 CPUs) pending."""
    return state_of(Node("n1").cpu("4").obj(), Node("n2").cpu("4").obj(),
                    cpu_queue("cq", 8, preemption={"withinClusterQueue": "LowerPriority"}),
                    LocalQueue("lq", "team-a").cluster_queue("cq").obj(),
                    labelled(Pod("web-1").queue("lq").cpu("2").priority(10).created(1).node("n2").obj(), app="web"),
                    labelled(Pod("web-2").queue("lq").cpu("2").priority(10).created(2).node("n2").obj(), app="web"),
                    labelled(Pod("db-1").queue("lq").cpu("2").priority(10).created(3).node("n1").obj(), app="db"),
                    labelled(Pod("db-2").queue("lq").cpu("2").priority(10).created(4).node("n1").obj(), app="db"),
                    *extra, Pod("h").queue("lq").cpu("4").priority(1000).created(10).obj())


@pytest.mark.parametrize("spec,spent", [
    ({"minAvailable": 2}, True), ({"minAvailable": 1}, False),
    ({"maxUnavailable": 0}, True), ({"maxUnavailable": 1}, False),
    ({"minAvailable": "100%"}, True), ({"minAvailable": "50%"}, False), ({"maxUnavailable": "0%"}, True),
])
def test_spent_budgets(spec, spent):
    """FORMAT.md PodDisruptionBudget: "budgets that preemption should respect where it can" - a budget with no
    disruption left marks its pods (Kubernetes' disruptionsAllowed, percentages rounded up)."""
    s = pdb_state(pdb("db", "team-a", {"app": "db"}, **spec))
    expected = {"uid-team-a-db-1", "uid-team-a-db-2"} if spent else set()
    with unchanged(s):
        assert preemption.spent_budgets(s) == expected


def test_pods_under_a_spent_budget_are_a_last_resort():
    """seed 002 抢占逻辑 (victim groups per node) with FORMAT.md's budgets: {db-1, db-2} would go first in Kueue's
    order, but their budget is spent and {web-2, web-1} on n2 is another set."""
    s = pdb_state(pdb("db", "team-a", {"app": "db"}, minAvailable=2))
    found, _ = plans(s, "team-a", "h", every=True)
    assert [(p.node, sorted(keys(p.targets))) for p in found] == [("n2", ["team-a/web-1", "team-a/web-2"])]
    s = pdb_state()
    found, _ = plans(s, "team-a", "h")
    assert sorted(keys(found[0].targets)) == ["team-a/db-1", "team-a/db-2"]


def test_the_oracles_candidate_search_is_reused_with_the_budgets_it_does_not_see(monkeypatch):
    """One search over the running pods per decision: plans takes the flavor assigner oracle's (issue 19, the
    preemption benchmark), marking last resort the pods whose budget is spent, which the oracle ignores as
    Kueue's does: the same plans as a search of its own. A state changed in between is searched again."""
    calls = []
    search = find_candidates
    spy = lambda *a: calls.append(a[3]) or search(*a)       # noqa: E731
    monkeypatch.setattr(oracle_module, "find_candidates", spy)
    monkeypatch.setattr(choose, "find_candidates", spy)
    s = pdb_state(pdb("db", "team-a", {"app": "db"}, minAvailable=2))
    p = workload_info(s, "team-a", "h")
    cq = s.store.queue_of(p.template)[1]
    a = assign(s, p, cq)
    oracle = oracle_module.PreemptionOracle(s, p, cq)     # as the flavor assigner asks it with two flavors
    oracle("default-flavor", a.usage)
    a.searched = oracle.searched
    assert calls == [set()]                                  # the oracle's search, without budgets

    def planned() -> list:
        with unchanged(s):
            found, _ = preemption.plans(s, p, cq, a, sorted(s.nodes), lambda n: s.workloads.room(n, p.uid), True)
        return [(f.node, sorted(keys(f.targets))) for f in found]

    assert planned() == [("n2", ["team-a/web-1", "team-a/web-2"])]      # db-1, db-2: a last resort
    assert len(calls) == 1
    s.generation += 1                                        # the state moved on: searched again, with budgets
    assert planned() == [("n2", ["team-a/web-1", "team-a/web-2"])]
    assert len(calls) == 2 and calls[-1] == {"uid-team-a-db-1", "uid-team-a-db-2"}


def test_pods_under_a_spent_budget_are_taken_when_nothing_else_frees_room():
    """seed 002 抢占策略只是强烈建议 ("最后的手段"): both sets are protected; one is still taken."""
    s = pdb_state(pdb("db", "team-a", {"app": "db"}, minAvailable=2), pdb("web", "team-a", {"app": "web"}, minAvailable=2))
    found, reason = plans(s, "team-a", "h")
    assert reason == "" and len(found[0].targets) == 2
    assert all(t.candidate.last_resort for t in found[0].targets)


def test_a_pod_in_no_queue_under_a_spent_budget_is_a_last_resort_too():
    """FORMAT.md budgets, for pods in no queue taken for room (LowerPriorityOnNode): u-db's budget is spent,
    u-web on n2 frees the same room."""
    s = state_of(Node("n1").cpu("4").obj(), Node("n2").cpu("4").obj(),
                 cpu_queue("cq", 8, preemption={"withinClusterQueue": "LowerPriority"}),
                 LocalQueue("lq", "team-a").cluster_queue("cq").obj(),
                 labelled(Pod("u-db", "batch").cpu("4").priority(0).created(1).node("n1").obj(), app="db"),
                 Pod("u-web", "batch").cpu("4").priority(0).created(2).node("n2").obj(),
                 pdb("db", "batch", {"app": "db"}, minAvailable=1),
                 Pod("h").queue("lq").cpu("4").priority(100).created(10).obj())
    found, _ = plans(s, "team-a", "h", every=True)
    assert found[0].node == "n2" and why(found[0].targets) == {"batch/u-web": LOWER_PRIORITY_ON_NODE}
    assert all(not t.candidate.last_resort for t in found[0].targets)
    by_node = {p.node: p for p in found}
    assert [t.candidate.last_resort for t in by_node["n1"].targets] == [True]


# ---- node_plans: victim groups per node (seed 002 抢占逻辑) -------------------------------------------------------

def nodes_state():
    """cq 64 CPUs (quota never short), LowerPriority. n1 (4): two 2-CPU pods at priority 10; n2 (4): one 4-CPU pod
    at priority 10; n3 (4): a pod at priority 5000; n4 (8, 4 used): room already. h: priority 1000, 4 CPUs."""
    return state_of(Node("n1").cpu("4").obj(), Node("n2").cpu("4").obj(), Node("n3").cpu("4").obj(),
                    Node("n4").cpu("8").obj(),
                    cpu_queue("cq", 64, preemption={"withinClusterQueue": "LowerPriority"}),
                    LocalQueue("lq", "team-a").cluster_queue("cq").obj(),
                    Pod("n1-a").queue("lq").cpu("2").priority(10).created(1).node("n1").obj(),
                    Pod("n1-b").queue("lq").cpu("2").priority(10).created(2).node("n1").obj(),
                    Pod("n2-a").queue("lq").cpu("4").priority(10).created(3).node("n2").obj(),
                    Pod("n3-a").queue("lq").cpu("4").priority(5000).created(4).node("n3").obj(),
                    Pod("n4-a").queue("lq").cpu("4").priority(10).created(5).node("n4").obj(),
                    Pod("h").queue("lq").cpu("4").priority(1000).created(10).obj())


def test_node_plans_pick_the_node_with_fewest_victims_and_say_why_not_the_others():
    """seed 002 抢占逻辑: "每个节点上的受害者们会被分组 ... 如果有多个可行的组,则需要进行选择": n2 needs one victim,
    n1 two, n3 none may be taken; n4 needs no preemption at all."""
    s = nodes_state()
    found, reason = plans(s, "team-a", "h", nodes=["n1", "n2", "n3", "n4"], every=True)
    assert reason == ""
    assert [(p.node, keys(p.targets)) for p in found] == [("n2", ["team-a/n2-a"]),
                                                         ("n1", ["team-a/n1-b", "team-a/n1-a"])]
    assert found[0].others == {"n1": "2 victim(s), a worse choice",
                               "n3": "insufficient cpu and no pod on it may be preempted"}
    assert why(found[0].targets) == {"team-a/n2-a": IN_CLUSTER_QUEUE}


def test_node_plans_without_every_stop_at_the_best_choice_they_need():
    """seed 002 抢占逻辑: one group is chosen; plans(every=False) (self-driven reclaim) returns only it."""
    s = nodes_state()
    found, _ = plans(s, "team-a", "h", nodes=["n1", "n2", "n3"])
    assert found[0].node == "n2"


def test_node_plans_on_equal_counts_prefer_victims_earlier_in_candidate_order():
    """seed 000 候选者 order as the tie-break between groups of one victim each: the lower priority goes."""
    s = state_of(Node("n1").cpu("4").obj(), Node("n2").cpu("4").obj(),
                 cpu_queue("cq", 64, preemption={"withinClusterQueue": "LowerPriority"}),
                 LocalQueue("lq", "team-a").cluster_queue("cq").obj(),
                 Pod("mid").queue("lq").cpu("4").priority(50).created(1).node("n1").obj(),
                 Pod("low").queue("lq").cpu("4").priority(10).created(2).node("n2").obj(),
                 Pod("h").queue("lq").cpu("4").priority(1000).created(10).obj())
    found, _ = plans(s, "team-a", "h", every=True)
    assert [p.node for p in found] == ["n2", "n1"]


def test_no_node_fits_even_without_its_candidates():
    """seed 002 抢占逻辑: "在开始抢占之前,必须进行检查以确保进行抢佔的 Pod 能适应该节点" - a 16-CPU pod on 8-CPU nodes."""
    s = state_of(Node("n1").cpu("8").obj(), cpu_queue("cq", 64, preemption={"withinClusterQueue": "LowerPriority"}),
                 LocalQueue("lq", "team-a").cluster_queue("cq").obj(),
                 Pod("l").queue("lq").cpu("4").priority(10).created(1).node("n1").obj(),
                 Pod("h").queue("lq").cpu("16").priority(1000).created(10).obj())
    found, reason = plans(s, "team-a", "h", every=True)
    assert found == [] and "on none of the 1 node(s)" in reason


def test_node_plans_directly_quota_targets_first_then_each_nodes_own_candidates():
    """seed 002 抢占逻辑 with seed 000 目标: node_plans gets the quota targets (here l2 on n1) and, unless every,
    stops at the first node where they leave room; with every it also builds n2's own group (u-low2, a pod in
    no queue) and says why n3 (a 2-CPU node) is lost. The group for n2 keeps l2 for quota: node_plans serves
    self-driven reclaim, which evicts quota victims anywhere; the preempt verb asks plans(local=True) instead
    (test_preempt_names_only_victims_running_on_the_node_they_are_listed_for)."""
    s = state_of(Node("n1").cpu("8").obj(), Node("n2").cpu("8").obj(), Node("n3").cpu("2").obj(),
                 cpu_queue("cq", 8, preemption={"withinClusterQueue": "LowerPriority"}),
                 LocalQueue("lq", "team-a").cluster_queue("cq").obj(),
                 Pod("l1").queue("lq").cpu("4").priority(10).created(1).node("n1").obj(),
                 Pod("l2").queue("lq").cpu("4").priority(10).created(2).node("n1").obj(),
                 Pod("u-low", "batch").cpu("8").priority(10).created(3).node("n2").obj(),
                 Pod("n3-a", "batch").cpu("1").priority(10).created(4).node("n3").obj(),
                 Pod("h").queue("lq").cpu("4").priority(1000).created(10).obj())
    pre = preemptor(s, "team-a", "h")
    with unchanged(s):
        found = find_candidates(s, pre, needs_of(pre), set())
        quota = quota_targets_of(s, pre, found)
        assert keys(quota) == ["team-a/l2"]
        room = lambda n: s.workloads.room(n, pre.workload.uid)  # noqa: E731
        first, lost = node_plans(s, pre, found, quota, ["n1", "n2", "n3"], room)
        assert [(p.node, keys(p.targets)) for p in first] == [("n1", ["team-a/l2"])] and lost == {}
        every, lost = node_plans(s, pre, found, quota, ["n1", "n2", "n3"], room, every=True)
    assert [(p.node, keys(p.targets)) for p in every] == [("n1", ["team-a/l2"]), ("n2", ["team-a/l2", "batch/u-low"])]
    assert why(every[1].targets)["batch/u-low"] == LOWER_PRIORITY_ON_NODE
    assert lost == {"n3": "insufficient cpu even without its 1 candidate(s)"}


def test_quota_targets_that_already_leave_room_need_no_other_victim():
    """seed 000 目标 with seed 002's node focus: the quota target's own node gets the pod."""
    s = state_of(Node("n1").cpu("4").obj(), Node("n2").cpu("4").obj(),
                 cpu_queue("cq", 8, preemption={"withinClusterQueue": "LowerPriority"}),
                 LocalQueue("lq", "team-a").cluster_queue("cq").obj(),
                 Pod("old").queue("lq").cpu("4").priority(10).created(1).node("n1").obj(),
                 Pod("new").queue("lq").cpu("4").priority(10).created(2).node("n2").obj(),
                 Pod("h").queue("lq").cpu("4").priority(1000).created(10).obj())
    found, _ = plans(s, "team-a", "h")
    assert [(p.node, keys(p.targets)) for p in found] == [("n2", ["team-a/new"])]


# ---- the preempt verb over HTTP ------------------------------------------------------------------------------

def verb_body(pod_obj: dict, victims: dict[str, list[str]]) -> dict:
    return {"Pod": pod_obj, "NodeNameToVictims": None,
            "NodeNameToMetaVictims": {n: {"Pods": [{"UID": u} for u in uids], "NumPDBViolations": 0}
                                      for n, uids in victims.items()}}


async def call_preempt(api, ext, pod_obj, victims) -> dict[str, list[str]]:
    async with api(ext) as client:
        r = await client.post("/preempt", json=verb_body(pod_obj, victims))
    assert r.status_code == 200, r.text
    return {n: [p["UID"] for p in e["Pods"]] for n, e in r.json()["NodeNameToMetaVictims"].items()}


def uid(name, ns="team-a"):
    return f"uid-{ns}-{name}"


def extender(state) -> Scheduler:
    return Scheduler(state, SnapshotWriter(state))


async def test_preempt_answers_quotients_groups_only_for_nodes_with_victims(api):
    """seed 002 抢占逻辑 (groups per node) through the preempt verb: the request offers n1 (n1-b only), n2 (n2-a),
    n3 (n3-a, of higher priority than h) and n4; Quotient answers n2 and n1 with its own groups (n1 needs
    both its pods), and drops n3 (no pod there may be taken) and n4 (h fits there already)."""
    s = nodes_state()
    ext = extender(s)
    before = all_usage(s)
    answer = await call_preempt(api, ext, Pod("h").queue("lq").cpu("4").priority(1000).created(10).obj(),
                                {"n1": [uid("n1-b")], "n2": [uid("n2-a")], "n3": [uid("n3-a")], "n4": [uid("n4-a")]})
    assert answer == {"n2": [uid("n2-a")], "n1": [uid("n1-b"), uid("n1-a")]}
    assert all_usage(s) == before and "uid-team-a-h" not in s.reservations      # quota fit: nothing to hold


async def test_preempt_replaces_kube_schedulers_victims_by_quotients_group(api):
    """seed 002 优先级类 through the verb: kube-scheduler's dry run picks p2 (it reprieves the oldest first);
    p2 opted out and l1 frees the same room, so Quotient answers l1. Quota is held for h."""
    s = opt_out_state()
    ext = extender(s)
    answer = await call_preempt(api, ext, Pod("h").queue("lq").cpu("4").priority(1000).created(10).obj(),
                                {"n1": [uid("p2")]})
    assert answer == {"n1": [uid("l1")]}
    assert s.reservations["uid-team-a-h"].charge.usage == {FR: 4 * CPU}


async def test_preempt_ignores_unknown_nodes_and_victim_uids(api):
    """The verb's request comes from kube-scheduler's cache, which may name nodes or pods Quotient never saw:
    they are ignored, the answer holds only Quotient's own victims on known nodes."""
    s = opt_out_state()
    ext = extender(s)
    answer = await call_preempt(api, ext, Pod("h").queue("lq").cpu("4").priority(1000).created(10).obj(),
                                {"ghost": ["uid-nope"], "n1": ["uid-nope", uid("p2")]})
    assert answer == {"n1": [uid("l1")]}


async def test_preempt_for_a_pod_whose_local_queue_vanished_answers_nothing(api):
    """seed 001 集群队列: a pod whose LocalQueue is gone has no ClusterQueue policies to preempt by: {}."""
    s = opt_out_state()
    delete(s, LocalQueue("lq", "team-a").cluster_queue("cq").obj())
    ext = extender(s)
    before = fingerprint(s)
    answer = await call_preempt(api, ext, Pod("h").queue("lq").cpu("4").priority(1000).created(10).obj(),
                                {"n1": [uid("p2")]})
    assert answer == {}
    assert fingerprint(s) == before


async def test_preempt_answers_nothing_where_the_rules_forbid_every_victim(api):
    """seed 001 抢占 (withinClusterQueue Never) through the verb: kube-scheduler's own pick is refused."""
    s = own_queue_state("Never")
    ext = extender(s)
    before = fingerprint(s)
    answer = await call_preempt(api, ext, Pod("p").queue("lq").cpu("2").priority(100).created(5).obj(),
                                {"n1": [uid("low")]})
    assert answer == {} and fingerprint(s) == before


@pytest.mark.parametrize("mode,queued,passthrough", [
    ("None", True, False), ("None", False, False),
    ("Priority", True, True), ("Priority", False, True),
    ("Quota", False, False), ("Auto", False, True),
])
async def test_preempt_verb_per_mode(api, mode, queued, passthrough):
    """seed 004 (ACK) Default / ElasticQuota / Auto / None: kube-scheduler's own choice goes through unchanged
    (Priority; Auto for a pod in no queue) or nothing is answered (None; Quota for a pod in no queue). The
    ClusterQueue here forbids preempting its own pods, so a queued pod gets {} from the quota rules."""
    s = own_queue_state("Never")
    s.config.preemption_mode = mode
    ext = extender(s)
    before = fingerprint(s)
    asked = {"n1": [uid("low")]}
    answer = await call_preempt(api, ext,
                                Pod("x").queue("lq" if queued else None).cpu("2").priority(100).created(6).obj(),
                                asked)
    assert answer == (asked if passthrough else {})
    assert fingerprint(s) == before


async def test_preempt_verb_in_quota_mode_follows_the_queue_rules(api):
    """seed 004 ElasticQuota: a queued pod preempts by its ClusterQueue's rules (here LowerPriority): low."""
    s = own_queue_state("LowerPriority")
    s.config.preemption_mode = "Quota"
    answer = await call_preempt(api, extender(s), Pod("p").queue("lq").cpu("2").priority(100).created(5).obj(),
                                {"n1": [uid("equal-newer")]})
    assert answer == {"n1": [uid("low")]}


# ---- self-driven reclaim through filter, and scenario timelines ----------------------------------------------

async def test_filter_reclaims_holds_and_evicts_at_once(api):
    """seed 002 抢占逻辑: "在选择了一组受害者并间接选择了一个节点后,该节点将为 Pod 保留" - filter refuses h while its
    victims leave, holds the quota and the node, and evicts them at once (issue 21: not at the next reconcile,
    which is only the safety net); once gone, h gets the held node."""
    s = state_of(Node("n1").cpu("8").obj(), Node("n2").cpu("8").obj(),
                 cpu_queue("cq", 8, preemption={"withinClusterQueue": "LowerPriority"}),
                 LocalQueue("lq", "team-a").cluster_queue("cq").obj(),
                 Pod("l1").queue("lq").cpu("4").priority(10).created(1).node("n1").obj(),
                 Pod("l2").queue("lq").cpu("4").priority(10).created(2).node("n1").obj())
    writer = SnapshotWriter(s)
    ext = Scheduler(s, writer)
    h = Pod("h").queue("lq").cpu("4").priority(1000).created(10).obj()
    async with api(ext) as client:
        r = (await client.post("/filter", json=extender_args(h, ["n1", "n2"]))).json()
        assert r["NodeNames"] == [] and "preempting team-a/l2 (InClusterQueue)" in answer_reasons(r, ["n2"])["n2"]
        assert s.holds[uid("h")].node == "n1"
        await ext.actions.settle()
        assert writer.evictions == 1 and uid("l2") not in s.pods
        assert await ext.reconcile() == 0 and writer.evictions == 1      # the safety net finds nothing left
        r = (await client.post("/filter", json=extender_args(h, ["n1", "n2"]))).json()
        assert r["NodeNames"] == ["n1"]


def timeline_times(outcome, what: str) -> list[float]:
    return [float(line.split("s", 1)[0]) for line in outcome.timeline if line.split()[1] == what]


async def test_a_preemptor_whose_victims_leave_at_once_is_bound_within_2s_of_its_submission():
    """Issue 21 target: tests/scenarios/preempt-at-once.yaml with kube-scheduler's queue modelled (FORMAT.md step 4):
    the eviction is written by the filter that chose the victim, at once, and the preemptor runs after its first
    backoff (1 s). Before, the eviction waited for the reconcile (up to reconcileInterval, 5 s)."""
    scenario = load_scenario(str(OWN / "preempt-at-once.yaml"))
    out = await simulate(scenario)
    assert differences(scenario, out) == []
    submitted = timeline_times(out, "submitted")
    bound = [float(line.split("s", 1)[0]) for line in out.timeline if "bound" in line and "team-a/h1" in line]
    assert timeline_times(out, "preempted") == submitted == [12.0]
    assert bound and bound[0] - submitted[0] <= 2.0, out.timeline


async def test_the_same_preemptor_waits_for_the_reconcile_when_evictions_are_not_written_at_once(monkeypatch):
    """The counter-proof: with the filter's hand-off to act/ switched off, the reconcile (every 5 s of simulated
    time in this scenario, as `serve` runs it) is what evicts l2, and h1 is not bound within 2 s."""
    from app.act.intents import Actions

    monkeypatch.setattr(Actions, "submit", lambda self, intents: None)
    scenario = load_scenario(str(OWN / "preempt-at-once.yaml"))
    out = await simulate(scenario)
    bound = [float(line.split("s", 1)[0]) for line in out.timeline if "bound" in line and "team-a/h1" in line]
    assert not bound or bound[0] - timeline_times(out, "submitted")[0] > 2.0, out.timeline


async def test_delay_scenario_preempts_at_30s_not_before():
    """seed 002 抢占逻辑 (delay): tests/scenarios/preemption-delay.yaml - l2 is preempted at 30s, no earlier."""
    scenario = load_scenario(str(OWN / "preemption-delay.yaml"))
    out = await simulate(scenario)
    assert differences(scenario, out) == []
    assert timeline_times(out, "preempted") == [30.0]


async def test_loop_scenarios_converge_and_stay_converged():
    """seed 002 防止抢占循环: the three ReplicaSet cases end with their evictions done in the first moments and
    none in the five minutes of retries that follow."""
    for name, evictions in (("preemption-loop-case1", 1), ("preemption-loop-case2", 0), ("preemption-loop-case3", 3)):
        scenario = load_scenario(str(OWN / f"{name}.yaml"))
        out = await simulate(scenario)
        assert differences(scenario, out) == [], name
        assert out.evictions == evictions and all(t < 10 for t in timeline_times(out, "preempted")), name


# ---- gaps found while testing, now fixed ----------------------------------------------------------------------

async def test_reclaim_happens_when_the_nodes_are_exactly_full(tmp_path):
    """seed 000 抢占的原因: "被抢占者与抢占者属于同一个 cohort,且被抢占者的 ClusterQueue 至少有一种资源的使用量高于名义配额"
    - examples/reclaim.yaml with nodes of 6, 6, 6 and 3 CPUs, exactly the 21 team-a uses."""
    text = (EXAMPLES / "reclaim.yaml").read_text()
    for name, cpu in (("node-1", "6"), ("node-2", "6"), ("node-3", "6"), ("node-4", "3")):
        text = text.replace(f"metadata: {{name: {name}}}\nstatus:\n  allocatable: {{cpu: '8'",
                            f"metadata: {{name: {name}}}\nstatus:\n  allocatable: {{cpu: '{cpu}'")
    assert text.count("cpu: '8'") == 0
    path = tmp_path / "reclaim-full-nodes.yaml"
    path.write_text(text)
    scenario = load_scenario(str(path))
    assert differences(scenario, await simulate(scenario)) == []


def test_a_borrowing_preemptor_takes_no_other_queues_pod_for_room():
    """seed 000 经典抢占: cohort reclaim only when "新 workload 的 ClusterQueue 使用量在本次准入后将低于名义配额" (or
    borrowWithinCohort); seed 002 law 4: "除非任务队列低于其保证容量,否则无法触发抢占". a is at its nominal 4; p (2 CPUs)
    fits the quota only by borrowing; n1 is full: b2 (b borrows 2) must not be evicted for p's room."""
    s = state_of(Node("n1").cpu("10").obj(), cpu_queue("a", 4, "co", preemption={"reclaimWithinCohort": "Any"}),
                 cpu_queue("b", 4, "co"),
                 cpu_queue("c", 4, "co"), LocalQueue("lq", "team-a").cluster_queue("a").obj(),
                 LocalQueue("lq", "team-b").cluster_queue("b").obj(),
                 Pod("a1").queue("lq").cpu("4").created(1).node("n1").obj(),
                 Pod("b1", "team-b").queue("lq").cpu("3").created(2).node("n1").obj(),
                 Pod("b2", "team-b").queue("lq").cpu("3").created(3).node("n1").obj(),
                 Pod("p").queue("lq").cpu("2").priority(100).created(10).obj())
    assert decide(s, workload_info(s, "team-a", "p")).assignment.borrowing
    found, _ = plans(s, "team-a", "p", every=True)
    assert found == []


async def test_preempt_names_only_victims_running_on_the_node_they_are_listed_for(api):
    """kube-scheduler looks each node's victims up on that node (an extender naming a pod elsewhere fails the
    whole preemption), and seed 002 抢占逻辑: "跨节点抢占是不支援的,被抢占的受害者们必须运行在同一节点上". h's quota
    target l2 runs on n1; n2 would need it plus u-low2 there: only n1 is answered."""
    s = state_of(Node("n1").cpu("8").obj(), Node("n2").cpu("8").obj(),
                 cpu_queue("cq", 8, preemption={"withinClusterQueue": "LowerPriority"}),
                 LocalQueue("lq", "team-a").cluster_queue("cq").obj(),
                 Pod("l1").queue("lq").cpu("4").priority(10).created(1).node("n1").obj(),
                 Pod("l2").queue("lq").cpu("4").priority(10).created(2).node("n1").obj(),
                 Pod("u-low1", "batch").cpu("4").priority(10).created(3).node("n2").obj(),
                 Pod("u-low2", "batch").cpu("4").priority(10).created(4).node("n2").obj())
    ext = extender(s)
    answer = await call_preempt(api, ext, Pod("h").queue("lq").cpu("4").priority(1000).created(10).obj(),
                                {"n1": [uid("l2")], "n2": [uid("u-low2", "batch")]})
    for node_name, uids in answer.items():
        assert all(s.pods[u].node_name == node_name for u in uids), answer
    assert answer == {"n1": [uid("l2")]}     # or n2 with victims on n2 only, were there such a group


def test_a_pod_refused_for_room_held_for_another_is_journaled(build_extender):
    """filter refuses a pod whose only offered node keeps its room for a preemptor (RoomHeld), saying so, and the
    journal (/debug) records the refusal as it records every other."""
    ext = build_extender(snapshot_yaml(*one_queue(32, nodes=("n1",)), Pod("other").queue("q").cpu("4").obj()))
    other = ext.state.pods["uid-team-a-other"]
    ext.state.workloads.hold_for_preemptor(other.uid, "n1", other.requests, None, {})
    answer = Verbs(ext).filter(Pod("p").queue("q").cpu("5").wire(), ["n1"])
    assert "the room on the offered nodes is held for other pods" in refused(answer, ["n1"])
    assert [e["outcome"] for e in ext.journal.entries if e["pod"] == "team-a/p"] == ["RoomHeld"]


def test_kube_schedulers_preempt_verb_gets_no_victims_on_a_node_outside_the_pods_flavor():
    """kube-scheduler's dry run proposes victims on every node where priority alone would make room; on a node of
    another flavor they would free room filter never passes the pod onto: only its flavor's node is answered."""
    objects = [Namespace("team-a").obj(), ResourceFlavor("od").node_labels({"type": "od"}).obj(),
               ClusterQueue("cq").resource_group(FlavorQuotas("od").resource("cpu", "100")).preemption(
                   {"withinClusterQueue": "LowerPriority"}).obj(),
               LocalQueue("lq", "team-a").cluster_queue("cq").obj(),
               Node("mine").cpu("4").labels({"type": "od"}).obj(), Node("other").cpu("4").labels({"type": "spot"}).obj()]
    low = [Pod(n).queue("lq").cpu("4").priority(1).created(i).node(node).obj()
           for i, (n, node) in enumerate((("a", "mine"), ("b", "other")))]
    pod = Pod("p").queue("lq").cpu("4").priority(10).created(50).obj()
    state = make_state(*objects, *low, pod)
    answer = Verbs(Scheduler(state, SnapshotWriter(state))).preempt(pod, {"mine": [uid(low[0])], "other": [uid(low[1])]})
    assert set(answer["NodeNameToMetaVictims"]) == {"mine"}, answer
