"""A ClusterState fed with objects, and what the tests read back from it and from the verbs' answers.

The objects come from builders.py. Every state in the quota/flavor/admission tests is built through
app.sync.dispatch.apply_object, exactly as the watch or a snapshot would feed it.
"""
from __future__ import annotations

import copy

import re

import orjson

from app.config import Configuration
from app.state.cluster import ClusterState
from app.sync.dispatch import apply_object
from builders import (ClusterQueue, FlavorQuotas, LocalQueue, Namespace, Node, ResourceFlavor, binding_args,
                      extender_args)

CPU = 1000                         # milli-CPU per CPU
Gi = 2**30


# ---- state -------------------------------------------------------------------------------------

def make_state(*objects: dict, config: Configuration | None = None, clock=None, bulk: bool = True) -> ClusterState:
    """A ClusterState fed with objects through apply_object (inside begin_bulk/end_bulk by default)."""
    state = ClusterState(config, clock=clock, timer=getattr(clock, "timer", None)) if clock is not None \
        else ClusterState(config)
    if bulk:
        state.begin_bulk()
    for obj in objects:
        assert apply_object(state, obj) is True
    if bulk:
        state.end_bulk()
    return state


def apply(state: ClusterState, *objects: dict) -> None:
    for obj in objects:
        assert apply_object(state, obj) is True


def delete(state: ClusterState, *objects: dict) -> None:
    for obj in objects:
        assert apply_object(state, obj, deleted=True) is True


def pod_info(state: ClusterState, ns: str, name: str):
    found = state.store.pod_by_key(f"{ns}/{name}")
    assert found is not None, f"pod {ns}/{name} is not in the state"
    return found


def workload_info(state: ClusterState, ns: str, name: str):
    """The pod in the state as a workload of its own (core.workload.Workload.of_pod), as admission decides on it."""
    from app.core.workload import Workload

    return Workload.of_pod(pod_info(state, ns, name))


def preemptor_of(state: ClusterState, ns: str, name: str):
    """The pending pod as core.preemption sees it: its ClusterQueue, quota node and flavor assignment."""
    from app.core.admission import assign
    from app.core.preemption.targets import Preemptor

    p = workload_info(state, ns, name)
    _, cq = state.store.queue_of(p.template)
    a = assign(state, p, cq)
    return Preemptor(p, cq, state.ledger.quota_node(cq.name), a.usage, set(a.flavors.values()))


def all_usage(state: ClusterState) -> dict:
    """Every node's usage, non-zero entries only: {(kind, name): {(flavor, resource): amount}}."""
    out = {}
    for kind, table in (("cq", state.tree.queues), ("cohort", state.tree.cohorts)):
        for name, n in table.items():
            used = {fr: v for fr, v in n.usage.items() if v}
            if used:
                out[(kind, name)] = used
    return out


class FakeClock:
    """A clock the test moves by hand: ClusterState(config, clock=FakeClock()). Called, it is the wall clock;
    .timer is the monotonic one (ClusterState(config, clock=c, timer=c.timer)): advance() and setting .now
    move both, step() only the wall clock, as an NTP step or a hand-set clock does."""

    def __init__(self, now: float = 1000.0):
        self.now = now
        self.stepped = 0.0

    def __call__(self) -> float:
        return self.now + self.stepped

    def timer(self) -> float:
        return self.now

    def advance(self, seconds: float) -> None:
        self.now += seconds

    def step(self, seconds: float) -> None:
        self.stepped += seconds


def decide_pod(state: ClusterState, obj: dict, offered=None):
    """Apply a pod and decide() for it, with the node names kube-scheduler offered (None: no restriction)."""
    from app.objects.offered_nodes import OfferedNodes
    from app.core.admission import decide

    apply(state, obj)
    nodes = OfferedNodes(sorted(offered)) if offered is not None else None
    return decide(state, workload_info(state, obj["metadata"]["namespace"], obj["metadata"]["name"]), nodes)


# ---- one-queue cluster (for the HTTP tests that load a Scheduler from a snapshot) --------------

def one_queue(quota: int, strategy: str = "BestEffortFIFO", preemption: dict | None = None,
              nodes=("n1", "n2"), node_cpu: int = 8) -> list[dict]:
    """ClusterQueue cq ({quota} CPUs of default-flavor) behind LocalQueue q in team-a, and the nodes."""
    queue = (ClusterQueue("cq").queueing_strategy(strategy)
             .resource_group(FlavorQuotas("default-flavor").resource("cpu", quota)))
    if preemption:
        queue.preemption(preemption)
    return [Namespace("team-a").obj(), ResourceFlavor("default-flavor").obj(), queue.obj(),
            LocalQueue("q", "team-a").cluster_queue("cq").obj(),
            *(Node(n).cpu(str(node_cpu)).memory("32Gi").obj() for n in nodes)]


