"""The fair-sharing preemption benchmark (tests/bench/bench_fair_preemption.py) runs, and its tree is what it
says: within nominal quota both searches find the victims the preemptor needs; borrowing, neither may."""
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent / "bench"))

import bench_fair_preemption as bench  # noqa: E402


def test_quick_run_finds_the_same_victims_both_ways():
    within, borrowing = bench.run(teams=3, queues=5, need=5, runs=1)
    assert within["fair"][1] == within["classic"][1] == 5
    assert borrowing["classic"][1] == 0
    assert bench.main(["--quick", "--runs", "1"]) == 0
