"""tests/bench/bench_kueue_scale.py in a tiny mode (36 workloads in one cohort of 6 ClusterQueues): the fake
API, `quotient serve` and the kube-scheduler queue model run end to end; the test reads what it printed.
Nothing is timed: every workload must be admitted, within quota, with every verb answered."""
import re
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]


def test_kueue_baseline_replays_end_to_end_in_a_tiny_mode():
    done = subprocess.run([sys.executable, str(REPO / "tests" / "bench" / "bench_kueue_scale.py"), "--scale", "0.002",
                           "--timeout", "150"], capture_output=True, text=True, timeout=240, cwd=str(REPO))
    out = done.stdout + done.stderr
    assert done.returncode == 0, out
    assert "quotient: 36/36 workloads admitted" in out and "TIMED OUT" not in out, out
    peak, quota = map(int, re.search(r"peak cpu bound at once (\d+) \(the cohorts' nominal quota (\d+)\)", out).groups())
    assert 0 < peak <= quota, out
    outcomes = re.search(r"outcomes: (.*)", out).group(1)
    assert "transport error" not in outcomes and "HTTP" not in outcomes, out
    assert re.search(r"API errors 0\b", out), out
    for cls in ("small", "medium", "large"):
        assert re.search(rf"{cls}\s+time to admission avg\s+[\d.]+ s", out), out
