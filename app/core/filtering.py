"""filter for a pod outside any pod group, after its verdict: which of the nodes it may take, and the
charge reserved for it until bind.

The scheduler (app/scheduler/filter.py) asks in this order and commits what is decided. Node names only: which
offered nodes belong to the pod's flavors is objects/offered_nodes' (kube-scheduler's offer, cached by its bytes).
"""
from __future__ import annotations

from ..objects.pod import PodInfo
from .admission import Verdict
from .decisions import Refuse
from .flavors import Charge
from .reclaim import outside_holds, still_running
from .rules import NO_FLAVOR_NODES, ROOM_HELD, VICTIMS_STILL_RUNNING
from .view import ReclaimView


def nodes_for(state: ReclaimView, pod: PodInfo, flavors: frozenset[str], passing: list[str],
              offered: int) -> list[str] | Refuse:
    """The nodes the pod may take among passing (the offered nodes of its flavors): a preemptor only the
    node held for it; any other pod none whose room is held for another (YuniKorn's node reservation).
    passing itself when nothing narrows it."""
    if not passing:
        return Refuse(NO_FLAVOR_NODES, f"none of the {offered} nodes offered belongs to flavor(s) "
                      f"{', '.join(sorted(flavors))}; kube-scheduler may offer only part of the cluster "
                      "(set percentageOfNodesToScore: 100)")
    held = state.holds.get(pod.uid)
    if held is not None and held.node in passing and len(passing) > 1:
        return [held.node]              # the room kept for it
    kept = outside_holds(state, pod, passing)
    if not kept:
        return Refuse(ROOM_HELD, "the room on the offered nodes is held for other pods (preemptors, pod group "
                      "members)")
    return kept


def reservation(state: ReclaimView, verdict: Verdict) -> Charge | Refuse:
    """What filter reserves for an admitted pod until bind. The plans count victims chosen for others as
    gone; the quota still holds them until they are, so nothing is reserved over it."""
    a = verdict.assignment
    charge = Charge(verdict.cluster_queue, a.flavors, a.usage)
    over = state.ledger.over_quota(charge)
    return Refuse(VICTIMS_STILL_RUNNING, still_running(over), verdict.cluster_queue) if over else charge
