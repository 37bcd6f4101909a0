"""Kueue object events cost what they change (issue 32): the .status Quotient writes every 10 s for every
ClusterQueue (and the status Kueue writes on LocalQueues) comes back through the watch as MODIFIED events, and
must rebuild nothing; a real change rebuilds only what depends on it, ending where a full rebuild ends.
Quotient does not write a status the API already holds."""
from __future__ import annotations

import random

import pytest

from app.act.kube import KubeWriter
from app.core.flavors import Charge
from app.state.cluster import ClusterState
from builders import ClusterQueue, Cohort, FlavorQuotas, Job, LocalQueue, Namespace, Node, Pod, ResourceFlavor
from fakeapi import FakeApiServer
from helpers import CPU, apply, decide_pod, delete, make_state
from live import Running, fingerprint, until


def counting(state: ClusterState) -> dict[str, int]:
    """Count the state's full rebuilds and pending-index insertions from now on."""
    counts = {"rebuild": 0, "index": 0}
    rebuild, index = state._rebuild, state.queues.index

    def counted_rebuild():
        counts["rebuild"] += 1
        rebuild()

    def counted_index(pod):
        counts["index"] += 1
        index(pod)
    state._rebuild, state.queues.index = counted_rebuild, counted_index
    return counts


def rebuilt_alike(state: ClusterState) -> None:
    """What the state derived incrementally equals what a full rebuild of the same objects derives: charges,
    usage (planned and bound), reservations and the pending index, in order."""
    def seen() -> dict:
        fp = fingerprint(state)
        fp["bound"] = {name: {fr: v for fr, v in n.bound.items() if v} for name, n in state.tree.queues.items()}
        fp["reservations"] = {uid: r.charge for uid, r in state.reservations.items()}
        fp["pending_of"] = dict(state.queues.pending_of)
        fp["jobs"] = {uid: (r.size, r.charge, r.spare, r.started) for uid, r in state.job_admissions.items()}
        return fp
    before = seen()
    ClusterState._rebuild(state)
    assert seen() == before


# ---- the live path: Quotient's own status writes come back as watch events ------------------------

from test_watch import api_client, fake_api  # noqa: E402,F401  (the fake API server and a client of it)


def seed(api: FakeApiServer, pending: int = 20) -> None:
    for obj in (Namespace("team-a").obj(), Namespace("team-b").obj(), Node("n1").cpu("64").obj(),
                ResourceFlavor("default-flavor").obj(),
                ClusterQueue("cq-a").resource_group(FlavorQuotas("default-flavor").resource("cpu", "10")).obj(),
                ClusterQueue("cq-b").resource_group(FlavorQuotas("default-flavor").resource("cpu", "10")).obj(),
                LocalQueue("lq", "team-a").cluster_queue("cq-a").obj(),
                LocalQueue("lq", "team-b").cluster_queue("cq-b").obj(),
                Pod("running").queue("lq").cpu("2").node("n1").phase("Running").obj()):
        api.apply(obj)
    for i in range(pending):
        api.apply(Pod(f"p{i}").queue("lq").cpu("1").obj())


def modified(source, kind: str) -> int:
    return source.kinds[kind].events["MODIFIED"]


async def test_own_status_writes_and_local_queue_status_rebuild_nothing(fake_api, api_client):
    """Quotient's ClusterQueue status patches, and a LocalQueue status write, reach the state as MODIFIED events
    (the status is kept) and neither rebuild the quota tree nor re-index a single pending pod."""
    seed(fake_api)
    async with Running(api_client) as source:
        await until(lambda: source.health.ready, what="listed")
        state = source.state
        counts, generation, before = counting(state), state.generation, fingerprint(state)
        assert await KubeWriter(api_client, state).publish_status() == 2
        await until(lambda: modified(source, "ClusterQueue") == 2, what="status events")
        status = {"pendingWorkloads": 20, "admittedWorkloads": 0, "conditions": [{"type": "Active", "status": "True"}]}
        fake_api.apply({**LocalQueue("lq", "team-a").cluster_queue("cq-a").obj(), "status": status})
        await until(lambda: modified(source, "LocalQueue") == 1, what="LocalQueue status event")
        assert counts == {"rebuild": 0, "index": 0}
        assert state.generation == generation and fingerprint(state) == before
        assert state.cluster_queues["cq-a"].status["admittedWorkloads"] == 1       # the API's status is kept


