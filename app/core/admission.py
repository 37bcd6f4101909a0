"""Admission: may this workload (a pod, a pod group, a Job) take quota now, in which flavors, and if not, why.

The checks run in the order an admin would debug them: queue label, LocalQueue,
ClusterQueue (exists, active, not stopped, selects the namespace), flavor
assignment against the quota tree, then queue order (StrictFIFO; across the
cohort tree, pending pods with a lower borrowing level before a borrower, and
the quota blocked StrictFIFO heads keep).
Every refusal names the rule and the numbers, and says whether preemption
could ever help (kube-scheduler's FailedNodes) or not (FailedAndUnresolvable).
"""
from __future__ import annotations

from functools import partial
from typing import Callable, Iterator

from ..objects.kueue import ClusterQueue
from ..objects.offered_nodes import OfferedNodes
from ..objects.pod import PRIORITY_CLASS_LABEL, QUEUE_LABEL, PodInfo
from ..objects.coverage import TOPOLOGY_RULE
from ..objects.topology import pod_set_request
from ..objects.selectors import namespace_labels
from .dominant_share import dominant_resource_share
from .preemption.oracle import PreemptionOracle
from .gangs import waiting_members
from .readiness import refusal, requeue_key, workload_order
from .flavors import FIT, NOFIT, PREEMPT, Assignment, FitMemo, assign_flavors
from .overlay import Overlay
from .resource_node import FR, QuotaNode
from .shortfall import at_nominal, lacks, shortfall
from .stop_policy import local_queue_stopped
from ..objects.quantity import amounts
from .borrowing import BorrowingLevel, borrowing_level, resources_to_reserve
from .rules import (ADMITTED, BORROWING_LEVEL_ORDER, CLUSTER_QUEUE_INACTIVE, CLUSTER_QUEUE_NOT_FOUND,
                    CLUSTER_QUEUE_OVER_QUOTA, CLUSTER_QUEUE_STOPPED, FAIR_SHARING_ORDER, LOCAL_QUEUE_NOT_FOUND,
                    LOCAL_QUEUE_STOPPED, NAMESPACE_NOT_SELECTED, NOMINAL_QUOTA_FIRST, INVALID_JOB, JOB_NOT_SEEN,
                    NO_FLAVOR_NODES, NO_QUEUE_NAME, QUOTA_EXCEEDED, STRICT_FIFO, STRICT_FIFO_RESERVATION,
                    WORKLOAD_PRIORITY_CLASS_NOT_FOUND)
from .view import AdmissionView, JobsView
from .verdict import QUEUE_HEAD, Verdict
from .workload import POD, Workload, group_of


def _refuse(rule: str, reason: str, cq: str = "", resolvable: bool = False,
            assignment: Assignment | None = None, holds_from: tuple | None = None, short: dict | None = None) -> Verdict:
    return Verdict(rule, False, reason, resolvable, True, cq, assignment, holds_from, short)


def preemption_could_help(state: AdmissionView, workload: Workload, cq: ClusterQueue) -> bool:
    """Whether any preemption policy of this ClusterQueue could free quota for the workload."""
    if workload.template.preemption_policy == "Never":
        return False
    p = cq.preemption
    if p.within_cluster_queue != "Never":
        return True
    return bool(cq.cohort) and p.reclaim_within_cohort != "Never"


def virtual_charges(state: AdmissionView, charges: list[tuple[str, dict[FR, int], str]]) -> Overlay:
    """Charge (ClusterQueue, usage, pod) to the decisions' tree for the length of one decision (with ...:),
    then take it back."""
    overlay = Overlay(state)
    for i, (cq_name, usage, _) in enumerate(charges):
        overlay.charge(i, cq_name, usage)
    return overlay


def assign(state: AdmissionView, workload: Workload, cq: ClusterQueue, offered: OfferedNodes | None = None) -> Assignment:
    """The workload's flavors (its template member's tolerations and node selector); a flavor that needs
    preemption is asked of the preemption oracle (Kueue's shouldTryNextFlavor passes over one where preemption
    would find no candidates)."""
    oracle = PreemptionOracle(state, workload, cq)
    template = workload.template
    assignment = assign_flavors(state.ledger.quota_requests(workload), cq, state.ledger.quota_node(cq.name),
                                state.flavors, template.tolerations, template.node_selector,
                                partial(offered.has_nodes, state) if offered is not None else None, oracle,
                                workload.topology_asked)
    assignment.searched = oracle.searched      # preemption.plans reuses them in the same decision
    return assignment


