"""YuniKorn's preemption laws (seed 002) and who may preempt at all (preemption.mode, preemptionPolicy,
the preemption delay).

Law 2, guaranteeProtection: never a victim whose queue would drop below its nominal quota. Law 3:
never a pod of one's own gang or owner. Law 7, the preemption fence: victims stay inside the nearest
fenced ClusterQueue or Cohort. allow-preemption "false": a pod taken only as a last resort.
"""
from __future__ import annotations

from ...objects.kueue import ClusterQueue
from ...objects.annotations import FENCE
from ...objects.pod import PodInfo
from ..resource_node import QuotaNode
from ..view import PolicyView
from ..workload import COSCHEDULING_GROUP, KUEUE_GROUP, Workload

GANG_LABELS = (KUEUE_GROUP, COSCHEDULING_GROUP)


def same_group(a: PodInfo, b: PodInfo) -> bool:
    """Law 3: never preempt a pod of one's own gang or owner."""
    if a.namespace != b.namespace:
        return False
    if a.owner and b.owner and a.owner.uid and a.owner.uid == b.owner.uid:
        return True
    return any(a.labels.get(k) and a.labels.get(k) == b.labels.get(k) for k in GANG_LABELS)


def preemption_fence(state: PolicyView, cq: ClusterQueue) -> QuotaNode | None:
    """Law 7: the nearest fenced node at or above the ClusterQueue (the ClusterQueue itself or the lowest
    fenced Cohort over it, the tightest fence); victims stay inside it (None: no fence)."""
    node = state.ledger.quota_node(cq.name)
    while node is not None:
        spec = state.cluster_queues.get(node.name) if not node.is_cohort else state.cohorts.get(node.name)
        if spec is not None and spec.fence:
            return node
        node = node.parent
    return None



def inside(node: QuotaNode, root: QuotaNode) -> bool:
    while node is not None:
        if node is root:
            return True
        node = node.parent
    return False


def opted_out(state: PolicyView, pod: PodInfo) -> bool:
    """YuniKorn's allow-preemption: "false" on the pod's PriorityClass asks not to be preempted."""
    pc = state.priority_classes.get(pod.priority_class) if pod.priority_class else None
    return pc is not None and not pc.allow_preemption


def would_break_guarantee(state: PolicyView, c) -> bool:
    """Law 2, guaranteeProtection: taking c would drop its ClusterQueue below its nominal quota."""
    node = state.ledger.quota_node(c.cluster_queue)
    return node is not None and any(node.usage.get(fr, 0) - v < node.subtree.get(fr, 0)
                                    for fr, v in c.usage.items())


def guarantee_protected(state: PolicyView, c) -> bool:
    """guaranteeProtection is on and c is protected by it."""
    return state.config.guarantee_protection and would_break_guarantee(state, c)


def may_preempt(state: PolicyView, workload: Workload, cq: ClusterQueue | None, now: float) -> str:
    """Why this workload may not trigger preemption now ("" when it may): preemption.mode, its pods'
    preemptionPolicy, the ClusterQueue's preemption delay."""
    mode = state.config.preemption_mode
    if mode == "None":
        return "preemption is off (preemption.mode None)"
    if cq is None:
        return "" if mode in ("Auto", "Priority") else "pods in no queue may not preempt (preemption.mode Quota)"
    if mode == "Priority":
        return "preemption.mode Priority leaves preemption to kube-scheduler's priorities"
    if workload.template.preemption_policy == "Never":
        return "the pod's preemptionPolicy is Never"
    left = delay_left(cq, workload, now)
    if left > 0:
        return (f"preemption delay: ClusterQueue {cq.name} lets a pod preempt {cq.preemption_delay:g}s after "
                f"it was created, {left:g}s from now (capacity freed meanwhile is used first)")
    return ""


def delay_left(cq: ClusterQueue, waiting: PodInfo | Workload, now: float) -> float:
    """Seconds until a pod or a workload may preempt under its ClusterQueue's preemption delay, counted from its
    creation (0 or less: it may)."""
    wait = cq.preemption_delay
    return wait - (now - (waiting.created or now)) if wait else 0.0


def no_candidate(state: PolicyView, cq: ClusterQueue) -> str:
    """Why nothing may go, naming the preemption fence when one bounds the search."""
    why = "no candidate: no running pod may be preempted under this ClusterQueue's policies"
    fence = preemption_fence(state, cq)
    if fence is not None:
        kind = "Cohort" if fence.is_cohort else "ClusterQueue"
        why += f" inside the preemption fence on {kind} {fence.name} ({FENCE})"
    return why
