"""Memory stays flat on a steady live cluster (issue 16, point 12): reconcile and the look for cleared refusals, cycle after cycle with
nothing changing, add nothing to what Quotient keeps. tests/bench/bench_soak.py measures the process (RSS,
tracemalloc over thousands of cycles); this asserts on the sizes of the structures that could grow.

Before: every reconcile journaled the same "reclaim NoPreemption" decision again for a ClusterQueue head that
may preempt but finds no victim, about 0.5 KB a cycle until the journal's ring of 1,000 entries was full.
"""
from __future__ import annotations

from app.observe import attach
from builders import ClusterQueue, FlavorQuotas, LocalQueue, Namespace, Node, Pod, ResourceFlavor
from live import started
from helpers import refusal

CYCLES = 200


def objects() -> list[dict]:
    """ClusterQueue cq (4 cpu, may preempt lower priorities) used up by four running pods of priority 100."""
    out = [Namespace("team-a").obj(), Node("n1").cpu("64").obj(), ResourceFlavor("default-flavor").obj(),
           ClusterQueue("cq").resource_group(FlavorQuotas("default-flavor").resource("cpu", "4"))
               .preemption({"withinClusterQueue": "LowerPriority"}).obj(),
           LocalQueue("lq", "team-a").cluster_queue("cq").obj()]
    return out + [Pod(f"run-{i}").queue("lq").cpu("1").priority(100).created(i).node("n1").obj() for i in range(4)]


def sizes(kit, metrics) -> dict:
    ext, state = kit.ext, kit.state
    return {"journal": len(ext.journal.entries), "journal per pod": sum(map(len, ext.journal.by_pod.values())),
            "journal pods": len(ext.journal.by_pod), "decisions counted": sum(metrics.decision_counts.values()),
            "refusals": len(ext.refusals), "evictions failed": len(ext.actions.failed),
            "evictions done": len(ext.actions.done), "announced": len(ext.writer._announced),
            "timed out": len(ext.timed_out), "pods": len(state.pods), "holds": len(state.holds),
            "reservations": len(state.reservations), "learned": len(state.learned), "skips": sum(state.skips.values()),
            "expiry heap": len(state.workloads._expiry)}


async def test_steady_reconcile_and_refusal_cycles_add_nothing(tmp_path):
    async with started(tmp_path, objects()) as kit:
        metrics = attach(kit.ext).metrics
        waiting = Pod("wait").queue("lq").cpu("1").priority(0).created(100).obj()        # over quota, no victim of lower priority
        await kit.deliver(waiting)
        assert "cpu request 1 > 0 available" in refusal(kit.filter(waiting))

        async def cycle() -> None:
            kit.clock.advance(kit.state.config.reconcile_interval)
            assert await kit.ext.reconcile() == 0
            assert kit.ext.note_cleared() == 0

        await cycle()
        newest = next(e for e in kit.ext.journal.of_pod("team-a/wait") if e["verb"] == "reclaim")
        assert newest["outcome"] == "NoPreemption"      # the head's preemption search, journaled
        before = sizes(kit, metrics)
        for _ in range(CYCLES):
            await cycle()
        assert sizes(kit, metrics) == before


async def test_a_changed_outcome_is_journaled_again(tmp_path):
    """Only the unchanged repeat is left out: once the pod's newest reclaim decision differs, NoPreemption
    is journaled again (once)."""
    async with started(tmp_path, objects()) as kit:
        waiting = Pod("wait").queue("lq").cpu("1").priority(0).created(100).obj()
        await kit.deliver(waiting)
        refusal(kit.filter(waiting))
        await kit.ext.reconcile()
        kit.ext.journal.record({"time": kit.clock(), "verb": "reclaim", "pod": "team-a/wait", "outcome": "Preempting",
                                "reason": "(another decision)", "queue": "cq"})
        for _ in range(3):
            kit.clock.advance(5)
            await kit.ext.reconcile()
        outcomes = [e["outcome"] for e in kit.ext.journal.of_pod("team-a/wait") if e["verb"] == "reclaim"]
        assert outcomes == ["NoPreemption", "Preempting", "NoPreemption"]       # newest first


async def test_an_eviction_refused_for_a_day_keeps_its_backoff():
    """A preemption whose victim a PodDisruptionBudget protects is retried every BACKOFF_MAX for as long as it
    lasts: past 1,024 attempts (17 hours) the backoff overflowed (2.0 ** 1024, OverflowError) and every reconcile
    failed from then on (found by bench_soak.py --rich)."""
    from app.act.intents import BACKOFF_MAX, Actions, Failure
    from app.core.decisions import Evict
    from app.act.writer import WriteError
    from helpers import FakeClock, make_state, pod_info

    class Refusing:
        async def evict(self, pod, reason, message):
            raise WriteError("a PodDisruptionBudget allows no disruption now")

    clock = FakeClock()
    state = make_state(*objects(), clock=clock)
    victim = pod_info(state, "team-a", "run-0")
    actions = Actions(lambda: Refusing(), lambda *a, **k: None, clock)
    actions.failed[victim.uid] = Failure(1100, "refused", clock(), "InClusterQueue")
    assert await actions.evict([Evict(victim, "InClusterQueue", "preempted", "reclaim")]) == 0
    assert actions.failed[victim.uid].attempts == 1101
    assert actions.failed[victim.uid].retry_at == clock() + BACKOFF_MAX
