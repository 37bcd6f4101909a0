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
from ..resource_node import available
from ..topology import count_in, one_pod
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
        kueue_order = quota_targets(state, pre, candidates)
        if kueue_order is None:
            out.why = f"no set of the {len(candidates)} candidate(s) frees enough quota for the whole group"
            continue
        shared = Removals(state)        # the quota targets, the same for every domain: removed once
        try:
            for t in kueue_order:
                shared.remove(t.candidate)
            for tier in tiers:
                best = None
                for name, (nodes, here) in _by_domain(tier, candidates).items():
                    found = _in_domain(state, pre, kueue_order, here, nodes, room, fits)
                    if isinstance(found, str):
                        out.rejected[name] = found
                        continue
                    found[0].node = name
                    if best is None or plan_key(found[0]) < plan_key(best[0]):
                        best = found
                    if not found[0].targets:
                        break               # it fits there with no victim: nothing disrupts less
                if best is not None:
                    plan, placement = best
                    out.rejected.pop(plan.node, None)
                    return GangPlan(plan.targets, placement, "", plan.node, out.rejected)
        finally:
            shared.undo()
        n = sum(len(nodes) for tier in tiers[:1] for nodes in tier.values())
        out.why = (f"even with every allowed victim gone, the {len(workload.members)} members cannot all be placed "
                   "at once"
                   + (f" in any of the {len(tiers[0])} domain(s)" if tiers and len(tiers[0]) > 1 else "")
                   + f" on the {n} node(s) of flavor(s) {', '.join(sorted(pre.flavors))}")
    return out


def _by_domain(tier: dict[str, list[str]], candidates: list[Candidate]) -> dict[str, tuple[list[str], list]]:
    """Each domain's nodes and its candidates (those with a pod on one of its nodes), in candidate order: one pass
    over the candidates for every domain of the tier."""
    where = {n: name for name, nodes in tier.items() for n in nodes}
    here: dict[str, list[Candidate]] = {name: [] for name in tier}
    for c in candidates:
        for name in dict.fromkeys(where[m.node_name] for m in c.pods() if m.node_name in where):
            here[name].append(c)
    return {name: (nodes, here[name]) for name, nodes in tier.items()}


class _Room:
    """A domain's free room as victims are taken or given back, and a necessary test of the members fitting it
    (their requests summed within its free room summed; as many pods of the smallest member's request as there are
    members, node by node), so the full placement runs only when it may succeed."""

    def __init__(self, nodes: list[str], room, members, gone=()):
        self.free = {n: room(n) for n in nodes}
        for c in gone:                  # candidates counted gone from the start
            for m in c.pods():
                if m.node_name in self.free:
                    add_requests(self.free[m.node_name], m.requests)
        self.need: dict[str, int] = {}
        for m in members:
            add_requests(self.need, m.requests)
        self.need = {r: v for r, v in self.need.items() if v > 0}
        self.smallest = one_pod({r: min(m.requests.get(r, 0) for m in members) for r in self.need})
        self.members = len(members)
        self.total = {r: sum(max(f.get(r, 0), 0) for f in self.free.values()) for r in self.need}
        self.count = {n: count_in(self.smallest, f)[0] for n, f in self.free.items()}
        self.counted = sum(self.count.values())

    def take(self, c: Candidate, sign: int = 1) -> None:
        """c's pods gone (sign 1) or back (-1): their room on the domain's nodes."""
        for m in c.pods():
            f = self.free.get(m.node_name)
            if f is None:
                continue
            for r in self.total:
                self.total[r] -= max(f.get(r, 0), 0)
            add_requests(f, m.requests, sign)
            for r in self.total:
                self.total[r] += max(f.get(r, 0), 0)
            n = count_in(self.smallest, f)[0]
            self.counted += n - self.count[m.node_name]
            self.count[m.node_name] = n

    def may_fit(self) -> bool:
        return self.counted >= self.members and all(self.total[r] >= v for r, v in self.need.items())

    def after(self, n: str) -> dict[str, int]:
        return dict(self.free[n])


def _in_domain(state, pre: Preemptor, quota: list[Target], here: list[Candidate], nodes: list[str], room,
               fits: Fits) -> tuple[Plan, dict[str, str]] | str:
    """The fewest victims that make the group fit in this domain: the quota targets in Kueue's candidate order
    (already removed from the quota tree by the caller), the domain's own candidates (in that order) for room, then
    every victim the group fits without given back (the domain's candidates free quota too, so quota targets
    elsewhere may go back). Why not, when even all of them leave it unplaced."""
    members = pre.workload.members
    chosen = {id(t.candidate) for t in quota}
    inside = {id(c) for c in here}
    potential = _Room(nodes, room, members, here)   # every allowed victim gone: a domain that cannot hold the
    if not potential.may_fit():                     # group even so is passed over before any search
        return f"even with every allowed victim gone: {fits(nodes, potential.after)}"
    space = _Room(nodes, room, members, [t.candidate for t in quota if id(t.candidate) in inside])
    taken, placed = list(quota), fits(nodes, space.after) if space.may_fit() else "not tried"
    rm = Removals(state)
    try:
        for c in here[:MAX_GANG_EXTRAS]:
            if not isinstance(placed, str):
                break
            if id(c) in chosen or not still_a_candidate(state, pre, c, pre.relevant):
                continue
            taken.append(Target(c, reason_of(pre, c)))
            rm.remove(c)
            space.take(c)
            if space.may_fit():
                placed = fits(nodes, space.after)
        if isinstance(placed, str):
            return f"even with every allowed victim gone: {fits(nodes, space.after)}"
        taken, placed = _given_back(pre, rm, space, taken, placed, chosen, inside, nodes, fits)
    finally:
        rm.undo()
    return Plan("", taken), placed


def _given_back(pre: Preemptor, rm: Removals, space: _Room, taken: list[Target], placed: dict[str, str],
                quota: set[int], inside: set[int], nodes: list[str], fits: Fits) -> tuple[list[Target], dict[str, str]]:
    """Walking the victims backwards, give back each one the group still fits without: quota still fitting (and
    no borrowing that was not there), and, for a victim inside the domain, the members still placed. A victim of
    the preemptor's own queue elsewhere frees only quota: it goes back only if the quota left over covers it
    (its usage returns whole), asked before anything is charged back. quota: the caller's removals (charged back
    here in rm, under a key of their own), the rest rm's."""
    strict = quota_fits(pre, False)     # giving back must not make a preemptor borrow that did not
    slack = None

    def back(c: Candidate, sign: int) -> None:
        if id(c) in quota:
            if sign > 0:
                rm.charge(("back", id(c)), c.cluster_queue, c.usage)
            else:
                rm.take_back(("back", id(c)))
        elif sign > 0:
            rm.restore(c)
        else:
            rm.remove(c)
        if id(c) in inside:
            space.take(c, -sign)

    for i in range(len(taken) - 1, -1, -1):
        c = taken[i].candidate
        here = id(c) in inside
        if not here and c.cluster_queue == pre.cq.name and pre.needs:
            if slack is None:
                slack = {fr: available(pre.node, fr) - pre.usage[fr] for fr in pre.needs}
            if any(c.usage.get(fr, 0) > slack[fr] for fr in pre.needs):
                continue
        back(c, 1)
        again = (fits(nodes, space.after) if here else placed) \
            if quota_fits(pre, not strict) and (not here or space.may_fit()) else "quota"
        if isinstance(again, str):
            back(c, -1)
        else:
            taken, placed, slack = taken[:i] + taken[i + 1:], again, None
    return taken, placed
