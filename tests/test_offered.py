"""The node-list cache of filter and prioritize (app/api/offered.py).

kube-scheduler offers the same node set in a new order for every pod; Quotient
recognises it by an order-independent fingerprint of the raw bytes and reuses
what it worked out for it. These tests pin that the cache never changes an
answer: same answer as the ordinary path, and a changed node or flavor is seen,
also when two different lists share a fingerprint (issue 12, point 4).
"""
from __future__ import annotations

import random
import subprocess
import sys

import numpy as np
import orjson
import pytest

from app.api import offered
from app.api.offered import OfferedNodeCache, encode_priorities, fingerprint
from app.objects.offered_nodes import OfferedNodes
from app.sync.dispatch import apply_object
from builders import ClusterQueue, FlavorQuotas, LocalQueue, Namespace, Node, Pod, ResourceFlavor, snapshot_yaml

NAMES = [f"node-{i:04d}" for i in range(400)]
def node(name: str, size: str) -> dict:
    return Node(name).cpu("8").memory("32Gi").labels({"size": size}).obj()


def snapshot() -> str:
    """ClusterQueue cq (1000 CPUs of flavor big, nodes labelled size=big) behind team-a/lq, and 400 nodes, one in
    four of them small."""
    return snapshot_yaml(
        Namespace("team-a").obj(), ResourceFlavor("big").node_labels({"size": "big"}).obj(),
        ClusterQueue("cq").resource_group(FlavorQuotas("big").resource("cpu", 1000)).obj(),
        LocalQueue("lq", "team-a").cluster_queue("cq").obj(),
        *(node(n, "big" if i % 4 else "small") for i, n in enumerate(NAMES)))


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


@pytest.mark.parametrize("segment", [b'["a\\"b"]', b'["a",1]'[:-1], b"[1,2]", b"{}", b'["a"',
                                     b'["a", "b"]', b'["a",1,"b"]', b'["a";"b"]', b"[1]",
                                     orjson.dumps(["n" * 254])])   # longer than any Node name
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


async def test_cached_answers_equal_the_ordinary_path(load_extender, api):
    """Compact (cached) and pretty (ordinary) bodies get the same filter and prioritize answers."""
    ext = load_extender(snapshot())
    big = [n for i, n in enumerate(NAMES) if i % 4]
    async with api(ext) as client:
        for i, make in enumerate((compact_body, pretty_body, compact_body)):
            pod = Pod(f"p{i}").queue("lq").cpu("1").wire()
            names = NAMES[i * 7:] + NAMES[:i * 7]
            r = await client.post("/filter", content=make(pod, names))
            assert r.status_code == 200
            passing = r.json()["NodeNames"]
            assert sorted(passing) == big
            r = await client.post("/prioritize", content=make(pod, passing))
            scores = orjson.loads(r.content)                      # "Score": 1 has a space: still JSON
            assert [s["Host"] for s in scores] == passing
            assert all(isinstance(s["Score"], int) and 0 <= s["Score"] <= 10 for s in scores)
    assert client.served.verbs.verbs.offered.hits >= 2                                  # a reordered filter and a prioritize


async def test_a_node_relabelled_between_requests_is_seen(load_extender, api):
    """The cache is keyed on the flavors' membership: relabelling a node changes the next answer."""
    ext = load_extender(snapshot())
    async with api(ext) as client:
        body = compact_body(Pod("p1").queue("lq").cpu("1").wire(), NAMES)
        before = (await client.post("/filter", content=body)).json()["NodeNames"]
        assert "node-0000" not in before and "node-0001" in before
        apply_object(ext.state, node("node-0000", "big"))
        apply_object(ext.state, node("node-0001", "small"))
        body = compact_body(Pod("p2").queue("lq").cpu("1").wire(), NAMES[::-1])
        after = (await client.post("/filter", content=body)).json()["NodeNames"]
    assert "node-0000" in after and "node-0001" not in after
    assert len(after) == len(before)


def test_priorities_template_writes_one_and_two_digit_scores():
    import numpy as np
    offered = OfferedNodes(["a", "b\u00e9", "c"])
    out = orjson.loads(encode_priorities(offered, np.array([0, 10, 7])))
    assert out == [{"Host": "a", "Score": 0}, {"Host": "b\u00e9", "Score": 10}, {"Host": "c", "Score": 7}]


def _colliding(monkeypatch) -> None:
    """Every list of the same length and characters gets one fingerprint: the per-name hash is zeroed,
    as a crafted collision would make it (the lists then also sort in the order they were sent)."""
    monkeypatch.setattr(offered, "_mix", lambda x: np.zeros_like(x))


def test_the_seed_comes_from_the_random_source_and_keys_the_fingerprint(monkeypatch):
    """The fingerprint is keyed with secret bytes from `secrets` (the OS's random source), so whoever
    names nodes cannot compute a collision offline: another seed, another fingerprint."""
    drawn = []
    real = offered.secrets.token_bytes
    monkeypatch.setattr(offered.secrets, "token_bytes", lambda n: drawn.append(n) or real(n))
    first, second = offered.new_seed(), offered.new_seed()
    assert drawn == [16 * offered.WORDS] * 2 and not np.array_equal(first, second)
    segment = orjson.dumps(NAMES)
    before = fingerprint(segment)
    monkeypatch.setattr(offered, "SEED", first)
    assert fingerprint(segment) != before
    monkeypatch.setattr(offered, "SEED", second)
    assert fingerprint(segment) != before and fingerprint(orjson.dumps(NAMES[::-1])) == fingerprint(segment)


