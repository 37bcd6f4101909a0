"""Preemption: which running pods make room for a pending one, chosen node by node.

Quota first, as Kueue does (seed 000 经典抢占 / 公平共享): the candidates the
preemptor's ClusterQueue policies allow, in Kueue's order (other, borrowing
queues first, then lowest priority, then most recently admitted); the classic
heuristics or fair sharing's loop take targets until the quota fits, and the
list is minimised by walking it backwards. Over hierarchical cohorts, classic
preemption reaches other queues by walking up the Cohort tree (core.hierarchy):
where a subtree can hold the request, the preemptor may reclaim what others
borrowed from it even while its own ClusterQueue borrows. YuniKorn's laws (seed 002) narrow the
candidates: never the preemptor's own gang or owner, never outside a preemption
fence, pods that opted out (or whose PodDisruptionBudget is spent) only when no
other victim set exists, and, when guaranteeProtection is on, never a victim
whose queue would drop below its nominal quota.

Then node by node (YuniKorn's victim groups): on each node the pod may use, the
quota targets plus the fewest further candidates on that node that make the pod
fit there. The best node wins, by this order: fewest last-resort victims, fewest
victims, victims earliest in candidate order (borrowing queues, low priority,
recent first), lowest top priority, then node name.
"""
from __future__ import annotations

import gc
import heapq
import math
from contextlib import contextmanager
from dataclasses import dataclass, field, replace

from ..objects.kueue import ClusterQueue
from ..objects.pod import PodInfo
from .fairsharing import dominant_resource_share
from .flavors import NO_CANDIDATES, PREEMPT, RECLAIM, Assignment
from .gangs import COSCHEDULING_GROUP, KUEUE_GROUP, group_of
from .hierarchy import (HIERARCHICAL_RECLAIM, RECLAIM_WHILE_BORROWING, RECLAIM_WITHOUT_BORROWING, Scope,
                        borrows_up_to, may_reclaim_in_hierarchy, reclaim_scopes)
from .placement import shortfall, static_misfit
from .quota import FR, QuotaNode, add_usage, available, borrowing, remove_usage

IN_CLUSTER_QUEUE = "InClusterQueue"
IN_COHORT_RECLAMATION = "InCohortReclamation"
IN_COHORT_FAIR_SHARING = "InCohortFairSharing"
IN_COHORT_RECLAIM_WHILE_BORROWING = "InCohortReclaimWhileBorrowing"
LOWER_PRIORITY_ON_NODE = "LowerPriorityOnNode"     # a pod in no queue, taken only for room on the node

FENCE = "quotient.dev/preemption-fence"
DELAY = "quotient.dev/preemption-delay"
ALLOW = ("yunikorn.apache.org/allow-preemption", "quotient.dev/allow-preemption")
GANG_LABELS = (KUEUE_GROUP, COSCHEDULING_GROUP)


@dataclass(slots=True, eq=False)
class Candidate:
    pod: PodInfo
    cluster_queue: str              # "" for a pod in no queue
    usage: dict[FR, int]
    admitted_at: float
    last_resort: bool = False       # opted out of preemption, or its PodDisruptionBudget is spent
    rank: int = 0                   # place in candidate order
    members: tuple = ()             # a running pod group is one candidate: all of it or none of it
    variant: str = ""               # another queue's: how it may be reclaimed (core.hierarchy)
    lca: QuotaNode | None = None    # the Cohort it was reached at: its queue must borrow up to there
    admission: tuple = ()           # admission_key of its most recently admitted pod (a group's latest member)

    def pods(self) -> tuple:
        return self.members or (self.pod,)

    def requests_on(self, node: str) -> dict[str, int]:
        """What removing this candidate frees on one node."""
        out: dict[str, int] = {}
        for p in self.pods():
            if p.node_name == node:
                _add(out, p.requests)
        return out


@dataclass(slots=True)
class Target:
    candidate: Candidate
    reason: str


@dataclass
class Plan:
    """The victims that make room for the preemptor on one node."""
    node: str
    targets: list[Target]
    others: dict[str, str] = field(default_factory=dict)   # nodes not chosen -> why

    def key(self) -> tuple:
        ranks = sorted((t.candidate.rank for t in self.targets), reverse=True)
        pods = sum(len(t.candidate.pods()) for t in self.targets)     # a whole group costs all its pods
        return (sum(t.candidate.last_resort for t in self.targets), pods, ranks,
                max((t.candidate.pod.priority or 0 for t in self.targets), default=0), self.node)


@dataclass
class Preemptor:
    pod: PodInfo
    cq: ClusterQueue
    node: QuotaNode                 # the ClusterQueue's quota node
    usage: dict[FR, int]            # what the pod charges, from its flavor assignment
    flavors: set[str]
    needs: set[FR] = field(init=False)      # what does not fit the quota now: victims must free it
    relevant: set[FR] = field(init=False)   # needs, or everything the pod charges when it all fits

    def __post_init__(self):
        self.needs = {fr for fr, v in self.usage.items() if v > available(self.node, fr)}
        self.relevant = self.needs or set(self.usage)


# ---- most recently admitted first ------------------------------------------------------

