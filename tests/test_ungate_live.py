"""The gated design live (issue 32): `serve --kubeconfig` against the fake API removes Kueue's admission gate with
a strategic merge patch the API server applies, only for the pods its ClusterQueue admits, judged on the API's own
objects; a removal the API refuses ends the pod's reservation."""
from __future__ import annotations

from app.act.writer import WriteError
from app.scheduler.gates import REISSUE_AFTER
from builders import ClusterQueue, FlavorQuotas, LocalQueue, Namespace, Node, Pod, ResourceFlavor
from helpers import uid
from live import started, until

import pytest


def objects():
    return (Namespace("team-a").obj(), Node("n1").cpu("64").obj(), ResourceFlavor("default-flavor").obj(),
            ClusterQueue("cq").resource_group(FlavorQuotas("default-flavor").resource("cpu", "4")).obj(),
            LocalQueue("q", "team-a").cluster_queue("cq").obj())


def gates(api, name: str) -> list[str]:
    return [g["name"] for g in (api.get("Pod", "team-a", name)["spec"].get("schedulingGates") or [])]


def sent(pod: dict) -> dict:
    """The pod as kube-scheduler has it once its gate is gone."""
    return {**pod, "spec": {k: v for k, v in pod["spec"].items() if k != "schedulingGates"}}


async def test_the_api_shows_the_gates_of_the_admitted_pods_removed_and_no_others(tmp_path):
    pods = [Pod(f"p{i}").queue("q").cpu("2").created(i).gated().obj() for i in range(3)]
    async with started(tmp_path, (*objects(), *pods)) as kit:
        kit.ext.ungate()
        await kit.ext.gates.settle()
        await until(lambda: not kit.state.pods[uid(pods[1])].gated, what="the watch shows p1 ungated")
        assert gates(kit.api, "p0") == [] and gates(kit.api, "p1") == []
        assert gates(kit.api, "p2") == ["kueue.x-k8s.io/admission"]
        assert kit.filter(sent(pods[0]))["NodeNames"] == ["n1"]
        assert await kit.bind(sent(pods[0])) == ""
        assert kit.api.get("Pod", "team-a", "p0")["spec"]["nodeName"] == "n1"
        kit.ext.ungate()
        await kit.ext.gates.settle()
        assert gates(kit.api, "p2") == ["kueue.x-k8s.io/admission"]    # p0 runs, p1 holds its quota: still full


async def test_a_removal_the_api_refuses_ends_the_reservation_and_is_decided_again_after_a_backoff(tmp_path, monkeypatch):
    pod = Pod("p").queue("q").cpu("2").gated().obj()
    async with started(tmp_path, (*objects(), pod)) as kit:
        gone = Pod("gone").queue("q").cpu("1").obj()
        with pytest.raises(WriteError, match="404"):                      # the API's own refusal, said
            await kit.ext.writer.ungate(kit.ext.pod_of(gone))
        real = kit.ext.writer.ungate

        async def refused(p):
            raise WriteError("removing the admission gate: HTTP 409 Conflict")
        monkeypatch.setattr(kit.ext.writer, "ungate", refused)
        kit.ext.ungate()
        await kit.ext.gates.settle()
        assert kit.ext.gates.failed == 1 and uid(pod) not in kit.state.reservations
        monkeypatch.setattr(kit.ext.writer, "ungate", real)
        kit.ext.ungate()
        await kit.ext.gates.settle()
        assert gates(kit.api, "p") == ["kueue.x-k8s.io/admission"]        # backed off after the refusal
        kit.clock.advance(REISSUE_AFTER + 0.1)
        kit.ext.ungate()
        await kit.ext.gates.settle()
        await until(lambda: gates(kit.api, "p") == [], what="the next pass removes the gate")
