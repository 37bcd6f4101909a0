"""One journal record type per verb (issue 13, point 4): what each decision writes to /debug's journal."""
from __future__ import annotations

import pytest

from app.journal import BindRecord, EvictionRecord, FilterRecord, Journal, PreemptRecord, ReclaimRecord


@pytest.mark.parametrize("record,entry", [
    (FilterRecord(pod="ns/p", outcome="QuotaExceeded", reason="cpu 2 > 1", queue="cq", resolvable=True, offered=3,
                  tried=["on-demand: cpu"]),
     {"verb": "filter", "pod": "ns/p", "outcome": "QuotaExceeded", "reason": "cpu 2 > 1", "queue": "cq",
      "resolvable": True, "offered": 3, "tried": ["on-demand: cpu"]}),
    (FilterRecord(pod="ns/p", outcome="GroupReserved", group="ns/g", node="n1"),
     {"verb": "filter", "pod": "ns/p", "outcome": "GroupReserved", "reason": "", "group": "ns/g", "node": "n1"}),
    (PreemptRecord(pod="ns/p", outcome="NoPreemption", reason="why", queue="", candidates=["n1"], victims={},
                   reasons=[], why_not={}),
     {"verb": "preempt", "pod": "ns/p", "outcome": "NoPreemption", "reason": "why", "queue": "",
      "candidates": ["n1"], "victims": {}, "reasons": [], "why_not": {}}),
    (ReclaimRecord(pod="ns/p", outcome="Preempting", reason="ns/v (InClusterQueue)", queue="cq", node="n1",
                   victims={"n1": ["ns/v"]}, reasons=["InClusterQueue"]),
     {"verb": "reclaim", "pod": "ns/p", "outcome": "Preempting", "reason": "ns/v (InClusterQueue)", "queue": "cq",
      "node": "n1", "victims": {"n1": ["ns/v"]}, "reasons": ["InClusterQueue"]}),
    (BindRecord(pod="ns/p", outcome="Bound", node="n1", queue="cq"),
     {"verb": "bind", "pod": "ns/p", "outcome": "Bound", "reason": "", "queue": "cq", "node": "n1"}),
    (EvictionRecord(verb="ready", pod="ns/p", outcome="Evicted", reason="evicted whole and requeued",
                    reasons=["PodsReadyTimeout"], workload="ns/Job/x", requeues=1, deactivated=False),
     {"verb": "ready", "pod": "ns/p", "outcome": "Evicted", "reason": "evicted whole and requeued",
      "reasons": ["PodsReadyTimeout"], "workload": "ns/Job/x", "requeues": 1, "deactivated": False}),
])
def test_each_verb_records_its_own_fields_and_leaves_unset_ones_out(record, entry):
    journal = Journal()
    journal.record(record.entry(12.0))
    assert journal.of_pod("ns/p") == [{"time": 12.0, **entry}]


def test_a_record_type_refuses_a_field_of_another_verb():
    with pytest.raises(TypeError):
        BindRecord(pod="ns/p", outcome="Bound", victims={})
