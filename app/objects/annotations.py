"""The annotations Quotient reads, decoded once when their object is: the preemption fence and delay
(on ClusterQueues and Cohorts), allow-preemption (on PriorityClasses, YuniKorn's), and a pod group's
total count (on pods, Kueue's)."""
from __future__ import annotations

from .meta import parse_duration

FENCE = "quotient.dev/preemption-fence"
DELAY = "quotient.dev/preemption-delay"
ALLOW = ("yunikorn.apache.org/allow-preemption", "quotient.dev/allow-preemption")
GROUP_TOTAL = "kueue.x-k8s.io/pod-group-total-count"
DEFAULT_DELAY = 30.0        # seed 002 抢占配置: "如果字符串解析失败,一样使用 30s"


def fenced(annotations: dict[str, str]) -> bool:
    """YuniKorn's preemption fence: victims of a preemptor inside stay inside."""
    return annotations.get(FENCE) == "true"


def preemption_delay(annotations: dict[str, str]) -> float:
    """YuniKorn's preemption delay in seconds: 0 without one, 30 when it does not parse (seed 002)."""
    delay = annotations.get(DELAY)
    if not delay:
        return 0.0
    try:
        return parse_duration(delay, DELAY)
    except ValueError:
        return DEFAULT_DELAY


def allows_preemption(annotations: dict[str, str]) -> bool:
    """YuniKorn's allow-preemption: "false" asks that the PriorityClass's pods not be preempted."""
    return not any(annotations.get(a) == "false" for a in ALLOW)


def group_total(annotations: dict[str, str]) -> int | None:
    """Kueue's pod-group-total-count: how many members the group needs (None: absent or not a positive
    integer, so the group's size is unknown)."""
    raw = annotations.get(GROUP_TOTAL)
    try:
        size = int(raw) if raw is not None else None
    except (TypeError, ValueError):
        return None
    return size if size and size > 0 else None
