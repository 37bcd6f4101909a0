"""flavorFungibility against a preemption oracle (issue 9 point 5; seed 001 FlavorFungibility).

Kueue's flavor assigner asks a preemption oracle (pkg/scheduler/preemption/preemption_oracle.go,
SimulatePreemption) about every flavor that needs preemption; shouldTryNextFlavor in
pkg/scheduler/flavorassigner/flavorassigner.go passes over one where preemption would find no
candidates (NoCandidates), whatever whenCanPreempt says, and isPreferred ranks such a flavor below
every viable one. The value names follow Kueue's current API (apis/kueue/v1beta2/clusterqueue_types.go:
MayStopSearch / TryNextFlavor, preference BorrowingOverPreemption / PreemptionOverBorrowing); v1beta1's
Borrow and Preempt are converted to MayStopSearch (apis/kueue/v1beta1/clusterqueue_conversion.go).
"""
import pytest

from app.core import preemption
from app.core.preemption.oracle import PreemptionOracle
from app.core.admission import assign, decide
from app.core.flavors import FIT, NO_CANDIDATES, PREEMPT, RECLAIM, assign_flavors
from app.objects.errors import InvalidObject
from app.objects.kueue import decode_cluster_queue

from builders import ClusterQueue, FlavorQuotas, LocalQueue, Node, Pod, ResourceFlavor
from helpers import CPU, apply, make_state, workload_info

SPOT = {"pool": "spot"}
OD = {"pool": "on-demand"}


def two_flavors(*, running_priority: int, preemption=None, **fung):
    """ClusterQueue cq: spot (4 CPUs, all taken by "running") then on-demand (8 CPUs, free); no cohort.
    The pending pods below have priority 10: "running" is a candidate only when its priority is lower."""
    spec = {"preemption": preemption or {"withinClusterQueue": "LowerPriority"}}
    if fung:
        spec["flavorFungibility"] = fung
    return make_state(
        ResourceFlavor("spot").node_labels(SPOT).obj(), ResourceFlavor("on-demand").node_labels(OD).obj(),
        Node("n-spot").cpu("64").labels(SPOT).obj(), Node("n-od").cpu("64").labels(OD).obj(),
        ClusterQueue("cq")
            .resource_group(FlavorQuotas("spot").resource("cpu", "4"), FlavorQuotas("on-demand").resource("cpu", "8"))
            .spec(**spec).obj(),
        LocalQueue("lq", "team-a").cluster_queue("cq").obj(),
        Pod("running").queue("lq").cpu("4").priority(running_priority).node("n-spot").obj())


def decide_for(state, obj):
    apply(state, obj)
    return decide(state, workload_info(state, obj["metadata"]["namespace"], obj["metadata"]["name"]))


# ---- the oracle's verdict decides whether the search stops ----------------------------------------------

@pytest.mark.parametrize("when_can_preempt", ["Preempt", "MayStopSearch"])
def test_a_flavor_where_preemption_finds_no_candidates_is_passed_over_and_the_next_one_admits(when_can_preempt):
    """Kueue flavorassigner_test.go TestAssignFlavors "cannot preempt in cohort (oracle returns None) for the
    first flavor, tries the second flavor (which fits)": with whenCanPreempt Preempt (MayStopSearch) the search
    stops at a flavor that needs preemption only if preemption there has candidates. "running" has a higher
    priority than the pod, so withinClusterQueue LowerPriority gives none: the pod is admitted on on-demand."""
    s = two_flavors(running_priority=100, whenCanPreempt=when_can_preempt)
    v = decide_for(s, Pod("p").queue("lq").cpu("2").priority(10).obj())
    assert v.admit is True, v.reason
    assert v.assignment.flavors == {"cpu": "on-demand"}
    assert v.assignment.usage == {("on-demand", "cpu"): 2 * CPU}
    assert "flavor spot: preemption would find no candidates; the next flavor is tried" in v.assignment.reasons


def test_a_flavor_where_preemption_has_candidates_is_kept_and_preempted_in():
    """seed 001 FlavorFungibility, whenCanPreempt Preempt: "ClusterQueue 停止尝试预留当前 ResourceFlavor" when
    preemption there can succeed (Kueue shouldTryNextFlavor: Preempt mode, policy MayStopSearch → stop). The
    lower-priority "running" is a candidate: the pod stays on spot and preemption evicts "running"."""
    s = two_flavors(running_priority=0, whenCanPreempt="Preempt")
    v = decide_for(s, Pod("p").queue("lq").cpu("2").priority(10).obj())
    assert (v.admit, v.rule, v.resolvable) == (False, "QuotaExceeded", True)
    assert v.assignment.mode == PREEMPT and v.assignment.flavors == {"cpu": "spot"}
    assert not any("no candidates" in r for r in v.assignment.reasons)
    p = workload_info(s, "team-a", "p")
    found, why = preemption.plans(s, p, s.cluster_queues["cq"], v.assignment, ["n-spot"], s.workloads.rooms(p.uid))
    assert why == "" and [t.candidate.pod.name for t in found[0].targets] == ["running"]


