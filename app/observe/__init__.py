"""What an admin can see of Quotient's decisions: /debug views, Prometheus metrics and decision logs.

Nothing here decides or changes the state: views read it (and ask core.admission.decide,
which takes back what it charges), metrics are counted by journal listeners and read
from the state when Prometheus scrapes, and logs print what the journal records.
"""
from __future__ import annotations

import weakref
from dataclasses import dataclass

from .collectors import GateCollector
from .logs import DecisionLog
from .metrics import Metrics
from .writes import ObservedWriter


@dataclass
class Observers:
    metrics: Metrics
    decision_log: DecisionLog


_attached: "weakref.WeakKeyDictionary[object, Observers]" = weakref.WeakKeyDictionary()


def attach(scheduler) -> Observers:
    """Metrics and the decision log for this scheduler: journal listeners and a counting writer, once."""
    found = _attached.get(scheduler)
    if found is not None:
        return found
    metrics = Metrics(scheduler.state, scheduler.refusals)
    metrics.registry.register(GateCollector(scheduler.state, scheduler.gates))
    decision_log = DecisionLog(scheduler.journal)
    metrics.journal = scheduler.journal
    scheduler.journal.listeners.append(metrics.on_decision)
    scheduler.journal.listeners.append(decision_log)
    scheduler.commit.on_reserved.append(metrics.quota_reserved_pod)      # Kueue's workload counters
    scheduler.commit.on_admitted.append(metrics.admitted_pod)
    if not isinstance(scheduler.writer, ObservedWriter):
        scheduler.writer = ObservedWriter(scheduler.writer, scheduler.state, metrics)
    found = _attached[scheduler] = Observers(metrics, decision_log)
    return found
