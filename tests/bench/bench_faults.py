"""Fault run for the quota invariant (issue 16, proof; issue "Quota is never exceeded"): many seeded cases that
mix late watch events, preemptions whose victims terminate slowly, and PodDisruptionBudget refusals (429), with
the invariant (app/sim/invariant.py) checked at every instant; prints how many instants were above quota.

    .venv/bin/python tests/bench/bench_faults.py [--quick] [--cases N] [--seed S]

Not a pytest test (tests/bench/conftest.py keeps pytest out; tests/test_bench_hostile_smoke.py runs it in a tiny
mode). It reuses the two drivers of tests/test_quota_property.py and adds the faults to each:

  sim      random quota trees and pods (random_scenario: cohorts, nested cohorts, borrowing and lending limits,
           every preemption policy, pod groups, priorities, scenario.quotient.dev/terminate-after) through the
           simulated kube-scheduler (app.sim), plus: Quotient's watch lagging behind the API by 0 to 10 s
           (scenario.quotient.dev/watch-lag: every change it sees arrives late), most pods terminating for 5 to
           60 s once evicted or preempted, and PodDisruptionBudgets (maxUnavailable 0, or a minAvailable) over
           a random share of the pods, so the simulated Eviction API answers 429. The invariant is checked after
           every verb call, every event (bind, eviction, a victim gone, a late delivery) and every step of the
           run, on the simulated API's pods (terminating ones still count);
  hostile  the verbs in any order (hostile_step: bind without filter, binds twice, stale watch events, deletions
           at random), plus: evictions that leave the pod Terminating in the API for a while (its deletion seen
           by the watch at once, or only at the next echo), kube-scheduler's preemption (preempt, then its victims
           deleted gracefully), PodDisruptionBudgets the API enforces (429 for an eviction they forbid), and
           Quotient's own eviction intents written at random moments. The invariant is checked after every
           step, on the API's own objects.

Prints the cases run, the faults they contained, the instants checked, the instants above quota (must be 0) and
the seeds of any failing case (run one again with --driver D --first K --cases 1 [--verbose]). Exit status 1 when
any instant was above quota (or a case crashed), else 0. Default 500 cases of each driver; --quick 50.
"""
from __future__ import annotations

import argparse
import asyncio
import collections
import copy
import os
import random
import sys
import tempfile
import time
import traceback
from pathlib import Path

import orjson

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[1]
sys.path.insert(0, str(HERE))
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "tests"))

import test_quota_property as prop  # noqa: E402

from app.act.writer import WriteError  # noqa: E402
from app.api.verbs import Verbs  # noqa: E402
from app.scheduler.scheduler import Scheduler  # noqa: E402
from app.objects.meta import format_time  # noqa: E402
from app.sim.scenario import SUBMIT_AT, TERMINATE_AFTER, WATCH_LAG, load_scenario  # noqa: E402
from app.sim.kube_scheduler import NotConverged, SimScheduler  # noqa: E402
from app.sync.dispatch import apply_object  # noqa: E402

SEED = prop.SEED
GUARD = "bench.quotient.dev/guarded"      # the label the PodDisruptionBudgets select
LAGS = ["0s", "50ms", "500ms", "2s", "10s"]


def pdb(name: str, namespace: str, rng: random.Random) -> dict:
    spec: dict = {"selector": {"matchLabels": {GUARD: name}}}
    if rng.random() < 0.5:
        spec["maxUnavailable"] = 0
    else:
        spec["minAvailable"] = rng.randint(1, 3)
    return {"apiVersion": "policy/v1", "kind": "PodDisruptionBudget", "metadata": {"name": name, "namespace": namespace},
            "spec": spec}