class Verbs:
    """kube-scheduler's calls on a Scheduler without HTTP: the body encoded as on the wire (app.api.verbs), the
    answer decoded. Rule tests drive the scheduler's decisions with it; the routes themselves are tested over
    HTTP (test_verbs, test_wire, test_bad_input)."""

    def __init__(self, ext):
        from app.api.verbs import Verbs as Wire

        self.ext = ext
        self.wire = Wire(ext)

    def filter(self, pod: dict, names) -> dict:
        return orjson.loads(self.wire.filter(orjson.dumps(extender_args(as_sent(pod), list(names)))))

    async def bind(self, pod: dict, node: str) -> dict:
        return orjson.loads(await self.wire.bind(orjson.dumps(binding_args(pod, node))))

    def preempt(self, pod: dict, victims: dict[str, list[str]]) -> dict:
        """victims: node -> the victims' uids kube-scheduler's own dry run chose (NodeNameToMetaVictims)."""
        meta = {n: {"Pods": [{"UID": u} for u in uids], "NumPDBViolations": 0} for n, uids in victims.items()}
        body = {"Pod": as_sent(pod), "NodeNameToVictims": None, "NodeNameToMetaVictims": meta}
        return orjson.loads(self.wire.preempt(orjson.dumps(body)))


def as_sent(pod: dict) -> dict:
    """A pod as kube-scheduler puts it in a body: without apiVersion and kind."""
    return {k: v for k, v in pod.items() if k not in ("apiVersion", "kind")}


RETRY = re.compile(r" \(Quotient: kube-scheduler tries it again after its backoff, (\w+)\)$")


def answer_reasons(answer: dict, offered) -> dict[str, str]:
    """node -> why a filter answer refused it: FailedNodes, FailedAndUnresolvableNodes, or, for a refusal
    answered as a retry (the Error field, app/refusals.py), every offered node with the reason in it."""
    if answer.get("Error"):
        assert not answer["NodeNames"] and not answer["FailedNodes"] and not answer["FailedAndUnresolvableNodes"]
        match = RETRY.search(answer["Error"])
        assert match, answer["Error"]
        return dict.fromkeys(offered, answer["Error"][:match.start()])
    return {**answer["FailedNodes"], **answer["FailedAndUnresolvableNodes"]}


def with_uids(docs: list[dict]) -> list[dict]:
    """Copies of docs in which every pod has a uid, as the API server gives it."""
    out = copy.deepcopy(docs)
    for d in out:
        if d["kind"] == "Pod":
            d["metadata"]["uid"] = f"uid-{d['metadata']['namespace']}-{d['metadata']['name']}"
    return out


def uid(obj: dict) -> str:
    """A pod object's metadata.uid."""
    return obj["metadata"]["uid"]


def refused(answer: dict, offered) -> str:
    """The one reason every offered node was refused with (unresolvable, or answered as a retry); asserts it."""
    assert answer["NodeNames"] == [] and not answer["FailedNodes"], answer
    reasons = answer_reasons(answer, offered)
    assert set(reasons) == set(offered), reasons
    assert len(set(reasons.values())) == 1, reasons
    return next(iter(reasons.values()))


def usage(ext, cq: str = "cq", flavor: str = "default-flavor", resource: str = "cpu") -> int:
    """What the ClusterQueue's quota tree counts as used of (flavor, resource): running pods and reservations."""
    return ext.state.tree.queues[cq].usage.get((flavor, resource), 0)


def refusal(answer: dict) -> str:
    """The reason of the first node a filter answer refused (no node passing, at least one reason)."""
    reasons = answer_reasons(answer, ["any"])
    assert answer["NodeNames"] == [] and reasons, answer
    return next(iter(reasons.values()))


def refused_by(verdict, rule, *names, resolvable=False) -> None:
    """core's decision on a pod of a queue refused it by rule (resolvable or not), its reason naming each of names."""
    assert verdict.managed is True
    assert verdict.admit is False, verdict
    assert verdict.rule == rule, verdict
    assert verdict.resolvable is resolvable, verdict
    for name in names:
        assert name in verdict.reason, (name, verdict.reason)
