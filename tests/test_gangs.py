"""Pod groups (gangs): recognised by two conventions, admitted whole or not at all.

Rules under test (the issue "pod groups", app/core/gangs.py, app/scheduler/filter.py,
admission._ahead), and the seeds they come from:

  * seed 003 (Kueue waitForPodsReady, 全有或全无调度): some jobs need all their pods running at
    once; admitting a part of two such jobs deadlocks both. So a group is admitted whole: its
    quota is checked as one request and every member must have a node before any holds anything.
    An incomplete group (fewer members created than its total) waits and holds nothing.
  * seed 004 (ACK gang preemption): "semua Pod pending seluruh gang" are merged into one list, and
    the gang is processed only if every pod in that list can be scheduled ("Jika satu Pod tidak
    dapat dijadwalkan, gang tersebut tidak diproses"); one high-priority member makes the whole gang
    high priority ("Jika salah satu Pod dalam gang memiliki prioritas tinggi, seluruh gang dianggap
    berprioritas tinggi").

The tests build a Scheduler from a snapshot (builders.snapshot_yaml) and call its filter and bind verbs
as kube-scheduler does, with wire bodies but without HTTP (helpers.Verbs); members that exist before the
first filter are pending pods of the snapshot, as the watch would have listed them.
"""
from __future__ import annotations


from app.core import gangs
from app.core.workload import GROUP, POD, Workload, WorkloadKey, group_of
from app.objects.pod import decode_pod
from builders import LocalQueue, Node, Pod, PodGroup, running, snapshot_yaml
from helpers import Verbs, one_queue, refused, uid, usage

CPU = 1000
Gi = 2**30
KUEUE_GROUP = "kueue.x-k8s.io/pod-group-name"
KUEUE_TOTAL = "kueue.x-k8s.io/pod-group-total-count"
COSCHEDULING = "scheduling.x-k8s.io/pod-group"


def snapshot(quota: int = 32, nodes=("n1", "n2"), node_cpu: int = 8, strategy: str = "BestEffortFIFO",
             pending: list[dict] = (), extra: list[dict] = ()) -> str:
    """Two queues (q, q2) on cq, the nodes, optional extra objects, and pending pods (in order)."""
    return snapshot_yaml(*one_queue(quota, strategy, nodes=nodes, node_cpu=node_cpu),
                         LocalQueue("q2", "team-a").cluster_queue("cq").obj(), *extra, *pending)


def member(name: str, group: str = "g", total: int | None = 3, cpu: str = "3", *, queue: str = "q",
           convention: str = "kueue", created: int = 0, priority: int | None = None) -> dict:
    """A pending group member as kube-scheduler sends it; created is seconds into 2026-01-01."""
    pod = Pod(name).queue(queue).cpu(cpu).priority(priority).created(created)
    if convention == "kueue":
        pod.label(KUEUE_GROUP, group)
        if total is not None:
            pod.annotation(KUEUE_TOTAL, str(total))
    else:
        pod.label(COSCHEDULING, group)
    return pod.wire()


def gang(n: int = 3, cpu: str = "3", group: str = "g", total: int | None = None, **kw) -> list[dict]:
    """n members g-0..g-{n-1}, created a second apart; total defaults to n."""
    return [member(f"{group}-{i}", group, total=n if total is None else total, cpu=cpu, created=i, **kw)
            for i in range(n)]


def nothing_held(ext, used_before: int = 0) -> None:
    s = ext.state
    assert not s.holds and not s.reservations, (s.holds, s.reservations)
    assert usage(ext) == used_before


ALL = ["n1", "n2"]


# ---- the two conventions --------------------------------------------------------------------------------

