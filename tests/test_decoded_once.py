"""Objects decoded once at the edge (issue 13, point 3): PodDisruptionBudgets, PodGroups and the
fence / delay / allow-preemption / group-size annotations become typed records when they arrive, and a
budget's covered and healthy pods are running figures in state/, not a scan per decision."""
from __future__ import annotations

import pytest

from app.core import gangs
from app.core.preemption.spent_budgets import disruptions_allowed, spent_budgets
from app.objects.annotations import ALLOW, DELAY, FENCE, GROUP_TOTAL
from app.objects.disruption_budget import IntOrPercent, decode_pdb
from app.objects.errors import InvalidObject
from app.objects.podgroup import decode_pod_group
from app.sync.dispatch import remove_object
from builders import ClusterQueue, Cohort, FlavorQuotas, LocalQueue, Node, Pod, running
from helpers import apply, delete, make_state, pod_info


def pdb(name: str = "db", ns: str = "team-a", selector: dict | None = None, **spec) -> dict:
    body = {"selector": selector, **spec} if selector is not None or "selector" in spec else spec
    return {"apiVersion": "policy/v1", "kind": "PodDisruptionBudget",
            "metadata": {"name": name, "namespace": ns}, "spec": body}


def scanned(state) -> set[str]:
    """spent_budgets as it was before the running figures: every pod matched against every budget."""
    spent = set()
    for budget in state.budgets.budgets.values():
        covered = [p for p in state.pods.values() if p.namespace == budget.namespace and p.node_name
                   and not p.terminal and budget.covers(p.labels)]
        healthy = sum(1 for p in covered if p.ready or p.phase == "Running")
        if covered and disruptions_allowed(budget, len(covered), healthy) <= 0:
            spent.update(p.uid for p in covered)
    return spent


# ---- PodDisruptionBudget ----------------------------------------------------------------------------

@pytest.mark.parametrize("spec,min_available,max_unavailable", [
    ({"minAvailable": 2}, IntOrPercent(2), None),
    ({"minAvailable": "50%"}, IntOrPercent(50, True), None),
    ({"maxUnavailable": 0}, None, IntOrPercent(0)),
    ({"maxUnavailable": "1"}, None, IntOrPercent(1)),
    ({}, None, None),
])
def test_a_budget_is_decoded_once_into_numbers(spec, min_available, max_unavailable):
    budget = decode_pdb(pdb(selector={"matchLabels": {"app": "db"}}, **spec))
    assert (budget.key, budget.min_available, budget.max_unavailable) == ("team-a/db", min_available, max_unavailable)
    assert budget.covers({"app": "db"}) and not budget.covers({"app": "web"})


@pytest.mark.parametrize("spec,problem", [
    ({"minAvailable": "half"}, "spec.minAvailable must be a non-negative integer or a percentage, got 'half'"),
    ({"maxUnavailable": -1}, "spec.maxUnavailable must be a non-negative integer or a percentage, got -1"),
    ({"minAvailable": True}, "spec.minAvailable must be a non-negative integer or a percentage, got True"),
    ({"selector": {"matchLabels": {"app": 1}}}, "spec.selector: matchLabels must map strings to strings"),
    ({"selector": "app=db"}, "spec.selector: a label selector must be an object"),
])
def test_a_budget_that_does_not_decode_is_refused_with_its_field(spec, problem):
    """Before, a bad minAvailable silently meant "no limit" on every decision; now it is refused once, as the
    watch refuses any invalid object (a logged, counted skip; the last good version stays)."""
    with pytest.raises(InvalidObject) as e:
        decode_pdb(pdb(**spec))
    assert e.value.reason == problem


@pytest.mark.parametrize("expected,healthy,spec,allowed", [
    (4, 4, {"minAvailable": 2}, 2),
    (4, 3, {"minAvailable": 3}, 0),             # exactly at minAvailable: no disruption left
    (4, 4, {"minAvailable": "50%"}, 2),
    (3, 3, {"minAvailable": "50%"}, 1),         # 1.5 rounds up to 2 pods that must stay
    (4, 4, {"maxUnavailable": 1}, 1),
    (4, 3, {"maxUnavailable": 1}, 0),           # one already unhealthy uses the one allowed
    (3, 3, {"maxUnavailable": "50%"}, 2),       # 1.5 rounds up
    (4, 4, {}, 1),
])
def test_disruptions_allowed_as_the_disruption_controller_counts_them(expected, healthy, spec, allowed):
    budget = decode_pdb(pdb(selector={}, **spec))
    assert disruptions_allowed(budget, expected, healthy) == allowed


