"""ClusterState: the composition that applies each event (an object added, changed or deleted; a decision
committed) to the components that keep the cluster by job.

store (objects as the API shows them), ledger (quota charged), queues (pending pods in order), and the
workloads: reservations and preemption holds (workloads), Jobs admitted as one workload (job_workloads),
waitForPodsReady (pods_ready), the bindings Quotient makes with their assume cache (bindings), and pods
learned from requests (learned_pods). Mutated only on the event
loop, by sync/ and by committed decisions. Totals are kept incrementally: nothing is recomputed per request.
A Kueue object change rebuilds only what depends on it: the quota tree when its shape or quotas change, a
LocalQueue's own pods when it moves, nothing for a status-only event. The plain data core/ reads is reachable
here as attributes that are the components' own dicts.
"""
from __future__ import annotations

import logging
import time
from collections import Counter
from dataclasses import replace
from typing import Callable

from ..config import Configuration
from ..core.readiness import unit_of
from ..core.workload import WorkloadKey
from ..core.job_workload import inherit
from ..objects.job import JobInfo
from ..objects.kueue import WorkloadPriorityClass
from ..objects.node import NodeInfo
from ..objects.pod import PodInfo
from .bindings import Bindings
from .job_workloads import JobWorkloads
from .learned import LearnedPods
from .ledger import BOUND_HERE, Ledger
from .pods_ready import PodsReady
from .queues import Queues
from .store import Store
from .tree import QuotaTree
from .workloads import Workloads

log = logging.getLogger("quotient.state")


def _shapes_tree(kind: str, old, new) -> bool:
    """Whether a Kueue object's change reaches what _rebuild derives: the quota tree (ClusterQueues and Cohorts,
    their cohort or parent and quotas; a flavor's existence makes a ClusterQueue active, a refused field of its or a
    flavor's topologyName inactive), the flavors' node sets (nodeLabels) and the charges read against them.
    Anything else (stopPolicy, queueingStrategy, preemption, flavorFungibility, namespaceSelector, fairSharing
    weight, annotations, a flavor's taints and tolerations) is read off the stored object by each decision; the
    queue order does not depend on the ClusterQueue."""
    if old is None or new is None:
        return True
    if kind == "ClusterQueue":
        return old.cohort != new.cohort or old.resource_groups != new.resource_groups or \
            old.unsupported != new.unsupported
    if kind == "Cohort":
        return old.parent != new.parent or old.resource_groups != new.resource_groups
    if kind == "ResourceFlavor":
        return old.node_labels != new.node_labels or old.topology_name != new.topology_name
    return True