async def test_status_equal_to_the_api_s_is_not_written_again(fake_api, api_client):
    """A status write that changes nothing still costs every watcher an event: Quotient writes a ClusterQueue's
    status only when it differs from what the API holds (as its watch shows it)."""
    seed(fake_api, pending=3)
    async with Running(api_client) as source:
        await until(lambda: source.health.ready, what="listed")
        state, writer = source.state, KubeWriter(api_client, source.state)
        assert await writer.publish_status() == 2
        await until(lambda: modified(source, "ClusterQueue") == 2, what="status events")
        patches = lambda: sum(1 for m, p, _ in fake_api.requests if m == "PATCH" and p.endswith("/status"))  # noqa: E731
        sent = patches()
        assert await writer.publish_status() == 0
        assert patches() == sent and modified(source, "ClusterQueue") == 2
        fake_api.apply(Pod("other", "team-b").queue("lq").cpu("3").node("n1").phase("Running").obj())
        await until(lambda: any(state.tree.queues["cq-b"].bound.values()), what="cq-b charged")
        assert await writer.publish_status() == 1            # only cq-b's status changed
        await until(lambda: modified(source, "ClusterQueue") == 3, what="cq-b status event")
        usage = fake_api.get("ClusterQueue", None, "cq-b")["status"]["flavorsUsage"][0]["resources"][0]
        assert usage["total"] == "3000m"
        fake_api.apply({**fake_api.get("ClusterQueue", None, "cq-a"), "status": {}})   # another writer cleared it
        await until(lambda: modified(source, "ClusterQueue") == 4, what="cleared status event")
        assert await writer.publish_status() == 1


# ---- ClusterState: what a change rebuilds -----------------------------------------------------------

def objects() -> list[dict]:
    return [Namespace("team-a").obj(), Node("n1").cpu("64").obj(), ResourceFlavor("default-flavor").obj(),
            ClusterQueue("cq-a").resource_group(FlavorQuotas("default-flavor").resource("cpu", "10")).obj(),
            ClusterQueue("cq-b").resource_group(FlavorQuotas("default-flavor").resource("cpu", "10")).obj(),
            LocalQueue("lq", "team-a").cluster_queue("cq-a").obj(),
            Pod("a-run").queue("lq").cpu("2").node("n1").phase("Running").obj(),
            Pod("a0").queue("lq").cpu("1").created(1).obj(),
            Pod("x-run").queue("lq2").cpu("3").node("n1").phase("Running").obj(),
            *[Pod(f"x{i}").queue("lq2").cpu("1").created(10 + i).obj() for i in range(5)]]


def test_cluster_queue_status_only_event_changes_nothing():
    """The decoded ClusterQueue of a status-only event equals the stored one: nothing is rebuilt or re-indexed,
    the generation stays, and the new object (its status) is stored."""
    state = make_state(*objects())
    counts, generation = counting(state), state.generation
    cq = ClusterQueue("cq-a").resource_group(FlavorQuotas("default-flavor").resource("cpu", "10")).obj()
    cq["metadata"].update(resourceVersion="99", generation=1, managedFields=[{"manager": "quotient"}])
    apply(state, {**cq, "status": {"pendingWorkloads": 1}})
    assert counts == {"rebuild": 0, "index": 0} and state.generation == generation
    assert state.cluster_queues["cq-a"].status == {"pendingWorkloads": 1}