# ---------------------------------------------------------------- driver 1: the simulator
def faulty_scenario(seed: int) -> tuple[list[dict], dict]:
    """test_quota_property's random scenario for this seed, plus a lagging watch, slow terminations and PDBs."""
    docs = prop.random_scenario(random.Random(seed))          # the property test's case, exactly
    rng = random.Random(seed ^ 0x5EED)
    lag = rng.choice(LAGS)
    budgets = [f"pdb-{i}" for i in range(rng.randint(1, 2))]
    queues = [d["metadata"]["name"] for d in docs if d["kind"] == "LocalQueue"]
    at = next(i for i, d in enumerate(docs) if d["kind"] == "Expectation")
    for i in range(rng.randint(1, 4)):        # a late wave of important pods: preemptions once quota is full
        late = prop.random_pod(rng, f"late{i}", rng.choice(queues))
        late["spec"]["priority"] = rng.choice([100, 1000, 1000])
        late["spec"]["containers"][0]["resources"]["requests"]["cpu"] = str(rng.randint(2, 4))
        late["metadata"]["annotations"][SUBMIT_AT] = f"{rng.randint(20, 100)}s"
        docs.insert(at, late)
    for d in docs:
        if d["kind"] == "Pod":
            notes = d["metadata"].setdefault("annotations", {})
            if rng.random() < 0.8:
                notes[TERMINATE_AFTER] = f"{rng.randint(5, 60)}s"
            if rng.random() < 0.3:
                d["metadata"]["labels"][GUARD] = rng.choice(budgets)
        elif d["kind"] == "Expectation" and lag != "0s":
            d["metadata"] = {"annotations": {WATCH_LAG: lag}}
    at = next(i for i, d in enumerate(docs) if d["kind"] == "Pod")
    docs[at:at] = [pdb(name, "ns", rng) for name in budgets]
    return docs, {"lag": lag}


class CountingSim(SimScheduler):
    """The simulated kube-scheduler, checking the quota invariant at every instant, not only after binds."""

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.instants = self.above = 0
        self.late = 0

    def check_quota(self) -> None:
        self.instants += 1
        before = len(self.violations)
        super().check_quota()
        if len(self.violations) > before:
            self.above += 1

    async def post(self, verb: str, body: dict):
        out = await super().post(verb, body)
        self.check_quota()
        return out

    def handle(self, what: str, key: str, uid: str) -> None:
        super().handle(what, key, uid)
        self.check_quota()

    def on_evicted(self, key: str, reason: str, by_quotient: bool = False, preemption: bool = True) -> None:
        super().on_evicted(key, reason, by_quotient, preemption)
        self.check_quota()

    def lagging(self, deliver) -> None:
        def late() -> None:
            self.late += 1
            deliver()
            self.check_quota()
        super().lagging(late)


async def sim_case(seed: int, workdir: str, verbose: bool) -> dict:
    docs, info = faulty_scenario(seed)
    path = os.path.join(workdir, f"case-{seed}.yaml")
    Path(path).write_bytes(b"\n---\n".join(orjson.dumps(d) for d in docs))
    scenario = load_scenario(path)
    sim = CountingSim(scenario, verbose)
    until = scenario.expectation.until if scenario.expectation else None
    error = ""
    try:
        await sim.run(until)
    except NotConverged as e:
        error = str(e)
    events = collections.Counter(line.split()[1] for line in sim.timeline)     # "  12.0s  bound  ns/p1 -> ..."
    return {"instants": sim.instants, "above": sim.above, "violations": sim.violations[:5], "error": error,
            "late": sim.late, "lagging": info["lag"] != "0s", "preempted": events["preempted"] + events["evicted"],
            "terminating": events["terminating"], "refused": events["refused"], "bound": events["bound"],
            "with_preemption": bool(events["preempted"]), "with_refusal": bool(events["refused"]),
            "with_terminating": bool(events["terminating"]),
            "with_all": bool(sim.late and events["preempted"] and events["terminating"] and events["refused"])}


