"""A simulated kube-scheduler that calls Quotient's real HTTP routes with the real wire format.

Order of work (../shared/scenarios/FORMAT.md): the active queue by priority then
creation time; in-tree filters, then the extender's filter with the surviving
NodeNames, the highest score among the nodes left (scoring.py: MostAllocated packing,
plus prioritize where registered; ties: node name), bind. When no node is left:
kube-scheduler's preemption dry run (lower-priority victims only, fewest per node)
and, if it found candidates, the extender's preempt verb. A failed pod waits as in kube-scheduler's queue (queue.py).
"""
from __future__ import annotations

import heapq

import httpx
import orjson

from ..act.writer import WriteError
from ..core.preemption.spent_budgets import spent_budgets
from ..api.app import create_app
from ..core.rules import PREEMPTION_REASONS
from ..scheduler.scheduler import Scheduler
from ..objects.pod import PodInfo
from ..state.cluster import ClusterState
from .sim_cluster import SimCluster, SimPod
from .queue import rejector
from .scenario import Scenario
from .scoring import EXTENDER_SCALE, SHIPPED_PLUGIN_WEIGHT, SHIPPED_WEIGHTS, best
from .world import SimWorld

MAX_ATTEMPTS = 20000      # a run that needs more has not converged (a preemption loop)
RETRY_TICK = 10.0         # with `until`, time advances at least this often (retries, timeouts, delays)


class NotConverged(RuntimeError):
    pass


class SimWriter:
    """Quotient's writer in the simulator: bindings and evictions go to the simulated API."""

    def __init__(self, sim: "SimScheduler"):
        self.sim = sim

    async def bind(self, pod: PodInfo, node: str) -> None:
        self.sim.on_bound(pod.key, node)

    async def evict(self, pod: PodInfo, reason: str, message: str) -> None:
        """As the Eviction API: refused (429) while a PodDisruptionBudget allows the pod no disruption."""
        if pod.uid in spent_budgets(self.sim.state):
            self.sim.log("refused", f"eviction of {pod.key}: it would violate its PodDisruptionBudget (429)")
            raise WriteError(f"evicting {pod.key}: a PodDisruptionBudget allows no disruption now")
        self.sim.on_evicted(pod.key, f"{reason}: {message}", by_quotient=True,
                            preemption=reason in PREEMPTION_REASONS)


