"""A /debug view as its request asks for it, shared by /debug (api.debug) and its /ui twin (ui.pages), so that
neither imports the other: the query parameters read, the queue view built between decisions, and the error a
request that cannot be answered gets."""
from __future__ import annotations

import asyncio
from collections.abc import Mapping

from .views import decisions_view, pending_rows, queue_view, shown_limit

DEFAULT_LIMIT = 50


class DebugError(Exception):
    """A view that cannot be answered: its HTTP status and the error view that says why."""

    def __init__(self, status: int, message: str, **details):
        super().__init__(message)
        self.status, self.view = status, {"error": message, **details}


def int_param(params: Mapping[str, str], name: str, default: int) -> int:
    """A whole-number query parameter of at least 1, default when absent."""
    raw = params.get(name)
    if raw is None:
        return default
    try:
        value = int(raw)
    except ValueError:
        raise DebugError(400, f"{name} must be a whole number, got {raw!r}") from None
    if value < 1:
        raise DebugError(400, f"{name} must be at least 1, got {value}")
    return value


async def build_queue_view(state, journal, name: str, limit: int) -> dict:
    """/debug/queues/{name}'s view (and /ui/queues/{name}'s): each pending row is a decision, so the
    event loop is given back between rows and the verbs go on meanwhile."""
    if name not in state.cluster_queues:
        return queue_view(state, journal, name, limit)      # a Cohort, or NotFound
    rows = []
    for row in pending_rows(state, journal, name, shown_limit(state, limit)):
        rows.append(row)
        await asyncio.sleep(0)
    return queue_view(state, journal, name, limit, rows)


def asked_decisions(journal, params: Mapping[str, str]) -> dict:
    """/debug/decisions's view (and /ui/decisions's) for the queue, pod and limit the query parameters ask."""
    return decisions_view(journal, int_param(params, "limit", DEFAULT_LIMIT), params.get("queue") or None,
                          params.get("pod") or None)
