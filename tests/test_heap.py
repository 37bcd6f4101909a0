"""The process's collector policy (app/state/heap.py): set once when the state is loaded."""
from __future__ import annotations

import gc
import pathlib

from app.state.heap import YOUNG_THRESHOLD, settle_heap

APP = pathlib.Path(__file__).resolve().parent.parent / "app"


def test_settle_heap_freezes_the_loaded_state_and_raises_the_young_threshold():
    before = gc.get_threshold()
    kept = [{"a": [i]} for i in range(1000)]          # long-lived objects, as a loaded state's
    settle_heap()
    assert gc.get_freeze_count() >= len(kept)
    assert gc.get_threshold() == (YOUNG_THRESHOLD, before[1], before[2])


def test_nothing_but_the_heap_module_touches_the_collector():
    """core/ decides without holding the collector off (issue 13: no gc games in decisions)."""
    touching = sorted(str(p.relative_to(APP)) for p in APP.rglob("*.py")
                      if any(call in p.read_text() for call in ("gc.disable", "gc.enable", "gc.set_threshold",
                                                                "gc.freeze", "import gc")))
    assert touching == ["state/heap.py"]
