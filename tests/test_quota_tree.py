"""app.core.resource_node and app.state.tree: Kueue's hierarchical quota arithmetic, with the seed's numbers.

Every state is built from plain ClusterQueue/Cohort/ResourceFlavor dicts fed through
app.sync.dispatch.apply_object, as a cluster would deliver them.
"""
import random

import pytest

from app.core.resource_node import add_usage, available, borrowing, potential_available, remove_usage

from builders import ClusterQueue, Cohort, FlavorQuotas, LocalQueue, Node, Pod, ResourceFlavor
from helpers import CPU, Gi, all_usage, apply, make_state

CPU_FR = ("default-flavor", "cpu")
MEM_FR = ("default-flavor", "memory")


def team_ab(a: dict, b: dict, *extra: dict):
    """team-a-cq and team-b-cq in cohort team-ab, with the quotas given per resource."""
    return make_state(ResourceFlavor("default-flavor").obj(),
                      ClusterQueue("team-a-cq").cohort("team-ab")
                          .resource_group(FlavorQuotas("default-flavor").resources_from(a)).obj(),
                      ClusterQueue("team-b-cq").cohort("team-ab")
                          .resource_group(FlavorQuotas("default-flavor").resources_from(b)).obj(),
                      *extra)


def q(state, name):
    return state.tree.queues[name]


def c(state, name):
    return state.tree.cohorts[name]


# ---- 借用示例 (borrowing example) -----------------------------------------------------------------

def test_borrowing_example_idle_team_b_lets_team_a_use_21_cpus_and_84Gi():
    """seed 001 借用示例: "如果 ClusterQueue team-b-cq 没有被接纳的工作负载,那么 ClusterQueue team-a-cq
    可以接纳资源总和为 12+9=21 CPUs 和 48+36=84Gi 内存的工作负载"."""
    s = team_ab({"cpu": "9", "memory": "36Gi"}, {"cpu": "12", "memory": "48Gi"})
    a = q(s, "team-a-cq")
    assert a.quotas[CPU_FR].nominal == 9 * CPU
    assert available(a, CPU_FR) == 21 * CPU
    assert available(a, MEM_FR) == 84 * Gi
    assert potential_available(a, CPU_FR) == 21 * CPU
    assert potential_available(a, MEM_FR) == 84 * Gi
    # The implicit cohort (no Cohort object) holds both queues' quota.
    assert c(s, "team-ab").subtree[CPU_FR] == 21 * CPU
    assert c(s, "team-ab").subtree[MEM_FR] == 84 * Gi
    # and symmetrically for team-b
    assert available(q(s, "team-b-cq"), CPU_FR) == 21 * CPU


def test_borrowing_example_only_unused_quota_of_team_b_can_be_borrowed():
    """seed 001 规格与借用语义: a fit by borrowing needs the request to be within "cohort 中的所有
    ClusterQueues 的未用 nominalQuota 之和" - team-b's running usage is not lendable."""
    s = team_ab({"cpu": "9"}, {"cpu": "12"})
    add_usage(q(s, "team-b-cq"), CPU_FR, 5 * CPU)
    assert available(q(s, "team-a-cq"), CPU_FR) == 16 * CPU
    assert available(q(s, "team-b-cq"), CPU_FR) == 16 * CPU
    # potential_available ignores usage: the most it could ever get.
    assert potential_available(q(s, "team-a-cq"), CPU_FR) == 21 * CPU


# ---- 借用限制 (borrowingLimit) -------------------------------------------------------------------

def test_borrowing_limit_caps_team_a_at_nominal_plus_limit():
    """seed 001 借用限制: team-a-cq borrowingLimit 1 → "可以接纳资源总和为 9+1=10 CPUs 的工作负载";
    team-b-cq (borrowingLimit null) "可以使用 最多 12+9 CPUs"."""
    s = team_ab({"cpu": ("9", "1", None)}, {"cpu": "12"})
    a, b = q(s, "team-a-cq"), q(s, "team-b-cq")
    assert a.quotas[CPU_FR].borrowing_limit == 1 * CPU
    assert available(a, CPU_FR) == 10 * CPU
    assert potential_available(a, CPU_FR) == 10 * CPU
    assert available(b, CPU_FR) == 21 * CPU
    assert potential_available(b, CPU_FR) == 21 * CPU


