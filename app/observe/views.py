"""Plain JSON-able views of the quota tree and of one ClusterQueue (or Cohort) with why each pending pod waits.

Quantities are shown as an admin writes them (cpu "9", memory "36Gi"). A queue's
pending pods are asked about with core.admission.decide, which charges pods ahead
virtually and takes the charge back: reading a view never changes the state.
"""
from __future__ import annotations

import itertools
from datetime import datetime, timezone
from typing import Iterator

from ..core import readiness
from ..core.admission import Verdict, decide
from ..core.dominant_share import MAX_SHARE, dominant_resource_share
from ..objects.quantity import format_quantity
from ..core.resource_node import FR, QuotaNode, available, lendable
from ..core.rules import PREEMPTING
from ..core.workload import Workload
from ..objects.pod import PodInfo

PENDING_SHOWN = 100        # pending pods a queue view decides for, at most (and never past maxQueueScan)
ADMITTED_SHOWN = 50        # running pods a queue view lists
PREEMPTIONS_SHOWN = 20     # preemptions made and suffered a queue view lists, each
PREEMPT_VERBS = ("preempt", "reclaim")


class NotFound(LookupError):
    """What was looked up and not found, with what there is."""

    def __init__(self, message: str, looked_up: str, known: list[str] | None = None):
        super().__init__(message)
        self.message, self.looked_up, self.known = message, looked_up, known


# ---- small formatting helpers -------------------------------------------------------------
def qty(value: int | None, resource: str) -> str | None:
    return None if value is None else format_quantity(value, resource)


def requests_view(requests: dict[str, int]) -> dict[str, str]:
    return {r: format_quantity(v, r) for r, v in requests.items()}


def usage_view(usage: dict[FR, int]) -> dict[str, dict[str, str]]:
    """{(flavor, resource): amount} -> {flavor: {resource: "amount"}}."""
    out: dict[str, dict[str, str]] = {}
    for (flavor, resource), v in usage.items():
        out.setdefault(flavor, {})[resource] = format_quantity(v, resource)
    return out


def rfc3339(epoch: float | None) -> str | None:
    if epoch is None:
        return None
    return datetime.fromtimestamp(epoch, timezone.utc).isoformat(timespec="milliseconds").replace("+00:00", "Z")


def share_value(share: int) -> int | str:
    return "max" if share >= MAX_SHARE else share


# ---- counts read from the state -------------------------------------------------------------
def admitted_uids(state, cq_name: str) -> set[str]:
    """Uids of the pods charged to a ClusterQueue, from the state's index."""
    return state.admitted.by_queue.get(cq_name, set())


def pending_ahead(state, pod, cq_name: str) -> int:
    """Pending pods ahead of pod in its ClusterQueue's order (within maxQueueScan), itself excluded: the order
    admission uses (state.queues.queue_key: with requeuingStrategy.timestamp Creation a requeued workload keeps its
    first place)."""
    return sum(1 for p in state.queues.pending_pods(cq_name, before=state.queues.queue_key(pod)) if p.uid != pod.uid)


def workload_counts(state) -> dict[str, tuple[int, int, int]]:
    """ClusterQueue -> (pending without a reservation, reserving, admitted) pods."""
    reserving: dict[str, int] = {}
    for r in state.reservations.values():
        reserving[r.charge.cluster_queue] = reserving.get(r.charge.cluster_queue, 0) + 1
    admitted = {name: len(uids) for name, uids in state.admitted.by_queue.items()}
    reservations = state.reservations
    out = {}
    for name in state.cluster_queues:
        items = state.pending.get(name, ())
        pending = sum(1 for _, uid in items if uid not in reservations)
        out[name] = (pending, reserving.get(name, 0), admitted.get(name, 0))
    return out


def reserved_usage(state) -> dict[str, dict[FR, int]]:
    """ClusterQueue -> quota held by reservations (pods that passed filter, not bound yet)."""
    out: dict[str, dict[FR, int]] = {}
    for r in state.reservations.values():
        held = out.setdefault(r.charge.cluster_queue, {})
        for fr, v in r.charge.usage.items():
            held[fr] = held.get(fr, 0) + v
    return out


