"""Issue 16, points 8-10: a faulty control plane. API calls that never answer are bounded and a stuck
reconcile fails /livez; a lease renewal answered late never extends leadership; an API server
restored from a backup (watch answers 504 "Too large resource version") is relisted, and /readyz
says 503 until the relist is in. Point 11 (one Binding per pod at a time) is
tests/test_interleaving.py::test_a_second_bind_of_the_same_pod_waits_for_the_first.
"""
from __future__ import annotations

import asyncio
import time

import httpx
import pytest

import app.scheduler.loops as loops_module
from app.sync import freshness
from app.act.kube import KubeWriter
from app.act.writer import SnapshotWriter, WriteError
from app.api.app import create_app
from app.scheduler.loops import Loops
from app.scheduler.scheduler import Scheduler
from app.leader import LeaderElector
from app.objects.pod import decode_pod
from app.observe import attach
from app.state.cluster import ClusterState
from builders import Pod
from builders import ClusterQueue, FlavorQuotas, LocalQueue, Namespace, Node, ResourceFlavor
from helpers import uid
from live import Running, fingerprint, fresh_state, started, until
from test_watch import api_client, cq_cpu, fake_api, seed  # noqa: F401  (fixtures)


# ---- point 8: every API call has a timeout; a stuck loop fails /livez ----------------------------

@pytest.mark.parametrize("write", ["eviction", "binding"])
async def test_a_write_the_api_never_answers_fails_within_its_timeouts(fake_api, api_client, write):
    fake_api.apply(Pod("victim").queue("lq").cpu("1").node("n1" if write == "eviction" else "")
                       .phase("Running" if write == "eviction"
                       else "Pending").obj())
    info = decode_pod(fake_api.get("Pod", "team-a", "victim"))
    writer = KubeWriter(api_client, ClusterState(), timeout=0.2)
    fake_api.fault("hang", resource="pods", times=100)
    call = {"eviction": lambda: writer.evict(info, "Preempted", "test"),
            "binding": lambda: writer.bind(info, "n1")}[write]
    started = time.monotonic()
    with pytest.raises(WriteError, match="TimeoutError"):
        await asyncio.wait_for(call(), 10)         # before: it waited for as long as the server held it
    assert time.monotonic() - started < 5           # three tries of 0.2 s and their backoff
    fake_api.release()


async def test_a_reconcile_stuck_in_an_await_makes_livez_fail(load_extender, monkeypatch):
    from test_bad_input import SNAPSHOT
    monkeypatch.setattr(loops_module, "MIN_STALL", 0.3)
    ext = load_extender(SNAPSHOT)
    never = asyncio.Event()
    calls = []

    async def reconcile():
        calls.append(1)
        if len(calls) > 2:
            await never.wait()                      # as an API call without a timeout did

    ext.reconcile = reconcile
    app = create_app(ext, reconcile_interval=0.02)
    async with app.router.lifespan_context(app):
        async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://t") as c:
            assert (await c.get("/livez")).status_code == 200
            await until(lambda: len(calls) > 2, what="reconcile stuck")
            await asyncio.sleep(0.5)
            r = await c.get("/livez")
            assert r.status_code == 503, r.text
            assert r.json()["reason"].startswith("reconcile loop has not finished a round for")
            metrics = (await c.get("/metrics")).text
            age = [line for line in metrics.splitlines()
                   if line.startswith('quotient_loop_seconds_since_round{loop="reconcile"}')]
            assert age and float(age[0].split()[-1]) > 0.3
            never.set()
            await until(lambda: len(calls) > 3, what="reconcile going again")
            await asyncio.sleep(0.1)
            assert (await c.get("/livez")).status_code == 200


def test_loops_say_which_loop_is_stuck_after_several_intervals():
    now = [100.0]
    loops = Loops(clock=lambda: now[0])
    loops.start("reconcile", 10.0)
    loops.start("refusals", 1.0)
    now[0] += 59
    loops.finish("refusals")
    assert loops.stuck() is None                    # 6 intervals of 10 s not yet passed
    now[0] += 2
    loops.finish("refusals")
    assert loops.stuck() == "reconcile loop has not finished a round for 61s (limit 60s)"
    loops.finish("reconcile")
    assert loops.stuck() is None


# ---- point 9: a lease counts from before the renewal was sent -----------------------------------