def resolve(state: AdmissionView, workload: Workload) -> tuple[ClusterQueue | None, Verdict | None]:
    """LocalQueue -> ClusterQueue, and every check that needs no quota arithmetic: the workload's Job is known
    and valid, the ClusterQueue exists and is active, its stopPolicy is None, and its namespaceSelector selects
    the workload's namespace."""
    pod = workload.template
    refusal = job_refusal(state, pod)
    if refusal is not None:
        return None, refusal
    if not workload.queue_name:
        if state.config.manage_jobs_without_queue_name:
            return None, _refuse(NO_QUEUE_NAME, f"pod has no {QUEUE_LABEL} label and "
                                 "manageJobsWithoutQueueName is true; add the label naming a LocalQueue")
        return None, Verdict(NO_QUEUE_NAME, admit=True, managed=False,
                             reason=f"no {QUEUE_LABEL} label: not managed by Quotient")
    if pod.missing_priority_class:
        return None, _refuse(WORKLOAD_PRIORITY_CLASS_NOT_FOUND, f"WorkloadPriorityClass {pod.missing_priority_class} "
                             f"does not exist (pod label {PRIORITY_CLASS_LABEL}); like Kueue, Quotient queues no "
                             "workload until it does: create it, or fix the label")
    lq_key = f"{workload.namespace}/{workload.queue_name}"
    lq = state.local_queues.get(lq_key)
    if lq is None:
        return None, _refuse(LOCAL_QUEUE_NOT_FOUND, f"LocalQueue {lq_key} does not exist "
                             f"(pod label {QUEUE_LABEL}={workload.queue_name})")
    cq = state.cluster_queues.get(lq.cluster_queue)
    if lq.stop_policy != "None":
        return cq, _refuse(LOCAL_QUEUE_STOPPED, local_queue_stopped(lq), lq.cluster_queue)
    if cq is None:
        return None, _refuse(CLUSTER_QUEUE_NOT_FOUND, f"LocalQueue {lq_key} points to ClusterQueue "
                             f"{lq.cluster_queue}, which does not exist")
    if cq.name in state.ledger.tree.inactive:
        return cq, _refuse(CLUSTER_QUEUE_INACTIVE, state.ledger.tree.inactive[cq.name], cq.name)
    if cq.stop_policy != "None":
        return cq, _refuse(CLUSTER_QUEUE_STOPPED, f"ClusterQueue {cq.name} is stopped "
                           f"(stopPolicy {cq.stop_policy}); admission resumes when it is set to None", cq.name)
    if cq.namespace_selector is None:
        return cq, _refuse(NAMESPACE_NOT_SELECTED, f"ClusterQueue {cq.name} has no namespaceSelector, which "
                           "selects no namespace (as in Kueue); set namespaceSelector: {} for all", cq.name)
    if not cq.namespace_selector.matches(namespace_labels(state.store.namespaces, workload.namespace)):
        return cq, _refuse(NAMESPACE_NOT_SELECTED, f"namespace {workload.namespace} is not selected by "
                           f"ClusterQueue {cq.name} (namespaceSelector {cq.namespace_selector.describe()})",
                           cq.name)
    if workload.key.kind == POD and pod.topology_asked:
        problem = pod_set_request(pod.annotations, 1)[1]
        if problem:
            return cq, _refuse(TOPOLOGY_RULE, f"{workload.key.described}: pod annotation {pod.topology_asked}: "
                               f"{problem}; Kueue's pod webhook refuses it: fix it", cq.name)
    if workload.refused:        # a Kueue field Quotient refuses (objects.coverage): TAS, DRA claims, ...
        return cq, _refuse(workload.refused[0], workload.refused[1], cq.name)
    return cq, None


