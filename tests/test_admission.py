"""app.core.admission.decide(state, workload, offered): queue resolution, stop policy, namespace selection,
queueing strategy, "nominal quota first", reservations and how running pods are charged.

States are built from plain Kubernetes/Kueue dicts fed through app.sync.dispatch.apply_object.
"""
import pytest

from app.config import Configuration
from app.core.admission import decide
from app.core.flavors import Charge
from app.core.resource_node import available

from builders import ClusterQueue, FlavorQuotas, LocalQueue, Namespace, Node, Pod, ResourceFlavor
from helpers import (CPU, FakeClock, all_usage, apply, decide_pod, delete, make_state, pod_info, refused_by,
                     workload_info)

FR = ("default-flavor", "cpu")


def single(*extra, config=None, clock=None, cpu="9", selector=None, **spec):
    """One ClusterQueue "cq" (default-flavor, no cohort), LocalQueue team-a/lq → cq, one big node."""
    queue = ClusterQueue("cq").resource_group(FlavorQuotas("default-flavor").resource("cpu", cpu)).spec(**spec)
    if selector is not None:
        queue.namespace_selector(selector)
    return make_state(ResourceFlavor("default-flavor").obj(), Node("n1").cpu("64").obj(), queue.obj(),
                      LocalQueue("lq", "team-a").cluster_queue("cq").obj(), *extra, config=config, clock=clock)



# ---- queue label --------------------------------------------------------------------------------------------

def test_pod_without_queue_label_is_not_managed():
    """seed 001 集群队列: ClusterQueues admit workloads submitted to them (via a LocalQueue); a pod that names
    no queue is not Quotient's to admit and passes untouched."""
    s = single()
    v = decide_pod(s, Pod("free").cpu("100").obj())
    assert (v.managed, v.admit, v.rule) == (False, True, "NoQueueName")


def test_pod_without_queue_label_is_refused_when_manage_jobs_without_queue_name():
    """seed 001 集群队列 (Kueue's manageJobsWithoutQueueName): every pod must then go through a queue."""
    s = single(config=Configuration(manage_jobs_without_queue_name=True))
    v = decide_pod(s, Pod("free").cpu("1").obj())
    refused_by(v, "NoQueueName", "kueue.x-k8s.io/queue-name")


# ---- LocalQueue / ClusterQueue resolution ---------------------------------------------------------------------

def test_missing_local_queue_is_refused_naming_it():
    """seed 001 集群队列: the pod's queue-name label must name a LocalQueue in its namespace."""
    s = single()
    refused_by(decide_pod(s, Pod("p").queue("nope").cpu("1").obj()), "LocalQueueNotFound", "team-a/nope")


def test_local_queue_in_another_namespace_does_not_count():
    """seed 001 集群队列: LocalQueues are namespaced; team-b/lq does not serve a pod in team-a."""
    s = make_state(ResourceFlavor("default-flavor").obj(),
                   ClusterQueue("cq").resource_group(FlavorQuotas("default-flavor").resource("cpu", "9")).obj(),
                   LocalQueue("lq", "team-b").cluster_queue("cq").obj())
    refused_by(decide_pod(s, Pod("p", "team-a").queue("lq").cpu("1").obj()), "LocalQueueNotFound", "team-a/lq")


def test_missing_cluster_queue_is_refused_naming_it():
    """seed 001 集群队列: a LocalQueue pointing to a ClusterQueue that does not exist admits nothing."""
    s = make_state(ResourceFlavor("default-flavor").obj(), LocalQueue("lq", "team-a").cluster_queue("ghost-cq").obj())
    refused_by(decide_pod(s, Pod("p").queue("lq").cpu("1").obj()), "ClusterQueueNotFound", "ghost-cq", "team-a/lq")


def test_inactive_cluster_queue_is_refused_with_its_reason():
    """seed 001 资源规格与资源: a ClusterQueue naming a ResourceFlavor that does not exist admits nothing."""
    s = make_state(ClusterQueue("cq").resource_group(FlavorQuotas("ghost-flavor").resource("cpu", "9")).obj(),
                   LocalQueue("lq", "team-a").cluster_queue("cq").obj())
    refused_by(decide_pod(s, Pod("p").queue("lq").cpu("1").obj()), "ClusterQueueInactive", "ghost-flavor")


# ---- stopPolicy ------------------------------------------------------------------------------------------------

@pytest.mark.parametrize("policy", ["Hold", "HoldAndDrain"])
def test_stop_policy_holds_new_admissions(policy):
    """seed 001 停止策略: "stopPolicy: Hold ... 将停止 ClusterQueue 中新的工作负载接纳"; HoldAndDrain also."""
    s = single(stopPolicy=policy)
    refused_by(decide_pod(s, Pod("p").queue("lq").cpu("1").obj()), "ClusterQueueStopped", "cq", policy)


