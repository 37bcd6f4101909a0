"""A Binding in flight when the API server restarts from an older backup. Quotient decided on the state before the
restore (a finished pod's quota free); the restored server shows that pod running again. A restart cuts every
connection (tests/fakeapi.py models it), so the Binding's first send never lands; any send after it reaches the
restored server, where the decision no longer holds. Judged on the API's own objects: the CPU of the pods it shows
bound and not finished, in cq-b (2 CPUs).
"""
from __future__ import annotations

import asyncio

import httpx

from builders import ClusterQueue, FlavorQuotas, LocalQueue, Namespace, Node, Pod, ResourceFlavor
from live import started, until
from test_binding_preconditions import bound_cpu

import pytest


def objects(running, waiting):
    return (Namespace("team-a").obj(), Node("n1").cpu("64").obj(), ResourceFlavor("default-flavor").obj(),
            ClusterQueue("cq-b").resource_group(FlavorQuotas("default-flavor").resource("cpu", "2")).obj(),
            LocalQueue("lq-b", "team-a").cluster_queue("cq-b").obj(), running, waiting,
            ClusterQueue("cq-a").resource_group(FlavorQuotas("default-flavor").resource("cpu", "4")).obj(),
            LocalQueue("lq-a", "team-a").cluster_queue("cq-a").obj())


async def keep_a_connection(kit) -> None:
    """A Binding in another queue first: the next one goes on the kept-alive connection it leaves."""
    first = Pod("first").queue("lq-a").cpu("1").obj()
    await kit.deliver(first)
    assert kit.filter(first)["NodeNames"] == ["n1"] and await kit.bind(first) == ""


async def finish_after_backup(kit, running: dict, nominate: dict | None = None):
    """The backup holds running bound; then it finishes (and nominate, if given, gets a status write that quota
    does not read, as kube-scheduler's nominatedNodeName), and Quotient sees all of it."""
    backup = kit.api.backup()
    done = kit.api.get("Pod", "team-a", running["metadata"]["name"])
    done["status"]["phase"] = "Succeeded"
    kit.api.apply(done)
    if nominate is not None:
        moved = kit.api.get("Pod", "team-a", nominate["metadata"]["name"])
        moved.setdefault("status", {})["nominatedNodeName"] = "n1"
        kit.api.apply(moved)
        nominate = kit.api.get("Pod", "team-a", nominate["metadata"]["name"])
        await until(lambda: kit.knows(nominate, resource_version=nominate["metadata"]["resourceVersion"]),
                    what="the status write seen")
    await until(lambda: kit.knows(done, phase="Succeeded"), what="the finish seen")
    return backup


async def restore_under_the_binding(kit, waiting: dict, backup) -> str:
    """Filter admits waiting; its Binding is held at the server, which then restarts from backup."""
    assert kit.filter(waiting)["NodeNames"] == ["n1"]
    kit.api.fault("pause", resource="pods", verb="write", sub="binding")
    bind = asyncio.ensure_future(kit.bind(waiting))
    await kit.api.paused_request(caller=bind)
    kit.api.restore(backup)
    kit.api.resume()
    return await asyncio.wait_for(bind, 20)


@pytest.mark.parametrize("nominated,reused", [(False, False), (True, False), (False, True)],
                         ids=["same-version", "status-written-after-the-backup", "on-a-kept-alive-connection"])
async def test_a_binding_cut_by_a_restore_is_not_sent_again_to_the_restored_server(tmp_path, nominated, reused):
    """same-version: the waiting pod is unchanged since the backup, so a Binding sent again would pass its
    preconditions. status-written-after-the-backup: the restored pod has an older resourceVersion, same for quota:
    the version-only conflict path must not take it for kube-scheduler's own write and bind on it.
    on-a-kept-alive-connection: the poster does not send it again at once on a fresh connection (act.post)."""
    running = Pod("running").queue("lq-b").cpu("2").node("n1").phase("Running").obj()
    waiting = Pod("waiting").queue("lq-b").cpu("2").obj()
    async with started(tmp_path, objects(running, waiting)) as kit:
        if reused:
            await keep_a_connection(kit)
        backup = await finish_after_backup(kit, running, waiting if nominated else None)
        error = await restore_under_the_binding(kit, waiting, backup)
        assert bound_cpu(kit.api, "lq-b") == 2000, (error, kit.api.get("Pod", "team-a", "waiting")["spec"])
        assert error, "the bind answered success on the restored server"
        assert kit.api.get("Pod", "team-a", "waiting")["spec"].get("nodeName") is None
        # kube-scheduler asks again: Quotient waits for its watch, then sees the running pod and refuses.
        await until(lambda: kit.knows(running, phase="Running"), timeout=10, what="the restore seen")
        assert kit.filter(waiting)["NodeNames"] == []
        assert await kit.bind(waiting)
        assert bound_cpu(kit.api, "lq-b") == 2000


async def test_a_request_held_when_the_server_restarts_is_never_served(tmp_path):
    """The fake API's restart: a write it had read but not served is cut, not applied to the restored store."""
    running = Pod("running").queue("lq-b").cpu("2").node("n1").phase("Running").obj()
    waiting = Pod("waiting").queue("lq-b").cpu("2").obj()
    async with started(tmp_path, objects(running, waiting)) as kit:
        backup = kit.api.backup()
        kit.api.fault("pause", resource="pods", verb="write")
        url = f"http://127.0.0.1:{kit.api.port}/api/v1/namespaces/team-a/pods/waiting/binding"
        body = {"apiVersion": "v1", "kind": "Binding", "metadata": {"name": "waiting", "namespace": "team-a"},
                "target": {"apiVersion": "v1", "kind": "Node", "name": "n1"}}
        async with httpx.AsyncClient(trust_env=False, headers={"Authorization": f"Bearer {kit.api.token}"}) as http:
            post = asyncio.ensure_future(http.post(url, json=body))
            await kit.api.paused_request(caller=post)
            kit.api.restore(backup)
            kit.api.resume()
            with pytest.raises(httpx.TransportError):
                await asyncio.wait_for(post, 10)
        assert kit.api.get("Pod", "team-a", "waiting")["spec"].get("nodeName") is None
