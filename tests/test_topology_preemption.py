"""Issue 36, part 3: preemption inside a domain. A group asking for a rack that no rack holds gets the domain whose
victims (allowed by the quota rules) make it fit with the least disruption, and the victims inside it, node by
node; a domain where it would still not fit evicts nothing. Kueue frees quota first and then lets TAS try to fit
(pkg/scheduler/preemption, then tas_flavor_snapshot.go), so its victims may be spread over racks none of which
then holds the gang: here the victims are chosen for one rack."""
from __future__ import annotations

from app.act.writer import SnapshotWriter
from app.objects.topology import HOSTNAME
from app.scheduler.scheduler import Scheduler
from builders import ClusterQueue, FlavorQuotas, Job, LocalQueue, Namespace, Node, Pod, running
from helpers import Verbs, apply, make_state, refused, uid
from test_topology_api import K, RACK, tas_flavor, topology

NODES = ["r1-n1", "r1-n2", "r2-n1", "r2-n2"]
REQUIRED = {K + "podset-required-topology": RACK}


def cluster(quota: str, *pods: dict, preemption=None) -> list[dict]:
    """Two racks of two 4-CPU nodes; one ClusterQueue preempting lower priorities within itself."""
    nodes = [Node(n).cpu("4").labels({"tas": "yes", RACK: n[:2], HOSTNAME: n}).obj() for n in NODES]
    cq = ClusterQueue("cq").resource_group(FlavorQuotas("tas").resource("cpu", quota)).preemption(
        preemption or {"withinClusterQueue": "LowerPriority"})
    return [Namespace("team-a").obj(), topology([RACK, HOSTNAME]), tas_flavor(), cq.obj(),
            LocalQueue("lq", "team-a").cluster_queue("cq").obj(), *nodes, *pods]


def running_on(name: str, node: str, cpu: str, created: int, priority: int = 1) -> dict:
    """A running pod of LocalQueue lq (builders.running), started when it was created."""
    return running(name, "lq", cpu, node, priority=priority, created=created).started(created).obj()


def gang(count: int, cpu: str = "2", annotations=None, priority: int = 10) -> list[dict]:
    out = []
    for i in range(count):
        pod = Pod(f"g-{i}").queue("lq").cpu(cpu).priority(priority).label(K + "pod-group-name", "g") \
            .created(100 + i).obj()
        pod["metadata"].setdefault("annotations", {}).update(
            {K + "pod-group-total-count": str(count), **(REQUIRED if annotations is None else annotations)})
        out.append(pod)
    return out


# r1: two 4-CPU pods, the oldest; r2: three 2-CPU pods, the newest (Kueue's candidate order takes them first).
SPREAD = [running_on("a", "r1-n1", "4", 1), running_on("b", "r1-n2", "4", 2), running_on("c", "r2-n1", "2", 10),
          running_on("d", "r2-n1", "2", 11), running_on("e", "r2-n2", "2", 12)]


def decide(objects: list[dict], members: list[dict]):
    state = make_state(*objects)
    answer = Verbs(Scheduler(state, SnapshotWriter(state))).filter(members[0], NODES)
    held = {state.pods[u].name: h for u, h in state.holds.items()}
    victims = {state.pods[v].name for h in held.values() for v in h.victims}
    return state, answer, {name: h.node for name, h in held.items()}, victims


def test_the_rack_whose_fewest_victims_make_the_gang_fit_is_chosen_and_only_they_go():
    """4 x 2 CPUs in one rack: r1 needs a and b gone (2 victims), r2 needs c, d and e (3). Taken in candidate
    order (newest first) with no regard to racks, the victims would be e, d, c: r2."""
    members = gang(4)
    _, answer, held, victims = decide(cluster("100", *SPREAD, *members), members)
    assert "preempting 2 pod(s) so that all 4 members fit at once inside topology domain r1;" in refused(answer, NODES)
    assert victims == {"a", "b"}
    assert sorted(held.values()) == ["r1-n1", "r1-n1", "r1-n2", "r1-n2"]