# ---------------------------------------------------------------- driver 2: the verbs in any order
class FaultyCluster(prop.Cluster):
    """The hostile driver's API, with PodDisruptionBudgets over some pods and pods that terminate slowly."""

    def __init__(self, rng: random.Random):
        super().__init__(rng)
        self.budgets: dict[str, dict] = {}
        for i in range(rng.randint(1, 2)):
            obj = pdb(f"pdb-{i}", "ns", rng)
            self.budgets[obj["metadata"]["name"]] = obj
            apply_object(self.state, copy.deepcopy(obj))      # Quotient's watch sees the budgets too
        self.gone_at: dict[str, float] = {}                   # uid -> when a terminating pod is gone
        self.unseen: set[str] = set()                         # terminating, not yet delivered to the watch

    def new_pod(self, priority: int | None = None) -> dict:
        n = len(self.first) + 1
        obj = prop.random_pod(self.rng, f"p{n}", self.rng.choice(self.queues))
        obj["metadata"]["annotations"].clear()
        if priority is not None:
            obj["spec"]["priority"] = priority
        if self.rng.random() < 0.5:
            obj["metadata"]["labels"][GUARD] = self.rng.choice(sorted(self.budgets))
        obj["metadata"].update(uid=f"uid-{n}", creationTimestamp=format_time(self.clock.now))
        self.first[obj["metadata"]["uid"]] = orjson.loads(orjson.dumps(self.write(obj)))
        apply_object(self.state, obj)
        return obj

    def forbids(self, uid: str) -> bool:
        """Would evicting this pod break its PodDisruptionBudget, counted on the API's pods (as the API does)."""
        obj = self.api.get(uid)
        name = (obj or {}).get("metadata", {}).get("labels", {}).get(GUARD)
        if obj is None or name is None or not obj["spec"].get("nodeName") or obj["metadata"].get("deletionTimestamp"):
            return False
        spec = self.budgets[name]["spec"]
        if spec.get("maxUnavailable") == 0:
            return True
        healthy = sum(1 for o in self.api.values() if o["metadata"]["labels"].get(GUARD) == name
                      and o["spec"].get("nodeName") and not o["metadata"].get("deletionTimestamp"))
        return healthy - 1 < spec["minAvailable"]

    def terminate(self, uid: str) -> None:
        """A graceful deletion: deletionTimestamp now, gone after a grace period; the watch sees it at once or late."""
        obj = self.api.get(uid)
        if obj is None:
            return
        if not obj["spec"].get("nodeName"):              # never ran: gone at once
            del self.api[uid]
            apply_object(self.state, obj, deleted=True)
            return
        if obj["metadata"].get("deletionTimestamp"):
            return
        obj = orjson.loads(orjson.dumps(obj))
        obj["metadata"]["deletionTimestamp"] = format_time(self.clock.now)
        self.write(obj)
        self.gone_at[uid] = self.clock.now + self.rng.choice([1, 5, 30, 90])
        if self.rng.random() < 0.5:
            apply_object(self.state, obj)
        else:
            self.unseen.add(uid)                          # the next echo (or nothing) delivers it

    def reap(self) -> int:
        """Terminating pods whose grace period is over leave the API (the watch sees the deletion)."""
        done = [u for u, t in self.gone_at.items() if t <= self.clock.now]
        for uid in done:
            del self.gone_at[uid]
            self.unseen.discard(uid)
            obj = self.api.pop(uid, None)
            if obj is not None:
                apply_object(self.state, obj, deleted=True)
        return len(done)


class FaultyWriter(prop.ApiWriter):
    """Evictions through an Eviction API that enforces PodDisruptionBudgets (429) and terminates pods slowly."""

    def __init__(self, cluster: FaultyCluster, stats: dict):
        super().__init__(cluster)
        self.stats = stats

    async def evict(self, pod, reason: str, message: str) -> None:
        cluster = self.cluster
        if cluster.forbids(pod.uid):
            self.stats["refused"] += 1
            raise WriteError(f"evicting {pod.key}: a PodDisruptionBudget allows no disruption now (429)")
        if pod.uid in cluster.api and cluster.api[pod.uid]["spec"].get("nodeName") and cluster.rng.random() < 0.7:
            self.stats["terminating"] += 1
            cluster.terminate(pod.uid)
        else:
            await super().evict(pod, reason, message)
        self.stats["evicted"] += 1


