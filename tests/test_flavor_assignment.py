"""app.core.flavors.assign_flavors (through admission.assign) and admission.decide: which flavor a pod gets.

States are built from plain Kubernetes/Kueue dicts fed through app.sync.dispatch.apply_object.
"""
import pytest

from app.core.admission import assign, decide
from app.core.flavors import FIT, NOFIT, PREEMPT, assign_flavors

from builders import ClusterQueue, FlavorQuotas, LocalQueue, Node, Pod, ResourceFlavor
from helpers import CPU, Gi, apply, decide_pod, delete, make_state, workload_info

SPOT = {"pool": "spot"}
OD = {"pool": "on-demand"}


def state_with(*cluster_queues, extra=()):
    """Flavors spot/on-demand (node-labelled) and default-flavor, one node per pool, LocalQueue team-a/lq → first CQ."""
    return make_state(
        ResourceFlavor("default-flavor").obj(), ResourceFlavor("spot").node_labels(SPOT).obj(),
        ResourceFlavor("on-demand").node_labels(OD).obj(),
        ResourceFlavor("pool1").obj(), ResourceFlavor("pool2").obj(),
        Node("n-spot").cpu("64").labels(SPOT).obj(), Node("n-od").cpu("64").labels(OD).obj(),
        *cluster_queues,
        LocalQueue("lq", "team-a").cluster_queue(cluster_queues[0]["metadata"]["name"]).obj(),
        *extra)


def assign_pod(state, obj, has_nodes=None):
    apply(state, obj)
    p = workload_info(state, obj["metadata"]["namespace"], obj["metadata"]["name"])
    return assign(state, p, state.cluster_queues[state.local_queues[f"{p.namespace}/lq"].cluster_queue], has_nodes)


# ---- order of flavors --------------------------------------------------------------------------------

def test_first_flavor_with_room_wins():
    """seed 001 资源规格与资源: "Kueue 会优先分配 ClusterQueue .spec.resourceGroups[*].flavors 列表中第一个
    拥有足够未用 nominalQuota 的规格"."""
    s = state_with(ClusterQueue("cq")
                       .resource_group(FlavorQuotas("spot").resource("cpu", "4"),
                                       FlavorQuotas("on-demand").resource("cpu", "8"))
                       .obj())
    a = assign_pod(s, Pod("p").queue("lq").cpu("3").obj())
    assert (a.mode, a.borrowing) == (FIT, False)
    assert a.flavors == {"cpu": "spot"}
    assert a.usage == {("spot", "cpu"): 3 * CPU}


def test_next_flavor_is_chosen_when_the_first_nominal_quota_is_used_up():
    """seed 001 规格与借用语义: "如果 Workload 不适合,Kueue 评估列表中的下一个规格"."""
    s = state_with(ClusterQueue("cq")
                       .resource_group(FlavorQuotas("spot").resource("cpu", "4"),
                                       FlavorQuotas("on-demand").resource("cpu", "8"))
                       .obj(),
                   extra=[Pod("running").queue("lq").cpu("3").node("n-spot").obj()])
    assert s.admitted["uid-team-a-running"].flavors == {"cpu": "spot"}
    v = decide_pod(s, Pod("p").queue("lq").cpu("2").obj())
    assert v.admit is True, v.reason
    assert v.assignment.flavors == {"cpu": "on-demand"}
    assert any("spot" in r for r in v.assignment.reasons)
    # A pod that still fits the first flavor's remaining 1 CPU gets it.
    v = decide_pod(s, Pod("small").queue("lq").cpu("1").obj())
    assert v.admit is True and v.assignment.flavors == {"cpu": "spot"}


# ---- resource groups -----------------------------------------------------------------------------------

GROUPS = (ClusterQueue("cq")
          .resource_group(FlavorQuotas("spot").resource("cpu", "9").resource("memory", "36Gi"),
                          FlavorQuotas("on-demand").resource("cpu", "18").resource("memory", "72Gi"))
          .resource_group(FlavorQuotas("pool1").resource("bar.com/license", "10"),
                          FlavorQuotas("pool2").resource("bar.com/license", "10")))


def test_all_resources_of_one_group_get_the_same_flavor():
    """seed 001 资源组: "要将两个或多个资源绑定到同一组规格,请将它们列在同一个资源组中" - cpu would fit spot,
    memory does not, so both go to on-demand."""
    s = state_with(GROUPS.obj())
    a = assign_pod(s, Pod("p").queue("lq").cpu("2").memory("40Gi").obj())
    assert a.mode == FIT
    assert a.flavors == {"cpu": "on-demand", "memory": "on-demand"}
    assert a.usage == {("on-demand", "cpu"): 2 * CPU, ("on-demand", "memory"): 40 * Gi}