class SimScheduler(SimWorld):
    """kube-scheduler over the simulated cluster (SimWorld): its scheduling cycle against Quotient's HTTP routes,
    the background reconcile, and the run that moves simulated time."""

    def __init__(self, scenario: Scenario, verbose: bool = True, prioritize_weight: int = 0):
        super().__init__(scenario, verbose)
        self.packing = SHIPPED_WEIGHTS
        self.prioritize_weight = prioritize_weight     # 0: prioritize not registered, as shipped
        self.state = ClusterState(scenario.config, clock=lambda: self.now)
        self.cluster = SimCluster(self.state)
        self.scheduler = Scheduler(self.state, SimWriter(self))
        prefix = scenario.config.path_prefix
        self.url = f"{prefix}/" if prefix else "/"
        self.client = httpx.AsyncClient(transport=httpx.ASGITransport(app=create_app(self.scheduler, prefix)),
                                        base_url="http://quotient", timeout=5.0)
        self.next_reconcile = scenario.start
        self.rejectors: frozenset[str] = frozenset()   # the in-tree plugins that rejected the current attempt
        self.attempts = 0
        self.tried: dict[str, int] = {}        # pod key -> the state's generation at its last attempt

    # ---- the scheduling cycle --------------------------------------------------------
    async def post(self, verb: str, body: dict) -> tuple[int, object]:
        r = await self.client.post(self.url + verb, content=orjson.dumps(body),
                                   headers={"Content-Type": "application/json"})
        await self.scheduler.actions.settle()      # evictions the decision issued, written before time moves
        try:
            return r.status_code, orjson.loads(r.content)
        except orjson.JSONDecodeError:
            return r.status_code, None

    async def attempt(self, key: str) -> None:
        pod = self.cluster.pods.get(key)
        if pod is None or pod.info.node_name:
            return
        self.attempts += 1
        if self.attempts > MAX_ATTEMPTS:
            raise NotConverged(f"more than {MAX_ATTEMPTS} scheduling attempts: the run does not converge")
        info = pod.info
        feasible, failed = self.cluster.in_tree_filter(info)
        if info.nominated_node in feasible:
            feasible = [info.nominated_node]
        # A FitError names the in-tree plugins that rejected a node; an error (the extender's Error, an
        # HTTP failure, a failed bind) is no FitError and names none.
        self.rejectors = frozenset(map(rejector, failed.values()))
        if not feasible:
            self.note_pending(key, _summary(len(self.cluster.nodes), failed))
            return await self.preempt(pod, failed, {})
        status, body = await self.post("filter", {"Pod": pod.obj, "Nodes": None, "NodeNames": feasible})
        if status != 200 or not isinstance(body, dict):
            return self.fail(key, f"failed filter with extender, code {status}: {body}")
        if body.get("Error"):
            return self.fail(key, f"{body['Error']} (SchedulerError: tried again after its backoff)")
        names = body.get("NodeNames") or []
        extender_failed = body.get("FailedNodes") or {}
        if not names:
            reasons = {**failed, **extender_failed, **(body.get("FailedAndUnresolvableNodes") or {})}
            self.note_pending(key, _summary(len(self.cluster.nodes), reasons))
            return await self.preempt(pod, failed, extender_failed)
        node = await self.pick(pod, names)
        status, body = await self.post("bind", {"PodName": info.name, "PodNamespace": info.namespace,
                                                "PodUID": info.uid, "Node": node})
        if status != 200 or not isinstance(body, dict) or body.get("Error"):
            return self.fail(key, (body or {}).get("Error") if isinstance(body, dict) else f"bind code {status}")

    async def pick(self, pod: SimPod, names: list[str]) -> str:
        """The node of the highest score (scoring.py): MostAllocated packing × NodeResourcesFit's weight, plus
        prioritize × weight × 10 when registered. With one node left kube-scheduler scores nothing."""
        if len(names) == 1:
            return names[0]
        scores = {n: self.cluster.packing_score(pod.info, n, self.packing) * SHIPPED_PLUGIN_WEIGHT for n in names}
        if self.prioritize_weight:
            status, body = await self.post("prioritize", {"Pod": pod.obj, "Nodes": None, "NodeNames": names})
            if status == 200 and isinstance(body, list):   # a prioritize error is ignored, as kube-scheduler does
                for s in body:
                    if isinstance(s, dict) and s.get("Host") in scores and isinstance(s.get("Score"), int):
                        scores[s["Host"]] += s["Score"] * self.prioritize_weight * EXTENDER_SCALE
        return best(names, scores)

    def fail(self, key: str, reason: str) -> None:
        self.rejectors = frozenset()
        self.note_pending(key, reason)

    async def preempt(self, pod: SimPod, in_tree_failed: dict[str, str], extender_failed: dict[str, str]) -> None:
        key, info = pod.info.key, pod.info
        if info.preemption_policy == "Never":
            return
        candidates = [n for n, why in in_tree_failed.items() if why.startswith("Insufficient")]
        candidates += [n for n in extender_failed if n not in in_tree_failed]
        victims = {n: v for n in sorted(candidates) if (v := self.cluster.victims_on(info, n))}
        if not victims:
            return
        meta = {n: {"Pods": [{"UID": v.info.uid} for v in vs], "NumPDBViolations": 0} for n, vs in victims.items()}
        status, body = await self.post("preempt", {"Pod": pod.obj, "NodeNameToVictims": None,
                                                   "NodeNameToMetaVictims": meta})
        if status != 200 or not isinstance(body, dict):
            return self.note_pending(key, f"preemption: failed preempt with extender, code {status}")
        chosen = {}
        by_uid = {p.info.uid: p for p in self.cluster.pods.values()}
        for node, entry in (body.get("NodeNameToMetaVictims") or {}).items():
            uids = [p.get("UID") for p in (entry or {}).get("Pods") or []]
            pods = [by_uid[u] for u in uids if u in by_uid and by_uid[u].info.node_name == node]
            if pods and len(pods) == len(uids):
                chosen[node] = pods
        if not chosen:
            return self.note_pending(key, "preemption: no candidate node for preemption")
        node = min(chosen, key=lambda n: (max(p.info.pod_priority or 0 for p in chosen[n]),
                                          sum(p.info.pod_priority or 0 for p in chosen[n]), len(chosen[n]), n))
        for victim in chosen[node]:
            self.on_evicted(victim.info.key, f"preempted by {key} on node {node} (kube-scheduler)")
        self.cluster.update_pod(pod, nominated=node)     # it backs off, then is tried on that node

    # ---- the run --------------------------------------------------------------------
    async def drain(self) -> None:
        queue = self.queue
        while True:
            queue.due(self.now)
            if not queue.active:
                return
            key = min(queue.active, key=self._order)
            queue.active.discard(key)
            self.news = []
            await self.attempt(key)
            self.tried[key] = self.state.generation
            pod = self.cluster.pods.get(key)
            if pod is None or pod.info.node_name:
                queue.forget(key)
            else:
                queue.failed(key, self.now, self.rejectors, self.news)
            if self.news:
                queue.changed(self.now, self.news)

    def _order(self, key: str) -> tuple:
        """PrioritySort: the pod's own priority (not a WorkloadPriorityClass's), then creation, then name."""
        pod = self.cluster.pods.get(key)
        return (-(pod.info.pod_priority or 0), pod.info.created or 0.0, key) if pod else (0, 0.0, key)

    async def reconcile(self) -> int:
        """The background reconcile: at every step, or every reconcile-interval of simulated time."""
        if self.now < self.next_reconcile:
            return 0
        self.next_reconcile = self.now + self.scenario.reconcile_every
        return await self.scheduler.reconcile()

    def _next_retry(self) -> float | None:
        """Without `until`: the next backoff over of a pod that something changed for since its last
        attempt. The run ends rather than wait for retries that would find all as before (a pod retried
        every 10 s for good, or parked for the 5-minute flush)."""
        generation = self.state.generation
        times = [t for key, t in self.queue.backoff.items() if self.tried.get(key) != generation]
        return min(times) if times else None

    async def run(self, until: float | None) -> None:
        self.load()
        if self.scenario.watch_lag > 0:
            self.cluster.defer = self.lagging
        end = self.scenario.start + until if until is not None else None
        try:
            while True:
                await self.drain()
                self.news = []
                self.scheduler.note_cleared()
                if await self.reconcile() or self.news:
                    self.queue.changed(self.now, self.news)
                    continue
                queued = self.queue.next_time() if end is not None else self._next_retry()
                times = [t for t in (self.events[0][0] if self.events else None, queued) if t is not None]
                if end is not None:      # time passes: the reconcile's timeouts and delays come due
                    times += [self.now + RETRY_TICK] + ([self.next_reconcile] if self.next_reconcile > self.now else [])
                nxt = min(times) if times else None
                if nxt is None:
                    generation = self.state.generation
                    if not self.queue.waiting():
                        break
                    self.queue.retry_now()              # one more pass: would a retry change anything?
                    await self.drain()
                    if self.state.generation == generation:
                        break
                    continue
                if end is not None and nxt > end:
                    self.now = end
                    break
                self.now = max(self.now, nxt)
                self.news = []
                while self.events and self.events[0][0] <= self.now:
                    _, _, what, key, uid = heapq.heappop(self.events)
                    if what == "deliver":               # Quotient's watch, not a change kube-scheduler sees
                        self.deliveries.pop(key)()
                        continue
                    if what == "submit_pod":
                        self.cluster.add_pod(self.later.pop(uid))
                        what = "submit"
                    self.handle(what, key, uid)
                if self.news:
                    self.queue.changed(self.now, self.news)
        finally:
            await self.client.aclose()


def _summary(total: int, reasons: dict[str, str]) -> str:
    """kube-scheduler's style: "0/4 nodes are available: 4 <reason>." with identical reasons grouped."""
    counts: dict[str, int] = {}
    for why in reasons.values():
        counts[why] = counts.get(why, 0) + 1
    parts = ", ".join(f"{n} {why}" for why, n in sorted(counts.items(), key=lambda x: (-x[1], x[0])))
    return f"0/{total} nodes are available: {parts}."