@pytest.mark.parametrize("policy", [None, "None"])
def test_stop_policy_none_or_removed_admits(policy):
    """seed 001 停止策略: "如果设置为 None 或 spec.stopPolicy 被删除,ClusterQueue 将恢复正常接纳行为"."""
    s = single(stopPolicy="Hold")
    spec = {"stopPolicy": policy} if policy else {}
    apply(s, ClusterQueue("cq").resource_group(FlavorQuotas("default-flavor").resource("cpu", "9")).spec(**spec).obj())
    assert decide_pod(s, Pod("p").queue("lq").cpu("1").obj()).admit is True


# ---- namespaceSelector ----------------------------------------------------------------------------------------

def test_null_namespace_selector_selects_no_namespace():
    """seed 001 命名空间选择器: "要允许所有命名空间的工作负载,请将空选择器 {} 设置为 spec.namespaceSelector";
    without one (null) Kueue matches nothing."""
    s = make_state(ResourceFlavor("default-flavor").obj(),
                   ClusterQueue("cq").resource_group(FlavorQuotas("default-flavor").resource("cpu", "9"))
                       .namespace_selector(None).obj(),
                   LocalQueue("lq", "team-a").cluster_queue("cq").obj())
    assert s.cluster_queues["cq"].namespace_selector is None
    refused_by(decide_pod(s, Pod("p").queue("lq").cpu("1").obj()), "NamespaceNotSelected", "cq", "namespaceSelector")


def test_empty_namespace_selector_selects_every_namespace():
    """seed 001 命名空间选择器: "namespaceSelector: {} # 匹配所有命名空间。"."""
    s = make_state(ResourceFlavor("default-flavor").obj(),
                   ClusterQueue("cq").resource_group(FlavorQuotas("default-flavor").resource("cpu", "9")).obj(),
                   LocalQueue("lq", "anything").cluster_queue("cq").obj())
    assert decide_pod(s, Pod("p", "anything").queue("lq").cpu("1").obj()).admit is True


def test_namespace_selector_match_labels_on_namespace_labels():
    """seed 001 命名空间选择器: matchLabels research-cohort: team-a-b lets team-a and team-b submit; a namespace
    without the label is refused, naming the namespace."""
    sel = {"matchLabels": {"research-cohort": "team-a-b"}}
    s = make_state(ResourceFlavor("default-flavor").obj(),
                   ClusterQueue("cq").resource_group(FlavorQuotas("default-flavor").resource("cpu", "9"))
                       .namespace_selector(sel).obj(),
                   Namespace("team-a").labels({"research-cohort": "team-a-b"}).obj(),
                   Namespace("team-b").labels({"research-cohort": "team-a-b"}).obj(),
                   Namespace("team-c").labels({"research-cohort": "other"}).obj(),
                   LocalQueue("lq", "team-a").cluster_queue("cq").obj(),
                   LocalQueue("lq", "team-b").cluster_queue("cq").obj(),
                   LocalQueue("lq", "team-c").cluster_queue("cq").obj())
    assert decide_pod(s, Pod("p", "team-a").queue("lq").cpu("1").obj()).admit is True
    assert decide_pod(s, Pod("p", "team-b").queue("lq").cpu("1").obj()).admit is True
    refused_by(decide_pod(s, Pod("p", "team-c").queue("lq").cpu("1").obj()), "NamespaceNotSelected", "team-c", "cq",
               "research-cohort=team-a-b")


def test_namespace_selector_metadata_name_label():
    """seed 001 命名空间选择器: "kubernetes.io/metadata.name: team-a 指的是 Kubernetes 控制平面在所有命名空间上设置的
    不可变标签" - it matches even when the Namespace object carries no labels."""
    sel = {"matchLabels": {"kubernetes.io/metadata.name": "team-a"}}
    s = make_state(ResourceFlavor("default-flavor").obj(),
                   ClusterQueue("cq").resource_group(FlavorQuotas("default-flavor").resource("cpu", "9"))
                       .namespace_selector(sel).obj(),
                   Namespace("team-a").obj(), LocalQueue("lq", "team-a").cluster_queue("cq").obj(),
                   LocalQueue("lq", "team-b").cluster_queue("cq").obj())
    assert decide_pod(s, Pod("p", "team-a").queue("lq").cpu("1").obj()).admit is True
    refused_by(decide_pod(s, Pod("p", "team-b").queue("lq").cpu("1").obj()), "NamespaceNotSelected", "team-b")