def test_kueue_plain_pod_convention_recognised():
    """Issue: Kueue's plain-pod convention: label kueue.x-k8s.io/pod-group-name names the group (key
    "namespace/name"), annotation kueue.x-k8s.io/pod-group-total-count gives its size."""
    pod = decode_pod({"kind": "Pod", **member("g-0", "train", total=4)})
    assert group_of(pod) == WorkloadKey(GROUP, "team-a", "train") and str(group_of(pod)) == "team-a/train"
    from app.state.cluster import ClusterState
    assert gangs.expected_size(ClusterState(), pod) == 4
    alone = decode_pod({"kind": "Pod", **Pod("alone").queue("q").cpu("1").wire()})
    assert group_of(alone) is None
    for bad in ("0", "-1", "three"):
        odd = member("g-1", "train", total=None)
        odd["metadata"]["annotations"] = {KUEUE_TOTAL: bad}
        assert gangs.expected_size(ClusterState(), decode_pod({"kind": "Pod", **odd})) is None


async def test_coscheduling_podgroup_accepted_in_snapshot_and_admits_whole(load_extender):
    """Issue: the scheduler-plugins coscheduling convention: label scheduling.x-k8s.io/pod-group names a
    scheduling.x-k8s.io/v1alpha1 PodGroup whose spec.minMember is the group's size. A PodGroup object is
    accepted in a snapshot (decoded into state.pod_groups), and its two members are admitted whole (seed 003)."""
    pods = [member(f"pg-{i}", "pg", total=None, cpu="5", convention="coscheduling", created=i)
            for i in range(2)]
    ext = load_extender(snapshot(pending=pods[1:], extra=[PodGroup("pg").min_member(2).obj()]))
    state = ext.state
    assert state.pod_groups["team-a/pg"].min_member == 2
    verbs = Verbs(ext)
    first = verbs.filter(pods[0], ALL)
    assert state.pods[uid(pods[0])].labels[COSCHEDULING] == "pg"
    assert gangs.expected_size(state, state.pods[uid(pods[0])]) == 2
    assert len(first["NodeNames"]) == 1, first
    # 5 + 5 CPUs do not fit one 8-CPU node: one member on each.
    assert {state.holds[uid(p)].node for p in pods} == {"n1", "n2"}
    assert usage(ext) == 10 * CPU
    assert ext.journal.entries[-1]["outcome"] == "GroupAdmitted"


async def test_coscheduling_member_without_its_podgroup_has_no_size(load_extender):
    """Issue: a coscheduling member's size is its PodGroup's minMember; with no PodGroup object the size is
    unknown, the member is refused saying what to set, and nothing is held."""
    pod = member("pg-0", "missing", total=None, convention="coscheduling")
    ext = load_extender(snapshot())
    verbs = Verbs(ext)
    reason = refused(verbs.filter(pod, ALL), ALL)
    assert "team-a/missing" in reason and "no size" in reason and "minMember" in reason
    nothing_held(ext)


# ---- the members share one queue ------------------------------------------------------------------------

async def test_member_naming_another_local_queue_refuses_every_member(load_extender):
    """Issue: a group's members share one queue; a member naming another LocalQueue is an error surfaced on
    every member, with the queues named. Nothing is held."""
    pods = gang(3, "2")
    pods[2]["metadata"]["labels"]["kueue.x-k8s.io/queue-name"] = "q2"
    ext = load_extender(snapshot(pending=pods))
    verbs = Verbs(ext)
    for p in pods:
        reason = refused(verbs.filter(p, ALL), ALL)
        assert "team-a/g" in reason and "q, q2" in reason and "share one LocalQueue" in reason, reason
    assert [e["outcome"] for e in list(ext.journal.entries)[-3:]] == ["GroupQueueMismatch"] * 3
    nothing_held(ext)


# ---- incomplete groups ------------------------------------------------------------------------------------