def admission_key(admitted_at: float, pod: PodInfo) -> tuple:
    """What "admitted more recently" compares, the same in the simulator, on a cluster and after a restart:
    the admission time (whole seconds, as the API records it), then at equal seconds the later startTime,
    the later creationTimestamp, and the name (namespace/name, unique). Kueue breaks its last tie by UID,
    which the API server draws at random, so a simulated run and a cluster would disagree."""
    return (admitted_at, pod.started or 0.0, pod.created or 0.0, pod.key)


def newer(candidate_created: float | None, preemptor_created: float | None) -> bool:
    """LowerOrNewerEqualPriority's "newer": the candidate's queue-order time (its creationTimestamp) is
    strictly after the preemptor's, compared at the API's one-second resolution, as Kueue's
    SatisfiesPreemptionPolicy does (preemptorTS.Before(candidateTS)): the same second is not newer."""
    return math.floor(candidate_created or 0.0) > math.floor(preemptor_created or 0.0)


def admission_of(c: "Candidate") -> tuple:
    """A candidate's admission key (admission_key; a pod group's latest member's)."""
    return c.admission or admission_key(c.admitted_at, c.pod)


def newest_first(candidates: list, primary) -> None:
    """Sort in place by primary (ascending), ties "most recently admitted first" (Kueue's CandidatesOrdering,
    criterion 4, with admission_key's deterministic tie-break): two stable sorts of plain tuples. A
    comparison object per candidate made this sort a third of a reclaim decision at 50,000 pods."""
    candidates.sort(key=admission_of, reverse=True)
    candidates.sort(key=primary)


# ---- who may be preempted ------------------------------------------------------------

def _same_group(a: PodInfo, b: PodInfo) -> bool:
    """YuniKorn's law 3: never preempt a pod of one's own gang or owner."""
    if a.namespace != b.namespace:
        return False
    if a.owner and b.owner and a.owner.uid and a.owner.uid == b.owner.uid:
        return True
    return any(a.labels.get(k) and a.labels.get(k) == b.labels.get(k) for k in GANG_LABELS)


def fence_root(state, cq: ClusterQueue) -> QuotaNode | None:
    """The nearest fenced node at or above the ClusterQueue (the ClusterQueue itself or the lowest fenced
    Cohort over it, the tightest fence): victims stay inside it (None: no fence)."""
    node, fenced = state.quota_node(cq.name), None
    while node is not None:
        spec = state.cluster_queues.get(node.name) if not node.is_cohort else state.cohorts.get(node.name)
        if spec is not None and spec.annotations.get(FENCE) == "true":
            fenced = node
            break
        node = node.parent
    return fenced


def _inside(node: QuotaNode, root: QuotaNode) -> bool:
    while node is not None:
        if node is root:
            return True
        node = node.parent
    return False


def opted_out(state, pod: PodInfo) -> bool:
    """YuniKorn's allow-preemption: "false" on the pod's PriorityClass asks not to be preempted."""
    pc = state.priority_classes.get(pod.priority_class) if pod.priority_class else None
    return pc is not None and any(pc.annotations.get(a) == "false" for a in ALLOW)


def _is_borrowing(node: QuotaNode, needs: set[FR]) -> bool:
    return any(node.usage.get(fr, 0) > node.subtree.get(fr, 0) for fr in needs)


def find_candidates(state, pre: Preemptor, needs: set[FR], spent_pdb: set[str]) -> list[Candidate]:
    """The running pods the preemptor's policies allow it to take and that use a resource it needs,
    in Kueue's candidate order. Runs over tens of thousands of pods: filter before building."""
    pod, cq, prio = pre.pod, pre.cq, pre.pod.priority or 0
    policy = cq.preemption
    found: list[Candidate] = []
    pods, admitted, classes = state.pods, state.admitted, state.priority_classes

    groups_seen: set[str] = set()
    own_group = group_of(pod)

    def add(uid: str, other: PodInfo, scope=None) -> None:
        charge = admitted.get(uid)
        if charge is None or other.deleting or uid == pod.uid or uid in state.going:
            return      # a victim already chosen for another preemptor frees its quota once, for that one
        if needs and needs.isdisjoint(charge.usage):
            return
        key = group_of(other)
        if key:
            if key == own_group or key in groups_seen:
                return
            groups_seen.add(key)
            found_group = _group_candidate(state, key, prio, policy, cq.name, spent_pdb, pod.created)
            if found_group is not None:
                found.append(_classified(pre, found_group, scope))
            return
        if _same_group(pod, other):
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
            if p < prio or (same_prio and p == prio and newer(other.created, pod.created)):
                add(uid, other)
    if pre.node.parent is not None and policy.reclaim_within_cohort != "Never":
        fence = fence_root(state, cq)
        lower_only = policy.reclaim_within_cohort == "LowerPriority"
        for scope in _reclaim_scopes(state, pre, needs):
            if fence is not None and not _inside(scope.queue, fence):
                continue            # YuniKorn's law 7: never out of the fence (a reclaim into it is fine)
            for uid in admitted.by_queue.get(scope.queue.name, ()):
                other = pods.get(uid)
                if other is not None and not (lower_only and (other.priority or 0) >= prio):
                    add(uid, other, scope)
    return order(found, cq.name)