def test_namespace_selector_match_expressions():
    """seed 001 命名空间选择器: "另一种配置 namespaceSelector 的方法是使用 matchExpressions"."""
    sel = {"matchExpressions": [{"key": "kubernetes.io/metadata.name", "operator": "In",
                                 "values": ["team-a", "team-b"]},
                                {"key": "frozen", "operator": "DoesNotExist"}]}
    s = make_state(ResourceFlavor("default-flavor").obj(),
                   ClusterQueue("cq").resource_group(FlavorQuotas("default-flavor").resource("cpu", "9"))
                       .namespace_selector(sel).obj(),
                   Namespace("team-a").obj(), Namespace("team-b").labels({"frozen": "yes"}).obj(),
                   Namespace("team-c").obj(),
                   LocalQueue("lq", "team-a").cluster_queue("cq").obj(),
                   LocalQueue("lq", "team-b").cluster_queue("cq").obj(),
                   LocalQueue("lq", "team-c").cluster_queue("cq").obj())
    assert decide_pod(s, Pod("p", "team-a").queue("lq").cpu("1").obj()).admit is True
    refused_by(decide_pod(s, Pod("p", "team-b").queue("lq").cpu("1").obj()), "NamespaceNotSelected", "team-b")
    refused_by(decide_pod(s, Pod("p", "team-c").queue("lq").cpu("1").obj()), "NamespaceNotSelected", "team-c")


def test_namespace_label_change_is_seen():
    """seed 001 命名空间选择器: selection follows the Namespace's current labels."""
    sel = {"matchLabels": {"research-cohort": "team-a-b"}}
    s = make_state(ResourceFlavor("default-flavor").obj(),
                   ClusterQueue("cq").resource_group(FlavorQuotas("default-flavor").resource("cpu", "9"))
                       .namespace_selector(sel).obj(),
                   Namespace("team-a").obj(), LocalQueue("lq", "team-a").cluster_queue("cq").obj())
    assert decide_pod(s, Pod("p").queue("lq").cpu("1").obj()).admit is False
    apply(s, Namespace("team-a").labels({"research-cohort": "team-a-b"}).obj())
    assert decide_pod(s, Pod("p").queue("lq").cpu("1").obj()).admit is True


# ---- queueing strategy ----------------------------------------------------------------------------------------

def fifo_state(strategy, *pods, cpu="8"):
    return single(Node("n2").cpu("64").obj(), *pods, cpu=cpu, queueingStrategy=strategy)


def test_strict_fifo_older_pod_that_does_not_fit_blocks_newer_pod_that_fits():
    """seed 001 排队策略: StrictFIFO "无法被接纳的旧工作负载会阻止新工作负载,即使新工作负载适合可用配额"."""
    s = fifo_state("StrictFIFO", Pod("running").queue("lq").cpu("6").node("n1").obj(),
                   Pod("old").queue("lq").cpu("4").obj())
    v = decide_pod(s, Pod("new").queue("lq").cpu("2").created(10).obj())
    refused_by(v, "StrictFIFO", "team-a/old")


def test_best_effort_fifo_older_pod_that_does_not_fit_does_not_block():
    """seed 001 排队策略: BestEffortFIFO "无法被接纳的旧工作负载不会阻止新工作负载,只要新工作负载适合可用配额"; it
    is the default ("默认排队策略是 BestEffortFIFO")."""
    for strategy in ("BestEffortFIFO", None):
        pods = (Pod("running").queue("lq").cpu("6").node("n1").obj(), Pod("old").queue("lq").cpu("4").obj())
        s = fifo_state(strategy, *pods) if strategy else single(Node("n2").cpu("64").obj(), *pods, cpu="8")
        assert s.cluster_queues["cq"].queueing_strategy == "BestEffortFIFO"
        v = decide_pod(s, Pod("new").queue("lq").cpu("2").created(10).obj())
        assert v.admit is True, v.reason


def test_strict_fifo_higher_priority_newer_pod_is_ahead_of_older_low_priority():
    """seed 001 排队策略: "工作负载首先按 优先级排序, 然后按创建时间 .metadata.creationTimestamp 排序" - an older
    low-priority pod that does not fit does not block a newer high-priority one..."""
    s = fifo_state("StrictFIFO", Pod("running").queue("lq").cpu("6").node("n1").obj(),
                   Pod("old-low").queue("lq").cpu("4").priority(0).obj())
    v = decide_pod(s, Pod("new-high").queue("lq").cpu("2").priority(100).created(10).obj())
    assert v.admit is True, v.reason


