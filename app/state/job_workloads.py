"""batch/v1 Jobs admitted as one workload (core.job_workload), from admission to its end, and the Jobs their pods wait for.

A Job's workload keeps its quota while its pods come and go (the slots its pods do not fill are charged as
spare), ends when the Job leaves its queue, finishes, grows past its admission or loses every pod before one
bound, and is found again after a restart from the pods that hold quota.
"""
from __future__ import annotations

import logging
from collections import Counter
from dataclasses import dataclass
from typing import Callable

from ..config import Configuration
from ..core.flavors import Charge
from ..objects.job import JobInfo
from ..objects.pod import PodInfo
from .ledger import Ledger
from .store import Store
from .workloads import Workloads

log = logging.getLogger("quotient.state")


@dataclass(slots=True)
class JobAdmission:
    """A Job admitted as one workload (core.job_workload): how many pods, and one pod's charge. While it runs, the
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


class JobWorkloads:
    def __init__(self, config: Configuration, store: Store, ledger: Ledger, workloads: Workloads,
                 timer: Callable[[], float], cluster):
        self.config, self.store, self.ledger, self.workloads, self.timer = config, store, ledger, workloads, timer
        self.cluster = cluster                                 # ClusterState: jobs_listed, its generation
        self.job_admissions: dict[str, JobAdmission] = {}      # Job uid -> its admitted workload
        self.job_waits: dict[str, float] = {}                  # uid of a Job not listed -> when (timer) its first pod was seen
        self.jobs_missing: set[str] = set()                    # Job uids waited out or deleted: their pods are plain
        self.job_wait_counts: Counter = Counter()              # "waited", "expired": quotient_job_waits_*
        self._jobs_missing_sweep = 0.0

    # ---- Jobs not on the API: late, or missing ------------------------------------
    def wait_for_job(self, pod: PodInfo) -> None:
        """A pending pod of a batch/v1 Job the Job list (complete: jobs_listed) does not have. The Job may only be
        late, as the Job and Pod watches are not ordered: its pods wait for it config.job_wait_timeout from when
        its first pod was seen (core.admission.job_refusal), once per Job; a Job already found missing is not
        waited for again."""
        owner = pod.owner
        if owner is None or not owner.is_batch_job or not owner.uid or not self.cluster.jobs_listed \
                or pod.node_name or pod.terminal or owner.uid in self.store.jobs or owner.uid in self.job_waits \
                or owner.uid in self.jobs_missing:
            return
        self.job_waits[owner.uid] = self.timer()
        self.job_wait_counts["waited"] += 1

    def job_came(self, job: JobInfo) -> None:
        """A Job its pods waited for: late within the bound (its pods, still pending, become its workload), or
        after it (its pods were judged as plain pods; those running become its workload: upsert_job)."""
        since = self.job_waits.pop(job.uid, None)
        if job.uid in self.jobs_missing:
            self.jobs_missing.discard(job.uid)
            log.info("Job %s came after its pods had waited jobWaitTimeout (%gs) for it", job.key,
                     self.config.job_wait_timeout)
        elif since is not None:
            log.debug("Job %s came %.1fs after its first pod", job.key, self.timer() - since)

    def job_gone(self, uid: str) -> None:
        """The Job is deleted (--cascade=orphan) while pods of it live: they are not waiting for it."""
        if uid in self.store.owned:
            self.jobs_missing.add(uid)

    def expire_job_waits(self) -> int:
        """End the waits older than config.job_wait_timeout: such a Job is missing, not late, and its pods are
        judged by the pod rules from now on (core.admission.job_refusal reads the same bound, so a decision never
        depends on when this runs); counted once per Job. Job uids whose pods are all gone are forgotten."""
        now, bound, expired = self.timer(), self.config.job_wait_timeout, 0
        owned = self.store.owned
        for uid, since in list(self.job_waits.items()):     # oldest first (insertion order)
            if now - since < bound:
                break
            del self.job_waits[uid]
            self.job_wait_counts["expired"] += 1
            expired += 1
            if uid in owned:
                self.jobs_missing.add(uid)
                self.cluster.generation += 1
        if self.jobs_missing and now - self._jobs_missing_sweep >= 60:
            self._jobs_missing_sweep = now
            self.jobs_missing &= owned.keys()
        return expired

    # ---- Jobs admitted as one workload ------------------------------------------
    def admit_job(self, job_uid: str, size: int, charge: Charge, partial: bool = False) -> None:
        """The Job's workload admitted with size pods (fewer than its count under partial admission)."""
        self._drop_admission(job_uid)
        one = Charge(charge.cluster_queue, dict(charge.flavors), dict(charge.usage))
        self.job_admissions[job_uid] = JobAdmission(size, one, partial=partial)
        self.sync_job(job_uid)

    def end_admission(self, job_uid: str) -> None:
        """The workload's admission ends (it is preempted, timed out, drained, moved to another queue): its spare
        slots' quota is freed, its pods not yet bound lose what they hold (reservations, holds), and the pods its
        controller creates again are admitted as a new workload. The pods themselves are evicted elsewhere."""
        if self._drop_admission(job_uid):
            for uid in list(self.store.owned.get(job_uid, ())):
                if uid not in self.ledger.admitted:
                    self.workloads.release_hold(uid)
                    self.workloads.drop_reservation(uid)

    def end_admissions_of(self, uids) -> None:
        """Pods chosen for eviction (by a hold, kube-scheduler's preempt, a reconcile): a Job's pod taken
        ends its whole workload's admission, as Kueue evicts Workloads, not pods."""
        pods = self.store.pods
        for uid in uids:
            pod = pods.get(uid)
            if pod is not None and pod.job:
                self.end_admission(pod.owner.uid)

    def _drop_admission(self, job_uid: str) -> bool:
        rec = self.job_admissions.pop(job_uid, None)
        if rec is None:
            return False
        self._spare(rec, -rec.spare)
        self.cluster.generation += 1
        return True

    def sync_job(self, job_uid: str) -> None:
        """Spare slots = the admitted size (less the completions done) minus the pods holding quota (bound, or
        reserved). The workload ends when the Job leaves its queue, finishes or goes, when it grew past a whole
        admission (Kueue makes a new Workload for a Job that no longer matches its own), or when its pods'
        holds lapsed before any of them bound."""
        rec = self.job_admissions.get(job_uid)
        if rec is None:
            return
        uids = self.store.owned.get(job_uid, ())
        admitted, reservations = self.ledger.admitted, self.workloads.reservations
        rec.started = rec.started or any(u in admitted for u in uids)
        holding = sum(1 for u in uids if u in admitted or u in reservations)
        job = self.store.jobs.get(job_uid)
        if (not holding and not rec.started) or job is None or job.finished or not job.queue_name \
                or (job.count > rec.size and not rec.partial):
            self.end_admission(job_uid)
            return
        self._spare(rec, max(0, min(rec.size, job.count) - holding) - rec.spare)

    def _spare(self, rec: JobAdmission, n: int) -> None:
        """Charge (n > 0) or free (n < 0) n slots of the Job's planning usage, at once."""
        if n:
            self.ledger.apply(rec.spare_charge(abs(n)), running=False, sign=1 if n > 0 else -1)
            rec.spare += n

    def recharge(self) -> None:
        """The tree is new: the spare slots are charged again, and brought up to what the list showed."""
        for rec in self.job_admissions.values():
            spare, rec.spare = rec.spare, 0
            self._spare(rec, spare)
        for job_uid in list(self.job_admissions):
            self.sync_job(job_uid)

    def pod_changed(self, uid: str) -> None:
        """What the pod holds changed: its Job's workload, if admitted, is brought up to date."""
        pod = self.store.pods.get(uid)
        if pod is not None and pod.owner is not None and pod.owner.uid in self.job_admissions:
            self.sync_job(pod.owner.uid)

    def infer_job_admissions(self) -> None:
        """After a bulk load (a start, a relist): a Job whose pods run is an admitted workload of the pods that
        hold quota now (its size at admission is kept nowhere Quotient reads: a guess by its count could
        charge beyond the quota); not one being preempted or evicted."""
        for job_uid in list(self.store.jobs):
            self.infer_job_admission(job_uid)

    def infer_job_admission(self, job_uid: str) -> None:
        """One Job's workload, from its pods that hold quota (infer_job_admissions)."""
        job = self.store.jobs[job_uid]
        if job_uid in self.job_admissions or job.finished or not job.queue_name:
            return
        admitted, reservations = self.ledger.admitted, self.workloads.reservations
        pods = [self.store.pods[u] for u in self.store.owned.get(job_uid, ()) if u in self.store.pods]
        running = [p for p in pods if p.uid in admitted]
        if running and not any(p.uid in self.ledger.going or p.deleting for p in pods):
            size = sum(1 for p in pods if p.uid in admitted or p.uid in reservations)
            self.admit_job(job_uid, size, admitted[running[0].uid], partial=size < job.count)