def test_local_queue_added_repointed_and_removed_reindexes_only_its_pods():
    """A LocalQueue's pods (pending and running) follow it to its ClusterQueue without a rebuild, ending where a
    full rebuild of the same objects ends, and decisions follow."""
    state = make_state(*objects())
    counts = counting(state)
    assert "cq-a" in state.pending and not any(state.pods[u].queue_name == "lq2" for u in state.queues.pending_of)
    assert state.admitted.by_queue.get("cq-b", set()) == set()

    lq2 = LocalQueue("lq2", "team-a").cluster_queue("cq-b")
    apply(state, lq2.obj())                                          # added: its pods enter cq-b
    assert counts["rebuild"] == 0 and counts["index"] == 6          # its 6 pods, not the 8 of the state
    assert [state.pods[u].name for _, u in state.pending["cq-b"]] == [f"x{i}" for i in range(5)]
    assert state.admitted["uid-team-a-x-run"].cluster_queue == "cq-b"
    assert state.tree.queues["cq-b"].bound[("default-flavor", "cpu")] == 3 * CPU
    assert fingerprint(state) == fingerprint(make_state(*objects(), lq2.obj()))
    rebuilt_alike(state)
    assert decide_pod(state, Pod("x0").queue("lq2").cpu("1").created(10).obj()).admit

    counts = counting(state)
    verdict = decide_pod(state, Pod("x0").queue("lq2").cpu("1").created(10).obj())
    state.workloads.reserve("uid-team-a-x0", Charge("cq-b", dict(verdict.assignment.flavors), dict(verdict.assignment.usage)))
    apply(state, lq2.cluster_queue("cq-a").obj())                   # repointed: they move to cq-a
    assert counts["rebuild"] == 0
    assert [state.pods[u].name for _, u in state.pending["cq-a"]] == ["a0"] + [f"x{i}" for i in range(5)]
    assert not state.pending.get("cq-b")
    assert state.admitted["uid-team-a-x-run"].cluster_queue == "cq-a"
    assert state.tree.queues["cq-a"].bound[("default-flavor", "cpu")] == 5 * CPU
    assert not state.tree.queues["cq-b"].bound.get(("default-flavor", "cpu"))
    rebuilt_alike(state)                       # the reservation made in cq-b stays, as a rebuild keeps it

    counts = counting(state)
    delete(state, lq2.obj())                                         # removed: its pods leave the index
    assert counts["rebuild"] == 0 and counts["index"] == 6
    assert [state.pods[u].name for _, u in state.pending["cq-a"]] == ["a0"]
    assert "uid-team-a-x-run" not in state.admitted
    assert state.tree.queues["cq-a"].bound[("default-flavor", "cpu")] == 2 * CPU
    rebuilt_alike(state)
    state.workloads.drop_reservation("uid-team-a-x0")
    assert fingerprint(state) == fingerprint(make_state(*objects()))


@pytest.mark.parametrize("change", [
    {"stopPolicy": "Hold"}, {"queueingStrategy": "StrictFIFO"},
    {"preemption": {"withinClusterQueue": "LowerPriority"}},
    {"namespaceSelector": {"matchLabels": {"team": "x"}}},
    {"fairSharing": {"weight": 2}},
])
def test_cluster_queue_policy_change_updates_the_object_without_a_rebuild(change):
    state = make_state(*objects())
    counts, generation = counting(state), state.generation
    cq = ClusterQueue("cq-a").resource_group(FlavorQuotas("default-flavor").resource("cpu", "10"))
    apply(state, cq.spec(**change).obj())
    assert counts == {"rebuild": 0, "index": 0}
    assert state.generation > generation              # the simulator and decision caches see the change
    rebuilt_alike(state)
    if change == {"stopPolicy": "Hold"}:
        assert state.cluster_queues["cq-a"].stop_policy == "Hold"
        assert not decide_pod(state, Pod("a0").queue("lq").cpu("1").created(1).obj()).admit


