"""Flavor assignment, as Kueue's flavorassigner does it.

For each resource group the pod needs, flavors are tried in the ClusterQueue's
order; every resource of a group gets the same flavor. A flavor is skipped when
the pod does not tolerate its nodeTaints, when the pod's nodeSelector contradicts
its nodeLabels, or when no node of it is on offer. flavorFungibility decides
whether to stop at a flavor that needs borrowing (whenCanBorrow) or preemption
(whenCanPreempt), or to look further, and (preference) which of the flavors
tried wins when none was good enough to stop at. A flavor that needs preemption
is stopped at only if a preemption oracle, passed in by the caller, says
preemption there would find candidates: one without any is passed over, as
Kueue's shouldTryNextFlavor does with NoCandidates.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from functools import partial
from typing import Callable

from ..objects.kueue import PREEMPTION_OVER_BORROWING, TRY_NEXT_FLAVOR, ClusterQueue, ResourceFlavor
from ..objects.quantity import format_quantity
from .resource_node import FR, QuotaNode, available, borrowing, potential_available
from ..objects.selectors import untolerated_taint

FIT, PREEMPT, NOFIT = "Fit", "Preempt", "NoFit"
_RANK = {FIT: 0, PREEMPT: 1, NOFIT: 2}

# What a preemption oracle answers for a flavor that needs preemption, called as oracle(flavor, usage in
# it): Kueue's PreemptionPossibility (no target set frees the quota, some target is in the pod's own
# ClusterQueue, or all are reclaimed from other ClusterQueues of the cohort), and whether the pod would
# still borrow once the targets are gone.
NO_CANDIDATES, RECLAIM = "NoCandidates", "Reclaim"
Oracle = Callable[[str, dict], tuple[str, bool]]
_PREEMPTION_RANK = {NO_CANDIDATES: 1, PREEMPT: 2, RECLAIM: 3, FIT: 4}     # Kueue's preemptionMode order


@dataclass(slots=True)
class Assignment:
    """The flavor chosen for each resource, the quota it charges, and why."""
    mode: str = FIT
    borrowing: bool = False
    flavors: dict[str, str] = field(default_factory=dict)     # resource -> flavor
    usage: dict[FR, int] = field(default_factory=dict)        # (flavor, resource) -> amount
    reasons: list[str] = field(default_factory=list)          # why flavors were passed over
    unresolvable: bool = False                                 # no preemption could ever help
    no_nodes: bool = False                                     # a flavor fit but none of its nodes was offered
    searched: object = field(default=None, compare=False, repr=False)   # preemption.oracle.CandidateSearches


@dataclass(slots=True)
class Charge:
    """Quota a pod holds in a ClusterQueue: flavors chosen and amounts per (flavor, resource)."""
    cluster_queue: str
    flavors: dict[str, str]
    usage: dict[FR, int]
    inferred: bool = False   # read off the node's labels, not decided by Quotient
    admitted_at: float = 0.0  # when the quota was taken (Kueue's quota reservation time), whole seconds
    admitted_from: str = ""   # what admitted_at was read from: "bind" (Quotient's own), PodScheduled, startTime, ...


def quota_usage(requests: dict[str, int], flavors: dict[str, str]) -> dict[FR, int]:
    """What a pod charges: each assigned resource's request under its flavor."""
    return {(flavors[r], r): v for r, v in requests.items() if r in flavors}


def running_flavors(cq: ClusterQueue, requests: dict[str, int], node: str | None,
                    node_in_flavor: Callable[[str, str], bool]) -> dict[str, str]:
    """The flavors of a pod Quotient did not admit, found running on node (None: unknown node): per resource
    group it uses, the first flavor whose nodes include node, else the group's first flavor."""
    chosen: dict[str, str] = {}
    for group in cq.resource_groups:
        if not any(r in requests for r in group.covered):
            continue
        pick = group.flavors[0].name
        for fq in group.flavors:
            if node is not None and node_in_flavor(node, fq.name):
                pick = fq.name
                break
        for r in group.covered:
            if r in requests:
                chosen[r] = pick
    return chosen