def test_a_pod_that_may_not_preempt_passes_over_the_flavor_too():
    """The oracle answers for this pod: with preemptionPolicy Never it can take no one (Kueue's preemptor finds
    no targets), so a flavor that needs preemption has no candidates for it and the next flavor is used."""
    s = two_flavors(running_priority=0, whenCanPreempt="MayStopSearch")
    obj = Pod("p").queue("lq").cpu("2").priority(10).obj()
    obj["spec"]["preemptionPolicy"] = "Never"
    v = decide_for(s, obj)
    assert v.admit is True and v.assignment.flavors == {"cpu": "on-demand"}


def test_with_no_flavor_to_pass_over_to_the_pod_waits_on_the_first():
    """When every flavor would need preemption and none has candidates, the first one is still the answer
    (Kueue maps NoCandidates to the Preempt assignment mode): the pod is pending, the reason says why."""
    s = two_flavors(running_priority=100, whenCanPreempt="MayStopSearch")
    apply(s, Pod("od-user").queue("lq").cpu("8").priority(100).node("n-od").obj())
    v = decide_for(s, Pod("p").queue("lq").cpu("2").priority(10).obj())
    assert v.admit is False and v.assignment.mode == PREEMPT
    assert v.assignment.flavors == {"cpu": "spot"}
    assert "flavor spot: preemption would find no candidates; the next flavor is tried" in v.assignment.reasons
    assert "flavor on-demand: preemption would find no candidates; the next flavor is tried" in v.assignment.reasons


def test_try_next_flavor_prefers_a_flavor_with_candidates_over_one_without():
    """Kueue isPreferred: "A flavor without preemption candidates cannot be admitted in this scheduling
    attempt. Rank it below viable modes". Both flavors need preemption (whenCanPreempt TryNextFlavor, the
    default); spot has no candidate, on-demand's lower-priority pod is one: on-demand is chosen."""
    s = two_flavors(running_priority=100)
    apply(s, Pod("od-user").queue("lq").cpu("8").priority(0).node("n-od").obj())
    a = assign(s, _applied(s, Pod("p").queue("lq").cpu("2").priority(10).obj()), s.cluster_queues["cq"])
    assert (a.mode, a.flavors) == (PREEMPT, {"cpu": "on-demand"})


def _applied(state, obj):
    apply(state, obj)
    return workload_info(state, obj["metadata"]["namespace"], obj["metadata"]["name"])


def test_the_oracle_tells_preempt_from_reclaim_and_no_candidates():
    """Kueue SimulatePreemption: Preempt when a target is in the preemptor's own ClusterQueue, Reclaim when all
    are taken back from other ClusterQueues of the cohort, NoCandidates when no target set frees the quota."""
    s = make_state(
        ResourceFlavor("default-flavor").obj(), Node("n").cpu("64").obj(),
        ClusterQueue("cq").cohort("co").resource_group(FlavorQuotas("default-flavor").resource("cpu", "4"))
            .preemption({"withinClusterQueue": "LowerPriority", "reclaimWithinCohort": "Any"}).obj(),
        ClusterQueue("other").cohort("co").resource_group(FlavorQuotas("default-flavor").resource("cpu", "0")).obj(),
        LocalQueue("lq", "team-a").cluster_queue("cq").obj(),
        LocalQueue("lq-other", "team-a").cluster_queue("other").obj(),
        Pod("borrower").queue("lq-other").cpu("4").priority(100).node("n").obj())
    p = _applied(s, Pod("p").queue("lq").cpu("2").priority(10).obj())
    ask = PreemptionOracle(s, p, s.cluster_queues["cq"])
    usage = {("default-flavor", "cpu"): 2 * CPU}
    assert ask("default-flavor", usage) == (RECLAIM, False)
    s2 = two_flavors(running_priority=0)
    p2 = _applied(s2, Pod("p").queue("lq").cpu("2").priority(10).obj())
    assert PreemptionOracle(s2, p2, s2.cluster_queues["cq"])("spot", {("spot", "cpu"): 2 * CPU}) == (PREEMPT, False)
    s3 = two_flavors(running_priority=100)
    p3 = _applied(s3, Pod("p").queue("lq").cpu("2").priority(10).obj())
    assert PreemptionOracle(s3, p3, s3.cluster_queues["cq"])("spot", {("spot", "cpu"): 2 * CPU}) == \
        (NO_CANDIDATES, False)
    assert s3.tree.queues["cq"].usage[("spot", "cpu")] == 4 * CPU         # the simulation took nothing away


