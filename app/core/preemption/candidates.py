"""Who may be preempted: the running pods a preemptor's ClusterQueue policies (withinClusterQueue,
reclaimWithinCohort, borrowWithinCohort) and YuniKorn's laws allow it to take, in Kueue's candidate order.

A running pod group is one candidate (the ACK seed: a gang is never broken). Over hierarchical cohorts,
classic preemption reaches other queues by walking up the Cohort tree (core.hierarchy); fair sharing
takes every borrowing queue of the tree and lets shares decide.
"""
from __future__ import annotations

from ...objects.pod import PodInfo
from ..hierarchy import Scope, reclaim_scopes
from ..resource_node import FR
from .classic import borrow_within_cohort, candidate_is_valid
from .laws import guarantee_protected, inside, opted_out, preemption_fence, same_group
from .ordering import admission_key, newer, newest_first, order
from .removals import borrows_after, is_borrowing
from .targets import Candidate, Preemptor
from ..view import CandidateView
from ..workload import WorkloadKey, group_of


def find_candidates(state: CandidateView, pre: Preemptor, needs: set[FR], spent_pdb: set[str]) -> list[Candidate]:
    """The running pods the preemptor's policies allow it to take and that use a resource it needs, in Kueue's
    candidate order: withinClusterQueue (LowerPriority, or LowerOrNewerEqualPriority) in its own queue, and
    reclaimWithinCohort (LowerPriority, or Any) in the others of its Cohort tree, never out of a preemption
    fence. Runs over tens of thousands of pods: filter before building."""
    workload, cq, prio = pre.workload, pre.cq, pre.workload.priority
    template = workload.template
    policy = cq.preemption
    found: list[Candidate] = []
    pods, admitted, classes, going = state.pods, state.admitted, state.priority_classes, state.going

    groups_seen: set = set()
    own_group = group_of(template)

    def add(uid: str, other: PodInfo, scope=None) -> None:
        charge = admitted.get(uid)
        if charge is None or other.deleting or uid == workload.uid or uid in going:
            return      # a victim already chosen for another preemptor frees its quota once, for that one
        if needs and needs.isdisjoint(charge.usage):
            return
        key = group_of(other)
        if key:
            if key == own_group or key in groups_seen:
                return
            groups_seen.add(key)
            found_group = group_candidate(state, key, prio, policy, cq.name, spent_pdb, workload.created)
            if found_group is not None:
                found.append(_classified(pre, found_group, scope))
            return
        if same_group(template, other):
            return      # YuniKorn's law 3: never one's own owner (own gang: key == own_group above)
        last_resort = uid in spent_pdb or (bool(other.priority_class) and other.priority_class in classes
                                           and opted_out(state, other))
        found.append(_classified(pre, Candidate(other, charge.cluster_queue, charge.usage, charge.admitted_at,
                                                last_resort), scope))

    if policy.within_cluster_queue != "Never":
        same_prio = policy.within_cluster_queue == "LowerOrNewerEqualPriority"
        for uid in admitted.by_queue.get(cq.name, ()):
            other = pods.get(uid)
            if other is None:
                continue
            p = other.priority or 0
            if p < prio or (same_prio and p == prio and newer(other.created, workload.created)):
                add(uid, other)
    if pre.node.parent is not None and policy.reclaim_within_cohort != "Never":
        fence = preemption_fence(state, cq)
        lower_only = policy.reclaim_within_cohort == "LowerPriority"
        for scope in _reclaim_scopes(state, pre, needs):
            if fence is not None and not inside(scope.queue, fence):
                continue            # YuniKorn's law 7: never out of the fence (a reclaim into it is fine)
            for uid in admitted.by_queue.get(scope.queue.name, ()):
                other = pods.get(uid)
                if other is not None and not (lower_only and (other.priority or 0) >= prio):
                    add(uid, other, scope)
    return order(found, cq.name)


