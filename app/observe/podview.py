"""The story of one pod for /debug/pods: where it stands now and the last decisions about it.

Each section is filled from the state and from the pod's journal entries: the last
filter (verdict, reasons, flavor chosen and flavors tried, nodes rejected grouped
by reason), reservation or charge, bind, preemption as the preemptor (every key the
preempt or reclaim entry carries: candidates, victims per node, the node chosen,
why other nodes lost, and the hold kept while victims leave), preemption as a
victim, eviction, and gang and backoff, which read "none" until entries carry them.
"""
from __future__ import annotations

from .topology_view import pod_topology
from ..core.admission import decide
from ..core.workload import Workload
from ..core.rules import ADMITTED, EVICTED, PREEMPTED
from ..objects.pod import PodInfo
from .views import (PREEMPT_VERBS, NotFound, admission_view, entry_view, pending_ahead, priority_view, requests_view,
                    rfc3339, usage_view, verdict_view)
STANDARD_KEYS = frozenset({"time", "verb", "pod", "outcome", "reason", "queue"})


def pod_status(state, pod: PodInfo | None) -> tuple[str, str]:
    if pod is None:
        return "gone", "not in Quotient's state any more (deleted, finished, evicted or forgotten)"
    if not pod.queue_name and not state.config.manage_jobs_without_queue_name:
        return "unmanaged", "no kueue.x-k8s.io/queue-name label: Quotient passes it untouched"
    if pod.terminal:
        return "finished", f"phase {pod.phase}: its quota is released"
    if pod.uid in state.admitted:
        return "admitted", f"running on {pod.node_name}, charged to {state.admitted[pod.uid].cluster_queue}"
    if pod.node_name:
        return "running", f"running on {pod.node_name} without a charge (its ClusterQueue is gone or inactive)"
    if pod.uid in state.reservations:
        return "reserved", "passed filter; its quota is held until kube-scheduler binds it"
    if pod.gated:
        waits = state.queues.gate_wait(pod.uid)
        shown = (f"; its queue's pods of its shape wait behind {waits[0]}: {waits[1]}: {waits[2]}" if waits else
                 "; not in a ClusterQueue's queue (its LocalQueue or ClusterQueue does not exist or is stopped)"
                 if pod.uid not in state.queues.gated_of else "")
        return "gated", ("carries the admission gate kueue.x-k8s.io/admission: kube-scheduler leaves it alone until "
                         f"Quotient admits it and removes the gate{shown}")
    if pod.missing_priority_class:
        return "pending", f"waits for WorkloadPriorityClass {pod.missing_priority_class} to exist; not queued meanwhile"
    return "pending", "waits for quota or for kube-scheduler to ask"


def filter_section(entry: dict) -> dict:
    """The last filter decision: answer, flavors, and the offered nodes rejected, grouped by reason."""
    admitted = entry["outcome"] == ADMITTED
    offered = entry.get("offered")
    flavors = entry.get("flavors") or {}
    if admitted:
        answer = "NodeNames"
        outside = entry.get("outside_flavor", 0)
        rejected = [{"reason": f"not in the pod's flavor(s) {', '.join(sorted(set(flavors.values())))} "
                               "(left out of NodeNames)", "nodes": outside}] if outside else []
    else:
        answer = f"Error (retry: {entry['retry']})" if entry.get("retry") else \
            "FailedNodes" if entry.get("resolvable") else "FailedAndUnresolvableNodes"
        rejected = [{"reason": entry.get("reason", ""), "nodes": offered if offered is not None else "all offered"}]
    return {
        "at": rfc3339(entry.get("time")), "outcome": entry["outcome"], "reason": entry.get("reason", ""),
        "clusterQueue": entry.get("queue") or None, "answer": answer,
        "offered": offered, "passing": entry.get("nodes", 0),
        "flavorChosen": flavors, "flavorsTried": entry.get("tried", []),
        "borrowing": bool(entry.get("borrowing")), "nodesRejected": rejected,
    }


def extra_keys(entry: dict) -> dict:
    """Everything an entry carries beyond the common keys, camelCased (why_not -> whyNot)."""
    view = entry_view(entry)
    return {k: v for k, v in view.items() if k not in STANDARD_KEYS and k != "at"}


def _pod_key(state, uid: str) -> str:
    pod = state.pods.get(uid)
    return pod.key if pod is not None else f"{uid} (gone)"


def preemption_section(state, pod: PodInfo | None, entries: list[dict]) -> dict:
    """Preemption for this pod as the preemptor: the last attempt (kube-scheduler's preempt, or
    Quotient's own reclaim) with its candidates, victims per node, node chosen and why others lost,
    and the room and quota held for it while its victims leave."""
    found = [e for e in entries if e["verb"] in PREEMPT_VERBS and e["outcome"] != PREEMPTED]
    held = state.holds.get(pod.uid) if pod is not None else None
    if not found and held is None:
        return {"considered": False, "note": "no preemption was tried for this pod"}
    view: dict = {"considered": True}
    if found:
        last = found[0]
        view.update({"at": rfc3339(last.get("time")), "verb": last["verb"], "outcome": last["outcome"],
                     "reason": last.get("reason", ""), "clusterQueue": last.get("queue") or None,
                     "attempts": len(found), **extra_keys(last)})
    if held is not None:
        view["hold"] = {"node": held.node, "victims": sorted(_pod_key(state, u) for u in held.victims),
                        "evicted": sorted(_pod_key(state, u) for u in held.evicted),
                        "waitingFor": sorted(_pod_key(state, u) for u in held.left(state.pods)),
                        "expiresIn": round(held.expires - state.timer(), 3)}
    return view


