"""bind, re-checked: the charge a binding takes now, or why it is refused. kube-scheduler binds after filter
passed the pod, but the cluster may have moved since (quota taken, room held for a preemptor, a flavor's
nodes changed), and the quota invariant is checked on the charge at commit (state.bindings.commit)."""
from __future__ import annotations

from ..objects.offered_nodes import OfferedNodes
from ..objects.pod import PodInfo
from .admission import decide
from .stop_policy import local_queue_stopped
from .drift import changed_since
from .flavors import Charge
from .placement import shortfall
from .view import BindingView
from .workload import Workload, group_of


def room_refusal(state: BindingView, pod: PodInfo, node: str) -> str:
    """Why pod may not bind to node whatever its quota: an unknown node, or room held there for others."""
    if node not in state.nodes:
        return f"node {node} is not known to Quotient"
    if state.holds and any(h.node == node for u, h in state.holds.items() if u != pod.uid):
        short = shortfall(pod.requests, state.workloads.room(node, pod.uid))
        if short:
            return (f"node {node}: {short.lower()} once the room held there for other pods "
                    "(preemptors, pod group members) is counted")
    return ""


def changed_refusal(state: BindingView, pod: PodInfo) -> str:
    """Why the pod may not bind on its reservation: its requests, queue, group or priority changed since the
    decision (the watch's newest version of it against what filter decided on), or ""."""
    held = state.reservations.get(pod.uid)
    if held is None or held.decided is None:
        return ""
    lq = state.local_queues.get(f"{pod.namespace}/{pod.queue_name}") if pod.queue_name else None
    if lq is not None and lq.stop_policy != "None" and not _admitted_workload(state, pod):
        return local_queue_stopped(lq)      # Kueue: a stopped LocalQueue's reserving workloads lose their reservation
    return changed_since(held.decided, state.workloads.decided(pod.uid, _cluster_queue(state, pod)), pod.key)


def _admitted_workload(state: BindingView, pod: PodInfo) -> bool:
    """Whether the pod's workload is admitted (a pod of its Job or group is bound): a stopped LocalQueue's admitted
    workloads run to completion under Hold, so their pods keep their places (a Job's pod replacing one that ended)."""
    key = group_of(pod)
    return bool(key) and any(m.uid in state.admitted for m in state.store.members(key))


def _cluster_queue(state: BindingView, pod: PodInfo) -> str:
    lq = state.local_queues.get(f"{pod.namespace}/{pod.queue_name}") if pod.queue_name else None
    return lq.cluster_queue if lq is not None else ""


def reserved_charge(state: BindingView, pod: PodInfo, node: str) -> Charge | None:
    """The charge filter reserved for pod, when every flavor of it covers node (None: decide anew)."""
    held = state.reservations.get(pod.uid)
    if held is not None and all(state.ledger.node_in_flavor(node, f) for f in set(held.charge.flavors.values())):
        return held.charge
    return None


def charge_at_bind(state: BindingView, pod: PodInfo, node: str) -> tuple[Charge | None, str]:
    """Admission decided again for pod on node (its reservation, if any, already given back): the charge,
    (None, "") for a pod Quotient does not manage, or (None, why) when it no longer fits."""
    verdict = decide(state, Workload.of_pod(pod), OfferedNodes([node]))
    if not verdict.managed:
        return None, ""
    if not verdict.admit:
        return None, f"quota no longer fits at bind: {verdict.reason}"
    a = verdict.assignment
    outside = [f for f in set(a.flavors.values()) if not state.ledger.node_in_flavor(node, f)]
    if outside:
        return None, f"node {node} is not in flavor {', '.join(sorted(outside))}"
    return Charge(verdict.cluster_queue, a.flavors, a.usage), ""