def _reclaim_scopes(state, pre: Preemptor, needs: set[FR]) -> list:
    """The other queues to reclaim from. Classic preemption walks the Cohort tree up from the preemptor
    (core.hierarchy); fair sharing, as Kueue's findCandidates, takes every borrowing queue of the tree
    and lets shares decide."""
    if not state.config.fair_sharing:
        return reclaim_scopes(pre.node, pre.usage, needs)
    root = pre.node.root()
    return [Scope(node, None, False) for name, node in state.tree.queues.items()
            if name != pre.cq.name and node.root() is root and _is_borrowing(node, needs)]


def _classified(pre: Preemptor, c: Candidate, scope) -> Candidate:
    """Kueue's classifyPreemptionVariant for another queue's candidate: the hierarchical advantage lets it
    go whatever the preemptor borrows; otherwise borrowWithinCohort's threshold decides."""
    if scope is None or scope.lca is None or c.cluster_queue == pre.cq.name:
        return c            # the own queue's, or fair sharing's (shares decide, not variants)
    c.lca = scope.lca
    policy, prio, mine = pre.cq.preemption, c.pod.priority or 0, pre.pod.priority or 0
    if scope.advantage:
        c.variant = HIERARCHICAL_RECLAIM
    elif policy.borrow_within_cohort == "Never" or prio >= mine or (
            policy.max_priority_threshold is not None and prio > policy.max_priority_threshold):
        c.variant = RECLAIM_WITHOUT_BORROWING
    else:
        c.variant = RECLAIM_WHILE_BORROWING
    return c


def _group_candidate(state, key: str, prio: int, policy, cq_name: str, spent: set[str],
                     preemptor_created: float | None = None) -> Candidate | None:
    """A running pod group as one candidate (the ACK seed: a gang is never broken): all its running
    members, their summed quota, the highest member priority against the preemptor's policies."""
    running = [m for m in state.members(key) if m.node_name and m.uid in state.admitted]
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
    for c in charges:
        for fr, v in c.usage.items():
            usage[fr] = usage.get(fr, 0) + v
    head = max(running, key=lambda m: m.priority or 0)
    latest = max(admission_key(c.admitted_at, m) for c, m in zip(charges, running))
    return Candidate(head, charges[0].cluster_queue, usage, latest[0],
                     any(m.uid in spent or opted_out(state, m) for m in running), members=tuple(running),
                     admission=latest)


def order(candidates: list[Candidate], cq_name: str) -> list[Candidate]:
    """Kueue's candidate order: other (borrowing) queues first, those the preemptor has the hierarchical
    advantage over before the rest (Kueue's candidate iterator), then lowest priority, then (a running pod
    group costing all its pods) fewer pods, then most recently admitted (newest_first)."""
    def tier(c: Candidate) -> int:
        return 2 if c.cluster_queue == cq_name else 0 if c.variant == HIERARCHICAL_RECLAIM else 1
    newest_first(candidates, lambda c: (tier(c), c.pod.priority or 0, len(c.pods())))
    for i, c in enumerate(candidates):
        c.rank = i
    return candidates


# ---- quota: which targets make the preemptor's quota fit ---------------------------------

class _Removals:
    """Virtual removal of candidates from the quota tree, always taken back."""

    def __init__(self, state):
        self.state, self.done = state, []

    def remove(self, c: Candidate) -> None:
        node = self.state.quota_node(c.cluster_queue)
        if node is not None:
            for fr, v in c.usage.items():
                remove_usage(node, fr, v)
        self.done.append(c)

    def restore(self, c: Candidate) -> None:
        node = self.state.quota_node(c.cluster_queue)
        if node is not None:
            for fr, v in c.usage.items():
                add_usage(node, fr, v)
        self.done.remove(c)

    def undo(self) -> None:
        for c in list(reversed(self.done)):
            self.restore(c)


def quota_fits(pre: Preemptor, allow_borrowing: bool) -> bool:
    for fr, v in pre.usage.items():
        if not allow_borrowing and borrowing(pre.node, fr, v):
            return False
        if v > available(pre.node, fr):
            return False
    return True


def _would_break_guarantee(state, c: Candidate) -> bool:
    node = state.quota_node(c.cluster_queue)
    return node is not None and any(node.usage.get(fr, 0) - v < node.subtree.get(fr, 0)
                                    for fr, v in c.usage.items())


def _minimal(state, pre: Preemptor, candidates: list[Candidate], needs: set[FR],
             allow_borrowing: bool) -> list[Target] | None:
    """Kueue's classicalPreemptions run: take the candidates still valid in order until the quota fits,
    then give back (walking backwards) every one it still fits without."""
    rm = _Removals(state)
    targets: list[Target] = []
    try:
        fits = False
        for c in candidates:
            if not _valid(state, pre, c, needs, allow_borrowing):
                continue            # e.g. its queue no longer borrows once earlier targets are gone
            rm.remove(c)
            targets.append(Target(c, _reason(pre, c)))
            if quota_fits(pre, allow_borrowing):
                fits = True
                break
        return _given_back(rm, pre, targets, allow_borrowing) if fits else None
    finally:
        rm.undo()


def _valid(state, pre: Preemptor, c: Candidate, needs: set[FR], borrow: bool) -> bool:
    """Kueue's candidateIsValid, checked as targets are taken: another queue's candidate only while its
    queue (and every Cohort over it below the level it was reached at) still uses more than its quota; one
    reclaimable only without borrowing not in a run that lets the preemptor borrow; and, with
    guaranteeProtection, never one that would take its queue below its nominal quota (YuniKorn's law 2)."""
    if not c.cluster_queue or c.cluster_queue == pre.cq.name:
        return True
    if borrow and c.variant == RECLAIM_WITHOUT_BORROWING:
        return False
    node = state.quota_node(c.cluster_queue)
    if node is None or not borrows_up_to(node, c.lca, needs):
        return False
    return not (state.config.guarantee_protection and _would_break_guarantee(state, c))


