"""A refusal remembered per ClusterQueue and pod shape (state.blocked, issue 32): the pods of a refused pod's shape
behind it are answered from it, without a walk of the queue; anything that frees quota, a pod ahead of it, or a
second is enough for the next ask to be decided anew; and an admission is never answered from it."""
from __future__ import annotations

import random

import pytest

from app.act.writer import SnapshotWriter
from app.core.admission import decide
from app.core.rules import QUOTA_EXCEEDED, STRICT_FIFO
from app.core.workload import Workload
from app.scheduler.scheduler import Scheduler
from app.state.blocked import MAX_AGE
from app.state.presence import OVERDUE
from builders import ClusterQueue, FlavorQuotas, LocalQueue, Namespace, Node, Pod, ResourceFlavor
from helpers import Verbs, apply, delete, make_state, one_queue, uid

NODES = ("n1", "n2")


class Clock:
    def __init__(self):
        self.now = 1_000.0

    def __call__(self) -> float:
        return self.now


def kit(running: int = 4):
    clock = Clock()
    state = make_state(*one_queue(4), clock=clock)
    runs = [Pod(f"run-{i}").queue("q").cpu("1").node("n1").obj() for i in range(running)]
    for p in runs:
        apply(state, p)
    return clock, state, Verbs(Scheduler(state, SnapshotWriter(state))), runs


def reason(answer: dict) -> str:
    return answer["Error"] or next(iter({**answer["FailedNodes"], **answer["FailedAndUnresolvableNodes"]}.values()))


def pending(state, *names: str) -> list[dict]:
    pods = [Pod(n).queue("q").cpu("1").created_at(f"2026-01-01T00:00:0{i}Z").obj() for i, n in enumerate(names)]
    for p in pods:
        apply(state, p)
    return pods


def test_pods_of_the_shape_behind_a_refused_one_are_answered_from_it():
    clock, state, verbs, _ = kit()
    first, second, third = pending(state, "first", "second", "third")
    assert "as decided for" not in reason(verbs.filter(first, NODES))           # decided
    hits = state.blocked.hits
    answer = verbs.filter(third, NODES)
    assert answer["NodeNames"] == [] and "as decided for team-a/first" in reason(answer)
    assert state.blocked.hits == hits + 1
    assert "as decided for team-a/first" in reason(verbs.filter(second, NODES))


def test_quota_freed_or_a_second_passed_is_decided_anew():
    clock, state, verbs, runs = kit()
    first, second, third = pending(state, "first", "second", "third")
    verbs.filter(first, NODES)
    verbs.filter(second, NODES)
    apply(state, {**runs[0], "status": {"phase": "Succeeded"}})                   # 1 cpu frees
    answer = verbs.filter(third, NODES)                                           # first, second back off: away
    assert answer["NodeNames"], "decided anew once quota freed, not answered from the remembered refusal"
    # a second passed: the next refusal of that shape is decided again, not remembered for ever
    verbs.filter(first, NODES)                                                    # full again: remembered
    hits, misses = state.blocked.hits, state.blocked.misses
    clock.now += MAX_AGE + 0.1
    assert verbs.filter(second, NODES)["NodeNames"] == []
    assert (state.blocked.hits, state.blocked.misses) == (hits, misses + 1)       # (its words stay its first)


def test_a_pod_ahead_that_fitted_on_the_walk_is_decided_itself():
    clock, state, verbs, _ = kit(running=3)
    first, second = pending(state, "first", "second")
    assert verbs.filter(second, NODES)["NodeNames"] == []                       # first, ahead, takes the last cpu
    assert verbs.filter(first, NODES)["NodeNames"], "ahead of second and fitting: decided anew, and admitted"


def test_a_pod_ahead_that_the_walk_refused_is_answered_from_the_refusal():
    """second's decision walked first, of its shape, and found it does not fit: first's own decision is that same
    walk, so the refusal stands from first's place (kube-scheduler retries a backlog in any order; without this,
    each shape was decided again about log(n) times between two frees: issue 32's refusal cost)."""
    clock, state, verbs, _ = kit()
    first, second, third = pending(state, "first", "second", "third")
    assert "as decided for" not in reason(verbs.filter(third, NODES))
    hits = state.blocked.hits
    assert "as decided for team-a/third" in reason(verbs.filter(first, NODES))
    assert "as decided for team-a/third" in reason(verbs.filter(second, NODES))
    assert state.blocked.hits == hits + 2


def test_with_nothing_ahead_taking_quota_the_refusal_stands_for_its_shape_ahead_too():
    """first and second are away (kube-scheduler does not bring them: not tried within OVERDUE), so third's walk
    charged nothing ahead of it: first and second, asked later, see no more ahead and are refused alike, from
    the refusal (before, each pod ahead of the decided one was decided again: issue 32's refusal cost)."""
    clock, state, verbs, _ = kit()
    first, second, third = pending(state, "first", "second", "third")
    clock.now += OVERDUE + 0.5
    assert "as decided for" not in reason(verbs.filter(third, NODES))
    hits = state.blocked.hits
    answer = reason(verbs.filter(first, NODES))
    assert "as decided for team-a/third" in answer and "with nothing ahead of it taking quota" in answer, answer
    assert "as decided for team-a/third" in reason(verbs.filter(second, NODES))
    assert state.blocked.hits == hits + 2


