"""No decision is split by an await (issue 12, point 3): Quotient live against tests/fakeapi.py, with a watch
event or another request let in at each await of bind, reconcile and eviction (the fake API pauses the write),
and the state afterwards equal to the state a fresh list builds.
"""
from __future__ import annotations

import asyncio

import httpx
import pytest

from app.act.intents import BACKOFF_BASE
from app.api.app import create_app
from app.config import decode_configuration
from builders import ClusterQueue, FlavorQuotas, Job, LocalQueue, Namespace, Node, Pod, ResourceFlavor
from helpers import refusal, uid
from live import started, until

LOWER = {"withinClusterQueue": "LowerPriority"}


@pytest.fixture
async def live(tmp_path):
    objects = (Namespace("team-a").obj(), Node("n1").cpu("64").obj(), Node("n2").cpu("64").obj(),
               ResourceFlavor("default-flavor").obj(),
               ClusterQueue("cq").resource_group(FlavorQuotas("default-flavor").resource("cpu", "4")).preemption(LOWER)
                   .obj(),
               LocalQueue("lq", "team-a").cluster_queue("cq").obj())
    # No watch ends by its timeoutSeconds during a test: a watch that starts again reads its canary first (a GET of
    # a pod), which a test's pause of the pods' reads would catch instead of the read it aims at.
    async with started(tmp_path, objects, watch_timeout=60) as kit:
        yield kit


# ---- bind -------------------------------------------------------------------------------------------------

async def test_a_bind_that_fails_after_the_watch_changed_the_pod_keeps_the_watch_word(live):
    """Before: undo_binding (now bindings.undo) wrote the pod back as it was before bind, losing the label the watch delivered while
    the Binding POST was in flight (the event was ignored as older than Quotient's own binding)."""
    p = Pod("p").queue("lq").cpu("2").obj()
    await live.deliver(p)
    assert live.filter(p)["NodeNames"] == ["n1"]
    live.api.fault("pause", resource="pods", verb="write", sub="binding")
    bind = asyncio.create_task(live.bind(p))
    await live.api.paused_request()
    relabelled = Pod("p").queue("lq").cpu("2").obj()
    relabelled["metadata"]["labels"]["team"] = "x"
    live.api.apply(relabelled)
    ignored = "pod event older than Quotient's own binding ignored"
    await until(lambda: live.state.skips[ignored] == 1, what="the relabelled pod's event (ignored while assumed)")
    live.api.fault("error", resource="pods", verb="write", code=403)     # the paused Binding is refused
    live.api.resume()
    assert "failed" in await bind
    assert live.knows(p, node_name="", labels=relabelled["metadata"]["labels"])
    assert uid(p) not in live.state.admitted
    await live.equal_to_a_fresh_list()


async def test_a_binding_whose_answer_is_lost_but_the_watch_shows_stays_bound(live):
    """The Binding lands, its answer is an error: the watch showed it bound meanwhile, so nothing is undone and
    kube-scheduler is told it is bound. Before: the pod was made pending again with its quota freed, though
    it runs (a later pod could take that quota: an over-admission)."""
    p = Pod("p").queue("lq").cpu("2").obj()
    await live.deliver(p)
    assert live.filter(p)["NodeNames"] == ["n1"]
    live.api.fault("pause", resource="pods", verb="write", sub="binding", when="after", answer=403)
    bind = asyncio.create_task(live.bind(p))
    await live.api.paused_request()
    await until(lambda: uid(p) not in live.state.assumed, what="the watch to show the binding")
    live.api.resume()
    assert await bind == ""
    assert live.knows(p, node_name="n1") and live.state.admitted[uid(p)].cluster_queue == "cq"
    await live.equal_to_a_fresh_list()


async def test_a_binding_to_another_node_delivered_during_bind_is_taken(live):
    """Someone else bound the pod to n2 while Quotient's Binding to n1 was in flight: the API's word (n2) is
    applied at once, never ignored as an event older than Quotient's binding, and the failed write undoes
    nothing."""
    p = Pod("p").queue("lq").cpu("2").obj()
    await live.deliver(p)
    assert live.filter(p, ("n1", "n2"))["NodeNames"]
    live.api.fault("pause", resource="pods", verb="write", sub="binding")
    bind = asyncio.create_task(live.bind(p, "n1"))
    await live.api.paused_request()
    live.api.apply(Pod("p").queue("lq").cpu("2").node("n2").obj())
    await until(lambda: live.knows(p, node_name="n2"), what="the other binding")
    live.api.resume()
    assert "already assigned" in await bind or "failed" in await bind
    assert live.knows(p, node_name="n2")
    await live.equal_to_a_fresh_list()


