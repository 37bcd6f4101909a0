"""Issue 31's fault run: every fault of the issue mixed with racing binds, Quotient live against tests/fakeapi.py,
and the quota invariant judged after every step on the API's own objects (the pods the fake API server shows
bound and not finished, in the queue their labels name now), never on Quotient's bookkeeping.

Faults mixed in: a pod's queue label or requests changed between filter and bind; a running pod resized in place;
binds racing (with and without filter, to any node, several at once); Bindings that land but are answered 500, their
retries too, and the read back failing; pods finished and deleted; made-up pods asked about with a high priority;
pods of a Job that does not exist; watches cut, compacted (410), stalled silently and restored from an older
backup; the wall clock stepped back and forth while time passes; reconciles. At the end the faults stop and Quotient's state must equal what a
fresh list builds.

A running pod resized in place takes its ClusterQueue above quota by itself (no extender can stop the kubelet):
the judge counts such a pod at the size it was bound with, and checks that, once Quotient has seen the resize, no
other pod is bound into a queue that the resize left above quota.

CI runs a fixed seed; QUOTIENT_FAULT_STEPS and QUOTIENT_FAULT_SEED pick others.
"""
from __future__ import annotations

import asyncio
import os
import random

import orjson

from app.config import Configuration
from app.objects.pod import decode_pod
from app.sim.invariant import violations
from app.state.cluster import ClusterState
from app.sync.dispatch import apply_object
from builders import ClusterQueue, FlavorQuotas, LocalQueue, Namespace, Node, Pod, ResourceFlavor
from live import fingerprint, fresh_state, started, until

STEPS = int(os.environ.get("QUOTIENT_FAULT_STEPS", "1000"))
SEED = int(os.environ.get("QUOTIENT_FAULT_SEED", "20261127"))
NS = "team-a"
QUEUES = ("lq-a", "lq-b", "lq-c")
QUEUE_LABEL = "kueue.x-k8s.io/queue-name"
STALL = 1.0           # seconds a watch may show nothing (no event, no bookmark every 0.3 s) before it is relisted
KUEUE_KINDS = ("Namespace", "Node", "ResourceFlavor", "Cohort", "ClusterQueue", "LocalQueue")
POLICY = {"reclaimWithinCohort": "Any", "withinClusterQueue": "LowerPriority"}


def cluster() -> list[dict]:
    """Two ClusterQueues of 4 CPUs in cohort co (reclaim Any, LowerPriority within), one of 2 CPUs alone; three
    nodes with room for more than the quota, so that quota decides."""
    def cq(name: str, cpu: int, cohort: str | None) -> dict:
        return (ClusterQueue(name).cohort(cohort).preemption(POLICY)
                .resource_group(FlavorQuotas("default-flavor").resource("cpu", cpu)).obj())
    return [Namespace(NS).obj(), ResourceFlavor("default-flavor").obj(),
            cq("cq-a", 4, "co"), cq("cq-b", 4, "co"), cq("cq-c", 2, None),
            *(LocalQueue(q, NS).cluster_queue(f"cq-{q[-1]}").obj() for q in QUEUES),
            *(Node(n).cpu("8").memory("32Gi").obj() for n in ("n1", "n2", "n3"))]


def cpu_of(obj: dict) -> int:
    """The pod's CPU request in milli-CPU (one container, as made here)."""
    value = obj["spec"]["containers"][0]["resources"]["requests"]["cpu"]
    return int(value[:-1]) if value.endswith("m") else int(value) * 1000


def set_cpu(obj: dict, milli: int) -> None:
    obj["spec"]["containers"][0]["resources"]["requests"]["cpu"] = f"{milli}m"