def test_strict_fifo_higher_priority_newer_pod_blocks_older_low_priority():
    """seed 001 排队策略: "...首先按 优先级排序" - a newer high-priority pod that does not fit blocks an older
    low-priority pod that would."""
    s = fifo_state("StrictFIFO", Pod("running").queue("lq").cpu("6").node("n1").obj(),
                   Pod("new-high").queue("lq").cpu("4").priority(100).created(10).obj())
    v = decide_pod(s, Pod("old-low").queue("lq").cpu("2").priority(0).obj())
    refused_by(v, "StrictFIFO", "team-a/new-high")


def test_strict_fifo_priority_comes_from_the_priority_class():
    """seed 001 排队策略: "工作负载首先按 优先级排序" - the priority of a pod naming a PriorityClass is its value."""
    high = Pod("new-high").queue("lq").cpu("4").created(10).obj()
    high["spec"]["priorityClassName"] = "high"
    s = fifo_state("StrictFIFO",
                   {"apiVersion": "scheduling.k8s.io/v1", "kind": "PriorityClass", "metadata": {"name": "high"},
                    "value": 1000},
                   Pod("running").queue("lq").cpu("6").node("n1").obj(), high)
    assert pod_info(s, "team-a", "new-high").priority == 1000
    refused_by(decide_pod(s, Pod("old-low").queue("lq").cpu("2").obj()), "StrictFIFO", "team-a/new-high")


def test_strict_fifo_equal_priority_orders_by_creation_time():
    """seed 001 排队策略: at equal priority, creation time decides: a newer pod is behind, not ahead."""
    s = fifo_state("StrictFIFO", Pod("running").queue("lq").cpu("6").node("n1").obj(),
                   Pod("newer").queue("lq").cpu("4").created(20).obj())
    assert decide_pod(s, Pod("older").queue("lq").cpu("2").created(10).obj()).admit is True


def test_strict_fifo_older_pods_that_fit_are_charged_virtually_first():
    """seed 001 排队策略: StrictFIFO order means the two older 3-CPU pods are admitted before the newer one; in an
    8-CPU queue that leaves 2, so the newer 3-CPU pod is refused; the tree is unchanged afterwards."""
    s = fifo_state("StrictFIFO", Pod("a").queue("lq").cpu("3").obj(), Pod("b").queue("lq").cpu("3").created(1).obj())
    before = all_usage(s)
    v = decide_pod(s, Pod("c").queue("lq").cpu("3").created(2).obj())
    assert v.admit is False and v.rule == "QuotaExceeded"
    assert "ahead of it in queue order" in v.reason and "team-a/a, team-a/b" in v.reason
    assert all_usage(s) == before == {}
    assert available(s.ledger.quota_node("cq"), FR) == 8 * CPU
    # the older ones themselves are admissible, in order
    assert decide(s, workload_info(s, "team-a", "a")).admit is True
    assert decide(s, workload_info(s, "team-a", "b")).admit is True
    assert all_usage(s) == {}


# ---- nominal quota first ----------------------------------------------------------------------------------------

def team_ab() -> list[dict]:
    """team-a-cq 9 CPUs and team-b-cq 12 CPUs in cohort team-ab, a LocalQueue lq in each team's namespace."""
    return [ResourceFlavor("default-flavor").obj(), Node("n1").cpu("64").obj(),
            ClusterQueue("team-a-cq").cohort("team-ab")
                .resource_group(FlavorQuotas("default-flavor").resource("cpu", "9")).obj(),
            ClusterQueue("team-b-cq").cohort("team-ab")
                .resource_group(FlavorQuotas("default-flavor").resource("cpu", "12")).obj(),
            LocalQueue("lq", "team-a").cluster_queue("team-a-cq").obj(),
            LocalQueue("lq", "team-b").cluster_queue("team-b-cq").obj()]


def cohort_state(*extra):
    """team_ab, where team-a uses its 9 CPUs with a running pod."""
    return make_state(*team_ab(), Pod("a-running", "team-a").queue("lq").cpu("9").node("n1").obj(), *extra)


def test_nominal_quota_first_pending_team_b_pod_comes_before_team_a_borrowing():
    """seed 001 借用示例: "如果 ClusterQueue team-b-cq 有待处理的工作负载,并且 ClusterQueue team-a-cq 的所有
    nominalQuota 配额已用完,Kueue 将首先在 ClusterQueue team-b-cq 中接纳工作负载,然后再接纳任何新工作负载
    team-a-cq"."""
    b_pending = Pod("b-pending", "team-b").queue("lq").cpu("12").created(100).obj()
    s = cohort_state(b_pending)
    before = all_usage(s)
    v = decide_pod(s, Pod("a-borrower", "team-a").queue("lq").cpu("1").obj())
    refused_by(v, "NominalQuotaFirst", "team-b/b-pending", "team-a-cq")
    assert all_usage(s) == before
    # team-b's pod itself is admitted, within its nominal quota
    vb = decide(s, workload_info(s, "team-b", "b-pending"))
    assert vb.admit is True and vb.assignment.borrowing is False
    # once it is gone, team-a may borrow
    delete(s, b_pending)
    v = decide(s, workload_info(s, "team-a", "a-borrower"))
    assert v.admit is True and v.assignment.borrowing is True


