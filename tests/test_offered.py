"""The node-list cache of filter and prioritize (app/api/offered.py).

kube-scheduler offers the same node set in a new order for every pod; Quotient
recognises it by an order-independent fingerprint of the raw bytes and reuses
what it worked out for it. These tests pin that the cache never changes an
answer: same answer as the ordinary path, and a changed node or flavor is seen.
"""
from __future__ import annotations

import random

import orjson
import pytest

from app.api.offered import OfferedNodeCache, OfferedNodes, fingerprint
from app.sync.dispatch import apply_object

NAMES = [f"node-{i:04d}" for i in range(400)]
SNAPSHOT = """
apiVersion: v1
kind: Namespace
metadata: {name: team-a}
---
apiVersion: kueue.x-k8s.io/v1beta1
kind: ResourceFlavor
metadata: {name: big}
spec: {nodeLabels: {size: big}}
---
apiVersion: kueue.x-k8s.io/v1beta1
kind: ClusterQueue
metadata: {name: cq}
spec:
  namespaceSelector: {}
  resourceGroups:
  - coveredResources: [cpu]
    flavors:
    - name: big
      resources: [{name: cpu, nominalQuota: 1000}]
---
apiVersion: kueue.x-k8s.io/v1beta1
kind: LocalQueue
metadata: {name: lq, namespace: team-a}
spec: {clusterQueue: cq}
"""


def node(name: str, size: str) -> dict:
    return {"apiVersion": "v1", "kind": "Node", "metadata": {"name": name, "labels": {"size": size}},
            "status": {"allocatable": {"cpu": "8", "memory": "32Gi", "pods": "110"}}}


def snapshot() -> str:
    return SNAPSHOT + "".join(f"---\n{orjson.dumps(node(n, 'big' if i % 4 else 'small')).decode()}\n"
                              for i, n in enumerate(NAMES))


def compact_body(pod: dict, names: list[str]) -> bytes:
    """The bytes kube-scheduler sends: compact, NodeNames last."""
    return orjson.dumps({"Pod": pod, "Nodes": None, "NodeNames": names})


def pretty_body(pod: dict, names: list[str]) -> bytes:
    return orjson.dumps({"Pod": pod, "Nodes": None, "NodeNames": names}, option=orjson.OPT_INDENT_2)


def test_fingerprint_ignores_order_and_sees_any_change():
    shuffled = NAMES[:]
    random.Random(7).shuffle(shuffled)
    base = fingerprint(orjson.dumps(NAMES))
    assert base == fingerprint(orjson.dumps(shuffled))
    assert base != fingerprint(orjson.dumps(NAMES[:-1]))                      # one fewer
    assert base != fingerprint(orjson.dumps(NAMES[:-1] + ["node-9999"]))      # one other
    swapped = NAMES[:-2] + ["node-0399"[:-2] + "93", "node-0398"[:-2] + "99"]  # same characters, other names
    assert base != fingerprint(orjson.dumps(swapped))
    assert fingerprint(b"[]") == (0, 0, 0)


@pytest.mark.parametrize("segment", [b'["a\\"b"]', b'["a",1]'[:-1], b"[1,2]", b"{}", b'["a"'])
def test_fingerprint_refuses_what_is_not_a_plain_string_array(segment):
    assert fingerprint(segment) is None


def test_split_recognises_the_same_set_in_another_order():
    cache = OfferedNodeCache()
    pod = {"metadata": {"name": "p"}}
    first = cache.split(compact_body(pod, NAMES))
    shuffled = NAMES[::-1]
    second = cache.split(compact_body(pod, shuffled))
    assert first[1] is second[1] and (cache.misses, cache.hits) == (1, 1)
    assert first[0] == {"Pod": pod, "Nodes": None}
    assert cache.split(pretty_body(pod, NAMES)) is None            # not kube-scheduler's bytes: ordinary path
    # a body that only looks like one (NodeNames followed by other keys) is left to the ordinary path
    assert cache.split(compact_body(pod, NAMES)[:-1] + b',"Extra":["x"]}') is None


async def test_cached_answers_equal_the_ordinary_path(kit, load_extender, api):
    """Compact (cached) and pretty (ordinary) bodies get the same filter and prioritize answers."""
    ext = load_extender(snapshot())
    big = [n for i, n in enumerate(NAMES) if i % 4]
    async with api(ext) as client:
        for i, make in enumerate((compact_body, pretty_body, compact_body)):
            pod = kit.pod(f"p{i}", cpu="1", queue="lq")
            names = NAMES[i * 7:] + NAMES[:i * 7]
            r = await client.post("/filter", content=make(pod, names))
            assert r.status_code == 200
            passing = r.json()["NodeNames"]
            assert sorted(passing) == big
            r = await client.post("/prioritize", content=make(pod, passing))
            scores = orjson.loads(r.content)                      # "Score": 1 has a space: still JSON
            assert [s["Host"] for s in scores] == passing
            assert all(isinstance(s["Score"], int) and 0 <= s["Score"] <= 10 for s in scores)
    assert ext.offered.hits >= 2                                  # a reordered filter and a prioritize


async def test_a_node_relabelled_between_requests_is_seen(kit, load_extender, api):
    """The cache is keyed on the flavors' membership: relabelling a node changes the next answer."""
    ext = load_extender(snapshot())
    async with api(ext) as client:
        body = compact_body(kit.pod("p1", cpu="1", queue="lq"), NAMES)
        before = (await client.post("/filter", content=body)).json()["NodeNames"]
        assert "node-0000" not in before and "node-0001" in before
        apply_object(ext.state, node("node-0000", "big"))
        apply_object(ext.state, node("node-0001", "small"))
        body = compact_body(kit.pod("p2", cpu="1", queue="lq"), NAMES[::-1])
        after = (await client.post("/filter", content=body)).json()["NodeNames"]
    assert "node-0000" in after and "node-0001" not in after
    assert len(after) == len(before)


def test_priorities_template_writes_one_and_two_digit_scores():
    import numpy as np
    offered = OfferedNodes(["a", "b\u00e9", "c"])
    out = orjson.loads(offered.priorities(np.array([0, 10, 7])))
    assert out == [{"Host": "a", "Score": 0}, {"Host": "b\u00e9", "Score": 10}, {"Host": "c", "Score": 7}]
