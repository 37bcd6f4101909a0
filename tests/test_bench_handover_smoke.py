"""The hand-over benchmark (tests/bench/bench_handover.py) in its tiny mode, as a developer runs it: two replicas
against the fake API, the leader SIGTERMed, the first verb answered by the new leader through the label the
Service selects; and the old design's figure (a replacement that lists the cluster first)."""
import re
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]


def test_the_handover_is_measured_step_by_step_and_beside_the_old_design():
    done = subprocess.run([sys.executable, str(REPO / "tests" / "bench" / "bench_handover.py"), "--quick"],
                          capture_output=True, text=True, timeout=180, cwd=str(REPO))
    out = done.stdout + done.stderr
    assert done.returncode == 0, out
    run = re.search(r"run 1: hand-over ([\d.]+) s \((quotient-[ab]) -> (quotient-[ab]): released \+([\d.]+) s, "
                    r"taken \+([\d.]+) s, labelled \+([\d.]+) s, unlabelled \+([\d.]+) s; first verb \+[\d.]+ s; "
                    r"old process exited 0\)", out)
    assert run, out
    total, old, new, released, taken, labelled, unlabelled = run.groups()
    assert old != new
    # each step after the one it needs: the Lease released, then taken, then the new pod labelled, then a verb
    assert float(released) <= float(taken) <= float(labelled) <= float(total), out
    assert re.search(r"hand-over \(label and select, a synced standby\): median [\d.]+ s", out), out
    assert re.search(r"old design \(only the leader Ready, its replacement lists 20 pods first\): median [\d.]+ s", out), out