def test_nominal_quota_first_does_not_apply_without_pending_pods_in_team_b():
    """seed 001 借用示例: "如果 ClusterQueue team-b-cq 没有被接纳的工作负载,那么 ClusterQueue team-a-cq 可以接纳
    ... 21 CPUs" - with nothing pending in team-b, team-a borrows."""
    s = cohort_state()
    v = decide_pod(s, Pod("a-borrower", "team-a").queue("lq").cpu("12").obj())
    assert v.admit is True and v.assignment.borrowing is True


def test_nominal_quota_first_only_blocks_when_the_pending_pods_need_the_quota():
    """seed 001 借用示例: Kueue "确保 nominalQuota 配额用于 team-b-cq"; a small team-b pod leaves enough to lend."""
    s = cohort_state(Pod("b-pending", "team-b").queue("lq").cpu("2").created(100).obj())
    v = decide_pod(s, Pod("a-borrower", "team-a").queue("lq").cpu("10").obj())
    assert v.admit is True and v.assignment.borrowing is True
    v = decide_pod(s, Pod("a-big", "team-a").queue("lq").cpu("11").obj())
    refused_by(v, "NominalQuotaFirst", "team-b/b-pending")


def test_nominal_quota_first_ignores_team_b_pods_that_would_borrow_themselves():
    """seed 001 借用示例: only team-b workloads within team-b's nominal quota take precedence."""
    s = cohort_state(Pod("b-huge", "team-b").queue("lq").cpu("13").created(100).obj())
    v = decide_pod(s, Pod("a-borrower", "team-a").queue("lq").cpu("1").obj())
    assert v.admit is True


def test_nominal_quota_first_does_not_affect_pods_within_nominal():
    """seed 001 借用示例: the rule is about borrowing; a team-a pod within its own nominal quota is admitted."""
    s = make_state(*team_ab(), Pod("b-pending", "team-b").queue("lq").cpu("12").obj())
    v = decide_pod(s, Pod("a-own", "team-a").queue("lq").cpu("9").obj())
    assert v.admit is True and v.assignment.borrowing is False


# ---- reservations ---------------------------------------------------------------------------------------------

def test_reservation_holds_quota_until_it_expires():
    """seed 001 集群队列: quota is "某一时刻可供 ClusterQueue 使用的数量"; a pod that passed filter holds its share
    until it binds, and a reservation whose bind never comes is released after reservation_timeout."""
    clock = FakeClock(1000.0)
    s = single(cpu="8", clock=clock)
    v = decide_pod(s, Pod("first").queue("lq").cpu("5").obj())
    assert v.admit is True
    first = pod_info(s, "team-a", "first")
    s.workloads.reserve(first.uid, Charge("cq", v.assignment.flavors, v.assignment.usage))
    assert s.ledger.quota_node("cq").usage[FR] == 5 * CPU
    v2 = decide_pod(s, Pod("second").queue("lq").cpu("4").obj())
    assert v2.admit is False and v2.rule == "QuotaExceeded"
    clock.advance(s.config.reservation_timeout - 1)
    assert s.expire_lapsed() == 0
    assert decide(s, workload_info(s, "team-a", "second")).admit is False
    clock.advance(2)
    assert s.expire_lapsed() == 1
    assert all_usage(s) == {}
    # "first" is still pending and older, but kube-scheduler has not brought it since it passed filter (issue 32:
    # it is away): it keeps no quota from "second", which kube-scheduler brings now.
    assert s.queues.away(first.uid)
    assert decide(s, workload_info(s, "team-a", "second")).admit is True
    # Brought again (its backoff over), it takes its quota before "second" does, in queue order.
    s.queues.presence.expect(first.uid, clock())
    v3 = decide(s, workload_info(s, "team-a", "second"))
    assert v3.admit is False and "ahead of it in queue order (team-a/first)" in v3.reason
    delete(s, Pod("first").queue("lq").cpu("5").obj())
    assert decide(s, workload_info(s, "team-a", "second")).admit is True