async def test_a_renewal_answered_late_does_not_extend_leadership(fake_api, api_client):
    a = LeaderElector(api_client, "quotient-system", "quotient", "replica-a", lease_seconds=3, renew_seconds=1.0,
                      retry_seconds=0.1)
    running = asyncio.create_task(a.run())
    await until(lambda: a.leading, what="leading")
    fake_api.fault("pause", resource="leases", verb="write", when="after")   # the renewal lands, its answer waits
    await fake_api.paused_request()
    sent_by = time.monotonic()                      # the renewal was sent before this
    fake_api.fault("error", resource="leases", times=1000)   # and no renewal succeeds after it
    await asyncio.sleep(0.8)
    fake_api.resume()                               # answered 0.8 s after it was sent: a success
    await asyncio.sleep(max(0.0, sent_by + 1.15 - time.monotonic()))
    # Leadership ends renew_seconds after the send (before: after the answer, 0.8 s too late)
    assert not a.leading
    fake_api.clear_faults()
    a.stop()
    await running


async def test_a_renewal_that_hangs_is_given_up_and_the_elector_goes_on(fake_api, api_client):
    a = LeaderElector(api_client, "quotient-system", "quotient", "replica-a", lease_seconds=3, renew_seconds=0.5,
                      retry_seconds=0.1)
    running = asyncio.create_task(a.run())
    await until(lambda: a.leading, what="leading")
    fake_api.fault("hang", resource="leases", times=3)
    await asyncio.sleep(0.8)
    assert not a.leading
    # Each hanging attempt was abandoned at the renew deadline; the next ones renew again.
    await until(lambda: a.leading, timeout=5, what="leading again")
    fake_api.release()
    a.stop()
    await running


# ---- point 10: a restore from a backup relists; /readyz is 503 until it is in -----------------------

async def test_an_api_server_restored_from_a_backup_is_relisted(fake_api, api_client):
    seed(fake_api, pods=2)
    state = ClusterState()
    extender = Scheduler(state, SnapshotWriter(state))
    metrics = attach(extender).metrics
    async with Running(api_client, state, metrics=metrics) as source:
        app = create_app(extender, ready=lambda: source.health.ready)
        async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://t") as c:
            await until(lambda: source.health.ready and fake_api.open_watches > 0, what="watching")
            backup = fake_api.backup()
            fake_api.apply(Pod("after-backup").queue("lq").cpu("5").node("n2").phase("Running").obj())
            await until(lambda: "uid-team-a-after-backup" in state.pods, what="pod seen")
            assert cq_cpu(state, "cq-a") == 7 * 1000
            fake_api.fault("pause", resource="pods", verb="list")        # hold the relist to look at /readyz
            fake_api.restore(backup)                 # the pod created after the backup is gone for good
            await fake_api.paused_request()
            assert not source.health.ready and "the Pod list is being read again (http 504)" in source.health.readiness
            assert (await c.get("/readyz")).status_code == 503
            fake_api.resume()
            await until(lambda: source.health.ready, what="relisted")
            assert (await c.get("/readyz")).status_code == 200
            assert "uid-team-a-after-backup" not in state.pods and cq_cpu(state, "cq-a") == 2 * 1000
            assert source.kinds["Pod"].relist_reasons["http 504"] == 1
            text = (await c.get("/metrics")).text
            assert 'quotient_watch_relists_total{kind="Pod",reason="http 504"} 1.0' in text
            assert fingerprint(state) == fingerprint(await fresh_state(api_client))


def api_cpu(api, queues: dict[str, str]) -> dict[str, int]:
    """The API's own word on quota: millicores of every pod it shows bound and not finished, per ClusterQueue
    (queues: LocalQueue "namespace/name" -> ClusterQueue)."""
    used: dict[str, int] = {}
    for obj in api.objects("Pod"):
        pod = decode_pod(obj)
        cq = queues.get(f"{pod.namespace}/{pod.queue_name}")
        if cq and pod.node_name and not pod.terminal:
            used[cq] = used.get(cq, 0) + pod.requests.get("cpu", 0)
    return used


ONE_QUEUE = (Namespace("team-a").obj(), Node("n1").cpu("64").obj(), ResourceFlavor("default-flavor").obj(),
             ClusterQueue("cq").resource_group(FlavorQuotas("default-flavor").resource("cpu", "4")).obj(),
             LocalQueue("lq", "team-a").cluster_queue("cq").obj())


