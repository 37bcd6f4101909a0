"""Kueue's own scheduler performance test (issue 32) through the live path: is Quotient the bottleneck when
15,000 workloads wait?

    .venv/bin/python tests/bench/bench_kueue_scale.py [--scale 0.1] [--timeout 600] [--baseline CHECKOUT]
                                                      [--design extender|gated|both] [--gates] [--pregated]
                                                      [--keep DIR] [--profile FILE]

Not a pytest test (tests/bench/conftest.py keeps pytest out; tests/test_bench_kueue_scale_smoke.py runs a
tiny --scale). The workload is kubernetes-sigs/kueue test/performance/scheduler/configs/baseline
(generator.yaml, runner/generator/generator.go), one plain pod per workload:

  5 cohorts (cohort-C) x 6 ClusterQueues (cq-0-I-cohort-C): ResourceFlavor rf, cpu nominalQuota 20,
  borrowingLimit 100, preemption reclaimWithinCohort Any / withinClusterQueue LowerPriority, and what
  Kueue's MakeClusterQueue sets: namespaceSelector {}, queueingStrategy BestEffortFIFO, flavorFungibility
  whenCanBorrow Borrow / whenCanPreempt TryNextFlavor. One Namespace and one LocalQueue per ClusterQueue,
  both named as the ClusterQueue. Per ClusterQueue, three creators side by side, each waiting its interval
  before every pod (generateWlSet): 350 small (1 cpu, runs 200 ms, priority 50, every 100 ms), 100 medium
  (5 cpu, 500 ms, priority 100, every 500 ms), 50 large (20 cpu, 1 s, priority 200, every 1.2 s). Priority
  by PriorityClass (priorityClassName, and spec.priority as the API server's Priority admission sets it).
  Nodes of 40 cpu holding twice the quota, so that quota decides.

Three processes: the fake API (tests/fakeapi.py, rig.py), `quotient serve --kubeconfig` (plain HTTP to the
API, the verbs on plain HTTP as scheduler-config/http.yaml ships them: filter, preempt, bind), and this
one, which creates the pods on their schedule, plays kube-scheduler v1.36's scheduling queue and a kubelet:

  informer   a pods watch: a new unbound pod enters activeQ; an update replaces the pod it sends; a
             deleted pod leaves the queues (an evicted, unfinished one is created again as a new pod,
             name suffix -rN, keeping its workload's creation time for time to admission).
  activeQ    a heap by priority (high first) then the time the pod entered the queue
             (active_queue.go, PrioritySort's Less).
  cycles     one at a time (scheduleOne): the in-tree NodeResourcesFit filter on the client's node cache
             (assumed and bound pods), then the extender's filter with every fitting node name
             (nodeCacheCapable: true, the body of ../shared/wire/filter-nodecache-true.request.json), then
             MostAllocated (the fullest fitting node), the pod assumed and bound in a task of its own: the
             next cycle does not wait (schedule_one.go, bindingCycle in a goroutine). preempt is never
             called: nodes have room, so kube-scheduler's dry run finds no victims.
  failures   handleSchedulingFailure: the pod's Timestamp is now, the PodScheduled=False condition is
             patched when it changed (reason Unschedulable, or SchedulerError for an "Error" answer, an
             HTTP error or a bind failure). Its rejector plugins are the in-tree ones that rejected a
             node: with none (every refusal of Quotient's here, FailedNodes, FailedAndUnresolvableNodes or
             Error alike: findNodesThatPassExtenders sets statuses with no plugin) the pod goes to the
             backoff queue, and backoffQueue.add puts a pod with no unschedulable and no pending plugins
             in podErrorBackoffQ. With NodeResourcesFit (no node had room) it waits in unschedulablePods
             until a pod leaves a node (its queueing hint), then backs off.
  backoff    backoff_queue.go with SchedulerPopFromBackoffQ (on since 1.33): 1 s doubling per attempt up
             to 10 s (podInitialBackoff, podMaxBackoff), the expiry truncated to its 1 s ordering window;
             a pod is done backing off once the current window is past its expiry; both queues are flushed
             to activeQ every whole second. When activeQ is empty the scheduler pops podBackoffQ early
             (popBackoff: podBackoffQ only, never podErrorBackoffQ).
  kubelet    a bound pod is patched status.phase Succeeded its runtime after its bind succeeded.

Two designs (--design; --gates is --design gated):

  extender   today's: every pod reaches kube-scheduler at once and Quotient answers filter for each try.
  gated      Kueue's, for plain pods: Quotient runs with a Kueue Configuration whose integrations.frameworks
             lists pod, and serves the mutating webhook POST /mutate-pods on --conversion-port; the fake API
             calls it on every pod CREATE with the queue-name label (tests/fakeapi.py PodWebhook, failurePolicy
             Ignore), so pods are created with spec.schedulingGates [kueue.x-k8s.io/admission]. Quotient removes
             the gate (a strategic merge PATCH) once the pod's ClusterQueue admits it; kube-scheduler then sees it.
             Before the run /mutate-pods is probed: a 404 (the route not on this branch) makes the gated run
             not meaningful, and it is not run. --pregated creates the pods with the gate already set and
             calls no webhook: it measures Quotient's side alone (ungate, filter, bind), not the webhook.
  both       the extender design, then the gated one, in one invocation, printed side by side with their ratios.

The kube-scheduler model for gated pods (pkg/scheduler/backend/queue/scheduling_queue.go, the
SchedulingGates plugin, v1.36): a pod with any schedulingGates fails PreEnqueue and is parked in
unschedulablePods, gated, without a scheduling attempt (no filter call, no attempt counted, no backoff);
movePodsToActiveOrBackoffQueue skips such pods (`pInfo.Gated && UnschedulablePlugins.Has(SchedulingGates)`,
kubernetes #124384), so node events and flushUnschedulablePodsLeftover never move them. An update of the pod
that removes its last gate (the event UpdatePodSchedulingGatesEliminated, whose SchedulingGates queueing hint
is Queue) moves it from unschedulablePods: never attempted, it is not backing off, so moveToActiveQ puts it in
activeQ at once, ordered by its Timestamp from when it was first added. A gate removed while others remain
keeps it parked.

Printed: which design ran; a progress line every 10 s, then the wall time (first create to last admission), per class the
average and maximum time to admission (create -> first successful bind), CPU seconds and average cores of
Quotient, the client and the fake API, filter calls per admitted workload, binds, evictions and every
outcome, next to Kueue's rangespec (configs/baseline/rangespec.yaml: 425 s; large 11 s, medium 90 s,
small 260 s) and the issue's CPU target (Quotient under half a core). A gated run also prints the pods
gated (seen with a gate when first added), ungated (the gate seen removed), filter calls per admitted
workload and the time from ungate (the informer's MODIFIED event) to the successful bind.
"""
from __future__ import annotations

import argparse
import asyncio
import heapq
import itertools
import math
import re
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