def job_refusal(state: JobsView, pod: PodInfo) -> Verdict | None:
    """A pod of a batch/v1 Job Quotient has not seen, while Jobs are a source and their list is complete: the Job
    may only be late (the Job and Pod watches are not ordered), so the pod waits for it, config.job_wait_timeout
    from when the Job's first pod was seen (state job_waits; not from each filter), rather than pass unmanaged.
    After that the Job is missing, not late (deleted with --cascade=orphan, or an owner reference another tool
    wrote), and the pod is judged by the pod rules: a plain pod of the LocalQueue its own label names (no label:
    not managed). Kueue refuses no such pod: its pod webhook (pkg/controller/jobs/pod/pod_webhook.go, Default;
    IsPodOwnerManagedByKueue) leaves a pod whose controller's kind has an enabled integration to that
    integration, by the owner reference alone, and the Job integration has no Job to make a Workload of, so the
    pod is neither gated nor refused and runs in no quota. Quotient charges it to its ClusterQueue instead: a pod
    the API shows running is never quota that nobody counts. A Job Kueue's webhook would refuse
    (objects.job.decode_job's problem) admits none of its pods."""
    owner = pod.owner
    if owner is None or not owner.is_batch_job or not owner.uid:
        return None
    job = state.jobs.get(owner.uid)
    if job is None:
        since = state.job_waits.get(owner.uid) if state.jobs_listed else None
        bound = state.config.job_wait_timeout
        left = bound - (state.timer() - since) if since is not None else 0.0
        if left <= 0:
            return None
        return _refuse(JOB_NOT_SEEN, f"Job {pod.namespace}/{owner.name}, the pod's owner, is not known to Quotient "
                       "yet: the API's Job list does not have it, and its watch event may be late; the pod waits "
                       f"for it up to {bound:g}s from when the Job's first pod was seen ({left:.1f}s left), then is "
                       "judged as a plain pod of its LocalQueue")
    if job.problem and pod.job:
        return _refuse(INVALID_JOB, f"Job {job.key}: {job.problem}; fix the Job")
    if job.refused and pod.job:
        return _refuse(job.refused[0], f"Job {job.key}: {job.refused[1]}")
    return None


def _ahead(state: AdmissionView, workload: Workload | None, cq: ClusterQueue,
           present: bool = False, skip: set | frozenset = frozenset()) -> Iterator[Workload]:
    """Pending workloads (a lone pod, or a pod group once) ahead of workload in the ClusterQueue's order
    (all of them when workload is None; with present, only those kube-scheduler brings now: PresenceView.away,
    less those of a shape the caller has put in skip).
    A group that cannot be admitted (members missing, or naming different queues) holds nothing and is
    passed over."""
    own = group_of(workload.template) if workload is not None else None
    uid = workload.uid if workload is not None else None
    cfg = state.config.wait_for_pods_ready
    before = workload_order(state, workload) if workload is not None else None
    walk = state.queues.present_pending(cq.name, before, skip) if present else \
        state.queues.pending_pods(cq.name, before=before)

    def others() -> Iterator[PodInfo]:
        for other in walk:
            if cfg is not None and state.requeues and refusal(state.requeues.get(requeue_key(other)), cfg,
                                                              state.clock(), "")[0]:
                continue        # backing off or deactivated: it is not admitted first, so it holds nothing
            if uid is not None and (other.uid == uid or (own and group_of(other) == own)):
                continue        # the workload itself, or its own group
            yield other
    yield from _workloads(state, others())      # held members are already counted in the quota


def pending_workloads(state: AdmissionView, cq: ClusterQueue) -> Iterator[Workload]:
    """The ClusterQueue's pending workloads in its order (_ahead: a pod group once, as one workload; one backing off
    from a PodsReadyTimeout passed over)."""
    return _ahead(state, None, cq)


