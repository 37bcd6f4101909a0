"""Fair-sharing preemption's search (Kueue's TargetClusterQueueOrdering, walked from the root down) against
classic preemption's, on one quota tree.

    .venv/bin/python tests/bench/bench_fair_preemption.py [--quick] [--runs N]

The tree: a root Cohort with `teams` sub-cohorts of `queues` ClusterQueues each (1 CPU nominal), every
queue running 1 to 7 pods of 1 CPU (so most borrow), and the preemptor's ClusterQueue (in the first team)
with its nominal quota unused; the tree's quota is exactly used up. The preemptor needs `need` CPUs:
twice, once within its nominal quota (the within-nominal path) and once borrowing (the strategies run).
Printed: the median time of each search, the victims it found and the ratio fair / classic, so the
walk's cost (shares of every child at each level, per victim) is seen against the heap-less classic
search on the same machine in the same run. Not a pytest test (tests/bench/conftest.py keeps pytest
out); tests/test_bench_fair_preemption_smoke.py runs --quick once.
"""
from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "tests"))

from app.config import Configuration  # noqa: E402
from app.core.admission import assign  # noqa: E402
from app.core.preemption.candidates import find_candidates  # noqa: E402
from app.core.preemption.quota_targets import quota_targets  # noqa: E402
from app.core.preemption.targets import Preemptor  # noqa: E402
from app.core.resource_node import available  # noqa: E402
from builders import ClusterQueue, Cohort, FlavorQuotas, LocalQueue, Node, Pod, ResourceFlavor  # noqa: E402
from helpers import make_state, workload_info  # noqa: E402


def cluster(teams: int, queues: int, own: int, need: int, fair: bool):
    """The state described in the module docstring; the preemptor p (need CPUs) pending in cq-own."""
    cpu = lambda n: FlavorQuotas("default-flavor").resource("cpu", str(n))  # noqa: E731
    objects = [ResourceFlavor("default-flavor").obj(), Node("n1").cpu("100000").obj(), Cohort("root").obj()]
    running = 0
    for t in range(teams):
        objects.append(Cohort(f"team-{t}").parent("root").obj())
        for q in range(queues):
            name = f"cq-{t}-{q}"
            objects += [ClusterQueue(name).cohort(f"team-{t}").resource_group(cpu(1)).obj(),
                        LocalQueue("lq", name).cluster_queue(name).obj()]
            for i in range(1 + (t * queues + q) % 7):
                objects.append(Pod(f"p{i}", name).queue("lq").cpu("1").priority(i % 3).created(1 + i).node("n1").obj())
                running += 1
    quota = teams * queues
    objects[2] = Cohort("root").resource_group(cpu(max(0, running - quota))).obj()
    objects += [ClusterQueue("cq-own").cohort("team-0").resource_group(cpu(own))
                .preemption({"reclaimWithinCohort": "Any"}).obj(),
                LocalQueue("lq", "own").cluster_queue("cq-own").obj(),
                Pod("p", "own").queue("lq").cpu(str(need)).created(1000).obj()]
    if own:          # the preemptor's nominal quota is the tree's too: it is used up by the others as well
        objects[2] = Cohort("root").resource_group(cpu(max(0, running - quota - own))).obj()
    return make_state(*objects, config=Configuration(fair_sharing=fair))


def search(state) -> tuple[float, int]:
    p = workload_info(state, "own", "p")
    _, cq = state.store.queue_of(p.template)
    a = assign(state, p, cq)
    pre = Preemptor(p, cq, state.ledger.quota_node(cq.name), a.usage, set(a.flavors.values()))
    needs = {fr for fr, v in pre.usage.items() if v > available(pre.node, fr)}
    start = time.perf_counter()
    targets = quota_targets(state, pre, find_candidates(state, pre, needs, set()))
    return time.perf_counter() - start, len(targets or [])


def run(teams: int, queues: int, need: int, runs: int) -> list[dict]:
    rows = []
    for label, own in (("within nominal", need), ("borrowing", 0)):
        row = {"case": label}
        for kind, fair in (("fair", True), ("classic", False)):
            state = cluster(teams, queues, own, need, fair)
            times, victims = [], 0
            for _ in range(runs):
                t, victims = search(state)
                times.append(t)
            row[kind] = (statistics.median(times) * 1000, victims)
        rows.append(row)
    return rows


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="a small tree, few runs")
    parser.add_argument("--runs", type=int, default=None)
    args = parser.parse_args(argv)
    teams, queues, need = (3, 5, 5) if args.quick else (10, 20, 50)
    runs = args.runs or (3 if args.quick else 15)
    print(f"{teams} teams x {queues} ClusterQueues, the preemptor needs {need} CPUs; median of {runs} runs")
    for row in run(teams, queues, need, runs):
        (f_ms, f_n), (c_ms, c_n) = row["fair"], row["classic"]
        ratio = f_ms / c_ms if c_ms else float("inf")
        print(f"  {row['case']:15} fair {f_ms:8.2f} ms ({f_n} victims)   classic {c_ms:8.2f} ms ({c_n} victims)"
              f"   fair/classic {ratio:5.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
