"""The bundled demo snapshot (`quotient serve` with no arguments) and the README's "Try it" requests."""
from __future__ import annotations

from app.cli import build_from_snapshot
from app.sync.snapshot import DEFAULT_SNAPSHOT

TRY_POD = {"metadata": {"name": "try-1", "namespace": "team-a", "uid": "try-1",
                        "labels": {"kueue.x-k8s.io/queue-name": "user-queue"}},
           "spec": {"containers": [{"name": "c", "resources": {"requests": {"cpu": "2"}}}]}}


def test_demo_snapshot_loads_with_its_queues_and_running_pods():
    state = build_from_snapshot(DEFAULT_SNAPSHOT).state
    assert len(state.nodes) == 8 and set(state.cluster_queues) == {"team-a-cq", "team-b-cq", "ml-cq"}
    assert state.admitted and all(c.cluster_queue in state.cluster_queues for c in state.admitted.values())
    assert not state.tree.inactive


async def test_readme_try_it_requests_answer_as_documented(api):
    ext = build_from_snapshot(DEFAULT_SNAPSHOT)
    before = ext.state.ledger.quota_node("team-a-cq").usage.get(("on-demand", "cpu"), 0)
    async with api(ext) as client:
        r = await client.post("/filter", json={"Pod": TRY_POD, "Nodes": None,
                                               "NodeNames": ["od-1", "od-2", "spot-1", "gpu-1"]})
        assert r.json()["NodeNames"] == ["od-1", "od-2", "gpu-1"]
        r = await client.post("/bind", json={"PodName": "try-1", "PodNamespace": "team-a",
                                             "PodUID": "try-1", "Node": "od-1"})
        assert r.json() == {"Error": ""}
    assert ext.state.ledger.quota_node("team-a-cq").usage[("on-demand", "cpu")] == before + 2000