async def test_a_binding_the_restored_api_lost_is_written_again(tmp_path):
    """Issue 31, point 4: a pod bound by Quotient, a backup taken before that bind, the API server restored from
    it. The relist shows the pod unbound with an older resourceVersion; before, that was ignored as "older than
    the known state": the pod stayed running on n1 in Quotient's state with its 4 CPUs charged (other pods
    refused while the API showed 0m used), and the retried bind answered success without writing a Binding."""
    async with started(tmp_path, ONE_QUEUE) as live:
        p = Pod("p").queue("lq").cpu("4").obj()
        live.api.apply(p)
        await until(lambda: live.knows(p), what="the pod")
        backup = live.api.backup()
        assert live.filter(p)["NodeNames"] == ["n1"]
        assert await live.bind(p) == ""
        await until(lambda: live.knows(p, node_name="n1") and uid(p) not in live.state.assumed,
                    what="the watch to show the binding")
        relists = sum(k.relists for k in live.source.kinds.values())
        live.api.fault("pause", resource="pods", verb="list")
        live.api.restore(backup)                    # the Binding is lost; resourceVersions go back
        await live.api.paused_request()             # a retry before the relist is in: not answered "bound"
        writes = len(live.api.writes)
        assert (await live.bind(p)).startswith("SourceStale: the Pod list is being read again (http 504)")
        assert len(live.api.writes) == writes
        live.api.resume()
        await until(lambda: live.source.kinds["Pod"].relists >= 1 and live.source.health.ready
                    and not freshness.stale(live.state), what="the relist, every watch connected again")
        assert sum(k.relists for k in live.source.kinds.values()) > relists
        assert live.knows(p, node_name=""), "the relist is believed, whatever its resourceVersions say"
        assert uid(p) not in live.state.admitted and cq_cpu(live.state, "cq") == 0 == api_cpu(live.api, {}).get("cq", 0)
        writes = len(live.api.writes)
        assert await live.bind(p) == ""             # kube-scheduler's retry
        assert [w for w in live.api.writes[writes:] if w[1].endswith("/pods/p/binding")], "a Binding is written"
        assert live.api.get("Pod", "team-a", "p")["spec"]["nodeName"] == "n1"
        await until(lambda: live.knows(p, node_name="n1"), what="the watch to show the new binding")
        assert api_cpu(live.api, {"team-a/lq": "cq"}) == {"cq": 4000} and cq_cpu(live.state, "cq") == 4000
        q = Pod("q").queue("lq").cpu("1").obj()
        live.api.apply(q)
        await until(lambda: live.knows(q), what="the second pod")
        assert live.filter(q)["NodeNames"] == [], "quota 4 is full on the API as in Quotient's state"
        await live.equal_to_a_fresh_list()


async def bound_after_a_backup(live) -> tuple[dict, tuple]:
    """Pod p pending, a backup of the API taken, then p filtered and bound by Quotient and the binding seen."""
    p = Pod("p").queue("lq").cpu("4").obj()
    live.api.apply(p)
    await until(lambda: live.knows(p), what="the pod")
    backup = live.api.backup()
    assert live.filter(p)["NodeNames"] == ["n1"] and await live.bind(p) == ""
    await until(lambda: live.knows(p, node_name="n1") and uid(p) not in live.state.assumed, what="bound")
    return p, backup


async def test_a_restored_api_that_reuses_a_resource_version_is_believed(tmp_path):
    """After a restore the API server hands out resourceVersions again: the pod Quotient knew bound at version
    V is changed (unbound, relabelled) and gets V once more. Before, the relist skipped it as unchanged (same
    uid, same version) and it stayed bound in Quotient's state; a relist after 504 "too large resource version"
    trusts no version."""
    async with started(tmp_path, ONE_QUEUE) as live:
        p, backup = await bound_after_a_backup(live)
        known = int(live.source.store.known["Pod"]["team-a/p"][1])
        live.api.fault("pause", resource="pods", verb="list")
        live.api.restore(backup)
        await live.api.paused_request()
        live.write_until(known - 1)  # other writes take the versions in between
        relabelled = Pod("p").queue("lq").cpu("4").obj()
        relabelled["metadata"]["labels"]["restored"] = "yes"
        assert live.api.apply(relabelled)["metadata"]["resourceVersion"] == str(known)
        live.api.resume()
        await until(lambda: live.source.health.ready and live.source.kinds["Pod"].relists >= 1, what="the relist")
        assert live.knows(p, node_name="", labels=relabelled["metadata"]["labels"])
        assert uid(p) not in live.state.admitted and cq_cpu(live.state, "cq") == 0
        await live.equal_to_a_fresh_list()


