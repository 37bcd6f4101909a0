"""ClusterState: nodes, pods, queues and the running totals decisions read.

Mutated only on the event loop, by sync/ (objects added, changed, deleted) and
by committed decisions (reservations, bindings). Totals are kept incrementally:
quota usage per ClusterQueue and Cohort, requests per node, pending pods per
ClusterQueue in queue order; nothing is recomputed per request. A Kueue object
change rebuilds only what depends on it: the quota tree when its shape or quotas
change, a LocalQueue's own pods when it moves, nothing for a status-only event.
"""
from __future__ import annotations

import bisect
import heapq
import itertools
import logging
import math
import time
from collections import Counter
from dataclasses import dataclass, field, replace
from typing import Callable, Iterator

from ..config import Configuration
from ..core.drift import Decided, Overrun, decided_on, usage_note
from ..core.flavors import Charge, quota_usage, running_flavors
from ..core.gangs import expected_size, walk_shape
from ..core.quantity import format_quantity
from ..core.readiness import all_ready, queue_order, requeue_key, unit_of
from ..core.priority import resolve
from ..core.jobs import inherit
from ..core.quota import QuotaNode, available
from ..core.workload import JOB, POD, Readiness, RequeueRecord, WorkloadKey, group_of
from ..core.quota import charge as charge_usage
from ..objects.budgets import PodDisruptionBudget
from ..objects.job import JobInfo
from ..objects.kueue import ClusterQueue, Cohort, LocalQueue, ResourceFlavor, WorkloadPriorityClass
from ..objects.node import NodeInfo
from ..objects.pod import PodInfo
from ..objects.podgroup import PodGroup
from .budgets import Budgets
from .blocked import BlockedQueues
from .nodetable import NodeTable
from .presence import Presence
from .tree import QuotaTree, build_tree, mirror

log = logging.getLogger("quotient.state")
BOUND_HERE = "bind"      # Charge.admitted_from of a pod Quotient bound: its bind moment
ASSUMED_TTL = 60.0      # seconds a binding Quotient made outranks watch events that do not show it yet


@dataclass(slots=True)
class PriorityClassInfo:
    name: str
    value: int
    preemption_policy: str = "PreemptLowerPriority"
    global_default: bool = False
    annotations: dict[str, str] = field(default_factory=dict)
    allow_preemption: bool = True       # YuniKorn's allow-preemption annotation (objects.annotations)


@dataclass(slots=True)
class Reservation:
    """Quota held between a pod passing filter and its bind, and what that decision was made on."""
    charge: Charge
    expires: float          # on ClusterState.timer (monotonic)
    decided: Decided | None = None


@dataclass(slots=True)
class JobAdmission:
    """A Job admitted as one workload (core.jobs): how many pods, and one pod's charge. While it runs, the
    slots its pods do not fill (a pod failed, a completion done with more to go) keep that charge as planned
    usage (`spare`), so the pods the Job controller creates in their place run in the workload's quota, as a
    Kueue Workload keeps its quota; a Job with fewer completions to go frees its share."""
    size: int
    charge: Charge
    spare: int = 0
    partial: bool = False       # admitted with fewer pods than its count (job-min-parallelism)
    started: bool = False       # one of its pods has bound (before that, its pods only hold nodes)

    def spare_charge(self, n: int) -> Charge:
        """n slots of one pod's charge, as one new charge (n = 1: a pod's own, for a pod taking a slot)."""
        usage = {fr: v * n for fr, v in self.charge.usage.items()}
        return Charge(self.charge.cluster_queue, dict(self.charge.flavors), usage)


@dataclass(slots=True)
class Hold:
    """Room on a node, and quota, freed by a preemption and kept for the preemptor until it binds
    (YuniKorn's node reservation: the victims' room cannot be taken by anyone else)."""
    node: str
    requests: dict[str, int]
    expires: float          # on ClusterState.timer (monotonic)
    victims: dict[str, tuple[str, str]]          # victim uid -> (reason, message); shared by a group's holds
    evicted: set[str] = field(default_factory=set)       # victims whose eviction was issued; shared too

    def left(self, pods: dict) -> list[str]:
        """Victims still in the cluster (not yet evicted, or terminating): their quota is still used."""
        return [uid for uid in self.victims if uid in pods and not pods[uid].terminal]


class Admissions(dict):
    """uid -> Charge of the pods holding quota, also indexed by ClusterQueue: preemption looks at
    one queue's pods at a time and must not walk every pod of a 50,000-pod cluster to find them."""

    def __init__(self):
        super().__init__()
        self.by_queue: dict[str, set[str]] = {}

    def __setitem__(self, uid: str, charge: Charge) -> None:
        old = self.get(uid)
        if old is not None:
            self.by_queue[old.cluster_queue].discard(uid)
        super().__setitem__(uid, charge)
        self.by_queue.setdefault(charge.cluster_queue, set()).add(uid)

    def __delitem__(self, uid: str) -> None:
        charge = self[uid]
        super().__delitem__(uid)
        self.by_queue[charge.cluster_queue].discard(uid)

    def pop(self, uid: str, *default):
        if uid in self:
            charge = self[uid]
            del self[uid]
            return charge
        if default:
            return default[0]
        raise KeyError(uid)