def test_two_resource_groups_get_independent_flavors():
    """seed 001 资源组: "如果希望为不同资源分配不同的规格,请将它们分别列在不同的资源组中" (the seed's
    cpu/memory/foo.com/gpu + bar.com/license example)."""
    s = state_with(GROUPS.obj(),
                   extra=[Pod("license-holder").queue("lq").cpu("1").requests({"bar.com/license": "10"}).node("n-od")
                              .obj()])
    # The running pod took all of pool1 (flavors without nodeLabels match any node) and on-demand cpu.
    assert s.admitted["uid-team-a-license-holder"].flavors == {"cpu": "on-demand", "bar.com/license": "pool1"}
    a = assign_pod(s, Pod("p").queue("lq").cpu("2").memory("4Gi").requests({"bar.com/license": "3"}).obj())
    assert a.mode == FIT
    assert a.flavors == {"cpu": "spot", "memory": "spot", "bar.com/license": "pool2"}
    a = assign_pod(s, Pod("q").queue("lq").cpu("2").memory("40Gi").requests({"bar.com/license": "3"}).obj())
    assert a.flavors == {"cpu": "on-demand", "memory": "on-demand", "bar.com/license": "pool2"}


# ---- covered resources -----------------------------------------------------------------------------------

def test_uncovered_resource_is_nofit_unresolvable_and_named():
    """seed 001 规格与借用语义: "ClusterQueue 只能借用其定义的规格配额" - a resource the ClusterQueue does not
    cover has no quota at all, and no preemption can create some."""
    s = state_with(ClusterQueue("cq").resource_group(FlavorQuotas("default-flavor").resource("cpu", "9"))
                       .preemption({"withinClusterQueue": "LowerPriority"}).obj())
    a = assign_pod(s, Pod("p").queue("lq").cpu("1").requests({"nvidia.com/gpu": "1"}).obj())
    assert a.mode == NOFIT and a.unresolvable is True
    assert any("nvidia.com/gpu" in r for r in a.reasons)
    v = decide(s, workload_info(s, "team-a", "p"))
    assert (v.admit, v.resolvable, v.rule) == (False, False, "QuotaExceeded")
    assert "nvidia.com/gpu" in v.reason


def test_pods_resource_is_charged_only_when_covered():
    """seed 001 first example: coveredResources ["cpu", "memory", "pods"] with pods nominalQuota 5 → "Pod 总数
    小于等于 5"; a ClusterQueue that does not cover pods does not count them (and does not refuse for them)."""
    s = state_with(ClusterQueue("cq").resource_group(FlavorQuotas("default-flavor").resource("cpu", "9")).obj())
    a = assign_pod(s, Pod("p").queue("lq").cpu("1").obj())
    assert a.mode == FIT and a.usage == {("default-flavor", "cpu"): 1 * CPU}

    running = [Pod(f"r{i}").queue("lq").cpu("1").node("n-od").obj() for i in range(2)]
    s = state_with(ClusterQueue("cq")
                       .resource_group(FlavorQuotas("default-flavor").resource("cpu", "9").resource("memory", "36Gi")
                                           .resource("pods", "2"))
                       .preemption({"withinClusterQueue": "LowerPriority"}).obj(),
                   extra=running)
    assert s.tree.queues["cq"].usage[("default-flavor", "pods")] == 2
    a = assign_pod(s, Pod("p").queue("lq").cpu("1").obj())
    assert a.mode == PREEMPT
    assert any("pods" in r for r in a.reasons)
    delete(s, running[0])
    a = assign_pod(s, Pod("p").queue("lq").cpu("1").obj())
    assert a.mode == FIT
    assert a.usage == {("default-flavor", "cpu"): 1 * CPU, ("default-flavor", "pods"): 1}


# ---- flavorFungibility -------------------------------------------------------------------------------------

