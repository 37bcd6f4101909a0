"""Pod groups (gangs): when a group is complete, which members are still to place, and where they fit.

Which pods belong together is core.workload.group_of (Kueue's plain pods or scheduler-plugins' coscheduling
PodGroup with spec.minMember). A group is admitted whole or not at all: its quota is checked as one
request (core.workload.Workload), and every member must have a node at once before any of them holds anything.
"""
from __future__ import annotations

import numpy as np

from ..objects.pod import PodInfo
from .view import GroupView
from .workload import COSCHEDULING_GROUP, KUEUE_TOTAL, WorkloadKey, group_of


def node_masks(members: list[PodInfo], nodes: list, misfit):
    """allowed(member) for place(): the nodes each member's taints, selector and affinity allow,
    worked out once per distinct scheduling constraint (members mostly share one)."""
    masks: dict[tuple, np.ndarray] = {}

    def allowed(m: PodInfo) -> np.ndarray:
        sig = (repr(m.tolerations), tuple(sorted(m.node_selector.items())), repr(m.affinity_terms))
        if sig not in masks:
            masks[sig] = np.fromiter((not misfit(m, n) for n in nodes), dtype=bool, count=len(nodes))
        return masks[sig]
    return allowed


def walk_shape(pod: PodInfo) -> object:
    """What a walk of queue order passes over alike (PodInfo.shape): a pod group's members are their group's, one
    workload admitted together or not at all; the value core.workload.Workload.shape gives, which walks skip."""
    key = group_of(pod)
    return str(key) if key else pod.shape


def pending_members(state: GroupView, members: list[PodInfo]) -> list[PodInfo]:
    """The members still to be placed: not on a node, no node held for them."""
    return [m for m in members if not m.node_name and m.uid not in state.holds]


def waiting_members(state: GroupView, key: WorkloadKey, pod: PodInfo) -> list[PodInfo]:
    """The members of pod's group to admit now, or [] when the group cannot be admitted: its size is
    unknown, not all its members exist, nothing is left to place, its members name several queues, or one
    names a WorkloadPriorityClass that does not exist (the group is no workload yet)."""
    members = state.store.members(key)
    size = expected_size(state, pod)
    if size is None or len(members) < size or len({m.queue_name for m in members}) != 1 \
            or any(m.missing_priority_class for m in members):
        return []
    return pending_members(state, members)


def expected_size(state: GroupView, pod: PodInfo) -> int | None:
    """How many members the group needs: a Job's workload count (objects.job.JobInfo.count), Kueue's
    pod-group-total-count annotation, or the coscheduling PodGroup's minMember (decoded once, objects/)."""
    if pod.job:
        job, rec = state.jobs.get(pod.owner.uid), state.job_admissions.get(pod.owner.uid)
        if job is None:
            return None
        return min(rec.size, job.count) if rec is not None else job.count     # a partial admission: its size
    if KUEUE_TOTAL in pod.annotations:
        return pod.group_total
    if pod.labels.get(COSCHEDULING_GROUP):
        pg = state.pod_groups.get(f"{pod.namespace}/{pod.labels[COSCHEDULING_GROUP]}")
        return pg.min_member if pg is not None else None
    return None


def place(members: list[PodInfo], nodes: list[str], room, allowed=None) -> dict[str, str] | None:
    """A node for every member at once (member uid -> node), or None when they cannot all fit.

    Largest members first, each onto the first node (in the order given) with room left for it,
    in numpy over all nodes at once: 256 members on 5,000 nodes is a few milliseconds.
    allowed(member), when given, is a boolean mask over nodes of those the member may run on."""
    if not members:
        return {}
    resources = sorted({r for m in members for r, v in m.requests.items() if v})
    if not nodes:
        return None
    rooms = [room(n) for n in nodes]
    free = np.array([[free_n.get(r, 0) for r in resources] for free_n in rooms], dtype=np.int64)
    placed: dict[str, str] = {}
    for m in sorted(members, key=lambda p: tuple(-p.requests.get(r, 0) for r in resources)):
        need = np.array([m.requests.get(r, 0) for r in resources], dtype=np.int64)
        ok = (free >= need).all(axis=1)
        if allowed is not None:
            ok &= allowed(m)
        fits = np.flatnonzero(ok)
        if len(fits) == 0:
            return None
        i = int(fits[0])
        free[i] -= need
        placed[m.uid] = nodes[i]
    return placed
