"""When a refusal no longer holds: what filter refused a pod for has changed in Quotient's own state.

Nothing here is written to the cluster: a pod answered as a retry is tried again by kube-scheduler by
itself, and no write would move a parked one (app/refusals.py). The cause is shown by /debug/pods and
counted by quotient_refusals_cleared_total, so an admin sees what a wait was waiting for.
"""
from __future__ import annotations

from ..objects.pod import PodInfo
from . import gangs
from .admission import decide, job_refusal, may_reclaim
from .decisions import QUOTA_RULES
from .flavors import Charge
from .gang_admission import group_over_quota
from .preemption import may_preempt
from .rules import (GROUP_COMPLETE, GROUP_INCOMPLETE, GROUP_PREEMPTING, HOLD_EXPIRED, HOLD_RELEASED, JOB_NOT_SEEN,
                    JOB_SEEN, JOB_WAIT_OVER, NO_FLAVOR_NODES, PODS_READY_GATE, PODS_READY_GATE_CLEARED, PREEMPTING,
                    PREEMPTION_DELAY_OVER, QUEUE_CHANGED, QUOTA_FREED, ROOM_HELD, VICTIMS_GONE, WAITING_FOR_VICTIMS,
                    WORKLOAD_PRIORITY_CLASS_CREATED, WORKLOAD_PRIORITY_CLASS_NOT_FOUND)
from .next_in_line import admission_gate
from .view import ClearedView
from .workload import Workload, group_of


def cleared_cause(state: ClearedView, pod: PodInfo, rule: str, reason: str, holds_then: frozenset | set) -> str:
    """Why pod's refusal (rule, reason; holds_then: the holds that stood when it was refused) no longer
    holds, "" while it does: time (backoff, preemption delay, hold expiry), victims gone, a group complete,
    quota or queues changed."""
    if pod.uid not in state.holds and admission_gate(state, pod):
        return ""
    if rule == PODS_READY_GATE:
        return PODS_READY_GATE_CLEARED
    if rule == WORKLOAD_PRIORITY_CLASS_NOT_FOUND:
        return "" if pod.missing_priority_class else WORKLOAD_PRIORITY_CLASS_CREATED
    if rule == JOB_NOT_SEEN:        # its Job came, or the wait for it ran out (admission.job_refusal)
        if pod.owner is None or pod.owner.uid in state.jobs:
            return JOB_SEEN
        waiting = job_refusal(state, pod)
        return "" if waiting is not None and waiting.rule == JOB_NOT_SEEN else JOB_WAIT_OVER
    key = group_of(pod)
    held = state.holds.get(pod.uid)
    if held is not None:
        if held.left(state.pods) or (key and group_over_quota(state, state.store.members(key))):
            return ""
        return VICTIMS_GONE
    if rule in (WAITING_FOR_VICTIMS, PREEMPTING, GROUP_PREEMPTING):
        return HOLD_EXPIRED
    if rule == ROOM_HELD:
        return "" if holds_then <= state.holds.keys() else HOLD_RELEASED
    if rule == NO_FLAVOR_NODES:
        return ""                     # nodes: kube-scheduler watches them itself
    if key:
        if rule == GROUP_INCOMPLETE:
            size = gangs.expected_size(state, pod)
            return GROUP_COMPLETE if size is not None and len(state.store.members(key)) >= size else ""
        pending = gangs.pending_members(state, state.store.members(key))
        if not pending:
            return ""
        verdict = decide(state, Workload.of_group(key, pending))
    else:
        if state.blocked.lookup(state, pod) is not None:
            return ""          # its shape's refusal stands at its place, and not enough has freed since (state.blocked)
        verdict = decide(state, Workload.of_pod(pod))
        if not may_reclaim(verdict):
            state.blocked.remember(state, pod, verdict)
    if verdict.admit and verdict.managed:
        a = verdict.assignment
        if state.ledger.over_quota(Charge(verdict.cluster_queue, a.flavors, a.usage)):
            return ""
        return QUOTA_FREED if rule in QUOTA_RULES else QUEUE_CHANGED
    if "preemption delay" in reason and may_reclaim(verdict):
        cq = state.cluster_queues.get(verdict.cluster_queue)
        if cq is not None and not may_preempt(state, Workload.of_pod(pod), cq, state.clock()):
            return PREEMPTION_DELAY_OVER
    return ""
