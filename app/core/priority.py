"""A pod's two priorities: its own (spec.priority, from its PriorityClass), which kube-scheduler orders and
preempts by, and its workload's, which every Kueue rule reads (queue order, candidates, victims).

Kueue's KEP-973 (concepts/workload_priority_class): the WorkloadPriorityClass named by the label
kueue.x-k8s.io/priority-class wins over the pod's PriorityClass, so a batch job can queue and preempt
ahead of others without preempting in kube-scheduler. The workload's priority follows the label and the
class's value as they change (Kueue's WorkloadPriorityClass controller updates the Workloads).
"""
from __future__ import annotations

from ..objects.pod import PodInfo

FROM_WORKLOAD_CLASS = "WorkloadPriorityClass "     # priority_from of a priority such a class gave


def resolve(pod: PodInfo, classes: dict, workload_classes: dict[str, int], before: PodInfo | None = None) -> None:
    """Fill pod_priority and preemptionPolicy as the Priority admission plugin does (the PriorityClass, else
    the globalDefault one, else 0), then priority, priority_from and missing_priority_class. Only a pod in a
    queue is a workload: the label means nothing on another. While the named WorkloadPriorityClass does not
    exist, a pod already known (`before`, its previous record, itself not waiting for a class) keeps its
    priority, as Kueue's Workload keeps its spec.priority when the label's reconcile fails; a new one gets
    none (missing_priority_class) and waits, as Kueue creates no Workload for it."""
    pod._shape = pod._workload = None      # its shape and workload are worked out again from what it is now
    pc = classes.get(pod.priority_class) if pod.priority_class else None
    default = None
    if pc is None and not pod.priority_class:
        default = pc = next((c for c in classes.values() if c.global_default), None)
    if pod.pod_priority is None:
        pod.pod_priority = pod.priority if pod.priority is not None else pc.value if pc else 0
    if not pod.preemption_policy:
        pod.preemption_policy = pc.preemption_policy if pc else "PreemptLowerPriority"
    pod.priority, pod.missing_priority_class = pod.pod_priority, ""
    pod.priority_from = f"PriorityClass {pod.priority_class}" if pod.priority_class else \
        f"globalDefault PriorityClass {default.name}" if default is not None else "spec.priority"
    name = pod.workload_priority_class
    if not name or not pod.queue_name:
        return
    value = workload_classes.get(name)
    if value is not None:
        pod.priority, pod.priority_from = value, FROM_WORKLOAD_CLASS + name
    elif before is not None and not before.missing_priority_class:
        pod.priority, pod.priority_from = before.priority, before.priority_from
    else:
        pod.missing_priority_class = name