def test_borrowing_limit_counts_what_is_already_borrowed():
    """seed 001 借用限制: borrowingLimit bounds the total borrowed, so usage above nominal uses it up."""
    s = team_ab({"cpu": ("9", "1", None)}, {"cpu": "12"})
    a = q(s, "team-a-cq")
    add_usage(a, CPU_FR, 9500)          # 0.5 CPU borrowed already
    assert available(a, CPU_FR) == 500
    assert borrowing(a, CPU_FR) is True
    add_usage(a, CPU_FR, 500)
    assert available(a, CPU_FR) == 0


def test_borrowing_limit_cannot_exceed_what_the_cohort_has_unused():
    """seed 001 规格与借用语义 (2) and (3): both the cohort's unused quota and the borrowingLimit bound it."""
    s = team_ab({"cpu": ("9", "1", None)}, {"cpu": "12"})
    a, b = q(s, "team-a-cq"), q(s, "team-b-cq")
    add_usage(b, CPU_FR, 12 * CPU)      # team-b uses all its nominal quota
    assert available(a, CPU_FR) == 9 * CPU
    add_usage(b, CPU_FR, 2 * CPU)       # and borrows 2 of team-a's
    assert available(a, CPU_FR) == 7 * CPU
    assert potential_available(a, CPU_FR) == 10 * CPU


# ---- LendingLimit ----------------------------------------------------------------------------------

def test_lending_limit_team_a_can_use_9_plus_1():
    """seed 001 LendingLimit: team-b-cq lendingLimit=1 → "ClusterQueue team-a-cq 可以接纳资源 总和为
    9+1=10 CPUs 的工作负载"."""
    s = team_ab({"cpu": "9"}, {"cpu": ("12", None, "1")})
    a, b = q(s, "team-a-cq"), q(s, "team-b-cq")
    assert b.guaranteed(CPU_FR) == 11 * CPU
    assert c(s, "team-ab").subtree[CPU_FR] == 10 * CPU       # 9 from team-a + 1 lent by team-b
    assert available(a, CPU_FR) == 10 * CPU
    assert potential_available(a, CPU_FR) == 10 * CPU


def test_lending_limit_team_b_keeps_all_of_its_own_12():
    """seed 001 LendingLimit: team-b-cq keeps its guaranteed 11 plus the lendable 1 (all of its 12), and -
    "如果 lendingLimit 字段未指定,ClusterQueue 可以借出 所有资源。在这种情况下,team-b-cq 可以使用最多
    9+12 CPUs" - team-a (no lendingLimit) lends it all of its 9."""
    s = team_ab({"cpu": "9"}, {"cpu": ("12", None, "1")})
    b = q(s, "team-b-cq")
    assert available(b, CPU_FR) >= 12 * CPU
    assert available(b, CPU_FR) == 21 * CPU
    assert potential_available(b, CPU_FR) == 21 * CPU


def test_lending_limit_guaranteed_quota_stays_with_team_b_while_team_a_borrows():
    """seed 001 LendingLimit: team-b's usage up to 12-1=11 is invisible to the cohort; only 1 CPU is lendable."""
    s = team_ab({"cpu": "9"}, {"cpu": ("12", None, "1")})
    a, b, ab = q(s, "team-a-cq"), q(s, "team-b-cq"), c(s, "team-ab")
    add_usage(b, CPU_FR, 11 * CPU)
    assert ab.usage.get(CPU_FR, 0) == 0
    assert available(a, CPU_FR) == 10 * CPU          # "小于或等于 12-1=11 CPUs" → still 9+1
    add_usage(b, CPU_FR, 1 * CPU)                     # team-b uses its 12th: the lendable one
    assert ab.usage[CPU_FR] == 1 * CPU
    assert available(a, CPU_FR) == 9 * CPU
    remove_usage(b, CPU_FR, 12 * CPU)
    add_usage(a, CPU_FR, 10 * CPU)                    # team-a borrows team-b's lendable CPU
    assert available(b, CPU_FR) == 11 * CPU           # its guaranteed 11 is untouched


