"""The LocalQueue .status Quotient publishes, as Kueue's LocalQueue controller writes it, so `kubectl get localqueues`
and kueuectl show each queue's Pending and Admitted workloads and whether it can take new ones.

Kueue: pkg/controller/core/localqueue_controller.go (Reconcile, updateStatusIfChanged) and
apis/kueue/v1beta2/localqueue_types.go (LocalQueueStatus). pendingWorkloads, reservingWorkloads (admitted ones
included), admittedWorkloads, flavorsReservation and flavorsUsage (v1beta1 spells it flavorUsage: the status is
written in the version the LocalQueue was read in), every flavor and covered resource of its ClusterQueue listed,
zeros too; the Active condition with Kueue's reasons: Stopped (its stopPolicy; then no pending workloads, as
Kueue counts none), ClusterQueueDoesNotExist (no usage), ClusterQueueIsInactive (the ClusterQueue stopped or
inactive; the message says why), else Ready. lastTransitionTime changes only when the condition's status does
(meta.SetStatusCondition), so a status the API already holds is not written again (observe.status.already_written).
"""
from __future__ import annotations

from datetime import datetime, timezone

from ..core.rules import CLUSTER_QUEUE_DOES_NOT_EXIST, CLUSTER_QUEUE_IS_INACTIVE
from ..objects.kueue import V1BETA2
from .localqueues import LocalQueueStats, local_queue_stats
from .status import _amount, active

CQ_INACTIVE = "Can't submit new workloads to clusterQueue"     # Kueue's clusterQueueIsInactiveMsg


def active_condition(state, lq) -> tuple[str, str, str]:
    """(status, reason, message) of the LocalQueue's Active condition, in Kueue's order: its own stopPolicy, then
    its ClusterQueue missing, then the ClusterQueue inactive or stopped."""
    if lq.stop_policy != "None":
        return "False", "Stopped", (f"LocalQueue is stopped (stopPolicy {lq.stop_policy}): admission resumes when "
                                    "its stopPolicy is set to None")
    cq = state.cluster_queues.get(lq.cluster_queue)
    if cq is None:
        return "False", CLUSTER_QUEUE_DOES_NOT_EXIST, f"{CQ_INACTIVE}: ClusterQueue {lq.cluster_queue} does not exist"
    if cq.name in state.tree.inactive:
        return "False", CLUSTER_QUEUE_IS_INACTIVE, f"{CQ_INACTIVE}: {state.tree.inactive[cq.name]}"
    if cq.stop_policy != "None":
        return "False", CLUSTER_QUEUE_IS_INACTIVE, f"{CQ_INACTIVE}: ClusterQueue {cq.name} is stopped (stopPolicy " \
                                                  f"{cq.stop_policy})"
    return "True", "Ready", "Can submit new workloads to localQueue"


def _flavors(cq, totals: dict) -> list[dict]:
    """Kueue's filterLocalQueueUsage: every flavor of every resource group, each with its covered resources."""
    if cq is None:
        return []
    return [{"name": f.name, "resources": [{"name": r, "total": _amount(r, totals.get((f.name, r), 0))}
                                           for r in sorted(group.covered)]}
            for group in cq.resource_groups for f in group.flavors]


def local_queue_status(state, lq, s: LocalQueueStats, now: str) -> dict:
    """The body of one LocalQueue's status patch."""
    status, reason, message = active_condition(state, lq)
    cq = state.cluster_queues.get(lq.cluster_queue)
    usage_field = "flavorsUsage" if lq.api_version == V1BETA2 else "flavorUsage"
    return {"status": {
        "pendingWorkloads": len(s.pending) if lq.stop_policy == "None" else 0,
        "reservingWorkloads": len(s.reserving), "admittedWorkloads": len(s.admitted),
        "flavorsReservation": _flavors(cq, s.reserved), usage_field: _flavors(cq, s.used),
        "conditions": [*(c for c in lq.status.get("conditions") or ()
                         if isinstance(c, dict) and c.get("type") != "Active"),
                       active(lq.status, status, reason, message, now, lq.generation)]}}


def local_queue_statuses(state, now: str | None = None) -> dict[str, dict]:
    """LocalQueue key (namespace/name) -> the body of its status patch."""
    now = now or datetime.now(timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")
    stats = local_queue_stats(state)
    return {key: local_queue_status(state, lq, stats[key], now) for key, lq in state.local_queues.items()}