def test_a_pod_of_another_shape_is_not_answered_from_it():
    clock, state, verbs, _ = kit(running=3)
    first = pending(state, "first")[0]
    big = Pod("big").queue("q").cpu("2").obj()
    apply(state, big)
    small = Pod("small").queue("q").cpu("1").created_at("2026-01-01T00:00:09Z").obj()
    apply(state, small)
    verbs.filter(big, NODES)                                                      # 2 > 1 free: refused
    delete(state, first)
    assert verbs.filter(small, NODES)["NodeNames"], "1 cpu is free for a 1-cpu pod, whatever a 2-cpu one was told"
    assert uid(small) in state.reservations


def test_a_pod_ahead_that_leaves_unadmitted_frees_what_it_was_counted_for():
    clock, state, verbs, _ = kit(running=2)                                       # 2 of 4 cpu free
    ahead = Pod("ahead").queue("q").cpu("2").created_at("2026-01-01T00:00:00Z").obj()
    apply(state, ahead)                                                           # new: kube-scheduler brings it now
    b, c = pending(state, "b", "c")
    b_answer, c_answer = verbs.filter(b, NODES), verbs.filter(c, NODES)
    assert "pending pod(s) ahead of it in queue order (team-a/ahead)" in reason(b_answer)
    assert "as decided for team-a/b" in reason(c_answer)
    delete(state, ahead)                                                          # deleted while pending
    assert verbs.filter(c, NODES)["NodeNames"], "the 2 cpu it was counted for are free again"


def test_a_quota_refusal_stands_while_less_than_it_lacked_frees():
    """A busy cohort frees a little every moment (issue 32): a pod that lacks 3 cpu is not decided again each time
    one frees, only once 3 have (what is available grows by no more than what frees)."""
    clock, state, verbs, runs = kit()
    big = [Pod(f"big-{i}").queue("q").cpu("3").created_at(f"2026-01-01T00:00:0{i}Z").obj() for i in range(3)]
    for p in big:
        apply(state, p)
    assert verbs.filter(big[0], NODES)["NodeNames"] == []
    apply(state, {**runs[0], "status": {"phase": "Succeeded"}})                   # 1 of the 3 it lacks frees
    hits = state.blocked.hits
    answer = reason(verbs.filter(big[1], NODES))
    assert "as decided for team-a/big-0" in answer
    assert "nothing but less than it lacked (3 cpu of flavor default-flavor) has freed" in answer
    assert state.blocked.hits == hits + 1
    for r in runs[1:3]:                                                           # 3 freed: decided anew
        apply(state, {**r, "status": {"phase": "Succeeded"}})
    assert verbs.filter(big[2], NODES)["NodeNames"], "3 cpu free for a 3-cpu pod"


def test_the_refusal_of_a_pod_ahead_stands_only_while_less_than_that_pod_lacked_frees():
    """first (2 cpu) lacks 1; middle (1 cpu) fits after it; last, of first's shape, then lacks 2. The refusal
    kept from last's decision stands from first's place on, so it must be kept with first's 1, not last's 2."""
    clock, state, verbs, runs = kit(running=3)
    first = Pod("first").queue("q").cpu("2").created_at("2026-01-01T00:00:01Z").obj()
    middle = Pod("middle").queue("q").cpu("1").created_at("2026-01-01T00:00:02Z").obj()
    last = Pod("last").queue("q").cpu("2").created_at("2026-01-01T00:00:03Z").obj()
    for p in (first, middle, last):
        apply(state, p)
    assert verbs.filter(last, NODES)["NodeNames"] == []
    apply(state, {**runs[0], "status": {"phase": "Succeeded"}})                   # 1 cpu frees: first fits now
    assert verbs.filter(first, NODES)["NodeNames"], "2 cpu free for first, whatever last lacked"