def test_when_quota_needs_freeing_the_victims_that_free_it_inside_one_rack_are_preferred():
    """Quota 16 with 14 in use: the gang's 8 need 6 freed. Kueue's classic order frees e, d, c (r2, 3 pods); in
    r1, a and b free the quota and the room at once (2 pods), and e, d, c are given back."""
    members = gang(4)
    _, answer, held, victims = decide(cluster("16", *SPREAD, *members), members)
    assert victims == {"a", "b"}, refused(answer, NODES)
    assert set(held.values()) == {"r1-n1", "r1-n2"}


def test_no_eviction_in_a_rack_where_the_gang_would_still_not_fit():
    """r1's pods are above the gang's priority: only r2 may be emptied, and r2 alone holds the gang once c, d and
    e are gone. A rack-blind search would have counted r1's free room with r2's."""
    pods = [running_on("a", "r1-n1", "2", 1, priority=50), running_on("b", "r1-n2", "2", 2, priority=50),
            *SPREAD[2:]]
    members = gang(4)
    _, answer, held, victims = decide(cluster("100", *pods, *members), members)
    assert victims == {"c", "d", "e"}, refused(answer, NODES)
    assert set(held.values()) == {"r2-n1", "r2-n2"}


def test_when_no_rack_can_be_made_to_hold_the_gang_nothing_is_evicted_and_each_rack_says_why():
    pods = [running_on("a", "r1-n1", "4", 1, priority=50), running_on("c", "r2-n1", "4", 10, priority=50)]
    members = gang(4)
    state, answer, held, victims = decide(cluster("100", *pods, *members), members)
    why = refused(answer, NODES)
    assert not held and not victims and not state.holds
    assert "couldn't assign flavors to pod set" in why and "no preemption" in why
    assert "r1: even with every allowed victim gone" in why and "r2: even with every allowed victim gone" in why


def test_a_preferred_rack_goes_up_to_the_whole_topology_only_when_no_rack_can_be_emptied():
    """Preferred rack: 4 x 3 CPUs; no rack holds them even emptied (a rack gives 2 pods), so the victims are
    chosen over the whole topology: every node must free 3 CPUs."""
    members = gang(4, cpu="3", annotations={K + "podset-preferred-topology": RACK})
    _, answer, held, victims = decide(cluster("100", *SPREAD, *members), members)
    assert victims == {"a", "b", "c", "d", "e"}, refused(answer, NODES)
    assert sorted(held.values()) == NODES


def test_a_gang_asking_no_topology_still_preempts_across_the_cluster():
    """Without the annotation the same gang takes its victims in candidate order wherever they run (e, d, c, the
    newest), as it did before topology: the rack-aware search is for groups that ask for one."""
    members = gang(4, annotations={})
    _, answer, held, victims = decide(cluster("100", *SPREAD, *members), members)
    assert victims == {"c", "d", "e"}, refused(answer, NODES)
    assert len(held) == 4



async def test_live_the_victims_in_the_chosen_rack_are_evicted_on_the_api_and_the_gang_then_runs_there(tmp_path):
    """The same decision from `serve --kubeconfig` against tests/fakeapi.py: the first member's filter evicts a and
    b through the API (c, d and e keep running there), and once the API shows them gone every member passes onto
    its held node in r1."""
    from live import started, until

    members = gang(4)
    async with started(tmp_path, cluster("100", *SPREAD, *members)) as kit:
        first = kit.filter(members[0], NODES)
        assert "preempting 2 pod(s)" in refused(first, NODES)
        await kit.ext.actions.settle()
        live = {"a", "b", "c", "d", "e"}
        await until(lambda: not any(kit.api.get("Pod", "team-a", n) for n in ("a", "b")), what="a and b evicted")
        assert all(kit.api.get("Pod", "team-a", n) for n in live - {"a", "b"})
        await until(lambda: not any(kit.state.store.pod_by_key(n) for n in ("team-a/a", "team-a/b")),
                    what="the watch to show them gone")
        nodes = [kit.filter(m, NODES)["NodeNames"] for m in members]
        assert sorted(n for a in nodes for n in a) == ["r1-n1", "r1-n1", "r1-n2", "r1-n2"], nodes