def _given_back(rm: _Removals, pre: Preemptor, targets: list[Target], allow_borrowing: bool) -> list[Target]:
    """Minimise (seed 000: "反向遍历初始目标列表"): walking the targets backwards, give back each one
    the preemptor still fits without."""
    for i in range(len(targets) - 2, -1, -1):
        rm.restore(targets[i].candidate)
        if quota_fits(pre, allow_borrowing):
            del targets[i]
        else:
            rm.remove(targets[i].candidate)
    return targets


def _under_nominal(pre: Preemptor, needs: set[FR]) -> bool:
    return all(pre.node.usage.get(fr, 0) < pre.node.subtree.get(fr, 0) for fr in needs)


def classic_targets(state, pre: Preemptor, candidates: list[Candidate], needs: set[FR]) -> list[Target] | None:
    """Kueue's classicalPreemptions (seed 000 目标 1-4, over hierarchical cohorts): one or two runs over the
    candidates, with and without letting the preemptor borrow. Only the own queue's candidates, or classic
    reclaim while the queue is at its nominal quota already: a run with borrowing, where other queues'
    pods go only under the hierarchical advantage. No such advantage over any of them: first without
    borrowing (taking from every borrowing queue), then with. Otherwise (borrowWithinCohort, or the
    advantage) first with borrowing, then without."""
    others = [c for c in candidates if c.cluster_queue != pre.cq.name]
    forbidden = pre.cq.preemption.borrow_within_cohort == "Never"
    if not others or (forbidden and not _under_nominal(pre, needs)):
        runs = (True,)
    elif forbidden and not any(c.variant == HIERARCHICAL_RECLAIM for c in others):
        runs = (False, True)
    else:
        runs = (True, False)
    for borrow in runs:
        targets = _minimal(state, pre, candidates, needs, borrow)
        if targets:
            return targets
    return None


def _share(state, node: QuotaNode, extra=None) -> int:
    spec = state.cohorts.get(node.name) if node.is_cohort else state.cluster_queues.get(node.name)
    return dominant_resource_share(node, spec.fair_weight if spec else 1.0, extra)[0]


def _compared(a: QuotaNode, b: QuotaNode) -> tuple[QuotaNode, QuotaNode]:
    """The ancestors of a and b just below their lowest common cohort: hierarchical fair sharing
    compares shares level by level, so two teams are compared as their sub-cohorts."""
    chain = []
    node = a
    while node is not None:
        chain.append(node)
        node = node.parent
    on_a = set(map(id, chain))
    below_b = b
    while below_b.parent is not None and id(below_b.parent) not in on_a:
        below_b = below_b.parent
    common = below_b.parent
    below_a = a
    while below_a.parent is not None and below_a.parent is not common:
        below_a = below_a.parent
    return below_a, below_b


def fair_targets(state, pre: Preemptor, candidates: list[Candidate], needs: set[FR]) -> list[Target] | None:
    """Kueue's FindFairPreemptionTargets (seed 000 算法概述): while the pod does not fit, take from the
    ClusterQueue with the highest share a workload the first strategy allows; then try the next
    strategy on what was passed over; then minimise backwards."""
    rm = _Removals(state)
    targets: list[Target] = []
    strategies = state.config.preemption_strategies
    by_queue: dict[str, list[Candidate]] = {}
    for c in candidates:
        by_queue.setdefault(c.cluster_queue, []).append(c)

    def sides(name: str) -> tuple[QuotaNode, QuotaNode]:
        return _compared(pre.node, state.quota_node(name))

    def preemptor_share(mine: QuotaNode) -> int:
        return _share(state, mine, pre.usage)     # the preemptor's side, with the pod admitted

    try:
        fits, passed_over = False, []
        heap = [(-_share(state, sides(n)[1]), n) for n in by_queue]
        heapq.heapify(heap)
        while heap and not fits:
            _, name = heapq.heappop(heap)
            queue = by_queue[name]
            if name == pre.cq.name:                       # the preemptor's own queue: priority alone
                c = queue.pop(0)
                rm.remove(c)
                targets.append(Target(c, IN_CLUSTER_QUEUE))
                fits = quota_fits(pre, True)
                if queue:
                    heapq.heappush(heap, (-_share(state, pre.node), name))
                continue
            mine, theirs = sides(name)
            # Both stay as they are while this queue's candidates are tried: mine and theirs are
            # separate branches, a share's denominator (lendable) ignores usage, and a rejected
            # candidate is restored exactly.
            my_share, old_share = preemptor_share(mine), _share(state, theirs)
            for i, c in enumerate(queue):
                if state.config.guarantee_protection and _would_break_guarantee(state, c):
                    continue            # YuniKorn's law 2, as in the classic path
                rm.remove(c)
                if _strategy(strategies[0], my_share, old_share, _share(state, theirs)):
                    targets.append(Target(c, IN_COHORT_FAIR_SHARING))
                    del queue[: i + 1]
                    fits = quota_fits(pre, True)
                    if queue and _is_borrowing(state.quota_node(name), needs):
                        heapq.heappush(heap, (-_share(state, theirs), name))
                    break
                rm.restore(c)
                passed_over.append(c)
        if not fits and len(strategies) > 1:
            for name in sorted({c.cluster_queue for c in passed_over}, key=lambda n: -_share(state, sides(n)[1])):
                mine, theirs = sides(name)
                left = [c for c in passed_over if c.cluster_queue == name and c not in rm.done]
                if left and _strategy(strategies[1], preemptor_share(mine), _share(state, theirs), 0):
                    rm.remove(left[0])
                    targets.append(Target(left[0], IN_COHORT_FAIR_SHARING))
                    fits = quota_fits(pre, True)
                if fits:
                    break
        return _given_back(rm, pre, targets, True) if fits else None
    finally:
        rm.undo()


