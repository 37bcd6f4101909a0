"""The simulated cluster around kube-scheduler: the API server's events, kubelets, the Job controller, evictions.

What happens to pods between scheduling cycles: a pod submitted, bound, Ready after its delay (or with its
peers), finished, unready, evicted and Terminating, recreated by its owner; each change told to kube-scheduler's
queue as the cluster event it is (sim.queue), and, with a watch lag, delivered to Quotient late. After every bind
the quota invariant is checked (sim.invariant).
"""
from __future__ import annotations

import heapq
import itertools

from ..objects.pod import decode_pod
from .sim_cluster import SimPod, set_condition
from .invariant import violations
from .job_controller import JobController
from .queue import ASSIGNED_POD_ADD, ASSIGNED_POD_UPDATE, UNSCHEDULED_POD_ADD, SchedulingQueue, deletion
from .scenario import READY_WITH_PEERS, Scenario


class SimWorld:
    """The cluster's side of the simulation; the scheduler built on it gives it `state` (Quotient's ClusterState)
    and `cluster` (the simulated API's objects, sim.cluster)."""

    def __init__(self, scenario: Scenario, verbose: bool = True):
        self.scenario = scenario
        self.verbose = verbose
        self.now = scenario.start
        self.events: list[tuple[float, int, str, str, str]] = []   # (time, seq, what, pod key, uid)
        self.seq = itertools.count()
        self.queue = SchedulingQueue()
        self.news: list[str] = []        # cluster events kube-scheduler saw since the queue last heard
        self.timeline: list[str] = []
        self.last_reason: dict[str, str] = {}
        self.later: dict[str, SimPod] = {}     # pods submitted later, by uid
        self.deliveries: dict[str, object] = {}   # changes Quotient's lagging watch has yet to deliver
        self.violations: list[str] = []        # instants the quota invariant did not hold
        self.jobs = JobController(scenario.jobs)

    # ---- output -------------------------------------------------------------
    def log(self, what: str, text: str) -> None:
        line = f"{self.now - self.scenario.start:8.1f}s  {what:<10} {text}"
        self.timeline.append(line)
        if self.verbose:
            print(line)

    def note_pending(self, key: str, reason: str) -> None:
        if self.last_reason.get(key) != reason:
            self.last_reason[key] = reason
            self.log("waiting", f"{key}: {reason}")

    # ---- events ---------------------------------------------------------------
    def at(self, when: float, what: str, pod: SimPod) -> None:
        heapq.heappush(self.events, (when, next(self.seq), what, pod.info.key, pod.info.uid))

    def lagging(self, deliver) -> None:
        """Quotient's watch delivers this change scenario.watch_lag after kube-scheduler saw it."""
        n = next(self.seq)
        self.deliveries[str(n)] = deliver
        heapq.heappush(self.events, (self.now + self.scenario.watch_lag, n, "deliver", str(n), ""))

    def on_bound(self, key: str, node: str) -> None:
        pod = self.cluster.pods.get(key)
        if pod is None:
            return
        self.cluster.update_pod(pod, node=node, ready=False, now=self.now)
        charge = self.state.admitted.get(pod.info.uid)
        where = f" (ClusterQueue {charge.cluster_queue}, flavor {', '.join(sorted(set(charge.flavors.values())))})" \
            if charge else ""
        self.log("bound", f"{key} -> {node}{where}")
        self.check_quota()
        self.last_reason.pop(key, None)
        for ready in self._ready_now(pod):
            self.at(self.now + ready.ready_after, "ready", ready)
        self.news.append(ASSIGNED_POD_ADD)

    def check_quota(self) -> None:
        """The quota invariant after a step that charges quota (a bind): bound pods plus evicted pods
        still terminating never take a ClusterQueue or Cohort above what Kueue's rules allow."""
        for v in violations(self.state, (p.info for p in self.cluster.pods.values())):
            at = f"at {self.now - self.scenario.start:.1f}s: {v}"
            self.violations.append(at)
            self.log("OVERQUOTA", at)

    def _ready_now(self, pod: SimPod) -> list[SimPod]:
        """Pods whose Ready countdown starts with this binding: the pod itself, or, with
        scenario.quotient.dev/ready-with-peers, every pod of its owner once all of them are bound
        (workers that need each other, as in seed 003's example)."""
        if pod.ready_after is None:
            return []
        if pod.obj["metadata"].get("annotations", {}).get(READY_WITH_PEERS) != "true" or pod.info.owner is None:
            return [pod]
        peers = [p for p in self.cluster.pods.values()
                 if p.info.owner is not None and p.info.owner.uid == pod.info.owner.uid and not p.info.terminal]
        if any(not p.info.node_name for p in peers):
            return []
        return [p for p in peers if p.ready_after is not None and not p.info.ready]

    def on_evicted(self, key: str, reason: str, by_quotient: bool = False, preemption: bool = True) -> None:
        pod = self.cluster.pods.get(key)
        if pod is None or pod.info.deleting:
            return          # already gone, or terminating: a second eviction changes nothing
        deleted = deletion(pod.info)
        fresh = self.cluster.evict(key, self.now, reason, preemption=preemption)
        self.news.append(deleted if key not in self.cluster.pods else ASSIGNED_POD_UPDATE)   # or Terminating
        self.log("preempted" if preemption else "evicted",
                 f"{key}: {reason}{' (evicted by Quotient)' if by_quotient else ''}")
        if pod.info.deleting and key in self.cluster.pods:
            self.log("terminating", f"{key}: Terminating on {pod.info.node_name} for {pod.terminate_after:g}s")
            self.at(self.now + pod.terminate_after, "gone", pod)
        self.queue.forget(key)
        if fresh is not None:
            self.log("recreated", f"{fresh.info.key} by its {fresh.info.owner.kind}")
            self.queue.add(fresh.info.key)
            self.news.append(UNSCHEDULED_POD_ADD)

    def handle(self, what: str, key: str, uid: str) -> None:
        pod = self.cluster.pods.get(key)
        if what == "submit":
            self.queue.add(key)
            self.log("submitted", key)
            return self.news.append(UNSCHEDULED_POD_ADD)
        if pod is None or pod.info.uid != uid:
            return
        event = deletion(pod.info) if what in ("gone", "finish") else ASSIGNED_POD_UPDATE
        if what == "ready":
            self.cluster.update_pod(pod, ready=True, now=self.now)
            if pod.finish_after is not None:
                self.at(self.now + pod.finish_after, "finish", pod)
            if pod.unready_after is not None:
                self.at(self.now + pod.unready_after, "unready", pod)
        elif what == "unready":
            self.cluster.update_pod(pod, ready=False, now=self.now)
            self.log("unready", key)
        elif what == "gone":
            self.cluster.delete_pod(key)
            self.log("gone", key)
        elif what == "finish":
            self.cluster.update_pod(pod, phase="Succeeded")
            self.cluster.delete_pod(key)
            self.log("finished", key)
            self._job_controller(pod)
        self.news.append(event)

    def _job_controller(self, done: SimPod) -> None:
        """A Job's pod succeeded: the Job counts it and makes the next pods while completions remain (sim.job_controller)."""
        owner = done.info.owner
        if owner is None or not owner.is_batch_job:
            return
        active = sum(1 for p in self.cluster.pods.values()
                     if p.info.owner is not None and p.info.owner.uid == owner.uid and not p.info.terminal)
        made = self.jobs.succeeded(owner.uid, active, self.now)
        if made is None:
            return
        job, pods = made
        self.cluster.add_object(job)        # its status, as Quotient's Job watch delivers it
        for obj in pods:
            fresh = SimPod(obj, decode_pod(obj), done.ready_after, done.finish_after, done.unready_after,
                           terminate_after=done.terminate_after)
            self.cluster.add_pod(fresh)
            self.queue.add(fresh.info.key)
            self.log("created", f"{fresh.info.key} by its Job")
            self.news.append(UNSCHEDULED_POD_ADD)

    # ---- setup -------------------------------------------------------------------
    def load(self) -> None:
        self.state.begin_bulk()
        self.state.jobs_listed = True      # the simulated API serves Jobs, as a real one: listed, even when none
        try:
            for doc in self.scenario.cluster:
                self.cluster.add_object(doc.obj)
            for plan in self.scenario.pods:
                if (plan.obj.get("spec") or {}).get("nodeName"):
                    status = plan.obj.setdefault("status", {})
                    status["phase"] = "Running"
                    set_condition(status, "Ready", True, None)     # a PodScheduled entry the file gives is kept
                    # As a kubelet: it started when it was bound (or, unknown, created), to the second.
                    scheduled = next((c.get("lastTransitionTime") for c in status.get("conditions") or ()
                                      if isinstance(c, dict) and c.get("type") == "PodScheduled"), None)
                    started = scheduled or (plan.obj.get("metadata") or {}).get("creationTimestamp")
                    if started:
                        status.setdefault("startTime", started)
                    pod = SimPod(plan.obj, decode_pod(plan.obj), plan.ready_after, plan.finish_after, plan.unready_after,
                             terminate_after=plan.terminate_after)
                    self.cluster.add_pod(pod)
                    if plan.finish_after is not None:
                        self.at(self.now + plan.finish_after, "finish", pod)
        finally:
            self.state.end_bulk()
        for plan in self.scenario.pods:
            if (plan.obj.get("spec") or {}).get("nodeName"):
                continue
            plan.obj.setdefault("status", {"phase": "Pending"})
            pod = SimPod(plan.obj, decode_pod(plan.obj), plan.ready_after, plan.finish_after, plan.unready_after,
                             terminate_after=plan.terminate_after)
            if plan.submit_at:
                heapq.heappush(self.events, (self.now + plan.submit_at, next(self.seq), "submit_pod",
                                             pod.info.key, pod.info.uid))
                self.later[pod.info.uid] = pod
            else:
                self.cluster.add_pod(pod)
                self.queue.add(pod.info.key)
