"""The process's cyclic-collector policy, set once when the state is loaded; nothing else touches the collector."""
from __future__ import annotations

import gc

# A preemption decision builds a few thousand short-lived candidates. With CPython's default first threshold
# (700) the collector ran a dozen times inside each such decision, promoting the candidates to the oldest
# generation and setting off a full collection every few decisions; at 10,000 most decisions run between two
# young collections and their candidates die young (tests/bench/bench_preemption.py, issue 13: p99 as with the
# collector held off around the search, which core/ no longer does).
YOUNG_THRESHOLD = 10_000


def settle_heap() -> None:
    """Collect, then freeze what survives: the tens of thousands of objects a snapshot or an initial list
    leaves (pods, nodes, the quota tree) would otherwise be rescanned by every full collection on the
    request path, a cost per request that grows with the backlog (issue 19). Objects made later are
    collected as usual; frozen ones are still freed by reference counting when dropped. Then the young
    generation's threshold is raised (YOUNG_THRESHOLD)."""
    gc.collect()
    gc.freeze()
    _, older, oldest = gc.get_threshold()
    gc.set_threshold(YOUNG_THRESHOLD, older, oldest)