# ---- usage bookkeeping -------------------------------------------------------------------------------

def test_usage_add_then_remove_returns_every_node_to_zero():
    """seed 001 借用示例: usage is what admitted workloads hold; releasing it leaves every ClusterQueue
    and the cohort at zero."""
    s = team_ab({"cpu": "9", "memory": "36Gi"}, {"cpu": ("12", None, "1"), "memory": "48Gi"})
    a, b = q(s, "team-a-cq"), q(s, "team-b-cq")
    add_usage(a, CPU_FR, 15 * CPU)
    add_usage(a, MEM_FR, 40 * Gi)
    add_usage(b, CPU_FR, 3 * CPU)
    assert all_usage(s)
    remove_usage(a, CPU_FR, 15 * CPU)
    remove_usage(a, MEM_FR, 40 * Gi)
    remove_usage(b, CPU_FR, 3 * CPU)
    assert all_usage(s) == {}


def test_usage_above_guaranteed_quota_is_what_reaches_the_cohort():
    """seed 001 LendingLimit: a ClusterQueue keeps nominal-lendingLimit for itself; only usage above that
    is stored in (borrowed from / lent through) the cohort. Without a lendingLimit all usage reaches it."""
    s = team_ab({"cpu": "9"}, {"cpu": ("12", None, "1")})
    a, b, ab = q(s, "team-a-cq"), q(s, "team-b-cq"), c(s, "team-ab")
    add_usage(b, CPU_FR, 10 * CPU)
    assert (b.usage[CPU_FR], ab.usage.get(CPU_FR, 0)) == (10 * CPU, 0)
    add_usage(b, CPU_FR, 3 * CPU)                     # 13 used, guaranteed 11 → 2 in the cohort
    assert (b.usage[CPU_FR], ab.usage[CPU_FR]) == (13 * CPU, 2 * CPU)
    add_usage(a, CPU_FR, 4 * CPU)                     # team-a guarantees nothing: all 4 reach it
    assert ab.usage[CPU_FR] == 6 * CPU
    remove_usage(b, CPU_FR, 10 * CPU)                 # 3 left, below guaranteed → 0 in the cohort
    assert (b.usage[CPU_FR], ab.usage[CPU_FR]) == (3 * CPU, 4 * CPU)


def test_usage_removal_is_order_independent():
    """seed 001 借用示例: add a, add b, remove a, remove b (and the reverse) leave no residue anywhere."""
    for order in (("a", "b"), ("b", "a")):
        s = team_ab({"cpu": "9"}, {"cpu": ("12", None, "1")})
        nodes = {"a": q(s, "team-a-cq"), "b": q(s, "team-b-cq")}
        add_usage(nodes["a"], CPU_FR, 14 * CPU)
        add_usage(nodes["b"], CPU_FR, 12 * CPU)
        for k in order:
            remove_usage(nodes[k], CPU_FR, {"a": 14, "b": 12}[k] * CPU)
        assert all_usage(s) == {}, order


def _stored(node, fr):
    return max(0, node.usage.get(fr, 0) - node.guaranteed(fr))


def test_usage_random_sequences_keep_cohort_usage_equal_to_what_children_store():
    """seed 001 LendingLimit / 借用示例: at every step each cohort's usage is exactly the sum of what its
    children use above their guaranteed quota; releasing everything in any order returns all to zero."""
    rng = random.Random(1)
    for _ in range(60):
        s = make_state(
            ResourceFlavor("default-flavor").obj(),
            Cohort("root").resource_group(FlavorQuotas("default-flavor").resource("cpu", "3")).obj(),
            Cohort("ab").parent("root").resource_group(FlavorQuotas("default-flavor").resource("cpu", "2", lending="1"))
                .obj(),
            ClusterQueue("team-a-cq").cohort("ab")
                .resource_group(FlavorQuotas("default-flavor").resource("cpu", "9", lending="2")).obj(),
            ClusterQueue("team-b-cq").cohort("ab").resource_group(FlavorQuotas("default-flavor").resource("cpu", "12"))
                .obj(),
            ClusterQueue("team-c-cq").cohort("root")
                .resource_group(FlavorQuotas("default-flavor").resource("cpu", "5", borrowing="1", lending="4")).obj(),
        )
        leaves = list(s.tree.queues.values())
        held = []
        for _ in range(rng.randint(1, 12)):
            leaf, v = rng.choice(leaves), rng.randint(1, 9) * 500
            add_usage(leaf, CPU_FR, v)
            held.append((leaf, v))
            for co in s.tree.cohorts.values():
                assert co.usage.get(CPU_FR, 0) == sum(_stored(ch, CPU_FR) for ch in co.children)
        rng.shuffle(held)
        for leaf, v in held:
            remove_usage(leaf, CPU_FR, v)
            for co in s.tree.cohorts.values():
                assert co.usage.get(CPU_FR, 0) == sum(_stored(ch, CPU_FR) for ch in co.children)
        assert all_usage(s) == {}