def queue_ahead(state: AdmissionView, workload: Workload, cq: ClusterQueue,
                charges: list) -> tuple[str, tuple[tuple, dict | None] | None]:
    """Pods ahead in the ClusterQueue's order take their quota first, as Kueue admits heads in order: under
    BestEffortFIFO those kube-scheduler brings now, not one backing off from a refusal (PresenceView.away);
    under StrictFIFO every one, as the strategy promises.

    Each one that fits is charged virtually. One that does not fit blocks every pod
    behind it under StrictFIFO and is passed over under BestEffortFIFO. A pod its
    ClusterQueue would refuse anyway (namespace not selected) never blocks.

    A pod of a shape (PodInfo.shape) that did not fit is not assigned again further down: the charges only
    grow along the walk, so no later pod of that shape fits either, and a queue of thousands costs one
    assignment per shape past the pods that fit.

    Returns why StrictFIFO blocks the workload ("" when nothing does), and the place and shortfall (core.shortfall) of
    the first pod of the workload's own shape when it did not fit: that pod is refused as this workload will be,
    on the same walk, so the refusal stands from its place on (state.blocked answers the pods of the shape from
    there), for as long as less than that pod lacked frees (it lacks no more than this workload)."""
    passed_over: set = set()
    reached: set = set()                 # shapes of which a pod fitted
    memo = FitMemo(cq, state.ledger.quota_node)     # shapes fitted, given again while they still fit so
    own, holds = workload.shape, None
    strict = cq.queueing_strategy == "StrictFIFO"
    with virtual_charges(state, charges) as overlay:
        for other in _ahead(state, workload, cq, present=not strict, skip=passed_over):   # (one backing off
            shape = other.shape                                                        # keeps no quota meanwhile)
            if shape in passed_over:
                continue
            again = memo.again(shape)
            if again is not None:
                _charge_one_more(overlay, charges, (cq.name, again.usage, other.key_text))
                continue
            if resolve(state, other)[1] is not None:
                passed_over.add(shape)
                continue
            a = assign(state, other, cq)
            if a.mode == FIT:
                _charge_one_more(overlay, charges, (cq.name, a.usage, other.key_text))
                reached.add(shape)
                memo.keep(shape, a)
            elif strict:
                why = a.reasons[-1] if a.reasons else "it does not fit"
                return (f"StrictFIFO: {other.key_text} is ahead in ClusterQueue {cq.name} and does not fit "
                        f"({why}); pods behind it wait"), None
            else:
                passed_over.add(shape)
                if shape == own and shape not in reached:
                    holds = (state.queues.queue_key(other.template), shortfall(state, other, cq))
    return "", holds


def _charge_one_more(overlay: Overlay, charges: list, one: tuple[str, dict[FR, int], str]) -> None:
    """Add a pod's charge to the decision's list and, at once, to the overlay already holding the others: each
    pod after it is assigned against them all, with one charge per pod instead of the whole list again (a
    decision deep in a long queue, and a /debug queue view of 100 of them, stay linear)."""
    overlay.charge(len(charges), one[0], one[1])
    charges.append(one)


def _cohort_queues(state: AdmissionView, cq: ClusterQueue) -> Iterator[tuple[ClusterQueue, QuotaNode]]:
    """The other ClusterQueues of cq's cohort tree that admit anything, with their quota nodes."""
    stack = [state.ledger.quota_node(cq.name).root()]
    while stack:
        current = stack.pop()
        stack.extend(current.children)
        if current.is_cohort or current.name == cq.name:
            continue
        other_cq = state.cluster_queues.get(current.name)
        if other_cq is None or other_cq.stop_policy != "None" or current.name in state.ledger.tree.inactive:
            continue
        yield other_cq, current


def served_first(state: AdmissionView, cq: ClusterQueue, usage: dict, charges: list,
                 mine: BorrowingLevel | None = None,
                 enough: Callable[[], bool] | None = None) -> tuple[list[tuple[str, BorrowingLevel]], bool]:
    """Pending pods of other ClusterQueues in the cohort tree that Kueue admits before this borrowing pod.

    Kueue orders by borrowing level before priority and age: those within their own nominal quota
    and, in hierarchical cohorts, those that borrow only from a nearer Cohort than this pod (mine, its
    level) come first. With fair sharing, those within nominal quota and those whose ClusterQueue's
    share would stay below this one's ("准入过程中,Kueue 优先从份额值最低的 ClusterQueue 中准入").
    A pod group counts once, as one workload (_workloads).
    They are charged virtually; returns (each with its borrowing level, whether fair sharing put any first). With
    enough, the walk stops once it says those found are enough (the pod no longer fits after them), when only pods
    within their own nominal quota can come first (flat order, no fair sharing: the rule named cannot change)."""
    node = state.ledger.quota_node(cq.name)
    fair = state.config.fair_sharing
    share = dominant_resource_share(node, cq.fair_weight, usage)[0] if fair else 0
    height = mine.height if mine is not None else 1
    holders, by_share = [], False
    nominal_only = not fair and height == 1      # only pods within their own nominal quota can come first
    with virtual_charges(state, charges) as overlay:
        for other_cq, current in _cohort_queues(state, cq):
            if nominal_only and at_nominal(current):
                continue                     # every pod of it would borrow: none comes first (one asking nothing
                                             # would charge nothing, so it changes no verdict)
            passed_over: set = set()         # shapes that cannot come first: none behind them can (queue_ahead)
            walk = state.queues.present_pending(current.name, skip=passed_over)     # one backing off keeps nothing
            for other in _workloads(state, walk):
                shape = other.shape
                if shape in passed_over:
                    continue
                if resolve(state, other)[1] is not None:
                    passed_over.add(shape)
                    continue   # other_cq would refuse it (e.g. namespace not selected): it cannot come first
                a = assign(state, other, other_cq)
                if a.mode != FIT:
                    passed_over.add(shape)
                    continue
                level = borrowing_level(current, a.usage)
                lower = fair and a.borrowing and \
                    dominant_resource_share(current, other_cq.fair_weight, a.usage)[0] < share
                if (not a.borrowing if fair else level.height < height) or lower:
                    _charge_one_more(overlay, charges, (other_cq.name, a.usage, other.key_text))
                    holders.append((other.key_text, level))
                    by_share = by_share or lower
                    if nominal_only and enough is not None and enough():
                        return holders, by_share
                else:
                    passed_over.add(shape)   # it borrows as far, or further, with more charged: so do the rest
    return holders, by_share


