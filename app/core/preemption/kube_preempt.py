"""kube-scheduler's preempt verb: its dry run found lower-priority victims on some nodes; Quotient answers
with its own victim group per node (any pods on that node its rules allow), dropping nodes where it finds
none. preemption.mode decides whose rules count: Quota (Quotient's for queued pods; none for others),
Auto (Quotient's for queued pods, kube-scheduler's for the rest), Priority (kube-scheduler's), None."""
from __future__ import annotations

from dataclasses import dataclass, field

from ...objects.pod import PodInfo
from ..admission import decide, may_reclaim
from ..decisions import Reserve
from ..flavors import Charge
from .spent_budgets import spent_budgets
from .choose import plans
from .laws import may_preempt
from .targets import Plan
from ..view import ReclaimView
from ..workload import Workload, group_of


@dataclass
class PreemptAnswer:
    victims: dict[str, list[str]] = field(default_factory=dict)     # node -> victim uids
    violations: dict[str, int] = field(default_factory=dict)        # node -> victims under a spent budget
    why: str = ""                       # why there are none (or, with some, why a node was dropped)
    passthrough: bool = False           # kube-scheduler's own victims stand
    reserve: Reserve | None = None      # the quota the victims free, kept for the preemptor
    cluster_queue: str = ""
    plans: list[Plan] = field(default_factory=list)


def answer(state: ReclaimView, pod: PodInfo, nodes: list[str]) -> PreemptAnswer:
    """The victims on the nodes kube-scheduler proposed (nodes), per Quotient's rules."""
    mode, workload = state.config.preemption_mode, Workload.of_pod(pod)
    if not pod.queue_name or mode == "Priority":
        if mode in ("Auto", "Priority"):
            return PreemptAnswer(passthrough=True)
        return PreemptAnswer(why=may_preempt(state, workload, None, state.clock()))
    if group_of(pod):
        return PreemptAnswer(why="a pod group member: the group preempts as a whole, through filter (Quotient "
                             "chooses and evicts its victims), never through kube-scheduler's one-pod preemption")
    held = state.holds.get(pod.uid)
    if held is not None and held.left(state.pods):
        return PreemptAnswer(why=f"already preempting for this pod; waiting for its victims to leave node {held.node}")
    verdict = decide(state, workload)
    cq = state.cluster_queues.get(verdict.cluster_queue)
    why = "" if cq is not None else verdict.reason
    if not why:
        why = may_preempt(state, workload, cq, state.clock())
    if not why and not verdict.admit and not may_reclaim(verdict):
        why = verdict.reason
    if why:
        return PreemptAnswer(why=why, cluster_queue=verdict.cluster_queue)
    a = verdict.assignment
    flavors = set(a.flavors.values())       # victims elsewhere free a node filter never passes the pod onto
    nodes = [n for n in nodes if all(state.ledger.node_in_flavor(n, f) for f in flavors)]
    spent = spent_budgets(state)
    found, why = plans(state, workload, cq, a, nodes, state.workloads.rooms(pod.uid), every=True, local=True, spent=spent)
    found = [p for p in found if p.targets]
    victims = {p.node: [m.uid for _, m in p.victims()] for p in found}
    reserve = None
    if victims and not verdict.admit:      # the quota the victims free is kept for this pod
        reserve = Reserve(pod.uid, Charge(cq.name, a.flavors, a.usage), state.config.preemption_hold_timeout)
    return PreemptAnswer(victims, {node: sum(u in spent for u in uids) for node, uids in victims.items()}, why,
                         reserve=reserve, cluster_queue=cq.name, plans=found)
