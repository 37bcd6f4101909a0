"""Issue 31, points 1-2, closed at the API: the Binding carries the pod's uid and the resourceVersion Quotient
decided on, as storage preconditions the API server checks in the same write (pods/binding). A pod whose queue
label or requests changed after bind's last look (the watch late) is refused by the API itself, so no pod is
bound on a decision made for another; a change that quota does not read (kube-scheduler's nominatedNodeName, a
status write) only moves the version, and the Binding is written once more on the newer one.

Judged on the API's own objects: the CPU of the pods the API shows bound and not finished, per ClusterQueue.
"""
from __future__ import annotations

from app.act.kube import KubeWriter
from app.act.writer import WriteError
from app.objects.pod import decode_pod
from builders import ClusterQueue, FlavorQuotas, LocalQueue, Namespace, Node, Pod, ResourceFlavor
from helpers import uid
from live import started, until

import pytest

QUEUE = "kueue.x-k8s.io/queue-name"


def objects():
    def cq(name: str, cpu: str) -> dict:
        return ClusterQueue(name).resource_group(FlavorQuotas("default-flavor").resource("cpu", cpu)).obj()
    return (Namespace("team-a").obj(), Node("n1").cpu("64").obj(), ResourceFlavor("default-flavor").obj(),
            cq("cq-a", "4"), cq("cq-b", "2"),
            LocalQueue("lq-a", "team-a").cluster_queue("cq-a").obj(),
            LocalQueue("lq-b", "team-a").cluster_queue("cq-b").obj())


def bound_cpu(api, queue: str) -> int:
    """Millicores of the pods the API shows bound and not finished whose label names LocalQueue queue now."""
    return sum(decode_pod(p).requests.get("cpu", 0) for p in api.objects("Pod")
               if (p.get("spec") or {}).get("nodeName") and p["metadata"]["labels"].get(QUEUE) == queue
               and (p.get("status") or {}).get("phase") not in ("Succeeded", "Failed"))


def blind(kit) -> None:
    """The Pod watch goes quiet: cut, and every reconnect hangs (no event reaches Quotient)."""
    kit.api.fault("hang", resource="pods", verb="watch", times=1000)
    kit.api.drop_watches()


async def see(kit) -> None:
    kit.api.clear_faults()
    kit.api.release()


async def test_a_queue_label_moved_while_the_watch_is_late_is_refused_by_the_api(tmp_path):
    """p passed filter in lq-a (cq-a, room for it); its label moves to lq-b, whose cq-b is full, and the watch does
    not tell Quotient. bind still sees lq-a, but the API refuses the Binding: the pod changed since its version."""
    full = Pod("full").queue("lq-b").cpu("2").node("n1").phase("Running").obj()
    p = Pod("p").queue("lq-a").cpu("2").obj()
    async with started(tmp_path, (*objects(), full, p)) as kit:
        assert kit.filter(p)["NodeNames"] == ["n1"]
        blind(kit)
        moved = kit.api.get("Pod", "team-a", "p")
        moved["metadata"]["labels"][QUEUE] = "lq-b"
        kit.api.apply(moved)
        error = await kit.bind(p)
        assert "409" in error and "labels, owner or requests changed" in error, error
        assert kit.api.get("Pod", "team-a", "p")["spec"].get("nodeName") is None
        assert bound_cpu(kit.api, "lq-b") == 2000                      # cq-b's quota, not 4000m
        assert uid(p) not in kit.state.admitted                         # the charge is taken back
        await see(kit)
        await until(lambda: kit.knows(p, queue_name="lq-b"), what="the watch delivers the move")
        assert kit.filter(p)["NodeNames"] == []                        # cq-b is full: filter decides on it now
        await kit.equal_to_a_fresh_list()


async def test_requests_grown_while_the_watch_is_late_are_refused_by_the_api(tmp_path):
    p = Pod("p").queue("lq-a").cpu("2").obj()
    async with started(tmp_path, (*objects(), p)) as kit:
        assert kit.filter(p)["NodeNames"] == ["n1"]
        blind(kit)
        grown = kit.api.get("Pod", "team-a", "p")
        grown["spec"]["containers"][0]["resources"]["requests"]["cpu"] = "6"
        kit.api.apply(grown)
        assert "requests changed" in await kit.bind(p)
        assert bound_cpu(kit.api, "lq-a") == 0
        await see(kit)
        await kit.equal_to_a_fresh_list()


async def test_a_change_quota_does_not_read_is_bound_on_the_newer_version(tmp_path):
    """kube-scheduler's own nominatedNodeName write (or any status write) moves the pod's resourceVersion while
    the watch has not shown it: the first Binding is refused, nothing quota reads changed, the second lands."""
    p = Pod("p").queue("lq-a").cpu("2").obj()
    async with started(tmp_path, (*objects(), p)) as kit:
        assert kit.filter(p)["NodeNames"] == ["n1"]
        blind(kit)
        nominated = kit.api.get("Pod", "team-a", "p")
        nominated.setdefault("status", {})["nominatedNodeName"] = "n1"
        kit.api.apply(nominated)
        assert await kit.bind(p) == ""
        assert kit.api.get("Pod", "team-a", "p")["spec"]["nodeName"] == "n1"
        bindings = [w for w in kit.api.writes if w[1].endswith("/pods/p/binding")]
        assert len(bindings) == 2, bindings
        assert bound_cpu(kit.api, "lq-a") == 2000
        await see(kit)
        await kit.equal_to_a_fresh_list()


async def test_the_writer_sends_the_version_it_decided_on(tmp_path):
    """KubeWriter.bind on its own: a stale version and a changed label is a WriteError, never a Binding."""
    p = Pod("p").queue("lq-a").cpu("2").obj()
    async with started(tmp_path, (*objects(), p)) as kit:
        decided = decode_pod(kit.api.get("Pod", "team-a", "p"))
        moved = kit.api.get("Pod", "team-a", "p")
        moved["metadata"]["labels"][QUEUE] = "lq-b"
        kit.api.apply(moved)
        writer = KubeWriter(kit.client, kit.state)
        with pytest.raises(WriteError, match="read back: the pod is not bound, and its labels"):
            await writer.bind(decided, "n1")
        assert kit.api.get("Pod", "team-a", "p")["spec"].get("nodeName") is None
        await writer.bind(decode_pod(kit.api.get("Pod", "team-a", "p")), "n1")
        assert kit.api.get("Pod", "team-a", "p")["spec"]["nodeName"] == "n1"