def test_without_an_oracle_a_preempt_flavor_is_assumed_to_have_candidates():
    """core.flavors stays free of state: called without an oracle, it keeps the plain shouldTryNextFlavor."""
    s = two_flavors(running_priority=100, whenCanPreempt="MayStopSearch")
    a = assign_flavors({"cpu": 2 * CPU}, s.cluster_queues["cq"], s.ledger.quota_node("cq"), s.flavors, [], {})
    assert (a.mode, a.flavors) == (PREEMPT, {"cpu": "spot"})
    a = assign_flavors({"cpu": 2 * CPU}, s.cluster_queues["cq"], s.ledger.quota_node("cq"), s.flavors, [], {},
                       oracle=lambda flavor, usage: (NO_CANDIDATES, False))
    assert (a.mode, a.flavors) == (FIT, {"cpu": "on-demand"})


# ---- value names -------------------------------------------------------------------------------------

def cq_object(**fung) -> dict:
    return ClusterQueue("cq").cohort("co").resource_group(FlavorQuotas("default-flavor")
                                                              .resource("cpu", "4")).flavor_fungibility(fung).obj()


@pytest.mark.parametrize("fung, borrow, preempt", [
    ({}, "MayStopSearch", "TryNextFlavor"),
    ({"whenCanBorrow": "Borrow", "whenCanPreempt": "Preempt"}, "MayStopSearch", "MayStopSearch"),
    ({"whenCanBorrow": "MayStopSearch", "whenCanPreempt": "MayStopSearch"}, "MayStopSearch", "MayStopSearch"),
    ({"whenCanBorrow": "TryNextFlavor", "whenCanPreempt": "TryNextFlavor"}, "TryNextFlavor", "TryNextFlavor"),
])
def test_old_and_new_value_names_decode_to_kueues_names(fung, borrow, preempt):
    """Kueue clusterqueue_conversion_test.go "FlavorFungibility Preempt to MayStopSearch" and "Borrow to
    MayStopSearch"; defaults as in the v1beta2 CRD (whenCanBorrow MayStopSearch, whenCanPreempt TryNextFlavor)."""
    c = decode_cluster_queue(cq_object(**fung))
    assert (c.when_can_borrow, c.when_can_preempt, c.fungibility_preference) == (borrow, preempt, "")


def borrow_or_preempt(**fung):
    """cq: f1 fits only by borrowing (nominal 0, other lends 4), f2 needs preemption of cq's own
    lower-priority pod (nominal 4, all used). Which one a 2-CPU pod gets is up to flavorFungibility."""
    return make_state(
        ResourceFlavor("f1").node_labels({"pool": "f1"}).obj(), ResourceFlavor("f2").node_labels({"pool": "f2"}).obj(),
        Node("n1").cpu("64").labels({"pool": "f1"}).obj(), Node("n2").cpu("64").labels({"pool": "f2"}).obj(),
        ClusterQueue("cq").cohort("co")
            .resource_group(FlavorQuotas("f1").resource("cpu", "0"), FlavorQuotas("f2").resource("cpu", "4"))
            .preemption({"withinClusterQueue": "LowerPriority"}).flavor_fungibility(fung).obj(),
        ClusterQueue("other").cohort("co")
            .resource_group(FlavorQuotas("f1").resource("cpu", "4"), FlavorQuotas("f2").resource("cpu", "0")).obj(),
        LocalQueue("lq", "team-a").cluster_queue("cq").obj(),
        Pod("running").queue("lq").cpu("4").priority(0).node("n2").obj())


@pytest.mark.parametrize("old, new", [("Borrow", "MayStopSearch")])
def test_may_stop_search_for_when_can_borrow_behaves_as_borrow(old, new):
    """seed 001: whenCanBorrow "Borrow(默认):ClusterQueue 停止寻找更好的分配"; MayStopSearch is its new name."""
    results = []
    for name in (old, new):
        s = borrow_or_preempt(whenCanBorrow=name)
        a = assign(s, _applied(s, Pod("p").queue("lq").cpu("2").priority(10).obj()), s.cluster_queues["cq"])
        results.append((a.mode, a.borrowing, a.flavors))
    assert results[0] == results[1] == (FIT, True, {"cpu": "f1"})


