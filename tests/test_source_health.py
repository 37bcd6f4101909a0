"""SourceHealth.staleness (sync.health), which filter asks of every pod of a queue: its one-pass answer for a fresh
source is the same as the full account's, whatever each watched kind's state."""
from __future__ import annotations

import random
import time

import pytest

from app.sync.health import SourceHealth
from app.sync.reflector import ReflectorState


def full_account(health: SourceHealth, kind: str | None, reconnecting: bool) -> str:
    """staleness without its one-pass answer: every kind silent, awaiting a relist or reconnecting, as it says."""
    fresh = health._fresh
    health._fresh = lambda reconnecting: False
    try:
        return health.staleness(kind, reconnecting)
    finally:
        health._fresh = fresh


@pytest.mark.parametrize("seed", range(200))
def test_a_fresh_source_is_told_apart_in_one_pass_exactly_as_by_the_full_account(seed):
    rng = random.Random(seed)
    now = time.monotonic()
    kinds = {name: ReflectorState() for name in ("pods", "nodes", "clusterqueues", "localqueues", "jobs")}
    health = SourceHealth(kinds, stall_timeout=30.0, heartbeat=1.0)
    health.listed = rng.random() < 0.8
    for k in kinds.values():
        k.seen = rng.choice([None, now - 1, now - 29, now - 31, now - 600])
        k.stale = rng.choice(["", "", "", "410 Gone"])
        k.reconnecting = rng.choice(["", "", "", "connection reset"])
        k.absent = rng.random() < 0.2
    for kind in (None, "pods", "jobs"):
        for reconnecting in (True, False):
            assert health.staleness(kind, reconnecting) == full_account(health, kind, reconnecting)