def _change(previous: Charge | None, charge: Charge, observed: bool) -> str:
    """What the watch shows of a bound pod that may take its ClusterQueue above quota ("" for nothing that grows
    a charge): bound by another, moved to another ClusterQueue, or grown by an in-place resize."""
    if observed:
        return "was found running, bound by another than Quotient"
    if previous is None:
        return ""
    if previous.cluster_queue != charge.cluster_queue:
        return f"moved from ClusterQueue {previous.cluster_queue} (its queue label changed while bound)"
    if any(v > previous.usage.get(fr, 0) for fr, v in charge.usage.items()):
        return "was resized in place (pods/resize)"
    return ""


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
        self.config = config or Configuration()
        self.clock = clock
        self.timer = timer or (time.monotonic if clock is time.time else clock)
        self.nodes: dict[str, NodeInfo] = {}
        self.node_requested: dict[str, dict[str, int]] = {}
        self.node_pods: dict[str, set[str]] = {}          # node -> uids of pods bound there
        self.node_table = NodeTable()                      # the same amounts as numpy columns, for scoring
        self.membership_generation = 0                     # bumps when a flavor's node set may change
        self.pods: dict[str, PodInfo] = {}
        self.uid_by_key: dict[str, str] = {}
        self.namespaces: dict[str, dict[str, str]] = {}
        self.priority_classes: dict[str, PriorityClassInfo] = {}
        self.workload_priority_classes: dict[str, int] = {}   # Kueue's WorkloadPriorityClass name -> value
        self.jobs: dict[str, JobInfo] = {}                     # batch/v1 Jobs by uid
        self.jobs_listed = False                               # Jobs are a source: an unknown owner is not seen yet
        self.job_waits: dict[str, float] = {}                  # uid of a Job not listed -> when (timer) its first pod was seen
        self.jobs_missing: set[str] = set()                    # Job uids waited out or deleted: their pods are plain
        self.job_wait_counts: Counter = Counter()              # "waited", "expired": quotient_job_waits_*
        self._jobs_missing_sweep = 0.0
        self.job_admissions: dict[str, JobAdmission] = {}      # Job uid -> its admitted workload
        self.flavors: dict[str, ResourceFlavor] = {}
        self.cluster_queues: dict[str, ClusterQueue] = {}
        self.cohorts: dict[str, Cohort] = {}
        self.local_queues: dict[str, LocalQueue] = {}
        self.budgets = Budgets()                        # PodDisruptionBudgets, with the pods they cover
        self.pod_groups: dict[str, PodGroup] = {}       # coscheduling PodGroups by namespace/name
        self.tree = QuotaTree()                         # live usage: changed by charges only
        self._decisions = QuotaTree()                   # its mirror, that decisions read and simulate on
        self._unmirrored: set[str] = set()              # ClusterQueues whose live usage the mirror lacks
        self.flavor_nodes: dict[str, set[str] | None] = {}
        self.admitted = Admissions()
        self.reservations: dict[str, Reservation] = {}
        self._expiry: list[tuple[float, str]] = []
        self.pending: dict[str, list[tuple]] = {}       # ClusterQueue -> sorted [(order key, uid)]
        self._pending_of: dict[str, tuple[str, tuple, object]] = {}    # uid -> (ClusterQueue, entry, shape)
        self.pending_shapes: dict[str, Counter] = {}    # ClusterQueue -> its pending pods' shapes (a group's: uids)
        self.holds: dict[str, Hold] = {}                  # preemptor uid -> what was freed for it
        self._holds_version = 0                           # bumps when a hold is taken or ends (victims)
        self._victims: tuple[int, frozenset[str]] = (-1, frozenset())
        self._rooms: tuple[tuple, dict] = ((), {})        # (holds version, generation, holder) -> the room changes
        self.going: set[str] = set()                      # victims of holds, out of the planning usage
        self.assumed: dict[str, float] = {}               # uid -> when (timer) Quotient bound it, until the API shows it
        self.held_back: dict[str, PodInfo] = {}           # uid -> the newest unbinding event ignored meanwhile
        self.quota_refusals: Counter = Counter()          # ClusterQueue -> charges refused by the invariant
        self.overruns: dict[str, Overrun] = {}            # uid -> a bound pod's change that took its queue above quota
        self.overrun_counts: Counter = Counter()          # ClusterQueue -> such changes seen
        self.on_overrun: Callable[[Overrun], None] | None = None     # the extender journals each one
        self.on_reserved: list[Callable[[PodInfo, Charge], None]] = []   # a reservation taken (observe.metrics)
        self.on_admitted: list[Callable[[PodInfo, Charge], None]] = []   # a pod Quotient binds is charged (idem)
        self.groups: dict[WorkloadKey, set[str]] = {}     # pod group or Job -> member uids
        self.owned: dict[str, set[str]] = {}              # owner uid -> uids of its live pods
        self.readiness: dict[WorkloadKey, Readiness] = {}  # waitForPodsReady: admitted workloads
        self.requeues: dict[str, RequeueRecord] = {}      # waitForPodsReady: PodsReadyTimeout evictions
        self.learned: dict[str, float] = {}               # pods known only from requests -> when (timer) first learned
        self._learned_sweep = 0.0
        self.skips: Counter = Counter()
        self.generation = 0     # bumps on every change; the simulator watches it
        self.policy_generation = 0    # bumps when an object admission reads other than pods changes (state.blocked)
        self.pending_left: Counter = Counter()    # ClusterQueue -> pending pods that left its queue unadmitted
        self.blocked = BlockedQueues()            # refusals remembered per pod shape (state.blocked)
        self.presence = Presence(self.timer, self._pending_of.get)   # which pending pods kube-scheduler brings now
        self._bulk = 0

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
            self._infer_job_admissions()

    def skip(self, reason: str) -> None:
        """Count and log (once per reason) an object Quotient could not use."""
        self.skips[reason] += 1
        if self.skips[reason] == 1:
            log.warning("skipped: %s", reason)

    # ---- lookups -------------------------------------------------------
    def namespace_labels(self, namespace: str) -> dict[str, str]:
        labels = self.namespaces.get(namespace)
        return labels if labels is not None else {"kubernetes.io/metadata.name": namespace}

    def members(self, key: WorkloadKey) -> list[PodInfo]:
        """The live members of a pod group, oldest first."""
        return sorted((self.pods[u] for u in self.groups.get(key, ())), key=lambda p: (p.created or 0.0, p.name))

    def pod_by_key(self, key: str) -> PodInfo | None:
        uid = self.uid_by_key.get(key)
        return self.pods.get(uid) if uid else None

    def queue_of(self, pod: PodInfo) -> tuple[LocalQueue | None, ClusterQueue | None]:
        lq = self.local_queues.get(f"{pod.namespace}/{pod.queue_name}") if pod.queue_name else None
        return lq, (self.cluster_queues.get(lq.cluster_queue) if lq else None)

    def quota_node(self, cq_name: str) -> QuotaNode | None:
        """The ClusterQueue's node in the decisions' tree (quota_tree)."""
        if self._unmirrored:
            self._refresh()
        return self._decisions.queues.get(cq_name)

    def quota_tree(self) -> QuotaTree:
        """The quota tree decisions read: a mirror of the live one, brought up to date here, on which a
        decision may simulate charges and removals (core.overlay) without touching the live usage."""
        if self._unmirrored:
            self._refresh()
        return self._decisions

    def _refresh(self) -> None:
        """Copy into the mirror the live usage of the ClusterQueues charged since, and their Cohorts."""
        for name in self._unmirrored:
            live, twin = self.tree.queues.get(name), self._decisions.queues.get(name)
            while live is not None and twin is not None:
                twin.usage = dict(live.usage)
                live, twin = live.parent, twin.parent
        self._unmirrored.clear()

    def resolve_priority(self, pod: PodInfo, before: PodInfo | None = None) -> None:
        """The pod's own priority and the workload's (core.priority.resolve); `before`: the state's record."""
        resolve(pod, self.priority_classes, self.workload_priority_classes, before)

    def node_in_flavor(self, node: str, flavor: str) -> bool:
        members = self.flavor_nodes.get(flavor)
        return members is None or node in members

    def node_free(self, node: str) -> dict[str, int]:
        info = self.nodes.get(node)
        if info is None:
            return {}
        used = self.node_requested.get(node, {})
        return {r: v - used.get(r, 0) for r, v in info.allocatable.items()}

    def room(self, node: str, holder: str = "") -> dict[str, int]:
        """Free resources on the node as plans count them: victims already chosen are as good as
        gone, and what holds keep for pods other than holder is taken."""
        return self.rooms(holder)(node)

    def rooms(self, holder: str = ""):
        """room(node) for many nodes: the holds are added up per node once, not once per node, and again only
        when the holds or the state changed."""
        key = (self._holds_version, self.generation, holder)
        if self._rooms[0] == key:
            return self._room_of(self._rooms[1])
        change: dict[str, dict[str, int]] = {}
        for uid, hold in self.holds.items():
            if uid != holder:
                held = change.setdefault(hold.node, {})
                for r, v in hold.requests.items():
                    held[r] = held.get(r, 0) - v
        for victim in self.victims():       # once each, though a group's holds share them
            pod = self.pods.get(victim)
            if pod is not None and pod.node_name and not pod.terminal:
                back = change.setdefault(pod.node_name, {})
                for r, v in pod.requests.items():
                    back[r] = back.get(r, 0) + v

        self._rooms = (key, change)
        return self._room_of(change)

    def _room_of(self, change: dict[str, dict[str, int]]):
        def room(node: str) -> dict[str, int]:
            free = self.node_free(node)
            for r, v in change.get(node, {}).items():
                free[r] = free.get(r, 0) + v
            return free
        return room

    # ---- nodes -----------------------------------------------------------
    def upsert_node(self, node: NodeInfo) -> None:
        old = self.nodes.get(node.name)
        self.nodes[node.name] = node
        fresh = node.name not in self.node_table.index
        self.node_table.set_node(node.name, node.allocatable)
        if fresh:
            self.node_table.add_requested(node.name, self.node_requested.get(node.name, {}))
        self.node_requested.setdefault(node.name, {})
        for fname, flavor in self.flavors.items():
            members = self.flavor_nodes.get(fname)
            if members is None:
                continue
            if flavor.selects(node.labels):
                members.add(node.name)
            else:
                members.discard(node.name)
        if old is None or old.labels != node.labels:
            self.membership_generation += 1
            self._recharge_inferred(node.name)
        self.generation += 1

    def _recharge_inferred(self, node: str) -> None:
        """Flavors read off a node's labels are read again when the labels arrive or change."""
        for uid in self.node_pods.get(node, ()):
            charge = self.admitted.get(uid)
            if charge is not None and charge.inferred:
                del self.admitted[uid]
                self._release(charge, planned=uid not in self.going)
                self._charge_running(self.pods[uid], None)

    def remove_node(self, name: str) -> None:
        self.nodes.pop(name, None)
        self.node_table.remove_node(name)
        self.membership_generation += 1
        for members in self.flavor_nodes.values():
            if members is not None:
                members.discard(name)
        self.generation += 1

    # ---- namespaces, priority classes, other kinds ----------------------
    def upsert_namespace(self, name: str, labels: dict[str, str]) -> None:
        self.namespaces[name] = {**labels, "kubernetes.io/metadata.name": name}
        self._policy_changed()

    def remove_namespace(self, name: str) -> None:
        self.namespaces.pop(name, None)
        self._policy_changed()

    def upsert_priority_class(self, pc: PriorityClassInfo) -> None:
        self.priority_classes[pc.name] = pc
        self._policy_changed()

    def remove_priority_class(self, name: str) -> None:
        self.priority_classes.pop(name, None)
        self._policy_changed()

    def upsert_job(self, job: JobInfo) -> None:
        """A Job made or changed: its pods take its queue and WorkloadPriorityClass labels anew (jobs.inherit)."""
        old = self.jobs.get(job.uid)
        self.jobs[job.uid] = job
        self.jobs_listed = True
        if old is None:
            self._job_came(job)
        if old is not None and old.queue_name != job.queue_name:
            self.evict_job(job.uid)          # a workload does not move queues; the pods are admitted anew
        if old is None or old.inherited != job.inherited:
            self._relabel(job.uid)
        if old is None and not self._bulk and all(u in self.admitted for u in self.owned.get(job.uid, ())):
            self._infer_job_admission(job.uid)      # its pods run already, admitted before it came: its workload
        self._sync_job(job.uid)
        self._policy_changed()

    def remove_job(self, key: str) -> None:
        uid = next((u for u, j in self.jobs.items() if j.key == key), None)
        if uid is not None:
            del self.jobs[uid]
            if uid in self.owned:
                self.jobs_missing.add(uid)      # deleted (--cascade=orphan): its pods are not waiting for it
            self._relabel(uid)
            self._sync_job(uid)
        self._policy_changed()

    # ---- Jobs not on the API: late, or missing ------------------------------------
    def _wait_for_job(self, pod: PodInfo) -> None:
        """A pending pod of a batch/v1 Job the Job list (complete: jobs_listed) does not have. The Job may only be
        late, as the Job and Pod watches are not ordered: its pods wait for it config.job_wait_timeout from when
        its first pod was seen (core.admission.job_refusal), once per Job; a Job already found missing is not
        waited for again."""
        owner = pod.owner
        if owner is None or not owner.is_batch_job or not owner.uid or not self.jobs_listed or pod.node_name \
                or pod.terminal or owner.uid in self.jobs or owner.uid in self.job_waits or owner.uid in self.jobs_missing:
            return
        self.job_waits[owner.uid] = self.timer()
        self.job_wait_counts["waited"] += 1

    def _job_came(self, job: JobInfo) -> None:
        """A Job its pods waited for: late within the bound (its pods, still pending, become its workload), or
        after it (its pods were judged as plain pods; those running become its workload: upsert_job)."""
        since = self.job_waits.pop(job.uid, None)
        if job.uid in self.jobs_missing:
            self.jobs_missing.discard(job.uid)
            log.info("Job %s came after its pods had waited jobWaitTimeout (%gs) for it", job.key,
                     self.config.job_wait_timeout)
        elif since is not None:
            log.debug("Job %s came %.1fs after its first pod", job.key, self.timer() - since)

    def expire_job_waits(self) -> int:
        """End the waits older than config.job_wait_timeout: such a Job is missing, not late, and its pods are
        judged by the pod rules from now on (core.admission.job_refusal reads the same bound, so a decision never
        depends on when this runs); counted once per Job. Job uids whose pods are all gone are forgotten."""
        now, bound, expired = self.timer(), self.config.job_wait_timeout, 0
        for uid, since in list(self.job_waits.items()):     # oldest first (insertion order)
            if now - since < bound:
                break
            del self.job_waits[uid]
            self.job_wait_counts["expired"] += 1
            expired += 1
            if uid in self.owned:
                self.jobs_missing.add(uid)
                self.generation += 1
        if self.jobs_missing and now - self._jobs_missing_sweep >= 60:
            self._jobs_missing_sweep = now
            self.jobs_missing &= self.owned.keys()
        return expired

    # ---- Jobs admitted as one workload ------------------------------------------
    def admit_job(self, job_uid: str, size: int, charge: Charge, partial: bool = False) -> None:
        """The Job's workload admitted with size pods (fewer than its count under partial admission)."""
        self._end_job(job_uid)
        one = Charge(charge.cluster_queue, dict(charge.flavors), dict(charge.usage))
        self.job_admissions[job_uid] = JobAdmission(size, one, partial=partial)
        self._sync_job(job_uid)

    def evict_job(self, job_uid: str) -> None:
        """The workload is evicted (preempted, timed out, drained, moved to another queue): its spare slots'
        quota is freed, its pods not yet bound lose what they hold, and the pods its controller creates
        again are admitted as a new workload."""
        if self._end_job(job_uid):
            for uid in list(self.owned.get(job_uid, ())):
                if uid not in self.admitted:
                    self.release_hold(uid)
                    self.drop_reservation(uid)

    def evict_jobs_of(self, uids) -> None:
        """Pods chosen for eviction (by a hold, kube-scheduler's preempt, a reconcile): a Job's pod taken
        evicts its whole workload, as Kueue evicts Workloads, not pods."""
        for uid in uids:
            pod = self.pods.get(uid)
            if pod is not None and pod.job:
                self.evict_job(pod.owner.uid)

    def _end_job(self, job_uid: str) -> bool:
        rec = self.job_admissions.pop(job_uid, None)
        if rec is None:
            return False
        self._spare(rec, -rec.spare)
        self.generation += 1
        return True

    def _sync_job(self, job_uid: str) -> None:
        """Spare slots = the admitted size (less the completions done) minus the pods holding quota (bound, or
        reserved). The workload ends when the Job leaves its queue, finishes or goes, when it grew past a whole
        admission (Kueue makes a new Workload for a Job that no longer matches its own), or when its pods'
        holds lapsed before any of them bound."""
        rec = self.job_admissions.get(job_uid)
        if rec is None:
            return
        uids = self.owned.get(job_uid, ())
        rec.started = rec.started or any(u in self.admitted for u in uids)
        holding = sum(1 for u in uids if u in self.admitted or u in self.reservations)
        job = self.jobs.get(job_uid)
        if (not holding and not rec.started) or job is None or job.finished or not job.queue_name \
                or (job.count > rec.size and not rec.partial):
            self.evict_job(job_uid)
            return
        self._spare(rec, max(0, min(rec.size, job.count) - holding) - rec.spare)

    def _spare(self, rec: JobAdmission, n: int) -> None:
        """Charge (n > 0) or free (n < 0) n slots of the Job's planning usage, at once."""
        if n:
            self._apply(rec.spare_charge(abs(n)), running=False, sign=1 if n > 0 else -1)
            rec.spare += n

    def _pod_job_changed(self, uid: str) -> None:
        pod = self.pods.get(uid)
        if pod is not None and pod.owner is not None and pod.owner.uid in self.job_admissions:
            self._sync_job(pod.owner.uid)

    def _infer_job_admissions(self) -> None:
        """After a bulk load (a start, a relist): a Job whose pods run is an admitted workload of the pods that
        hold quota now (its size at admission is kept nowhere Quotient reads: a guess by its count could
        charge beyond the quota); not one being preempted or evicted."""
        for job_uid in list(self.jobs):
            self._infer_job_admission(job_uid)

    def _infer_job_admission(self, job_uid: str) -> None:
        """One Job's workload, from its pods that hold quota (_infer_job_admissions)."""
        job = self.jobs[job_uid]
        if job_uid in self.job_admissions or job.finished or not job.queue_name:
            return
        pods = [self.pods[u] for u in self.owned.get(job_uid, ()) if u in self.pods]
        running = [p for p in pods if p.uid in self.admitted]
        if running and not any(p.uid in self.going or p.deleting for p in pods):
            size = sum(1 for p in pods if p.uid in self.admitted or p.uid in self.reservations)
            self.admit_job(job_uid, size, self.admitted[running[0].uid], partial=size < job.count)

    def _relabel(self, job_uid: str) -> None:
        """Re-apply the Job's pods (a copy each: the old record must unlink under its old group)."""
        for uid in list(self.owned.get(job_uid, ())):
            self.upsert_pod(replace(self.pods[uid]), force=True)

    def upsert_workload_priority_class(self, wpc: WorkloadPriorityClass) -> None:
        """A WorkloadPriorityClass made or changed: the pods whose label names it take its value (Kueue's
        WorkloadPriorityClass controller updates their Workloads) and their place in the queue with it."""
        self.workload_priority_classes[wpc.name] = wpc.value
        for pod in [p for p in self.pods.values() if p.workload_priority_class == wpc.name]:
            self._unindex_pending(pod.uid)
            self.resolve_priority(pod)
            self._index_pending(pod)
        self._policy_changed()

    def remove_workload_priority_class(self, name: str) -> None:
        """Deleted: the pods it gave a priority keep it, as Kueue's Workloads keep their spec.priority."""
        self.workload_priority_classes.pop(name, None)
        self._policy_changed()

    def upsert_budget(self, pdb: PodDisruptionBudget) -> None:
        self.budgets.upsert(pdb, self.pods.values())
        self._policy_changed()

    def remove_budget(self, key: str) -> None:
        self.budgets.remove(key)
        self._policy_changed()

    def upsert_pod_group(self, pg: PodGroup) -> None:
        self.pod_groups[pg.key] = pg
        self._policy_changed()

    def remove_pod_group(self, key: str) -> None:
        self.pod_groups.pop(key, None)
        self._policy_changed()

    # ---- Kueue objects -----------------------------------------------------
    def _kueue_table(self, kind: str) -> dict:
        return {"ResourceFlavor": self.flavors, "ClusterQueue": self.cluster_queues,
                "Cohort": self.cohorts, "LocalQueue": self.local_queues}[kind]

    def upsert_kueue(self, kind: str, key: str, obj) -> None:
        """Add or replace a ResourceFlavor, ClusterQueue, Cohort or LocalQueue (key: name, or ns/name). The new
        object is stored; one equal to the stored one in all Quotient decodes (an event of the .status Quotient
        writes every ClusterQueue every 10 s, or of metadata) changes nothing else."""
        table = self._kueue_table(kind)
        old = table.get(key)
        table[key] = obj
        if old != obj:
            self._kueue_changed(kind, key, old, obj)

    def remove_kueue(self, kind: str, key: str) -> None:
        old = self._kueue_table(kind).pop(key, None)
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
        running ones charged there (their flavors kept where still valid: _charge_running), their Jobs' workloads
        brought up to date. The tree, reservations and holds do not depend on LocalQueues and stay."""
        namespace, _, name = key.partition("/")
        jobs = set()
        for pod in [p for p in self.pods.values() if p.queue_name == name and p.namespace == namespace]:
            self._unindex_pending(pod.uid)
            if pod.node_name and not pod.terminal:
                charge = self.admitted.pop(pod.uid, None)
                if charge is not None:
                    self._release(charge, planned=pod.uid not in self.going)
                self._charge_running(pod, charge)
            self._index_pending(pod)
            if pod.owner is not None and pod.owner.uid in self.job_admissions:
                jobs.add(pod.owner.uid)
        for job_uid in jobs:
            self._sync_job(job_uid)

    def _rebuild(self) -> None:
        """Rebuild the tree and flavor node sets, then charge every holder again."""
        self.policy_generation += 1
        self.tree = build_tree(self.cluster_queues, self.cohorts, self.flavors)
        self._decisions, self._unmirrored = mirror(self.tree), set(self.tree.queues)     # charged again below
        self.membership_generation += 1
        self.flavor_nodes = {}
        for fname, flavor in self.flavors.items():
            if not flavor.node_labels:
                self.flavor_nodes[fname] = None
                continue
            self.flavor_nodes[fname] = {n.name for n in self.nodes.values() if flavor.selects(n.labels)}
        admitted, self.admitted = self.admitted, Admissions()
        reservations, self.reservations = self.reservations, {}
        self.pending, self.pending_shapes = {}, {}
        self._pending_of.clear()                # (the same dict: Presence reads it)
        self.presence.reset_index()
        self.going = set(self.victims())
        tracked = self.config.wait_for_pods_ready is not None
        now = self.timer()
        one_per_unit: dict[WorkloadKey, PodInfo] = {}   # readiness is a workload's: once for all its pods
        for uid, pod in self.pods.items():   # charges of pods gone or finished are simply not carried over
            if pod.node_name and not pod.terminal:
                self._charge_running(pod, admitted.get(uid))
                if tracked and pod.queue_name:
                    one_per_unit.setdefault(unit_of(pod), pod)
            elif uid in reservations and not (pod.terminal or pod.deleting):
                r = reservations[uid]
                if self._charge_valid(r.charge):
                    self._hold(uid, r)
            self._index_pending(pod)
            if uid in self._pending_of and uid not in self.presence.tries:
                self.presence.expect(uid, now)      # a pod loaded pending is expected at once, as a new one
        for pod in one_per_unit.values():
            self.track_readiness(pod)
        for rec in self.job_admissions.values():      # the tree is new: the spare slots are charged again
            spare, rec.spare = rec.spare, 0
            self._spare(rec, spare)
        for job_uid in list(self.job_admissions):     # and brought up to what the list showed
            self._sync_job(job_uid)

    # ---- pods ---------------------------------------------------------------
    def track_readiness(self, pod: PodInfo) -> None:
        """waitForPodsReady: note when the pod's workload was admitted, and when it became (or stopped
        being) all Ready. A member that finished does not count as lost readiness."""
        cfg = self.config.wait_for_pods_ready
        if cfg is None or not pod.queue_name:
            return
        unit, group = unit_of(pod), group_of(pod)
        members = self.unit_members(unit)
        bound = [m for m in members if m.node_name and not m.terminal]
        record = self.readiness.get(unit)
        if record is not None and pod.phase == "Succeeded" and unit.kind != POD:
            record.finished += 1
        if not bound:
            self.readiness.pop(unit, None)
            return
        now = self.clock()
        if record is None:
            record = self.readiness[unit] = Readiness(now)
        if all_ready(bound, members, record.finished, (expected_size(self, pod) or 1) if group else None):
            record.ready_at = record.ready_at or now
            record.unready_at = None
        elif record.ready_at is not None and record.unready_at is None:
            record.unready_at = now      # a member unready, or gone and not yet back

    def unit_members(self, unit: WorkloadKey) -> list[PodInfo]:
        """The live pods of a readiness unit (unit_of): a group, a Job's pods, or one pod."""
        if unit.kind == POD:
            pod = self.pod_by_key(f"{unit.namespace}/{unit.name}")
            return [pod] if pod is not None else []
        if unit.kind == JOB:
            return [self.pods[u] for u in self.owned.get(unit.uid, ()) if u in self.pods]
        return self.members(unit)

    def queue_key(self, pod: PodInfo) -> tuple:
        """The pod's place in its ClusterQueue (core.readiness.queue_order, requeuingStrategy included)."""
        cfg = self.config.wait_for_pods_ready
        return queue_order(pod, self.requeues.get(requeue_key(pod)) if cfg is not None else None, cfg)

    def forget_stale_requeue(self, pod: PodInfo) -> None:
        """A new controller that reuses a requeued workload's name starts afresh: its predecessor's
        PodsReadyTimeout record (backoff, deactivation, place in the queue) is forgotten."""
        if not self.requeues:
            return
        key = requeue_key(pod)
        record = self.requeues.get(key)
        if record is not None and record.owner_uid and pod.owner is not None and pod.owner.uid != record.owner_uid:
            del self.requeues[key]

    def tried(self, uid: str, refused: bool) -> None:
        """kube-scheduler tried the pod (filter was asked); refused, it backs off (state.presence)."""
        self.presence.tried(uid, refused)

    def away(self, uid: str) -> bool:
        """kube-scheduler will not try the pod for a while: it backs off from a refusal, or was due more than
        OVERDUE ago and did not come (state.presence). A pending pod that is away keeps no quota from the pods
        behind it that are tried meanwhile: admitted in queue order among the pods kube-scheduler brings, as
        Kueue admits in order among the workloads it has, quota never waits idle for a pod that is not coming;
        a pod of higher priority that finds it taken preempts, as in Kueue."""
        return self.presence.away(uid)

    def expected(self, uid: str) -> bool:
        """kube-scheduler brings the pod now or once its backoff ends (state.presence): a workload that waits its
        turn under blockAdmission keeps its place meanwhile (core.next_in_line)."""
        return self.presence.expected(uid)

    def present_pending(self, cq_name: str, before: tuple | None = None) -> Iterator[PodInfo]:
        """pending_pods(cq_name, before) less those away, from the present pods alone (state.presence)."""
        items = self.pending.get(cq_name, ())
        end = bisect.bisect_left(items, (before,)) if before is not None else len(items)
        end = min(end, self.config.max_queue_scan)
        if not end:
            return
        last = items[end - 1]
        reservations, pods = self.reservations, self.pods
        for entry in list(self.presence.present(cq_name)):
            if entry > last:
                break
            if entry[1] not in reservations:
                yield pods[entry[1]]

    def learn_pod(self, pod: PodInfo) -> None:
        """A pending pod known only because kube-scheduler asked about it (no source lists it)."""
        self.upsert_pod(pod)
        self.learned[pod.uid] = self.timer()

    def spoken_for(self, uid: str) -> None:
        """The API (or, without one, the snapshot writer that stands for it) now speaks for a pod
        Quotient learned from a request and bound: it is no longer only learned."""
        self.learned.pop(uid, None)
        self._confirmed(uid)

    def forget_stale_learned(self) -> int:
        """Forget pods known only from requests once learnedPodTimeout has passed since they were first
        learned, bound or not: a real pod shows up on the API (and stops being only learned) within
        seconds, so this is a deleted pod or a ghost a caller made up, and neither may hold a place in
        queue order or quota for ever, however often it is asked about or whatever its bind answered."""
        now = self.timer()
        if not self.learned or now - self._learned_sweep < 60:
            return 0
        self._learned_sweep = now
        stale = [uid for uid, first in self.learned.items() if now - first > self.config.learned_pod_timeout]
        for uid in stale:
            self.remove_pod(uid)
            self.skips["learned pod forgotten"] += 1
        return len(stale)

    def _stale(self, old: PodInfo, pod: PodInfo) -> str:
        """Why an event for a known pod must not be applied ("" when it may): it would move the pod
        backwards, unbinding a pod Quotient bound before the API has shown that binding (an event
        written before the bind, delivered after it, as kube-scheduler's assume cache guards against),
        or it is a watch event no newer (resourceVersion) than what is known and unbinds a bound pod.
        A list (a bulk pass) is the API's whole word at one moment: it is believed whatever its
        resourceVersions say (an API server restored from a backup goes back to older ones), and the
        watch events after it are judged against the versions it listed."""
        if not old.node_name or pod.node_name == old.node_name or pod.terminal or pod.deleting:
            return ""
        if not self._bulk and old.resource_version.isdigit() and pod.resource_version.isdigit() \
                and int(pod.resource_version) <= int(old.resource_version):
            return "pod event older (resourceVersion) than the known state ignored"
        since = self.assumed.get(pod.uid)
        if since is not None and not pod.node_name:
            if self.timer() - since < ASSUMED_TTL:
                self.held_back[pod.uid] = pod      # the API's newest word, should the binding fail
                return "pod event older than Quotient's own binding ignored"
            self._confirmed(pod.uid)
            self.skip(f"binding not confirmed by the API within {ASSUMED_TTL:.0f}s: the API's state is taken")
        return ""

    def expire_assumed(self) -> int:
        """Take the API's word for the bindings it has not shown within ASSUMED_TTL when it sent an unbinding
        event meanwhile (held back): the newest such event is applied now, as _stale would apply the next one. A pod
        the API shows unbound (its Binding lost, or undone by a restored API server) would otherwise stay charged
        until some later event of it came, and a pending pod may get none. Returns how many."""
        now = self.timer()
        late = [uid for uid, since in self.assumed.items() if now - since >= ASSUMED_TTL and uid in self.held_back]
        for uid in late:
            latest = self.held_back[uid]
            self._confirmed(uid)
            self.skip(f"binding not confirmed by the API within {ASSUMED_TTL:.0f}s: the API's state is taken")
            self.upsert_pod(latest)
        return len(late)

    def _confirmed(self, uid: str) -> None:
        """The API has spoken about a pod Quotient assumed bound: its word stands from now on."""
        self.assumed.pop(uid, None)
        self.held_back.pop(uid, None)

    def upsert_pod(self, pod: PodInfo, force: bool = False) -> None:
        """Add or replace a pod; force: Quotient's own change (a binding undone), never stale."""
        old = self.pods.get(pod.uid)
        if old is not None and not force:
            stale = self._stale(old, pod)
            if stale:
                self.skip(stale)
                return
        if pod.node_name and not force:
            self._confirmed(pod.uid)       # the API shows a binding (ours, or another's that won)
        inherit(pod, self.jobs)
        self._wait_for_job(pod)
        self.resolve_priority(pod, old)
        if not force:
            self.learned.pop(pod.uid, None)     # a source now speaks for it (Quotient's own bind does not)
        was = self._pending_of.get(pod.uid)
        if old is not None:
            self._unlink(old)
        self.pods[pod.uid] = pod
        self.uid_by_key[pod.key] = pod.uid
        if self.budgets:
            self.budgets.pod_changed(pod)
        if not pod.terminal and group_of(pod):
            self.groups.setdefault(group_of(pod), set()).add(pod.uid)
        if not pod.terminal and pod.owner is not None and pod.owner.uid:
            self.owned.setdefault(pod.owner.uid, set()).add(pod.uid)
        self.generation += 1
        if pod.node_name and not pod.terminal:
            self._add_node_requests(pod)
        if self._bulk:
            return      # the tree is built, and every pod charged and indexed, when the bulk load ends
        charge = self.admitted.pop(pod.uid, None)
        if charge is not None:
            self._release(charge, planned=pod.uid not in self.going)
            if charge.admitted_from == BOUND_HERE and not force and old is not None and old.node_name \
                    and pod.node_name and pod.node_name != old.node_name:
                # Another's binding won over Quotient's: the admission is when the API says it was bound.
                charge.admitted_at, charge.admitted_from = pod.observed_admission()
        if pod.node_name or pod.terminal:
            self.presence.forget(pod.uid)
        elif old is None and pod.queue_name:
            self.presence.expect(pod.uid, self.timer())     # kube-scheduler tries a new pod at once (its activeQ)
        if pod.node_name and not pod.terminal:
            reservation = self.reservations.pop(pod.uid, None)
            if reservation is not None:
                self._release(reservation.charge, running=False)
                charge = charge or reservation.charge
            self._charge_running(pod, charge, observed=charge is None, watched=not force)
        elif pod.terminal or pod.deleting:
            self.drop_reservation(pod.uid)
        if pod.terminal:
            self.going.discard(pod.uid)
        self._index_pending(pod)
        if was is not None and self._pending_of.get(pod.uid) != was and not (pod.node_name and not pod.terminal):
            self.pending_left[was[0]] += 1      # left its place other than by binding: room ahead of others may free
        self.track_readiness(pod)
        self._pod_job_changed(pod.uid)

    def remove_pod(self, uid: str) -> None:
        self.learned.pop(uid, None)
        self.presence.forget(uid)
        self._confirmed(uid)
        self.release_hold(uid)
        pod = self.pods.pop(uid, None)
        charge = self.admitted.pop(uid, None)
        if charge is not None:
            self._release(charge, planned=uid not in self.going)
        self.going.discard(uid)
        self.drop_reservation(uid)
        if pod is not None:
            if uid in self._pending_of:
                self.pending_left[self._pending_of[uid][0]] += 1
            self._unlink(pod)
            if self.budgets:
                self.budgets.pod_removed(pod)
            if self.uid_by_key.get(pod.key) == uid:
                del self.uid_by_key[pod.key]
            self.track_readiness(pod)
            if pod.owner is not None and pod.owner.uid in self.job_admissions:
                self._sync_job(pod.owner.uid)
        self.generation += 1

    def _unlink(self, pod: PodInfo) -> None:
        if pod.owner is not None and pod.owner.uid in self.owned:
            self.owned[pod.owner.uid].discard(pod.uid)
            if not self.owned[pod.owner.uid]:
                del self.owned[pod.owner.uid]
        key = group_of(pod)
        if key:
            members = self.groups.get(key)
            if members is not None:
                members.discard(pod.uid)
                if not members:
                    del self.groups[key]
        if pod.node_name and not pod.terminal:
            self.node_pods.get(pod.node_name, set()).discard(pod.uid)
            used = self.node_requested.get(pod.node_name)
            if used is not None:
                for r, v in pod.requests.items():
                    used[r] = used.get(r, 0) - v
                self.node_table.add_requested(pod.node_name, pod.requests, -1)
        self._unindex_pending(pod.uid)

    def _add_node_requests(self, pod: PodInfo) -> None:
        self.node_pods.setdefault(pod.node_name, set()).add(pod.uid)
        used = self.node_requested.setdefault(pod.node_name, {})
        for r, v in pod.requests.items():
            used[r] = used.get(r, 0) + v
        self.node_table.add_requested(pod.node_name, pod.requests)

    def quota_requests(self, pod: PodInfo) -> dict[str, int]:
        """The pod's requests that quota counts (excludeResourcePrefixes removed)."""
        if not self.config.exclude_resource_prefixes:
            return pod.requests
        return {r: v for r, v in pod.requests.items() if not self.config.excluded(r)}

    def _charge_running(self, pod: PodInfo, previous: Charge | None, observed: bool = False,
                        watched: bool = False) -> None:
        """Charge a bound pod to the ClusterQueue it names now, at the size the API shows now (a pod resized in
        place keeps its flavors), keeping its flavors when still valid; observed: a pod seen running that
        Quotient did not bind, which runs whatever the quota says (counted if over); watched: the watch's
        word, so a pod it shows moved to another ClusterQueue or grown is checked against the quota, and
        one above it is reported (_overran)."""
        _, cq = self.queue_of(pod)
        if cq is None or cq.name not in self.tree.queues:
            return
        requests = self.quota_requests(pod)
        if previous is not None and not previous.inferred and previous.cluster_queue == cq.name \
                and self._charge_valid(previous) and self._covers(previous, cq, requests):
            charge = previous
            usage = quota_usage(requests, previous.flavors)
            if usage != previous.usage:         # resized in place (pods/resize): same flavors, the new size
                charge = replace(previous, usage=usage)
            if charge.admitted_from == BOUND_HERE and pod.scheduled_at is not None:
                # The API's record of the bind Quotient made: what a restart reads, so the order it rebuilds
                # is this one even where Quotient's clock and the API server's fall in different seconds.
                charge.admitted_at, charge.admitted_from = pod.observed_admission()
        else:
            flavors = self.infer_flavors(pod, cq)
            at, source = pod.observed_admission()
            charge = Charge(cq.name, flavors, quota_usage(self.quota_requests(pod), flavors), inferred=True,
                            admitted_at=at, admitted_from=source)
        how = _change(previous, charge, observed) if watched else ""
        over = self.over_quota(charge) if observed or how else ""
        node = self.tree.queues[cq.name]
        frs = [fr for fr, v in charge.usage.items() if v > available(node, fr, bound=True)] if over else []
        if over and observed:
            self.skip(f"a running pod Quotient did not bind puts ClusterQueue {cq.name} above its quota")
            log.warning("pod %s runs above quota: %s", pod.key, over)
        self.admitted[pod.uid] = charge
        self._apply(charge, planned=pod.uid not in self.going)
        if over and how:
            self._overran(pod, charge, how, over, frs)

    def _covers(self, charge: Charge, cq: ClusterQueue, requests: dict[str, int]) -> bool:
        """The charge's flavors still cover every resource of the pod the ClusterQueue counts (a resize may
        add one the pod did not request before)."""
        covered = cq.covered_resources()
        return all(r in charge.flavors for r in requests if r in covered)

    def _overran(self, pod: PodInfo, charge: Charge, how: str, over: str, frs: list) -> None:
        """The API took a change of a bound pod that puts its ClusterQueue above quota: counted, kept (its queue
        admits nothing until back within: overrun), and reported."""
        node = self.tree.queues[charge.cluster_queue]
        reason = (f"ClusterQueue {charge.cluster_queue} uses {usage_note(node, frs or list(charge.usage))} since "
                  f"pod {pod.key} {how} ({over})")
        found = self.overruns[pod.uid] = Overrun(pod.key, charge.cluster_queue, reason, self.clock())
        self.overrun_counts[charge.cluster_queue] += 1
        log.warning("%s", found.refusal())
        if self.on_overrun is not None:
            self.on_overrun(found)

    def overrun(self, cq_name: str) -> Overrun | None:
        """The change that keeps the ClusterQueue above quota, if one still does: its pod still charged there
        and not fitting beside the others. Those that no longer do are forgotten here."""
        for uid, found in list(self.overruns.items()):
            if found.cluster_queue != cq_name:
                continue
            charge = self.admitted.get(uid)
            if charge is not None and charge.cluster_queue == cq_name:
                self._apply(charge, planned=False, sign=-1)         # the others, without it: does it fit?
                still = self.over_quota(charge)
                self._apply(charge, planned=False)
                if still:
                    return found
            del self.overruns[uid]
        return None

    def _charge_valid(self, charge: Charge) -> bool:
        node = self.tree.queues.get(charge.cluster_queue)
        return node is not None and all(fr in node.quotas for fr in charge.usage)

    def infer_flavors(self, pod: PodInfo, cq: ClusterQueue) -> dict[str, str]:
        """Flavors of a pod found running (core.flavors.running_flavors); a flavor that does not exist has no node."""
        def known_and_holds(node: str, flavor: str) -> bool:
            members = self.flavor_nodes.get(flavor, ())
            return members is None or node in members
        node = pod.node_name if pod.node_name in self.nodes else None
        return running_flavors(cq, self.quota_requests(pod), node, known_and_holds)

    def _apply(self, charge: Charge, planned: bool = True, running: bool = True, sign: int = 1) -> None:
        """Charge the planning usage (planned) and the running truth (running) of the live tree (sign -1:
        release them); the decisions' mirror is brought up to date when next read."""
        node = self.tree.queues.get(charge.cluster_queue)
        if node is None:
            return
        if planned:
            charge_usage(node, charge.usage, sign)
            self._unmirrored.add(node.name)
        if running:
            charge_usage(node, charge.usage, sign, bound=True)

    def _release(self, charge: Charge, planned: bool = True, running: bool = True) -> None:
        self._apply(charge, planned, running, -1)

    def over_quota(self, charge: Charge) -> str:
        """The quota invariant for one charge about to run: why it would take its ClusterQueue or a
        Cohort above what Kueue's rules allow, counting only pods really on a node (terminating
        victims included, reservations not), or "" when it fits."""
        node = self.tree.queues.get(charge.cluster_queue)
        if node is None:
            return ""
        for (flavor, resource), v in charge.usage.items():
            room = available(node, (flavor, resource), bound=True)
            if v > room:
                used = node.bound.get((flavor, resource), 0)
                return (f"ClusterQueue {charge.cluster_queue} flavor {flavor}: {resource} "
                        f"{format_quantity(v, resource)} > {format_quantity(room, resource)} free now "
                        f"({format_quantity(used, resource)} used by pods on nodes, terminating ones included)")
        return ""

    # ---- pending index ------------------------------------------------------
    def _index_pending(self, pod: PodInfo) -> None:
        """Queue a pending pod of a known ClusterQueue; one whose WorkloadPriorityClass is missing is not
        a workload yet (Kueue creates none), so it holds no place that could block the queue; nor does one of a
        stopped LocalQueue (Kueue's LocalQueue controller takes a stopped queue out of the queueing system)."""
        if pod.node_name or pod.terminal or pod.deleting or not pod.queue_name or pod.missing_priority_class:
            return
        lq, cq = self.queue_of(pod)
        if cq is None or lq.stop_policy != "None":
            return
        entry = (self.queue_key(pod), pod.uid)
        bisect.insort(self.pending.setdefault(cq.name, []), entry)
        shape = walk_shape(pod)
        self._pending_of[pod.uid] = (cq.name, entry, shape)
        self.pending_shapes.setdefault(cq.name, Counter())[shape] += 1
        self.presence.indexed(pod.uid)

    def _unindex_pending(self, uid: str) -> None:
        found = self._pending_of.pop(uid, None)
        if found is None:
            return
        self.presence.unindexed(uid)
        cq_name, entry, shape = found
        items = self.pending.get(cq_name, [])
        i = bisect.bisect_left(items, entry)
        if i < len(items) and items[i] == entry:
            items.pop(i)
        shapes = self.pending_shapes[cq_name]
        shapes[shape] -= 1
        if not shapes[shape]:
            del shapes[shape]

    def pending_pods(self, cq_name: str, before: tuple | None = None) -> Iterator[PodInfo]:
        """Pending pods of a ClusterQueue in queue order (only those ahead of `before`), reserved ones
        excluded, walking at most maxQueueScan entries so a long queue cannot slow a decision down."""
        items = self.pending.get(cq_name, ())
        end = bisect.bisect_left(items, (before,)) if before is not None else len(items)
        for _, uid in itertools.islice(items, min(end, self.config.max_queue_scan)):
            if uid not in self.reservations:
                yield self.pods[uid]

    # ---- reservations and bindings -------------------------------------------
    def hold(self, uid: str, node: str, requests: dict[str, int], charge: Charge | None,
             victims: dict[str, tuple[str, str]], evicted: set[str] | None = None) -> Hold:
        """Keep the quota and room a preemption frees for the preemptor, for preemption.holdTimeout."""
        timeout = self.config.preemption_hold_timeout
        held = self.holds[uid] = Hold(node, dict(requests), self.timer() + timeout, victims, set() if evicted is None else evicted)
        self._holds_version += 1
        self.evict_jobs_of(victims)
        for victim in victims:      # plans count their quota as the preemptor's now; it runs until they are gone
            running = self.admitted.get(victim)
            if running is not None and victim not in self.going:
                self.going.add(victim)
                self._release(running, running=False)
        if charge is not None:
            self.reserve(uid, charge, timeout)
        self.generation += 1
        return held

    def release_hold(self, uid: str) -> Hold | None:
        """End a hold (the preemptor bound, left, or waited too long); victims still running get
        their quota back."""
        held = self.holds.pop(uid, None)
        if held is not None:
            self._holds_version += 1
            still = self.victims() if held.victims else ()
            for victim in held.victims:
                if victim in self.going and victim not in still:
                    self.going.discard(victim)
                    charge = self.admitted.get(victim)
                    if charge is not None:
                        self._apply(charge, running=False)
            self.generation += 1
        return held

    def _leaving(self, held: Hold) -> bool:
        """Victims still terminate (the API shows their deletion): the hold waits for them rather than
        ending and letting the preemptor choose new victims while these are still going."""
        return any(self.pods[uid].deleting for uid in held.left(self.pods))

    def victims(self) -> frozenset[str]:
        """Pods chosen as victims by a hold still in force (worked out again only when the holds change: every
        decision that needs room asks, and hundreds of holds can stand in a busy cohort)."""
        if self._victims[0] != self._holds_version:
            chosen = frozenset(uid for held in self.holds.values() for uid in held.victims)
            self._victims = (self._holds_version, chosen)
        return self._victims[1]

    def expire_reservations(self) -> int:
        """Drop reservations whose bind never came, and holds past their time; returns how many."""
        now, dropped = self.timer(), 0
        self.expire_job_waits()
        for uid in [u for u, h in self.holds.items() if h.expires <= now and not self._leaving(h)]:
            self.release_hold(uid)
            self.skips["preemption hold expired"] += 1
        while self._expiry and self._expiry[0][0] <= now:
            expires, uid = heapq.heappop(self._expiry)
            r = self.reservations.get(uid)
            if r is not None and r.expires == expires:
                if uid in self.holds:        # its hold lives on (victims still terminating): so does its quota
                    r.expires = now + self.config.reservation_timeout
                    heapq.heappush(self._expiry, (r.expires, uid))
                    continue
                self.drop_reservation(uid)
                self.skips["reservation expired"] += 1
                dropped += 1
        return dropped

    def reserve(self, uid: str, charge: Charge, timeout: float | None = None) -> Reservation:
        """Hold quota for a pod that passed filter until it binds or the timeout passes."""
        self.drop_reservation(uid)
        r = Reservation(charge, self.timer() + (self.config.reservation_timeout if timeout is None else timeout),
                        self.decided(uid, charge.cluster_queue))
        self._hold(uid, r)
        self._tell(self.on_reserved, uid, charge)
        self._pod_job_changed(uid)
        self.generation += 1
        return r

    def _tell(self, listeners: list, uid: str, charge: Charge) -> None:
        """The listeners of a reservation or charge (metrics): one failing never undoes or stops the change."""
        pod = self.pods.get(uid)
        for listener in listeners if pod is not None else ():
            try:
                listener(pod, charge)
            except Exception:
                log.exception("a listener of %s's charge failed", pod.key)

    def decided(self, uid: str, cluster_queue: str) -> Decided | None:
        """What a decision for the pod is made on now (core.drift.Decided); None for a pod not known."""
        pod = self.pods.get(uid)
        return decided_on(pod, self.quota_requests(pod), cluster_queue) if pod is not None else None

    def _hold(self, uid: str, r: Reservation) -> None:
        self.reservations[uid] = r
        self._apply(r.charge, running=False)
        heapq.heappush(self._expiry, (r.expires, uid))

    def drop_reservation(self, uid: str) -> Reservation | None:
        r = self.reservations.pop(uid, None)
        if r is not None:
            self._release(r.charge, running=False)
            self._pod_job_changed(uid)
            self.generation += 1
        return r

    def commit_binding(self, uid: str, node: str, charge: Charge | None) -> str:
        """Record a binding Quotient made: the pod runs on node and its quota is charged. Every charge
        Quotient makes passes here, so here the quota invariant is enforced: a charge that would take
        a ClusterQueue or Cohort above its quota is refused (its reason returned, counted), and nothing
        changes."""
        if charge is not None:
            standing = self.overrun(charge.cluster_queue)
            over = standing.refusal() if standing is not None else self.over_quota(charge)
            if over:
                self.quota_refusals[charge.cluster_queue] += 1
                log.warning("binding refused by the quota invariant: %s", over)
                return over
        if charge is not None:       # the bind moment, to the second as the API's PodScheduled records it
            self._tell(self.on_admitted, uid, charge)     # before the charge: the listener sees who held it before
            charge.admitted_at, charge.admitted_from = float(math.floor(self.clock())), BOUND_HERE
            self.admitted[uid] = charge   # kept by upsert_pod's _charge_running
            self._apply(charge)
        self.drop_reservation(uid)   # after the charge: a Job's pod holds its quota throughout (_sync_job)
        self.release_hold(uid)
        self.assumed[uid] = self.timer()
        self.upsert_pod(replace(self.pods[uid], node_name=node), force=True)
        return ""

    def undo_binding(self, uid: str, node: str) -> bool:
        """Take back a binding to node whose write failed: the pod is pending again, its quota free,
        as the API last showed it. If the watch has spoken since (the pod bound after all, bound
        elsewhere, or deleted), its word stands and nothing is undone (False)."""
        if self.assumed.pop(uid, None) is None:
            return False
        latest = self.held_back.pop(uid, None)
        pod = self.pods.get(uid)
        if pod is None or pod.node_name != node:
            return False
        self.upsert_pod(latest or replace(pod, node_name=""), force=True)
        return True
