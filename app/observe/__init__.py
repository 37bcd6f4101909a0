"""What an admin can see of Quotient's decisions: /debug views, Prometheus metrics and decision logs.

Nothing here decides or changes the state: views read it (and ask core.admission.decide,
which takes back what it charges), metrics are counted by journal listeners and read
from the state when Prometheus scrapes, and logs print what the journal records.
"""
from __future__ import annotations

import weakref
from dataclasses import dataclass

from .logs import DecisionLog
from .metrics import Metrics
from .writes import ObservedWriter


@dataclass
class Observers:
    metrics: Metrics
    decision_log: DecisionLog


_attached: "weakref.WeakKeyDictionary[object, Observers]" = weakref.WeakKeyDictionary()


def attach(extender) -> Observers:
    """Metrics and the decision log for this extender: journal listeners and a counting writer, once."""
    found = _attached.get(extender)
    if found is not None:
        return found
    metrics = Metrics(extender.state, extender.refusals)
    decision_log = DecisionLog(extender.journal)
    extender.journal.listeners.append(metrics.on_decision)
    extender.journal.listeners.append(decision_log)
    extender.state.workloads.on_reserved.append(metrics.quota_reserved_pod)      # Kueue's workload counters
    extender.state.ledger.on_admitted.append(metrics.admitted_pod)
    if not isinstance(extender.writer, ObservedWriter):
        extender.writer = ObservedWriter(extender.writer, extender.state, metrics)
    found = _attached[extender] = Observers(metrics, decision_log)
    return found