async def faulty_step(rng: random.Random, cluster: FaultyCluster, ext: Scheduler, stats: dict) -> None:
    what = rng.random()
    if what < 0.10:                                       # kube-scheduler's preemption: preempt, delete its victims
        if not cluster.api:
            return cluster.new_pod()
        uid = rng.choice(sorted(cluster.api))
        obj = cluster.api[uid]
        nodes = sorted(cluster.state.nodes)
        victims = {n: {"Pods": [{"UID": p.uid} for p in cluster.state.pods.values() if p.node_name == n]}
                   for n in nodes}
        answer = orjson.loads(Verbs(ext).preempt(orjson.dumps({"Pod": obj, "NodeNameToVictims": None,
                                                        "NodeNameToMetaVictims": victims})))
        chosen = answer.get("NodeNameToMetaVictims") or {}
        if chosen:
            node = rng.choice(sorted(chosen))
            stats["kube_preemptions"] += 1
            for v in chosen[node].get("Pods") or []:
                stats["terminating"] += 1
                cluster.terminate(v["UID"])
    elif what < 0.18:                                     # an important pod arrives: filter may preempt for it
        obj = cluster.new_pod(priority=rng.choice([100, 1000]))
        Verbs(ext).filter(orjson.dumps({"Pod": obj, "Nodes": None, "NodeNames": sorted(cluster.state.nodes)}))
        stats["urgent"] += 1
    elif what < 0.26:                                     # time passes, terminating pods finish
        cluster.clock.advance(rng.choice([1, 5, 30]))
        stats["gone"] += cluster.reap()
    elif what < 0.32:                                     # Quotient's eviction intents are written now
        await ext.actions.settle()
    elif what < 0.36 and cluster.unseen:                  # a terminating pod's update, delivered late
        uid = rng.choice(sorted(cluster.unseen))
        cluster.unseen.discard(uid)
        if uid in cluster.api:
            apply_object(cluster.state, cluster.api[uid])
            stats["late"] += 1
    else:
        await prop.hostile_step(rng, cluster, ext)


async def hostile_case(seed: int, steps: int) -> dict:
    rng = random.Random(seed)
    cluster = FaultyCluster(rng)
    stats = {"refused": 0, "terminating": 0, "evicted": 0, "kube_preemptions": 0, "gone": 0, "late": 0,
             "urgent": 0}
    ext = Scheduler(cluster.state, FaultyWriter(cluster, stats))
    instants = above = 0
    found: list[str] = []
    for step in range(steps):
        await faulty_step(rng, cluster, ext, stats)
        instants += 1
        now = prop.violations(cluster.state, cluster.truth())
        if now:
            above += 1
            found += [f"step {step}: {v}" for v in now]
    await ext.actions.settle()
    return {"instants": instants, "above": above, "violations": found[:5], "error": "", **stats}


# ---------------------------------------------------------------- main