def fungibility_state(**fung):
    """team-a-cq: f1=spot (2 CPUs) then f2=on-demand (8 CPUs); team-b-cq lends 8 spot CPUs in cohort team-ab."""
    spec = {"flavorFungibility": fung} if fung else {}
    return state_with(
        ClusterQueue("team-a-cq").cohort("team-ab")
            .resource_group(FlavorQuotas("spot").resource("cpu", "2"), FlavorQuotas("on-demand").resource("cpu", "8"))
            .spec(**spec).obj(),
        ClusterQueue("team-b-cq").cohort("team-ab").resource_group(FlavorQuotas("spot").resource("cpu", "8")).obj())


def test_when_can_borrow_borrow_default_stops_at_a_flavor_that_fits_by_borrowing():
    """seed 001 FlavorFungibility: whenCanBorrow "Borrow(默认):ClusterQueue 停止寻找更好的分配"."""
    s = fungibility_state()
    assert s.cluster_queues["team-a-cq"].when_can_borrow == "MayStopSearch"   # Kueue's name for Borrow
    a = assign_pod(s, Pod("p").queue("lq").cpu("4").obj())
    assert (a.mode, a.borrowing, a.flavors) == (FIT, True, {"cpu": "spot"})
    v = decide(s, workload_info(s, "team-a", "p"))
    assert v.admit is True and v.assignment.borrowing is True


def test_when_can_borrow_try_next_flavor_prefers_a_later_flavor_without_borrowing():
    """seed 001 FlavorFungibility: whenCanBorrow "TryNextFlavor:ClusterQueue 尝试下一个 ResourceFlavor 以查看
    工作负载是否可以获得更好的分配"."""
    s = fungibility_state(whenCanBorrow="TryNextFlavor")
    a = assign_pod(s, Pod("p").queue("lq").cpu("4").obj())
    assert (a.mode, a.borrowing, a.flavors) == (FIT, False, {"cpu": "on-demand"})
    assert any("whenCanBorrow TryNextFlavor" in r for r in a.reasons)


def test_when_can_borrow_try_next_flavor_falls_back_to_borrowing_when_nothing_better_fits():
    """seed 001 FlavorFungibility: TryNextFlavor only looks for a better assignment; with none, borrowing is used."""
    s = fungibility_state(whenCanBorrow="TryNextFlavor")
    a = assign_pod(s, Pod("p").queue("lq").cpu("9").obj())              # on-demand has 8 → cannot; spot 2 + 8 borrowed
    assert (a.mode, a.borrowing, a.flavors) == (FIT, True, {"cpu": "spot"})


def preempt_state(**fung):
    """cq: spot (4 CPUs, 3 used by a running pod) then on-demand (8 CPUs); no cohort."""
    spec = {"flavorFungibility": fung} if fung else {}
    return state_with(ClusterQueue("cq")
                          .resource_group(FlavorQuotas("spot").resource("cpu", "4"),
                                          FlavorQuotas("on-demand").resource("cpu", "8"))
                          .preemption({"withinClusterQueue": "LowerPriority"}).spec(**spec).obj(),
                      extra=[Pod("running").queue("lq").cpu("3").priority(0).node("n-spot").obj()])


def test_when_can_preempt_try_next_flavor_default_prefers_a_later_flavor_that_fits():
    """seed 001 FlavorFungibility: whenCanPreempt "TryNextFlavor(默认):ClusterQueue 尝试下一个 ResourceFlavor
    以查看工作负载是否适合" - "Kueue 仅在 Kueue 确定剩余 ResourceFlavors 无法适应工作负载时触发预留"."""
    s = preempt_state()
    assert s.cluster_queues["cq"].when_can_preempt == "TryNextFlavor"
    a = assign_pod(s, Pod("p").queue("lq").cpu("2").priority(10).obj())
    assert (a.mode, a.flavors) == (FIT, {"cpu": "on-demand"})


def test_when_can_preempt_preempt_stops_at_the_first_flavor_that_could_fit_by_preemption():
    """seed 001 FlavorFungibility: whenCanPreempt "Preempt" - stay with the current flavor and preempt there."""
    s = preempt_state(whenCanPreempt="Preempt")
    a = assign_pod(s, Pod("p").queue("lq").cpu("2").priority(10).obj())
    assert (a.mode, a.flavors) == (PREEMPT, {"cpu": "spot"})
    v = decide(s, workload_info(s, "team-a", "p"))
    assert (v.admit, v.rule, v.resolvable) == (False, "QuotaExceeded", True)