def _shortfall(cq: ClusterQueue, node: QuotaNode, fr: FR, need: int) -> str:
    flavor, resource = fr
    fmt = lambda v: format_quantity(v, resource)  # noqa: E731
    q = node.quotas.get(fr)
    parts = [f"{cq.name} uses {fmt(node.usage.get(fr, 0))} of its nominal {fmt(node.subtree.get(fr, 0))}"]
    if q is not None and q.borrowing_limit is not None:
        parts.append(f"borrowing limit {fmt(q.borrowing_limit)}")
    if node.parent is None:
        parts.append("no cohort to borrow from")
    else:
        parts.append(f"cohort {cq.cohort} has {fmt(available(node.parent, fr))} unused")
    return (f"ClusterQueue {cq.name} flavor {flavor}: {resource} request {fmt(need)} > "
            f"{fmt(max(0, available(node, fr)))} available ({'; '.join(parts)})")


def _never_fits(cq: ClusterQueue, node: QuotaNode, fr: FR, need: int) -> str:
    flavor, resource = fr
    fmt = lambda v: format_quantity(v, resource)  # noqa: E731
    q = node.quotas.get(fr)
    nominal = q.nominal if q else 0
    if not cq.cohort:
        bound = f"nominal {fmt(nominal)} (no cohort to borrow from)"
    elif q is not None and q.borrowing_limit is not None:
        bound = f"nominal {fmt(nominal)} + borrowing limit {fmt(q.borrowing_limit)}"
    else:
        bound = f"nominal {fmt(nominal)} + what cohort {cq.cohort} can lend"
    return (f"ClusterQueue {cq.name} flavor {flavor}: {resource} request {fmt(need)} > "
            f"{fmt(potential_available(node, fr))} at most ({bound})")


def _selector_conflict(flavor: ResourceFlavor, node_selector: dict[str, str]) -> str:
    for key, value in flavor.node_labels.items():
        if key in node_selector and node_selector[key] != value:
            return f"pod nodeSelector {key}={node_selector[key]} contradicts flavor {flavor.name} ({key}={value})"
    return ""


def assign_flavors(
    requests: dict[str, int],
    cq: ClusterQueue,
    node: QuotaNode,
    flavors: dict[str, ResourceFlavor],
    tolerations: list,
    node_selector: dict[str, str],
    has_nodes: Callable[[str], bool] | None = None,
    oracle: Oracle | None = None,
    asks_topology: bool = False,
) -> Assignment:
    """Choose a flavor per resource group for a pod's requests (already filtered to covered resources).
    Without an oracle, preemption is assumed to find candidates in every flavor that needs it. A workload that
    asks for a topology level takes only flavors with a Topology; one that asks none, a flavor with one only when
    every flavor of the ClusterQueue has one (Kueue's checkPodSetAndFlavorMatchForTAS: implied TAS)."""
    result = Assignment()
    usable = partial(_flavor_usable, flavors, tolerations, node_selector, asks_topology, cq)
    covered = cq.covered_resources()
    by_group: dict[int, dict[str, int]] = {}
    for resource, amount in requests.items():
        if resource not in covered:
            if resource == "pods":
                continue
            result.mode, result.unresolvable = NOFIT, True
            result.reasons.append(f"ClusterQueue {cq.name} does not cover resource {resource} "
                                  f"(covered: {', '.join(sorted(covered)) or 'none'})")
            return result
        by_group.setdefault(covered[resource], {})[resource] = amount
    for gi in sorted(by_group):
        needs = by_group[gi]
        chosen = _assign_group(needs, cq, gi, node, usable, has_nodes, result, oracle)
        if chosen is None:
            result.mode = NOFIT
            result.unresolvable = result.unresolvable or not _could_ever_fit(needs, cq, gi, node, usable)
            result.flavors.clear()
            return result
        name, mode, borrow = chosen
        for resource in needs:
            result.flavors[resource] = name
        if _RANK[mode] > _RANK[result.mode]:
            result.mode = mode
        result.borrowing = result.borrowing or borrow
    result.usage = quota_usage(requests, result.flavors)
    return result


