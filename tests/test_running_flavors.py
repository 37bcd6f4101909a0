"""Flavors of a pod found running that Quotient did not admit (core.flavors.running_flavors), and which nodes a
ResourceFlavor selects (ResourceFlavor.selects): the flavor-to-node rule, written once."""
from __future__ import annotations

import pytest

from app.core.flavors import running_flavors
from app.objects import kueue
from builders import ClusterQueue, FlavorQuotas, Node, ResourceFlavor
from helpers import apply, make_state

SPOT = {"tier": "spot"}


def cluster():
    return make_state(ResourceFlavor("on-demand").node_labels({"tier": "on-demand"}).obj(),
                      ResourceFlavor("spot").node_labels(SPOT).obj(), ResourceFlavor("any").obj(),
                      Node("n-od").labels({"tier": "on-demand"}).obj(), Node("n-spot").labels(SPOT).obj(),
                      Node("n-bare").obj(),
                      ClusterQueue("q")
                          .resource_group(FlavorQuotas("on-demand").resource("cpu", "4"),
                                          FlavorQuotas("spot").resource("cpu", "4"))
                          .resource_group(FlavorQuotas("any").resource("nvidia.com/gpu", "2")).obj())


@pytest.mark.parametrize("node_name,requests,flavors", [
    ("n-od", {"cpu": 1}, {"cpu": "on-demand"}),
    ("n-spot", {"cpu": 1}, {"cpu": "spot"}),                      # the first flavor whose nodes include it
    ("n-bare", {"cpu": 1}, {"cpu": "on-demand"}),                 # in no flavor: the group's first
    (None, {"cpu": 1}, {"cpu": "on-demand"}),                     # a node Quotient does not know
    ("n-spot", {"cpu": 1, "nvidia.com/gpu": 1}, {"cpu": "spot", "nvidia.com/gpu": "any"}),   # no labels: any node
    ("n-spot", {"memory": 1}, {}),                                # a resource no group covers
])
def test_a_running_pod_is_charged_to_the_flavor_its_node_belongs_to(node_name, requests, flavors):
    s = cluster()
    assert running_flavors(s.cluster_queues["q"], requests, node_name, s.ledger.node_in_flavor) == flavors


@pytest.mark.parametrize("labels,selected", [
    ({"tier": "spot"}, True), ({"tier": "spot", "zone": "a"}, True), ({"tier": "on-demand"}, False), ({}, False),
])
def test_a_flavor_selects_the_nodes_that_have_all_its_node_labels(labels, selected):
    assert kueue.ResourceFlavor("spot", dict(SPOT)).selects(labels) is selected
    assert kueue.ResourceFlavor("any").selects(labels) is True


def test_the_flavor_node_sets_follow_label_changes():
    s = cluster()
    assert s.flavor_nodes["spot"] == {"n-spot"} and s.flavor_nodes["any"] is None
    apply(s, Node("n-bare").labels(SPOT).obj())
    assert s.flavor_nodes["spot"] == {"n-spot", "n-bare"}
    apply(s, Node("n-spot").labels({"tier": "on-demand"}).obj())
    assert s.flavor_nodes["spot"] == {"n-bare"} and s.flavor_nodes["on-demand"] == {"n-od", "n-spot"}