def test_when_can_preempt_try_next_flavor_preempts_in_the_first_flavor_when_none_fits():
    """seed 001 FlavorFungibility: with no flavor that fits, the first flavor where preemption could help is used."""
    s = preempt_state()
    a = assign_pod(s, Pod("p").queue("lq").cpu("9").priority(10).obj())   # on-demand 8 never; spot 4 never → NoFit
    assert a.mode == NOFIT and a.unresolvable is True
    a = assign_pod(s, Pod("p2").queue("lq").cpu("4").priority(10).obj())  # spot: 1 free of 4 → preempt; on-demand fits
    assert (a.mode, a.flavors) == (FIT, {"cpu": "on-demand"})
    apply(s, Pod("od-user").queue("lq").cpu("8").node("n-od").obj())
    a = assign_pod(s, Pod("p3").queue("lq").cpu("4").priority(10).obj())  # now both need preemption → the first one
    assert (a.mode, a.flavors) == (PREEMPT, {"cpu": "spot"})


# ---- taints and nodeSelector ---------------------------------------------------------------------------------

TAINT = {"key": "dedicated", "value": "gpu", "effect": "NoSchedule"}
TOLERATION = {"key": "dedicated", "operator": "Equal", "value": "gpu", "effect": "NoSchedule"}


def taint_state(flavor_tolerations=None):
    return make_state(
        ResourceFlavor("tainted").node_labels({"pool": "gpu"}).node_taints([TAINT]).tolerations(flavor_tolerations)
            .obj(),
        ResourceFlavor("plain").obj(),
        ClusterQueue("cq")
            .resource_group(FlavorQuotas("tainted").resource("cpu", "8"), FlavorQuotas("plain").resource("cpu", "8"))
            .obj(),
        LocalQueue("lq", "team-a").cluster_queue("cq").obj())


def test_flavor_with_untolerated_taint_is_skipped_with_the_taint_named():
    """seed 001 资源规格与资源: a ResourceFlavor maps a flavor to a group of nodes (its nodeLabels/nodeTaints);
    a pod that does not tolerate the flavor's nodeTaints cannot use it."""
    s = taint_state()
    a = assign_pod(s, Pod("p").queue("lq").cpu("1").obj())
    assert a.flavors == {"cpu": "plain"}
    assert any("dedicated" in r and "tainted" in r for r in a.reasons)


def test_flavor_taint_tolerated_by_the_pod_is_chosen():
    """seed 001 资源规格与资源: the first flavor is chosen when the pod tolerates its taint."""
    s = taint_state()
    a = assign_pod(s, Pod("p").queue("lq").cpu("1").tolerations([TOLERATION]).obj())
    assert a.flavors == {"cpu": "tainted"}


def test_flavor_taint_tolerated_by_the_flavors_own_tolerations_is_chosen():
    """seed 001 资源规格与资源: ResourceFlavor.spec.tolerations are added to pods admitted to it, so they count."""
    s = taint_state(flavor_tolerations=[{"key": "dedicated", "operator": "Exists"}])
    a = assign_pod(s, Pod("p").queue("lq").cpu("1").obj())
    assert a.flavors == {"cpu": "tainted"}


def test_only_tainted_flavor_and_no_toleration_is_unresolvable():
    """seed 001 资源规格与资源: when every flavor is unusable for the pod, no preemption can help."""
    s = make_state(ResourceFlavor("tainted").node_labels({"pool": "gpu"}).node_taints([TAINT]).obj(),
                   ClusterQueue("cq").resource_group(FlavorQuotas("tainted").resource("cpu", "8"))
                       .preemption({"withinClusterQueue": "LowerPriority"}).obj(),
                   LocalQueue("lq", "team-a").cluster_queue("cq").obj())
    v = decide_pod(s, Pod("p").queue("lq").cpu("1").obj())
    assert (v.admit, v.resolvable) == (False, False)
    assert "dedicated" in v.reason


def test_pod_node_selector_contradicting_flavor_labels_skips_that_flavor():
    """seed 001 资源组: a flavor is bound to a node group by its nodeLabels; a pod whose nodeSelector asks for
    another group cannot run on it."""
    s = state_with(ClusterQueue("cq")
                       .resource_group(FlavorQuotas("spot").resource("cpu", "8"),
                                       FlavorQuotas("on-demand").resource("cpu", "8"))
                       .obj())
    a = assign_pod(s, Pod("p").queue("lq").cpu("1").node_selector({"pool": "on-demand"}).obj())
    assert a.flavors == {"cpu": "on-demand"}
    assert any("pool=on-demand" in r and "spot" in r for r in a.reasons)
    a = assign_pod(s,
                   Pod("q").queue("lq").cpu("1").node_selector({"zone": "a"}).obj())   # unrelated key: no contradiction
    assert a.flavors == {"cpu": "spot"}


