"""The bars of the tree and queue pages: each (flavor, resource) row of a /debug view drawn on one scale per
resource, from the very numbers the row shows (so a bar never says what the text does not).

A bar runs from 0 to the scale, the largest quota or usage any queue on the page has of that resource,
so queues compare at a glance. Its segments, in order: used within the nominal quota (subtreeQuota for
a Cohort), borrowed beyond it, the reserved tail of the usage (pods that passed filter and are not bound
yet, within or beyond the nominal quota), then what is left to take (available). A tick marks the nominal
quota; a thin strip under it spans what the queue lends its cohort (lendable, the end of its quota).
"""
from __future__ import annotations

from dataclasses import dataclass, field

from ..objects.quantity import magnitude

AMOUNTS = ("usage", "reserved", "subtreeQuota", "borrowed", "available", "lendable")


@dataclass(frozen=True, slots=True)
class Segment:
    kind: str           # used, borrowed, reserved, reserved-borrowed, left (CSS classes)
    x: float            # percent of the scale
    width: float


@dataclass(slots=True)
class Bar:
    segments: list[Segment] = field(default_factory=list)
    nominal: float = 0.0        # percent of the scale where the nominal quota ends
    lends: tuple[float, float] | None = None


def amounts(row: dict) -> dict[str, float]:
    """The row's quantities as numbers in one unit per resource (a missing one, reserved of a Cohort, as 0)."""
    return {k: magnitude(row[k]) if row.get(k) is not None else 0.0 for k in AMOUNTS}


def extent(row: dict) -> float:
    """How much of the scale the row needs: its quota, or its usage and what it may still take."""
    a = amounts(row)
    return max(a["subtreeQuota"], a["usage"] + a["available"], a["usage"])


def scales(rows: list[dict]) -> dict[str, float]:
    """One scale per resource over every row given (never 0: an empty bar is drawn for a resource none has)."""
    out: dict[str, float] = {}
    for row in rows:
        out[row["resource"]] = max(out.get(row["resource"], 0.0), extent(row))
    return {resource: scale or 1.0 for resource, scale in out.items()}


def bar(row: dict, scale: float) -> Bar:
    a = amounts(row)
    quota, usage = a["subtreeQuota"], a["usage"]
    reserved = min(a["reserved"], usage)
    solid = usage - reserved                    # bound (or held for a preemptor), not a filter's reservation
    pct = 100.0 / scale if scale > 0 else 0.0
    spans = [("used", 0, min(solid, quota)),
             ("borrowed", quota, solid - quota),
             ("reserved", solid, min(usage, quota) - solid),
             ("reserved-borrowed", max(solid, quota), usage - max(solid, quota)),
             ("left", usage, a["available"])]
    out = Bar(nominal=quota * pct)
    out.segments = [Segment(kind, start * pct, width * pct) for kind, start, width in spans if width > 0]
    if a["lendable"] > 0:
        lends = min(a["lendable"], quota)
        out.lends = ((quota - lends) * pct, lends * pct)
    return out