# ---- hierarchical cohorts ---------------------------------------------------------------------------

def test_hierarchical_cohort_own_nominal_adds_to_what_children_can_borrow():
    """seed 001 队列组(Cohort): a Cohort object with its own resourceGroups quota lends it to the
    ClusterQueues below it, through a child cohort named by spec.parentName."""
    s = make_state(ResourceFlavor("default-flavor").obj(),
                   Cohort("root").resource_group(FlavorQuotas("default-flavor").resource("cpu", "4")).obj(),
                   Cohort("team-ab").parent("root").obj(),
                   ClusterQueue("team-a-cq").cohort("team-ab")
                       .resource_group(FlavorQuotas("default-flavor").resource("cpu", "9")).obj(),
                   ClusterQueue("team-b-cq").cohort("team-ab")
                       .resource_group(FlavorQuotas("default-flavor").resource("cpu", "12")).obj())
    a = q(s, "team-a-cq")
    assert c(s, "team-ab").parent is c(s, "root")
    assert c(s, "root").subtree[CPU_FR] == 25 * CPU
    assert available(a, CPU_FR) == (9 + 12 + 4) * CPU
    assert potential_available(a, CPU_FR) == 25 * CPU
    add_usage(q(s, "team-b-cq"), CPU_FR, 20 * CPU)
    assert available(a, CPU_FR) == 5 * CPU
    assert c(s, "root").usage[CPU_FR] == 20 * CPU


def test_hierarchical_child_cohort_lending_limit_caps_what_it_lends_upward():
    """seed 001 LendingLimit, applied to a Cohort: team-ab (21 CPUs) lends at most 5 to its parent, so
    team-c-cq in the parent cohort sees 2 + 4 (root's own) + 5; team-ab's members still see everything."""
    s = make_state(ResourceFlavor("default-flavor").obj(),
                   Cohort("root").resource_group(FlavorQuotas("default-flavor").resource("cpu", "4")).obj(),
                   Cohort("team-ab").parent("root")
                       .resource_group(FlavorQuotas("default-flavor").resource("cpu", "0", lending="5")).obj(),
                   ClusterQueue("team-a-cq").cohort("team-ab")
                       .resource_group(FlavorQuotas("default-flavor").resource("cpu", "9")).obj(),
                   ClusterQueue("team-b-cq").cohort("team-ab")
                       .resource_group(FlavorQuotas("default-flavor").resource("cpu", "12")).obj(),
                   ClusterQueue("team-c-cq").cohort("root")
                       .resource_group(FlavorQuotas("default-flavor").resource("cpu", "2")).obj())
    ab, root = c(s, "team-ab"), c(s, "root")
    a, team_c = q(s, "team-a-cq"), q(s, "team-c-cq")
    assert ab.subtree[CPU_FR] == 21 * CPU
    assert ab.guaranteed(CPU_FR) == 16 * CPU
    assert root.subtree[CPU_FR] == (4 + 5 + 2) * CPU
    assert available(team_c, CPU_FR) == 11 * CPU
    assert potential_available(team_c, CPU_FR) == 11 * CPU
    assert available(a, CPU_FR) == (21 + 4 + 2) * CPU
    assert potential_available(a, CPU_FR) == 27 * CPU
    # team-a uses 20: 16 stay guaranteed inside team-ab, 4 reach root
    add_usage(a, CPU_FR, 20 * CPU)
    assert ab.usage[CPU_FR] == 20 * CPU
    assert root.usage[CPU_FR] == 4 * CPU
    assert available(team_c, CPU_FR) == 7 * CPU
    # available never exceeds potential_available
    for leaf in s.tree.queues.values():
        assert available(leaf, CPU_FR) <= potential_available(leaf, CPU_FR)