# ---- limits: NoFit vs Preempt -----------------------------------------------------------------------------

def test_request_above_nominal_plus_borrowing_limit_is_nofit_unresolvable_with_numbers():
    """seed 001 规格与借用语义 (3): the request must be "小于或等于规格在 ClusterQueue 中的未用 nominalQuota +
    borrowingLimit"; 11 CPUs > 9 + 1 can never fit."""
    s = state_with(ClusterQueue("team-a-cq").cohort("team-ab")
                       .resource_group(FlavorQuotas("default-flavor").resource("cpu", "9", borrowing="1"))
                       .preemption({"withinClusterQueue": "LowerPriority", "reclaimWithinCohort": "Any"}).obj(),
                   ClusterQueue("team-b-cq").cohort("team-ab")
                       .resource_group(FlavorQuotas("default-flavor").resource("cpu", "12")).obj())
    a = assign_pod(s, Pod("p").queue("lq").cpu("11").obj())
    assert a.mode == NOFIT and a.unresolvable is True
    text = " ".join(a.reasons)
    for number in ("11", "10", "9", "1"):
        assert number in text
    assert "borrowing limit" in text
    v = decide(s, workload_info(s, "team-a", "p"))
    assert (v.admit, v.resolvable, v.rule) == (False, False, "QuotaExceeded")
    assert "11" in v.reason and "10" in v.reason


def test_request_within_potential_but_above_available_is_preempt_mode():
    """seed 001 借用限制 + 抢占: team-b uses its 12, so team-a has 9 now but could reach 10 → Preempt."""
    s = state_with(ClusterQueue("team-a-cq").cohort("team-ab")
                       .resource_group(FlavorQuotas("default-flavor").resource("cpu", "9", borrowing="1"))
                       .preemption({"reclaimWithinCohort": "Any"}).obj(),
                   ClusterQueue("team-b-cq").cohort("team-ab")
                       .resource_group(FlavorQuotas("default-flavor").resource("cpu", "12")).obj(),
                   extra=[LocalQueue("lq", "team-b").cluster_queue("team-b-cq").obj(),
                          Pod("b-running", "team-b").queue("lq").cpu("12").node("n-od").obj()])
    a = assign_pod(s, Pod("p").queue("lq").cpu("10").obj())
    assert a.mode == PREEMPT and a.unresolvable is False
    text = " ".join(a.reasons)
    assert "10" in text and "9" in text
    v = decide(s, workload_info(s, "team-a", "p"))
    assert (v.admit, v.rule, v.resolvable) == (False, "QuotaExceeded", True)
    a = assign_pod(s, Pod("small").queue("lq").cpu("9").obj())
    assert (a.mode, a.borrowing) == (FIT, False)


def test_preempt_mode_is_not_resolvable_without_a_preemption_policy():
    """seed 001 抢占: reclaimWithinCohort / withinClusterQueue default to Never, so nothing can be preempted."""
    s = state_with(ClusterQueue("team-a-cq").cohort("team-ab")
                       .resource_group(FlavorQuotas("default-flavor").resource("cpu", "9", borrowing="1")).obj(),
                   ClusterQueue("team-b-cq").cohort("team-ab")
                       .resource_group(FlavorQuotas("default-flavor").resource("cpu", "12")).obj(),
                   extra=[LocalQueue("lq", "team-b").cluster_queue("team-b-cq").obj(),
                          Pod("b-running", "team-b").queue("lq").cpu("12").node("n-od").obj()])
    v = decide_pod(s, Pod("p").queue("lq").cpu("10").obj())
    assert (v.admit, v.resolvable) == (False, False)
    assert v.assignment.mode == PREEMPT


# ---- offered nodes ---------------------------------------------------------------------------------------

def test_flavor_with_quota_but_no_offered_node_is_skipped():
    """seed 001 资源组 (a ResourceFlavor is bound to a node group): quota in a flavor none of whose nodes
    kube-scheduler offered cannot be used for this pod, so the next flavor is chosen."""
    s = state_with(ClusterQueue("cq")
                       .resource_group(FlavorQuotas("spot").resource("cpu", "8"),
                                       FlavorQuotas("on-demand").resource("cpu", "8"))
                       .obj())
    v = decide_pod(s, Pod("p").queue("lq").cpu("1").obj(), offered={"n-od"})
    assert v.admit is True
    assert v.assignment.flavors == {"cpu": "on-demand"}
    assert any("spot" in r for r in v.assignment.reasons)
    v = decide_pod(s, Pod("p").queue("lq").cpu("1").obj(), offered={"n-spot", "n-od"})
    assert v.assignment.flavors == {"cpu": "spot"}