async def test_a_watch_that_resumes_after_a_restore_is_relisted_when_another_kind_saw_versions_go_back(tmp_path):
    """Found by tests/test_api_truth_faults.py: after a restore, the Pod watch's reconnect is late, and meanwhile the
    restored server's versions climb past the one it resumes from. The server then takes that watch without an
    error, and the pods written in between would never reach Quotient. Another kind's watch was answered 504 "too
    large resource version" first: etcd has one revision counter for every kind, so Quotient relists them all,
    trusting no version."""
    async with started(tmp_path, ONE_QUEUE, read_timeout=30.0, request_timeout=30.0) as live:
        for n in range(3):
            live.api.apply(Pod(f"before-{n}").queue("lq").cpu("1").obj())
        backup = live.api.backup()
        live.api.apply(Pod("lost").queue("lq").cpu("1").obj())      # only the backup lacks it
        await until(lambda: "uid-team-a-lost" in live.state.pods, what="the pod")
        live.api.bookmark()                                 # every kind's watch has seen the newest version
        await until(lambda: live.source.kinds["Node"].rv == str(live.api.rv), what="a bookmark")
        resumes_from = int(live.source.kinds["Pod"].rv)
        live.api.fault("pause", resource="pods", verb="watch")
        live.api.restore(backup)
        await live.api.paused_request()
        await until(lambda: live.source.kinds["Node"].relist_reasons["http 504"] >= 1,
                    what="another kind saw the versions go back")
        while live.api.rv <= resumes_from:                  # the restored server writes past the Pod watch's version
            live.api.apply(Pod(f"after-{live.api.rv}").queue("lq").cpu("1").obj())
        live.api.resume()
        await until(lambda: live.source.health.ready and live.source.kinds["Pod"].relists >= 1, what="the Pod relist")
        assert "uid-team-a-lost" not in live.state.pods
        await live.equal_to_a_fresh_list()


async def test_a_restore_whose_versions_climbed_past_every_watch_before_it_resumed_is_relisted(tmp_path):
    """Found by tests/test_api_truth_faults.py (1 run in 6): the restored server's versions climb past every
    version a watch resumes from before any reconnects, so no watch is answered 504 and the pod the restore
    unbound stays bound in Quotient's state for ever (its quota charged, other pods refused). Before a watch
    resumes after an interruption, Quotient reads the newest object it applied: older now, the server went back."""
    async with started(tmp_path, ONE_QUEUE) as live:
        p, backup = await bound_after_a_backup(live)
        live.restore_past(backup)                   # the Binding is lost; versions climb past every one seen
        await until(lambda: live.knows(p, node_name="") and live.source.health.ready, what="the restore seen")
        assert live.source.kinds["Pod"].relist_reasons["http 504"] >= 1
        assert uid(p) not in live.state.admitted and cq_cpu(live.state, "cq") == 0
        await live.equal_to_a_fresh_list()


async def test_an_error_event_relists_and_a_timeout_resumes(fake_api, api_client):
    seed(fake_api, pods=1)
    async with Running(api_client) as source:
        await until(lambda: source.health.ready and fake_api.open_watches > 0, what="watching")
        fake_api.fault("error", resource="pods", verb="watch", code=503)
        fake_api.drop_watches()
        await until(lambda: source.kinds["Pod"].relist_reasons["http 503"] == 1 and source.health.ready,
                    what="relisted")
        fake_api.fault("hang", resource="pods", verb="watch")         # a plain timeout: resumed, not relisted
        fake_api.drop_watches()
        await until(lambda: source.kinds["Pod"].errors["timeout"] + source.kinds["Pod"].errors["watch idle"] >= 1,
                    timeout=10, what="timed out")
        fake_api.apply(Pod("later").queue("lq").cpu("1").node("n1").phase("Running").obj())
        await until(lambda: "uid-team-a-later" in source.state.pods, timeout=10, what="resumed")
        assert source.kinds["Pod"].relists == 1 and source.health.ready
        fake_api.release()