async def test_incomplete_group_waits_holding_nothing_then_admits_when_complete(load_extender):
    """Issue / seed 003: an incomplete group (2 of 3 members created) waits, holds nothing (tree usage and
    holds unchanged) and says so in its reason; when the third member is created the group is admitted
    whole at its first filter."""
    pods = gang(3, "2")
    ext = load_extender(snapshot())
    verbs = Verbs(ext)
    for created, p in enumerate(pods[:2], 1):      # each learned from its own filter request
        reason = refused(verbs.filter(p, ALL), ALL)
        assert f"{created} of 3 members exist" in reason and "holds nothing" in reason, reason
        nothing_held(ext)
    reason = refused(verbs.filter(pods[0], ALL), ALL)
    assert "team-a/g: 2 of 3 members exist" in reason and "waits for the rest" in reason
    assert ext.journal.entries[-1]["outcome"] == "GroupIncomplete"
    nothing_held(ext)
    third = verbs.filter(pods[2], ALL)
    assert len(third["NodeNames"]) == 1
    assert set(ext.state.holds) == {uid(p) for p in pods}
    assert usage(ext) == 6 * CPU


async def test_incomplete_group_does_not_block_a_pod_behind_it_even_strict_fifo(load_extender):
    """Issue: an incomplete group holds nothing, not even its place in queue order (admission._ahead passes
    it over), so under StrictFIFO a later pod is admitted."""
    pods = gang(3, "2")[:2]
    later = Pod("later").queue("q").cpu("4").created(60).wire()
    ext = load_extender(snapshot(strategy="StrictFIFO", pending=pods))
    verbs = Verbs(ext)
    answer = verbs.filter(later, ALL)
    assert answer["NodeNames"] == ALL
    assert usage(ext) == 4 * CPU


# ---- quota --------------------------------------------------------------------------------------------------

async def test_group_over_quota_holds_nothing_and_smaller_pod_behind_is_admitted(load_extender):
    """Issue / seed 004 (the gang as one list) / examples/gang-all-or-nothing: 3 x 3 CPUs = 9 > quota 8, so no
    member is admitted, not even the two that would fit; under BestEffortFIFO the group, counted as one
    workload ahead in queue order, is passed over and a 2-CPU pod behind it is admitted."""
    pods = gang(3, "3")
    small = Pod("small").queue("q").cpu("2").created(60).wire()
    ext = load_extender(snapshot(quota=8, pending=pods))
    verbs = Verbs(ext)
    for p in pods:
        reason = refused(verbs.filter(p, ALL), ALL)
        assert "admitted whole or not at all" in reason and "3 pending members" in reason, reason
        assert "ClusterQueue cq" in reason and "9" in reason, reason
        nothing_held(ext)
    answer = verbs.filter(small, ALL)
    assert answer["NodeNames"] == ALL
    assert uid(small) in ext.state.reservations and usage(ext) == 2 * CPU


async def test_group_over_quota_blocks_pods_behind_it_under_strict_fifo(load_extender):
    """Kueue StrictFIFO with a group counted as one workload (admission._ahead): a complete group that does
    not fit blocks every pod behind it; the refusal names the group."""
    pods = gang(3, "3")
    small = Pod("small").queue("q").cpu("2").created(60).wire()
    ext = load_extender(snapshot(quota=8, strategy="StrictFIFO", pending=pods))
    verbs = Verbs(ext)
    reason = refused(verbs.filter(small, ALL), ALL)
    assert "StrictFIFO" in reason and "team-a/g" in reason and "pods behind it wait" in reason, reason
    assert ext.journal.entries[-1]["outcome"] == "StrictFIFO"
    nothing_held(ext)


async def test_group_ahead_that_fits_is_counted_before_a_pod_behind(load_extender):
    """admission._ahead: a complete group that fits is charged (virtually) ahead of a later pod; with quota 10
    and a 3 x 3 CPU group pending, a 2-CPU pod behind it does not fit (9 + 2 > 10)."""
    pods = gang(3, "3")
    small = Pod("small").queue("q").cpu("2").created(60).wire()
    ext = load_extender(snapshot(quota=10, pending=pods))
    verbs = Verbs(ext)
    reason = refused(verbs.filter(small, ALL), ALL)
    assert "team-a/g" in reason, reason
    nothing_held(ext)