class FitMemo:
    """A walk's memory of the shapes whose pod fitted in the first flavor of each resource group it uses, without
    borrowing: a later pod of the shape, with more charged meanwhile, gets that assignment again while it still
    fits so, exactly as assign_flavors would give it (that flavor is tried first and taken at once), without
    assigning anew: a queue of thousands of alike pods costs a few lookups per pod."""

    def __init__(self, cq: ClusterQueue, quota_node: Callable[[str], QuotaNode]):
        self.cq, self.quota_node = cq, quota_node        # the ClusterQueue's node, asked for once a shape fitted
        self.node: QuotaNode | None = None
        self.fitted: dict[object, Assignment] = {}       # shape -> its first-flavor fit

    def keep(self, shape: object, a: Assignment) -> None:
        """a, just assigned to a pod of shape, is given again if it is a first-flavor fit without borrowing."""
        if a.mode != FIT or a.borrowing or not a.flavors:
            return
        covered, groups = self.cq.covered_resources(), self.cq.resource_groups
        if all(groups[covered[r]].flavors and groups[covered[r]].flavors[0].name == f for r, f in a.flavors.items()):
            self.fitted[shape] = a

    def again(self, shape: object) -> Assignment | None:
        """The shape's first-flavor fit, if each (flavor, resource) of it still fits without borrowing, judged as
        _assign_group judges it; None: assign the pod."""
        a = self.fitted.get(shape)
        if a is None:
            return None
        node = self.node
        if node is None:
            node = self.node = self.quota_node(self.cq.name)
        for fr, need in a.usage.items():
            if need > potential_available(node, fr) or need > available(node, fr) or \
                    (node.parent is not None and borrowing(node, fr, need)):
                return None
        return a


def _flavor_usable(flavors: dict[str, ResourceFlavor], tolerations: list, node_selector: dict[str, str],
                   asks_topology: bool, cq: ClusterQueue, flavor_name: str) -> str:
    """Why a flavor cannot take this pod at all ("" when it can): a taint, a selector, a topology mismatch."""
    flavor = flavors.get(flavor_name)
    if flavor is None:
        return f"flavor {flavor_name} does not exist"
    taint = untolerated_taint(list(tolerations) + flavor.tolerations, flavor.node_taints)
    if taint is not None:
        return (f"flavor {flavor_name}: untolerated taint {taint.get('key')}="
                f"{taint.get('value', '')}:{taint.get('effect')}")
    if asks_topology or flavor.topology_name:
        return _selector_conflict(flavor, node_selector) or _topology_mismatch(flavor, asks_topology, cq, flavors)
    return _selector_conflict(flavor, node_selector)


def _topology_mismatch(flavor: ResourceFlavor, asks: bool, cq: ClusterQueue,
                       flavors: dict[str, ResourceFlavor]) -> str:
    """Kueue's words for a flavor a workload's topology request does not match ("" when it does). Whether every
    flavor of the ClusterQueue has a Topology is asked only of a flavor with one, for a workload asking none."""
    if asks and not flavor.topology_name:
        return f"Flavor {flavor.name!r} does not support TopologyAwareScheduling"
    if not asks and flavor.topology_name and not all(
            flavors.get(fq.name) is not None and flavors[fq.name].topology_name
            for g in cq.resource_groups for fq in g.flavors):
        return f"Flavor {flavor.name!r} supports only TopologyAwareScheduling"
    return ""


@dataclass(slots=True)
class _Option:
    """A flavor a resource group could take: its mode, whether it borrows, and (for Preempt, asked of the
    oracle only when a decision turns on it) what preemption there would find."""
    flavor: str
    mode: str
    borrow: bool
    usage: dict[FR, int]
    asked: tuple[str, bool] | None = None

    def granular(self, oracle: Oracle | None) -> tuple[str, bool]:
        """Kueue's granularMode: (Fit, borrowing) or, needing preemption, the oracle's possibility and
        whether the pod still borrows once the targets are gone (without an oracle: candidates assumed)."""
        if self.mode == FIT:
            return FIT, self.borrow
        if self.asked is None:
            self.asked = oracle(self.flavor, self.usage) if oracle is not None else (PREEMPT, self.borrow)
        return self.asked

    def no_candidates(self) -> bool:
        return self.asked is not None and self.asked[0] == NO_CANDIDATES