def _strategy(name: str, preemptor_new: int, target_old: int, target_new: int) -> bool:
    """Kueue's preemptionStrategies (seed 000 抢占策略)."""
    if name == "LessThanOrEqualToFinalShare":
        return preemptor_new <= target_new
    return preemptor_new < target_old


def quota_targets(state, pre: Preemptor, candidates: list[Candidate]) -> list[Target] | None:
    """The pods whose removal lets the preemptor's quota fit ([] when it fits already; None: never)."""
    needs = pre.needs
    if not needs:
        return []
    policy = pre.cq.preemption
    can_borrow = policy.borrow_within_cohort != "Never" or state.config.fair_sharing
    if not can_borrow and any(pre.usage[fr] > pre.node.subtree.get(fr, 0)
                              and not may_reclaim_in_hierarchy(pre.node, fr, pre.usage[fr]) for fr in needs):
        return None        # classic preemption needs the request within nominal quota (seed 000), or
        #                    within a Cohort of its own below the root (Kueue's mayReclaimInHierarchy)
    usable = [c for c in candidates if any(fr in c.usage for fr in needs)] if len(needs) < len(pre.usage) \
        else candidates
    if state.config.fair_sharing:
        return fair_targets(state, pre, usable, needs)
    return classic_targets(state, pre, usable, needs)


# ---- node by node ---------------------------------------------------------------------

def _add(into: dict[str, int], requests: dict[str, int], sign: int = 1) -> None:
    for r, v in requests.items():
        into[r] = into.get(r, 0) + sign * v


def _reason(pre: Preemptor, c: Candidate) -> str:
    """Kueue's PreemptionReason of the candidate's variant."""
    if not c.cluster_queue:
        return LOWER_PRIORITY_ON_NODE
    if c.cluster_queue == pre.cq.name:
        return IN_CLUSTER_QUEUE
    return IN_COHORT_RECLAIM_WHILE_BORROWING if c.variant == RECLAIM_WHILE_BORROWING else IN_COHORT_RECLAMATION


def _unqueued_on(state, pre: Preemptor, node: str, spent: set[str] = frozenset()) -> list[Candidate]:
    """Pods in no queue, of lower priority, on the node: they hold no quota, only room."""
    out, going = [], state.victims() if state.holds else ()
    for uid in state.node_pods.get(node, ()):
        other = state.pods.get(uid)
        if other is None or other.queue_name or other.deleting or uid in state.admitted or uid in going:
            continue
        if (other.priority or 0) < (pre.pod.priority or 0) and not _same_group(pre.pod, other):
            out.append(Candidate(other, "", {}, other.observed_admission()[0],
                                 opted_out(state, other) or uid in spent))
    newest_first(out, lambda c: c.pod.priority or 0)
    return out