# ---- the quota tree ----------------------------------------------------------------------------
def resource_rows(node: QuotaNode, reserved: dict[FR, int] | None = None) -> list[dict]:
    """One row per (flavor, resource): limits, usage, borrowed, lendable and available; reserved
    (held by reservations) for a ClusterQueue, None for a Cohort. usage is what decisions plan with
    (reservations in, chosen victims out); running is what pods on nodes really use."""
    keys = list(node.quotas) + [fr for fr in node.subtree if fr not in node.quotas]
    rows = []
    for fr in keys:
        flavor, resource = fr
        limits = node.quotas.get(fr)
        used = node.usage.get(fr, 0)
        subtree = node.subtree.get(fr, 0)
        rows.append({
            "flavor": flavor, "resource": resource,
            "nominal": qty(limits.nominal if limits else 0, resource),
            "borrowingLimit": qty(limits.borrowing_limit if limits else None, resource),
            "lendingLimit": qty(limits.lending_limit if limits else None, resource),
            "subtreeQuota": qty(subtree, resource),
            "usage": qty(used, resource),
            "running": qty(node.bound.get(fr, 0), resource),   # the quota invariant's side: pods on nodes
            "reserved": qty(reserved.get(fr, 0), resource) if reserved is not None else None,
            "borrowed": qty(max(0, used - subtree), resource),
            "lendable": qty(lendable(node, fr), resource),
            "available": qty(max(0, available(node, fr)), resource),
        })
    return rows


def queue_status(state, name: str) -> tuple[str, str]:
    """active, inactive or stopped, and why."""
    if name in state.tree.inactive:
        return "inactive", state.tree.inactive[name]
    cq = state.cluster_queues[name]
    if cq.stop_policy != "None":
        return "stopped", f"stopPolicy {cq.stop_policy}"
    overrun = state.ledger.overrun(name)
    if overrun is not None:
        return "overQuota", overrun.refusal()
    return "active", ""


def cluster_queue_view(state, name: str, counts: dict | None = None, reserved: dict | None = None) -> dict:
    cq = state.cluster_queues[name]
    node = state.tree.queues.get(name)
    counts = counts if counts is not None else workload_counts(state)
    reserved = reserved if reserved is not None else reserved_usage(state)
    status, why = queue_status(state, name)
    share, dominant = dominant_resource_share(node, cq.fair_weight) if node else (0, "")
    pending, reserving, admitted = counts.get(name, (0, 0, 0))
    return {
        "name": name, "kind": "ClusterQueue", "cohort": cq.cohort or None,
        "status": status, "statusReason": why,
        "queueingStrategy": cq.queueing_strategy, "stopPolicy": cq.stop_policy,
        "namespaceSelector": cq.namespace_selector.describe() if cq.namespace_selector else None,
        "preemption": {"withinClusterQueue": cq.preemption.within_cluster_queue,
                       "reclaimWithinCohort": cq.preemption.reclaim_within_cohort,
                       "borrowWithinCohort": cq.preemption.borrow_within_cohort},
        "flavorFungibility": {"whenCanBorrow": cq.when_can_borrow, "whenCanPreempt": cq.when_can_preempt,
                              "preference": cq.fungibility_preference or None},
        "fairSharing": {"weight": cq.fair_weight, "share": share_value(share), "dominantResource": dominant or None},
        "localQueues": sorted(lq.key for lq in state.local_queues.values() if lq.cluster_queue == name),
        "pending": pending, "reserving": reserving, "admitted": admitted,
        "resources": resource_rows(node, reserved.get(name, {})) if node else [],
    }


def cohort_view(state, name: str) -> dict:
    node = state.tree.cohorts[name]
    spec = state.cohorts.get(name)
    weight = spec.fair_weight if spec else 1.0
    share, dominant = dominant_resource_share(node, weight)
    return {
        "name": name, "kind": "Cohort", "parent": node.parent.name if node.parent else None,
        "implicit": spec is None,
        "cohorts": sorted(c.name for c in node.children if c.is_cohort),
        "clusterQueues": sorted(c.name for c in node.children if not c.is_cohort),
        "fairSharing": {"weight": weight, "share": share_value(share), "dominantResource": dominant or None},
        "resources": resource_rows(node),
    }


def queues_view(state) -> dict:
    """The whole tree: Cohorts (nesting by parent) and ClusterQueues, with counts and numbers."""
    counts, reserved = workload_counts(state), reserved_usage(state)
    return {
        "cohorts": [cohort_view(state, name) for name in sorted(state.tree.cohorts)],
        "clusterQueues": [cluster_queue_view(state, name, counts, reserved) for name in sorted(state.cluster_queues)],
    }


# ---- one queue ---------------------------------------------------------------------------------
def verdict_view(verdict: Verdict) -> dict:
    """A decision as an admin reads it: the rule, the reason, what kube-scheduler would be answered."""
    a = verdict.assignment
    if not verdict.managed:
        answer = "NodeNames (not managed: every offered node passes)"
    elif verdict.admit:
        answer = "NodeNames"
    else:
        answer = "FailedNodes" if verdict.resolvable else "FailedAndUnresolvableNodes"
    return {
        "rule": verdict.rule, "admit": verdict.admit, "reason": verdict.reason,
        "resolvable": verdict.resolvable, "answer": answer, "clusterQueue": verdict.cluster_queue or None,
        "flavors": dict(a.flavors) if a and verdict.admit else {},
        "borrowing": bool(a and a.borrowing and verdict.admit),
        "flavorsTried": list(a.reasons) if a else [],
    }


