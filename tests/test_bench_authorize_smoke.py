"""tests/bench/bench_authorize.py at a small size: it runs, and a verb on a port with identities is answered."""
from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent / "bench"))

import bench_authorize as bench  # noqa: E402


def test_the_benchmark_runs():
    result = bench.run(50)
    assert result["with_us"] > 0 and result["without_us"] > 0 and result["authorize_ns"] > 0
