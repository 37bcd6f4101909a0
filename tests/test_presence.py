"""Which pending pods kube-scheduler brings now (state.presence, issue 32): the present pods a decision walks
are exactly the pending pods that are not away, whatever happened in between, so that kept index can stand in
for a walk of the whole queue."""
from __future__ import annotations

import random

import pytest

from app.core.gangs import walk_shape
from app.state.presence import MAX_BACKOFF, OVERDUE, Presence
from builders import ClusterQueue, FlavorQuotas, LocalQueue, Namespace, Node, Pod, ResourceFlavor
from helpers import apply, delete, make_state, uid


class Clock:
    def __init__(self):
        self.now = 1_000.0

    def __call__(self) -> float:
        return self.now


def cluster() -> list[dict]:
    return [ResourceFlavor("default-flavor").obj(), Namespace("team-a").obj(), Node("n1").cpu("1000").obj(),
            ClusterQueue("cq").resource_group(FlavorQuotas("default-flavor").resource("cpu", "1")).obj(),
            ClusterQueue("cq2").resource_group(FlavorQuotas("default-flavor").resource("cpu", "1")).obj(),
            LocalQueue("lq", "team-a").cluster_queue("cq").obj(), LocalQueue("lq2", "team-a").cluster_queue("cq2").obj()]


def brute_force(state, cq: str) -> list[str]:
    return [p.uid for p in state.queues.pending_pods(cq) if not state.queues.away(p.uid)]


def test_a_new_pod_is_present_then_away_once_overdue_and_back_when_due_again():
    clock = Clock()
    state = make_state(*cluster(), clock=clock)
    p = Pod("p").queue("lq").cpu("2").obj()
    apply(state, p)
    assert [x.uid for x in state.queues.present_pending("cq")] == [uid(p)] and not state.queues.away(uid(p))
    clock.now += OVERDUE + 0.5                       # kube-scheduler's activeQ holds it: away until tried
    assert state.queues.away(uid(p)) and list(state.queues.present_pending("cq")) == []
    state.queues.tried(uid(p), refused=True)                # refused: backs off 1 s
    assert state.queues.away(uid(p))
    clock.now += 1.0
    assert [x.uid for x in state.queues.present_pending("cq")] == [uid(p)]
    for attempt in range(2, 8):                      # 2, 4, 8, then 10 s
        state.queues.tried(uid(p), refused=True)
        clock.now += min(MAX_BACKOFF, 2 ** (attempt - 1)) - 0.01
        assert state.queues.away(uid(p)), attempt
        clock.now += 0.01
        assert not state.queues.away(uid(p)), attempt


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_present_pods_are_the_pending_pods_not_away_whatever_happens(seed):
    rng = random.Random(seed)
    clock = Clock()
    state = make_state(*cluster(), clock=clock)
    pods: dict[str, dict] = {}
    for step in range(600):
        op = rng.random()
        names = sorted(pods)
        if op < 0.25 or not names:
            name = f"p{step}"
            pods[name] = Pod(name).queue(rng.choice(["lq", "lq2"])).cpu(rng.choice(["2", "3", "4"])).priority(
                rng.choice([0, 10])).obj()
            apply(state, pods[name])
        elif op < 0.55:
            p = pods[rng.choice(names)]
            if uid(p) in state.pods and not state.pods[uid(p)].node_name:
                state.queues.tried(uid(p), refused=rng.random() < 0.9)
        elif op < 0.75:
            clock.now += rng.choice([0.1, 0.5, 1.0, 2.5, 7.0])
        elif op < 0.82:
            p = pods.pop(rng.choice(names))
            delete(state, p)
        elif op < 0.88:
            p = pods[rng.choice(names)]
            p["metadata"]["labels"]["kueue.x-k8s.io/queue-name"] = rng.choice(["lq", "lq2"])
            apply(state, p)
        elif op < 0.93:
            p = pods.pop(rng.choice(names))
            p["spec"]["nodeName"] = "n1"
            apply(state, p)
        else:                                        # a LocalQueue repointed: its pods move queues
            apply(state, LocalQueue("lq2", "team-a").cluster_queue(rng.choice(["cq", "cq2"])).obj())
        for cq in ("cq", "cq2"):
            assert [p.uid for p in state.queues.present_pending(cq)] == brute_force(state, cq), f"step {step}"
            sets_aside = {u: rng.random() < 0.3 for u in brute_force(state, cq)}
            assert skipping_walk(state, cq, sets_aside) == skipping_brute_force(state, cq, sets_aside), f"step {step}"