def preempted_section(state, pod: PodInfo | None, entries: list[dict]) -> dict | None:
    """This pod as a victim: chosen by a preemptor's hold, or evicted for one."""
    chosen = [(uid, h) for uid, h in state.holds.items() if pod is not None and pod.uid in h.victims]
    evicted = next((e for e in entries if e["outcome"] == PREEMPTED), None)
    if not chosen and evicted is None:
        return None
    view: dict = {}
    if chosen:
        uid, held = chosen[0]
        reason, message = held.victims[pod.uid]
        view.update({"preemptor": _pod_key(state, uid), "node": held.node, "reason": reason, "message": message,
                     "evicted": pod.uid in held.evicted})
    if evicted is not None:
        reasons = evicted.get("reasons") or []
        view.update({"at": rfc3339(evicted.get("time")), "evicted": True,
                     "preemptor": view.get("preemptor") or _pod_key(state, str(evicted.get("preemptor", ""))),
                     "reason": reasons[0] if reasons else view.get("reason"), "message": evicted.get("reason", "")})
    return view


def _section_from(entries: list[dict], key: str) -> object:
    """A section (gang, backoff) the newest entry carrying `key` fills; "none" while none does."""
    for e in entries:
        if key in e:
            return {"at": rfc3339(e.get("time")), "verb": e["verb"], key: e[key]}
    return "none"


def pod_view(state, journal, namespace: str, name: str, actions=None, refusals=None) -> dict:
    key = f"{namespace}/{name}"
    pod = state.store.pod_by_key(key)
    entries = journal.of_pod(key)
    if pod is None and not entries:
        raise NotFound(f"pod {key} is not known to Quotient: no such pod in its state and no decision "
                       "recorded about it", key)
    status, detail = pod_status(state, pod)
    view: dict = {"pod": key, "status": status, "statusDetail": detail}
    if pod is not None:
        lq, cq = state.store.queue_of(pod)
        view.update({
            "uid": pod.uid, "phase": pod.phase, "node": pod.node_name or None, **priority_view(pod),
            "priorityClass": pod.priority_class or None, "created": rfc3339(pod.created),
            "learned": pod.uid in state.learned, "requests": requests_view(pod.requests),
            "localQueue": lq.key if lq else (f"{namespace}/{pod.queue_name}" if pod.queue_name else None),
            "clusterQueue": cq.name if cq else None,
        })
    charge = state.admitted.get(pod.uid) if pod is not None else None
    view["charge"] = {"clusterQueue": charge.cluster_queue, "flavors": dict(charge.flavors),
                      "usage": usage_view(charge.usage), "inferred": charge.inferred,
                      **admission_view(charge)} if charge else None
    reservation = state.reservations.get(pod.uid) if pod is not None else None
    view["reservation"] = {"clusterQueue": reservation.charge.cluster_queue,
                           "flavors": dict(reservation.charge.flavors), "usage": usage_view(reservation.charge.usage),
                           "expiresIn": round(reservation.expires - state.timer(), 3)} if reservation else None
    if status == "pending":
        verdict = decide(state, Workload.of_pod(pod))
        now = verdict_view(verdict)
        if verdict.cluster_queue:
            now["pendingAhead"] = pending_ahead(state, pod, verdict.cluster_queue)
        view["now"] = now
    else:
        view["now"] = None
    last = {verb: next((e for e in entries if e["verb"] == verb), None) for verb in ("filter", "bind", "drain")}
    view["filter"] = filter_section(last["filter"]) if last["filter"] else None
    view["bind"] = ({"at": rfc3339(last["bind"].get("time")), "outcome": last["bind"]["outcome"],
                     "reason": last["bind"].get("reason", ""), "node": last["bind"].get("node")}
                    if last["bind"] else None)
    view["preemption"] = preemption_section(state, pod, entries)
    view["preemptedBy"] = preempted_section(state, pod, entries)
    evicted = next((e for e in entries if e["outcome"] == EVICTED), None)
    view["eviction"] = ({"at": rfc3339(evicted.get("time")), "verb": evicted["verb"],
                         "reason": evicted.get("reason", ""), "clusterQueue": evicted.get("queue") or None}
                        if evicted else None)
    view["evictionWrite"] = actions.view(pod.uid) if actions is not None and pod is not None else None
    view["refusal"] = refusals.view(pod.uid, rfc3339) if refusals is not None and pod is not None else None
    view["topology"] = pod_topology(state, pod)
    view["gang"] = _section_from(entries, "gang")
    view["backoff"] = _section_from(entries, "backoff")
    view["decisions"] = [entry_view(e) for e in entries]
    return view