def why_waiting(verdict: Verdict) -> str:
    if verdict.admit:
        flavors = ", ".join(sorted(set(verdict.assignment.flavors.values()))) if verdict.assignment else ""
        return (f"fits now ({'flavor ' + flavors if flavors else 'no quota needed'}"
                f"{', borrowing' if verdict.assignment and verdict.assignment.borrowing else ''}); "
                "waits for kube-scheduler to call filter")
    return verdict.reason


def pending_rows(state, journal, cq_name: str, limit: int) -> Iterator[dict]:
    """The ClusterQueue's pending pods in queue order (reserved ones excluded), each with why it waits now.

    Each row is one decision (up to a few milliseconds in a long BestEffortFIFO queue, as it
    charges the pods ahead), so a caller on the event loop may yield between rows; a pod bound
    or gone meanwhile is left out."""
    pods = list(itertools.islice(state.queues.pending_pods(cq_name), max(0, limit)))
    for i, pod in enumerate(pods):
        if state.pods.get(pod.uid) is not pod or pod.uid in state.reservations:
            continue
        verdict = decide(state, Workload.of_pod(pod))
        last = journal.of_pod(pod.key)[:1] if journal is not None else []
        yield {
            "position": i + 1, "pod": pod.key, **priority_view(pod), "created": rfc3339(pod.created),
            "requests": requests_view(pod.requests), "learned": pod.uid in state.learned,
            "rule": verdict.rule, "why": why_waiting(verdict), "resolvable": verdict.resolvable,
            "lastDecision": {"verb": last[0]["verb"], "outcome": last[0]["outcome"],
                             "at": rfc3339(last[0]["time"])} if last else None,
        }


def queue_view(state, journal, name: str, limit: int = PENDING_SHOWN, rows: list[dict] | None = None) -> dict:
    """One ClusterQueue (or Cohort): its numbers, pending pods in queue order and why each waits,
    reservations and running pods. `rows`: the pending rows when the caller worked them out
    itself (pending_rows, yielding between them); else they are worked out here."""
    if name not in state.cluster_queues:
        if name in state.tree.cohorts:
            view = cohort_view(state, name)
            counts = workload_counts(state)
            view["pending"] = sum(counts.get(c, (0, 0, 0))[0] for c in view["clusterQueues"])
            return view
        raise NotFound(f"no ClusterQueue or Cohort named {name!r}", name,
                       sorted(state.cluster_queues) + sorted(state.tree.cohorts))
    view = cluster_queue_view(state, name)
    limit = shown_limit(state, limit)
    view["pendingPods"] = rows if rows is not None else list(pending_rows(state, journal, name, limit))
    if view["pending"] > len(view["pendingPods"]):
        view["pendingNote"] = (f"{len(view['pendingPods'])} of {view['pending']} pending pods shown "
                               f"(at most {limit}; maxQueueScan {state.config.max_queue_scan})")
    now = state.timer()
    view["reservations"] = [
        {"pod": state.pods[uid].key if uid in state.pods else uid, "flavors": dict(r.charge.flavors),
         "usage": usage_view(r.charge.usage), "expiresIn": round(r.expires - now, 3)}
        for uid, r in sorted(state.reservations.items(), key=lambda kv: kv[1].expires)
        if r.charge.cluster_queue == name]
    running = [(state.pods[uid], state.admitted[uid]) for uid in admitted_uids(state, name)
               if uid in state.pods and uid in state.admitted]
    running.sort(key=lambda pc: pc[0].key)
    view["admittedPods"] = [
        {"pod": p.key, "node": p.node_name, "priority": p.priority, "flavors": dict(c.flavors),
         "usage": usage_view(c.usage), "inferred": c.inferred, **admission_view(c)} for p, c in running[:ADMITTED_SHOWN]]
    if len(running) > ADMITTED_SHOWN:
        view["admittedNote"] = f"{ADMITTED_SHOWN} of {len(running)} running pods shown"
    if journal is not None:
        view["preemptions"] = preemptions_view(journal, name)
    view["podsReady"] = pods_ready_view(state, name)
    return view


def preemptions_view(journal, cq_name: str, limit: int = PREEMPTIONS_SHOWN) -> dict:
    """Recent preemptions from the journal, newest first, one row per preemption decision: made (a pod of this
    ClusterQueue chose victims) and suffered (victims charged to this ClusterQueue were chosen, by a pod of
    any queue: evicted by Quotient, or proposed to kube-scheduler's preempt, which evicts those on the one
    node it picks; the entry's victims say which node each is on). A preemption within the queue is in both."""
    made: list[dict] = []
    suffered: list[dict] = []
    for entry in reversed(journal.entries):
        if entry["outcome"] != PREEMPTING or entry["verb"] not in PREEMPT_VERBS:
            continue
        if entry.get("queue") == cq_name and len(made) < limit:
            made.append(entry_view(entry))
        if cq_name in (entry.get("victim_queues") or ()) and len(suffered) < limit:
            suffered.append(entry_view(entry))
        if len(made) >= limit and len(suffered) >= limit:
            break
    return {"made": made, "suffered": suffered}