def node_plans(state, pre: Preemptor, candidates: list[Candidate], quota: list[Target],
               nodes: list[str], room, every: bool = False,
               spent: set[str] | None = None) -> tuple[list[Plan], dict[str, str]]:
    """Each node's victim group: the quota targets plus the fewest candidates on the node that make
    the pod fit there. room(node) is the node's free resources as Quotient counts them. Unless
    every, the first node where the quota targets alone leave room is the only plan needed.
    spent is spent_budgets(state), when the caller has it already."""
    req = pre.pod.requests
    freed: dict[str, dict[str, int]] = {}
    for t in quota:
        for m in t.candidate.pods():
            _add(freed.setdefault(m.node_name, {}), m.requests)
    lost: dict[str, str] = {}
    plans = []
    # 1. Where the quota targets alone leave room, the pod needs no one else (their nodes first).
    misfit: dict[str, str] = {}

    def cannot_run(name: str) -> bool:
        """The pod's taints, selector or affinity rule the node out, whatever is evicted."""
        if name not in misfit:
            misfit[name] = static_misfit(pre.pod, state.nodes[name])
        if misfit[name]:
            lost[name] = misfit[name]
        return bool(misfit[name])

    for name in sorted(nodes, key=lambda n: (n not in freed, n)):
        if cannot_run(name):
            continue
        free = room(name)
        _add(free, freed.get(name, {}))
        if not shortfall(req, free) and quota:
            plans.append(Plan(name, list(quota)))
            if not every:
                return plans, lost
    done = {p.node for p in plans}
    # 2. Otherwise each node adds its own candidates, in candidate order, until the pod fits.
    quota_ids = {id(t.candidate) for t in quota}
    on_node: dict[str, list[Candidate]] = {}
    for c in candidates:
        if id(c) not in quota_ids:
            for node_name in dict.fromkeys(m.node_name for m in c.pods()):
                on_node.setdefault(node_name, []).append(c)
    rank = len(candidates)
    if spent is None:
        spent = spent_budgets(state)
    for name in nodes:
        if name in done or cannot_run(name):
            continue
        local = on_node.get(name, []) + _unqueued_on(state, pre, name, spent)
        for c in local[len(on_node.get(name, [])):]:
            c.rank, rank = rank, rank + 1
        free = room(name)
        _add(free, freed.get(name, {}))
        extras = []
        rm = _Removals(state)
        try:
            for t in quota:
                rm.remove(t.candidate)
            for c in local:
                if not shortfall(req, free):
                    break
                if not _still_a_candidate(state, pre, c, pre.relevant):
                    continue
                extras.append(c)
                rm.remove(c)
                _add(free, c.requests_on(name))
        finally:
            rm.undo()
        if shortfall(req, free):
            lost[name] = (f"{shortfall(req, free).lower()} even without its {len(local)} candidate(s)"
                          if local else f"{shortfall(req, free).lower()} and no pod on it may be preempted")
            continue
        if not extras:
            continue            # fits already: kube-scheduler needs no preemption here
        for i in range(len(extras) - 2, -1, -1):     # give back what the pod fits without
            _add(free, extras[i].requests_on(name), -1)
            if shortfall(req, free):
                _add(free, extras[i].requests_on(name))
            else:
                del extras[i]
        targets = _drop_quota_targets_now_unneeded(state, pre, quota, extras, name, free)
        plans.append(Plan(name, targets + [Target(c, _reason(pre, c)) for c in extras]))
    return plans, lost


def _still_a_candidate(state, pre: Preemptor, c: Candidate, needs: set[FR]) -> bool:
    """Whether c may still go once the victims virtually removed so far are gone: a pod of another queue
    only while that queue borrows (seed 000 候选者) and, in classic preemption, only as Kueue's candidate
    iterator lets it go given whether the preemptor would then borrow (_valid)."""
    if state.config.fair_sharing:
        if not c.cluster_queue or c.cluster_queue == pre.cq.name:
            return True
        node = state.quota_node(c.cluster_queue)
        return node is not None and _is_borrowing(node, needs) and not (
            state.config.guarantee_protection and _would_break_guarantee(state, c))
    return _valid(state, pre, c, needs, _borrows_after(pre))


def _borrows_after(pre: Preemptor) -> bool:
    """Whether the preemptor's ClusterQueue would be above its nominal quota once the pod is admitted."""
    return any(borrowing(pre.node, fr, v) for fr, v in pre.usage.items())


def _drop_quota_targets_now_unneeded(state, pre, quota, extras, node: str, free) -> list[Target]:
    """The extras taken for room free quota too: give back quota targets the pod fits without."""
    if not quota:
        return []
    rm = _Removals(state)
    try:
        for c in extras:
            rm.remove(c)
        kept = list(quota)
        for t in kept:
            rm.remove(t.candidate)
        for i in range(len(kept) - 1, -1, -1):
            c = kept[i].candidate
            rm.restore(c)
            here = c.requests_on(node)
            _add(free, here, -1)
            if quota_fits(pre, True) and not shortfall(pre.pod.requests, free):
                del kept[i]
            else:
                rm.remove(c)
                _add(free, here)
        return kept
    finally:
        rm.undo()


def spent_budgets(state) -> set[str]:
    """UIDs of pods whose PodDisruptionBudget allows no more disruptions (taken only as a last resort)."""
    from .selectors import decode_selector

    spent: set[str] = set()
    for pdb in state.extra.get("PodDisruptionBudget", {}).values():
        meta, spec = pdb.get("metadata") or {}, pdb.get("spec") or {}
        try:
            selector = decode_selector(spec.get("selector"))
        except ValueError:
            continue
        ns = meta.get("namespace") or "default"
        covered = [p for p in state.pods.values() if p.namespace == ns and p.node_name and not p.terminal
                   and selector.matches(p.labels)]
        healthy = sum(1 for p in covered if p.ready or p.phase == "Running")
        allowed = _allowed(spec, len(covered), healthy)
        if allowed <= 0:
            spent.update(p.uid for p in covered)
    return spent