def _assign_group(needs, cq, gi, node, usable, has_nodes, result, oracle):
    """Return (flavor, mode, borrowing) for one resource group, or None."""
    best, reasons = None, result.reasons
    for fq in cq.resource_groups[gi].flavors:
        why = usable(fq.name)
        if why:
            reasons.append(why)
            continue
        mode, borrow = FIT, False
        for resource, need in needs.items():
            fr = (fq.name, resource)
            if need > potential_available(node, fr):
                mode = NOFIT
                reasons.append(_never_fits(cq, node, fr, need))
                break
            borrow = borrow or (node.parent is not None and borrowing(node, fr, need))
            if need > available(node, fr):
                mode = PREEMPT
                reasons.append(_shortfall(cq, node, fr, need))
        if mode == NOFIT:
            continue
        if has_nodes is not None and not has_nodes(fq.name):
            reasons.append(f"flavor {fq.name}: none of the nodes kube-scheduler offered belongs to it "
                           "(is percentageOfNodesToScore 100?)")
            result.no_nodes = True
            continue
        option = _Option(fq.name, mode, borrow, {(fq.name, r): v for r, v in needs.items()})
        if not _try_next_flavor(option, cq, oracle):
            return fq.name, mode, borrow
        if best is None or _preferred(option, best, cq, oracle):
            best = option
        if mode == FIT:
            reasons.append(f"flavor {fq.name}: fits only by borrowing; whenCanBorrow TryNextFlavor looks further")
        elif option.no_candidates():
            reasons.append(f"flavor {fq.name}: preemption would find no candidates; the next flavor is tried")
    return None if best is None else (best.flavor, best.mode, best.borrow)


def _try_next_flavor(option: _Option, cq: ClusterQueue, oracle: Oracle | None) -> bool:
    """Kueue's shouldTryNextFlavor: stop at a flavor flavorFungibility says is good enough (whenCanPreempt:
    TryNextFlavor moves on from a flavor that needs preemption, whenCanBorrow: TryNextFlavor from one that
    borrows); a flavor that needs preemption is never good enough when preemption there would find no
    candidates."""
    if option.mode == PREEMPT and cq.when_can_preempt == TRY_NEXT_FLAVOR:
        return True
    possibility, borrow = option.granular(oracle)
    return possibility == NO_CANDIDATES or (borrow and cq.when_can_borrow == TRY_NEXT_FLAVOR)


def _preferred(a: _Option, b: _Option, cq: ClusterQueue, oracle: Oracle | None) -> bool:
    """Kueue's isPreferred: whether flavor a beats flavor b, both tried. A flavor with no preemption
    candidates ranks below every viable one; then BorrowingOverPreemption (the default) compares the
    preemption mode (fit, reclaim, preempt) before borrowing, PreemptionOverBorrowing the reverse."""
    by_borrowing = cq.fungibility_preference == PREEMPTION_OVER_BORROWING
    if not by_borrowing and a.mode != b.mode:
        return a.mode == FIT          # fitting beats preempting, with or without candidates
    mb, bb = b.granular(oracle)
    if a.mode == PREEMPT and (mb, bb) == (RECLAIM, False):
        return False                  # nothing that needs preemption beats reclaiming without borrowing
    ma, ba = a.granular(oracle)
    if (ma == NO_CANDIDATES) != (mb == NO_CANDIDATES):
        return mb == NO_CANDIDATES
    pa, pb = _PREEMPTION_RANK[ma], _PREEMPTION_RANK[mb]
    if by_borrowing and ba != bb:
        return not ba
    if pa != pb:
        return pa > pb
    return not ba and bb


def _could_ever_fit(needs, cq, gi, node, usable) -> bool:
    """True when some usable flavor could hold the request once other usage is gone."""
    for fq in cq.resource_groups[gi].flavors:
        if usable(fq.name):
            continue
        if all(need <= potential_available(node, (fq.name, r)) for r, need in needs.items()):
            return True
    return False
