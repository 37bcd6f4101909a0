"""The victims for one preemptor: the candidates (searched once per decision), the quota targets, each
node's victim group, and the best group first. Pods that opted out, or whose PodDisruptionBudget is
spent, are taken only when no other victim set exists."""
from __future__ import annotations

from ...objects.kueue import ClusterQueue
from ..flavors import Assignment
from .spent_budgets import spent_budgets
from .candidates import find_candidates
from .laws import no_candidate
from .nodes import local_plans, node_plans
from .ordering import order
from .quota_targets import quota_targets
from .targets import Plan, Preemptor
from ..view import PreemptionView
from ..workload import Workload


def plans(state: PreemptionView, workload: Workload, cq: ClusterQueue, assignment: Assignment, nodes: list[str], room,
          every: bool = False, local: bool = False, spent: set[str] | None = None) -> tuple[list[Plan], str]:
    """See _plans; spent is spent_budgets(state), when the caller has it already."""
    return _plans(state, workload, cq, assignment, nodes, room, every, local,
                  spent_budgets(state) if spent is None else spent)


def _plans(state: PreemptionView, workload: Workload, cq: ClusterQueue, assignment: Assignment, nodes: list[str], room,
           every: bool, local: bool, spent: set[str]) -> tuple[list[Plan], str]:
    """Victim groups that let the workload run, best first (one unless every); ([], why) when there is none.

    With local, every victim of a node's group runs on that node, quota targets included, as
    kube-scheduler requires of a preempt answer (and YuniKorn's design: "被抢占的受害者们必须运行在同一节点上")."""
    pre = Preemptor(workload, cq, state.ledger.quota_node(cq.name), assignment.usage, set(assignment.flavors.values()))
    everyone = assignment.searched.before(state, pre, spent) if assignment.searched is not None else None
    if everyone is None:
        everyone = find_candidates(state, pre, pre.relevant, spent)
    nodes = [n for n in nodes if n in state.nodes]
    why = no_candidate(state, cq)
    any_last_resort = any(c.last_resort for c in everyone)
    for last_resort in (False, True):
        if last_resort and not any_last_resort:
            break
        candidates = order([c for c in everyone if not c.last_resort], cq.name) if any_last_resort and \
            not last_resort else order(everyone, cq.name) if any_last_resort else everyone
        if not last_resort and not candidates and everyone:
            continue
        if local:
            found, lost = local_plans(state, pre, candidates, nodes, room, spent)
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