def pods_ready_view(state, cq_name: str, limit: int = ADMITTED_SHOWN) -> dict:
    """waitForPodsReady for one ClusterQueue: its admitted workloads not yet all Ready (waiting), and its
    pending workloads requeued after a PodsReadyTimeout eviction, backing off or deactivated (requeued).
    Only the unready records are looked into (few: each is evicted at its timeout), and at most `limit` of
    each list is shown, so the page costs little however many workloads run."""
    if state.config.wait_for_pods_ready is None:
        return {"enabled": False, "waiting": [], "requeued": []}
    waiting = []
    for unit, r in state.readiness.items():
        if r.ready_at is not None and r.unready_at is None:
            continue
        members = state.pods_ready.unit_members(unit)
        charge = next((state.admitted[m.uid] for m in members if m.uid in state.admitted), None)
        if charge is not None and charge.cluster_queue == cq_name:
            waiting.append({"workload": unit.shown, "pods": len(members),
                            "admittedAt": rfc3339(r.admitted_at), "unreadyAt": rfc3339(r.unready_at)})
    requeued: dict[str, dict] = {}
    if state.requeues:
        for pod in state.queues.pending_pods(cq_name):        # at most maxQueueScan
            key = readiness.requeue_key(pod)
            q = state.requeues.get(key)
            if q is not None and key not in requeued:
                requeued[key] = {"workload": key, "count": q.count, "backoffUntil": rfc3339(q.at) if q.at else None,
                                 "deactivated": q.deactivated}
    view = {"enabled": True, "waiting": sorted(waiting, key=lambda w: w["workload"])[:limit],
            "requeued": sorted(requeued.values(), key=lambda w: w["workload"])[:limit]}
    for name, found in (("waiting", len(waiting)), ("requeued", len(requeued))):
        if found > limit:
            view[f"{name}Note"] = f"{limit} of {found} shown"
    return view


ADMISSION_SOURCES = {
    "bind": "Quotient bound it then (its own clock, to the second)",
    "PodScheduled": "the PodScheduled condition's lastTransitionTime (when the pod was bound)",
    "startTime": "status.startTime (no PodScheduled condition)",
    "creationTimestamp": "metadata.creationTimestamp (no PodScheduled condition, no startTime)",
}


def admission_view(charge) -> dict:
    """When a charge's pod was admitted and where that time comes from: preemption takes the most
    recently admitted first, so an admin can see why one pod went before another."""
    source = charge.admitted_from or "unknown"
    return {"admittedAt": rfc3339(charge.admitted_at) if charge.admitted_at else None,
            "admittedAtSource": source, "admittedAtNote": ADMISSION_SOURCES.get(source, "")}


def shown_limit(state, limit: int) -> int:
    """Pending pods a queue view decides for: at most `limit`, never past maxQueueScan."""
    return max(0, min(limit, state.config.max_queue_scan))


# ---- recent decisions --------------------------------------------------------------------------
def entry_view(entry: dict) -> dict:
    """A journal entry with an RFC 3339 time and camelCase keys (outside_flavor -> outsideFlavor)."""
    out = {"at": rfc3339(entry.get("time"))}
    for key, value in entry.items():
        out[_camel(key)] = value
    return out


def _camel(key: str) -> str:
    head, *rest = key.split("_")
    return head + "".join(w[:1].upper() + w[1:] for w in rest)


def decisions_view(journal, limit: int, queue: str | None = None, pod: str | None = None) -> dict:
    """Newest first from the ring; a limit beyond the ring is clamped to its size."""
    size = journal.entries.maxlen or len(journal.entries)
    asked = limit
    limit = min(limit, size)
    entries = journal.recent(limit, queue=queue, pod=pod)
    view = {"limit": limit, "buffer": size, "held": len(journal.entries), "queue": queue, "pod": pod,
            "count": len(entries), "decisions": [entry_view(e) for e in entries]}
    if asked > size:
        view["clamped"] = f"limit {asked} is beyond the ring of {size} decisions; clamped to {size}"
    return view


def priority_view(pod: PodInfo) -> dict:
    """The priority Quotient's decisions used, where it came from, and the pod's own (kube-scheduler's)."""
    return {"priority": pod.priority, "priorityFrom": pod.priority_from or None, "podPriority": pod.pod_priority,
            "workloadPriorityClass": pod.workload_priority_class or None,
            **({"missingWorkloadPriorityClass": pod.missing_priority_class} if pod.missing_priority_class else {})}