def test_may_stop_search_for_when_can_preempt_behaves_as_preempt():
    """seed 001: whenCanPreempt "Preempt" stops at the current flavor and preempts there; MayStopSearch is
    its new name, and both stop at f2 of this queue (f1 never fits: other lends none of it here)."""
    results = []
    for name in ("Preempt", "MayStopSearch"):
        s = make_state(
            ResourceFlavor("f1").obj(), ResourceFlavor("f2").obj(), Node("n").cpu("64").obj(),
            ClusterQueue("cq")
                .resource_group(FlavorQuotas("f1").resource("cpu", "4"), FlavorQuotas("f2").resource("cpu", "8"))
                .preemption({"withinClusterQueue": "LowerPriority"}).flavor_fungibility({"whenCanPreempt": name}).obj(),
            LocalQueue("lq", "team-a").cluster_queue("cq").obj(),
            Pod("running").queue("lq").cpu("4").priority(0).node("n").obj())
        a = assign(s, _applied(s, Pod("p").queue("lq").cpu("2").priority(10).obj()), s.cluster_queues["cq"])
        results.append((a.mode, a.flavors))
    assert results[0] == results[1] == (PREEMPT, {"cpu": "f1"})


# ---- preference ---------------------------------------------------------------------------------------

TRY_ALL = {"whenCanBorrow": "TryNextFlavor", "whenCanPreempt": "TryNextFlavor"}


@pytest.mark.parametrize("preference, want", [
    (None, (FIT, {"cpu": "f1"})),
    ("BorrowingOverPreemption", (FIT, {"cpu": "f1"})),
    ("PreemptionOverBorrowing", (PREEMPT, {"cpu": "f2"})),
])
def test_preference_chooses_between_borrowing_and_preemption(preference, want):
    """Kueue isPreferred (apis/kueue/v1beta2 FlavorFungibility.preference): BorrowingOverPreemption (the
    default) "prefer to use borrowing rather than preemption", PreemptionOverBorrowing the reverse. f2 needs
    no borrowing once "running" is preempted (Kueue's oracle returns the borrowing after its targets)."""
    fung = dict(TRY_ALL, **({"preference": preference} if preference else {}))
    s = borrow_or_preempt(**fung)
    a = assign(s, _applied(s, Pod("p").queue("lq").cpu("2").priority(10).obj()), s.cluster_queues["cq"])
    assert (a.mode, a.flavors) == want


def test_preemption_over_borrowing_never_prefers_a_flavor_without_candidates():
    """Kueue isPreferred ranks NoCandidates below every viable mode before applying the preference: with the
    pod outranked by "running", f2 has no candidates and borrowing on f1 wins even under PreemptionOverBorrowing."""
    s = borrow_or_preempt(**TRY_ALL, preference="PreemptionOverBorrowing")
    a = assign(s, _applied(s, Pod("p").queue("lq").cpu("2").priority(-10).obj()), s.cluster_queues["cq"])
    assert (a.mode, a.borrowing, a.flavors) == (FIT, True, {"cpu": "f1"})


# ---- bad values ----------------------------------------------------------------------------------------

@pytest.mark.parametrize("fung, message", [
    ({"whenCanPreempt": "Borrow"},
     r"spec\.flavorFungibility\.whenCanPreempt \(kueue\.x-k8s\.io/v1beta1\): 'Borrow' is not one of MayStopSearch, "
     r"TryNextFlavor, Preempt"),
    ({"whenCanBorrow": "Preempt"},
     r"spec\.flavorFungibility\.whenCanBorrow \(kueue\.x-k8s\.io/v1beta1\): 'Preempt' is not one of MayStopSearch, "
     r"TryNextFlavor, Borrow"),
    ({"whenCanBorrow": "TryNextFlavor", "whenCanPreempt": "TryNextFlavor", "preference": "Cheapest"},
     r"spec\.flavorFungibility\.preference: 'Cheapest' is not one of BorrowingOverPreemption, "
     r"PreemptionOverBorrowing"),
    ({"preference": "PreemptionOverBorrowing"},
     r"spec\.flavorFungibility\.preference: preference 'PreemptionOverBorrowing' requires both whenCanBorrow and "
     r"whenCanPreempt to be TryNextFlavor"),
])
def test_a_bad_flavor_fungibility_value_is_refused_naming_the_field_and_the_allowed_values(fung, message):
    """Kueue's CRD enums (v1beta1: {MayStopSearch,TryNextFlavor,Borrow} / {MayStopSearch,TryNextFlavor,Preempt};
    v1beta2 preference {BorrowingOverPreemption,PreemptionOverBorrowing}) and its ClusterQueue validation
    (pkg/webhooks clusterqueue_webhook_test.go: preference "requires both whenCanBorrow and whenCanPreempt to be
    TryNextFlavor")."""
    with pytest.raises(InvalidObject, match=message):
        decode_cluster_queue(cq_object(**fung))
