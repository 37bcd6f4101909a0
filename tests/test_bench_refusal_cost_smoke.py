"""tests/bench/bench_refusal_cost.py at a small size: its cluster is Kueue's scale test, every asked pod is refused,
and most answers come from what blocks the queues (state.blocked), not from a walk of them."""
from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent / "bench"))

import bench_refusal_cost as bench  # noqa: E402


def test_every_asked_pod_is_refused_and_most_answers_are_remembered():
    backlog = bench.Backlog(300, churn=10, frees=40)
    backlog.round(40, timed=False)
    backlog.round(400)
    result = backlog.result()
    assert result["refused"] == result["asks"] == 400
    assert result["blocked_hits"] > result["asks"] / 2, result