def test_reserved_pod_binding_keeps_the_charge_once():
    """seed 001 集群队列: a reserved pod that then runs is charged once, not twice."""
    s = single(cpu="8")
    v = decide_pod(s, Pod("first").queue("lq").cpu("5").obj())
    first = pod_info(s, "team-a", "first")
    s.workloads.reserve(first.uid, Charge("cq", v.assignment.flavors, v.assignment.usage))
    apply(s, Pod("first").queue("lq").cpu("5").node("n1").obj())
    assert first.uid not in s.reservations
    assert s.ledger.quota_node("cq").usage[FR] == 5 * CPU


# ---- running pods -----------------------------------------------------------------------------------------------

def flavor_state(*extra):
    return make_state(ResourceFlavor("spot").node_labels({"pool": "spot"}).obj(),
                      ResourceFlavor("on-demand").node_labels({"pool": "on-demand"}).obj(),
                      Node("n-spot").cpu("64").labels({"pool": "spot"}).obj(),
                      Node("n-od").cpu("64").labels({"pool": "on-demand"}).obj(),
                      ClusterQueue("cq")
                          .resource_group(FlavorQuotas("spot").resource("cpu", "4"),
                                          FlavorQuotas("on-demand").resource("cpu", "8"))
                          .obj(),
                      LocalQueue("lq", "team-a").cluster_queue("cq").obj(), *extra)


def test_running_pod_is_charged_in_the_flavor_its_node_belongs_to():
    """seed 001 资源规格与资源: "您可以通过 ResourceFlavor 对象定义规格与节点组的映射关系" - a pod running on an
    on-demand node holds on-demand quota."""
    running = Pod("r").queue("lq").cpu("3").node("n-od").obj()
    s = flavor_state(running)
    uid = pod_info(s, "team-a", "r").uid
    assert s.admitted[uid].flavors == {"cpu": "on-demand"}
    assert s.admitted[uid].cluster_queue == "cq"
    assert all_usage(s) == {("cq", "cq"): {("on-demand", "cpu"): 3 * CPU}}


def test_running_pod_released_when_deleted():
    """seed 001 借用示例: usage counts admitted workloads only; a deleted pod releases its quota."""
    running = Pod("r").queue("lq").cpu("3").node("n-od").obj()
    s = flavor_state(running)
    delete(s, running)
    assert all_usage(s) == {}
    assert s.admitted == {}


@pytest.mark.parametrize("phase", ["Succeeded", "Failed"])
def test_running_pod_released_when_finished(phase):
    """seed 001 停止策略: "允许已经接纳的工作负载完成" - a finished pod no longer holds quota."""
    s = flavor_state(Pod("r").queue("lq").cpu("3").node("n-od").obj())
    apply(s, Pod("r").queue("lq").cpu("3").node("n-od").phase(phase).obj())
    assert all_usage(s) == {}
    assert pod_info(s, "team-a", "r").uid not in s.admitted


def test_running_pod_update_is_not_charged_twice():
    """seed 001 借用示例: the same pod seen again (status update) is charged once."""
    s = flavor_state(Pod("r").queue("lq").cpu("3").node("n-spot").obj())
    for _ in range(3):
        apply(s, Pod("r").queue("lq").cpu("3").node("n-spot").obj())
    assert all_usage(s) == {("cq", "cq"): {("spot", "cpu"): 3 * CPU}}


def test_running_pod_seen_before_its_node_is_charged_in_the_nodes_flavor_once_the_node_arrives():
    """seed 001 资源规格与资源: "您可以通过 ResourceFlavor 对象定义规格与节点组的映射关系" - a pod running on an
    on-demand node holds on-demand quota, whatever order the watch delivers the Pod and the Node in."""
    s = make_state(ResourceFlavor("spot").node_labels({"pool": "spot"}).obj(),
                   ResourceFlavor("on-demand").node_labels({"pool": "on-demand"}).obj(),
                   ClusterQueue("cq")
                       .resource_group(FlavorQuotas("spot").resource("cpu", "4"),
                                       FlavorQuotas("on-demand").resource("cpu", "8"))
                       .obj(),
                   LocalQueue("lq", "team-a").cluster_queue("cq").obj(), bulk=False)
    apply(s, Pod("r").queue("lq").cpu("3").node("n-od").obj())            # the Pod event comes first ...
    apply(s, Node("n-od").cpu("64").labels({"pool": "on-demand"}).obj())  # ... then its Node
    apply(s,
          ClusterQueue("cq")
              .resource_group(FlavorQuotas("spot").resource("cpu", "4"), FlavorQuotas("on-demand").resource("cpu", "8"))
              .obj())   # and a rebuild
    assert s.admitted[pod_info(s, "team-a", "r").uid].flavors == {"cpu": "on-demand"}
    assert all_usage(s) == {("cq", "cq"): {("on-demand", "cpu"): 3 * CPU}}


