"""Victim groups node by node (YuniKorn's): on each node the pod may use, the quota targets plus the
fewest further candidates on that node that make the pod fit there."""
from __future__ import annotations

from ..placement import shortfall, static_misfit
from .spent_budgets import spent_budgets
from .candidates import still_a_candidate, unqueued_on
from .quota_targets import quota_targets
from .removals import Removals, quota_fits
from .targets import Candidate, Plan, Preemptor, Target, add_requests, reason_of
from ..view import PreemptionView


def node_plans(state: PreemptionView, pre: Preemptor, candidates: list[Candidate], quota: list[Target],
               nodes: list[str], room, every: bool = False,
               spent: set[str] | None = None) -> tuple[list[Plan], dict[str, str]]:
    """Each node's victim group: the quota targets plus the fewest candidates on the node that make
    the pod fit there. room(node) is the node's free resources as Quotient counts them. Unless
    every, the first node where the quota targets alone leave room is the only plan needed.
    spent is spent_budgets(state), when the caller has it already."""
    req = pre.workload.requests
    freed: dict[str, dict[str, int]] = {}
    for t in quota:
        for m in t.candidate.pods():
            add_requests(freed.setdefault(m.node_name, {}), m.requests)
    lost: dict[str, str] = {}
    plans = []
    # 1. Where the quota targets alone leave room, the pod needs no one else (their nodes first).
    misfit: dict[str, str] = {}

    def cannot_run(name: str) -> bool:
        """The pod's taints, selector or affinity rule the node out, whatever is evicted."""
        if name not in misfit:
            misfit[name] = static_misfit(pre.workload.template, state.nodes[name])
        if misfit[name]:
            lost[name] = misfit[name]
        return bool(misfit[name])

    for name in sorted(nodes, key=lambda n: (n not in freed, n)):
        if cannot_run(name):
            continue
        free = room(name)
        add_requests(free, freed.get(name, {}))
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
        local = on_node.get(name, []) + unqueued_on(state, pre, name, spent)
        for c in local[len(on_node.get(name, [])):]:
            c.rank, rank = rank, rank + 1
        free = room(name)
        add_requests(free, freed.get(name, {}))
        extras = []
        rm = Removals(state)
        try:
            for t in quota:
                rm.remove(t.candidate)
            for c in local:
                if not shortfall(req, free):
                    break
                if not still_a_candidate(state, pre, c, pre.relevant):
                    continue
                extras.append(c)
                rm.remove(c)
                add_requests(free, c.requests_on(name))
        finally:
            rm.undo()
        if shortfall(req, free):
            lost[name] = (f"{shortfall(req, free).lower()} even without its {len(local)} candidate(s)"
                          if local else f"{shortfall(req, free).lower()} and no pod on it may be preempted")
            continue
        if not extras:
            continue            # fits already: kube-scheduler needs no preemption here
        for i in range(len(extras) - 2, -1, -1):     # give back what the pod fits without
            add_requests(free, extras[i].requests_on(name), -1)
            if shortfall(req, free):
                add_requests(free, extras[i].requests_on(name))
            else:
                del extras[i]
        targets = _drop_quota_targets_now_unneeded(state, pre, quota, extras, name, free)
        plans.append(Plan(name, targets + [Target(c, reason_of(pre, c)) for c in extras]))
    return plans, lost


def _drop_quota_targets_now_unneeded(state: PreemptionView, pre, quota, extras, node: str, free) -> list[Target]:
    """The extras taken for room free quota too: give back quota targets the pod fits without."""
    if not quota:
        return []
    rm = Removals(state)
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
            add_requests(free, here, -1)
            if quota_fits(pre, True) and not shortfall(pre.workload.requests, free):
                del kept[i]
            else:
                rm.remove(c)
                add_requests(free, here)
        return kept
    finally:
        rm.undo()


def local_plans(state: PreemptionView, pre: Preemptor, candidates: list[Candidate], nodes: list[str],
                room, spent: set[str]) -> tuple[list[Plan], dict[str, str]]:
    """Per node, victims from that node only (kube-scheduler's preempt answer evicts on one node): its
    own candidates for quota, then for room."""
    by_node: dict[str, list[Candidate]] = {}
    for c in candidates:
        if len({m.node_name for m in c.pods()}) == 1:
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
