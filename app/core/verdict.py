"""What admission decides for a workload (core.admission.decide): admitted or refused, by which rule, why, and
what a refusal may be remembered by (state.blocked)."""
from __future__ import annotations

from dataclasses import dataclass

from .flavors import Assignment

# A refusal's place when nothing ahead of the pod took quota on its walk: a pod of its shape anywhere in the queue
# sees no more ahead of it (those ahead of the decided pod are fewer still), so it is refused alike. Below every
# queue place (state.queues.queue_key: a non-empty tuple).
QUEUE_HEAD: tuple = ()


@dataclass(slots=True)
class Verdict:
    rule: str                      # short name of the deciding rule, e.g. QuotaExceeded (core.rules)
    admit: bool = False
    reason: str = ""
    resolvable: bool = False       # True: preemption could help (FailedNodes)
    managed: bool = True           # False: pod has no queue and passes untouched
    cluster_queue: str = ""
    assignment: Assignment | None = None
    holds_from: tuple | None = None   # a refusal that stands from this queue place on, ahead of the pod (queue_ahead)
    short: dict | None = None         # (flavor, resource) -> how much more the pod needed than was available (core.shortfall)
