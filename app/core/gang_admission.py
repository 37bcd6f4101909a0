"""Gang admission (the ACK seed, Kueue's all-or-nothing): a pod group is admitted whole, every pending
member with a node of its own held at once, preempting for the whole group if needed, or none is.

A member then passes filter only onto its held node. The group counts against quota as one workload
(core.workload.Workload); bound one by one, its members must still fit in what really runs.
"""
from __future__ import annotations

from dataclasses import dataclass
from functools import partial

from ..objects.job import MIN_PARALLELISM
from ..objects.pod import PRIORITY_CLASS_LABEL, PodInfo
from .admission import decide, may_reclaim
from .decisions import Hold, Refuse
from .flavors import Assignment, Charge, quota_usage
from .gangs import expected_size, node_masks, place
from .placement import static_misfit
from .preemption import gang_plan, may_preempt, victim_message
from .reclaim import flavor_nodes, still_running, victims_left
from .topology_placement import asks_topology, topology_ask
from .rules import (GROUP_INCOMPLETE, GROUP_PREEMPTING, GROUP_QUEUE_MISMATCH, GROUP_RESERVED, GROUP_SIZE_UNKNOWN,
                    GROUP_UNPLACEABLE, PARTIALLY_ADMITTED, TOPOLOGY_PLACEMENT_FAILED, VICTIMS_STILL_RUNNING,
                    WORKLOAD_PRIORITY_CLASS_NOT_FOUND)
from .view import ReclaimView
from .workload import KUEUE_TOTAL, Workload, WorkloadKey


@dataclass
class GroupAdmission:
    """The whole group admitted: a Hold per pending member (sharing one victims dict when it preempts)."""
    key: WorkloadKey
    cluster_queue: str
    assignment: Assignment
    holds: list[Hold]
    victims: dict[str, tuple[str, str]]
    domain: str = ""            # the topology domain its victims were chosen in ("" when it asks none)

    def node_of(self, uid: str) -> str:
        return next(h.node for h in self.holds if h.preemptor == uid)

    def answer(self, pod: PodInfo, on_offer) -> Refuse | None:
        """What filter answers the member that asked: None passes it onto its node."""
        n = len(self.holds)
        if all(h.preemptor != pod.uid for h in self.holds):
            return Refuse(PARTIALLY_ADMITTED, f"{self.key.described} admitted with {n} pod(s) by partial admission "
                          f"({MIN_PARALLELISM}); this pod runs in the place of one that finishes or fails",
                          self.cluster_queue)
        mine = self.node_of(pod.uid)
        if self.victims:
            inside = f" inside topology domain {self.domain}" if self.domain else ""
            return Refuse(GROUP_PREEMPTING, f"{self.key.described}: preempting {len(self.victims)} pod(s) so "
                          f"that all {n} members fit at once{inside}; node {mine} is held for this member",
                          self.cluster_queue)
        if mine not in on_offer:
            return Refuse(GROUP_RESERVED, f"{self.key.described} admitted; node {mine} is reserved for this member "
                          "and was not offered; waiting for it", self.cluster_queue)
        return None