# ---- placement --------------------------------------------------------------------------------------------------

async def test_group_that_fits_quota_but_cannot_all_be_placed_holds_nothing(load_extender):
    """Issue / seed 004 ("Jika satu Pod tidak dapat dijadwalkan, gang tersebut tidak diproses"): 3 members of
    6 CPUs fit the quota (18 <= 32) but two 8-CPU nodes take only one each; every member is refused with
    "cannot all be placed" and nothing is held, though two of them would fit."""
    pods = gang(3, "6")
    ext = load_extender(snapshot(quota=32, pending=pods))
    verbs = Verbs(ext)
    for p in pods:
        reason = refused(verbs.filter(p, ALL), ALL)
        assert "cannot all be placed" in reason and "3 pending members" in reason and "2 node(s)" in reason
        assert ext.journal.entries[-1]["outcome"] == "GroupUnplaceable"
        nothing_held(ext)
    assert all(not ext.state.pods[uid(p)].node_name for p in pods)


async def test_admitted_group_reserves_quota_and_a_node_for_each_member_then_binds_exactly(load_extender):
    """Issue: once admitted, quota is reserved for every member and each gets a hold (its own room on a node,
    state.holds); each member's filter then returns only its reserved node; the binds charge exactly the
    group's usage (reservation -> charge, never both) and end the holds."""
    pods = gang(3, "5")       # 5 CPUs each on three 8-CPU nodes: one member per node
    ext = load_extender(snapshot(nodes=("n1", "n2", "n3"), pending=pods[1:]))
    state, offered = ext.state, ["n1", "n2", "n3"]
    verbs = Verbs(ext)
    first = verbs.filter(pods[0], offered)
    holds = {uid(p): state.holds[uid(p)] for p in pods}
    assert first["NodeNames"] == [holds[uid(pods[0])].node]
    assert sorted(h.node for h in holds.values()) == offered             # a distinct node each
    assert all(h.requests == state.pods[u].requests for u, h in holds.items())
    assert all(not h.victims for h in holds.values())
    assert set(state.reservations) == set(holds)
    assert usage(ext) == 15 * CPU
    entry = ext.journal.entries[-1]
    assert entry["outcome"] == "GroupAdmitted" and len(entry["placement"]) == 3
    for p in pods:                 # later filters: only the reserved node, no new decision
        answer = verbs.filter(p, offered)
        assert answer["NodeNames"] == [holds[uid(p)].node], answer
    assert usage(ext) == 15 * CPU
    for p in pods:
        assert await verbs.bind(p, holds[uid(p)].node) == {"Error": ""}
    assert not state.holds and not state.reservations
    assert set(state.admitted) >= {uid(p) for p in pods}
    assert usage(ext) == 15 * CPU                    # charged once
    assert {state.pods[uid(p)].node_name for p in pods} == set(offered)
    assert all(state.node_requested[n]["cpu"] == 5 * CPU for n in offered)
    assert ext.writer.bindings == 3


async def test_two_members_may_share_a_node_with_room_for_both(load_extender):
    """gangs.place packs: 4 x 4 CPUs on two 8-CPU nodes, two members per node, and the holds on each node add
    up to no more than its allocatable."""
    pods = gang(4, "4")
    ext = load_extender(snapshot(pending=pods[1:]))
    verbs = Verbs(ext)
    answer = verbs.filter(pods[0], ALL)
    assert len(answer["NodeNames"]) == 1
    per_node: dict[str, int] = {}
    for h in ext.state.holds.values():
        per_node[h.node] = per_node.get(h.node, 0) + h.requests["cpu"]
    assert per_node == {"n1": 8 * CPU, "n2": 8 * CPU}