def _workloads(state: AdmissionView, pods: Iterator[PodInfo]) -> Iterator[Workload]:
    """Pending pods as Kueue's workloads: a lone pod as its own (Workload.of_pod), a pod group once, as one workload
    of its members still to place (Workload.of_group), where its first member comes; a group that cannot be admitted
    is passed over. A group that must borrow as a whole is no workload "within its own nominal quota" because each of its members
    alone would be (Kueue's TestScheduleForTASCohorts, "two workloads considered; there is enough space only for
    the first")."""
    seen: set = set()
    for pod in pods:
        key = group_of(pod)
        if not key:
            yield Workload.of_pod(pod)
        elif key not in seen:
            seen.add(key)
            waiting = waiting_members(state, key, pod)
            if waiting:
                yield Workload.of_group(key, waiting)


def reserved_for_heads(state: AdmissionView, cq: ClusterQueue, charges: list) -> list[tuple[str, str, dict]]:
    """Quota that blocked StrictFIFO heads of the other ClusterQueues in the cohort tree keep.

    A head that needs preemption, in a ClusterQueue that cannot always reclaim (reclaimWithinCohort
    not Any), keeps what it will need (Kueue reserveCapacityForUnreclaimablePreempt), so that a
    borrower does not take the room now only to be evicted once the head's own quota frees. A
    ClusterQueue that can always reclaim keeps nothing: it takes its quota back when it needs it.
    Charged virtually; returns (ClusterQueue, head, quota kept) for each."""
    kept = []
    for other_cq, current in _cohort_queues(state, cq):
        if other_cq.queueing_strategy != "StrictFIFO" or other_cq.preemption.reclaim_within_cohort == "Any":
            continue
        head = next((p for p in _ahead(state, None, other_cq) if resolve(state, p)[1] is None), None)
        if head is None:
            continue
        with virtual_charges(state, charges):
            a = assign(state, head, other_cq)
            keep = resources_to_reserve(current, a.usage, a.borrowing) if a.mode == PREEMPT else {}
        if keep:
            charges.append((other_cq.name, keep, head.key_text))
            kept.append((other_cq.name, head.key_text, keep))
    return kept


def _ahead_note(charges: list) -> str:
    names = [key for _, _, key in charges]
    return f", counting {len(names)} pending pod(s) ahead of it in queue order ({_shown(names, 3)})" if names else ""


def _shown(names: list[str], limit: int = 5) -> str:
    return ", ".join(names[:limit]) + (f" and {len(names) - limit} more" if len(names) > limit else "")