async def test_a_restore_whose_canary_cannot_be_read_is_relisted_not_resumed(tmp_path):
    """Found by tests/test_api_truth_faults.py (seed 4, 1 run in 5 under load): as above, but the read of the newest
    pod Quotient applied (the canary) is answered 500. Resumed blind, the Pod watch never showed what the restore
    undid: pods created after the backup stayed known, pods created later never came, and the lost Binding stayed
    charged. A canary that cannot be read tells nothing, so the kind is relisted rather than resumed."""
    async with started(tmp_path, ONE_QUEUE) as live:
        p, backup = await bound_after_a_backup(live)
        live.api.fault("error", resource="pods", verb="get", code=500, times=3)     # the canary's read
        live.restore_past(backup)                   # the Binding is lost; versions climb past every one seen
        await until(lambda: live.knows(p, node_name="") and live.source.health.ready, what="the restore seen")
        assert live.source.kinds["Pod"].relist_reasons["canary unread"] >= 1
        assert uid(p) not in live.state.admitted and cq_cpu(live.state, "cq") == 0
        await live.equal_to_a_fresh_list()


async def test_a_relist_after_an_unread_canary_trusts_no_version(tmp_path):
    """Found by tests/test_api_truth_faults.py (seed 8, 1 run in 12): as above, and p, changed after the restore, got
    the very resourceVersion Quotient knew it bound at (a restored server hands its versions out again). The relist
    after the unread canary trusted (uid, version) as unchanged and kept p bound in Quotient's state, its quota
    charged, while the API showed it pending. Whether the server went back is unknown there: it trusts none."""
    async with started(tmp_path, ONE_QUEUE) as live:
        p, backup = await bound_after_a_backup(live)
        known = int(live.source.store.known["Pod"]["team-a/p"][1])
        live.api.fault("error", resource="pods", verb="get", code=500, times=3)     # the canary's read
        newest = live.api.rv
        live.api.restore(backup)                    # the Binding is lost
        live.write_until(known - 1)  # other writes take the versions in between
        relabelled = Pod("p").queue("lq").cpu("4").obj()
        relabelled["metadata"]["labels"]["restored"] = "yes"
        assert live.api.apply(relabelled)["metadata"]["resourceVersion"] == str(known)
        live.write_until(newest + 2)  # past every version seen: no watch is answered 504
        await until(lambda: live.source.kinds["Pod"].relist_reasons["canary unread"] >= 1
                    and live.source.health.ready, what="the relist")
        assert live.knows(p, node_name="", labels=relabelled["metadata"]["labels"])
        assert uid(p) not in live.state.admitted and cq_cpu(live.state, "cq") == 0
        await live.equal_to_a_fresh_list()


async def test_a_restore_whose_newest_object_was_written_again_past_its_version_is_relisted(tmp_path):
    """Found by tests/test_api_truth_faults.py (1 run in 12): after the restore, the newest pod Quotient knew (the
    canary) was written again, its version now past the one Quotient knew, so one canary read saw nothing gone
    back; the watch resumed, and the pod whose Binding the restore undid stayed bound in Quotient's state. The
    newest few objects are read: one older now, or gone, and the kind is relisted."""
    async with started(tmp_path, ONE_QUEUE) as live:
        r = Pod("r").queue("lq").cpu("1").obj()
        live.api.apply(r)
        await until(lambda: live.knows(r), what="r")
        p, backup = await bound_after_a_backup(live)            # the backup holds r and p, both pending
        relabelled = Pod("r").queue("lq").cpu("1").obj()
        relabelled["metadata"]["labels"]["round"] = "1"
        live.api.apply(relabelled)                               # r is now the newest object Quotient knows
        await until(lambda: live.knows(relabelled, labels=relabelled["metadata"]["labels"]), what="r relabelled")
        known = int(live.source.store.known["Pod"]["team-a/r"][1])
        newest = live.api.rv
        live.api.restore(backup)                                 # p's Binding is lost, r's label too
        live.write_until(known)
        again = Pod("r").queue("lq").cpu("1").obj()
        again["metadata"]["labels"]["round"] = "2"
        assert int(live.api.apply(again)["metadata"]["resourceVersion"]) > known     # r: past what Quotient knew
        live.write_until(newest + 2)  # past every version seen: no watch is answered 504
        await until(lambda: live.knows(p, node_name="") and live.source.health.ready, what="the restore seen")
        assert live.source.kinds["Pod"].relist_reasons["http 504"] >= 1
        assert uid(p) not in live.state.admitted and cq_cpu(live.state, "cq") == 0
        await live.equal_to_a_fresh_list()
