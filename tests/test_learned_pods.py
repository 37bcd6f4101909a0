"""Issue 31, point 8: only pods that exist may cause evictions.

A verb about a pod the API has not shown (ClusterState.learned: known only from the request) is answered, but it
never evicts, never holds room that victims would make, and its reservation expires; self-driven reclaim starts
only for pods the watch has delivered; kube-scheduler's preempt answers a learned pod with no victims; a bind of
a pod the API does not have is refused (live mode). The attack: a made-up pod of priority 1,000,000 filtered
again and again while a real low-priority pod `important` runs; before, an Eviction deleted `important`.
"""
from __future__ import annotations

import pytest

from builders import ClusterQueue, FlavorQuotas, LocalQueue, Namespace, Node, Pod, ResourceFlavor
from helpers import answer_reasons, uid
from live import Live, started, until

LOWER = {"withinClusterQueue": "LowerPriority"}


def objects():
    return (Namespace("team-a").obj(), Node("n1").cpu("4").obj(), ResourceFlavor("default-flavor").obj(),
            ClusterQueue("cq").resource_group(FlavorQuotas("default-flavor").resource("cpu", "4")).preemption(LOWER)
                .obj(),
            LocalQueue("lq", "team-a").cluster_queue("cq").obj(),
            Pod("important").queue("lq").cpu("4").priority(0).node("n1").phase("Running").obj())


def ghost(name: str = "ghost", **kw) -> dict:
    return Pod(name).queue("lq").cpu("4").priority(1_000_000).uid(f"made-up-{name}").obj()


@pytest.fixture
async def live(tmp_path):
    async with started(tmp_path, objects()) as kit:
        await until(lambda: "uid-team-a-important" in kit.state.pods, what="important listed")
        yield kit


def evictions(kit: Live) -> list[str]:
    return [path for method, path, _ in kit.api.writes if path.endswith("/eviction")]


def reasons(answer: dict) -> str:
    found = answer_reasons(answer, ["n1"])
    assert answer["NodeNames"] == [] and found, answer
    return next(iter(found.values()))


async def test_a_made_up_pod_never_evicts_a_real_one(live):
    """Before: the first filter of the made-up pod started self-driven reclaim and an Eviction of `important`
    reached the API."""
    g = ghost()
    for _ in range(5):
        why = reasons(live.filter(g))
        assert "has not shown" in why, why
        await live.ext.reconcile()
        await live.ext.actions.settle()
    assert not evictions(live)
    assert live.api.get("Pod", "team-a", "important") is not None
    assert uid(g) not in live.state.holds and not live.state.workloads.victims()
    assert uid(g) in live.state.learned


async def test_reconcile_never_reclaims_for_a_learned_head(live):
    """The made-up pod, learned once, heads cq's pending pods: the reconcile's self-driven reclaim skips it."""
    live.filter(ghost())
    for _ in range(3):
        assert await live.ext.reconcile() == 0
    await live.ext.actions.settle()
    assert not evictions(live) and not live.state.holds


async def test_preempt_for_a_learned_pod_gives_no_victims(live):
    g = ghost()
    answer = live.verbs.preempt(g, {"n1": ["uid-team-a-important"]})
    assert answer == {"NodeNameToMetaVictims": {}}, answer
    entry = live.ext.journal.by_pod[f"team-a/{g['metadata']['name']}"][-1]
    assert entry["outcome"] == "NoPreemption" and "has not shown" in entry["reason"], entry
    assert uid(g) not in live.state.reservations


async def test_a_learned_pods_bind_is_refused_and_its_reservation_expires(tmp_path):
    """A made-up pod that fits is answered by filter (its reservation taken), but its bind is refused without a
    Binding written, and the reservation lapses at reservationTimeout."""
    free = [o for o in objects() if o["metadata"].get("name") != "important"]
    async with started(tmp_path, free) as kit:
        g = ghost()
        assert kit.filter(g)["NodeNames"] == ["n1"]
        assert uid(g) in kit.state.reservations
        error = await kit.bind(g)
        assert "has not shown" in error, error
        assert not [p for _, p, _ in kit.api.writes if p.endswith("/binding")]
        assert uid(g) not in kit.state.admitted
        timeout = kit.state.config.reservation_timeout
        kit.clock.advance(timeout - 5)
        assert kit.filter(g)["NodeNames"] == ["n1"]          # asked again: no new term for its reservation
        kit.clock.advance(6)
        kit.state.expire_lapsed()
        assert uid(g) not in kit.state.reservations


async def test_a_made_up_group_evicts_nobody(tmp_path):
    """Made-up members of a pod group: the group decision that would need victims is refused, and nothing is
    evicted or held."""
    async with started(tmp_path, objects()) as kit:
        members = [Pod(f"g{i}").queue("lq").cpu("2").priority(1_000_000).uid(f"made-up-g{i}")
                   .label("kueue.x-k8s.io/pod-group-name", "g")
                   .annotation("kueue.x-k8s.io/pod-group-total-count", "2").obj() for i in range(2)]
        for _ in range(3):
            for m in members:
                kit.filter(m)
            await kit.ext.reconcile()
            await kit.ext.actions.settle()
        assert not evictions(kit) and not kit.state.holds
        assert kit.api.get("Pod", "team-a", "important") is not None


async def test_the_same_pod_once_the_watch_delivers_it_does_preempt(live):
    g = ghost()
    assert "has not shown" in reasons(live.filter(g))
    live.api.apply(g)
    await until(lambda: live.knows(g) and uid(g) not in live.state.learned, what="the watch to deliver it")
    assert "preempting team-a/important" in reasons(live.filter(g))
    await live.ext.actions.settle()
    assert evictions(live) == ["/api/v1/namespaces/team-a/pods/important/eviction"]