async def test_another_pod_cannot_take_a_reserved_nodes_room(load_extender):
    """Issue: a member's node is reserved for it: 2 x 6 CPUs hold 6 of 8 CPUs on each node, so a 4-CPU pod
    (its quota fits) is refused on both nodes, while a 2-CPU pod still fits the room left."""
    pods = gang(2, "6")
    ext = load_extender(snapshot(pending=pods[1:]))
    big = Pod("big").queue("q").cpu("4").created(60).wire()
    small = Pod("small").queue("q").cpu("2").created(120).wire()
    verbs = Verbs(ext)
    verbs.filter(pods[0], ALL)
    assert {h.node for h in ext.state.holds.values()} == set(ALL)
    reason = refused(verbs.filter(big, ALL), ALL)
    assert "held" in reason
    assert uid(big) not in ext.state.reservations
    ok = verbs.filter(small, ALL)
    assert ok["NodeNames"] == ALL
    assert usage(ext) == 14 * CPU


async def test_member_waits_when_its_reserved_node_is_not_offered(load_extender):
    """Issue: a member passes filter only onto its reserved node; when kube-scheduler does not offer it (e.g.
    percentageOfNodesToScore), the member waits and keeps its reservation, and is admitted when it is."""
    pods = gang(2, "6")
    ext = load_extender(snapshot(pending=pods[1:]))
    state = ext.state
    verbs = Verbs(ext)
    verbs.filter(pods[0], ALL)
    mine = state.holds[uid(pods[1])].node
    other = next(n for n in ALL if n != mine)
    reason = refused(verbs.filter(pods[1], [other]), [other])
    assert f"node {mine} is reserved for this member and was not offered" in reason
    assert uid(pods[1]) in state.holds and uid(pods[1]) in state.reservations
    answer = verbs.filter(pods[1], [other, mine])
    assert answer["NodeNames"] == [mine]
    assert usage(ext) == 12 * CPU


async def test_first_member_whose_own_node_is_not_offered_admits_the_group_and_waits(load_extender):
    """Issue: placement covers every pending member over all the flavor's nodes, offered ones first; when the
    considering member's own node is not on offer, the group is still admitted (every hold made) and that
    member waits for its node. g-1 (6 CPUs, placed first as the largest) takes the offered n1; g-0 (4 CPUs)
    no longer fits there and goes to n2, which was not offered for it."""
    pods = [member("g-0", total=2, cpu="4", created=0), member("g-1", total=2, cpu="6", created=1)]
    ext = load_extender(snapshot(pending=pods[1:]))
    state = ext.state
    verbs = Verbs(ext)
    reason = refused(verbs.filter(pods[0], ["n1"]), ["n1"])
    assert {u: h.node for u, h in state.holds.items()} == {uid(pods[0]): "n2", uid(pods[1]): "n1"}
    assert "admitted" in reason and "node n2 is reserved for this member and was not offered" in reason
    assert usage(ext) == 10 * CPU
    answer = verbs.filter(pods[0], ALL)
    assert answer["NodeNames"] == ["n2"]


async def test_placement_prefers_offered_nodes(load_extender):
    """filter for a group member (app/scheduler/filter.py): candidates are the flavor's nodes with the offered ones first, so 2 x 6 CPUs
    offered n2 and n3 (of n1..n3) go there, not on n1 (first by name)."""
    pods = gang(2, "6")
    ext = load_extender(snapshot(nodes=("n1", "n2", "n3"), pending=pods[1:]))
    verbs = Verbs(ext)
    answer = verbs.filter(pods[0], ["n3", "n2"])
    assert {h.node for h in ext.state.holds.values()} == {"n2", "n3"}
    assert answer["NodeNames"] == [ext.state.holds[uid(pods[0])].node]


async def test_group_admission_takes_the_nodes_running_pods_use_into_account(load_extender):
    """Placement uses each node's room (allocatable minus what runs there): with 4 CPUs running on n1, 2 x 6
    CPUs cannot both be placed on two 8-CPU nodes."""
    running = {"metadata": {"name": "running", "namespace": "team-a", "uid": "uid-running",
                            "labels": {"kueue.x-k8s.io/queue-name": "q"}},
               "spec": {"nodeName": "n1", "containers": [{"name": "c", "resources": {"requests": {"cpu": "4"}}}]},
               "status": {"phase": "Running"}}
    pods = gang(2, "6")
    ext = load_extender(snapshot(pending=[running] + pods[1:]))
    verbs = Verbs(ext)
    reason = refused(verbs.filter(pods[0], ALL), ALL)
    assert "cannot all be placed" in reason
    nothing_held(ext, 4 * CPU)