def test_hierarchical_child_cohort_borrowing_limit_caps_what_it_takes_from_parent():
    """seed 001 借用限制, applied to a Cohort: team-ab may take at most 1 CPU beyond its own subtree."""
    s = make_state(ResourceFlavor("default-flavor").obj(),
                   Cohort("root").resource_group(FlavorQuotas("default-flavor").resource("cpu", "4")).obj(),
                   Cohort("team-ab").parent("root")
                       .resource_group(FlavorQuotas("default-flavor").resource("cpu", "0", borrowing="1")).obj(),
                   ClusterQueue("team-a-cq").cohort("team-ab")
                       .resource_group(FlavorQuotas("default-flavor").resource("cpu", "9")).obj(),
                   ClusterQueue("team-b-cq").cohort("team-ab")
                       .resource_group(FlavorQuotas("default-flavor").resource("cpu", "12")).obj())
    a = q(s, "team-a-cq")
    assert available(a, CPU_FR) == 22 * CPU
    assert potential_available(a, CPU_FR) == 22 * CPU


# ---- no cohort -------------------------------------------------------------------------------------

def test_cluster_queue_without_cohort_available_is_nominal_minus_usage():
    """seed 001 队列组: "如果 spec.cohort 字段为空,则 ClusterQueue 不属于任何 cohort,因此它不能从任何其他
    ClusterQueue 借用配额"; and the first example: it admits while "CPU 请求总和小于等于 9"."""
    s = make_state(ResourceFlavor("default-flavor").obj(),
                   ClusterQueue("cluster-queue").resource_group(FlavorQuotas("default-flavor").resource("cpu", "9"))
                       .obj())
    n = q(s, "cluster-queue")
    assert n.parent is None
    assert available(n, CPU_FR) == 9 * CPU
    assert potential_available(n, CPU_FR) == 9 * CPU
    assert borrowing(n, CPU_FR, 9 * CPU) is False
    assert borrowing(n, CPU_FR, 9 * CPU + 1) is True
    add_usage(n, CPU_FR, 5500)
    assert available(n, CPU_FR) == 3500
    assert borrowing(n, CPU_FR) is False
    assert borrowing(n, CPU_FR, 3500) is False
    assert borrowing(n, CPU_FR, 3501) is True
    remove_usage(n, CPU_FR, 5500)
    assert all_usage(s) == {}


def test_borrowing_is_true_only_above_own_nominal_in_a_cohort():
    """seed 001 规格与借用语义: "当 (2) 和 (3) 满足但未满足 (1) 时,这称为 borrowing quota"."""
    s = team_ab({"cpu": "9"}, {"cpu": "12"})
    a = q(s, "team-a-cq")
    assert borrowing(a, CPU_FR, 9 * CPU) is False
    assert borrowing(a, CPU_FR, 10 * CPU) is True
    add_usage(a, CPU_FR, 10 * CPU)
    assert borrowing(a, CPU_FR) is True


def test_running_pods_in_the_state_are_charged_once_to_the_tree():
    """seed 001 借用示例: usage is the sum of admitted (here: running) workloads' requests."""
    s = make_state(ResourceFlavor("default-flavor").obj(),
                   ClusterQueue("team-a-cq").cohort("team-ab")
                       .resource_group(FlavorQuotas("default-flavor").resource("cpu", "9")).obj(),
                   ClusterQueue("team-b-cq").cohort("team-ab")
                       .resource_group(FlavorQuotas("default-flavor").resource("cpu", "12")).obj(),
                   LocalQueue("lq", "team-a").cluster_queue("team-a-cq").obj(),
                   Node("n1").cpu("64").obj(),
                   Pod("p1", "team-a").queue("lq").cpu("6").node("n1").obj(),
                   Pod("p2", "team-a").queue("lq").cpu("5").node("n1").obj())
    assert q(s, "team-a-cq").usage[CPU_FR] == 11 * CPU
    assert c(s, "team-ab").usage[CPU_FR] == 11 * CPU
    assert available(q(s, "team-b-cq"), CPU_FR) == 10 * CPU