import orjson

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[1]
sys.path.insert(0, str(HERE))

from bench_extender import free_port, source_version  # noqa: E402
from rig import Rig, cpu_seconds  # noqa: E402

sys.path.insert(0, str(ROOT))
from app.objects.pod import ADMISSION_GATE  # noqa: E402

KUEUE = "kueue.x-k8s.io/v1beta1"
QUEUE_LABEL = "kueue.x-k8s.io/queue-name"
SCHEDULER = "quotient-scheduler"
IMAGE = "registry.k8s.io/pause:3.10"
COHORTS, CQS_PER_COHORT, NOMINAL, BORROWING = 5, 6, 20, 100
NODE_CPU = 40
# className, count per ClusterQueue, creationIntervalMs, runtimeMs, priority, cpu (generator.yaml)
CLASSES = [("small", 350, 100, 200, 50, 1), ("medium", 100, 500, 500, 100, 5), ("large", 50, 1200, 1000, 200, 20)]
RANGESPEC = {"wall": 425.0, "large": 11.0, "medium": 90.0, "small": 260.0}
MEASURED = {"wall": 351.0, "large": 6.7, "medium": 77.0, "small": 215.0}
PROFILE_WINDOW = (60.0, 10)  # --profile-window: from t seconds, for so many
CPU_TARGET = 0.5
INITIAL_BACKOFF, MAX_BACKOFF = 1.0, 10.0
UNSCHEDULABLE_MAX = 300.0       # podMaxInUnschedulablePodsDuration
EXTENDER_TIMEOUT = 10.0         # httpTimeout of scheduler-config/http.yaml


# ---------------------------------------------------------------- the cluster
def layout(scale: float) -> tuple[int, int, float]:
    """(cohorts, ClusterQueues per cohort, fraction of each ClusterQueue's counts) for --scale: whole cohorts
    of 6 down to one, then fewer workloads per ClusterQueue, so that 15,000 x scale pods are created."""
    cohorts = max(1, min(COHORTS, round(COHORTS * scale)))
    return cohorts, CQS_PER_COHORT, min(1.0, scale * COHORTS / cohorts)