# ---- core functions -----------------------------------------------------------------------------------------

def _info(name: str, cpu: str, **kw):
    return decode_pod({"kind": "Pod", **member(name, cpu=cpu, **kw)})


def test_place_packs_largest_members_first():
    """gangs.place: largest members first, each onto the first node with room: [3, 3, 5, 5] CPUs fit two 8-CPU
    nodes (5+3 on each), which first-fit in the given order would not (3+3 on n1, 5 on n2, then no room)."""
    members = [_info(f"m{i}", c) for i, c in enumerate(["3", "3", "5", "5"])]
    room = {"n1": {"cpu": 8 * CPU, "pods": 110}, "n2": {"cpu": 8 * CPU, "pods": 110}}
    placed = gangs.place(members, ["n1", "n2"], lambda n: dict(room[n]))
    assert placed is not None and set(placed) == {m.uid for m in members}
    by_node: dict[str, list[int]] = {}
    for m in members:
        by_node.setdefault(placed[m.uid], []).append(m.requests["cpu"] // CPU)
    assert {n: sorted(v) for n, v in by_node.items()} == {"n1": [3, 5], "n2": [3, 5]}
    assert placed[members[2].uid] == "n1" and placed[members[3].uid] == "n2"   # the 5s go first, in node order


def test_place_returns_none_when_members_cannot_all_fit():
    """gangs.place: None, not a partial placement, when any member has no room left (seed 004)."""
    members = [_info(f"m{i}", "6") for i in range(3)]
    room = lambda n: {"cpu": 8 * CPU, "pods": 110}  # noqa: E731
    assert gangs.place(members, ["n1", "n2"], room) is None
    assert gangs.place(members, [], room) is None
    assert gangs.place(members[:2], ["n1", "n2"], room) == {members[0].uid: "n1", members[1].uid: "n2"}
    assert gangs.place([], ["n1"], room) == {}


def test_place_counts_every_resource_and_the_pod_count():
    """gangs.place checks every requested resource, pods included: a node with cpu to spare but room for
    one pod takes one member."""
    members = [_info(f"m{i}", "1") for i in range(2)]
    room = {"n1": {"cpu": 8 * CPU, "pods": 1}, "n2": {"cpu": 8 * CPU, "pods": 1}}
    assert sorted(gangs.place(members, ["n1", "n2"], lambda n: room[n]).values()) == ["n1", "n2"]
    assert gangs.place(members, ["n1"], lambda n: room[n]) is None


def test_a_group_workload_sums_requests_and_takes_the_highest_priority():
    """Workload.of_group / seed 004 ("Jika salah satu Pod dalam gang memiliki prioritas tinggi, seluruh gang
    dianggap berprioritas tinggi"): the group as one workload has the summed requests, the highest member
    priority and the oldest creation time, under a uid and name of its own."""
    members = [_info("g-0", "1", created=5, priority=10),
               _info("g-1", "2", created=2, priority=1000),
               _info("g-2", "3", created=9)]
    workload = Workload.of_group(WorkloadKey(GROUP, "team-a", "g"), members)
    assert workload.requests["cpu"] == 6 * CPU and workload.requests["pods"] == 3
    assert workload.priority == 1000
    assert workload.created == min(m.created for m in members)
    assert workload.uid == "team-a/g" and workload.key_text == "team-a/g"
    assert workload.uid not in {m.uid for m in members}
    assert workload.template is members[1]          # a real member, the oldest, never a pod made up for the group
    assert workload.queue_name == "q"
    assert group_of(workload.template) == workload.key == WorkloadKey(GROUP, "team-a", "g")
    assert workload.count == 3 and len(workload.pod_sets) == 3     # three request shapes: three pod sets
    assert all(m.requests["pods"] == 1 for m in members)       # the members are not changed


def test_a_lone_pod_is_a_workload_of_its_own_without_a_copy():
    """Workload.of_pod: the pod itself is the template and its only member; the indexes key it by the pod's uid
    and reasons show its namespace/name, as they did when admission took the pod."""
    pod = decode_pod(Pod("solo").queue("q").cpu("2").priority(10).obj())
    workload = Workload.of_pod(pod)
    assert workload.template is pod and workload.members == (pod,) and workload.requests is pod.requests
    assert (workload.uid, workload.key_text, workload.namespace) == (pod.uid, pod.key, pod.namespace)
    assert workload.key == WorkloadKey(POD, pod.namespace, "solo") and group_of(workload.template) is None
    assert (workload.priority, workload.created, workload.queue_name) == (10, pod.created, pod.queue_name)
    assert workload.shape == pod.shape and len(workload.pod_sets) == 1 and workload.count == 1


# ---- bugs found and fixed, each with its reproduction ---------------------------------------------------------------

async def test_fixed_group_with_queue_mismatch_keeps_quota_from_pods_behind(load_extender):
    """Issue: a member naming another queue is an error; a group that cannot be admitted holds no quota. With
    quota 8 and the broken group (3 x 2 CPUs) ahead, a 4-CPU pod behind it must be admitted (BestEffortFIFO)."""
    pods = gang(3, "2")
    pods[2]["metadata"]["labels"]["kueue.x-k8s.io/queue-name"] = "q2"
    later = Pod("later").queue("q").cpu("4").created(60).wire()
    ext = load_extender(snapshot(quota=8, pending=pods))
    verbs = Verbs(ext)
    answer = verbs.filter(later, ALL)
    assert answer["NodeNames"] == ALL, answer


async def test_fixed_group_made_incomplete_after_admission_still_holds(load_extender):
    """Issue: an incomplete group holds nothing and says so. After g-2 is deleted, g-0 and g-1 are refused as
    incomplete; their holds and quota must be gone by then."""
    pods = gang(3, "2")
    ext = load_extender(snapshot(pending=pods[1:]))
    verbs = Verbs(ext)
    verbs.filter(pods[0], ALL)
    assert len(ext.state.holds) == 3
    ext.state.remove_pod(uid(pods[2]))
    reason = refused(verbs.filter(pods[1], ALL), ALL)
    assert "2 of 3 members exist" in reason and "holds nothing" in reason
    nothing_held(ext)


async def test_a_recreated_member_is_admitted_within_the_quota_its_group_already_holds(load_extender):
    """The group is decided whole. Quota 6 = 3 x 2 CPUs; after admission g-2 is deleted and recreated (a new
    uid, as its controller would). The group again needs exactly 6 CPUs, 4 of them already reserved for g-0
    and g-1, so the new member is admitted (it was once refused with "request 6 > 2 available")."""
    pods = gang(3, "2")
    ext = load_extender(snapshot(quota=6, pending=pods[1:]))
    verbs = Verbs(ext)
    verbs.filter(pods[0], ALL)
    ext.state.remove_pod(uid(pods[2]))
    again = member("g-2-r1", cpu="2", created=5)
    answer = verbs.filter(again, ALL)
    assert len(answer["NodeNames"]) == 1, answer
    assert usage(ext) == 6 * CPU


async def test_fixed_member_reserved_on_a_node_its_selector_excludes(load_extender):
    """Issue: every member must be placeable on its node. g-1 (older, 6 CPUs, nodeSelector zone=b) is placed
    first and goes to n1 (zone a) when g-0 (no selector) is filtered first; kube-scheduler never offers n1
    for g-1, so it waits for a node it can never get. Expected: g-1 on n2, g-0 on n1."""
    g0 = member("g-0", total=2, cpu="6", created=1)
    g1 = member("g-1", total=2, cpu="6", created=0)
    g1["spec"]["nodeSelector"] = {"zone": "b"}
    zoned = [Node(n).cpu("8").memory("32Gi").labels({"zone": zone}).obj() for n, zone in (("n1", "a"), ("n2", "b"))]
    ext = load_extender(snapshot(nodes=(), extra=zoned, pending=[g1]))
    verbs = Verbs(ext)
    verbs.filter(g0, ALL)
    answer = verbs.filter(g1, ["n2"])
    assert answer["NodeNames"] == ["n2"], answer


async def test_fixed_member_bound_to_another_members_reserved_node(load_extender):
    """Issue: a member passes only onto its reserved node. Binding g-0 onto g-1's node (6 + 6 > 8 CPUs) must be
    refused; it is accepted and g-1's hold then points at a node without room for it."""
    pods = gang(2, "6")
    ext = load_extender(snapshot(pending=pods[1:]))
    verbs = Verbs(ext)
    verbs.filter(pods[0], ALL)
    other = ext.state.holds[uid(pods[1])].node
    r = (await verbs.bind(pods[0], other))
    assert r["Error"], r


# ---- gang preemption (ACK seed: the whole gang or nothing) -----------------------------------------------------

def preempting_snapshot(pods: list[dict], quota: int = 16) -> str:
    """One queue whose ClusterQueue preempts LowerPriority within itself, two 8-CPU nodes, the pods."""
    return snapshot_yaml(*one_queue(quota, preemption={"withinClusterQueue": "LowerPriority"}), *pods)


async def test_gang_preemption_takes_victims_for_every_member_at_once(load_extender):
    """ACK seed (ElasticQuota, gang): all pending members in one preemption list; victims until every member
    fits at once - here both 4-CPU members of a priority-1000 group, on a full 16-CPU queue of 4-CPU pods."""
    ext = load_extender(preempting_snapshot([running("l1", "q", "4", "n1", priority=10, created=1).obj(),
                                             running("l2", "q", "4", "n1", priority=10, created=2).obj(),
                                             running("l3", "q", "4", "n2", priority=10, created=3).obj(),
                                             running("l4", "q", "4", "n2", priority=10, created=4).obj()]))
    members = gang(n=2, cpu="4", priority=1000)
    verbs = Verbs(ext)
    for m in members:
        verbs.filter(m, [])     # kube-scheduler found no node: none offered
    await ext.actions.settle()                                  # the filter that chose them evicts them
    evicted = sorted(e["pod"] for e in ext.journal.entries if e["outcome"] == "Preempted")
    assert evicted == ["team-a/l3", "team-a/l4"]                   # the two most recently admitted, one node
    held = {ext.state.holds[uid(m)].node for m in members}
    assert held == {"n2"} and all(uid(m) in ext.state.reservations for m in members)


async def test_gang_preemption_evicts_nothing_when_a_member_cannot_be_placed(load_extender):
    """ACK seed: "Jika satu Pod tidak dapat dijadwalkan, gang tersebut tidak diproses" - three 8-CPU members
    need three whole nodes and there are two: no victim is evicted, nothing is held."""
    ext = load_extender(preempting_snapshot([running("l1", "q", "8", "n1", priority=10, created=1).obj(),
                                             running("l2", "q", "8", "n2", priority=10, created=2).obj()],
                                            quota=32))
    members = gang(n=3, cpu="8", priority=1000)
    verbs = Verbs(ext)
    for m in members:                                          # kube-scheduler asks about each member
        answer = verbs.filter(m, ["n1", "n2"])
    await ext.reconcile()
    assert "cannot all be placed" in refused(answer, ["n1", "n2"])
    assert not [e for e in ext.journal.entries if e["outcome"] == "Preempted"]
    assert not ext.state.holds and not ext.state.reservations
    assert {p.name for p in ext.state.pods.values() if p.node_name} == {"l1", "l2"}
