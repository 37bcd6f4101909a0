"""The ACK seed's gang preemption: one preemption list for all pending members of a pod group."""
from __future__ import annotations

from ...objects.kueue import ClusterQueue
from ...objects.pod import PodInfo
from ..flavors import Assignment
from ..gangs import place
from .spent_budgets import spent_budgets
from .candidates import find_candidates, still_a_candidate
from .laws import no_candidate
from .ordering import order
from .quota_targets import quota_targets
from .removals import Removals
from .targets import Preemptor, Target, add_requests, reason_of
from ..view import CandidateView
from ..workload import Workload

MAX_GANG_EXTRAS = 500     # victims tried for room before a gang is declared unplaceable


def gang_plan(state: CandidateView, workload: Workload, members: list[PodInfo], cq: ClusterQueue, assignment: Assignment,
              nodes: list[str], room, allowed=None) -> tuple[list[Target], dict[str, str], str]:
    """Victims (whole running groups counted whole) until the quota fits and every member has a node at
    once, then given back while that still holds. ([], {}, why) when no such set exists: nothing is
    evicted."""
    pre = Preemptor(workload, cq, state.ledger.quota_node(cq.name), assignment.usage, set(assignment.flavors.values()))
    everyone = find_candidates(state, pre, pre.relevant, spent_budgets(state))
    why = no_candidate(state, cq)

    def placement(taken: list[Target]) -> dict[str, str] | None:
        freed: dict[str, dict[str, int]] = {}
        for t in taken:
            for m in t.candidate.pods():
                add_requests(freed.setdefault(m.node_name, {}), m.requests)

        def room_after(n: str) -> dict[str, int]:
            free = room(n)
            add_requests(free, freed.get(n, {}))
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
        rm = Removals(state)
        try:
            for t in taken:
                rm.remove(t.candidate)
            in_quota = {id(t.candidate) for t in quota}
            for c in candidates[:MAX_GANG_EXTRAS]:
                if placed is not None:
                    break
                if id(c) in in_quota or not still_a_candidate(state, pre, c, pre.relevant):
                    continue
                taken.append(Target(c, reason_of(pre, c)))
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
