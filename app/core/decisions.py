"""The decisions core/ returns. The scheduler's commit (app/scheduler/commit.py) applies them to state/
(Reserve, Hold, Requeue) and hands the writes to act/ (Evict); a Refuse becomes filter's answer, with its reason
for the admin."""
from __future__ import annotations

from dataclasses import dataclass, field

from ..objects.pod import PodInfo
from .flavors import Charge
from .rules import (BORROWING_LEVEL_ORDER, EVICTED, FAIR_SHARING_ORDER, NOMINAL_QUOTA_FIRST, QUOTA_EXCEEDED,
                    STRICT_FIFO, STRICT_FIFO_RESERVATION, VICTIMS_STILL_RUNNING)
from .workload import WorkloadKey

# The rules that refuse a pod for want of quota (or its order in the queue): what frees quota clears them.
QUOTA_RULES = frozenset({QUOTA_EXCEEDED, VICTIMS_STILL_RUNNING, STRICT_FIFO, STRICT_FIFO_RESERVATION,
                         NOMINAL_QUOTA_FIRST, BORROWING_LEVEL_ORDER, FAIR_SHARING_ORDER})


@dataclass(frozen=True, slots=True)
class Refuse:
    """The pod may not pass now: the rule that decided and a reason a person can act on."""
    rule: str
    reason: str
    cluster_queue: str = ""


@dataclass(frozen=True, slots=True)
class Reserve:
    """Quota kept for a pod between filter (or preempt) and its bind, for timeout seconds (None: the
    configured reservation timeout)."""
    uid: str
    charge: Charge
    timeout: float | None = None


@dataclass(slots=True)
class Hold:
    """Victims chosen for a preemptor: the node's room and the quota are held for it until they are
    gone (YuniKorn's node reservation). Members of a pod group share one victims dict."""
    preemptor: str                          # uid
    node: str
    requests: dict[str, int]
    charge: Charge | None
    victims: dict[str, tuple[str, str]]     # victim uid -> (reason, message)


@dataclass(frozen=True)
class Evict:
    """Evict pod, for reason (a Kueue eviction or preemption reason), with message on the pod; once
    written, the journal gets {verb, outcome, message, **record} about the pod."""
    pod: PodInfo
    reason: str
    message: str
    verb: str
    outcome: str = EVICTED
    record: dict = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class Requeue:
    """waitForPodsReady: a workload whose pods were not all Ready in time is evicted whole (its members'
    holds and reservations end) and waits until at (its backoff), or for good once deactivated (past
    backoffLimitCount)."""
    unit: WorkloadKey                       # what timed out (core.readiness.unit_of)
    workload: str                           # what requeues count against (core.readiness.requeue_key)
    count: int
    at: float
    deactivated: bool
    first_created: float | None             # requeuingStrategy.timestamp Creation keeps this place
    owner_uid: str
    members: tuple[PodInfo, ...]
    evictions: tuple[Evict, ...]