def check_group(state: ReclaimView, pod: PodInfo, key: WorkloadKey, members: list[PodInfo]) -> Refuse | None:
    """A group may be admitted only once its members share one LocalQueue and their WorkloadPriorityClasses
    exist, none uses a Kueue field Quotient refuses (objects.coverage), its size is known and all of its members exist (a group that lost a member before it ran holds
    nothing: GROUP_INCOMPLETE)."""
    queues = sorted({m.queue_name for m in members})
    if len(queues) > 1:
        return Refuse(GROUP_QUEUE_MISMATCH, f"{key.described}: members name different queues "
                      f"({', '.join(queues)}); the members of a group must share one LocalQueue")
    missing = sorted({m.missing_priority_class for m in members} - {""})
    if missing:
        return Refuse(WORKLOAD_PRIORITY_CLASS_NOT_FOUND, f"{key.described}: WorkloadPriorityClass "
                      f"{', '.join(missing)} does not exist (label {PRIORITY_CLASS_LABEL} of a member); the group is "
                      "queued once it does: create it, or fix the label")
    bad = next((m for m in members if m.refused), None)
    if bad is not None:             # a Kueue field one member uses that Quotient refuses: the group is one workload
        return Refuse(bad.refused[0], f"{key.described}: member {bad.key}: {bad.refused[1]}")
    size = expected_size(state, pod)
    if size is None:
        return Refuse(GROUP_SIZE_UNKNOWN, f"{key.described}: no size; set the annotation "
                      f"{KUEUE_TOTAL} (or the PodGroup's minMember)")
    if len(members) < size:
        return Refuse(GROUP_INCOMPLETE, f"{key.described}: {len(members)} of {size} members exist; "
                      "the group waits for the rest and holds nothing")
    return None


def held_member(state: ReclaimView, key: WorkloadKey, members: list[PodInfo], held, on_offer) -> Refuse | None:
    """A member whose node is held already: it passes onto that node once the group's victims are gone
    and the group still fits in what really runs."""
    waiting = victims_left(state, held, key)
    if waiting:
        return Refuse(GROUP_PREEMPTING, waiting)
    over = group_over_quota(state, members)
    if over:        # bound one by one, the group must still fit whole in what really runs
        return Refuse(VICTIMS_STILL_RUNNING, still_running(over, key))
    if held.node not in on_offer:
        return Refuse(GROUP_RESERVED, f"{key.described}: node {held.node} is reserved for this member "
                      "and was not offered; waiting for it")
    return None


def group_over_quota(state: ReclaimView, members) -> str:
    """The quota invariant for a group's members still to bind, taken together: why their charges
    would not all fit what pods on nodes really use now, or ""."""
    total, queue = {}, ""
    for m in members:
        r = state.reservations.get(m.uid) if not m.node_name else None
        if r is not None:
            queue = r.charge.cluster_queue
            for fr, v in r.charge.usage.items():
                total[fr] = total.get(fr, 0) + v
    return state.ledger.over_quota(Charge(queue, {}, total)) if total else ""


def admit_group(state: ReclaimView, key: WorkloadKey, pending: list[PodInfo], on_offer) -> GroupAdmission | Refuse:
    """Decide for a whole pod group: quota as one workload, a node for every pending member at once
    (offered nodes first), preempting for it if needed (core.preemption.gang)."""
    workload = Workload.of_group(key, pending)
    verdict = decide(state, workload)
    whole = f"{key.described} ({len(pending)} pending members, admitted whole or not at all)"
    if not verdict.admit and not may_reclaim(verdict):
        return Refuse(verdict.rule, f"{whole}: {verdict.reason}", verdict.cluster_queue)
    a = verdict.assignment
    candidates = sorted(flavor_nodes(state, a), key=lambda n: n not in on_offer)
    allowed = node_masks(pending, [state.nodes[n] for n in candidates], static_misfit)
    rooms = state.workloads.rooms()
    ask = topology_ask(state, key, whole, verdict.cluster_queue, set(a.flavors.values()), pending, candidates,
                       allowed) if asks_topology(pending) else None
    if isinstance(ask, Refuse):
        return ask
    if ask is not None:
        placement = ask.fits(ask.usable, rooms) if verdict.admit else None
        tiers, fits = ask.domains(), ask.fits
    else:
        placement = place(pending, candidates, rooms, allowed) if verdict.admit else None
        tiers, fits = [{"": candidates}], partial(_fits_anywhere, pending, candidates, allowed)
    victims: dict[str, tuple[str, str]] = {}
    domain = ""
    if placement is None or isinstance(placement, str):
        unplaced = placement
        cq = state.cluster_queues[verdict.cluster_queue]
        why = may_preempt(state, workload, cq, state.clock())
        plan = gang_plan(state, workload, cq, a, tiers, rooms, fits) if not why else None
        if plan is None or not plan.placement:
            return _unplaceable(whole, verdict, pending, candidates, a, unplaced, why or plan.why,
                                plan.rejected if plan else {}, ask)
        placement, domain = plan.placement, plan.domain
        victims = {m.uid: (t.reason, victim_message(t.reason, workload)) for t in plan.targets
                   for m in t.candidate.pods()}
    over = "" if victims else state.ledger.over_quota(Charge(verdict.cluster_queue, a.flavors, a.usage))
    if over:            # the plan counts others' victims as gone; the quota still holds them
        return Refuse(VICTIMS_STILL_RUNNING, still_running(over, key), verdict.cluster_queue)
    holds = [Hold(m.uid, placement[m.uid], m.requests,
                  Charge(verdict.cluster_queue, a.flavors, quota_usage(state.ledger.quota_requests(m), a.flavors)), victims)
             for m in pending]
    return GroupAdmission(key, verdict.cluster_queue, a, holds, victims, domain)