def test_two_processes_draw_different_seeds():
    """The seed is drawn per process, at import: two Quotient processes fingerprint one list differently."""
    code = ("import orjson; from app.api.offered import SEED, fingerprint; "
            "print(SEED.tobytes().hex(), fingerprint(orjson.dumps(['node-a', 'node-b']))[2])")
    runs = [subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
            for _ in range(2)]
    assert runs[0].split() != runs[1].split()
    assert runs[0].split()[0] != runs[1].split()[0] and runs[0].split()[1] != runs[1].split()[1]


def test_a_collision_is_decoded_and_counted_not_answered_from_the_cache(monkeypatch):
    """Two lists with one fingerprint: the second is decoded in full, counted, and then cached itself."""
    _colliding(monkeypatch)
    skipped = []
    cache = OfferedNodeCache(skip=skipped.append)
    pod = {"metadata": {"name": "p"}}
    first, other = NAMES[:200], NAMES[200:]
    assert fingerprint(orjson.dumps(first)) == fingerprint(orjson.dumps(other))     # the forced collision
    assert cache.split(compact_body(pod, first))[1].names == first
    assert cache.split(compact_body(pod, other))[1].names == other
    assert (cache.misses, cache.hits, cache.collisions) == (2, 0, 1) and skipped == [offered.COLLISION]
    assert cache.split(compact_body(pod, other))[1].names == other                 # the same list: a hit
    assert (cache.misses, cache.hits, cache.collisions) == (2, 1, 1)


def test_a_short_list_is_found_by_its_names_in_any_order_and_only_by_them(monkeypatch):
    """Issue 32: a short NodeNames list (kube-scheduler offers each pod the nodes with room for it, so short lists
    vary) is decoded and keyed by its set of names, cheaper than a numpy scan; the same names in another order
    reuse its entry, one other name does not, and what is not a list of names takes the ordinary path."""
    def no_scan(segment):
        raise AssertionError("a short list is not scanned")
    monkeypatch.setattr(offered, "scan", no_scan)
    cache = OfferedNodeCache()
    pod = {"metadata": {"name": "p"}}
    names = NAMES[:30]
    first = cache.split(compact_body(pod, names))
    again = cache.split(compact_body(pod, names[7:] + names[:7]))
    other = cache.split(compact_body(pod, names[:-1] + ["node-9999"]))
    assert first[1] is again[1] and other[1] is not first[1] and other[1].names[-1] == "node-9999"
    assert (cache.misses, cache.hits) == (2, 1)
    assert cache.split(compact_body(pod, names)[:-2] + b',1]}') is None
    assert cache.split(compact_body(pod, names[:3] + names[:1])) is None            # a name twice
    assert cache.split(compact_body(pod, names[:3] + ["n" * 254])) is None          # no Node's name
    assert list(cache.split(compact_body(pod, []))[1].names) == []


@pytest.mark.parametrize("seed", range(6))
async def test_filter_under_collisions_answers_only_offered_nodes_and_every_one_that_passes(
        seed, monkeypatch, load_extender, api):
    """With every list of one size colliding, filter's NodeNames are exactly the offered nodes of the
    pod's flavor, as the ordinary path answers: none that was not offered (kube-scheduler would fail the
    attempt: "claims a filtered node ... not found in the input node list", wire README section 5) and
    none dropped. A flavor's nodes are those carrying its nodeLabels, as in Kueue's
    site/content/en/docs/concepts/resource_flavor.md ("ResourceFlavor labels")."""
    _colliding(monkeypatch)
    ext = load_extender(snapshot())
    big = {n for i, n in enumerate(NAMES) if i % 4}
    rng = random.Random(seed)
    async with api(ext) as client:
        for i in range(8):
            names = rng.sample(NAMES, 120)                 # one size, one fingerprint, other nodes
            pod = Pod(f"p{seed}-{i}").queue("lq").cpu("1").wire()
            cached = (await client.post("/filter", content=compact_body(pod, names))).json()["NodeNames"]
            plain = (await client.post("/filter", content=pretty_body(Pod(f"q{seed}-{i}").queue("lq").cpu("1").wire(),
                                                                      names))).json()["NodeNames"]
            assert set(cached) <= set(names)
            assert sorted(cached) == sorted(plain) == sorted(big.intersection(names))
    cache = client.served.verbs.verbs.offered
    assert cache.collisions >= 1 and ext.state.skips[offered.COLLISION] == cache.collisions


async def test_the_offered_node_lists_scenario_holds_under_collisions(monkeypatch):
    """tests/scenarios/offered-node-lists.yaml with every list of one size colliding: a3 still gets
    node-1, the only big node in its list, not node-3 from the list a2 was offered (full, not offered)."""
    from pathlib import Path

    from app.sim.run import differences, simulate
    from app.sim.scenario import load_scenario

    _colliding(monkeypatch)
    scenario = load_scenario(str(Path(__file__).parent / "scenarios" / "offered-node-lists.yaml"))
    outcome = await simulate(scenario)
    assert differences(scenario, outcome) == []