# ---- Kueue object changes ---------------------------------------------------------------------------------------

def test_raising_nominal_quota_rebuilds_tree_and_keeps_usage_once():
    """seed 001 借用示例: changing a ClusterQueue's nominalQuota changes what it may use; pods already running
    stay charged exactly once."""
    s = cohort_state()
    old_tree = s.tree
    assert available(s.ledger.quota_node("team-a-cq"), FR) == 12 * CPU
    apply(s,
          ClusterQueue("team-a-cq").cohort("team-ab")
              .resource_group(FlavorQuotas("default-flavor").resource("cpu", "20")).obj())
    assert s.tree is not old_tree
    assert s.ledger.quota_node("team-a-cq").usage[FR] == 9 * CPU
    assert s.tree.cohorts["team-ab"].usage[FR] == 9 * CPU
    assert available(s.ledger.quota_node("team-a-cq"), FR) == (20 + 12 - 9) * CPU
    apply(s,
          ClusterQueue("team-a-cq").cohort("team-ab")
              .resource_group(FlavorQuotas("default-flavor").resource("cpu", "20")).obj())   # same object again
    apply(s, ResourceFlavor("default-flavor").obj())
    assert s.ledger.quota_node("team-a-cq").usage[FR] == 9 * CPU
    assert decide_pod(s, Pod("a-more", "team-a").queue("lq").cpu("11").obj()).assignment.borrowing is False


def test_kueue_change_keeps_reservations_charged_once():
    """seed 001 借用示例: a rebuild re-charges quota held by reservations once."""
    s = single(cpu="8")
    v = decide_pod(s, Pod("first").queue("lq").cpu("5").obj())
    first = pod_info(s, "team-a", "first")
    s.workloads.reserve(first.uid, Charge("cq", v.assignment.flavors, v.assignment.usage))
    apply(s, ClusterQueue("cq").resource_group(FlavorQuotas("default-flavor").resource("cpu", "10")).obj())
    assert s.ledger.quota_node("cq").usage[FR] == 5 * CPU
    assert available(s.ledger.quota_node("cq"), FR) == 5 * CPU
    s.workloads.drop_reservation(first.uid)
    assert all_usage(s) == {}


def test_moving_a_cluster_queue_into_a_cohort_keeps_usage_once():
    """seed 001 队列组: "要向队列组添加 ClusterQueue,请在 .spec.cohort 字段中指定 cohort 的名称"; its usage
    moves with it."""
    s = make_state(ResourceFlavor("default-flavor").obj(), Node("n1").cpu("64").obj(),
                   ClusterQueue("team-a-cq").resource_group(FlavorQuotas("default-flavor").resource("cpu", "9")).obj(),
                   ClusterQueue("team-b-cq").cohort("team-ab")
                       .resource_group(FlavorQuotas("default-flavor").resource("cpu", "12")).obj(),
                   LocalQueue("lq", "team-a").cluster_queue("team-a-cq").obj(),
                   Pod("a-running", "team-a").queue("lq").cpu("9").node("n1").obj())
    assert available(s.ledger.quota_node("team-a-cq"), FR) == 0
    apply(s,
          ClusterQueue("team-a-cq").cohort("team-ab")
              .resource_group(FlavorQuotas("default-flavor").resource("cpu", "9")).obj())
    assert s.ledger.quota_node("team-a-cq").usage[FR] == 9 * CPU
    assert s.tree.cohorts["team-ab"].usage[FR] == 9 * CPU
    assert available(s.ledger.quota_node("team-a-cq"), FR) == 12 * CPU
    assert decide_pod(s, Pod("a-borrower", "team-a").queue("lq").cpu("12").obj()).admit is True


