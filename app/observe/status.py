"""The ClusterQueue .status Quotient publishes, so `kubectl get clusterqueues` is truthful: flavorsUsage
(total and borrowed), pending, reserving and admitted workloads (a Job or pod group is one, as Kueue counts), the
fair-sharing share, and the Active condition (why an inactive or stopped queue admits nothing). A status the API
already holds is not written again: every write, even one that changes nothing, is an event to every watcher."""
from __future__ import annotations

from ..core.dominant_share import dominant_resource_share
from ..objects.meta import format_time
from .views import queue_status
from .workload_counts import counts as workload_counts


def _amount(resource: str, value: int) -> str:
    return f"{value}m" if resource == "cpu" else str(value)


def cluster_queue_statuses(state) -> dict[str, dict]:
    """ClusterQueue name -> the body of its status patch, from the live quota tree."""
    counts, out = workload_counts(state), {}
    for name, cq in state.cluster_queues.items():
        node = state.tree.queues.get(name)
        if node is None:
            continue
        usage: dict[str, list] = {}
        for (flavor, resource), amount in node.usage.items():
            borrowed = max(0, amount - node.subtree.get((flavor, resource), 0))
            usage.setdefault(flavor, []).append({"name": resource, "total": _amount(resource, amount),
                                                 "borrowed": _amount(resource, borrowed)})
        found = counts[name]
        pending, reserving, admitted = found.active + found.inadmissible, found.reserving, found.admitted
        share = dominant_resource_share(node, cq.fair_weight)[0] if node.parent is not None else 0
        out[name] = {"status": {"flavorsUsage": [{"name": f, "resources": r} for f, r in usage.items()],
                                "admittedWorkloads": admitted, "pendingWorkloads": pending,
                                "reservingWorkloads": reserving + admitted, "fairSharing": {"weightedShare": share},
                                "conditions": [active_condition(state, name, cq)]}}
    return out


def active_condition(state, name: str, cq) -> dict:
    """Kueue's Active condition (pkg/cache/scheduler/clusterqueue.go, inactiveReason): True "Ready", or False with
    why it admits nothing (inactive: state.tree; stopped: stopPolicy)."""
    kind, why = queue_status(state, name)
    if kind == "inactive":
        status, reason, message = "False", state.tree.codes.get(name, "Inactive"), f"Can't admit new workloads: {why}"
    elif kind == "stopped":
        status, reason, message = "False", "Stopped", f"Can't admit new workloads: {why}"
    else:
        status, reason, message = "True", "Ready", "Can admit new workloads"
    return active(cq.status, status, reason, message, format_time(state.clock()))


def active(held: dict, status: str, reason: str, message: str, now: str, generation: int = 0) -> dict:
    """A metav1.Condition "Active" for a queue whose status the API holds as `held`: its lastTransitionTime is kept
    while its status stays (an unchanged queue's status is not written again), its message cut to the API's
    32768 characters (a long list of missing flavors must not make every write fail)."""
    old = next((c for c in held.get("conditions") or () if isinstance(c, dict) and c.get("type") == "Active"), {})
    since = old.get("lastTransitionTime") if old.get("status") == status else None
    condition = {"type": "Active", "status": status, "reason": reason, "message": message[:32768],
                 "lastTransitionTime": since or now}
    if generation:
        condition["observedGeneration"] = generation
    return condition


def _merged(target: object, patch: object) -> object:
    """target with an RFC 7386 merge patch applied (what the API server makes of Quotient's status patch)."""
    if not isinstance(patch, dict):
        return patch
    out = dict(target) if isinstance(target, dict) else {}
    for k, v in patch.items():
        if v is None:
            out.pop(k, None)
        else:
            out[k] = _merged(out.get(k), v)
    return out


def already_written(stored: dict, body: dict) -> bool:
    """Whether the status patch body would leave the status the API holds (as the watch last showed it) as it is."""
    status = body.get("status") or {}
    return _merged(stored, status) == stored