def _first_in_cohort(state: AdmissionView, workload: Workload, cq: ClusterQueue, a: Assignment, level: BorrowingLevel,
                     charges: list, offered: OfferedNodes | None) -> Verdict | None:
    """A borrowing pod goes after what its cohort admits first (served_first), and leaves alone the
    quota blocked StrictFIFO heads keep (reserved_for_heads); the refusal names them, or None."""
    def fits_after() -> Assignment | None:
        with virtual_charges(state, charges):
            again = assign(state, workload, cq, offered)
        return None if again.mode == FIT else again

    enough = partial(lacks, state, workload, cq)          # the refusal is sure: the walk need go no further
    holders, by_share = served_first(state, cq, a.usage, charges, level, enough)
    again = fits_after() if holders else None
    if again is not None:
        names = [key for key, _ in holders]
        if by_share:
            return _refuse(FAIR_SHARING_ORDER, f"ClusterQueue {cq.name} would borrow, but pending pods of "
                           f"ClusterQueues with a lower share come first in cohort {cq.cohort}: {_shown(names)}",
                           cq.name, False, again)
        if any(other.height for _, other in holders):
            shown = _shown([f"{key} (borrows only from {other.where()})" if other.height else
                            f"{key} (within its own nominal quota)" for key, other in holders], 3)
            return _refuse(BORROWING_LEVEL_ORDER, f"ClusterQueue {cq.name} would borrow from {level.where()} "
                           f"(borrowing level {level.height}), but pending pods that borrow from nearer in the "
                           f"cohort tree go first, whatever their priority and age: {shown}", cq.name, False, again)
        return _refuse(NOMINAL_QUOTA_FIRST, f"ClusterQueue {cq.name} would borrow, but pending pods "
                       f"within their own nominal quota come first in cohort {cq.cohort}: {_shown(names)}",
                       cq.name, False, again)
    kept = reserved_for_heads(state, cq, charges)
    again = fits_after() if kept else None
    if again is not None:
        shown = "; ".join(f"StrictFIFO ClusterQueue {q} keeps {amounts(keep)} for its head {head}, which needs "
                          f"preemption and cannot be sure to reclaim (reclaimWithinCohort "
                          f"{state.cluster_queues[q].preemption.reclaim_within_cohort}, not Any)"
                          for q, head, keep in kept[:3])
        return _refuse(STRICT_FIFO_RESERVATION, f"ClusterQueue {cq.name} would borrow, but the cohort's free quota "
                       f"is kept: {shown}; a borrower admitted now would be evicted once the head's quota frees",
                       cq.name, False, again)
    return None


def decide(state: AdmissionView, workload: Workload, offered: OfferedNodes | None = None) -> Verdict:
    """Decide whether the workload may be admitted now; offered: the nodes kube-scheduler offers (None: any node)."""
    cq, refusal = resolve(state, workload)
    if refusal is not None:
        return refusal
    overrun = state.ledger.overrun(cq.name)
    if overrun is not None:      # a bound pod's change took the queue above quota (core.drift)
        return _refuse(CLUSTER_QUEUE_OVER_QUOTA, overrun.refusal(), cq.name)
    charges: list = []
    blocked, holds = queue_ahead(state, workload, cq, charges)
    if blocked:
        return _refuse(STRICT_FIFO, blocked, cq.name)
    with virtual_charges(state, charges):
        a = assign(state, workload, cq, offered)
        level = borrowing_level(state.ledger.quota_node(cq.name), a.usage) if a.borrowing else BorrowingLevel()
        if holds is None:           # (a pod of its shape ahead that did not fit: this one does not either)
            holds = (None, shortfall(state, workload, cq) if a.mode != FIT else None)
    holds_from, short = holds
    if not charges:
        holds_from = QUEUE_HEAD     # nothing ahead took quota: every pod of its shape is refused alike
    if a.mode == NOFIT:
        return _refuse(NO_FLAVOR_NODES if a.no_nodes else QUOTA_EXCEEDED,
                       "; ".join(a.reasons) or f"no flavor of ClusterQueue {cq.name} fits",
                       cq.name, not (a.unresolvable or a.no_nodes) and preemption_could_help(state, workload, cq), a,
                       holds_from, short)
    if a.mode == PREEMPT:
        ahead = _ahead_note(charges)
        return _refuse(QUOTA_EXCEEDED, "; ".join(a.reasons) + ahead, cq.name,
                       preemption_could_help(state, workload, cq), a, holds_from, short)
    if a.borrowing and cq.cohort:
        refusal = _first_in_cohort(state, workload, cq, a, level, charges, offered)
        if refusal is not None:
            return refusal
    return Verdict(ADMITTED, True, "", False, True, cq.name, a)


def may_reclaim(verdict: Verdict) -> bool:
    """Quota refused the pod, and a flavor where preemption finds candidates was assigned."""
    return (verdict.rule == QUOTA_EXCEEDED and verdict.resolvable and verdict.assignment is not None
            and verdict.assignment.mode == PREEMPT)