class ClusterState:
    """Two clocks: `clock`, the wall clock, only where a time is compared with or written as an API
    timestamp (a pod's creationTimestamp and PodScheduled, a bind's admission time, waitForPodsReady's
    admission, readiness and requeue times, which Kueue keeps as Workload condition and requeueAt
    timestamps and judges by its wall clock); `timer`, a monotonic clock, for every duration Quotient
    measures itself (the ASSUMED_TTL guard on its own bindings, reservation and preemption-hold expiry,
    learnedPodTimeout), so a step of the wall clock neither ends them early nor makes them last for
    ever. Given only a clock (the simulator's virtual time, a test's FakeClock) both read it."""

    def __init__(self, config: Configuration | None = None, clock: Callable[[], float] = time.time,
                 timer: Callable[[], float] | None = None):
        self.config = config = config or Configuration()
        self.clock = clock
        self.timer = timer = timer or (time.monotonic if clock is time.time else clock)
        self.skips: Counter = Counter()
        self.generation = 0     # bumps on every change; the simulator watches it
        self.policy_generation = 0    # bumps when an object admission reads other than pods changes (state.blocked)
        self.jobs_listed = False      # Jobs are a source: an unknown owner is not seen yet
        self._bulk = 0
        self.store = store = Store(self._policy_changed)
        self.ledger = ledger = Ledger(config, store, clock, self.skip)
        self.workloads = workloads = Workloads(config, store, ledger, timer, self)
        self.job_workloads = jobs = JobWorkloads(config, store, ledger, workloads, timer, self)
        workloads.holding_changed, workloads.jobs_preempted = jobs.pod_changed, jobs.end_admissions_of
        self.pods_ready = PodsReady(config, store, clock, self)
        self.queues = Queues(config, store, timer, workloads.reservations, self.pods_ready.requeues)
        self.bindings = Bindings(timer, self.skip, self)
        self.learned_pods = LearnedPods(config, timer, self)
        # the plain data core/ and the views read: the components' own objects, never copies
        self.nodes, self.pods, self.namespaces = store.nodes, store.pods, store.namespaces
        self.priority_classes, self.jobs, self.budgets = store.priority_classes, store.jobs, store.budgets
        self.flavors, self.cluster_queues, self.cohorts = store.flavors, store.cluster_queues, store.cohorts
        self.local_queues, self.pod_groups = store.local_queues, store.pod_groups
        self.admitted, self.going, self.flavor_nodes = ledger.admitted, ledger.going, ledger.flavor_nodes
        self.node_pods, self.node_requested = ledger.node_pods, ledger.node_requested
        self.reservations, self.holds = workloads.reservations, workloads.holds
        self.job_admissions, self.job_waits = jobs.job_admissions, jobs.job_waits
        self.readiness, self.requeues = self.pods_ready.readiness, self.pods_ready.requeues
        self.pending = self.queues.pending
        self.blocked = self.queues.blocked
        self.assumed, self.learned = self.bindings.assumed, self.learned_pods.learned

    @property
    def tree(self) -> QuotaTree:
        """The live quota tree (the ledger's; a rebuild makes a new one)."""
        return self.ledger.tree

    def _policy_changed(self) -> None:
        """An object admission reads, other than a pod, changed: the remembered refusals (state.blocked) no longer
        stand."""
        self.generation += 1
        self.policy_generation += 1

    # ---- bulk loading -------------------------------------------------
    def begin_bulk(self) -> None:
        """Defer tree rebuilds while a snapshot or initial list is applied."""
        self._bulk += 1

    def end_bulk(self) -> None:
        self._bulk -= 1
        if self._bulk == 0:
            self._rebuild()
            self.job_workloads.infer_job_admissions()

    def skip(self, reason: str) -> None:
        """Count and log (once per reason) an object Quotient could not use."""
        self.skips[reason] += 1
        if self.skips[reason] == 1:
            log.warning("skipped: %s", reason)

    def expire_lapsed(self) -> int:
        """End what waited past its time: Job waits (job_workloads), preemption holds whose victims are gone, and
        reservations whose bind never came; returns how many reservations were dropped."""
        self.job_workloads.expire_job_waits()
        self.workloads.expire_holds()
        return self.workloads.expire_reservations()

    # ---- nodes, WorkloadPriorityClasses (the other policy objects: store) ----------
    def upsert_node(self, node: NodeInfo) -> None:
        old = self.nodes.get(node.name)
        self.nodes[node.name] = node
        self.ledger.node_changed(node, old)
        self.generation += 1

    def remove_node(self, name: str) -> None:
        self.nodes.pop(name, None)
        self.ledger.node_removed(name)
        self.generation += 1

    def upsert_workload_priority_class(self, wpc: WorkloadPriorityClass) -> None:
        """A WorkloadPriorityClass made or changed: the pods whose label names it take its value (Kueue's
        WorkloadPriorityClass controller updates their Workloads) and their place in the queue with it."""
        self.store.workload_priority_classes[wpc.name] = wpc.value
        for pod in [p for p in self.pods.values() if p.workload_priority_class == wpc.name]:
            self.queues.unindex(pod.uid)
            self.store.resolve_priority(pod)
            self.queues.index(pod)
        self._policy_changed()

    def remove_workload_priority_class(self, name: str) -> None:
        """Deleted: the pods it gave a priority keep it, as Kueue's Workloads keep their spec.priority."""
        self.store.workload_priority_classes.pop(name, None)
        self._policy_changed()

    # ---- Jobs --------------------------------------------------------------------
    def upsert_job(self, job: JobInfo) -> None:
        """A Job made or changed: its pods take its queue and WorkloadPriorityClass labels anew (jobs.inherit)."""
        old = self.jobs.get(job.uid)
        self.jobs[job.uid] = job
        self.jobs_listed = True
        jobs = self.job_workloads
        if old is None:
            jobs.job_came(job)
        if old is not None and old.queue_name != job.queue_name:
            jobs.end_admission(job.uid)          # a workload does not move queues; the pods are admitted anew
        if old is None or old.inherited != job.inherited:
            self._relabel(job.uid)
        if old is None and not self._bulk and all(u in self.admitted for u in self.store.owned.get(job.uid, ())):
            jobs.infer_job_admission(job.uid)      # its pods run already, admitted before it came: its workload
        jobs.sync_job(job.uid)
        self._policy_changed()

    def remove_job(self, key: str) -> None:
        uid = next((u for u, j in self.jobs.items() if j.key == key), None)
        if uid is not None:
            del self.jobs[uid]
            self.job_workloads.job_gone(uid)      # deleted (--cascade=orphan): its pods are not waiting for it
            self._relabel(uid)
            self.job_workloads.sync_job(uid)
        self._policy_changed()

    def _relabel(self, job_uid: str) -> None:
        """Re-apply the Job's pods (a copy each: the old record must unlink under its old group)."""
        for uid in list(self.store.owned.get(job_uid, ())):
            self.upsert_pod(replace(self.pods[uid]), force=True)

    # ---- Kueue objects -----------------------------------------------------
    def upsert_kueue(self, kind: str, key: str, obj) -> None:
        """Add or replace a ResourceFlavor, ClusterQueue, Cohort or LocalQueue (key: name, or ns/name). The new
        object is stored; one equal to the stored one in all Quotient decodes (an event of the .status Quotient
        writes every ClusterQueue every 10 s, or of metadata) changes nothing else."""
        table = self.store.kueue_table(kind)
        old = table.get(key)
        table[key] = obj
        if old != obj:
            self._kueue_changed(kind, key, old, obj)

    def remove_kueue(self, kind: str, key: str) -> None:
        old = self.store.kueue_table(kind).pop(key, None)
        if old is not None:
            self._kueue_changed(kind, key, old, None)

    def _kueue_changed(self, kind: str, key: str, old, new) -> None:
        """Rebuild what depends on the change: a LocalQueue moves only its own pods (_local_queue_changed); a
        change of the quota tree's shape rebuilds everything (_shapes_tree); any other change is a policy that
        decisions read off the object when they are made."""
        self._policy_changed()
        if self._bulk:
            return          # end_bulk rebuilds
        if kind == "LocalQueue":
            self._local_queue_changed(key)
        elif _shapes_tree(kind, old, new):
            self._rebuild()

    def _local_queue_changed(self, key: str) -> None:
        """A LocalQueue added, repointed or removed: its pods (its namespace, its name as their queue) go where
        a rebuild would put them, the pending ones queued in the ClusterQueue it names now (or in none), the
        running ones charged there (their flavors kept where still valid: charge_running), their Jobs' workloads
        brought up to date. The tree, reservations and holds do not depend on LocalQueues and stay."""
        namespace, _, name = key.partition("/")
        jobs = set()
        for pod in [p for p in self.pods.values() if p.queue_name == name and p.namespace == namespace]:
            self.queues.unindex(pod.uid)
            if pod.node_name and not pod.terminal:
                self.ledger.charge_running(pod, self.ledger.uncharge(pod.uid))
            self.queues.index(pod)
            if pod.owner is not None and pod.owner.uid in self.job_admissions:
                jobs.add(pod.owner.uid)
        for job_uid in jobs:
            self.job_workloads.sync_job(job_uid)

    def _rebuild(self) -> None:
        """Rebuild the tree and flavor node sets, then charge every holder again."""
        self.policy_generation += 1
        admitted = self.ledger.rebuild(self.workloads.victims())
        reservations = dict(self.reservations)
        self.reservations.clear()
        self.queues.reset()
        pending_of, tries = self.queues.pending_of, self.queues.presence.tries
        tracked = self.config.wait_for_pods_ready is not None
        now = self.timer()
        one_per_unit: dict[WorkloadKey, PodInfo] = {}   # readiness is a workload's: once for all its pods
        for uid, pod in self.pods.items():   # charges of pods gone or finished are simply not carried over
            if pod.node_name and not pod.terminal:
                self.ledger.charge_running(pod, admitted.get(uid))
                if tracked and pod.queue_name:
                    one_per_unit.setdefault(unit_of(pod), pod)
            elif uid in reservations and not (pod.terminal or pod.deleting):
                r = reservations[uid]
                if self.ledger.charge_valid(r.charge):
                    self.workloads.store_reservation(uid, r)
            self.queues.index(pod)
            if uid in pending_of and uid not in tries:
                self.queues.presence.expect(uid, now)      # a pod loaded pending is expected at once, as a new one
        for pod in one_per_unit.values():
            self.pods_ready.track_readiness(pod)
        self.job_workloads.recharge()

    # ---- pods ---------------------------------------------------------------
    def upsert_pod(self, pod: PodInfo, force: bool = False) -> None:
        """Add or replace a pod; force: Quotient's own change (a binding undone), never stale."""
        old = self.pods.get(pod.uid)
        if old is not None and not force:
            stale = self.bindings.stale(old, pod, bool(self._bulk))
            if stale:
                self.skip(stale)
                return
        if pod.node_name and not force:
            self.bindings.confirmed(pod.uid)       # the API shows a binding (ours, or another's that won)
        inherit(pod, self.jobs)
        self.job_workloads.wait_for_job(pod)
        self.store.resolve_priority(pod, old)
        if not force:
            self.learned.pop(pod.uid, None)     # a source now speaks for it (Quotient's own bind does not)
        queues, ledger, workloads = self.queues, self.ledger, self.workloads
        was = queues.pending_of.get(pod.uid)
        if old is not None:
            self._unlink(old)
        self.store.link(pod)
        self.generation += 1
        if pod.node_name and not pod.terminal:
            ledger.add_node_requests(pod)
        if self._bulk:
            return      # the tree is built, and every pod charged and indexed, when the bulk load ends
        charge = ledger.uncharge(pod.uid)
        if charge is not None and charge.admitted_from == BOUND_HERE and not force and old is not None \
                and old.node_name and pod.node_name and pod.node_name != old.node_name:
            # Another's binding won over Quotient's: the admission is when the API says it was bound.
            charge.admitted_at, charge.admitted_from = pod.observed_admission()
        if pod.node_name or pod.terminal:
            queues.presence.forget(pod.uid)
        elif pod.queue_name and (old is None or old.gated and not pod.gated):
            queues.presence.expect(pod.uid, self.timer())     # kube-scheduler tries a new (or ungated) pod at once
        if pod.node_name and not pod.terminal:
            reservation = self.reservations.pop(pod.uid, None)
            if reservation is not None:
                ledger.release(reservation.charge, running=False)
                charge = charge or reservation.charge
            ledger.charge_running(pod, charge, observed=charge is None, watched=not force)
        elif pod.terminal or pod.deleting:
            workloads.drop_reservation(pod.uid)
        if pod.terminal:
            self.going.discard(pod.uid)
        queues.index(pod)
        if was is not None and queues.pending_of.get(pod.uid) != was and not (pod.node_name and not pod.terminal):
            queues.pending_left[was[0]] += 1      # left its place other than by binding: room ahead of others may free
        self.pods_ready.track_readiness(pod)
        self.job_workloads.pod_changed(pod.uid)

    def remove_pod(self, uid: str) -> None:
        self.learned.pop(uid, None)
        self.queues.presence.forget(uid)
        self.bindings.confirmed(uid)
        self.workloads.release_hold(uid)
        pod = self.pods.pop(uid, None)
        self.ledger.uncharge(uid)
        self.going.discard(uid)
        self.workloads.drop_reservation(uid)
        if pod is not None:
            if uid in self.queues.pending_of:
                self.queues.pending_left[self.queues.pending_of[uid][0]] += 1
            self._unlink(pod)
            self.store.forget(pod)
            self.pods_ready.track_readiness(pod)
            if pod.owner is not None and pod.owner.uid in self.job_admissions:
                self.job_workloads.sync_job(pod.owner.uid)
        self.generation += 1

    def _unlink(self, pod: PodInfo) -> None:
        self.store.unlink(pod)
        if pod.node_name and not pod.terminal:
            self.ledger.remove_node_requests(pod)
        self.queues.unindex(pod.uid)
