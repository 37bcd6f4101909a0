"""The ACK seed's gang preemption: one preemption list for all pending members of a pod group, chosen domain by
domain when the group asks for a topology level (issue 36).

Kueue frees quota and then lets TAS try to fit, so a gang can stay stuck when the room freed is spread across
racks. Here each domain (a rack, a block; for a group asking none, the whole cluster) gets its own victims: the
quota targets the rules allow, then the domain's own candidates until every member has a node inside it, then
every victim the group still fits without given back. The domain whose victims disrupt least (core.preemption.
ordering.plan_key: fewest last-resort victims, fewest pods, earliest in candidate order, lowest priority) is
chosen; a domain where the group would still not fit evicts nothing."""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable

from ...objects.kueue import ClusterQueue
from ..flavors import Assignment
from .spent_budgets import spent_budgets
from .candidates import find_candidates, still_a_candidate
from .laws import no_candidate
from .ordering import order, plan_key
from .quota_targets import quota_targets
from .removals import Removals, quota_fits
from .targets import Candidate, Plan, Preemptor, Target, add_requests, reason_of
from ..view import CandidateView
from ..workload import Workload

MAX_GANG_EXTRAS = 500     # victims tried for room in one domain before it is declared unplaceable

Fits = Callable[[list[str], Callable[[str], dict[str, int]]], "dict[str, str] | str"]


@dataclass
class GangPlan:
    """The victims (empty: none found, see why), each member's node, and why each domain not chosen was not."""
    targets: list[Target] = field(default_factory=list)
    placement: dict[str, str] = field(default_factory=dict)
    why: str = ""
    domain: str = ""
    rejected: dict[str, str] = field(default_factory=dict)


def gang_plan(state: CandidateView, workload: Workload, cq: ClusterQueue, assignment: Assignment,
              tiers: list[dict[str, list[str]]], room, fits: Fits) -> GangPlan:
    """Victims (whole running groups counted whole) until the quota fits and fits(nodes, room) places every
    member inside one domain at once, then given back while that still holds. tiers: the domains (name ->
    nodes) to try, a tier at a time; the first tier with a plan decides. GangPlan([]...) when no such set
    exists: nothing is evicted."""
    pre = Preemptor(workload, cq, state.ledger.quota_node(cq.name), assignment.usage, set(assignment.flavors.values()))
    everyone = find_candidates(state, pre, pre.relevant, spent_budgets(state))
    out = GangPlan(why=no_candidate(state, cq))
    for last_resort in (False, True):
        if last_resort and not any(c.last_resort for c in everyone):
            break
        candidates = order([c for c in everyone if last_resort or not c.last_resort], cq.name)
        if quota_targets(state, pre, candidates) is None:
            out.why = f"no set of the {len(candidates)} candidate(s) frees enough quota for the whole group"
            continue
        for tier in tiers:
            best = None
            for name, nodes in tier.items():
                found = _in_domain(state, pre, candidates, nodes, room, fits)
                if isinstance(found, str):
                    out.rejected[name] = found
                    continue
                found[0].node = name
                if best is None or plan_key(found[0]) < plan_key(best[0]):
                    best = found
            if best is not None:
                plan, placement = best
                out.rejected.pop(plan.node, None)
                return GangPlan(plan.targets, placement, "", plan.node, out.rejected)
        n = sum(len(nodes) for tier in tiers[:1] for nodes in tier.values())
        out.why = (f"even with every allowed victim gone, the {len(workload.members)} members cannot all be placed "
                   "at once"
                   + (f" in any of the {len(tiers[0])} domain(s)" if tiers and len(tiers[0]) > 1 else "")
                   + f" on the {n} node(s) of flavor(s) {', '.join(sorted(pre.flavors))}")
    return out


def _in_domain(state, pre: Preemptor, candidates: list[Candidate], nodes: list[str], room,
               fits: Fits) -> tuple[Plan, dict[str, str]] | str:
    """The fewest victims that make the group fit in this domain: the better of the quota targets in Kueue's
    candidate order and in that order with the domain's own candidates first (they free quota and room at once),
    each followed by the domain's candidates for room. Why not, when even all of them leave it unplaced."""
    inside = set(nodes)
    here = [c for c in candidates if any(m.node_name in inside for m in c.pods())]
    ours = {id(c) for c in here}
    orders = [candidates] + ([here + [c for c in candidates if id(c) not in ours]] if here else [])
    best, why = None, ""
    for ordered in orders:
        found = _victims(state, pre, ordered, here, nodes, room, fits)
        if isinstance(found, str):
            why = found
        elif best is None or plan_key(found[0]) < plan_key(best[0]):
            best = found
        if best is not None and not best[0].targets:
            break
    return best if best is not None else why


def _victims(state, pre: Preemptor, ordered: list[Candidate], here: list[Candidate], nodes: list[str], room,
             fits: Fits) -> tuple[Plan, dict[str, str]] | str:
    quota = quota_targets(state, pre, ordered)
    if quota is None:
        return "no set of the candidates frees enough quota for the whole group"

    def placement(taken: list[Target]) -> dict[str, str] | str:
        freed: dict[str, dict[str, int]] = {}
        for t in taken:
            for m in t.candidate.pods():
                add_requests(freed.setdefault(m.node_name, {}), m.requests)

        def room_after(n: str) -> dict[str, int]:
            free = room(n)
            add_requests(free, freed.get(n, {}))
            return free
        return fits(nodes, room_after)

    taken, placed = list(quota), placement(quota)
    rm = Removals(state)
    try:
        for t in taken:
            rm.remove(t.candidate)
        chosen = {id(t.candidate) for t in quota}
        for c in here[:MAX_GANG_EXTRAS]:
            if not isinstance(placed, str):
                break
            if id(c) in chosen or not still_a_candidate(state, pre, c, pre.relevant):
                continue
            taken.append(Target(c, reason_of(pre, c)))
            rm.remove(c)
            placed = placement(taken)
        if isinstance(placed, str):
            return f"even with every allowed victim gone: {placed}"
        strict = quota_fits(pre, False)     # giving back must not make a preemptor borrow that did not
        for i in range(len(taken) - 1, -1, -1):     # give back every victim the group fits without
            rm.restore(taken[i].candidate)
            trial = taken[:i] + taken[i + 1:]
            again = placement(trial) if quota_fits(pre, not strict) else "quota"
            if isinstance(again, str):
                rm.remove(taken[i].candidate)
            else:
                taken, placed = trial, again
    finally:
        rm.undo()
    return Plan("", taken), placed
