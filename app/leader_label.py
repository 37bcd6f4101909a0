"""The leader's pod carries the label `quotient.dev/leader: "true"`, and only while it leads: Service `quotient`
selects that label, so kube-scheduler's verbs reach the leader alone while every synced replica is Ready
(a PodDisruptionBudget and rolling updates then work as for any Deployment).

The label follows `leading` (LeaderElector.leading): set right after the Lease is taken, removed when
leadership ends (a renewal that failed, the Lease lost) and at stop (SIGTERM: after the Lease is released).
At start it is removed whatever the replica believes: a container restarted in place keeps its pod's labels.
A write that fails is logged, counted (quotient_leader_label_failures_total) and tried again every
retry_seconds while the label is wrong; it never stops the replica, and the verbs never depend on it: a
replica that does not lead answers them 503 whatever its pod says. So a leader cut off from the API server
keeps its label until it can write again (or until its pod is no longer Ready); the Service then has two
endpoints, and kube-scheduler's calls that reach the old one get 503 and are retried.

Each write is a JSON merge patch of metadata.labels (null removes the key), which needs pods patch on the
pod's namespace (RBAC), nothing else."""
from __future__ import annotations

import asyncio
import logging
from typing import Callable

from kubernetes_asyncio import client
from kubernetes_asyncio.client.exceptions import ApiException

from .act.writer import UNREACHABLE

log = logging.getLogger("quotient.leader")
LABEL = "quotient.dev/leader"


class LeaderLabel:
    def __init__(self, api: client.ApiClient, namespace: str, pod: str, leading: Callable[[], bool],
                 retry_seconds: float = 1.0, poll: float = 1.0, timeout: float = 5.0, metrics=None):
        self.api = client.CoreV1Api(api)
        self.namespace, self.pod, self.leading = namespace, pod, leading
        self.retry_seconds, self.poll, self.timeout = retry_seconds, poll, timeout
        self.failures = metrics.leader_label_failures if metrics is not None else None
        self.labelled: bool | None = None      # what the pod carries as last written; None: not known yet
        self._wake = asyncio.Event()
        self._stopping = False

    def wake(self) -> None:
        """Look at `leading` now (the elector calls it after each attempt on the Lease)."""
        self._wake.set()

    def stop(self) -> None:
        self._stopping = True
        self._wake.set()

    async def run(self) -> None:
        while not self._stopping:
            want = bool(self.leading())
            wait = self.poll      # a leadership that lapses with no attempt (time passing) is seen within poll
            if want != self.labelled and not await self._write(want):
                wait = self.retry_seconds
            try:
                await asyncio.wait_for(self._wake.wait(), wait)
            except asyncio.TimeoutError:
                pass
            self._wake.clear()
        if self.labelled is not False:      # stopping: whatever the last write said, the label goes (once)
            await self._write(False)

    async def _write(self, leader: bool) -> bool:
        patch = {"metadata": {"labels": {LABEL: "true" if leader else None}}}
        try:
            response = await asyncio.wait_for(
                self.api.patch_namespaced_pod(self.pod, self.namespace, patch, _preload_content=False,
                                              _content_type="application/merge-patch+json",
                                              _request_timeout=self.timeout), self.timeout)
            await response.read()
            response.release()
            if not 200 <= response.status < 300:     # a raw answer (_preload_content=False) is not checked for us
                raise ApiException(status=response.status, reason=response.reason)
        except (ApiException, *UNREACHABLE) as e:
            if self.failures is not None:
                self.failures.inc()
            log.warning("cannot %s label %s on pod %s/%s: %s%s", "set the" if leader else "remove the", LABEL,
                        self.namespace, self.pod, _why(e), "; tried again" if not self._stopping else "")
            return False
        self.labelled = leader
        log.info("pod %s/%s %s %s: Service quotient sends the verbs %s", self.namespace, self.pod,
                 "labelled" if leader else "no longer labelled", LABEL, "here" if leader else "elsewhere")
        return True


def _why(e: Exception) -> str:
    if isinstance(e, ApiException):
        if e.status == 403:
            return "403 Forbidden: the service account needs pods get and patch in this namespace (RBAC)"
        if e.status == 404:
            return "404: no such pod (POD_NAME and POD_NAMESPACE come from the downward API)"
        return f"{e.status} {e.reason}"
    return type(e).__name__ if isinstance(e, asyncio.TimeoutError) else str(e) or type(e).__name__
