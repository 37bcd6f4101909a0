"""Pods Quotient refused: how each refusal is answered so kube-scheduler tries the pod again in time.

What kube-scheduler v1.36 does with a refused pod (pkg/scheduler/schedule_one.go handleSchedulingFailure,
pkg/scheduler/backend/queue/scheduling_queue.go determineSchedulingHintForInFlightPod):

- an extender's FailedNodes make a FitError whose rejecting plugins are the in-tree ones that rejected a
  node (a full node: NodeResourcesFit; a tainted control plane: TaintToleration). With none the pod is
  retried after its backoff; with some it is parked until an event one of their queueing hints accepts,
  or for 5 minutes. Quota freed, a backoff over, a victim Quotient has not yet seen leave: none of them
  is such an event, and an update of the pod itself (UpdatePodOther) is accepted by no default plugin.
- an extender's "Error" is not a FitError: the attempt has no rejecting plugin, so the pod always goes to
  the backoff queue and is tried again after 1 s, doubling to 10 s (wire/README.md, section 6).
- either way, a pod refused with no in-tree rejector has neither unschedulable nor pending plugins, so it
  waits in the error backoff queue (backoff_queue.go, add), which SchedulerPopFromBackoffQ never pops early:
  it is tried again once its backoff is over, at most every 10 s, and never sooner.

So a refusal that clears by itself is answered as a retry (the Error field): a backoff or preemption delay
ending within RETRY_HORIZON, victims leaving, room held for a preemptor, a pod group assembling, a Job's pod
whose Job the watch has not delivered yet (for jobWaitTimeout at most: then the Job is missing, not late, and
the pod is judged as a plain pod), a pod that would preempt and whose own watch event has not come yet, and
quota in use or queue order (QueueHead, QuotaInUse): the pod fits its ClusterQueue once quota frees, which
pods finishing do all the time, and that is no event kube-scheduler's hints take: parked by a rejector (a
tainted control-plane node is enough), it would wait up to 5 minutes. As a retry it costs one filter every
10 s, answered from what blocks its queue (state.blocked) without walking it, and is tried within 10 s of its
refusal clearing (issue 32).

Every other refusal parks the pod (FailedAndUnresolvableNodes, or FailedNodes where kube-scheduler's
preemption may help: some node failed kube-scheduler's own filters, so its dry run may find victims there): a
pod that never fits its ClusterQueue, a missing queue, a stopped ClusterQueue, a deactivated workload.
"""
from __future__ import annotations

from collections import Counter
from dataclasses import dataclass

from .core import preemption, readiness
from .core.decisions import QUOTA_RULES
from .core.rules import (BLOCK_ADMISSION, GROUP_INCOMPLETE, GROUP_PREEMPTING, GROUP_RESERVED, JOB_NOT_SEEN,
                         PODS_READY_BACKOFF, PODS_READY_GATE, POD_NOT_SEEN, PREEMPTING, PREEMPTION_DELAY, QUEUE_HEAD,
                         QUOTA_IN_USE, ROOM_HELD, SEEN_AT_RETRY, SOURCE_STALE, VICTIMS_LEAVING, VICTIMS_STILL_RUNNING,
                         WAITING_FOR_VICTIMS)
from .core.workload import group_of

RETRY_NOTE = " (Quotient: kube-scheduler tries it again after its backoff, {cause})"
RETRY_HORIZON = 300.0      # kube-scheduler's podMaxInUnschedulablePodsDuration: parked longer, it flushes anyway
# Upper bounds (seconds) of quotient_refusal_cleared_to_retry_seconds' buckets: kube-scheduler's backoff (1 to 10 s)
# for a retry, its 5-minute flush for a parked pod no event moved.
WAITED_BUCKETS = (0.5, 1.0, 2.0, 5.0, 10.0, 20.0, 30.0, 60.0, 120.0, 300.0, 600.0)
LEAVING_RULES = frozenset({WAITING_FOR_VICTIMS, PREEMPTING, GROUP_PREEMPTING, VICTIMS_STILL_RUNNING})
HELD_RULES = frozenset({ROOM_HELD, GROUP_RESERVED})


@dataclass
class Refusal:
    """Its times are wall-clock (state.clock): shown in /debug/pods as times; no decision measures them."""
    rule: str
    reason: str
    at: float
    retry: str = ""                          # why it is answered as a retry; "" parks the pod
    holds: frozenset[str] = frozenset()      # the holds in force, when the room they keep refused the pod
    cleared_at: float | None = None
    cause: str = ""                          # why it cleared
    retried_at: float | None = None          # kube-scheduler's first try after it cleared


