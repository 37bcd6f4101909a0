"""Logs: `--log-format text|json` for every line, and one line per decision that changed something.

A decision is logged when it changes something: bind Bound (the pod's quota is
charged: its admission; the line names the flavors filter chose), Evicted,
Preempting (victims chosen, room and quota held for the preemptor), Preempted (a
victim evicted), and as warnings bind Refused and WriteFailed (a reservation
released, a binding undone) and OutcomeUnknown (a Binding's answer lost: its
charge kept until a read says). The reservation filter takes before the bind is
logged at DEBUG (`--log-level debug`): an INFO line there would double the log and
cost the filter path more than everything else it records. Refusals (and
NoPreemption) change nothing and come again on every retry, so they are in
/debug/decisions and quotient_decisions_total, not in the log. In JSON a decision
line carries the journal entry's fields (verb, pod, outcome, reason, queue, node,
flavors, victims, ...).
"""
from __future__ import annotations

import logging
import sys

import orjson

from ..core.rules import ADMITTED, BOUND, EVICTED, OUTCOME_UNKNOWN, PREEMPTED, PREEMPTING, REFUSED, WRITE_FAILED
from .views import rfc3339

LEVELS = {BOUND: logging.INFO, EVICTED: logging.INFO, PREEMPTING: logging.INFO, PREEMPTED: logging.INFO,
          REFUSED: logging.WARNING, WRITE_FAILED: logging.WARNING, OUTCOME_UNKNOWN: logging.WARNING}
TEXT_FORMAT = "%(asctime)s %(levelname)s %(name)s: %(message)s"


def summary(entry: dict) -> str:
    """One line an admin reads: verb, pod, outcome and what it did."""
    parts = [entry["verb"], entry["pod"], entry["outcome"]]
    queue = entry.get("queue")
    if entry["verb"] == "filter":
        parts.append(f"quota reserved in {queue}")
    else:
        if entry.get("node"):
            parts.append(f"node {entry['node']}")
        if queue:
            parts.append(f"ClusterQueue {queue}")
    if entry.get("flavors"):
        parts.append("flavors " + ",".join(f"{r}={f}" for r, f in entry["flavors"].items()))
    if entry.get("borrowing"):
        parts.append("borrowing")
    if "nodes" in entry:
        parts.append(f"{entry['nodes']} of {entry.get('offered', '?')} offered nodes")
    if entry.get("victims"):
        parts.append(f"victims {entry['victims']}")
    reason = entry.get("reason")
    return " ".join(parts) + (f": {reason}" if reason else "")


class DecisionLog:
    """Journal listener: logs the decisions that changed something to the quotient.decisions logger."""

    def __init__(self, journal=None, logger: logging.Logger | None = None):
        self.journal = journal
        self.log = logger or logging.getLogger("quotient.decisions")

    def __call__(self, entry: dict) -> None:
        verb, outcome = entry["verb"], entry["outcome"]
        if verb == "filter":
            level = logging.DEBUG if outcome == ADMITTED else 0
        else:
            level = LEVELS.get(outcome, 0)
        if not level or not self.log.isEnabledFor(level):
            return
        if outcome == BOUND:
            entry = self._with_flavors(entry)
        self.log.log(level, "%s", summary(entry), extra={"decision": entry})

    def _with_flavors(self, entry: dict) -> dict:
        """A binding's line names the flavors and borrowing its filter decision chose."""
        if self.journal is None:
            return entry
        for earlier in self.journal.of_pod(entry["pod"]):
            if earlier["verb"] == "filter" and earlier["outcome"] == ADMITTED:
                return {**entry, "flavors": earlier.get("flavors") or {}, "borrowing": bool(earlier.get("borrowing"))}
        return entry


class JsonFormatter(logging.Formatter):
    """One JSON object per line: time, level, logger, message, and a decision's fields when it is one."""

    def format(self, record: logging.LogRecord) -> str:
        out = {"time": rfc3339(record.created),
               "level": record.levelname.lower(), "logger": record.name, "message": record.getMessage()}
        decision = getattr(record, "decision", None)
        if decision:
            for key, value in decision.items():
                out.setdefault(key, value)
        if record.exc_info:
            out["exception"] = self.formatException(record.exc_info)
        return orjson.dumps(out, default=str).decode()


def setup_logging(fmt: str = "text", level: str = "info", stream=None) -> None:
    """Configure the root logger for `quotient serve`: one handler, text or JSON lines."""
    handler = logging.StreamHandler(stream or sys.stderr)
    handler.setFormatter(JsonFormatter() if fmt == "json" else logging.Formatter(TEXT_FORMAT))
    root = logging.getLogger()
    for old in list(root.handlers):
        root.removeHandler(old)
    root.addHandler(handler)
    root.setLevel(getattr(logging, level.upper(), logging.INFO))
