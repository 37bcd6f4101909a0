"""Issue 31, point 3: a Binding whose outcome is unknown is resolved by reading, not guessed.

The Binding is written but the API answers 500, the retry's 409 is read back and that read fails, the watch is
late: the charge stays (the pod stays assumed bound) until the API says whether the Binding landed (the watch,
a read at the next reconcile, a retried bind that writes it again); only a definite refusal takes it back at
once. Judged on the API's own objects: the CPU of the pods the API shows bound and not finished, per
ClusterQueue, never above the quota.
"""
from __future__ import annotations

import asyncio
import contextlib

from app.act.kube import KubeWriter
from app.act.writer import OutcomeUnknown, WriteError
from app.config import Configuration
from app.objects.pod import decode_pod
from builders import ClusterQueue, FlavorQuotas, LocalQueue, Namespace, Node, Pod, ResourceFlavor
from fakeapi import FakeApiServer
from helpers import uid
from live import Live, Running, api_cpu, until
from app.sync.apiserver import make_api_client

import pytest

QUOTA = 4000


def objects():
    return (Namespace("team-a").obj(), Node("n1").cpu("64").obj(), ResourceFlavor("default-flavor").obj(),
            ClusterQueue("cq").resource_group(FlavorQuotas("default-flavor").resource("cpu", "4")).obj(),
            LocalQueue("lq", "team-a").cluster_queue("cq").obj())


@contextlib.asynccontextmanager
async def live(tmp_path):
    """Quotient live against a fake API (as tests/live.started), with a watch idle limit long enough for a
    slowed watch to stay open, and no watch ended by its timeoutSeconds meanwhile: a watch that starts again reads
    its canary first (a GET of a pod), which would take the faults these tests aim at the binding's re-read (CI
    saw it once: the canary's 500 relisted the pods, and bind refused SourceStale)."""
    async with FakeApiServer(bookmark_interval=0.3) as api:
        for obj in objects():
            api.apply(obj)
        client = await make_api_client(api.kubeconfig_path(tmp_path))
        kit = Live(api, client, Configuration())
        try:
            async with Running(client, kit.state, read_timeout=5.0, watch_timeout=60) as source:
                await until(lambda: source.health.ready, what="initial list")
                kit.source = source
                yield kit
        finally:
            await client.close()


async def filtered_low_and_high_pending(kit: Live) -> tuple[dict, dict]:
    """A low-priority pod that passed filter for all of the quota (4 cpu on n1), and a high-priority one pending
    beside it that would fit the same quota."""
    low = Pod("low").queue("lq").cpu("4").priority(1).obj()
    high = Pod("high").queue("lq").cpu("4").priority(100).obj()
    await kit.deliver(low)
    assert kit.filter(low)["NodeNames"] == ["n1"]
    await kit.deliver(high)
    return low, high


async def slow_pod_watch(kit: Live, delay: float = 0.8) -> None:
    """From now on the pods watch delivers each event `delay` seconds late (until it is next reopened)."""
    kit.api.fault("slow", resource="pods", verb="watch", delay=delay)
    kit.api.drop_watches()
    # Every watch (drop_watches cuts them all) reopened on the server and answered on Quotient's side: until then
    # bind refuses SourceStale ("the ClusterQueue watch is reconnecting") for a pod without a charge and writes no
    # Binding (under load, CI saw that window twice: first for the Pod watch, then for another kind's).
    await until(lambda: not kit.api.faults and not any(k.reconnecting for k in kit.source.kinds.values())
                and not kit.source.health.staleness(), what="every watch reopened, the pods watch slowed")


async def test_a_binding_written_but_answered_500_keeps_its_charge_while_the_watch_is_late(tmp_path):
    """Before: the re-read's failure made the outcome a failure, the charge was taken back, and a higher-priority
    pod bound into the quota the first still used on the API: 8,000m of 4,000m, for good."""
    async with live(tmp_path) as kit:
        low, high = await filtered_low_and_high_pending(kit)
        await slow_pod_watch(kit)
        kit.api.fault("pause", resource="pods", verb="write", sub="binding", when="after", answer=500)
        kit.api.fault("error", resource="pods", verb="get", code=500, times=3)     # the 409's re-read fails
        bind = asyncio.create_task(kit.bind(low))
        await kit.api.paused_request(caller=bind)
        assert kit.api.get("Pod", "team-a", "low")["spec"]["nodeName"] == "n1"    # the Binding landed
        kit.api.resume()
        error = await bind
        answer = kit.filter(high)                  # kube-scheduler goes on with the next pod at once
        if answer["NodeNames"]:
            await kit.bind(high)
        assert api_cpu(kit.api) <= QUOTA           # before: 8,000m of 4,000m
        assert answer["NodeNames"] == [], answer
        assert "not known" in error and "keeps" in error, error        # kube-scheduler tries it again
        assert kit.state.admitted[uid(low)].cluster_queue == "cq"      # the charge stays
        assert await kit.bind(high) != ""
        kit.api.clear_faults()
        await until(lambda: uid(low) not in kit.state.assumed, what="the late watch to show the binding")
        await kit.ext.reconcile()
        assert not kit.ext.unsettled
        assert api_cpu(kit.api) == QUOTA and kit.api.get("Pod", "team-a", "high")["spec"].get("nodeName") is None
        kit.api.drop_watches()                          # a plain watch again
        await kit.equal_to_a_fresh_list()


