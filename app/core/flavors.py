"""Flavor assignment, as Kueue's flavorassigner does it.

For each resource group the pod needs, flavors are tried in the ClusterQueue's
order; every resource of a group gets the same flavor. A flavor is skipped when
the pod does not tolerate its nodeTaints, when the pod's nodeSelector contradicts
its nodeLabels, or when no node of it is on offer. flavorFungibility decides
whether to stop at a flavor that needs borrowing (whenCanBorrow) or preemption
(whenCanPreempt), or to look further.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable

from ..objects.kueue import ClusterQueue, ResourceFlavor
from .quantity import format_quantity
from .quota import FR, QuotaNode, available, borrowing, potential_available
from .selectors import untolerated_taint

FIT, PREEMPT, NOFIT = "Fit", "Preempt", "NoFit"
_RANK = {FIT: 0, PREEMPT: 1, NOFIT: 2}


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

    def flavor_names(self) -> list[str]:
        return sorted(set(self.flavors.values()))


@dataclass(slots=True)
class Charge:
    """Quota a pod holds in a ClusterQueue: flavors chosen and amounts per (flavor, resource)."""
    cluster_queue: str
    flavors: dict[str, str]
    usage: dict[FR, int]
    inferred: bool = False   # read off the node's labels, not decided by Quotient
    admitted_at: float = 0.0  # when the quota was taken (Kueue's quota reservation time)


def quota_usage(requests: dict[str, int], flavors: dict[str, str]) -> dict[FR, int]:
    """What a pod charges: each assigned resource's request under its flavor."""
    return {(flavors[r], r): v for r, v in requests.items() if r in flavors}


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
) -> Assignment:
    """Choose a flavor per resource group for a pod's requests (already filtered to covered resources)."""
    result = Assignment()
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
        chosen = _assign_group(needs, cq, gi, node, flavors, tolerations, node_selector, has_nodes, result)
        if chosen is None:
            result.mode = NOFIT
            result.unresolvable = result.unresolvable or not _could_ever_fit(needs, cq, gi, node, flavors,
                                                                             tolerations, node_selector)
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


def _flavor_usable(flavor_name: str, flavors: dict[str, ResourceFlavor], tolerations: list,
                   node_selector: dict[str, str]) -> str:
    """Why a flavor cannot take this pod at all ("" when it can)."""
    flavor = flavors.get(flavor_name)
    if flavor is None:
        return f"flavor {flavor_name} does not exist"
    taint = untolerated_taint(list(tolerations) + flavor.tolerations, flavor.node_taints)
    if taint is not None:
        return (f"flavor {flavor_name}: untolerated taint {taint.get('key')}="
                f"{taint.get('value', '')}:{taint.get('effect')}")
    return _selector_conflict(flavor, node_selector)


def _assign_group(needs, cq, gi, node, flavors, tolerations, node_selector, has_nodes, result):
    """Return (flavor, mode, borrowing) for one resource group, or None."""
    best, reasons = None, result.reasons
    for fq in cq.resource_groups[gi].flavors:
        why = _flavor_usable(fq.name, flavors, tolerations, node_selector)
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
        if not _try_next_flavor(mode, borrow, cq):
            return fq.name, mode, borrow
        if mode == FIT:
            reasons.append(f"flavor {fq.name}: fits only by borrowing; whenCanBorrow TryNextFlavor looks further")
        if best is None or (_RANK[mode], borrow) < (_RANK[best[1]], best[2]):
            best = (fq.name, mode, borrow)
    return best


def _try_next_flavor(mode: str, borrow: bool, cq: ClusterQueue) -> bool:
    """Kueue's shouldTryNextFlavor: stop at a flavor flavorFungibility says is good enough."""
    if mode == PREEMPT and cq.when_can_preempt == "Preempt" and (not borrow or cq.when_can_borrow == "Borrow"):
        return False
    if mode == FIT:
        return borrow and cq.when_can_borrow == "TryNextFlavor"
    return True


def _could_ever_fit(needs, cq, gi, node, flavors, tolerations, node_selector) -> bool:
    """True when some usable flavor could hold the request once other usage is gone."""
    for fq in cq.resource_groups[gi].flavors:
        if _flavor_usable(fq.name, flavors, tolerations, node_selector):
            continue
        if all(need <= potential_available(node, (fq.name, r)) for r, need in needs.items()):
            return True
    return False