def crash_safe(case) -> dict:
    """One case's outcome; a case that raised counts as a failing case, with its traceback."""
    try:
        return asyncio.run(case())
    except Exception as e:
        return {"instants": 0, "above": 0, "violations": [], "error": f"crashed: {e!r}\n"
                + traceback.format_exc()[-1500:]}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--quick", action="store_true", help="50 cases of each driver instead of 500")
    ap.add_argument("--cases", type=int, help="cases of each driver (default 500, quick 50)")
    ap.add_argument("--first", type=int, default=0, help="number of the first case (default 0)")
    ap.add_argument("--seed", type=int, default=SEED, help=f"base seed (default {SEED}, test_quota_property's)")
    ap.add_argument("--steps", type=int, default=300, help="steps of each hostile case (default 300)")
    ap.add_argument("--driver", choices=("both", "sim", "hostile"), default="both")
    ap.add_argument("--verbose", action="store_true", help="print the simulator's timeline")
    a = ap.parse_args(argv)
    cases = a.cases if a.cases is not None else (50 if a.quick else 500)
    numbers = range(a.first, a.first + cases)
    print(f"Quota invariant under faults: {cases} case(s) of each driver ({a.driver}), base seed {a.seed}; "
          f"late watch events, preemptions with victims terminating slowly, PodDisruptionBudget refusals (429)",
          flush=True)
    import logging
    logging.getLogger("quotient").setLevel(logging.ERROR)     # failed evictions (429s) are expected here

    failing: list[str] = []
    totals = {"cases": 0, "instants": 0, "above": 0}
    t0 = time.perf_counter()

    def tally(driver: str, case: int, seed: int, out: dict, sums: dict) -> None:
        totals["cases"] += 1
        totals["instants"] += out["instants"]
        totals["above"] += out["above"]
        for k, v in out.items():
            if isinstance(v, (int, bool)) and not isinstance(v, str):
                sums[k] = sums.get(k, 0) + int(v)
        if out["above"] or out["error"]:
            failing.append(f"{driver} case {case} (seed {seed}; again: --driver {driver} --first {case} --cases 1)")
            for v in out["violations"][:3]:
                print(f"  {driver} case {case}, seed {seed}: ABOVE QUOTA {v}")
            if out["error"]:
                print(f"  {driver} case {case}, seed {seed}: {out['error'][:300]}")

    if a.driver in ("both", "sim"):
        sums: dict = {}
        started = time.perf_counter()
        with tempfile.TemporaryDirectory(prefix="quotient-bench-faults-") as workdir:
            for case in numbers:
                seed = a.seed * 1000 + case
                tally("sim", case, seed, crash_safe(lambda: sim_case(seed, workdir, a.verbose)), sums)
        print(f"sim: {cases} cases in {time.perf_counter() - started:.1f} s, {sums.get('lagging', 0)} with a lagging "
              f"watch ({sums.get('late', 0)} late deliveries); {sums.get('bound', 0)} binds, {sums.get('preempted', 0)} "
              f"preemptions/evictions, {sums.get('terminating', 0)} victims left Terminating, {sums.get('refused', 0)} "
              f"evictions refused by a PDB (429); cases with a preemption {sums.get('with_preemption', 0)}, with a "
              f"Terminating victim {sums.get('with_terminating', 0)}, with a 429 {sums.get('with_refusal', 0)}, with a "
              f"lagging watch and all three {sums.get('with_all', 0)}; {sums.get('instants', 0)} instants checked, "
              f"{sums.get('above', 0)} above quota", flush=True)
    if a.driver in ("both", "hostile"):
        sums = {}
        started = time.perf_counter()
        for case in numbers:
            seed = a.seed * 7919 + case
            tally("hostile", case, seed, crash_safe(lambda: hostile_case(seed, a.steps)), sums)
        print(f"hostile: {cases} cases x {a.steps} steps in {time.perf_counter() - started:.1f} s; "
              f"{sums.get('urgent', 0)} important pods filtered on arrival, "
              f"{sums.get('kube_preemptions', 0)} kube-scheduler preemptions, {sums.get('evicted', 0)} evictions "
              f"written, {sums.get('terminating', 0)} pods left Terminating ({sums.get('gone', 0)} gone later), "
              f"{sums.get('refused', 0)} evictions refused by a PDB (429), {sums.get('late', 0)} late deliveries "
              f"(plus hostile_step's stale events); {sums.get('instants', 0)} instants checked, "
              f"{sums.get('above', 0)} above quota", flush=True)

    print(f"\ncases run: {totals['cases']}; instants checked: {totals['instants']}; "
          f"instants above quota: {totals['above']} (must be 0); {time.perf_counter() - t0:.1f} s")
    print(f"failing cases: {', '.join(failing) if failing else 'none'}")
    ok = totals["above"] == 0 and not failing
    print(f"quota invariant under faults: {'PASS' if ok else 'FAIL'}")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