async def test_a_second_bind_of_the_same_pod_waits_for_the_first(live):
    """Two binds of one pod at once (kube-scheduler retrying after a timeout): the second waits for the first and
    decides on what it left. Before: the second saw the pod assumed bound and answered success at once, then
    the first failed and made the pod pending again: kube-scheduler believed a pod bound that was not."""
    p, other = Pod("p").queue("lq").cpu("2").obj(), Pod("q").queue("lq").cpu("3").obj()
    await live.deliver(p)
    await live.deliver(other)
    assert live.filter(p)["NodeNames"] == ["n1"]
    live.api.fault("pause", resource="pods", verb="write", sub="binding")
    first = asyncio.create_task(live.bind(p))
    await live.api.paused_request()
    second = asyncio.create_task(live.bind(p))
    await asyncio.sleep(0.05)
    assert not second.done()
    assert "cpu request 3 > 2 available" in refusal(live.filter(other))     # p's quota is taken meanwhile
    live.api.fault("error", resource="pods", verb="write", code=403)
    live.api.resume()
    assert "failed" in await first
    assert await second == ""
    assert live.api.get("Pod", "team-a", "p")["spec"]["nodeName"] == "n1"
    await until(lambda: live.knows(p, node_name="n1"))
    assert sum(v for (_, r), v in live.state.tree.queues["cq"].bound.items() if r == "cpu") == 2000
    await live.equal_to_a_fresh_list()


# ---- eviction ----------------------------------------------------------------------------------------------

async def test_a_victim_deleted_while_its_eviction_is_in_flight(live):
    """Self-driven preemption: the eviction is paused; meanwhile the preemptor asks again (it waits), and the
    victim is deleted by someone else. The eviction's 404 is a success, the preemptor passes once the victim is
    gone, and the state equals a fresh list."""
    victim = Pod("low").queue("lq").cpu("4").priority(1).node("n1").obj()
    await live.deliver(victim)
    high = Pod("high").queue("lq").cpu("4").priority(100).obj()
    await live.deliver(high)
    live.api.fault("pause", resource="pods", verb="write", sub="eviction")
    assert "preempting team-a/low" in refusal(live.filter(high))      # the eviction is issued at once
    await live.api.paused_request()
    assert "waiting for 1 preempted pod(s) to leave" in refusal(live.filter(high))
    assert await live.ext.reconcile() == 0          # the safety net does not issue it a second time
    live.api.delete("Pod", "team-a", "low")
    await until(lambda: uid(victim) not in live.state.pods, what="the victim's deletion")
    live.api.resume()
    await live.ext.actions.settle()
    assert [e["pod"] for e in live.ext.journal.entries if e["outcome"] == "Preempted"] == ["team-a/low"]
    assert live.filter(high)["NodeNames"] == ["n1"]
    assert await live.bind(high) == ""
    await until(lambda: live.knows(high, node_name="n1"))
    await live.equal_to_a_fresh_list()


async def test_a_pending_member_cannot_bind_while_its_timed_out_workload_is_evicted(live_ready):
    """waitForPodsReady: j-0 of Job j never became Ready; j-1 passed filter before the timeout. The reconcile
    decides the whole eviction first (requeue with backoff, j-1's reservation dropped) and only then writes:
    a bind of j-1 while j-0's eviction is in flight is refused. Before: reservations were dropped member by
    member between awaited evictions, so j-1 could bind in the gap (and was then evicted too)."""
    kit = live_ready
    owner = {"apiVersion": "batch/v1", "kind": "Job", "name": "j", "uid": "job-j", "controller": True}
    job = Job("j").obj()
    job["metadata"]["uid"] = "job-j"        # its pods carry the queue label themselves
    kit.api.apply(job)
    await until(lambda: "job-j" in kit.state.jobs, what="the Job")
    j0, j1 = Pod("j-0").queue("lq").cpu("1").node("n1").obj(), Pod("j-1").queue("lq").cpu("1").obj()
    for p in (j0, j1):
        p["metadata"]["ownerReferences"] = [owner]
        await kit.deliver(p)
    assert kit.filter(j1)["NodeNames"] == ["n1"]
    kit.clock.advance(11)
    kit.api.fault("pause", resource="pods", verb="write", sub="eviction")
    reconcile = asyncio.create_task(kit.ext.reconcile())
    await kit.api.paused_request()
    assert "backoff" in await kit.bind(j1)
    kit.api.resume()
    assert await reconcile == 1
    assert not (kit.api.get("Pod", "team-a", "j-1")["spec"].get("nodeName"))
    await until(lambda: uid(j0) not in kit.state.pods)
    await kit.equal_to_a_fresh_list()