def test_a_null_selector_covers_no_pod_and_an_empty_one_every_pod_of_its_namespace():
    """policy/v1: "A null selector will match no pods, while an empty ({}) selector will select all pods within
    its namespace." BUG fixed: a budget without a selector made every running pod of its namespace a last resort."""
    objects = [Node("n1").obj(), running("db-1", "lq", "1").label("app", "db").obj(),
                                 running("web-1", "lq", "1").label("app", "web").obj()]
    state = make_state(*objects, pdb(minAvailable=5))
    assert spent_budgets(state) == set()
    state = make_state(*objects, pdb(selector={}, minAvailable=5))
    assert spent_budgets(state) == {"uid-team-a-db-1", "uid-team-a-web-1"}
    state = make_state(*objects, pdb(selector={}, minAvailable=5, ns="team-b"))
    assert spent_budgets(state) == set()


def test_the_covered_and_healthy_pods_are_running_figures_that_follow_every_pod_change():
    """A budget added before or after its pods, pods turning unready, finishing, leaving or changing labels:
    the figures always equal a full scan, and spent_budgets reads them."""
    state = make_state(Node("n1").obj(), running("db-1", "lq", "1").label("app", "db").obj(),
                       pdb(selector={"matchLabels": {"app": "db"}}, minAvailable=2))
    budget = "team-a/db"
    assert dict(state.budgets.covered[budget]) == {"uid-team-a-db-1": True}
    assert spent_budgets(state) == {"uid-team-a-db-1"} == scanned(state)     # 1 healthy, 2 must stay
    apply(state, running("db-2", "lq", "1").label("app", "db").obj(),
                 running("db-3", "lq", "1").label("app", "db").obj())
    assert spent_budgets(state) == set() == scanned(state)                   # 3 healthy: one may go
    apply(state, running("db-3", "lq", "1").label("app", "db").phase("Pending").obj())
    assert state.budgets.covered[budget]["uid-team-a-db-3"] is False
    assert spent_budgets(state) == {"uid-team-a-db-1", "uid-team-a-db-2", "uid-team-a-db-3"} == scanned(state)
    done = running("db-3", "lq", "1").label("app", "db").obj()
    done["status"] = {"phase": "Succeeded"}
    apply(state, done)
    assert "uid-team-a-db-3" not in state.budgets.covered[budget]
    apply(state, running("db-3", "lq", "1").label("app", "db").obj())
    relabelled = running("db-2", "lq", "1").label("app", "web").obj()
    apply(state, relabelled)
    assert set(state.budgets.covered[budget]) == {"uid-team-a-db-1", "uid-team-a-db-3"}
    assert spent_budgets(state) == scanned(state) == {"uid-team-a-db-1", "uid-team-a-db-3"}
    delete(state, running("db-1", "lq", "1").label("app", "db").obj())
    assert set(state.budgets.covered[budget]) == {"uid-team-a-db-3"}
    apply(state,
          Pod("pending").queue("lq").cpu("1").obj())                                     # not on a node: not covered
    assert set(state.budgets.covered[budget]) == {"uid-team-a-db-3"}
    delete(state, pdb(selector={"matchLabels": {"app": "db"}}, minAvailable=2))
    assert not state.budgets and spent_budgets(state) == set()


def test_a_budget_replaced_counts_its_pods_again():
    state = make_state(Node("n1").obj(), running("db-1", "lq", "1").label("app", "db").obj(),
                                         running("web-1", "lq", "1").label("app", "web").obj(),
                       pdb(selector={"matchLabels": {"app": "db"}}, minAvailable=1))
    assert spent_budgets(state) == {"uid-team-a-db-1"}
    apply(state, pdb(selector={"matchLabels": {"app": "web"}}, minAvailable=1))
    assert set(state.budgets.covered["team-a/db"]) == {"uid-team-a-web-1"}
    assert spent_budgets(state) == {"uid-team-a-web-1"} == scanned(state)


# ---- PodGroup and the group-size annotation --------------------------------------------------------

def podgroup(min_member) -> dict:
    return {"apiVersion": "scheduling.x-k8s.io/v1alpha1", "kind": "PodGroup",
            "metadata": {"name": "pg", "namespace": "team-a"}, "spec": {"minMember": min_member}}


@pytest.mark.parametrize("min_member,size", [(3, 3), ("3", 3), (0, None), (None, None)])
def test_a_pod_group_is_decoded_once(min_member, size):
    assert decode_pod_group(podgroup(min_member)).min_member == size


