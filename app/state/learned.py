"""Pods known only because kube-scheduler asked about them (no source lists them), until a source speaks for
them or learnedPodTimeout passes: a deleted pod or a ghost a caller made up may not hold a place for ever."""
from __future__ import annotations

from typing import Callable

from ..config import Configuration
from ..objects.pod import PodInfo


class LearnedPods:
    def __init__(self, config: Configuration, timer: Callable[[], float], cluster):
        self.config, self.timer = config, timer
        self.cluster = cluster                            # ClusterState: a learned pod is applied as an event
        self.learned: dict[str, float] = {}               # pods known only from requests -> when (timer) first learned
        self._learned_sweep = 0.0

    def learn_pod(self, pod: PodInfo) -> None:
        """A pending pod known only because kube-scheduler asked about it (no source lists it)."""
        self.cluster.upsert_pod(pod)
        self.learned[pod.uid] = self.timer()

    def spoken_for(self, uid: str) -> None:
        """The API (or, without one, the snapshot writer that stands for it) now speaks for a pod
        Quotient learned from a request and bound: it is no longer only learned."""
        self.learned.pop(uid, None)
        self.cluster.bindings.confirmed(uid)

    def forget_stale_learned(self) -> int:
        """Forget pods known only from requests once learnedPodTimeout has passed since they were first
        learned, bound or not: a real pod shows up on the API (and stops being only learned) within
        seconds, so this is a deleted pod or a ghost a caller made up, and neither may hold a place in
        queue order or quota for ever, however often it is asked about or whatever its bind answered."""
        now = self.timer()
        if not self.learned or now - self._learned_sweep < 60:
            return 0
        self._learned_sweep = now
        stale = [uid for uid, first in self.learned.items() if now - first > self.config.learned_pod_timeout]
        for uid in stale:
            self.cluster.remove_pod(uid)
            self.cluster.skips["learned pod forgotten"] += 1
        return len(stale)