def test_no_flavor_with_offered_nodes_is_refused_as_no_flavor_nodes():
    """seed 001 资源组: with quota left but no offered node in any flavor, the pod is refused naming that cause."""
    s = state_with(ClusterQueue("cq")
                       .resource_group(FlavorQuotas("spot").resource("cpu", "8"),
                                       FlavorQuotas("on-demand").resource("cpu", "8"))
                       .obj(),
                   extra=[Node("n-other").cpu("64").labels({"pool": "other"}).obj()])
    v = decide_pod(s, Pod("p").queue("lq").cpu("1").obj(), offered={"n-other"})
    assert (v.admit, v.rule) == (False, "NoFlavorNodes")
    assert v.assignment.no_nodes is True


def test_has_nodes_predicate_directly():
    """seed 001 资源规格与资源: assign_flavors with a has_nodes predicate skips flavors without nodes."""
    s = state_with(ClusterQueue("cq")
                       .resource_group(FlavorQuotas("spot").resource("cpu", "8"),
                                       FlavorQuotas("on-demand").resource("cpu", "8"))
                       .obj())
    c = s.cluster_queues["cq"]
    a = assign_flavors({"cpu": 1000, "pods": 1}, c, s.ledger.quota_node("cq"), s.flavors, [], {},
                       has_nodes=lambda f: f != "spot")
    assert a.flavors == {"cpu": "on-demand"} and a.no_nodes is True


@pytest.mark.parametrize("offered", [None, set()])
def test_offered_none_means_unrestricted(offered):
    """seed 001 资源规格与资源: without an offered set (None), flavors are not filtered by nodes; an empty
    offered set leaves no node for a node-labelled flavor."""
    s = state_with(ClusterQueue("cq").resource_group(FlavorQuotas("spot").resource("cpu", "8")).obj())
    v = decide_pod(s, Pod("p").queue("lq").cpu("1").obj(), offered=offered)
    assert v.admit is (offered is None)


def test_when_can_preempt_preempt_still_tries_next_flavor_when_it_would_also_borrow():
    """seed 001 FlavorFungibility, as Kueue's shouldTryNextFlavor: whenCanPreempt Preempt stops at a flavor only
    when preempting there needs no borrowing or whenCanBorrow is Borrow; with TryNextFlavor it looks further.
    (Preempting "running" and borrowing 1 CPU of the cohort's free one is a real target set here, with
    borrowWithinCohort; without any, the flavor is passed over: test_flavor_fungibility.py.)"""
    def state(**fung):
        return state_with(
            ClusterQueue("cq").cohort("co")
                .resource_group(FlavorQuotas("spot").resource("cpu", "4"),
                                FlavorQuotas("on-demand").resource("cpu", "8"))
                .preemption({"withinClusterQueue": "LowerPriority", "reclaimWithinCohort": "Any",
                           "borrowWithinCohort": {"policy": "LowerPriority"}}).flavor_fungibility(fung).obj(),
            ClusterQueue("other").cohort("co").resource_group(FlavorQuotas("spot").resource("cpu", "2")).obj(),
            extra=[LocalQueue("lq-other", "team-a").cluster_queue("other").obj(),
                   Pod("running").queue("lq").cpu("4").priority(0).node("n-spot").obj(),
                   Pod("other-user", "team-a").queue("lq-other").cpu("1").node("n-spot").obj()])
    s = state(whenCanPreempt="Preempt", whenCanBorrow="TryNextFlavor")
    a = assign_pod(s,
                   Pod("p").queue("lq").cpu("5").priority(10)
                       .obj())   # spot: 5 > 4 nominal (borrow) and nothing free → preempt
    assert (a.mode, a.flavors) == (FIT, {"cpu": "on-demand"})
    s = state(whenCanPreempt="Preempt", whenCanBorrow="Borrow")
    a = assign_pod(s, Pod("p").queue("lq").cpu("5").priority(10).obj())
    assert (a.mode, a.borrowing, a.flavors) == (PREEMPT, True, {"cpu": "spot"})
