"""Which members of a pod group lose their holds and reservations, and when a member may not bind alone.

A pod group is admitted whole or not at all (core.gang_admission): a member that is not bound yet keeps what
its group was given only while the group's decision stands.
"""
from __future__ import annotations

from ..objects.pod import PodInfo
from .decisions import Refuse
from .rules import GROUP_INCOMPLETE
from .view import ReclaimView
from .workload import group_of


def unbound(members) -> list[PodInfo]:
    """The members not bound yet: the ones whose holds and reservations a group's refusal ends."""
    return [m for m in members if not m.node_name]


def released_by(refusal: Refuse, members: list[PodInfo]) -> list[PodInfo]:
    """A group that lost a member before it ran holds nothing: GroupIncomplete releases its unbound members."""
    return unbound(members) if refusal.rule == GROUP_INCOMPLETE else []


def released_at_bind(state: ReclaimView, pod: PodInfo) -> list[PodInfo]:
    """The pod changed since filter reserved for it: filter decides on it as it is now, with its group (all or
    nothing), so the pod and its group's unbound members give back what they hold."""
    key = state.reservations[pod.uid].decided.group
    return unbound([pod, *(state.store.members(key) if key else ())])


def alone_at_bind(pod: PodInfo, node: str) -> str:
    """Why a group member without a reservation on node may not bind by itself ("" when it is no member): a
    member alone would break all or nothing, so its group decides again."""
    key = group_of(pod)
    if not key or not pod.queue_name:
        return ""
    return (f"{key.described}: this member holds no reservation on node {node} (its group's hold "
            "lapsed, or its workload was evicted); it passes filter again with its group")
