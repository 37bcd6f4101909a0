"""The shapes Kueue's metrics take, shared by the ClusterQueue (observe.metrics) and LocalQueue
(observe.localqueue_metrics) families: units, histogram buckets and eviction labels, so the two agree."""
from __future__ import annotations

from ..objects.quantity import MILLI_RESOURCES
from ..core.rules import DEACTIVATED, PREEMPTED, PREEMPTION_REASONS, REQUEUING_LIMIT_EXCEEDED


def amount(value: int, resource: str) -> float:
    """A quantity as Prometheus shows it: CPU in cores, everything else in base units."""
    return value / 1000 if resource in MILLI_RESOURCES else float(value)


def kueue_buckets(count: int) -> tuple[float, ...]:
    """Kueue's generateExponentialBuckets(count): 1 s, then 2.5 s doubling, count bounds in all."""
    return (1.0,) + tuple(2.5 * 2 ** i for i in range(count - 1))


def eviction_labels(reason: str, deactivated: bool = False) -> tuple[str, str]:
    """Kueue's (reason, underlying_cause) of an eviction (metrics.go EvictedWorkloadsTotal): every preemption is
    Preempted; a workload past waitForPodsReady's backoffLimitCount is Deactivated for RequeuingLimitExceeded."""
    if reason in PREEMPTION_REASONS:
        return PREEMPTED, ""
    if deactivated:
        return DEACTIVATED, REQUEUING_LIMIT_EXCEEDED
    return reason, ""
