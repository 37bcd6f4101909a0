"""A refusal remembered per ClusterQueue and pod shape (state.blocked, issue 32): the pods of a refused pod's shape
behind it are answered from it, without a walk of the queue; anything that frees quota, a pod ahead of it, or a
second is enough for the next ask to be decided anew; and an admission is never answered from it."""
from __future__ import annotations

from app.act.writer import SnapshotWriter
from app.scheduler.scheduler import Scheduler
from app.state.blocked import MAX_AGE
from builders import Pod
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