class Refusals(dict):
    """pod uid -> its last refusal by filter, until it passes, binds or is gone; and the counts
    /metrics exports: retries answered and refusals cleared by cause, how long cleared ones waited."""

    def __init__(self):
        super().__init__()
        self.retries: Counter = Counter()
        self.cleared: Counter = Counter()
        self.waited = [0, 0.0]              # kube-scheduler's tries after a clearing: count, seconds in all
        self.waited_in = [0] * len(WAITED_BUCKETS)   # of them, how many waited at most each WAITED_BUCKETS bound

    def book(self, uid: str, rule: str, reason: str, now: float, retry: str = "",
                holds: frozenset[str] = frozenset()) -> str:
        """Book a refusal; returns the words to answer it with. The same refusal asked again keeps its time, and
        for quota and queue order (the refusals of a waiting backlog) its first words: kube-scheduler writes the
        answer into the pod's PodScheduled condition and an Event whenever the words change, so words that
        followed every number of the moment (quota in use, pods ahead) cost a status write and an Event per
        retry of every waiting pod (issue 32). Journal entries and /debug/pods' "now" carry the numbers of each
        decision."""
        old = self.get(uid)
        if old is not None and old.rule == rule and old.cleared_at is None:
            old.retry = retry
            if rule in QUOTA_RULES:
                return old.reason
            old.reason = reason
            return reason
        self[uid] = Refusal(rule, reason, now, retry, holds)
        return reason

    def asked(self, uid: str, now: float) -> Refusal | None:
        """kube-scheduler asks about the pod again: the first time since its refusal cleared is noted."""
        r = self.get(uid)
        if r is not None and r.cleared_at is not None and r.retried_at is None:
            r.retried_at = now
            self.waited[0] += 1
            self.waited[1] += now - r.cleared_at
            for i, bound in enumerate(WAITED_BUCKETS):
                if now - r.cleared_at <= bound:
                    self.waited_in[i] += 1
            return r
        return None

    def holds(self, uid: str) -> bool:
        """The pod was refused and its refusal has not cleared: it waits for a change in the cluster (Kueue's
        inadmissible, for the pending-workload metrics)."""
        r = self.get(uid)
        return r is not None and r.cleared_at is None

    def passed(self, uid: str, now: float) -> None:
        """The pod passed filter: its refusal, if any, is kept for /debug/pods until it binds or is gone, as
        cleared (at this retry, when the clearing loop had not seen it yet)."""
        r = self.get(uid)
        if r is not None and r.cleared_at is None:
            r.cleared_at = r.retried_at = now
            r.cause = SEEN_AT_RETRY

    def view(self, uid: str, shown) -> dict | None:
        """For /debug/pods: the refusal, how it was answered, when it cleared (and why), when it was tried again."""
        r = self.get(uid)
        if r is None:
            return None
        return {"rule": r.rule, "reason": r.reason, "at": shown(r.at),
                "answer": f"retry ({r.retry})" if r.retry else "park",
                "clearedAt": shown(r.cleared_at), "clearedBecause": r.cause or None,
                "retriedAt": shown(r.retried_at)}


def retry_message(reason: str, cause: str) -> str:
    """The Error text of a refusal answered as a retry: the reason, and that the pod is not stuck."""
    return reason + RETRY_NOTE.format(cause=cause)


def retry_cause(state, pod, rule: str, cluster_queue: str | None, resolvable: bool, assignment=None,
                every_node: bool = False) -> str:
    """Why a refusal of pod by rule clears by itself soon, so kube-scheduler should try the pod again after its
    backoff rather than park it: the label of the retry, or "" to park it. assignment: the flavors filter
    found (a pod that never fits is parked); every_node: every node passed kube-scheduler's own filters, so its
    preemption can do nothing for the pod (its dry run finds the pod fits without evicting anyone). The head of
    its queue is a retry whatever its ClusterQueue's policies: Quotient's own reclaim (filter, and the reconcile
    for heads) already looked for victims, and parked behind a rejector whose hint takes no pod completion (a
    tainted control-plane node) it would start minutes after quota frees (Kueue's "Should schedule jobs as they
    fit in their ClusterQueue", issue 34)."""
    now = state.clock()
    if rule == SOURCE_STALE:
        return rule                     # the relist comes within seconds
    if rule == PODS_READY_GATE:
        q = state.requeues.get(readiness.requeue_key(pod))
        if q is not None and q.deactivated:
            return ""                                   # for good, until an admin reactivates it
        if q is not None and q.at > now:
            return PODS_READY_BACKOFF if q.at - now <= RETRY_HORIZON else ""
        return BLOCK_ADMISSION                          # clears as admitted pods turn Ready
    if rule in LEAVING_RULES:
        return VICTIMS_LEAVING
    if rule in HELD_RULES:
        return ROOM_HELD
    if rule in (GROUP_INCOMPLETE, JOB_NOT_SEEN, POD_NOT_SEEN):
        return rule         # the rest of the group comes soon; a Job is waited for jobWaitTimeout; the pod's own event
    cq = state.cluster_queues.get(cluster_queue) if cluster_queue else None
    if cq is None or rule not in QUOTA_RULES:
        return ""
    left = preemption.delay_left(cq, pod, now)
    if assignment is not None and (assignment.unresolvable or assignment.no_nodes):
        return ""                       # it never fits this ClusterQueue's quota, or no node of its flavors
    head = next(state.queues.pending_pods(cq.name), None)
    at_head = head is not None and (head.uid == pod.uid or bool(group_of(pod) and group_of(head) == group_of(pod)))
    if resolvable and not every_node:   # kube-scheduler's own preemption may act: parked, unless a delay stops it
        if 0 < left <= RETRY_HORIZON:
            return PREEMPTION_DELAY
        if not at_head:                 # the head is retried whatever its policies: quota that frees admits it
            return ""
    return QUEUE_HEAD if at_head else QUOTA_IN_USE