@pytest.mark.parametrize("min_member", [-1, "three", 2.5, True])
def test_a_pod_group_that_does_not_decode_is_refused(min_member):
    with pytest.raises(InvalidObject, match="spec.minMember must be a non-negative integer"):
        decode_pod_group(podgroup(min_member))


def group_member(annotation: str | None, coscheduling: bool = False) -> dict:
    obj = Pod("m-0").queue("lq").cpu("1").obj()
    label = "scheduling.x-k8s.io/pod-group" if coscheduling else "kueue.x-k8s.io/pod-group-name"
    obj["metadata"]["labels"][label] = "pg"
    if annotation is not None:
        obj["metadata"]["annotations"] = {GROUP_TOTAL: annotation}
    return obj


@pytest.mark.parametrize("annotation,size", [("4", 4), ("0", None), ("-2", None), ("four", None), (None, None)])
def test_the_group_total_count_annotation_is_read_when_the_pod_is(annotation, size):
    state = make_state(group_member(annotation))
    member = pod_info(state, "team-a", "m-0")
    assert member.group_total == size
    assert gangs.expected_size(state, member) == size


def test_a_coscheduling_groups_size_is_its_pod_groups_min_member_as_it_changes():
    state = make_state(group_member(None, coscheduling=True))
    member = pod_info(state, "team-a", "m-0")
    assert gangs.expected_size(state, member) is None
    apply(state, podgroup(2))
    assert gangs.expected_size(state, member) == 2
    apply(state, podgroup(5))
    assert gangs.expected_size(state, member) == 5
    delete(state, podgroup(5))
    assert gangs.expected_size(state, member) is None


# ---- fence, delay, allow-preemption ------------------------------------------------------------------

def annotated(obj: dict, **annotations) -> dict:
    obj["metadata"]["annotations"] = annotations
    return obj


@pytest.mark.parametrize("value,fenced", [("true", True), ("True", False), ("false", False), (None, False)])
def test_the_fence_is_decoded_on_cluster_queues_and_cohorts(value, fenced):
    notes = {FENCE: value} if value is not None else {}
    state = make_state(annotated(Cohort("c").obj(), **notes),
                       annotated(ClusterQueue("q").cohort("c")
                                     .resource_group(FlavorQuotas("default-flavor").resource("cpu", "9")).obj(),
                                 **notes))
    assert state.cluster_queues["q"].fence is fenced and state.cohorts["c"].fence is fenced


@pytest.mark.parametrize("value,seconds", [("90s", 90.0), ("2m", 120.0), ("1h30m", 5400.0), ("0s", 0.0),
                                           ("soon", 30.0), ("", 0.0), (None, 0.0)])
def test_the_preemption_delay_is_decoded_once_and_an_unparsable_one_is_30s(value, seconds):
    """seed 002 抢占配置: "如果字符串解析失败,一样使用 30s"."""
    notes = {DELAY: value} if value is not None else {}
    state = make_state(annotated(ClusterQueue("q").resource_group(FlavorQuotas("default-flavor").resource("cpu", "9"))
                                     .obj(),
                                 **notes))
    assert state.cluster_queues["q"].preemption_delay == seconds


@pytest.mark.parametrize("notes,allowed", [
    ({ALLOW[0]: "false"}, False), ({ALLOW[1]: "false"}, False), ({ALLOW[0]: "true"}, True), ({}, True),
    ({ALLOW[0]: "no"}, True),
])
def test_allow_preemption_is_decoded_on_the_priority_class(notes, allowed):
    pc = {"apiVersion": "scheduling.k8s.io/v1", "kind": "PriorityClass", "value": 10,
          "metadata": {"name": "batch", "annotations": notes}}
    state = make_state(pc, LocalQueue("lq", "team-a").cluster_queue("q").obj())
    assert state.priority_classes["batch"].allow_preemption is allowed


@pytest.mark.parametrize("obj", [pdb(selector={}, minAvailable=1), podgroup(2)])
def test_a_namespace_less_object_is_removed_by_the_key_the_watch_gives(obj):
    """Found in review (issue 13): the decoders key an object without a namespace as default/NAME, the watch's
    DELETED event and relist give NAME; both now name the same object, so the delete takes it out."""
    del obj["metadata"]["namespace"]
    state = make_state(obj)
    assert "default/" + obj["metadata"]["name"] in (state.budgets.budgets if obj["kind"] == "PodDisruptionBudget"
                                                    else state.pod_groups)
    remove_object(state, obj["kind"], obj["metadata"]["name"])
    assert not state.budgets and not state.pod_groups