class Judge:
    """The invariant on the API's objects: the ClusterQueues, Cohorts and LocalQueues as the API has them now,
    charged with every pod it shows on a node and not finished (a pod resized while running at its bound size)."""

    def __init__(self, api):
        self.api = api
        self.bound_as: dict[str, tuple[str, int]] = {}    # uid -> (queue label, milli-CPU) when bound, for pods
                                                          # relabeled or resized while bound

    def _state(self) -> ClusterState:
        state = ClusterState(Configuration())
        state.begin_bulk()
        for kind in KUEUE_KINDS:
            for obj in self.api.objects(kind):
                apply_object(state, obj)
        state.end_bulk()
        return state

    def pods(self, at_bound_size: bool) -> list:
        out = []
        for obj in self.api.objects("Pod"):
            uid = obj["metadata"]["uid"]
            if at_bound_size and uid in self.bound_as and (obj.get("spec") or {}).get("nodeName"):
                queue, cpu = self.bound_as[uid]
                obj = orjson.loads(orjson.dumps(obj))
                obj["metadata"]["labels"][QUEUE_LABEL] = queue
                set_cpu(obj, min(cpu_of(obj), cpu))
            out.append(decode_pod(obj))
        return out

    def over(self, at_bound_size: bool = True) -> list[str]:
        return violations(self._state(), self.pods(at_bound_size))

    def bound(self) -> dict[str, str]:
        """uid -> ClusterQueue of every pod the API shows bound and not finished."""
        state = self._state()
        out = {}
        for pod in self.pods(False):
            if pod.node_name and not pod.terminal:
                _, cq = state.store.queue_of(pod)
                out[pod.uid] = cq.name if cq else ""
        return out


