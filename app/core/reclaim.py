"""Self-driven reclaim: Quotient chooses victims for a pod kube-scheduler cannot help.

kube-scheduler's own dry run cannot see quota: it offers nodes where the pod fits, or, when no node has
room, never calls filter and proposes only lower-priority victims. A pod that must reclaim quota (from
its own ClusterQueue, or from equal-priority pods under reclaimWithinCohort: Any or fair sharing) would
wait for ever; so Quotient chooses the victims itself, holds the room and quota, and evicts them.
"""
from __future__ import annotations

from typing import Callable, Iterator

from ..objects.pod import PodInfo
from .admission import Verdict
from .decisions import Hold, Refuse
from .flavors import Assignment, Charge
from .placement import shortfall
from .preemption import Plan, may_preempt, plans, victim_message
from .rules import MAY_NOT_PREEMPT, NO_PREEMPTION
from .view import ReclaimView
from .workload import Workload, WorkloadKey


def queue_heads(state: ReclaimView, gate: Callable[[PodInfo], str]) -> Iterator[PodInfo]:
    """The head of each ClusterQueue's pending pods, for reclaim: a workload the gate refuses (backing off
    or deactivated under waitForPodsReady, as in Kueue it is out of the queue meanwhile; or every one
    while blockAdmission waits) is not a head, and a head already preempting is skipped."""
    for cq_name in list(state.pending):
        head = next((p for p in state.queues.pending_pods(cq_name) if not gate(p)), None)
        if head is not None and head.uid not in state.holds:
            yield head


def flavor_nodes(state: ReclaimView, a: Assignment) -> list[str]:
    """The nodes of every flavor the assignment uses (all nodes when a flavor selects none)."""
    nodes = None
    for flavor in set(a.flavors.values()):
        members = state.flavor_nodes.get(flavor)
        if members is not None:
            nodes = set(members) if nodes is None else nodes & members
    return sorted(state.nodes if nodes is None else nodes)


def reclaim(state: ReclaimView, pod: PodInfo, verdict: Verdict) -> tuple[Hold, Plan] | Refuse:
    """The best node's victim group for pod, as a Hold (with the plan chosen), or why there is none."""
    cq, preemptor = state.cluster_queues[verdict.cluster_queue], Workload.of_pod(pod)
    why = may_preempt(state, preemptor, cq, state.clock())
    if why:
        return Refuse(MAY_NOT_PREEMPT, why, cq.name)
    a = verdict.assignment
    found, why = plans(state, preemptor, cq, a, flavor_nodes(state, a), state.workloads.rooms(pod.uid))
    if not found:
        return Refuse(NO_PREEMPTION, why, cq.name)
    best = found[0]
    victims = {m.uid: (reason, victim_message(reason, preemptor)) for reason, m in best.victims()}
    return Hold(pod.uid, best.node, pod.requests, Charge(cq.name, a.flavors, a.usage), victims), best


def outside_holds(state: ReclaimView, pod: PodInfo, nodes: list[str]) -> list[str]:
    """The nodes where pod fits without taking room held for another preemptor or pod group member (YuniKorn's
    node reservation); nodes itself when no hold is on any of them."""
    held_nodes = {h.node for uid, h in state.holds.items() if uid != pod.uid}
    if held_nodes.isdisjoint(nodes):
        return nodes
    room = state.workloads.rooms(pod.uid)
    return [n for n in nodes if n not in held_nodes or not shortfall(pod.requests, room(n))]


def victims_left(state: ReclaimView, held, group: WorkloadKey | None = None) -> str:
    """Why a preemptor (or a member of a preempting group) waits: victims chosen for it still run,
    holding their quota and room until they are gone. "" when none is left."""
    left = held.left(state.pods) if held is not None else None
    if not left:
        return ""
    who = group.described if group else "this pod"
    return (f"preempting for {who}: waiting for {len(left)} preempted pod(s) to leave (their quota is "
            f"free only once they are gone); node {held.node} and the quota are held for it")


def still_running(over: str, group: WorkloadKey | None = None) -> str:
    """VictimsStillRunning: the plan counts others' victims as gone, the quota (over) still holds them."""
    who = f"{group.described}: " if group else ""
    return f"{who}{over}; pods preempted for others still run there, and their quota is free only once they are gone"
