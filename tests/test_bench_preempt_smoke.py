"""The time-to-preempt benchmark (tests/bench/bench_preempt.py) without Go: its cluster still makes filter
choose victims itself, and its arithmetic reads the fake API's write log as the live run writes it."""
import sys
from pathlib import Path

import orjson
import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent / "bench"))

import bench_preempt as bp  # noqa: E402

from app.act.kube import KubeWriter  # noqa: E402
from app.act.writer import SnapshotWriter  # noqa: E402
from app.api.verbs import Verbs  # noqa: E402
from app.scheduler.scheduler import Scheduler  # noqa: E402
from app.objects.pod import decode_pod  # noqa: E402
from fakeapi import FakeApiServer  # noqa: E402
from helpers import answer_reasons, make_state, with_uids


def test_cluster_quota_is_full_and_every_node_has_room():
    docs, nodes = bp.cluster_docs(rounds=3, burst=25)
    state = make_state(*with_uids(docs))
    assert sorted(state.nodes) == sorted(nodes) and len(nodes) == 1 + 3
    for queue, victims in (("cq-single", 3), ("cq-burst", 25)):
        node = state.tree.queues[queue]
        assert sum(v for (_, r), v in node.usage.items() if r == "cpu") == victims * 1000
        assert node.quotas[(bp.FLAVOR, "cpu")].nominal == victims * 1000
    used = {n: 0 for n in nodes}
    for pod in state.pods.values():
        used[pod.node_name] += 1
    assert max(used.values()) == bp.VICTIMS_PER_NODE < bp.NODE_CPU       # kube-scheduler's filters pass


async def test_filter_preempts_by_itself_then_admits_once_the_victim_is_gone():
    """The refusal is quota's: filter chooses a victim (self-driven reclaim), its eviction is written at
    once, and the next filter of the preemptor passes the node held for it."""
    docs, nodes = bp.cluster_docs(rounds=2, burst=10)
    state = make_state(*with_uids(docs))
    extender = Scheduler(state, SnapshotWriter(state))
    preemptor = with_uids(bp.preemptors("cq-burst", 1))[0]
    body = orjson.dumps({"Pod": preemptor, "Nodes": None, "NodeNames": nodes})
    wire = Verbs(extender)
    refused = orjson.loads(wire.filter(body))
    assert refused["NodeNames"] == [] and "preempting cq-burst/victim-" in \
        next(iter(answer_reasons(refused, nodes).values()))
    await extender.actions.settle()
    assert extender.writer.evictions == 1 and len(state.pods) == 2 + 10      # 12 victims and the preemptor, less the one evicted
    reclaim = [e for e in extender.journal.entries if e["verb"] == "reclaim" and e["outcome"] == "Preempting"]
    assert [e["pod"] for e in reclaim] == ["cq-burst/preemptor-000"]
    admitted = orjson.loads(wire.filter(body))
    assert admitted["NodeNames"] == [state.holds["uid-cq-burst-preemptor-000"].node]


async def test_measure_reads_the_fake_apis_write_log(tmp_path):
    """first_writes parses the paths KubeWriter writes to; measure pairs decisions with arrivals."""
    victim = with_uids(bp.queue_docs("cq-burst", 1, 0)[0])[-1]
    async with FakeApiServer() as api:
        api.apply(victim)
        client = await api.api_client(tmp_path)
        try:
            await KubeWriter(client, state=None).evict(decode_pod(victim), "InClusterQueue", "m")
        finally:
            await client.close()
        writes = [[t, m, p] for t, (m, p, _) in zip(api.write_times, api.writes)]
    evicted = bp.first_writes(writes, "eviction")
    assert list(evicted) == ["cq-burst/victim-000"] and bp.first_writes(writes, "status")["cq-burst/victim-000"] \
        <= evicted["cq-burst/victim-000"]
    t = evicted["cq-burst/victim-000"]
    decisions = [
        {"time": t - 0.030, "verb": "reclaim", "pod": "cq-burst/p0", "outcome": "Preempting",
         "victims": {"node-000": ["cq-burst/victim-000"]}},
        {"time": t - 0.029, "verb": "filter", "pod": "cq-burst/p0", "outcome": "Preempting"},
        {"time": t + 0.5, "verb": "filter", "pod": "cq-burst/p0", "outcome": "Admitted"},
        {"time": t - 0.5, "verb": "reclaim", "pod": "cq-burst/p1", "outcome": "Preempting",
         "victims": {"node-000": ["cq-burst/victim-001"]}},        # decided by the reconcile, never evicted
    ]
    writes.append([t + 1.0, "POST", "/api/v1/namespaces/cq-burst/pods/p0/binding"])
    m = bp.measure(decisions, writes, ["cq-burst/p0", "cq-burst/p1"])
    assert m["decided"] == 2 and m["by_filter"] == 1 and m["bound"] == 1
    assert m["to_evict"] == [pytest.approx(0.030)] and m["not_evicted"] == ["cq-burst/victim-001"]
    assert m["to_bind"] == [pytest.approx(1.029)] and m["gone_to_bind"] == [pytest.approx(1.0)]
    assert bp.percentile([0.01] * 99 + [0.2], 99) == 0.01 and "p99 10.0 ms" in bp.ms([0.01] * 100)