def test_quota_cohort_and_flavor_changes_still_rebuild():
    state = make_state(*objects(), Cohort("co").obj())
    counts = counting(state)
    apply(state, ClusterQueue("cq-a").resource_group(FlavorQuotas("default-flavor").resource("cpu", "7")).obj())
    assert counts["rebuild"] == 1
    assert state.tree.queues["cq-a"].quotas[("default-flavor", "cpu")].nominal == 7 * CPU
    assert state.tree.queues["cq-a"].bound[("default-flavor", "cpu")] == 2 * CPU      # charged again
    apply(state, ClusterQueue("cq-a").cohort("co")
          .resource_group(FlavorQuotas("default-flavor").resource("cpu", "7")).obj())
    assert counts["rebuild"] == 2 and state.tree.queues["cq-a"].parent.name == "co"
    apply(state, ResourceFlavor("default-flavor").node_labels({"pool": "a"}).obj())
    assert counts["rebuild"] == 3 and state.flavor_nodes["default-flavor"] == set()
    apply(state, ResourceFlavor("default-flavor").node_labels({"pool": "a"})
          .node_taints([{"key": "k", "value": "v", "effect": "NoSchedule"}]).obj())
    assert counts["rebuild"] == 3 and state.flavors["default-flavor"].node_taints      # read at decision time
    apply(state, Cohort("co").spec(fairSharing={"weight": 3}).obj())
    assert counts["rebuild"] == 3 and state.cohorts["co"].fair_weight == 3
    apply(state, Cohort("co").parent("root").obj())
    assert counts["rebuild"] == 4 and state.tree.cohorts["co"].parent.name == "root"
    apply(state, ClusterQueue("cq-c").obj())
    assert counts["rebuild"] == 5 and "cq-c" in state.tree.queues
    delete(state, ClusterQueue("cq-c").obj())
    assert counts["rebuild"] == 6 and "cq-c" not in state.tree.queues
    rebuilt_alike(state)


@pytest.mark.parametrize("seed_value", range(4))
def test_local_queue_changes_end_where_a_rebuild_ends(seed_value):
    """Seeded LocalQueue additions, repointings (to a missing ClusterQueue too) and removals, with running and
    pending pods, reserved pods and a Job's admitted workload in them, and ClusterQueue policy changes between:
    none rebuilds, and after each the state equals what a full rebuild makes of it."""
    rng = random.Random(seed_value)
    cqs = ["cq-a", "cq-b", "cq-c", "cq-missing"]
    job = Job("j").queue("lq0").parallelism(3)
    objs = [Namespace("team-a").obj(), Node("n1").cpu("64").obj(), ResourceFlavor("default-flavor").obj(),
            *[ClusterQueue(q).cohort("co").resource_group(FlavorQuotas("default-flavor").resource("cpu", "10")).obj()
              for q in cqs[:3]],
            *[LocalQueue(f"lq{i}", "team-a").cluster_queue(cqs[i]).obj() for i in range(3)],
            job.obj(), *[Pod(f"j-{i}").of_job(job).cpu("1").node("n1").phase("Running").obj() for i in range(2)],
            Pod("j-2").of_job(job).cpu("1").obj()]
    for i in range(12):
        p = Pod(f"p{i}").queue(f"lq{i % 4}").cpu(str(1 + i % 2)).priority(i % 3).created(i)
        objs.append((p.node("n1").phase("Running") if i % 3 == 0 else p).obj())
    state = make_state(*objs)
    assert state.job_admissions
    counts = counting(state)
    for step in range(30):
        lq = LocalQueue(f"lq{rng.randrange(4)}", "team-a")
        op = rng.random()
        if op < 0.15:
            name = rng.choice(cqs[:3])
            apply(state, ClusterQueue(name).cohort("co").resource_group(FlavorQuotas("default-flavor")
                  .resource("cpu", "10")).spec(stopPolicy=rng.choice(["None", "Hold"])).obj())
        elif op < 0.35:
            delete(state, lq.cluster_queue("cq-a").obj())
        else:
            apply(state, lq.cluster_queue(rng.choice(cqs)).obj())
        pending = [u for u in state.queues.pending_of if u not in state.reservations]
        if pending and rng.random() < 0.3:
            uid = rng.choice(pending)
            cq = state.queues.pending_of[uid][0]
            state.workloads.reserve(uid, Charge(cq, {"cpu": "default-flavor"}, {("default-flavor", "cpu"): CPU}))
        assert counts["rebuild"] == 0, f"step {step}"
        rebuilt_alike(state)
        counts["rebuild"] = 0


def test_bench_kueue_events_runs_tiny():
    """tests/bench/bench_kueue_events.py at a tiny size: it runs and its events end with the pods still queued."""
    import sys
    from pathlib import Path
    sys.path.insert(0, str(Path(__file__).resolve().parent / "bench"))
    import bench_kueue_events

    results = bench_kueue_events.main(["--pods", "120", "--rounds", "1"])
    assert set(results) == {"status", "policy", "localqueue", "quota"}