@pytest.fixture
async def live_ready(tmp_path):
    config = decode_configuration({"waitForPodsReady": {"enable": True, "timeout": "10s",
                                                        "requeuingStrategy": {"backoffBaseSeconds": 60}}})
    objects = (Namespace("team-a").obj(), Node("n1").cpu("64").obj(), ResourceFlavor("default-flavor").obj(),
               ClusterQueue("cq").resource_group(FlavorQuotas("default-flavor").resource("cpu", "8")).obj(),
               LocalQueue("lq", "team-a").cluster_queue("cq").obj())
    async with started(tmp_path, objects, config) as kit:
        yield kit


async def test_a_refused_eviction_is_retried_after_its_backoff_and_shown(live):
    """A PodDisruptionBudget's 429: the eviction is not written again before its backoff (1 s, doubling), and
    /debug/pods shows the attempts, the error and when it is tried next."""
    victim = Pod("low").queue("lq").cpu("4").priority(1).node("n1").obj()
    victim["metadata"]["labels"]["app"] = "db"
    await live.deliver(victim)
    live.api.apply({"apiVersion": "policy/v1", "kind": "PodDisruptionBudget",
                    "metadata": {"name": "db", "namespace": "team-a"},
                    "spec": {"minAvailable": 1, "selector": {"matchLabels": {"app": "db"}}}})
    high = Pod("high").queue("lq").cpu("4").priority(100).obj()
    await live.deliver(high)
    assert "preempting team-a/low" in refusal(live.filter(high))
    evictions = lambda: sum(1 for m, path, _ in live.api.writes if path.endswith("/low/eviction"))  # noqa: E731
    await live.ext.actions.settle()                 # written at once by the filter's decision, refused
    assert evictions() == 1
    shown = live.ext.actions.view(uid(victim))
    assert shown["attempts"] == 1 and "disruption" in shown["lastError"].lower()
    assert shown["retryIn"] == BACKOFF_BASE
    app = create_app(live.ext)                     # as an admin sees it
    async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://t") as c:
        assert (await c.get("/debug/pods/team-a/low")).json()["evictionWrite"] == shown
        text = (await c.get("/debug/pods/team-a/low?format=text")).text
        assert "disruption" in text.lower() and "attempt" in text.lower()
    assert await live.ext.reconcile() == 0 and evictions() == 1          # still backing off
    live.clock.advance(BACKOFF_BASE)
    assert await live.ext.reconcile() == 0 and evictions() == 2
    assert live.ext.actions.view(uid(victim))["retryIn"] == 2 * BACKOFF_BASE
    live.api.delete("PodDisruptionBudget", "team-a", "db")
    live.clock.advance(2 * BACKOFF_BASE)
    assert await live.ext.reconcile() == 1 and evictions() == 3
    assert live.ext.actions.view(uid(victim)) is None


async def test_a_bind_while_the_reconcile_publishes_queue_status(live):
    """The reconcile's other await: a ClusterQueue status write, paused; a filter and a bind go through meanwhile,
    and the next status written shows the pod admitted."""
    p = Pod("p").queue("lq").cpu("2").obj()
    await live.deliver(p)
    live.api.fault("pause", resource="clusterqueues", verb="write", sub="status")
    reconcile = asyncio.create_task(live.ext.reconcile())
    await live.api.paused_request()
    assert live.filter(p)["NodeNames"] == ["n1"]
    assert await live.bind(p) == ""
    live.api.resume()
    assert await reconcile == 0
    await until(lambda: live.knows(p, node_name="n1"))
    await live.equal_to_a_fresh_list()
    live.clock.advance(10)
    await live.ext.reconcile()
    status = live.api.get("ClusterQueue", None, "cq")["status"]
    assert status["admittedWorkloads"] == 1 and status["flavorsUsage"][0]["resources"][0]["total"] == "2000m"