def test_nominal_quota_first_ignores_pending_pods_team_b_would_refuse():
    """seed 001 借用示例: "Kueue 将首先在 ClusterQueue team-b-cq 中接纳工作负载,然后再接纳任何新工作负载
    team-a-cq" - a pending pod that team-b-cq itself refuses (its namespace is not selected, 命名空间选择器) can
    never be admitted first, so it must not hold team-a back. (Regression: it used to block team-a forever.)"""
    s = make_state(ResourceFlavor("default-flavor").obj(), Node("n1").cpu("64").obj(),
                   ClusterQueue("team-a-cq").cohort("team-ab")
                       .resource_group(FlavorQuotas("default-flavor").resource("cpu", "9")).obj(),
                   ClusterQueue("team-b-cq").cohort("team-ab")
                       .resource_group(FlavorQuotas("default-flavor").resource("cpu", "12"))
                       .namespace_selector({"matchLabels": {"kubernetes.io/metadata.name": "team-b"}}).obj(),
                   LocalQueue("lq", "team-a").cluster_queue("team-a-cq").obj(),
                   LocalQueue("lq", "other").cluster_queue("team-b-cq").obj(),
                   Pod("a-running", "team-a").queue("lq").cpu("9").node("n1").obj(),
                   Pod("x-pending", "other").queue("lq").cpu("12").obj())
    refused_by(decide(s, workload_info(s, "other", "x-pending")), "NamespaceNotSelected", "other")
    v = decide_pod(s, Pod("a-borrower", "team-a").queue("lq").cpu("1").obj())
    assert v.admit is True, v.reason
    assert v.assignment.borrowing is True


def test_best_effort_fifo_older_pod_that_fits_takes_its_quota_first():
    """seed 001 排队策略: BestEffortFIFO orders "与 StrictFIFO 相同的方式" - an older pending pod that fits is admitted
    before a newer one, so the newer pod sees the quota the older one will take (Kueue admits heads in order)."""
    s = fifo_state("BestEffortFIFO", Pod("running").queue("lq").cpu("4").node("n1").obj(),
                   Pod("old").queue("lq").cpu("3").obj())
    before = all_usage(s)
    v = decide_pod(s, Pod("new").queue("lq").cpu("3").created(10).obj())
    assert v.admit is False and v.rule == "QuotaExceeded"
    assert "ahead of it in queue order (team-a/old)" in v.reason
    assert all_usage(s) == before                      # the virtual charge was taken back
    assert decide_pod(s, Pod("small").queue("lq").cpu("1").created(11).obj()).admit is True


def test_pods_their_queue_refuses_do_not_hold_quota_ahead():
    """seed 001 命名空间选择器: a pending pod whose namespace the ClusterQueue does not select can never be admitted,
    so it neither blocks (StrictFIFO) nor holds quota ahead of anyone."""
    s = single(Node("n2").cpu("64").obj(), Namespace("blocked").obj(),
               LocalQueue("lq", "blocked").cluster_queue("cq").obj(),
               Pod("running").queue("lq").cpu("6").node("n1").obj(), cpu="8", queueingStrategy="StrictFIFO",
               selector={"matchLabels": {"kubernetes.io/metadata.name": "team-a"}})
    apply(s, Pod("outsider", "blocked").queue("lq").cpu("1").obj())
    v = decide_pod(s, Pod("new").queue("lq").cpu("2").created(10).obj())
    assert v.admit is True, v.reason


def test_fair_sharing_admits_the_lower_share_queue_first():
    """seed 000 ClusterQueue 份额值: "在准入过程中,Kueue 优先从份额值最低的 ClusterQueue 中准入 Workload" - with
    fairSharing on, a borrowing pod waits while a queue whose share stays lower has a pending pod that fits."""
    from app.config import Configuration
    objs = [ResourceFlavor("default-flavor").obj(), Node("n1").cpu("64").obj(), Namespace("team-b").obj(),
            Namespace("team-c").obj(),
            ClusterQueue("team-a").cohort("co").resource_group(FlavorQuotas("default-flavor").resource("cpu", "4"))
                .obj(),
            ClusterQueue("team-b").cohort("co").resource_group(FlavorQuotas("default-flavor").resource("cpu", "4"))
                .obj(),
            ClusterQueue("team-c").cohort("co").resource_group(FlavorQuotas("default-flavor").resource("cpu", "8"))
                .obj(),
            LocalQueue("lq", "team-a").cluster_queue("team-a").obj(),
            LocalQueue("lq", "team-b").cluster_queue("team-b").obj(),
            LocalQueue("lq", "team-c").cluster_queue("team-c").obj(),
            Pod("a-run").queue("lq").cpu("8").node("n1").obj(),
            Pod("b-run", "team-b").queue("lq").cpu("4").node("n1").obj(),
            Pod("b-wait", "team-b").queue("lq").cpu("2").created(5).obj()]
    fair = make_state(*objs, config=Configuration(fair_sharing=True))
    v = decide_pod(fair, Pod("a-more").queue("lq").cpu("3").created(10).obj())
    assert (v.admit, v.rule) == (False, "FairSharingOrder") and "team-b/b-wait" in v.reason
    classic = make_state(*objs)          # without fair sharing, first come first served for borrowing
    assert decide_pod(classic, Pod("a-more").queue("lq").cpu("3").created(10).obj()).admit is True