class FaultRun:
    def __init__(self, kit, rng: random.Random):
        self.kit, self.api, self.rng = kit, kit.api, rng
        self.judge = Judge(kit.api)
        self.made = 0
        self.ghosts = 0
        self.backup = None
        self.binds: list[asyncio.Task] = []
        self.restored: set[str] = set()   # uids a restore itself brought back bound this step (no bind of Quotient's)
        self.log: list[str] = []          # the steps taken, for the failure message

    def explain(self) -> str:
        """The last steps, the pods the API shows bound and what Quotient journaled of them."""
        lines = ["steps: " + ", ".join(self.log[-25:])]
        for obj in self.api_pods(pending=False):
            key = f"{NS}/{obj['metadata']['name']}"
            lines.append(f"{key} on {obj['spec']['nodeName']} queue "
                         f"{obj['metadata']['labels'].get(QUEUE_LABEL)} cpu {cpu_of(obj)}m: "
                         f"(bound as {self.judge.bound_as.get(obj['metadata']['uid'])}): "
                         + "; ".join(f"{e['time']:.0f} {e['verb']} {e['outcome']} {e.get('reason', '')[:100]}"
                                     for e in reversed(self.kit.ext.journal.of_pod(key))))
        return "\n".join(lines)

    # ---- what the API holds -----------------------------------------------------------------
    def api_pods(self, pending: bool | None = None) -> list[dict]:
        out = []
        for obj in self.api.objects("Pod"):
            if (obj.get("status") or {}).get("phase") in ("Succeeded", "Failed"):
                continue
            bound = bool((obj.get("spec") or {}).get("nodeName"))
            if pending is None or pending != bound:
                out.append(obj)
        return out

    def new_pod(self) -> None:
        self.made += 1
        pod = (Pod(f"p{self.made}", NS).queue(self.rng.choice(QUEUES)).cpu(f"{self.rng.choice([1, 1, 2, 3])}")
               .priority(self.rng.choice([0, 100, 1000])).uid(f"uid-p{self.made}"))
        if self.rng.random() < 0.1:         # its owner Job was never created (or deleted with --cascade=orphan)
            pod.owner("Job", f"gone-{self.made}", f"uid-gone-{self.made}")
        self.api.apply(pod.obj())

    def change(self, obj: dict, edit) -> None:
        """Edit the pod as the API holds it now (a bind in flight may have landed since the step began); a pod
        found bound is resized in place, and the judge counts it at its bound size."""
        name = obj["metadata"]["name"]
        self.picked = name
        obj = self.api.get("Pod", NS, name)
        if obj is None:
            return
        if obj["spec"].get("nodeName"):
            self.judge.bound_as.setdefault(obj["metadata"]["uid"], (obj["metadata"]["labels"][QUEUE_LABEL], cpu_of(obj)))
        edit(obj)
        self.api.apply(obj)

    # ---- the verbs, as kube-scheduler calls them ---------------------------------------------------
    def filter(self, obj: dict) -> None:
        self.kit.filter(obj, nodes=("n1", "n2", "n3"))

    def bind_race(self) -> None:
        pending = self.api_pods(pending=True)
        for obj in self.rng.sample(pending, min(len(pending), self.rng.randint(1, 3))):
            self.picked += obj["metadata"]["name"] + " "
            if self.rng.random() < 0.7:
                self.filter(obj)
            self.binds.append(asyncio.ensure_future(self.kit.bind(obj, self.rng.choice(["n1", "n2", "n3"]))))

    def ghost(self) -> None:
        """A made-up pod, high priority, that exists nowhere: it may be answered, never evict."""
        self.ghosts += 1
        obj = (Pod(f"ghost-{self.ghosts}", NS).queue(self.rng.choice(QUEUES)).cpu("4").priority(1000000)
               .uid(f"uid-ghost-{self.ghosts}").obj())
        self.filter(obj)
        if self.rng.random() < 0.5:
            victims = {n: [o["metadata"]["uid"] for o in self.api_pods(pending=False)
                           if o["spec"]["nodeName"] == n] for n in ("n1", "n2", "n3")}
            self.kit.verbs.preempt(obj, victims)

    async def step(self) -> str:
        rng, api = self.rng, self.api
        what = rng.choices(
            ["new", "filter", "bind", "relabel", "grow", "resize", "finish", "delete", "ghost", "reconcile",
             "clock", "cut", "expire", "backup", "restore", "ambiguous", "stall", "settle"],
            [15, 20, 15, 4, 4, 2, 6, 4, 3, 6, 3, 1, 1, 1, 1, 3, 1, 10])[0]
        pending, running = self.api_pods(pending=True), self.api_pods(pending=False)
        self.picked = ""
        self.restored = set()
        if what == "new" or not (pending or running):
            self.new_pod()
        elif what == "filter" and pending:
            self.filter(rng.choice(pending))
        elif what == "bind":
            self.bind_race()
        elif what == "relabel" and pending:          # its queue moves, maybe between filter and bind
            self.change(rng.choice(pending),
                        lambda o: o["metadata"]["labels"].update({QUEUE_LABEL: rng.choice(QUEUES)}))
        elif what == "grow" and pending:             # its requests grow, maybe between filter and bind
            self.change(rng.choice(pending), lambda o: set_cpu(o, cpu_of(o) + 1000 * rng.randint(1, 3)))
        elif what == "resize" and running:           # pods/resize of a running pod: the kubelet grows it
            self.change(rng.choice(running), lambda o: set_cpu(o, cpu_of(o) + 1000))
        elif what == "finish" and running:
            self.change(rng.choice(running), lambda o: o.setdefault("status", {}).update(phase="Succeeded"))
        elif what == "delete" and (pending or running):
            obj = rng.choice(pending + running)
            api.delete("Pod", NS, obj["metadata"]["name"])
        elif what == "ghost":
            self.ghost()
        elif what == "reconcile":
            await self.kit.ext.reconcile()
        elif what == "clock":           # the wall clock steps (NTP, a VM resumed); time passes on the monotonic one
            self.kit.clock.step(rng.choice([-3600, -120, 120, 3600]))
            self.kit.clock.advance(rng.choice([1, 5, 61]))
        elif what == "cut":
            api.drop_watches()
        elif what == "expire":
            api.expire()
        elif what == "backup":
            self.backup = api.backup()
        elif what == "restore" and self.backup is not None:    # the API server restarts on an older backup
            api.drop_watches()
            await asyncio.sleep(0.01)
            api.restore(self.backup)
            self.backup = None
            bound = {o["metadata"]["uid"] for o in self.api_pods(pending=False)}
            self.restored = bound           # read before any await: binds in flight have not landed yet
            for uid in [u for u in self.judge.bound_as if u not in bound]:
                del self.judge.bound_as[uid]        # pending again: a later bind is a new admission
        elif what == "ambiguous":      # the next Binding lands but is answered 500, its retries too; maybe the read
            api.fault("error", resource="pods", verb="write", sub="binding", code=500, written=True)
            api.fault("error", resource="pods", verb="write", sub="binding", code=500, times=2)
            if rng.random() < 0.5:
                api.fault("error", resource="pods", verb="get", code=500)
            self.bind_race()
        elif what == "stall":          # a watch goes silent (headers, then nothing) until Quotient notices
            api.fault("stall", resource=rng.choice(["pods", "clusterqueues", "localqueues"]), verb="watch")
            api.drop_watches()
        else:
            await asyncio.sleep(0.02)                # the watch catches up
        await asyncio.sleep(0)
        self.binds = [t for t in self.binds if not t.done()]
        return what

    async def settle(self) -> None:
        for t in self.binds:
            await asyncio.wait_for(t, 30)
        self.binds.clear()