async def test_a_binding_never_written_whose_read_fails_is_settled_by_the_next_read(tmp_path):
    """Every try answered 500 (none written), the read after them fails: unknown. The charge stays until a
    reconcile reads the pod unbound, then it is taken back and the other pod may use the quota."""
    async with live(tmp_path) as kit:
        low, high = await filtered_low_and_high_pending(kit)
        kit.api.fault("error", resource="pods", verb="write", sub="binding", code=500, times=3)
        kit.api.fault("error", resource="pods", verb="get", code=500, times=1)
        error = await kit.bind(low)
        assert "not known" in error, error
        assert kit.state.admitted[uid(low)].cluster_queue == "cq" and uid(low) in kit.ext.unsettled
        assert kit.filter(high)["NodeNames"] == []                      # its quota is still taken
        await kit.ext.reconcile()                                       # reads it: unbound on the API
        assert uid(low) not in kit.state.admitted and not kit.ext.unsettled
        assert kit.knows(low, node_name="")
        assert kit.filter(high)["NodeNames"] == ["n1"] and await kit.bind(high) == ""
        assert api_cpu(kit.api) == QUOTA
        await kit.equal_to_a_fresh_list()


async def test_a_retried_bind_of_a_pod_still_assumed_writes_the_binding_again(tmp_path):
    """kube-scheduler retries the bind whose outcome was unknown (the Binding was not written): the retry
    writes it, rather than answering success from Quotient's own unconfirmed word."""
    async with live(tmp_path) as kit:
        low = Pod("low").queue("lq").cpu("4").obj()
        await kit.deliver(low)
        assert kit.filter(low)["NodeNames"] == ["n1"]
        kit.api.fault("error", resource="pods", verb="write", sub="binding", code=500, times=3)
        kit.api.fault("error", resource="pods", verb="get", code=500, times=1)
        assert "not known" in await kit.bind(low)
        assert kit.api.get("Pod", "team-a", "low")["spec"].get("nodeName") is None
        assert await kit.bind(low) == ""
        assert kit.api.get("Pod", "team-a", "low")["spec"]["nodeName"] == "n1"
        assert not kit.ext.unsettled
        await kit.equal_to_a_fresh_list()


async def test_a_definite_refusal_takes_the_charge_back_at_once(tmp_path):
    """A 422 (or 403, 404) says the Binding was not written: no read needed, the charge goes back now."""
    async with live(tmp_path) as kit:
        low = Pod("low").queue("lq").cpu("4").obj()
        await kit.deliver(low)
        assert kit.filter(low)["NodeNames"] == ["n1"]
        kit.api.fault("error", resource="pods", verb="write", sub="binding", code=403)
        assert "failed" in await kit.bind(low)
        assert uid(low) not in kit.state.admitted and not kit.ext.unsettled
        await kit.equal_to_a_fresh_list()


@pytest.mark.parametrize("case", ["landed", "not written", "elsewhere", "read fails"])
async def test_the_writer_tells_an_unknown_outcome_from_a_refusal(tmp_path, case):
    """KubeWriter.bind after its tries ran out (500s): a read settles it (success, or WriteError); only when the
    read fails too is the outcome OutcomeUnknown."""
    async with FakeApiServer() as api:
        for obj in objects():
            api.apply(obj)
        api.apply(Pod("p").queue("lq").cpu("1").node("n2" if case == "elsewhere" else None).obj())
        client = await make_api_client(api.kubeconfig_path(tmp_path))
        try:
            writer = KubeWriter(client, None)
            pod = decode_pod(api.get("Pod", "team-a", "p"))
            if case == "landed":
                api.fault("pause", resource="pods", verb="write", sub="binding", when="after", answer=500)
                api.fault("error", resource="pods", verb="write", sub="binding", code=503, times=2)
            else:
                api.fault("error", resource="pods", verb="write", sub="binding", code=500, times=3)
            if case == "read fails":
                api.fault("error", resource="pods", verb="get", code=500)
            call = asyncio.create_task(writer.bind(pod, "n1"))
            if case == "landed":
                await api.paused_request()
                api.resume()
            if case == "landed":
                await call
            elif case == "read fails":
                with pytest.raises(OutcomeUnknown):
                    await call
            else:
                with pytest.raises(WriteError) as e:
                    await call
                assert not isinstance(e.value, OutcomeUnknown)
        finally:
            await client.close()


async def test_a_binding_no_event_ever_confirms_is_read_once_past_its_guard_and_taken_back_if_not_bound(tmp_path):
    """The read after an unknown outcome showed the Binding landed; then an API server restored from a backup that
    no watch noticed (its versions caught up before Quotient reconnected) lost it, and no event of the pod came
    again: no held-back event, so the guard's expiry had nothing to take. Before: the pod stayed bound and charged
    in Quotient's state for good (the fault run, 1 in 185). Now a binding unconfirmed past ASSUMED_TTL is read
    back at the next reconcile, and taken back when the API shows the pod unbound."""
    from app.state.bindings import ASSUMED_TTL

    async with live(tmp_path) as kit:
        low, high = await filtered_low_and_high_pending(kit)
        charge = kit.state.reservations[uid(low)].charge
        assert kit.state.bindings.commit(uid(low), "n1", charge) == ""    # assumed; the API never shows it
        await kit.ext.reconcile()
        assert kit.state.pods[uid(low)].node_name == "n1"                # within the guard: kept
        kit.clock.advance(ASSUMED_TTL + 1)
        await kit.ext.reconcile()
        assert kit.state.pods[uid(low)].node_name == "" and uid(low) not in kit.state.assumed
        assert uid(low) not in kit.state.admitted
        assert kit.filter(high)["NodeNames"] == ["n1"]                   # the quota it held is free again