def _reclaim_scopes(state: CandidateView, pre: Preemptor, needs: set[FR]) -> list:
    """The other queues to reclaim from. Classic preemption walks the Cohort tree up from the preemptor
    (core.hierarchy); fair sharing, as Kueue's findCandidates, takes every borrowing queue of the tree
    and lets shares decide."""
    if not state.config.fair_sharing:
        return reclaim_scopes(pre.node, pre.usage, needs)
    root = pre.node.root()
    return [Scope(node, None, False) for name, node in state.ledger.quota_tree().queues.items()
            if name != pre.cq.name and node.root() is root and is_borrowing(node, needs)]


def _classified(pre: Preemptor, c: Candidate, scope) -> Candidate:
    """Another queue's candidate reached at a Cohort: how it may be reclaimed (borrow_within_cohort)."""
    if scope is None or scope.lca is None or c.cluster_queue == pre.cq.name:
        return c            # the own queue's, or fair sharing's (shares decide, not variants)
    c.lca = scope.lca
    c.variant = borrow_within_cohort(pre, c, scope.advantage)
    return c


def group_candidate(state: CandidateView, key: WorkloadKey, prio: int, policy, cq_name: str, spent: set[str],
                    preemptor_created: float | None = None) -> Candidate | None:
    """A running pod group as one candidate (the ACK seed: a gang is never broken): all its running
    members, their summed quota, the highest member priority against the preemptor's policies."""
    running = [m for m in state.store.members(key) if m.node_name and m.uid in state.admitted]
    if not running or any(m.uid in state.going for m in running):
        return None
    charges = [state.admitted[m.uid] for m in running]
    top = max(m.priority or 0 for m in running)
    same_queue = charges[0].cluster_queue == cq_name
    created = min((m.created for m in running if m.created is not None), default=None)   # the group's queue time
    if same_queue and not (top < prio or (policy.within_cluster_queue == "LowerOrNewerEqualPriority" and top == prio
                                          and newer(created, preemptor_created))):
        return None
    if not same_queue and policy.reclaim_within_cohort == "LowerPriority" and top >= prio:
        return None
    usage: dict[FR, int] = {}
    rec = state.job_admissions.get(running[0].owner.uid) if running[0].job else None
    spare = [rec.spare_charge(rec.spare)] if rec is not None and rec.spare else []   # a Job's kept slots go too
    for c in charges + spare:
        for fr, v in c.usage.items():
            usage[fr] = usage.get(fr, 0) + v
    head = max(running, key=lambda m: m.priority or 0)
    latest = max(admission_key(c.admitted_at, m) for c, m in zip(charges, running))
    return Candidate(head, charges[0].cluster_queue, usage, latest[0],
                     any(m.uid in spent or opted_out(state, m) for m in running), members=tuple(running),
                     admission=latest)


def unqueued_on(state: CandidateView, pre: Preemptor, node: str, spent: set[str] = frozenset()) -> list[Candidate]:
    """Pods in no queue, on the node, whose own priority is below the preemptor's own: they hold no quota, only
    room, and are no workload, so pod priorities decide, as in kube-scheduler (a WorkloadPriorityClass does not
    reach them)."""
    out, going = [], state.workloads.victims() if state.holds else ()
    for uid in state.node_pods.get(node, ()):
        other = state.pods.get(uid)
        if other is None or other.queue_name or other.deleting or uid in state.admitted or uid in going:
            continue
        if (other.pod_priority or 0) < pre.workload.pod_priority and not same_group(pre.workload.template, other):
            out.append(Candidate(other, "", {}, other.observed_admission()[0],
                                 opted_out(state, other) or uid in spent))
    newest_first(out, lambda c: c.pod.pod_priority or 0)
    return out


def still_a_candidate(state: CandidateView, pre: Preemptor, c: Candidate, needs: set[FR]) -> bool:
    """Whether c may still go once the victims virtually removed so far are gone: a pod of another queue
    only while that queue borrows (seed 000 候选者) and, in classic preemption, only as Kueue's candidate
    iterator lets it go given whether the preemptor would then borrow (candidate_is_valid)."""
    if state.config.fair_sharing:
        if not c.cluster_queue or c.cluster_queue == pre.cq.name:
            return True
        node = state.ledger.quota_node(c.cluster_queue)
        return node is not None and is_borrowing(node, needs) and not guarantee_protected(state, c)
    return candidate_is_valid(state, pre, c, needs, borrows_after(pre))