def _allowed(spec: dict, expected: int, healthy: int) -> int:
    def amount(value, total: int) -> int:
        if isinstance(value, str) and value.endswith("%"):
            return -(-int(value[:-1]) * total // 100)
        return int(value)
    try:
        if spec.get("minAvailable") is not None:
            return healthy - amount(spec["minAvailable"], expected)
        if spec.get("maxUnavailable") is not None:
            return amount(spec["maxUnavailable"], expected) - (expected - healthy)
    except (TypeError, ValueError):
        return 1
    return 1


# ---- the decision -------------------------------------------------------------------------

def may_preempt(state, pod: PodInfo, cq: ClusterQueue | None, now: float) -> str:
    """Why this pod may not trigger preemption now ("" when it may)."""
    mode = state.config.preemption_mode
    if mode == "None":
        return "preemption is off (preemption.mode None)"
    if cq is None:
        return "" if mode in ("Auto", "Priority") else "pods in no queue may not preempt (preemption.mode Quota)"
    if mode == "Priority":
        return "preemption.mode Priority leaves preemption to kube-scheduler's priorities"
    if pod.preemption_policy == "Never":
        return "the pod's preemptionPolicy is Never"
    left = delay_left(cq, pod, now)
    if left > 0:
        return (f"preemption delay: ClusterQueue {cq.name} lets a pod preempt {_delay(cq):g}s after it was "
                f"created, {left:g}s from now (capacity freed meanwhile is used first)")
    return ""


def _delay(cq: ClusterQueue) -> float:
    """YuniKorn's preemption delay on the ClusterQueue, 0 without one."""
    delay = cq.annotations.get(DELAY)
    if not delay:
        return 0.0
    from ..objects.meta import parse_duration
    try:
        return parse_duration(delay, DELAY)
    except ValueError:
        return 30.0         # seed 002 抢占配置: "如果字符串解析失败,一样使用 30s"


def delay_left(cq: ClusterQueue, pod: PodInfo, now: float) -> float:
    """Seconds until pod may preempt under its ClusterQueue's preemption delay (0 or less: it may)."""
    wait = _delay(cq)
    return wait - (now - (pod.created or now)) if wait else 0.0


def _no_candidate(state, cq: ClusterQueue) -> str:
    """Why nothing may go, naming the preemption fence when one bounds the search."""
    why = "no candidate: no running pod may be preempted under this ClusterQueue's policies"
    fence = fence_root(state, cq)
    if fence is not None:
        kind = "Cohort" if fence.is_cohort else "ClusterQueue"
        why += f" inside the preemption fence on {kind} {fence.name} ({FENCE})"
    return why


@contextmanager
def collector_held():
    """The collector held off over a candidate search: one over 50,000 pods builds thousands of short-lived
    objects that reference counting frees, and a full collection in the middle of it would cost more than
    the search."""
    enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if enabled:
            gc.enable()


def plans(state, pod: PodInfo, cq: ClusterQueue, assignment: Assignment, nodes: list[str], room,
          every: bool = False, local: bool = False, spent: set[str] | None = None) -> tuple[list[Plan], str]:
    """See _plans, with the collector held off."""
    with collector_held():
        return _plans(state, pod, cq, assignment, nodes, room, every, local,
                      spent_budgets(state) if spent is None else spent)


def _plans(state, pod: PodInfo, cq: ClusterQueue, assignment: Assignment, nodes: list[str], room,
           every: bool, local: bool, spent: set[str]) -> tuple[list[Plan], str]:
    """Victim groups that let pod run, best first (one unless every); ([], why) when there is none.

    With local, every victim of a node's group runs on that node, quota targets included, as
    kube-scheduler requires of a preempt answer (and YuniKorn's design: "被抢占的受害者们必须运行在同一节点上")."""
    pre = Preemptor(pod, cq, state.quota_node(cq.name), assignment.usage, set(assignment.flavors.values()))
    everyone = searched_before(state, assignment, pre, spent)
    if everyone is None:
        everyone = find_candidates(state, pre, pre.relevant, spent)
    nodes = [n for n in nodes if n in state.nodes]
    why = _no_candidate(state, cq)
    any_last_resort = any(c.last_resort for c in everyone)
    for last_resort in (False, True):
        if last_resort and not any_last_resort:
            break
        candidates = order([c for c in everyone if not c.last_resort], cq.name) if any_last_resort and \
            not last_resort else order(everyone, cq.name) if any_last_resort else everyone
        if not last_resort and not candidates and everyone:
            continue
        if local:
            found, lost = _local_plans(state, pre, candidates, nodes, room, spent)
        else:
            quota = quota_targets(state, pre, candidates)
            if quota is None:
                if candidates:
                    why = f"no set of the {len(candidates)} candidate(s) frees enough quota in ClusterQueue {cq.name}"
                continue
            found, lost = node_plans(state, pre, candidates, quota, nodes, room, every, spent)
        if found:
            found.sort(key=Plan.key)
            found[0].others = {p.node: f"{len(p.targets)} victim(s), a worse choice" for p in found[1:]}
            found[0].others.update(lost)
            return found, ""
        why = (f"quota could be freed, but on none of the {len(nodes)} node(s) of flavor(s) "
               f"{', '.join(sorted(pre.flavors))} would the pod then fit")
        if local:
            why = f"on none of the {len(nodes)} node(s) do the pods that may be preempted make room and quota"
    return [], why


def _local_plans(state, pre: Preemptor, candidates: list[Candidate], nodes: list[str],
                 room, spent: set[str]) -> tuple[list[Plan], dict[str, str]]:
    """Per node, victims from that node only: its own candidates for quota, then for room."""
    by_node: dict[str, list[Candidate]] = {}
    for c in candidates:
        if len({m.node_name for m in c.pods()}) == 1:      # kube-scheduler evicts on one node only
            by_node.setdefault(c.pod.node_name, []).append(c)
    found: list[Plan] = []
    lost: dict[str, str] = {}
    for name in nodes:
        here = by_node.get(name, [])
        quota = quota_targets(state, pre, here)
        if quota is None:
            lost[name] = f"its {len(here)} pod(s) that may be preempted do not free enough quota"
            continue
        plans_here, lost_here = node_plans(state, pre, here, quota, [name], room, every=True, spent=spent)
        found += plans_here
        lost.update(lost_here)
    return found, lost


# ---- gangs --------------------------------------------------------------------------------

def gang_plan(state, unit: PodInfo, members: list[PodInfo], cq: ClusterQueue, assignment: Assignment,
              nodes: list[str], room, allowed=None) -> tuple[list[Target], dict[str, str], str]:
    """The ACK seed's gang preemption: one preemption list for all pending members; victims (whole
    running groups counted whole) until the quota fits and every member has a node at once, then
    given back while that still holds. ([], {}, why) when no such set exists: nothing is evicted."""
    from .gangs import place

    pre = Preemptor(unit, cq, state.quota_node(cq.name), assignment.usage, set(assignment.flavors.values()))
    everyone = find_candidates(state, pre, pre.relevant, spent_budgets(state))
    why = _no_candidate(state, cq)

    def placement(taken: list[Target]) -> dict[str, str] | None:
        freed: dict[str, dict[str, int]] = {}
        for t in taken:
            for m in t.candidate.pods():
                _add(freed.setdefault(m.node_name, {}), m.requests)

        def room_after(n: str) -> dict[str, int]:
            free = room(n)
            _add(free, freed.get(n, {}))
            return free
        return place(members, nodes, room_after, allowed)

    for last_resort in (False, True):
        if last_resort and not any(c.last_resort for c in everyone):
            break
        candidates = order([c for c in everyone if last_resort or not c.last_resort], cq.name)
        quota = quota_targets(state, pre, candidates)
        if quota is None:
            why = f"no set of the {len(candidates)} candidate(s) frees enough quota for the whole group"
            continue
        taken, placed = list(quota), placement(quota)
        rm = _Removals(state)
        try:
            for t in taken:
                rm.remove(t.candidate)
            in_quota = {id(t.candidate) for t in quota}
            for c in candidates[:MAX_GANG_EXTRAS]:
                if placed is not None:
                    break
                if id(c) in in_quota or not _still_a_candidate(state, pre, c, pre.relevant):
                    continue
                taken.append(Target(c, _reason(pre, c)))
                rm.remove(c)
                placed = placement(taken)
        finally:
            rm.undo()
        if placed is None:
            why = (f"even with every allowed victim gone, the {len(members)} members cannot all be placed at once "
                   f"on the {len(nodes)} node(s) of flavor(s) {', '.join(sorted(pre.flavors))}")
            continue
        for i in range(len(taken) - 1, len(quota) - 1, -1):      # give back room-only victims not needed
            trial = taken[:i] + taken[i + 1:]
            again = placement(trial)
            if again is not None:
                taken, placed = trial, again
        return taken, placed, ""
    return [], {}, why


MAX_GANG_EXTRAS = 500     # victims tried for room before a gang is declared unplaceable


# ---- the flavor assigner's oracle -------------------------------------------------------------

def oracle(state, pod: PodInfo, cq: ClusterQueue):
    """Kueue's PreemptionOracle.SimulatePreemption, for the flavor assigner: what the quota half of
    preemption would find for pod in one flavor. The callable answers (possibility, borrowing):
    NoCandidates (no target set frees the quota, or this pod may not preempt at all), Preempt (some
    target is in the pod's own ClusterQueue) or Reclaim (all are taken back from the cohort), and
    whether the pod would borrow once those targets are gone. It leaves the state as it found it."""
    barred = state.config.preemption_mode in ("None", "Priority") or pod.preemption_policy == "Never"

    def simulate(flavor: str, usage: dict[FR, int]) -> tuple[str, bool]:
        pre = Preemptor(pod, cq, state.quota_node(cq.name), usage, {flavor})
        in_cohort = pre.node.parent is not None          # without a cohort there is nothing to borrow
        candidates = []
        if not barred:
            with collector_held():
                candidates = find_candidates(state, pre, pre.relevant, set())
            simulate.searched[_search_key(pre)] = (state.generation, candidates)
        targets = quota_targets(state, pre, candidates) if candidates else None
        if not targets:
            return NO_CANDIDATES, in_cohort and _borrows_after(pre)
        rm = _Removals(state)
        try:
            for t in targets:
                rm.remove(t.candidate)
            borrows = in_cohort and _borrows_after(pre)
        finally:
            rm.undo()
        return (PREEMPT if any(t.candidate.cluster_queue == cq.name for t in targets) else RECLAIM), borrows
    simulate.searched = {}        # the candidate searches it made, for plans to reuse (searched_before)
    return simulate


def _search_key(pre: Preemptor) -> tuple:
    return pre.pod.uid, pre.cq.name, frozenset(pre.usage.items()), frozenset(pre.relevant)


def searched_before(state, assignment: Assignment, pre: Preemptor, spent: set[str]) -> list[Candidate] | None:
    """The candidates the flavor assigner's oracle found for this very preemptor and usage, in this very state
    (the same decision, a moment before): the search over every running pod is made once, not twice. The
    oracle does not look at PodDisruptionBudgets, as Kueue's; a candidate whose budget is spent is marked
    last resort here, as find_candidates would. None when there is nothing to reuse."""
    found = assignment.searched.get(_search_key(pre))
    if found is None or found[0] != state.generation:
        return None
    return [c if c.last_resort or not any(m.uid in spent for m in c.pods()) else replace(c, last_resort=True)
            for c in found[1]]