async def test_a_failed_pods_ready_timeout_eviction_is_retried_and_requeues_once(tmp_path):
    """waitForPodsReady: an eviction of a timed-out member that the API refused is issued again by the next
    reconcile once its backoff has passed, and the workload is requeued once, not once per attempt. Before:
    the readiness record was dropped with the first attempt, so nothing wanted the eviction any more."""
    config = decode_configuration({"waitForPodsReady": {"enable": True, "timeout": "10s",
                                                        "requeuingStrategy": {"backoffBaseSeconds": 60}}})
    objects = (Namespace("team-a").obj(), Node("n1").cpu("64").obj(), ResourceFlavor("default-flavor").obj(),
               ClusterQueue("cq").resource_group(FlavorQuotas("default-flavor").resource("cpu", "8")).obj(),
               LocalQueue("lq", "team-a").cluster_queue("cq").obj())
    async with started(tmp_path, objects, config) as kit:
        stuck = Pod("j-0").queue("lq").cpu("1").node("n1").obj()
        await kit.deliver(stuck)
        kit.clock.advance(11)
        kit.api.fault("error", resource="pods", verb="write", sub="eviction", code=500, times=3)
        assert await kit.ext.reconcile() == 0                   # three tries, all refused
        (requeue,) = kit.state.requeues.values()
        assert requeue.count == 1
        assert kit.ext.actions.view(uid(stuck))["attempts"] == 1
        kit.clock.advance(BACKOFF_BASE)
        assert await kit.ext.reconcile() == 1                   # the safety net: written now
        assert requeue.count == 1                               # requeued once for one timeout
        await until(lambda: uid(stuck) not in kit.state.pods or kit.state.pods[uid(stuck)].deleting,
                    what="the eviction seen")
        assert await kit.ext.reconcile() == 0


# ---- the remaining awaits: the DisruptionTarget patch, bind's 409 re-read, the reconcile's own reclaim ---------

async def test_the_victim_deleted_while_its_disruption_condition_is_written(live):
    """KubeWriter.evict first patches the DisruptionTarget condition: pause it, delete the victim meanwhile; the
    eviction then finds nothing (404, a success), the preemptor passes, and the state equals a fresh list."""
    victim = Pod("low").queue("lq").cpu("4").priority(1).node("n1").obj()
    await live.deliver(victim)
    high = Pod("high").queue("lq").cpu("4").priority(100).obj()
    await live.deliver(high)
    live.api.fault("pause", resource="pods", verb="write", sub="status")
    assert "preempting team-a/low" in refusal(live.filter(high))
    assert (await live.api.paused_request()).endswith("/pods/low/status")
    assert "waiting for 1 preempted pod(s) to leave" in refusal(live.filter(high))
    live.api.delete("Pod", "team-a", "low")
    await until(lambda: uid(victim) not in live.state.pods, what="the victim's deletion")
    live.api.resume()
    await live.ext.actions.settle()
    assert live.ext.actions.view(uid(victim)) is None            # not failed: the victim is gone
    assert live.filter(high)["NodeNames"] == ["n1"] and await live.bind(high) == ""
    await until(lambda: live.knows(high, node_name="n1"))
    await live.equal_to_a_fresh_list()


async def test_a_binding_answered_409_is_read_again_while_the_watch_moves(live):
    """A Binding whose answer is 409 (already bound) is read back: pause that read while the watch delivers the
    binding; the bind answers success (it was Quotient's own, retried) and nothing is undone."""
    p = Pod("p").queue("lq").cpu("2").obj()
    await live.deliver(p)
    assert live.filter(p)["NodeNames"] == ["n1"]
    live.api.fault("pause", resource="pods", verb="write", sub="binding", when="after", answer=500)
    bind = asyncio.create_task(live.bind(p))
    await live.api.paused_request()                     # the binding landed; its answer is an error, delayed
    live.api.fault("pause", resource="pods", verb="get")
    live.api.resume()                                   # the retry gets 409 and reads the pod back: paused
    await live.api.paused_request()
    await until(lambda: live.knows(p, node_name="n1"), what="the watch to show the binding")
    live.api.resume()
    assert await bind == ""
    assert sum(v for (_, r), v in live.state.tree.queues["cq"].bound.items() if r == "cpu") == 2000
    await live.equal_to_a_fresh_list()