@pytest.mark.parametrize("resources", [("cpu",), ("cpu", "memory")])
@pytest.mark.parametrize("seed", range(10))
def test_a_remembered_refusal_never_stands_for_a_pod_a_decision_would_admit(seed, resources):
    """Whatever frees, starts or arrives in a cohort, a pod answered from a remembered refusal is one that a decision
    of its own refuses too (the memo may only spare work, never withhold an admission), with pods asking for one
    resource or two. The clock stands still: what only time changes (a pod ahead no longer brought by
    kube-scheduler) is seen within MAX_AGE, by design; and so is more usage in the tree, which the memo does not
    watch (a pod counted ahead may stop fitting, and free what it was counted for). Quota refusals only: the pods
    a cohort-order refusal (NominalQuotaFirst) counts first are of other ClusterQueues, and a pod arriving in one of
    them can reshuffle which fit; the memo does not watch arrivals, and decides it again within MAX_AGE."""
    rng = random.Random(seed)
    clock = Clock()
    objs = [Namespace("team-a").obj(), ResourceFlavor("default-flavor").obj(),
            Node("n1").cpu("1000").memory("1000Gi").obj()]
    for q in ("a", "b", "c"):
        quotas = FlavorQuotas("default-flavor")
        for r in resources:
            quotas = quotas.resource(r, rng.choice([2, 4, 6]) if r == "cpu" else f"{rng.choice([2, 4, 6])}Gi",
                                     borrowing=rng.choice([None, 2]) if r == "cpu" else rng.choice([None, "2Gi"]))
        objs += [ClusterQueue(q).cohort("co").resource_group(quotas).obj(),
                 LocalQueue(f"lq-{q}", "team-a").cluster_queue(q).obj()]
    state = make_state(*objs, clock=clock)

    def sized(builder, asks: dict) -> dict:
        builder = builder.cpu(str(asks["cpu"]))
        return (builder.memory(f"{asks['memory']}Gi") if "memory" in asks else builder).obj()

    running, pending, answered = [], [], 0
    for step in range(400):
        op = rng.random()
        if op < 0.25:                      # a pod starts where its ClusterQueue has room within its nominal quota
            q = rng.choice("abc")
            asks = {r: rng.choice([0, 1, 2]) if r == "memory" else rng.choice([1, 2]) for r in resources}
            node = state.ledger.quota_node(q)
            unit = {"cpu": 1000, "memory": 2 ** 30}
            if all(node.usage.get(("default-flavor", r), 0) + v * unit[r] <= node.subtree[("default-flavor", r)]
                   for r, v in asks.items()):
                p = sized(Pod(f"run-{step}").queue(f"lq-{q}").node("n1"), asks)
                apply(state, p)
                running.append(p)
        elif op < 0.45 and running:
            apply(state, {**running.pop(rng.randrange(len(running))), "status": {"phase": "Succeeded"}})
        elif op < 0.65:
            asks = {r: rng.choice([0, 1, 2, 3]) if r == "memory" else rng.choice([1, 2, 3, 4]) for r in resources}
            p = sized(Pod(f"p-{step}").queue(f"lq-{rng.choice('abc')}").priority(rng.choice([0, 10])).created(step),
                      asks)
            apply(state, p)
            pending.append(p)
        elif op < 0.7 and pending:
            delete(state, pending.pop(rng.randrange(len(pending))))
        if not pending:
            continue
        pod = state.pods[uid(rng.choice(pending))]
        memo = state.blocked.lookup(state, pod)
        fresh = decide(state, Workload.of_pod(pod))
        grew = memo is not None and any(v > then.get(fr, 0) for node, then in memo.usage for fr, v in node.usage.items())
        if memo is not None and memo.verdict.rule in (QUOTA_EXCEEDED, STRICT_FIFO) and not grew:
            answered += 1
            assert not fresh.admit, (step, pod.name, memo.pod, memo.verdict.reason)
        elif not fresh.admit:
            state.blocked.remember(state, pod, fresh)
    assert answered > 10                   # the memo was asked, and answered, often enough to tell


def test_a_cohort_order_refusal_is_decided_again_once_anything_frees():
    """A borrower refused because a pod within its own nominal quota comes first in the cohort (NominalQuotaFirst)
    lacks 2 cpu once that pod is counted, but 1 freeing is enough to decide it again: the pods counted first draw
    on other ClusterQueues' quota, and a free in one can reshuffle which of them fit (no bound by what it lacked)."""
    clock = Clock()
    state = make_state(Namespace("team-a").obj(), ResourceFlavor("default-flavor").obj(), Node("n1").cpu("64").obj(),
                       ClusterQueue("a").cohort("co").resource_group(
                           FlavorQuotas("default-flavor").resource("cpu", 2)).obj(),
                       ClusterQueue("b").cohort("co").resource_group(
                           FlavorQuotas("default-flavor").resource("cpu", 4)).obj(),
                       LocalQueue("qa", "team-a").cluster_queue("a").obj(),
                       LocalQueue("qb", "team-a").cluster_queue("b").obj(), clock=clock)
    verbs = Verbs(Scheduler(state, SnapshotWriter(state)))
    runs = [Pod(f"run-{i}").queue("qa").cpu("1").node("n1").obj() for i in range(2)]
    owner = Pod("owner").queue("qb").cpu("4").created(0).obj()
    borrowers = [Pod(f"borrower-{i}").queue("qa").cpu("2").created(1 + i).obj() for i in range(2)]
    for p in (*runs, owner, *borrowers):
        apply(state, p)
    assert "within their own nominal quota come first" in reason(verbs.filter(borrowers[0], ["n1"]))
    hits, misses = state.blocked.hits, state.blocked.misses
    assert "as decided for team-a/borrower-0" in reason(verbs.filter(borrowers[1], ["n1"]))
    assert (state.blocked.hits, state.blocked.misses) == (hits + 1, misses)
    apply(state, {**runs[0], "status": {"phase": "Succeeded"}})                   # 1 of the 2 it lacks frees
    verbs.filter(borrowers[1], ["n1"])
    assert state.blocked.misses == misses + 1                                     # decided anew