async def test_every_fault_mixed_with_racing_binds_never_leaves_the_api_above_quota(tmp_path):
    rng = random.Random(SEED)
    async with started(tmp_path, cluster(), stall_timeout=STALL) as kit:
        run = FaultRun(kit, rng)
        for step in range(STEPS):
            before = run.judge.bound()
            # Queues a bound pod's change left above quota, once Quotient has seen it: no pod may join them now.
            blocked = {cq for cq in _over_queues(run.judge.over(at_bound_size=False)) if _changes_seen(run)}
            what = await run.step()
            run.log.append(f"{step} {what} {run.picked}".rstrip())
            found = run.judge.over()
            assert found == [], (f"seed {SEED}, step {step} ({what}): the API's pods above quota: {found}\n"
                                 + run.explain())
            # Pods bound now and not before, other than those a restored backup showed bound already.
            joined = {cq for uid, cq in run.judge.bound().items() if uid not in before and uid not in run.restored}
            assert not (joined & blocked), (f"seed {SEED}, step {step} ({what}): a pod bound into "
                                             f"{sorted(joined & blocked)}, above quota after a resize\n"
                                             + run.explain())
        await run.settle()
        assert run.judge.over() == []
        # No eviction was caused by a pod the API never showed.
        ghosts = [e for n in range(1, run.ghosts + 1) for e in kit.ext.journal.of_pod(f"{NS}/ghost-{n}")
                  if e.get("outcome") == "Preempting"]
        assert ghosts == [], ghosts
        # The faults stop: Quotient's state becomes what a fresh list builds.
        kit.api.clear_faults()
        kit.api.release()
        # Made-up pods are answered, and forgotten learnedPodTimeout after they were first learned.
        kit.clock.advance(kit.state.config.learned_pod_timeout + 61)
        kit.state.learned_pods.forget_stale_learned()
        assert not kit.state.learned
        kit.state.expire_lapsed()
        await kit.ext.reconcile()        # as the service's reconcile loop does: bindings of unknown outcome are read
        assert not kit.ext.unsettled
        # That reconcile may preempt for a queue's head (reclaim_for_heads): its hold keeps quota until the
        # preemptor binds, which no caller does now. A fresh list knows no hold: let them lapse.
        kit.clock.advance(3600)
        kit.state.expire_lapsed()
        assert not kit.state.holds and not kit.state.reservations
        try:
            await kit.equal_to_a_fresh_list()
        except AssertionError:
            fresh = fingerprint(await fresh_state(kit.client))
            mine = fingerprint(kit.state)
            diff = {k: (mine[k], fresh[k]) for k in fresh if mine[k] != fresh[k]}
            raise AssertionError(f"seed {SEED}: the state differs from a fresh list: {_short(diff)}; "
                                 f"assumed {kit.state.assumed}, held back {list(kit.state.bindings.held_back)}\n"
                                 + run.explain()) from None


def _over_queues(found: list[str]) -> set[str]:
    return {line.split()[1] for line in found if line.startswith("ClusterQueue ")}


def _changes_seen(run: FaultRun) -> bool:
    """Quotient's state shows every change of a bound pod the API has (the watch delivered them)."""
    state = run.kit.state
    for uid in run.judge.bound_as:
        obj = next((o for o in run.api.objects("Pod") if o["metadata"]["uid"] == uid), None)
        pod = state.pods.get(uid)
        if obj is not None and (pod is None or pod.requests.get("cpu") != cpu_of(obj)
                                or pod.queue_name != obj["metadata"]["labels"].get(QUEUE_LABEL)):
            return False
    return True


def _short(diff: dict) -> str:
    """Only the entries that differ, of each part of the fingerprint that does."""
    out = []
    for part, (mine, fresh) in diff.items():
        if isinstance(mine, dict) and isinstance(fresh, dict):
            keys = sorted({k for k in set(mine) | set(fresh) if mine.get(k) != fresh.get(k)}, key=str)
            keys = [k for k in keys if "ghost" not in str(k)] or keys
            out.append(f"{part}: " + "; ".join(f"{k}: {mine.get(k)} vs fresh {fresh.get(k)}" for k in keys[:8]))
        else:
            out.append(f"{part}: {mine} vs fresh {fresh}")
    return " | ".join(out)
