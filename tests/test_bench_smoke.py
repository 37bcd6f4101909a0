"""The benchmark's cluster generator (tests/bench/gen_cluster.py) still makes a snapshot Quotient loads."""
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent / "bench"))

import gen_cluster  # noqa: E402

from app.state.cluster import ClusterState  # noqa: E402
from app.sync.snapshot import apply_documents, read_documents, read_snapshot  # noqa: E402

PARAMS = dict(nodes=20, queues=4, cohorts=2, pods=200, seed=7)


def test_generate_is_deterministic():
    a = gen_cluster.generate(gen_cluster.Params(**PARAMS))
    b = gen_cluster.generate(gen_cluster.Params(**PARAMS))
    assert a == b
    assert gen_cluster.cluster_totals(a) == {"Namespace": 4, "ResourceFlavor": 2, "Cohort": 2, "ClusterQueue": 4,
                                             "LocalQueue": 4, "Node": 20, "Pod": 200}


@pytest.mark.parametrize("fmt", ["yaml", "json"])
def test_generated_snapshot_loads(tmp_path, fmt):
    docs = gen_cluster.generate(gen_cluster.Params(**PARAMS))
    path = gen_cluster.write(docs, str(tmp_path / f"cluster.{fmt}"), fmt)
    assert len(read_documents(path)) == len(docs)
    cluster, own = read_snapshot(path)            # reference checks pass
    assert own == {}
    state = ClusterState()
    apply_documents(path, state, cluster)
    assert len(state.nodes) == 20
    assert len(state.pods) == 200
    assert len(state.cluster_queues) == 4 and len(state.local_queues) == 4
    assert not state.tree.inactive
    # every running pod holds one admitted charge, in its own ClusterQueue
    assert len(state.admitted) == 200
    queue_of_ns = {lq.namespace: lq.cluster_queue for lq in state.local_queues.values()}
    assert all(state.admitted[p.uid].cluster_queue == queue_of_ns[p.namespace] for p in state.pods.values())
    # pods sit on nodes of the flavor they are charged to, and quota holds them with slack
    for pod in state.pods.values():
        flavor = state.admitted[pod.uid].flavors["cpu"]
        assert state.nodes[pod.node_name].labels["instance-type"] == flavor
    for name, node in state.tree.queues.items():
        for fr, used in node.usage.items():
            assert used <= node.quotas[fr].nominal, (name, fr)
    for name, node in state.tree.cohorts.items():
        for fr, used in node.usage.items():
            assert used < node.subtree[fr], (name, fr)


def test_cli_writes_both_formats(tmp_path):
    for fmt in ("yaml", "json"):
        out = tmp_path / f"c.{fmt}"
        assert gen_cluster.main([str(out), "--format", fmt, "--nodes", "10", "--pods", "30", "--queues", "2",
                                 "--cohorts", "1"]) == 0
        assert len(read_documents(str(out))) == 2 + 2 + 1 + 2 + 2 + 10 + 30
