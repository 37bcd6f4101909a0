"""How a node scores for a pod in prioritize."""
from __future__ import annotations

import numpy as np


def pack_scores(fullness: np.ndarray) -> np.ndarray:
    """0..10 per node: how full it would be after placing the pod, on its fullest requested resource.

    Packing keeps whole nodes free for large pods and gangs, and leaves fewer,
    fuller nodes as preemption candidates later. Unknown nodes (-1) score 0."""
    return np.clip(np.rint(fullness * 10), 0, 10).astype(np.int64)