async def test_a_bind_while_the_reconciles_own_reclaim_evicts(tmp_path):
    """The reconcile's reclaim for a queue head kube-scheduler never asks about: its eviction is paused; a bind
    of another pod into the quota the victim still holds is refused meanwhile, and once the victim is gone the
    head is admitted and the state equals a fresh list."""
    objects = (Namespace("team-a").obj(), Namespace("team-b").obj(), Node("n1").cpu("8").obj(),
               ResourceFlavor("default-flavor").obj(),
               ClusterQueue("cq-a").cohort("org").resource_group(FlavorQuotas("default-flavor").resource("cpu", "4"))
                   .obj(),
               ClusterQueue("cq-b").cohort("org").resource_group(FlavorQuotas("default-flavor").resource("cpu", "4"))
                   .preemption({"reclaimWithinCohort": "Any"}).obj(),
               LocalQueue("lq", "team-a").cluster_queue("cq-a").obj(),
               LocalQueue("lq", "team-b").cluster_queue("cq-b").obj())
    async with started(tmp_path, objects) as kit:
        borrower = Pod("borrower").queue("lq").cpu("8").node("n1").obj()             # cq-a borrows all of cq-b's quota
        await kit.deliver(borrower)
        head = Pod("head", "team-b").queue("lq").cpu("4").obj()
        await kit.deliver(head)
        kit.api.fault("pause", resource="pods", verb="write", sub="eviction")
        reconcile = asyncio.create_task(kit.ext.reconcile())
        await kit.api.paused_request()
        other = Pod("other", "team-b").queue("lq").cpu("4").obj()
        await kit.deliver(other)
        assert kit.filter(other)["NodeNames"] == []                 # the room is held for head, the victim runs
        kit.api.resume()
        assert await reconcile == 1
        await until(lambda: uid(borrower) not in kit.state.pods, what="the victim gone")
        assert kit.filter(head)["NodeNames"] == ["n1"] and await kit.bind(head) == ""
        await until(lambda: kit.knows(head, node_name="n1"))
        await kit.equal_to_a_fresh_list()


async def test_an_eviction_lost_before_it_was_written_is_issued_by_the_next_reconcile(live):
    """The safety net for evictions that were never written: the filter's eviction task is cancelled before it
    began (a shutdown, a lost task); the next reconcile issues it. Before, the victim was marked issued and no
    reconcile wrote it until the hold expired (60 s)."""
    victim = Pod("low").queue("lq").cpu("4").priority(1).node("n1").obj()
    await live.deliver(victim)
    high = Pod("high").queue("lq").cpu("4").priority(100).obj()
    await live.deliver(high)
    assert "preempting team-a/low" in refusal(live.filter(high))
    tasks = list(live.ext.actions._tasks)
    for task in tasks:                               # before the event loop ran it
        task.cancel()
    await asyncio.gather(*tasks, return_exceptions=True)
    await asyncio.sleep(0)                           # its done callbacks
    assert not [p for m, p, _ in live.api.writes if p.endswith("/low/eviction")]
    assert uid(victim) not in live.ext.actions.in_flight
    assert await live.ext.reconcile() == 1
    await until(lambda: uid(victim) not in live.state.pods or live.state.pods[uid(victim)].deleting)
    assert live.filter(high)["NodeNames"] == ["n1"]


async def test_an_eviction_whose_writer_raised_is_backed_off_and_retried(live, monkeypatch):
    """Not only a WriteError: any exception of the writer (a client error, a bug) is a failure that act/ backs
    off and the reconcile retries; it is never taken for a written eviction."""
    victim = Pod("low").queue("lq").cpu("4").priority(1).node("n1").obj()
    await live.deliver(victim)
    high = Pod("high").queue("lq").cpu("4").priority(100).obj()
    await live.deliver(high)
    real = live.ext.writer.evict

    async def broken(pod_info, reason, message):
        raise RuntimeError("connection reset in a way nobody expected")

    monkeypatch.setattr(live.ext.writer, "evict", broken)
    assert "preempting team-a/low" in refusal(live.filter(high))
    await live.ext.actions.settle()
    shown = live.ext.actions.view(uid(victim))
    assert shown["attempts"] == 1 and "RuntimeError" in shown["lastError"] or "nobody expected" in shown["lastError"]
    monkeypatch.setattr(live.ext.writer, "evict", real)
    live.clock.advance(BACKOFF_BASE)
    assert await live.ext.reconcile() == 1