def skipping_walk(state, cq: str, sets_aside: dict) -> list[str]:
    """A walk that passes over shapes as admission's walks do: after some pods, their shape is put in skip."""
    skip: set = set()
    out = []
    for p in state.queues.present_pending(cq, skip=skip):
        out.append(p.uid)
        if sets_aside[p.uid]:
            skip.add(walk_shape(p))
    return out


def skipping_brute_force(state, cq: str, sets_aside: dict) -> list[str]:
    skip: set = set()
    out = []
    for u in brute_force(state, cq):
        p = state.pods[u]
        if walk_shape(p) in skip:
            continue
        out.append(u)
        if sets_aside[u]:
            skip.add(walk_shape(p))
    return out


def test_what_is_kept_stays_as_short_as_what_is_due_when_nothing_reads_it():
    """A cluster whose decisions never walk present pods (StrictFIFO, no cohort) still notes every attempt: the
    kept times do not pile up."""
    clock = Clock()
    state = make_state(*cluster(), clock=clock)
    p = Pod("p").queue("lq").cpu("2").obj()
    apply(state, p)
    for _ in range(5_000):
        state.queues.tried(uid(p), refused=True)
        clock.now += MAX_BACKOFF + OVERDUE + 0.1
    presence = state.queues.presence
    assert len(presence._arrivals) + len(presence._leavings) <= 4


@pytest.mark.parametrize("seed", range(12))
def test_a_walk_of_one_shape_goes_on_in_queue_order_while_the_pods_present_change(seed):
    """A queue of alike pods (a backlog) is walked as one list, not merged by shape (Presence._walk_one): if the
    pods present change while it is walked (a pod tried, one arriving, one bound), each step still yields the
    first pod present then past the last one yielded, in queue order, and the walk ends only when none is left
    as far as the queue reached when it began."""
    shapes = ["2"]
    rng = random.Random(seed)
    clock = Clock()
    state = make_state(*cluster(), clock=clock)

    def add(name: str) -> None:
        apply(state, Pod(name).queue("lq").cpu(rng.choice(shapes)).created(rng.choice([1, 2, 3])).obj())
    for i in range(30):
        add(f"p{i:02d}")
    order = lambda: [p.uid for p in state.queues.pending_pods("cq")]   # noqa: E731
    end = order()[-1]              # the walk covers the queue as far as it reached when it began
    last, walked = None, 0
    for p in state.queues.present_pending("cq"):
        now = order()
        present = brute_force(state, "cq")
        after = [u for u in present if (last is None or now.index(u) > now.index(last))
                 and now.index(u) <= now.index(end)]
        assert after and p.uid == after[0], (last, p.uid, after[:3])
        last, walked = p.uid, walked + 1
        change = rng.random()
        if change < 0.3:
            state.queues.tried(p.uid, refused=True)                 # this one backs off: away
        elif change < 0.5:
            state.queues.tried(rng.choice(present), refused=True)   # another one, ahead or behind
        elif change < 0.7:
            add(f"q{walked:02d}")                                    # a pod arrives (created at 1, 2 or 3)
        elif change < 0.8:
            other = state.pods[rng.choice(present)]
            if other.uid not in (p.uid, end):
                apply(state, Pod(other.name).queue("lq").cpu("2").node("n1").obj())   # bound: gone from the queue
    now = order()
    assert [u for u in brute_force(state, "cq") if now.index(last) < now.index(u) <= now.index(end)] == []
    assert walked >= 10


def test_a_walk_of_several_shapes_finds_its_next_entry_again_after_a_change_made_while_another_was_out():
    """Shapes A (a1, a3) and B (b2, b4, b5) merged in order: b2 leaves while a3 is out of the walk. B's next entry is
    found again (its list changed since B's place was taken), so b4 and b5 both come (Presence.walk)."""
    entries = {"a1": ("cq", (1, "a1"), "A"), "a3": ("cq", (3, "a3"), "A"),
               "b2": ("cq", (2, "b2"), "B"), "b4": ("cq", (4, "b4"), "B"), "b5": ("cq", (5, "b5"), "B")}
    presence = Presence(lambda: 0.0, entries.get)
    for u in entries:
        presence.indexed(u)
    walked = []
    for entry in presence.walk("cq", (9,), set()):
        walked.append(entry[1])
        if entry[1] == "a3":
            presence.unindexed("b2")
    assert walked == ["a1", "b2", "a3", "b4", "b5"]