def _fits_anywhere(members: list[PodInfo], candidates: list[str], allowed, nodes: list[str], room) -> dict | str:
    """A group asking no topology: a node for every member anywhere among the flavors' nodes (gangs.place)."""
    placed = place(members, nodes, room, allowed if nodes is candidates else None)
    return placed if placed is not None else "its members cannot all be placed at once"


def _unplaceable(whole: str, verdict, pending, candidates, a, unplaced, why: str, rejected: dict[str, str],
                 ask) -> Refuse:
    """No placement and no victims: the quota's reason or the placement's, why no preemption, and (a group
    asking a topology) why each domain could not be made to hold it."""
    flavors = ', '.join(sorted(set(a.flavors.values())))
    if ask is not None and unplaced is not None:
        beside = " beside the group's members already placed" if ask.beside_others and ask.request.required else ""
        rule, problem = TOPOLOGY_PLACEMENT_FAILED, f"couldn't assign flavors to pod set{beside}: {unplaced}"
    elif verdict.admit:
        rule, problem = GROUP_UNPLACEABLE, (f"its quota fits, but its {len(pending)} pending members cannot all be "
                                            f"placed at once on the {len(candidates)} node(s) of flavor(s) {flavors}")
    else:
        rule, problem = verdict.rule, verdict.reason
    domains = "; ".join(f"{d or 'all nodes'}: {r}" for d, r in sorted(rejected.items())[:5])
    more = f" (and {len(rejected) - 5} more)" if len(rejected) > 5 else ""
    return Refuse(rule, f"{whole}: {problem}; no preemption: {why}" + (f"; by domain: {domains}{more}"
                  if domains and ask is not None else ""), verdict.cluster_queue)


def admit_partially(state: ReclaimView, key: WorkloadKey, pending: list[PodInfo], on_offer,
                    minimum: int | None) -> GroupAdmission | Refuse:
    """Kueue's partial admission (kueue.x-k8s.io/job-min-parallelism): the whole Job if it can be admitted,
    else the most of its oldest pending pods, down to `minimum`, that can (quota, a node each, preemption),
    found by bisection as Kueue's PodSetReducer does; the others stay pending."""
    whole = admit_group(state, key, pending, on_offer)
    if not isinstance(whole, Refuse) or minimum is None or minimum >= len(pending):
        return whole
    best, lo, hi = None, minimum, len(pending) - 1
    while lo <= hi:
        k = (lo + hi) // 2
        decision = admit_group(state, key, pending[:k], on_offer)
        if isinstance(decision, Refuse):
            hi = k - 1
        else:
            best, lo = decision, k + 1
    if best is None:
        return Refuse(whole.rule, f"{whole.reason}; nor with fewer pods, down to {MIN_PARALLELISM}={minimum}",
                      whole.cluster_queue)
    return best
