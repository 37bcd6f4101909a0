"""Pods Quotient refused, and when each refusal cleared: the book that wake-ups are decided from.

kube-scheduler parks a pod an extender refused in its unschedulable pool until a cluster event moves it
or for 5 minutes (pkg/scheduler/backend/queue/scheduling_queue.go: the pod has no rejecting plugin).
A refusal that clears with time (a backoff, a preemption delay, a hold that expires), or because of
an event kube-scheduler acted on before Quotient's watch delivered it, has no event left to move the
pod: Quotient wakes it with a small update of the pod itself (act/: Wake).
"""
from __future__ import annotations

from dataclasses import dataclass


@dataclass
class Refusal:
    rule: str
    reason: str
    at: float
    holds: frozenset[str] = frozenset()      # the holds in force, when the room they keep refused the pod
    cleared_at: float | None = None
    cause: str = ""                          # why it cleared: the wake-up's reason
    woken_at: float | None = None
    futile: bool = False                     # refused again as before its wake-up: not woken for it again


class Refusals(dict):
    """pod uid -> its last refusal by filter, until it passes, binds or is gone."""

    def refused(self, uid: str, rule: str, reason: str, now: float, holds: frozenset[str] = frozenset()) -> None:
        old = self.get(uid)
        if old is not None and old.rule == rule and old.woken_at is None:
            old.reason = reason          # the same refusal, asked again: it keeps its time
            return
        # Woken, then refused word for word as before: the refusal had not cleared after all (a rule the
        # wake-up judged otherwise than filter). No second wake-up for it: no loop of wake and refuse.
        futile = old is not None and old.woken_at is not None and (old.rule, old.reason) == (rule, reason)
        self[uid] = Refusal(rule, reason, now, holds, futile=futile)

    def view(self, uid: str, shown) -> dict | None:
        """For /debug/pods: the refusal, when it cleared (and why), when Quotient woke the pod."""
        r = self.get(uid)
        if r is None:
            return None
        return {"rule": r.rule, "reason": r.reason, "at": shown(r.at), "clearedAt": shown(r.cleared_at),
                "clearedBecause": r.cause or None, "wokenAt": shown(r.woken_at)}