def test_kube_schedulers_preempt_verb_for_a_lone_pod_asking_a_rack_keeps_only_the_topologys_nodes():
    """kube-scheduler's dry run proposes victims on r1-n1 and on a node of the flavor's labels but none of the
    Topology's: only r1-n1's are answered (a pod set of one fits any node of the Topology, none outside it)."""
    bare = Node("bare").cpu("4").labels({"tas": "yes"}).obj()
    low = [running_on("a", "r1-n1", "4", 1), running_on("z", "bare", "4", 2)]
    pod = Pod("p").queue("lq").cpu("4").priority(10).created(50).obj()
    pod["metadata"]["annotations"] = REQUIRED
    state = make_state(*cluster("100", bare, *low, pod))
    answer = Verbs(Scheduler(state, SnapshotWriter(state))).preempt(pod, {"r1-n1": [uid(low[0])], "bare": [uid(low[1])]})
    assert set(answer["NodeNameToMetaVictims"]) == {"r1-n1"}, answer


def test_a_gang_asking_a_level_its_topology_lacks_is_refused_with_kueues_words_not_a_crash():
    members = gang(4, annotations={K + "podset-required-topology": "example.com/nope"})
    _, answer, held, victims = decide(cluster("100", *SPREAD, *members), members)
    assert "no requested topology level: example.com/nope" in refused(answer, NODES)
    assert not held and not victims


def test_a_domain_that_holds_the_gang_with_no_victim_is_taken_when_kueues_choice_holds_it_only_summed():
    """Racks are the lowest level: BestFit picks r1 (room 3 + 1 CPU summed holds 2 x 2 CPU), which holds one node by
    node; r2's 5-CPU node holds both with no victim, though r1's low-priority pod might be preempted."""
    nodes = [Node(n).cpu(c).labels({"tas": "yes", RACK: r}).obj()
             for n, r, c in (("r1-n1", "r1", "4"), ("r1-n2", "r1", "1"), ("r2-n1", "r2", "5"))]
    objects = [o for o in cluster("100") if o["kind"] not in ("Node", "Topology")] + nodes + [topology([RACK])]
    members = gang(2)
    state = make_state(*objects, running_on("a", "r1-n1", "1", 1), *members)
    answer = Verbs(Scheduler(state, SnapshotWriter(state))).filter(members[0], ["r1-n1", "r1-n2", "r2-n1"])
    assert answer["NodeNames"] == ["r2-n1"], answer
    assert {h.node for h in state.holds.values()} == {"r2-n1"} and not any(h.victims for h in state.holds.values())


async def test_a_pod_replacing_one_of_a_job_placed_in_slices_is_refused_saying_so():
    job = Job("j").queue("lq").parallelism(2)
    ann = {K + "podset-required-topology": RACK, K + "podset-slice-required-topology": HOSTNAME,
           K + "podset-slice-size": "2"}
    pods = []
    for i in range(2):
        pod = Pod(f"j-{i}").of_job(job).cpu("1").created(i).obj()
        pod["metadata"]["annotations"] = dict(ann)
        pods.append(pod)
    state = make_state(*cluster("100", job.obj(), *pods))
    verbs = Verbs(Scheduler(state, SnapshotWriter(state)))
    node = {p["metadata"]["name"]: verbs.filter(p, NODES)["NodeNames"][0] for p in pods}
    for p in pods:
        assert (await verbs.bind(p, node[p["metadata"]["name"]]))["Error"] == ""
        apply(state, dict(p, spec=dict(p["spec"], nodeName=node[p["metadata"]["name"]]), status={"phase": "Failed"}))
    again = Pod("j-2").of_job(job).cpu("1").created(9).obj()
    again["metadata"]["annotations"] = dict(ann)
    apply(state, again)
    why = refused(verbs.filter(again, NODES), NODES)
    assert "placed in slices of 2 is not placed by Quotient" in why, why
