"""The throughput benchmark (tests/bench/bench_throughput.py) without Go: its cluster is admitted as the
live run needs (every pod fits, every node passes), its pods look as a real API server and kube-scheduler
show them, and the CPU reading of its rig reads /proc as the kernel writes it."""
import os
import sys
from pathlib import Path

import orjson

sys.path.insert(0, str(Path(__file__).resolve().parent / "bench"))

import bench_throughput as bt  # noqa: E402
import rig  # noqa: E402

from app.act.writer import SnapshotWriter  # noqa: E402
from app.api.verbs import Verbs  # noqa: E402
from app.scheduler.scheduler import Scheduler  # noqa: E402
from helpers import make_state, with_uids


async def test_every_pod_of_the_backlog_is_admitted_onto_every_node_and_bound():
    docs, names = bt.cluster(nodes=20, backlog=30)
    docs = with_uids(docs)
    state = make_state(*docs)
    ext = Verbs(Scheduler(state, SnapshotWriter(state)))
    pods = [bt.as_scheduler_sends(d) for d in docs if d["kind"] == "Pod"]
    assert len(pods) == 30 and len(state.nodes) == 20
    for pod in pods:
        answer = orjson.loads(ext.filter(orjson.dumps({"Pod": pod, "Nodes": None, "NodeNames": names})))
        assert answer["NodeNames"] == names and not answer["Error"], answer
        m = pod["metadata"]
        bound = orjson.loads(await ext.bind(orjson.dumps({"PodName": m["name"], "PodNamespace": m["namespace"],
                                                          "PodUID": m["uid"], "Node": names[0]})))
        assert bound == {"Error": ""}
    assert sum(1 for p in state.pods.values() if p.node_name) == 30


def test_pods_are_stored_as_an_api_server_keeps_them_and_sent_as_kube_scheduler_sends_them():
    stored = bt.stored_pod(7)
    assert stored["metadata"]["managedFields"][0]["manager"] == "kubectl-client-side-apply"
    applied = orjson.loads(stored["metadata"]["annotations"][bt.LAST_APPLIED])
    assert applied["metadata"]["name"] == "pod-00007" and applied["kind"] == "Pod"
    sent = bt.as_scheduler_sends(stored)
    assert "managedFields" not in sent["metadata"] and "managedFields" in stored["metadata"]
    assert sent["spec"] == stored["spec"] and sent["metadata"]["labels"] == bt.LABELS


def test_cpu_times_read_this_process():
    before = rig.cpu_times(os.getpid())
    sum(i * i for i in range(2_000_000))          # some user time
    after = rig.cpu_times(os.getpid())
    assert after[0] > before[0] and after[1] >= before[1]
    assert rig.cpu_seconds(os.getpid()) >= sum(after)