# ---- tree building, implicit cohorts, inactive queues ---------------------------------------------

def test_implicit_cohort_is_created_for_a_cohort_name_without_object():
    """seed 001 队列组: "所有具有匹配 spec.cohort 的 ClusterQueues 都是 cohort 的一部分" - no Cohort object needed."""
    s = team_ab({"cpu": "9"}, {"cpu": "12"})
    ab = c(s, "team-ab")
    assert ab.is_cohort and ab.parent is None
    assert sorted(ch.name for ch in ab.children) == ["team-a-cq", "team-b-cq"]
    assert s.tree.inactive == {}


def test_cluster_queue_naming_a_missing_flavor_is_inactive_with_reason():
    """seed 001 资源规格与资源: flavors are defined by ResourceFlavor objects; a ClusterQueue naming one that does
    not exist cannot admit (Kueue marks it inactive), and the reason names the flavor."""
    s = make_state(ResourceFlavor("default-flavor").obj(),
                   ClusterQueue("cluster-queue")
                       .resource_group(FlavorQuotas("default-flavor").resource("cpu", "9"),
                                       FlavorQuotas("spot-ghost").resource("cpu", "4"))
                       .obj())
    reason = s.tree.inactive["cluster-queue"]
    assert "spot-ghost" in reason
    assert "default-flavor" not in reason
    apply(s, ResourceFlavor("spot-ghost").obj())                      # creating the flavor activates the queue
    assert "cluster-queue" not in s.tree.inactive


def test_cohort_parent_cycle_makes_member_queues_inactive():
    """seed 001 队列组 (hierarchical Cohorts via spec.parentName): a parentName cycle has no root, so queues
    under it are inactive and the reason says so."""
    s = make_state(ResourceFlavor("default-flavor").obj(),
                   Cohort("x").parent("y").obj(), Cohort("y").parent("x").obj(),
                   ClusterQueue("team-a-cq").cohort("x")
                       .resource_group(FlavorQuotas("default-flavor").resource("cpu", "9")).obj(),
                   ClusterQueue("team-b-cq").cohort("")
                       .resource_group(FlavorQuotas("default-flavor").resource("cpu", "9")).obj())
    reason = s.tree.inactive["team-a-cq"]
    assert "cycle" in reason
    assert "team-a-cq" in reason
    assert "team-b-cq" not in s.tree.inactive


def test_cohort_under_a_cycle_makes_its_queues_inactive_too():
    """seed 001 队列组: a cohort whose parent chain runs into a cycle has no root either."""
    s = make_state(ResourceFlavor("default-flavor").obj(),
                   Cohort("x").parent("y").obj(), Cohort("y").parent("x").obj(), Cohort("leaf").parent("x").obj(),
                   ClusterQueue("team-a-cq").cohort("leaf")
                       .resource_group(FlavorQuotas("default-flavor").resource("cpu", "9")).obj())
    assert "cycle" in s.tree.inactive["team-a-cq"]


@pytest.mark.parametrize("bulk", [True, False])
def test_tree_is_the_same_with_or_without_bulk_loading(bulk):
    """seed 001 借用示例: objects arriving one by one (watch) or as a snapshot give the same 21 CPUs."""
    s = make_state(ClusterQueue("team-a-cq").cohort("team-ab")
                       .resource_group(FlavorQuotas("default-flavor").resource("cpu", "9")).obj(),
                   ClusterQueue("team-b-cq").cohort("team-ab")
                       .resource_group(FlavorQuotas("default-flavor").resource("cpu", "12")).obj(),
                   ResourceFlavor("default-flavor").obj(), bulk=bulk)
    assert s.tree.inactive == {}
    assert available(q(s, "team-a-cq"), CPU_FR) == 21 * CPU
