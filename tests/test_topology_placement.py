"""core.topology against Kueue's own cases: TestFindTopologyAssignments in pkg/cache/scheduler/tas_cache_test.go
(kubernetes-sigs/kueue main ff69552), each named as there, with its nodes, levels, request and expected assignment
(domains' level values and counts, in Kueue's order) or refusal."""
from __future__ import annotations

import pytest

from app.core.topology import HOSTNAME, TopologyRequest, place

BLOCK, RACK = "cloud.provider.com/topology-block", "cloud.provider.com/topology-rack"
TWO, THREE = (BLOCK, RACK), (BLOCK, RACK, HOSTNAME)
CPU = 1000


def node(path: str, cpu: int, pods: int = 10) -> tuple[str, dict[str, str], dict[str, int]]:
    """"b1/r2/x5" with cpu CPUs: node b1-r2-x5 in block b1, rack r2, hostname x5 (Kueue's MakeNode names)."""
    parts = path.split("/")
    labels = dict(zip((BLOCK, RACK, HOSTNAME), parts))
    return "-".join(parts), labels, {"cpu": cpu * CPU, "pods": pods}


# Kueue's defaultNodes and scatteredNodes (b2-r2-x2 is in rack r1 there too).
DEFAULT = [node("b1/r1/x3", 1), node("b1/r2/x5", 1), node("b1/r2/x1", 1), node("b1/r2/x6", 1),
           node("b2/r1/x2", 1), node("b2/r2/x4", 2, 40)]
SCATTERED = [node("b1/r1/x3", 4), node("b1/r1/x5", 1), node("b1/r1/x1", 1), node("b2/r1/x6", 2), node("b2/r1/x2", 1)]
BLOCKS = [("b1", {BLOCK: "b1"}, {"cpu": 2 * CPU, "pods": 20}), ("b2", {BLOCK: "b2"}, {"cpu": 1 * CPU, "pods": 10}),
          ("b3", {BLOCK: "b3"}, {"cpu": 4 * CPU, "pods": 40})]
RACKS = [node("b1/r1/x3", 2), node("b1/r2/x5", 2, 20), node("b1/r3/x1", 1), node("b1/r3/x6", 1),
         node("b1/r3/x2", 1), node("b1/r3/x4", 1)]

CASES = [
    ("rack required; single Pod fits in a rack", DEFAULT, TWO, TopologyRequest(RACK, required=True), 1,
     [(("b1", "r1"), 1)]),
    ("rack required; multiple Pods fit in a rack", DEFAULT, TWO, TopologyRequest(RACK, required=True), 3,
     [(("b1", "r2"), 3)]),
    ("rack required; multiple Pods fit in some racks", DEFAULT, TWO, TopologyRequest(RACK, required=True), 2,
     [(("b2", "r2"), 2)]),
    ("rack required; too many pods to fit in any rack", DEFAULT, TWO, TopologyRequest(RACK, required=True), 4,
     'topology "default" allows to fit only 3 out of 4 pod(s)'),
    ("block required; single Pod fits in a block and a single rack", DEFAULT, TWO,
     TopologyRequest(BLOCK, required=True), 1, [(("b2", "r1"), 1)]),
    ("block required; Pods fit in a block spread across two racks", DEFAULT, TWO,
     TopologyRequest(BLOCK, required=True), 4, [(("b1", "r1"), 1), (("b1", "r2"), 3)]),
    ("rack preferred; but only multiple blocks can accommodate the workload", DEFAULT, TWO, TopologyRequest(RACK), 6,
     [(("b1", "r1"), 1), (("b1", "r2"), 3), (("b2", "r2"), 2)]),
    ("block preferred; but the workload cannot be accommodate in entire topology", DEFAULT, TWO,
     TopologyRequest(BLOCK), 10, 'topology "default" allows to fit only 7 out of 10 pod(s)'),
    ("block preferred; Pods fit in 2 blocks", BLOCKS, (BLOCK,), TopologyRequest(BLOCK), 5,
     [(("b2",), 1), (("b3",), 4)]),
    ("minimize the number of used racks before optimizing the number of nodes", RACKS, THREE,
     TopologyRequest(BLOCK, required=True), 4, [(("x1",), 1), (("x2",), 1), (("x4",), 1), (("x6",), 1)]),
    ("choose the node that can accommodate all Pods", [node("b1/r1/x3", 2), node("b1/r1/x5", 1),
                                                       node("b1/r1/x1", 1)],
     THREE, TopologyRequest(BLOCK, required=True), 2, [(("x3",), 2)]),
    ("unconstrained; 6 pods fit into hosts scattered across the whole datacenter even they could fit into single "
     "rack", SCATTERED, THREE, TopologyRequest(unconstrained=True), 6,
     [(("x1",), 1), (("x3",), 1), (("x5",), 1), (("x2",), 1), (("x6",), 2)]),
    ("unconstrained; a single pod fits into each host", DEFAULT, THREE, TopologyRequest(unconstrained=True), 1,
     [(("x3",), 1)]),
    ("block required for podset; host required for slices; prioritize more free slice capacity first and then "
     "tight fit", [node("b1/r1/x3", 6), node("b1/r1/x5", 5), node("b1/r1/x1", 4), node("b1/r1/x6", 2)], THREE,
     TopologyRequest(BLOCK, required=True, slice_level=HOSTNAME, slice_size=2), 12,
     [(("x1",), 4), (("x3",), 6), (("x6",), 2)]),
]


@pytest.mark.parametrize("name, nodes, levels, request_, count, want", CASES, ids=[c[0] for c in CASES])
def test_kueue_find_topology_assignments(name, nodes, levels, request_, count, want):
    got = place("default", levels, nodes, {"cpu": CPU}, count, request_)
    if isinstance(want, str):
        assert got == want
    else:
        assert not isinstance(got, str), got
        assert list(got.domains) == want
        assert got.levels == (levels[-1:] if levels[-1] == HOSTNAME else levels)


def test_each_domain_names_its_nodes_and_a_node_without_every_level_label_is_in_none():
    nodes = [*DEFAULT, ("loose", {BLOCK: "b1"}, {"cpu": 64 * CPU, "pods": 100})]
    got = place("default", TWO, nodes, {"cpu": CPU}, 3, TopologyRequest(RACK, required=True))
    assert got.domains == ((("b1", "r2"), 3),)
    assert got.nodes == {("b1", "r2"): ("b1-r2-x1", "b1-r2-x5", "b1-r2-x6")}


def test_a_node_too_small_for_one_pod_is_named_in_the_refusal():
    nodes = [node("b1/r1/x1", 1), node("b1/r1/x2", 0)]
    assert place("default", THREE, nodes, {"cpu": CPU}, 2, TopologyRequest(RACK, required=True)) == \
        'topology "default" allows to fit only 1 out of 2 pod(s). Total nodes: 2; excluded: resource "cpu": 1'


@pytest.mark.parametrize("request_, why", [
    (TopologyRequest("example.com/zone", required=True), "no requested topology level: example.com/zone"),
    (TopologyRequest(HOSTNAME, required=True, slice_level=RACK, slice_size=2),
     f"podset slice topology {RACK} is above the podset topology {HOSTNAME}"),
    (TopologyRequest(BLOCK, required=True, slice_level=RACK, slice_size=0),
     "slice topology requested, but slice size not provided"),
])
def test_a_request_the_topology_cannot_answer_is_refused_in_kueues_words(request_, why):
    assert place("default", THREE, DEFAULT, {"cpu": CPU}, 2, request_) == why