def cluster(scale: float) -> tuple[list[dict], list[str], list[str]]:
    """The objects of Kueue's baseline (docs), the node names and the ClusterQueue names."""
    cohorts, per, _ = layout(scale)
    cqs = [f"cq-0-{i}-cohort-{c}" for c in range(cohorts) for i in range(per)]
    nodes = [f"node-{i:03d}" for i in range(math.ceil(2 * NOMINAL * len(cqs) / NODE_CPU))]
    docs: list[dict] = [{"apiVersion": KUEUE, "kind": "ResourceFlavor", "metadata": {"name": "rf"}, "spec": {}}]
    docs += [{"apiVersion": "scheduling.k8s.io/v1", "kind": "PriorityClass", "metadata": {"name": name},
              "value": prio, "preemptionPolicy": "PreemptLowerPriority"} for name, _, _, _, prio, _ in CLASSES]
    for cq in cqs:
        cohort = cq.split("-", 3)[3]
        docs.append({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": cq}})
        docs.append({"apiVersion": KUEUE, "kind": "ClusterQueue", "metadata": {"name": cq}, "spec": {
            "cohort": cohort, "namespaceSelector": {}, "queueingStrategy": "BestEffortFIFO",
            "flavorFungibility": {"whenCanBorrow": "Borrow", "whenCanPreempt": "TryNextFlavor"},
            "preemption": {"reclaimWithinCohort": "Any", "withinClusterQueue": "LowerPriority"},
            "resourceGroups": [{"coveredResources": ["cpu"], "flavors": [{"name": "rf", "resources": [
                {"name": "cpu", "nominalQuota": str(NOMINAL), "borrowingLimit": str(BORROWING)}]}]}]}})
        docs.append({"apiVersion": KUEUE, "kind": "LocalQueue", "metadata": {"name": cq, "namespace": cq},
                     "spec": {"clusterQueue": cq}})
    docs += [{"apiVersion": "v1", "kind": "Node", "metadata": {"name": n, "labels": {"kubernetes.io/hostname": n}},
              "spec": {}, "status": {"allocatable": {"cpu": str(NODE_CPU), "memory": "256Gi", "pods": "110"},
                                     "capacity": {"cpu": str(NODE_CPU), "memory": "256Gi", "pods": "110"}}}
             for n in nodes]
    return docs, nodes, cqs


KINDS = (("would borrow, but pending pods within their own nominal", "NominalQuotaFirst"),
         ("preempting", "Preempting"), ("waiting for", "WaitingForVictims"), ("held", "RoomHeld"),
         ("StrictFIFO", "StrictFIFO"), ("no preemption", "QuotaExceeded, no preemption"),
         ("available", "QuotaExceeded"))


def refusal_kind(message: str) -> str:
    """The kind of a refusal's message, for the per-class summary."""
    return next((kind for phrase, kind in KINDS if phrase in message), message[:40])


def new_pod(name: str, ns: str, cls: str, pregated: bool = False) -> dict:
    """The pod of one workload as a client POSTs it (the API server adds uid, times, resourceVersion); pregated:
    with Kueue's admission gate already in spec.schedulingGates (--pregated)."""
    _, _, _, _, prio, cpu = next(c for c in CLASSES if c[0] == cls)
    pod = {"apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": name, "namespace": ns, "labels": {QUEUE_LABEL: ns, "class": cls}},
            "spec": {"containers": [{"name": "c", "image": IMAGE, "resources": {"requests": {"cpu": str(cpu)}},
                                     "terminationMessagePath": "/dev/termination-log",
                                     "terminationMessagePolicy": "File", "imagePullPolicy": "IfNotPresent"}],
                     "restartPolicy": "Never", "terminationGracePeriodSeconds": 30, "dnsPolicy": "ClusterFirst",
                     "securityContext": {}, "schedulerName": SCHEDULER, "priorityClassName": cls, "priority": prio,
                     "enableServiceLinks": True, "preemptionPolicy": "PreemptLowerPriority",
                     "tolerations": [{"key": f"node.kubernetes.io/{t}", "operator": "Exists", "effect": "NoExecute",
                                      "tolerationSeconds": 300} for t in ("not-ready", "unreachable")]},
            "status": {"phase": "Pending", "qosClass": "Burstable"}}
    if pregated:
        pod["spec"]["schedulingGates"] = [{"name": ADMISSION_GATE}]
    return pod


def kueue_configuration(gated: bool) -> str:
    """The Configuration Quotient runs with: Kueue's (config.kueue.x-k8s.io/v1beta1), its defaults otherwise,
    with the plain-pod integration (integrations.frameworks [pod]) for the gated design."""
    return ("apiVersion: config.kueue.x-k8s.io/v1beta1\nkind: Configuration\n"
            + ("integrations:\n  frameworks: [pod]\n" if gated else ""))


def schedule(cqs: list[str], fraction: float) -> list[tuple[float, str, str, str]]:
    """(seconds after the start, pod name, namespace, class) of every workload, in time order: each of the
    three creators of a ClusterQueue waits its interval before each pod (generateWlSet's <-time.After)."""
    out = []
    for cq in cqs:
        for set_idx, (cls, count, interval, _, _, _) in enumerate(CLASSES):
            for si in range(max(1, round(count * fraction))):
                out.append(((si + 1) * interval / 1000, f"{cls}-{set_idx}-{si}-0", cq, cls))
    return sorted(out)


# ---------------------------------------------------------------- HTTP/1.1 keep-alive to the extender
class Conn:
    """One keep-alive HTTP/1.1 connection, requests as Go's client sends them (wire/README.md, section 3)."""

    def __init__(self, port: int):
        self.port = port
        self.reader: asyncio.StreamReader | None = None
        self.writer: asyncio.StreamWriter | None = None

    async def post(self, path: str, body: bytes) -> tuple[int, bytes]:
        if self.reader is not None and self.reader.at_eof():
            self.close()                 # the server closed it while idle (uvicorn's keep-alive timeout):
        if self.writer is None:          # Go's transport notices that before reusing it, and so do we
            self.reader, self.writer = await asyncio.open_connection("127.0.0.1", self.port)
        self.writer.write(b"POST %s HTTP/1.1\r\nHost: 127.0.0.1:%d\r\nUser-Agent: Go-http-client/1.1\r\n"
                          b"Content-Length: %d\r\nContent-Type: application/json\r\nAccept-Encoding: gzip\r\n\r\n"
                          % (path.encode(), self.port, len(body)) + body)
        status_line = await self.reader.readline()
        if not status_line:
            raise ConnectionError("connection closed")
        status = int(status_line.split()[1])
        length, chunked, close = 0, False, False
        while True:
            line = await self.reader.readline()
            if line in (b"\r\n", b""):
                break
            name, _, value = line.partition(b":")
            name = name.strip().lower()
            if name == b"content-length":
                length = int(value)
            elif name == b"transfer-encoding" and b"chunked" in value.lower():
                chunked = True
            elif name == b"connection" and b"close" in value.lower():
                close = True
        if chunked:
            parts = []
            while True:
                size = int((await self.reader.readline()).split(b";")[0], 16)
                if size == 0:
                    await self.reader.readline()
                    break
                parts.append(await self.reader.readexactly(size))
                await self.reader.readexactly(2)
            data = b"".join(parts)
        else:
            data = await self.reader.readexactly(length) if length else b""
        if close:
            self.close()
        return status, data

    def close(self) -> None:
        if self.writer is not None:
            self.writer.close()
        self.reader = self.writer = None


class Pool:
    """Idle connections reused (Go's Transport keeps them per host); one per request in flight."""

    def __init__(self, port: int):
        self.port, self.idle = port, []

    async def post(self, path: str, body: bytes) -> tuple[int, bytes]:
        conn = self.idle.pop() if self.idle else Conn(self.port)
        try:
            out = await asyncio.wait_for(conn.post(path, body), EXTENDER_TIMEOUT)
        except BaseException:
            conn.close()
            raise
        self.idle.append(conn)
        return out


# ---------------------------------------------------------------- kube-scheduler's queue, as a model
@dataclass
class Workload:
    cls: str
    ns: str
    base: str
    created: float                   # when its first pod was POSTed (time.time())
    runtime: float
    cpu: int
    prio: int
    admitted: float | None = None    # first successful bind
    incarnation: int = 0


@dataclass(eq=False)
class QPod:
    name: str
    wl: Workload
    obj: dict
    body: bytes = b""                # the pod as sent to the extender, for obj's resourceVersion
    body_rv: str = ""
    where: str = "active"            # active, backoff, errorBackoff, unschedulable, inflight, bound, done, gone
    gen: int = 0                     # bumped on every move: heap entries of an older gen are stale
    attempts: int = 0
    timestamp: float = 0.0
    backoff_exp: float | None = None
    node: str = ""
    condition: tuple[str, str] = ("", "")
    unschedulable_since: float = 0.0
    finished: bool = False
    ungated_at: float | None = None  # when the informer saw its last gate removed


@dataclass
class Stats:
    outcomes: Counter = field(default_factory=Counter)
    filter_calls: int = 0
    bind_calls: int = 0
    evictions: int = 0
    status_patches: int = 0
    early_pops: int = 0
    api_errors: int = 0
    reasons: Counter = field(default_factory=Counter)    # refusal messages, digits as N
    last_reason: dict = field(default_factory=dict)       # the last message of each, verbatim
    kinds: Counter = field(default_factory=Counter)       # (class, kind of refusal): refusals per workload class
    filter_s: list = field(default_factory=list)          # each filter's round trip, seconds
    bind_s: list = field(default_factory=list)
    gated: int = 0                                         # pods first seen with schedulingGates
    ungated: int = 0                                       # pods seen losing their last gate
    ungate_to_bind: list = field(default_factory=list)     # seconds from that event to the bind's success


class Scheduler:
    """kube-scheduler v1.36's scheduling queue and scheduleOne for one profile with one extender (see the
    module docstring for the source each part follows)."""

    def __init__(self, api_url: str, token: str, ext_port: int, nodes: list[str], pregated: bool = False):
        import aiohttp

        self.pregated = pregated
        self.api_url, self.token = api_url, token
        self.http = aiohttp.ClientSession(headers={"Authorization": f"Bearer {token}"},
                                          connector=aiohttp.TCPConnector(limit=64))
        self.filter_conn, self.binds = Conn(ext_port), Pool(ext_port)
        self.free = {n: NODE_CPU for n in nodes}
        self.nodes = list(nodes)
        self.next_start = 0
        self.pods: dict[tuple[str, str], QPod] = {}
        self.workloads: dict[tuple[str, str], Workload] = {}      # (ns, name of any of its pods) -> workload
        self.active: list = []
        self.backoff: list = []                  # podBackoffQ: (expiry, -priority, timestamp, seq, gen, pod)
        self.error_backoff: list = []            # podErrorBackoffQ: (expiry, seq, gen, pod)
        self.unschedulable: set[QPod] = set()
        self.seq = itertools.count()
        self.wake = asyncio.Event()
        self.stats = Stats()
        self.tasks: set[asyncio.Task] = set()
        self.rv = "0"
        self.admissions: list[float] = []        # times of first admissions
        self.last_admission = 0.0
        self.bound_cpu = self.peak_cpu = 0      # cpu of the pods bound and not finished, and its peak

    # -- queue moves
    def _key(self, p: QPod) -> tuple[str, str]:
        return p.wl.ns, p.name

    def to_active(self, p: QPod) -> None:
        p.gen += 1
        p.where = "active"
        heapq.heappush(self.active, (-p.wl.prio, p.timestamp, next(self.seq), p.gen, p))
        self.wake.set()

    def backoff_expiry(self, p: QPod) -> float:
        """getBackoffTime: Timestamp + 1 s << (attempts-1), at most 10 s, truncated to its 1 s window."""
        if p.backoff_exp is None:
            duration = min(MAX_BACKOFF, INITIAL_BACKOFF * 2 ** (p.attempts - 1)) if p.attempts else 0.0
            p.backoff_exp = math.floor(p.timestamp + duration)
        return p.backoff_exp

    def backing_off(self, p: QPod, now: float) -> bool:
        """isPodBackingoff: the expiry is not before the current window."""
        return p.attempts > 0 and not self.backoff_expiry(p) < math.floor(now)

    def to_backoff(self, p: QPod, rejectors: bool) -> None:
        """moveToBackoffQ: activeQ at once when done backing off, else podBackoffQ when plugins rejected
        the pod, podErrorBackoffQ when none did (backoffQueue.add)."""
        if not self.backing_off(p, time.time()):
            self.to_active(p)
            return
        p.gen += 1
        if rejectors:
            p.where = "backoff"
            heapq.heappush(self.backoff, (self.backoff_expiry(p), -p.wl.prio, p.timestamp, next(self.seq), p.gen, p))
        else:
            p.where = "errorBackoff"
            heapq.heappush(self.error_backoff, (self.backoff_expiry(p), next(self.seq), p.gen, p))

    def remove(self, p: QPod, where: str) -> None:
        p.gen += 1
        self.unschedulable.discard(p)
        p.where = where

    async def flusher(self) -> None:
        """flushBackoffQCompleted every whole second (waitUntilAlignedWithOrderingWindow), and
        flushUnschedulablePodsLeftover (pods parked longer than podMaxInUnschedulablePodsDuration)."""
        while True:
            now = time.time()
            await asyncio.sleep(math.floor(now) + 1 - now)
            now = time.time()
            window = math.floor(now)
            for heap, gen_at in ((self.backoff, 4), (self.error_backoff, 2)):
                while heap:
                    entry = heap[0]
                    p = entry[-1]
                    if entry[gen_at] != p.gen:
                        heapq.heappop(heap)
                        continue
                    if not entry[0] < window:
                        break
                    heapq.heappop(heap)
                    self.to_active(p)
            for p in [p for p in self.unschedulable if now - p.unschedulable_since > UNSCHEDULABLE_MAX]:
                self.unschedulable.discard(p)
                self.to_backoff(p, rejectors=True)

    def node_freed(self) -> None:
        """An assigned pod left a node: NodeResourcesFit's queueing hint moves the pods it rejected."""
        for p in list(self.unschedulable):
            self.unschedulable.discard(p)
            self.to_backoff(p, rejectors=True)

    async def pop(self) -> QPod:
        """activeQ's head; when activeQ is empty, podBackoffQ's head early (unlockedPop, popBackoff)."""
        while True:
            while self.active:
                _, _, _, gen, p = heapq.heappop(self.active)
                if gen == p.gen:
                    return p
            while self.backoff:
                entry = heapq.heappop(self.backoff)
                p = entry[-1]
                if entry[4] == p.gen:
                    self.stats.early_pops += 1
                    return p
            self.wake.clear()
            await self.wake.wait()

    # -- the informer
    def sent_body(self, p: QPod, nodes: list[str]) -> bytes:
        if p.body_rv != p.obj["metadata"].get("resourceVersion"):
            p.body = orjson.dumps(p.obj)
            p.body_rv = p.obj["metadata"].get("resourceVersion")
        return b'{"Pod":' + p.body + b',"Nodes":null,"NodeNames":' + orjson.dumps(nodes) + b"}"

    def on_event(self, etype: str, obj: dict) -> None:
        meta, spec = obj["metadata"], obj.get("spec") or {}
        key = (meta.get("namespace", ""), meta["name"])
        if spec.get("schedulerName") != SCHEDULER:
            return
        obj.setdefault("kind", "Pod")
        obj.setdefault("apiVersion", "v1")
        p = self.pods.get(key)
        if etype == "DELETED":
            if p is None:
                return
            del self.pods[key]
            was = p.where
            self.remove(p, "gone")
            if was in ("bound", "inflight") and p.node:
                self.bound_cpu -= p.wl.cpu if was == "bound" else 0
                self.free[p.node] += p.wl.cpu
                self.node_freed()
            if not p.finished:          # evicted by Quotient: Kueue's test requeues the workload
                self.stats.evictions += 1
                self.spawn(self.recreate(p.wl))
            return
        phase = (obj.get("status") or {}).get("phase")
        if p is None:
            if etype == "ADDED" and not spec.get("nodeName") and phase not in ("Succeeded", "Failed"):
                wl = self.workloads.get(key)
                if wl is None:
                    return
                p = QPod(meta["name"], wl, obj, timestamp=time.time())
                self.pods[key] = p
                if spec.get("schedulingGates"):
                    # PreEnqueue (SchedulingGates) fails: parked in unschedulablePods, gated, never tried
                    self.stats.gated += 1
                    p.gen += 1
                    p.where = "gated"
                else:
                    self.to_active(p)
            return
        p.obj = obj
        if p.where == "gated" and not spec.get("schedulingGates"):
            # UpdatePodSchedulingGatesEliminated -> Queue; never attempted, so not backing off: activeQ now
            self.stats.ungated += 1
            p.ungated_at = time.time()
            self.to_active(p)
        if spec.get("nodeName") and p.where not in ("bound", "inflight", "done"):
            self.remove(p, "bound")      # bound by another hand: no longer the queue's
            p.node = spec["nodeName"]
            self.free[p.node] -= p.wl.cpu

    async def informer(self) -> None:
        """List, then watch pods from that resourceVersion (client-go's reflector), forever."""
        while True:
            try:
                async with self.http.get(f"{self.api_url}/api/v1/pods") as r:
                    listed = orjson.loads(await r.read())
                self.rv = listed["metadata"]["resourceVersion"]
                for item in listed["items"]:
                    if (item["metadata"].get("namespace", ""), item["metadata"]["name"]) not in self.pods:
                        self.on_event("ADDED", item)
                params = {"watch": "1", "resourceVersion": self.rv, "allowWatchBookmarks": "true"}
                async with self.http.get(f"{self.api_url}/api/v1/pods", params=params, timeout=None) as r:
                    async for line in r.content:
                        if not line.strip():
                            continue
                        ev = orjson.loads(line)
                        if ev["type"] == "ERROR":
                            break
                        if ev["type"] == "BOOKMARK":
                            continue
                        self.rv = ev["object"]["metadata"].get("resourceVersion", self.rv)
                        self.on_event(ev["type"], ev["object"])
            except asyncio.CancelledError:
                raise
            except Exception as e:      # noqa: BLE001 -- a reflector relists and watches again
                print(f"  informer: {type(e).__name__}: {e}; relisting", flush=True)
                await asyncio.sleep(0.5)

    # -- writes
    def spawn(self, coro) -> None:
        task = asyncio.ensure_future(coro)
        self.tasks.add(task)
        task.add_done_callback(self.tasks.discard)

    async def create(self, wl: Workload, name: str) -> None:
        self.workloads[(wl.ns, name)] = wl
        async with self.http.post(f"{self.api_url}/api/v1/namespaces/{wl.ns}/pods",
                                  data=orjson.dumps(new_pod(name, wl.ns, wl.cls, self.pregated)),
                                  headers={"Content-Type": "application/json"}) as r:
            if r.status != 201:
                self.stats.api_errors += 1
                print(f"  create {wl.ns}/{name}: {r.status} {(await r.text())[:200]}", flush=True)

    async def recreate(self, wl: Workload) -> None:
        wl.incarnation += 1
        await self.create(wl, f"{wl.base}-r{wl.incarnation}")

    async def patch_status(self, p: QPod, status: dict) -> bool:
        async with self.http.patch(f"{self.api_url}/api/v1/namespaces/{p.wl.ns}/pods/{p.name}/status",
                                   data=orjson.dumps({"status": status}),
                                   headers={"Content-Type": "application/strategic-merge-patch+json"}) as r:
            await r.read()
            if r.status != 200 and r.status != 404:
                self.stats.api_errors += 1
            return r.status == 200

    async def finish(self, p: QPod) -> None:
        """The kubelet: the pod's container ran its runtime and exited 0."""
        await asyncio.sleep(p.wl.runtime)
        if p.where != "bound":
            return
        p.finished = True
        if await self.patch_status(p, {"phase": "Succeeded", "conditions": [
                {"type": "Ready", "status": "False", "reason": "PodCompleted"}]}):
            p.where = "done"
            self.bound_cpu -= p.wl.cpu
            self.free[p.node] += p.wl.cpu
            self.node_freed()

    # -- scheduleOne
    def fail(self, p: QPod, reason: str, message: str, rejectors: bool = False) -> None:
        """handleSchedulingFailure: requeue, and patch PodScheduled=False when the condition changed."""
        p.timestamp = time.time()
        shape = re.sub(r"\d+", "N", message)[:160]
        self.stats.reasons[shape] += 1
        self.stats.last_reason[shape] = message
        self.stats.kinds[p.wl.cls, refusal_kind(message)] += 1
        self.stats.last_reason[p.wl.cls, refusal_kind(message)] = message
        if rejectors:
            p.gen += 1
            p.where = "unschedulable"
            p.unschedulable_since = p.timestamp
            self.unschedulable.add(p)
        else:
            self.to_backoff(p, rejectors=False)
        if (reason, message) != p.condition:
            p.condition = (reason, message)
            self.stats.status_patches += 1
            self.spawn(self.patch_status(p, {"conditions": [{"type": "PodScheduled", "status": "False",
                                                              "reason": reason, "message": message}]}))

    def feasible(self, cpu: int) -> list[str]:
        """NodeResourcesFit's filter on the node cache, from where the last cycle left off."""
        n = len(self.nodes)
        order = [self.nodes[(self.next_start + i) % n] for i in range(n)]
        self.next_start = (self.next_start + 1) % n
        return [node for node in order if self.free[node] >= cpu]

    async def schedule_one(self) -> None:
        p = await self.pop()
        p.attempts += 1
        p.backoff_exp = None
        p.where = "cycle"
        nodes = self.feasible(p.wl.cpu)
        if not nodes:
            self.stats.outcomes["no node fits (in-tree)"] += 1
            self.fail(p, "Unschedulable", f"0/{len(self.nodes)} nodes are available: "
                      f"{len(self.nodes)} Insufficient cpu.", rejectors=True)
            return
        self.stats.filter_calls += 1
        body, sent = self.sent_body(p, nodes), time.perf_counter()
        try:
            status, data = await asyncio.wait_for(self.filter_conn.post("/filter", body), EXTENDER_TIMEOUT)
            self.stats.filter_s.append(time.perf_counter() - sent)
        except (OSError, asyncio.TimeoutError, ValueError, asyncio.IncompleteReadError) as e:
            self.filter_conn.close()
            self.stats.outcomes["filter transport error"] += 1
            self.fail(p, "SchedulerError", f"Post filter: {type(e).__name__}")
            return
        if status != 200:
            self.stats.outcomes[f"filter HTTP {status}"] += 1
            self.fail(p, "SchedulerError", f"failed filter with extender, code {status}")
            return
        if p.where == "gone":                # deleted while its cycle ran
            return
        answer = orjson.loads(data)
        if answer.get("Error"):
            self.stats.outcomes["filter Error"] += 1
            self.fail(p, "SchedulerError", answer["Error"])
            return
        passed = [n for n in (answer.get("NodeNames") or []) if n in self.free]
        if not passed:
            failed = answer.get("FailedNodes") or {}
            unresolvable = answer.get("FailedAndUnresolvableNodes") or {}
            self.stats.outcomes["filter FailedAndUnresolvableNodes" if unresolvable else "filter FailedNodes"] += 1
            reasons = Counter(list(failed.values()) + list(unresolvable.values()))
            self.fail(p, "Unschedulable", f"0/{len(self.nodes)} nodes are available: " +
                      ", ".join(f"{c} {r}" for r, c in sorted(reasons.items())) + ".")
            return
        self.stats.outcomes["filter passed"] += 1
        node = min(passed, key=lambda n: (self.free[n] - p.wl.cpu, n))      # MostAllocated: the fullest after
        self.free[node] -= p.wl.cpu          # assume
        p.node, p.where = node, "inflight"
        self.spawn(self.bind(p, node))

    async def bind(self, p: QPod, node: str) -> None:
        """The binding cycle in a task of its own: the extender's bind verb."""
        self.stats.bind_calls += 1
        body = orjson.dumps({"PodName": p.name, "PodNamespace": p.wl.ns, "PodUID": p.obj["metadata"]["uid"],
                             "Node": node})
        error, sent = "", time.perf_counter()
        try:
            status, data = await self.binds.post("/bind", body)
            self.stats.bind_s.append(time.perf_counter() - sent)
            if status != 200:
                error = f"failed bind with extender, code {status}"
            else:
                error = (orjson.loads(data) if data.strip() else {}).get("Error") or ""
        except (OSError, asyncio.TimeoutError, ValueError, asyncio.IncompleteReadError) as e:
            error = f"Post bind: {type(e).__name__}"
        if p.where != "inflight":            # deleted meanwhile
            self.stats.outcomes["bind of a pod gone meanwhile"] += 1
            return
        if error:
            self.stats.outcomes["bind error"] += 1
            self.free[node] += p.wl.cpu      # forget the assumed pod
            p.node = ""
            self.fail(p, "SchedulerError", error)
            return
        self.stats.outcomes["bind ok"] += 1
        p.where = "bound"
        self.bound_cpu += p.wl.cpu
        self.peak_cpu = max(self.peak_cpu, self.bound_cpu)
        now = time.time()
        self.last_admission = now
        if p.wl.admitted is None:
            p.wl.admitted = now
            self.admissions.append(now)
        if p.ungated_at is not None:
            self.stats.ungate_to_bind.append(now - p.ungated_at)
        self.spawn(self.finish(p))

    async def run(self) -> None:
        while True:
            await self.schedule_one()

    def counts(self) -> dict[str, int]:
        c = Counter(p.where for p in self.pods.values())
        return c


# ---------------------------------------------------------------- one run
async def drive(api: dict, ext_port: int, nodes: list[str], plan: list, quotient_pid: int, timeout: float,
                profile: str | None, pregated: bool = False) -> dict:
    sched = Scheduler(api["url"], api["token"], ext_port, nodes, pregated)
    workloads: list[Workload] = []
    informer = asyncio.ensure_future(sched.informer())
    flusher = asyncio.ensure_future(sched.flusher())
    loop_task = asyncio.ensure_future(sched.run())
    await asyncio.sleep(0.5)                  # the informer listed and watches
    cpu0 = {"quotient": cpu_seconds(quotient_pid), "api": cpu_seconds(api["pid"]), "client": sum(os.times()[:2])}
    start = time.time()
    last = {"t": start, "q": cpu0["quotient"], "c": cpu0["client"], "a": cpu0["api"]}
    timeline: list[str] = []
    spy = None

    def progress() -> None:
        now = time.time()
        q, c, a = cpu_seconds(quotient_pid), sum(os.times()[:2]), cpu_seconds(api["pid"])
        span = max(now - last["t"], 1e-6)
        where = sched.counts()
        pending = sum(where[k] for k in ("active", "backoff", "errorBackoff", "unschedulable", "cycle", "gated"))
        line = (f"  t={now - start:6.1f}s  admitted {len(sched.admissions):5d}/{len(plan)}  created "
                f"{len(workloads):5d}  pending {pending:5d} (gated {where['gated']}, activeQ {where['active']}, backoff "
                f"{where['backoff'] + where['errorBackoff']}, unschedulable {where['unschedulable']})  running "
                f"{where['bound'] + where['inflight']:3d}  CPU last {span:.0f}s: Quotient {(q - last['q']) / span:4.0%}"
                f" client {(c - last['c']) / span:4.0%} API {(a - last['a']) / span:4.0%}  filter calls "
                f"{sched.stats.filter_calls}")
        print(line, flush=True)
        timeline.append(line)
        last.update(t=now, q=q, c=c, a=a)

    async def ticker() -> None:
        while True:
            await asyncio.sleep(10)
            progress()

    async def creator() -> None:
        for at, name, ns, cls in plan:
            delay = start + at - time.time()
            if delay > 0:
                await asyncio.sleep(delay)
            _, _, _, runtime, prio, cpu = next(c for c in CLASSES if c[0] == cls)
            wl = Workload(cls, ns, name, time.time(), runtime / 1000, cpu, prio)
            workloads.append(wl)
            sched.spawn(sched.create(wl, name))

    tick = asyncio.ensure_future(ticker())
    create = asyncio.ensure_future(creator())
    timed_out = False
    try:
        while True:
            await asyncio.sleep(0.2)
            elapsed = time.time() - start
            if profile and spy is None and elapsed >= min(PROFILE_WINDOW[0], timeout / 2):
                found = Path(sys.executable).with_name("py-spy")
                spy = subprocess.Popen([str(found) if found.exists() else "py-spy", "record", "--pid", str(quotient_pid),
                                        "-d", str(PROFILE_WINDOW[1]), "-r", "100",
                                        "--nonblocking", "-f", "raw", "-o", profile],
                                       stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
            if create.done() and len(sched.admissions) == len(plan) and \
                    all(p.where in ("bound", "done") for p in sched.pods.values()):
                break
            if elapsed > timeout:
                timed_out = True
                break
    finally:
        end = time.time()
        cpu1 = {"quotient": cpu_seconds(quotient_pid), "api": cpu_seconds(api["pid"]), "client": sum(os.times()[:2])}
        for t in (tick, create, loop_task, flusher, informer, *sched.tasks):
            t.cancel()
        await asyncio.gather(tick, create, loop_task, flusher, informer, *sched.tasks, return_exceptions=True)
        await sched.http.close()
        if spy is not None:
            if spy.poll() is None:  # the run ended inside the window: py-spy writes what it has on SIGINT
                spy.send_signal(signal.SIGINT)
            spy.wait(30)
    progress()
    wall = (sched.last_admission if not timed_out else end) - start
    per_class = {}
    for cls, *_ in CLASSES:
        times = [w.admitted - w.created for w in workloads if w.cls == cls and w.admitted is not None]
        waiting = [end - w.created for w in workloads if w.cls == cls and w.admitted is None]
        per_class[cls] = {"n": len([w for w in workloads if w.cls == cls]), "admitted": len(times),
                          "avg": sum(times) / len(times) if times else float("nan"),
                          "max": max(times) if times else float("nan"),
                          "waiting_max": max(waiting) if waiting else 0.0}
    return {"wall": wall, "timed_out": timed_out, "planned": len(plan), "created": len(workloads),
            "admitted": len(sched.admissions), "classes": per_class,
            "cpu": {k: cpu1[k] - cpu0[k] for k in cpu0}, "run_seconds": end - start, "stats": sched.stats,
            "peak_cpu": sched.peak_cpu, "quota": NOMINAL * len({w.ns for w in workloads}),
            "timeline": timeline}


def probe_webhook(url: str, wait: float = 10.0) -> str:
    """"" when POST url answers an AdmissionReview for a plain pod with the queue-name label, else why not
    (a 404: the /mutate-pods route is not on this branch)."""
    import httpx

    review = {"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview", "request": {
        "uid": "bench-probe", "kind": {"group": "", "version": "v1", "kind": "Pod"},
        "resource": {"group": "", "version": "v1", "resource": "pods"}, "operation": "CREATE",
        "namespace": "probe", "name": "probe", "object": new_pod("probe", "probe", "small")}}
    deadline = time.time() + wait
    while True:
        try:
            with httpx.Client(trust_env=False, timeout=5) as client:
                r = client.post(url, content=orjson.dumps(review), headers={"Content-Type": "application/json"})
            break
        except httpx.HTTPError as e:
            if time.time() > deadline:
                return f"POST {url}: {type(e).__name__}: {e}"
            time.sleep(0.3)
    if r.status_code != 200:
        return f"POST {url} answered {r.status_code}" + (" (no /mutate-pods route on this branch)"
                                                          if r.status_code == 404 else "")
    try:
        answer = orjson.loads(r.content)
    except orjson.JSONDecodeError:
        return f"POST {url} answered 200 with no JSON"
    if (answer.get("response") or {}).get("uid") != "bench-probe":
        return f"POST {url} answered no AdmissionReview response for the probe's uid"
    return ""


def run(kind: str, scale: float, workdir: str, timeout: float, baseline: str | None, profile: str | None,
        design: str = "extender", pregated: bool = False) -> dict:
    """One run of the workload with Quotient from this checkout (kind quotient) or --baseline's, in one design."""
    docs, nodes, cqs = cluster(scale)
    plan = schedule(cqs, layout(scale)[2])
    gated = design == "gated"
    pregated = pregated and gated            # --design both --pregated: the extender run creates plain pods
    label = kind if not gated else f"{kind}-gated" + ("-pregated" if pregated else "")
    rig = Rig(workdir)
    try:
        port, webhook_port, log = free_port(), free_port(), f"{label}.log"
        webhook = f"http://127.0.0.1:{webhook_port}/mutate-pods"
        api = rig.fake_api(docs, f"fakeapi-{label}.log", pod_webhook=webhook if gated and not pregated else None)
        config = Path(workdir, f"config-{label}.yaml")
        config.write_text(kueue_configuration(gated))
        argv = [str(Path(sys.executable).with_name("quotient")), "serve", "--kubeconfig", api["kubeconfig"],
                "--host", "127.0.0.1", "--port", str(port), "--config", str(config)]
        if gated:
            argv += ["--conversion-port", str(webhook_port)]
        if kind == "baseline":
            rig.env["PYTHONPATH"] = baseline
        proc = rig.start(argv, log)
        rig.wait_ready(proc, f"http://127.0.0.1:{port}", log)
        how = {"extender": "design extender-only (every pod reaches kube-scheduler, Quotient filters each try)",
               "gated": "design gated (" + ("pods created with the gate already set: --pregated, no webhook" if
                                            pregated else f"pods gated by Quotient's webhook {webhook}") +
                        "; Quotient ungates, kube-scheduler then filters and binds)"}[design]
        print(f"{label}: {how}", flush=True)
        not_meaningful = probe_webhook(webhook) if gated else ""
        if not_meaningful and not pregated:
            print(f"{label}: NOT MEANINGFUL, not run: {not_meaningful}; the gated design needs Quotient's "
                  "/mutate-pods (or --pregated to measure Quotient's side alone)", flush=True)
            return {"kind": label, "design": design, "pregated": pregated, "skipped": not_meaningful}
        if not_meaningful:
            print(f"{label}: the webhook is not served ({not_meaningful}); --pregated does not need it", flush=True)
        print(f"{label}: {len(cqs)} ClusterQueues in {len(cqs) // CQS_PER_COHORT} cohorts, {len(nodes)} nodes of "
              f"{NODE_CPU} cpu, {len(plan)} workloads over {plan[-1][0]:.0f} s; Quotient pid {proc.pid}", flush=True)
        result = asyncio.run(drive(api, port, nodes, plan, proc.pid, timeout, profile, pregated))
        if gated and not pregated:
            import httpx
            with httpx.Client(trust_env=False, timeout=5) as client:
                result["webhook"] = client.get(f"http://127.0.0.1:{api['control']}/webhooks").json()
        if proc.poll() is not None:
            print(f"Quotient exited with {proc.returncode}:\n{rig.log(log)}")
        return {**result, "kind": label, "design": design, "pregated": pregated}
    finally:
        rig.close()


def report(r: dict, scale: float) -> None:
    if r.get("skipped"):
        print(f"\n{r['kind']}: design {r['design']} NOT MEANINGFUL (not run): {r['skipped']}", flush=True)
        return
    s: Stats = r["stats"]
    wall, cpu = r["wall"], r["cpu"]
    span = r["run_seconds"]
    scaled = "" if scale == 1 else f" (Kueue's figures are for the full run; this is --scale {scale})"
    print(f"\n{r['kind']}: {r['admitted']}/{r['planned']} workloads admitted"
          + (f", TIMED OUT after {span:.0f} s" if r["timed_out"] else "") + scaled)
    print(f"  design: {r['design']}" + (" (--pregated: pods created gated, no webhook)" if r["pregated"] else ""))
    if r["design"] == "gated":
        hook = r.get("webhook")
        if hook is not None:
            print(f"  webhook: {hook['calls']} AdmissionReviews, {hook['failures']} failed and ignored"
                  + (f" (last: {hook['last'][-1][1][:200]})" if hook["failures"] else ""))
        lat = sorted(s.ungate_to_bind)
        admitted = max(r["admitted"], 1)
        print(f"  pods gated {s.gated}, ungated {s.ungated}; filter calls per admitted workload "
              f"{s.filter_calls / admitted:.2f}; ungate to bind "
              + (f"avg {sum(lat) / len(lat) * 1000:.0f} ms  p50 {lat[len(lat) // 2] * 1000:.0f} ms  p99 "
                 f"{lat[min(len(lat) - 1, int(len(lat) * 0.99))] * 1000:.0f} ms  max {lat[-1] * 1000:.0f} ms"
                 if lat else "n/a (no pod ungated and bound)"))
        if s.gated == 0:
            print("  NOTE: no pod was created gated: this run measured the extender path, not the gated design")
        elif s.ungated == 0:
            print("  NOTE: no gate was removed: Quotient did not ungate (is the ungate loop on this branch?)")
    print(f"  wall time (first create to last admission): {wall:.1f} s   Kueue rangespec {RANGESPEC['wall']:.0f} s "
          f"(measured {MEASURED['wall']:.0f} s)")
    for cls, c in r["classes"].items():
        tail = f"; {c['n'] - c['admitted']} not admitted, the oldest waiting {c['waiting_max']:.1f} s" \
            if c["admitted"] < c["n"] else ""
        print(f"  {cls:<6} time to admission avg {c['avg']:7.1f} s  max {c['max']:7.1f} s  ({c['admitted']}/{c['n']})"
              f"   Kueue rangespec avg {RANGESPEC[cls]:.0f} s (measured {MEASURED[cls]:.1f} s){tail}")
    print(f"  CPU over the run ({span:.0f} s): Quotient {cpu['quotient']:.1f} s = {cpu['quotient'] / span:.2f} cores "
          f"(target < {CPU_TARGET}); client {cpu['client']:.1f} s = {cpu['client'] / span:.2f}; fake API "
          f"{cpu['api']:.1f} s = {cpu['api'] / span:.2f}")
    admitted = max(r["admitted"], 1)
    print(f"  filter calls {s.filter_calls} = {s.filter_calls / admitted:.1f} per admitted workload; binds "
          f"{s.bind_calls}; evictions {s.evictions}; PodScheduled patches {s.status_patches}; early pops from "
          f"podBackoffQ {s.early_pops}; API errors {s.api_errors}")
    for verb, lat in (("filter", s.filter_s), ("bind", s.bind_s)):
        if lat:
            lat = sorted(lat)
            print(f"  {verb} round trip p50 {lat[len(lat) // 2] * 1000:.1f} ms  p99 "
                  f"{lat[min(len(lat) - 1, int(len(lat) * 0.99))] * 1000:.1f} ms  max {lat[-1] * 1000:.0f} ms  "
                  f"(filter is inside the serial scheduling cycle: {sum(s.filter_s):.0f} s of the run waited on it)"
                  if verb == "filter" else
                  f"  {verb} round trip p50 {lat[len(lat) // 2] * 1000:.1f} ms  p99 "
                  f"{lat[min(len(lat) - 1, int(len(lat) * 0.99))] * 1000:.1f} ms  max {lat[-1] * 1000:.0f} ms")
    print(f"  peak cpu bound at once {r['peak_cpu']} (the cohorts' nominal quota {r['quota']})")
    print("  outcomes: " + ", ".join(f"{k} {v}" for k, v in sorted(s.outcomes.items())))
    for cls in ("large", "medium", "small"):
        kinds = sorted(((n, k) for (c, k), n in s.kinds.items() if c == cls), reverse=True)
        print(f"  {cls} refused: " + ", ".join(f"{k} {n}" for n, k in kinds[:6]))
        if os.environ.get("BENCH_EXAMPLES"):
            for _, k in kinds[:3]:
                print(f"      e.g. {s.last_reason[cls, k][:600]}")
    for reason, n in s.reasons.most_common(6):
        print(f"    refused {n:6d}x  {reason}")
    for reason, _ in s.reasons.most_common(2):
        print(f"    last of them: {s.last_reason[reason][:700]}")
    ok = not r["timed_out"] and wall <= RANGESPEC["wall"] and cpu["quotient"] / span < CPU_TARGET and \
        all(r["classes"][c]["avg"] <= RANGESPEC[c] for c in ("small", "medium", "large"))
    print(f"  within Kueue's rangespec and the CPU target: {'yes' if ok else 'no'}", flush=True)


def side_by_side(a: dict, b: dict) -> None:
    """The two designs of one invocation next to each other, with b / a."""
    if a.get("skipped") or b.get("skipped"):
        print("\nside by side: not printed, a design was not run (NOT MEANINGFUL above)", flush=True)
        return
    rows = [("workloads admitted", a["admitted"], b["admitted"]), ("wall time s", a["wall"], b["wall"])]
    rows += [(f"{cls} time to admission avg s", a["classes"][cls]["avg"], b["classes"][cls]["avg"])
             for cls in ("large", "medium", "small")]
    rows += [("Quotient CPU cores", a["cpu"]["quotient"] / a["run_seconds"], b["cpu"]["quotient"] / b["run_seconds"]),
             ("client CPU cores", a["cpu"]["client"] / a["run_seconds"], b["cpu"]["client"] / b["run_seconds"]),
             ("fake API CPU cores", a["cpu"]["api"] / a["run_seconds"], b["cpu"]["api"] / b["run_seconds"]),
             ("filter calls per admitted", a["stats"].filter_calls / max(a["admitted"], 1),
              b["stats"].filter_calls / max(b["admitted"], 1)),
             ("PodScheduled patches", a["stats"].status_patches, b["stats"].status_patches)]
    print(f"\nside by side (one invocation): {a['kind']} ({a['design']}) vs {b['kind']} ({b['design']})")
    print(f"  {'':<32}{a['design']:>12}{b['design']:>12}{'ratio':>9}")
    for name, x, y in rows:
        ratio = f"{y / x:8.2f}x" if x and not (isinstance(x, float) and math.isnan(x)) else "       -"
        print(f"  {name:<32}{x:12.2f}{y:12.2f}{ratio}")
    print("", flush=True)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--scale", type=float, default=1.0, help="fraction of the workload: whole cohorts, then fewer "
                    "workloads per ClusterQueue (0.1: one cohort of 6, 1,500 workloads)")
    ap.add_argument("--timeout", type=float, default=1800.0, help="give up after S seconds and print what was reached")
    ap.add_argument("--baseline", metavar="CHECKOUT", help="first run Quotient from this other checkout (PYTHONPATH), "
                    "then this one's")
    ap.add_argument("--profile", metavar="FILE", help="py-spy raw stacks of Quotient, over --profile-window (py-spy next to "
                    "python or on PATH); with --design both, FILE.extender and FILE.gated")
    ap.add_argument("--profile-window", metavar="FROM,SECONDS", default="60,10",
                    help="when --profile starts and how long it records (default %(default)s; 0,600 for a whole run)")
    ap.add_argument("--keep", metavar="DIR", help="keep the logs and the cluster here")
    ap.add_argument("--design", choices=("extender", "gated", "both"), default="extender",
                    help="extender: today's extender-only path; gated: pods gated at CREATE by Quotient's webhook "
                         "and ungated by Quotient; both: one then the other, side by side (default %(default)s)")
    ap.add_argument("--gates", action="store_true", help="the gated design (--design gated)")
    ap.add_argument("--pregated", action="store_true", help="gated design with pods created already gated (no "
                    "webhook): Quotient's side alone")
    a = ap.parse_args(argv)
    global PROFILE_WINDOW
    start, seconds = a.profile_window.split(",")
    PROFILE_WINDOW = (float(start), max(1, round(float(seconds))))
    if (a.gates or a.pregated) and a.design == "extender":
        a.design = "gated"
    designs = ["extender", "gated"] if a.design == "both" else [a.design]
    tmp = None if a.keep else tempfile.TemporaryDirectory(prefix="quotient-bench-kueue-")
    workdir = a.keep or tmp.name
    os.makedirs(workdir, exist_ok=True)
    print(f"Kueue's scheduler performance test (configs/baseline) through fake API + Quotient + a kube-scheduler "
          f"queue model; {source_version()}; {os.cpu_count()} CPUs; --scale {a.scale}; design "
          f"{' then '.join(designs)}" + (" (--pregated)" if a.pregated else ""), flush=True)
    results = []
    try:
        for kind in (["baseline"] if a.baseline else []) + ["quotient"]:
            for design in designs:
                profile = a.profile if kind == "quotient" else None
                if profile and len(designs) == 2:
                    profile = f"{profile}.{design}"
                results.append(run(kind, a.scale, workdir, a.timeout, a.baseline, profile, design, a.pregated))
                report(results[-1], a.scale)
            if len(designs) == 2:
                side_by_side(results[-2], results[-1])
    finally:
        if tmp is not None:
            shutil.rmtree(workdir, ignore_errors=True)
    return 2 if any(r.get("skipped") for r in results) else 0


if __name__ == "__main__":
    sys.exit(main())
