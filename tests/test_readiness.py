"""waitForPodsReady: Kueue's all-or-nothing by readiness, one test (or a few) per rule of the issue.

Seed 003 (Kueue, "使用就绪态 Pod 配置全有或全无调度"), the sections each rule comes from:

  * 启用 waitForPodsReady: the field names and defaults. "timeout ... 默认值为 5 分钟", "recoveryTimeout ...
    该参数无默认值,需显式设置", blockAdmission, requeuingStrategy {timestamp, backoffLimitCount,
    backoffBaseSeconds (默认为 60), backoffMaxSeconds (默认为 3600)}.
  * timeout: "当已准入的 Workload 超过 timeout, 且其 Pod 还未全部调度 ... 该 Workload 的准入会被取消 ...
    Workload 会被重新入队" (a single pod, or a whole pod group).
  * recoveryTimeout: "用于已运行但有一个或多个 Pod 处于未就绪状态(如 Pod 故障)的 Workload ... 如果
    recoveryTimeout 到期,与常规超时类似,Workload 会被驱逐并重新入队".
  * 重新排队策略: "每次超时后,Workload 重新入队的时间会以 2 为底数指数递增 ... 60, 120, 240, ..., 3600, ...,
    3600 秒"; "一旦重新入队次数达到上限,Kueue 会停用该 Workload" (backoffLimitCount).
  * timestamp: "Eviction(默认): ... PodsReadyTimeout 的 lastTransitionTime; Creation: Workload 的
    creationTimestamp. 如果希望 ... 重新入队时回到队列原始位置, 应将 timestamp 设置为 Creation".
  * blockAdmission: "启用后,Workload 会被顺序准入,以防止如下例所示的死锁情况".

Quotient's own rule on top (the issue): pods a controller recreates after an eviction are the same
workload for backoff counting, by owner (ownerReferences) or by pod group (readiness.requeue_key).

The tests build a Scheduler on a snapshot (conftest.build_extender) with a FakeClock and a writer that
records evictions, and call its verbs without HTTP (helpers.Verbs); only /debug/workloads is called over
HTTP. Readiness and phase changes arrive as the watch delivers them (apply_object), and the timeouts are
acted on by Scheduler.reconcile, as the serve loop calls it. A docstring that says "Expected:" records a bug
found while writing this file, now fixed: the reproduction, and what was expected.
"""
from __future__ import annotations

import copy

import pytest

from app.act.writer import SnapshotWriter
from app.config import ConfigError, Configuration, WaitForPodsReady, decode_configuration
from app.core import readiness
from app.core.rules import PODS_READY_TIMEOUT
from app.scheduler.reconcile import pods_ready_timeouts
from app.scheduler.scheduler import Scheduler
from app.core.workload import GROUP, JOB, POD, Readiness, RequeueRecord, WorkloadKey
from app.observe.views import pending_ahead
from app.objects.meta import format_time
from app.objects.pod import decode_pod
from app.sync.dispatch import apply_object
from builders import (BASE_TIME, ClusterQueue, FlavorQuotas, LocalQueue, Node, Pod, ResourceFlavor, snapshot_yaml)
from helpers import FakeClock, Verbs, make_state, one_queue, refused, uid, usage

CPU = 1000
T0 = BASE_TIME                               # pods are created from here on
START = T0 + 100                             # the clock when a test starts
KUEUE_GROUP = "kueue.x-k8s.io/pod-group-name"
KUEUE_TOTAL = "kueue.x-k8s.io/pod-group-total-count"
ALL = ["n1", "n2"]
JOB_X = WorkloadKey(JOB, "team-a", "x", "uid-job-x")     # the Job x's pods as one workload
GROUP_G = WorkloadKey(GROUP, "team-a", "g")


# ---- builders -------------------------------------------------------------------------------------------

def wfpr(**fields) -> Configuration:
    """A Configuration with waitForPodsReady enabled and the given fields (Kueue's names)."""
    return decode_configuration({"waitForPodsReady": {"enable": True, **fields}})


class Recorder:
    """A writer that records evictions and removes the evicted pod, as the API server would."""

    def __init__(self, state):
        self.state = state
        self.evicted: list[tuple[str, str, str]] = []       # (pod key, reason, message)
        self.bindings = 0

    async def bind(self, pod, node: str) -> None:
        self.bindings += 1

    async def evict(self, pod, reason: str, message: str) -> None:
        self.evicted.append((pod.key, reason, message))
        if pod.uid in self.state.pods:
            self.state.remove_pod(pod.uid)


def snapshot(quota: int = 8, strategy: str = "BestEffortFIFO", pending: list[dict] = ()) -> str:
    """ClusterQueue cq ({quota} CPUs) behind LocalQueue q in team-a, two 8-CPU nodes, the pending pods."""
    return snapshot_yaml(*one_queue(quota, strategy), *pending)


def build(build_extender, config: Configuration, **snap):
    """(extender, clock) on snapshot(**snap) with config, a FakeClock at START and a Recorder."""
    clock = FakeClock(START)
    ext = build_extender(snapshot(**snap), config=config, clock=clock, writer=lambda s: Recorder(s))
    return ext, clock


def owned(name: str, job: str, cpu: str = "2", at: float = 0, job_uid: str | None = None) -> dict:
    """A pending pod of Job `job` (ownerReferences, controller: true), created `at` seconds after T0."""
    return Pod(name).queue("q").cpu(cpu).created(at).owner("Job", job, job_uid or f"uid-job-{job}").wire()


def member(name: str, group: str = "g", total: int = 2, cpu: str = "2", at: float = 0) -> dict:
    return Pod(name).queue("q").cpu(cpu).created(at).label(KUEUE_GROUP,
                                                           group).annotation(KUEUE_TOTAL, str(total)).wire()


def key(pod: dict) -> str:
    return f"{pod['metadata']['namespace']}/{pod['metadata']['name']}"


def watch(ext, pod: dict, *, ready: bool | None = None, phase: str | None = None, deleted: bool = False) -> None:
    """Deliver the pod as the watch would: bound where the state has it, with a Ready condition / phase."""
    obj = {"apiVersion": "v1", "kind": "Pod", **copy.deepcopy(pod)}
    known = ext.state.pods.get(uid(pod))
    if known is not None and known.node_name:
        obj["spec"]["nodeName"] = known.node_name
        obj["status"] = {"phase": "Running"}
    if ready is not None:
        obj["status"]["conditions"] = [{"type": "Ready", "status": "True" if ready else "False"}]
    if phase is not None:
        obj["status"]["phase"] = phase
    assert apply_object(ext.state, obj, deleted=deleted) is True


async def admit(verbs: Verbs, pod: dict, offered=ALL) -> str:
    """filter, then bind onto the first node it passed; returns the node."""
    answer = verbs.filter(pod, offered)
    assert answer["NodeNames"], answer
    node = answer["NodeNames"][0]
    assert await verbs.bind(pod, node) == {"Error": ""}
    return node


async def timed_out_and_recreated(ext, clock, x: dict) -> dict:
    """x (a Job's pod, timeout 60s) admitted, never Ready, evicted by reconcile; its Job's new pod x-r1, seen."""
    await admit(Verbs(ext), x)
    clock.advance(60)
    assert await ext.reconcile() == 1
    x_r1 = owned("x-r1", "x", at=clock.now - T0)
    watch(ext, x_r1)
    return x_r1


# ---- Configuration: field names, defaults, validation --------------------------------------------------------

def test_defaults_are_kueues():
    """Seed 003 启用 waitForPodsReady: timeout defaults to 5m, recoveryTimeout has no default, backoffBaseSeconds
    60, backoffMaxSeconds 3600; blockAdmission off, timestamp Eviction, no backoffLimitCount (requeue for ever)."""
    w = decode_configuration({"waitForPodsReady": {"enable": True}}).wait_for_pods_ready
    assert w == WaitForPodsReady(timeout=300.0, recovery_timeout=None, block_admission=False, timestamp="Eviction",
                                 backoff_limit_count=None, backoff_base_seconds=60, backoff_max_seconds=3600)
    assert Configuration().wait_for_pods_ready is None
    assert decode_configuration({}).wait_for_pods_ready is None
    assert decode_configuration({"waitForPodsReady": {"enable": False, "timeout": "1m"}}).wait_for_pods_ready is None


def test_seed_block_is_read_with_kueues_field_names():
    """The seed's own block: timeout 10m, recoveryTimeout 3m, blockAdmission true, requeuingStrategy
    {timestamp, backoffLimitCount 5, backoffBaseSeconds 60, backoffMaxSeconds 3600}."""
    w = wfpr(timeout="10m", recoveryTimeout="3m", blockAdmission=True,
             requeuingStrategy={"timestamp": "Creation", "backoffLimitCount": 5, "backoffBaseSeconds": 60,
                                "backoffMaxSeconds": 3600}).wait_for_pods_ready
    assert (w.timeout, w.recovery_timeout, w.block_admission, w.timestamp) == (600.0, 180.0, True, "Creation")
    assert (w.backoff_limit_count, w.backoff_base_seconds, w.backoff_max_seconds) == (5, 60, 3600)
    assert wfpr(requeuingStrategy={"timestamp": "Eviction"}).wait_for_pods_ready.timestamp == "Eviction"


@pytest.mark.parametrize("raw, named", [
    ({"enable": True, "timout": "1m"}, "waitForPodsReady may hold"),
    ({"enable": True, "podsReadyTimeout": "1m"}, "waitForPodsReady may hold"),
    ({"enable": True, "requeuingStrategy": {"backoffLimit": 3}}, "requeuingStrategy may hold"),
    ({"enable": True, "requeuingStrategy": {"timestamp": "Admission"}}, "Eviction or Creation"),
    ({"enable": True, "requeuingStrategy": {"backoffLimitCount": -1}}, "backoffLimitCount"),
    ({"enable": True, "requeuingStrategy": {"backoffLimitCount": "3"}}, "backoffLimitCount"),
    ({"enable": True, "requeuingStrategy": {"backoffBaseSeconds": True}}, "backoffBaseSeconds"),
    ({"enable": True, "requeuingStrategy": {"backoffMaxSeconds": 1.5}}, "backoffMaxSeconds"),
    ({"enable": True, "requeuingStrategy": ["timestamp"]}, "requeuingStrategy may hold"),
    ({"enable": True, "blockAdmission": "yes"}, "blockAdmission"),
    ({"enable": True, "timeout": "banana"}, "waitForPodsReady.timeout"),
    ({"enable": True, "recoveryTimeout": "-1s"}, "waitForPodsReady.recoveryTimeout"),
    (["enable"], "waitForPodsReady may hold"),
])
def test_unknown_or_bad_fields_are_refused(raw, named):
    """The Configuration is strict: an unknown field, or a value of the wrong kind, is a ConfigError that names
    the field (a typo must not silently leave the default in force)."""
    with pytest.raises(ConfigError, match=named):
        decode_configuration({"waitForPodsReady": raw})


def test_enable_must_be_a_boolean():
    """BUG (app/config.py _wait_for_pods_ready: `if not raw.get("enable", False)`). Reproduction:
    decode_configuration({"waitForPodsReady": {"enable": "false"}}). Expected: ConfigError ("waitForPodsReady.enable
    must be true or false"), as fairSharing.enable and blockAdmission are checked. Actual: the quoted "false" is
    truthy, so waitForPodsReady is turned ON with the defaults (timeout 5m evicts workloads)."""
    with pytest.raises(ConfigError, match="enable"):
        decode_configuration({"waitForPodsReady": {"enable": "false"}})


# ---- core functions ------------------------------------------------------------------------------------------

def test_backoff_doubles_from_base_and_caps_at_max():
    """Seed 003 重新排队策略: "60, 120, 240, ..., 3600, ..., 3600 秒" with the defaults; base and cap configurable."""
    w = WaitForPodsReady()
    assert [w.backoff(n) for n in range(1, 10)] == [60, 120, 240, 480, 960, 1920, 3600, 3600, 3600]
    small = WaitForPodsReady(backoff_base_seconds=10, backoff_max_seconds=100)
    assert [small.backoff(n) for n in range(1, 7)] == [10, 20, 40, 80, 100, 100]


def test_after_eviction_counts_backs_off_then_deactivates_past_the_limit():
    """Seed 003: "Kueue 会将因 PodsReadyTimeout 被驱逐的 Workload 重新入队, 直到重新入队次数达到
    backoffLimitCount ... 一旦重新入队次数达到上限,Kueue 会停用该 Workload". With backoffLimitCount 2: two
    requeues (60s, 120s), the third eviction deactivates. Without backoffLimitCount: requeued for ever, at
    backoffMaxSeconds intervals ("即使退避时间达到 backoffMaxSeconds, Kueue 仍会以 backoffMaxSeconds 的间隔继续
    重新入队")."""
    w, q = WaitForPodsReady(backoff_limit_count=2), RequeueRecord()
    readiness.after_eviction(q, w, 1000.0)
    assert (q.count, q.at, q.deactivated) == (1, 1060.0, False)
    readiness.after_eviction(q, w, 2000.0)
    assert (q.count, q.at, q.deactivated) == (2, 2120.0, False)
    readiness.after_eviction(q, w, 3000.0)
    assert (q.count, q.deactivated) == (3, True)
    endless, q = WaitForPodsReady(), RequeueRecord()
    for n in range(20):
        readiness.after_eviction(q, endless, 10_000.0 * n)
    assert (q.count, q.deactivated, q.at) == (20, False, 190_000.0 + 3600)
    zero, q = WaitForPodsReady(backoff_limit_count=0), RequeueRecord()
    readiness.after_eviction(q, zero, 0.0)
    assert q.deactivated and q.count == 1


def test_timed_out_timeout_then_recovery_timeout():
    """Seed 003 timeout / recoveryTimeout: not all Ready within timeout of admission; or Ready, then not, for
    recoveryTimeout. Without recoveryTimeout a workload that lost readiness is never evicted for it."""
    w = WaitForPodsReady(timeout=60, recovery_timeout=30)
    r = Readiness(admitted_at=1000.0)
    assert readiness.timed_out(r, w, 1059.9) == ""
    assert "not all Ready within waitForPodsReady.timeout 60s" in readiness.timed_out(r, w, 1060.0)
    r.ready_at = 1010.0
    assert readiness.timed_out(r, w, 5000.0) == ""                  # Ready: the timeout no longer applies
    r.unready_at = 5000.0
    assert readiness.timed_out(r, w, 5029.0) == ""
    assert "recoveryTimeout 30s" in readiness.timed_out(r, w, 5030.0)
    assert readiness.timed_out(r, WaitForPodsReady(timeout=60), 99_999.0) == ""


def test_refusal_texts_backoff_and_deactivation():
    """The filter refusal names the reason (PodsReadyTimeout), the eviction count, the backoff and the time it
    ends; a deactivated workload's refusal is final and says how an admin reactivates it."""
    w = WaitForPodsReady(backoff_limit_count=3)
    assert readiness.refusal(None, w, 0.0, "ns/x") == ("", False)
    q = RequeueRecord(count=2, at=2000.0)
    why, final = readiness.refusal(q, w, 1999.0, "team-a/Job/x")
    assert not final
    assert why == ("workload team-a/Job/x was requeued after PodsReadyTimeout eviction #2; it waits out a 120s "
                   f"backoff, until {format_time(2000.0)}")
    assert readiness.refusal(q, w, 2000.0, "team-a/Job/x") == ("", False)
    q.deactivated, q.count = True, 4
    why, final = readiness.refusal(q, w, 10**9, "team-a/Job/x")
    assert final
    assert "deactivated after 4 PodsReadyTimeout evictions (backoffLimitCount 3)" in why
    assert "POST /debug/workloads/team-a/Job/x/reactivate" in why


def test_unit_and_requeue_key():
    """What becomes Ready together (unit_of) and what requeues count against (requeue_key): a pod group is
    both; a Job's pods are one unit (Kueue admits a Job as one workload) and share the Job's requeue record
    (a recreated pod is a new pod of the same workload); a pod without owner or group is counted by
    namespace/name."""
    def info(obj):
        return decode_pod({"kind": "Pod", **obj})

    alone = info(Pod("alone").queue("q").cpu("1").wire())
    assert readiness.unit_of(alone) == WorkloadKey(POD, "team-a", "alone")
    assert readiness.requeue_key(alone) == "team-a/alone"
    x, x_r1 = info(owned("x", "train")), info(owned("x-r1", "train", at=90))
    assert readiness.unit_of(x) == readiness.unit_of(x_r1) == WorkloadKey(JOB, "team-a", "train", "uid-job-train")
    assert readiness.unit_of(x).shown == "team-a/Job/train"
    assert readiness.requeue_key(x) == readiness.requeue_key(x_r1) == "team-a/Job/train"
    assert readiness.requeue_key(info(owned("y", "other"))) == "team-a/Job/other"
    g0, g1 = member("g-0"), member("g-1")
    g1["metadata"]["ownerReferences"] = [{"apiVersion": "batch/v1", "kind": "Job", "name": "train",
                                          "uid": "u", "controller": True}]
    assert {readiness.unit_of(info(g0)), readiness.unit_of(info(g1))} == {WorkloadKey(GROUP, "team-a", "g")}
    assert {readiness.requeue_key(info(g0)), readiness.requeue_key(info(g1))} == {"team-a/g"}   # group first


# ---- timeout: a single pod, a whole group --------------------------------------------------------------------

async def test_single_pod_not_ready_within_timeout_is_evicted_and_requeued(build_extender):
    """Seed 003 timeout: x (a Job's pod) is admitted at START and never Ready; at START+59s nothing happens, at
    START+60s reconcile evicts it with reason PodsReadyTimeout, its quota is free, and its Job's requeue record
    counts one eviction with a 60s backoff. y, Ready 30s after admission, is never evicted."""
    x, y = owned("x", "x"), Pod("y").queue("q").cpu("2").created(1).wire()
    ext, clock = build(build_extender, wfpr(timeout="60s"))
    state, writer = ext.state, ext.writer
    verbs = Verbs(ext)
    await admit(verbs, x)
    await admit(verbs, y)
    assert set(state.readiness) == {JOB_X, WorkloadKey(POD, "team-a", "y")}
    assert state.readiness[JOB_X].admitted_at == START
    clock.advance(30)
    watch(ext, y, ready=True)
    clock.advance(29)
    assert await ext.reconcile() == 0 and writer.evicted == []
    clock.advance(1)
    assert await ext.reconcile() == 1
    [(evicted, reason, message)] = writer.evicted
    assert (evicted, reason) == ("team-a/x", PODS_READY_TIMEOUT)
    assert "evicted whole and requeued" in message and "waitForPodsReady.timeout 60s" in message
    entry = ext.journal.entries[-1]
    assert (entry["verb"], entry["outcome"], entry["reasons"], entry["workload"]) == \
        ("ready", "Evicted", [PODS_READY_TIMEOUT], "team-a/Job/x")
    assert uid(x) not in state.pods and usage(ext) == 2 * CPU          # only y's 2 CPUs remain
    q = state.requeues["team-a/Job/x"]
    assert (q.count, q.at, q.deactivated) == (1, START + 120, False)
    clock.advance(3600)
    assert await ext.reconcile() == 0                                   # y is Ready: never evicted
    assert uid(y) in state.pods


async def test_group_times_out_whole_every_member_evicted_and_pending_holds_released(build_extender):
    """Seed 003 timeout, for a pod group (the issue: "a workload (a single pod or a whole group) ... is evicted
    whole"). Group g of 3 x 3 CPUs is admitted whole at g-0's filter (a hold and a reservation for every member);
    g-0 and g-1 bind and become Ready, g-2 never binds. At timeout both bound members are evicted (the Ready one
    too), g-2's hold and reservation are released, the quota is back to 0, and g-2's next filter is refused with
    the group's backoff. (Quota 12 CPUs.)"""
    pods = [member(f"g-{i}", total=3, cpu="3", at=i) for i in range(3)]
    ext, clock = build(build_extender, wfpr(timeout="60s"), quota=12, pending=pods)
    state, writer = ext.state, ext.writer
    verbs = Verbs(ext)
    await admit(verbs, pods[0])
    assert set(state.holds) == {uid(p) for p in pods[1:]} and usage(ext) == 9 * CPU
    await admit(verbs, pods[1])
    watch(ext, pods[0], ready=True)
    watch(ext, pods[1], ready=True)
    assert set(state.readiness) == {GROUP_G} and state.readiness[GROUP_G].ready_at is None
    assert uid(pods[2]) in state.holds and uid(pods[2]) in state.reservations
    clock.advance(60)
    assert await ext.reconcile() == 2
    assert sorted((k, r) for k, r, _ in writer.evicted) == [("team-a/g-0", PODS_READY_TIMEOUT),
                                                            ("team-a/g-1", PODS_READY_TIMEOUT)]
    assert not state.holds and not state.reservations and usage(ext) == 0
    assert GROUP_G not in state.readiness
    assert state.requeues["team-a/g"].count == 1
    reason = refused(verbs.filter(pods[2], ALL), ALL)
    assert "workload team-a/g was requeued after PodsReadyTimeout eviction #1" in reason
    assert not state.holds and usage(ext) == 0


async def test_group_members_recreated_by_their_job_are_admitted_whole_after_the_backoff(build_extender):
    """After a group's eviction its members come back as new pods (same group labels); they count against the
    same requeue record (the group), wait out the backoff, and are then admitted whole again."""
    pods = [member(f"g-{i}", total=2, cpu="2", at=i) for i in range(2)]
    ext, clock = build(build_extender, wfpr(timeout="60s"), pending=pods)
    state = ext.state
    verbs = Verbs(ext)
    for p in pods:
        await admit(verbs, p)
    clock.advance(60)
    assert await ext.reconcile() == 2
    again = [member(f"g-{i}-r1", total=2, cpu="2", at=160) for i in range(2)]
    for p in again:
        watch(ext, p)
    clock.advance(59)
    assert "PodsReadyTimeout eviction #1" in refused(verbs.filter(again[0], ALL), ALL)
    clock.advance(1)
    await admit(verbs, again[0])
    assert uid(again[1]) in state.holds                           # admitted whole: a hold for the other
    await admit(verbs, again[1])
    assert state.requeues["team-a/g"].count == 1 and usage(ext) == 4 * CPU


# ---- backoff: 60, 120, 240 ... capped; the filter refusal during it ----------------------------------------------

async def test_backoff_grows_and_caps_and_filter_refuses_with_reason_and_time(build_extender):
    """Seed 003: each PodsReadyTimeout eviction requeues the workload after backoffBaseSeconds * 2^(n-1), capped at
    backoffMaxSeconds: here base 60, max 200: 60, 120, 200, 200. Until the backoff passes, filter refuses the
    Job's recreated pod on every node (FailedAndUnresolvableNodes: preemption cannot help) with the reason
    (PodsReadyTimeout), the eviction count, the backoff and the time it ends; at that time it is admitted."""
    ext, clock = build(build_extender, wfpr(timeout="60s", requeuingStrategy={"backoffMaxSeconds": 200}))
    state = ext.state
    seen = []
    verbs = Verbs(ext)
    pod = owned("x", "x")
    for n, expected in enumerate([60, 120, 200, 200], start=1):
        await admit(verbs, pod)
        clock.advance(60)
        assert await ext.reconcile() == 1
        q = state.requeues["team-a/Job/x"]
        assert q.count == n
        seen.append(q.at - clock.now)
        pod = owned(f"x-r{n}", "x", at=clock.now - T0)        # the Job recreates it
        clock.advance(expected - 1)
        answer = verbs.filter(pod, ALL)
        reason = refused(answer, ALL)
        assert reason == (f"workload team-a/Job/x was requeued after PodsReadyTimeout eviction #{n}; it waits "
                          f"out a {expected}s backoff, until {format_time(q.at)}")
        entry = ext.journal.entries[-1]
        assert (entry["outcome"], entry["resolvable"]) == ("PodsReadyGate", False)
        assert uid(pod) not in state.reservations
        clock.advance(1)
    assert seen == [60, 120, 200, 200]


# ---- backoffLimitCount: deactivation, and reactivation by an admin ----------------------------------------------

async def test_deactivated_past_backoff_limit_unresolvable_until_reactivated(build_extender, api):
    """Seed 003: "一旦重新入队次数达到上限,Kueue 会停用该 Workload". backoffLimitCount 1: the first eviction
    requeues, the second deactivates. A deactivated workload is refused as unresolvable, naming the reason and
    how to clear it, however long one waits; GET /debug/workloads shows it; POST
    /debug/workloads/{key}/reactivate clears it (the next filter admits the pod, and the count starts again);
    an unknown key is a 404 naming it."""
    ext, clock = build(build_extender, wfpr(timeout="60s", requeuingStrategy={"backoffLimitCount": 1}))
    state = ext.state
    verbs = Verbs(ext)
    async with api(ext) as client:
        await admit(verbs, owned("x", "x"))
        clock.advance(60)
        await ext.reconcile()
        clock.advance(60)
        await admit(verbs, owned("x-r1", "x", at=160))
        clock.advance(60)
        await ext.reconcile()
        q = state.requeues["team-a/Job/x"]
        assert (q.count, q.deactivated) == (2, True)
        stuck = owned("x-r2", "x", at=280)
        clock.advance(10 * 3600)
        reason = refused(verbs.filter(stuck, ALL), ALL)
        assert reason == ("workload team-a/Job/x is deactivated after 2 PodsReadyTimeout evictions "
                          "(backoffLimitCount 1); reactivate it with POST /debug/workloads/team-a/Job/x/reactivate")
        assert ext.journal.entries[-1]["outcome"] == "PodsReadyGate"
        listed = (await client.get("/debug/workloads")).json()
        assert listed["requeued"]["team-a/Job/x"] == {"count": 2, "backoffUntil": q.at, "deactivated": True}
        r = await client.post("/debug/workloads/team-a/Job/x/reactivate")
        assert (r.status_code, r.json()) == (200, {"reactivated": "team-a/Job/x"})
        assert "team-a/Job/x" not in state.requeues
        assert (await client.get("/debug/workloads")).json()["requeued"] == {}
        await admit(verbs, stuck)
        missing = await client.post("/debug/workloads/team-a/Job/nope/reactivate")
        assert missing.status_code == 404
        assert "team-a/Job/nope" in missing.json()["error"] and "GET /debug/workloads" in missing.json()["error"]
        again = await client.post("/debug/workloads/team-a/Job/x/reactivate")
        assert again.status_code == 404
        clock.advance(60)
        await ext.reconcile()
    assert state.requeues["team-a/Job/x"].count == 1 and not state.requeues["team-a/Job/x"].deactivated


async def test_debug_workloads_lists_admitted_workloads_and_their_readiness(build_extender, api):
    """GET /debug/workloads: each admitted workload with admittedAt, readyAt, unreadyAt."""
    pods = [member(f"g-{i}", at=i) for i in range(2)]
    ext, clock = build(build_extender, wfpr(timeout="60s"), pending=pods)
    verbs = Verbs(ext)
    async with api(ext) as client:
        for p in pods:
            await admit(verbs, p)
        clock.advance(5)
        for p in pods:
            watch(ext, p, ready=True)
        view = (await client.get("/debug/workloads")).json()
    assert view == {"admitted": {"team-a/g": {"admittedAt": START, "readyAt": START + 5, "unreadyAt": None}},
                    "requeued": {}}


# ---- recoveryTimeout ---------------------------------------------------------------------------------------------

async def test_lost_readiness_for_recovery_timeout_is_evicted(build_extender):
    """Seed 003 recoveryTimeout: x is Ready 5s after admission, loses readiness at START+100s; 29s later nothing,
    30s later it is evicted the same way (PodsReadyTimeout, requeued), the message naming recoveryTimeout."""
    x = owned("x", "x")
    ext, clock = build(build_extender, wfpr(timeout="60s", recoveryTimeout="30s"))
    verbs = Verbs(ext)
    await admit(verbs, x)
    clock.advance(5)
    watch(ext, x, ready=True)
    clock.advance(95)
    assert await ext.reconcile() == 0                        # Ready: the 60s timeout passed without effect
    watch(ext, x, ready=False)
    assert ext.state.readiness[JOB_X].unready_at == START + 100
    clock.advance(29)
    assert await ext.reconcile() == 0
    clock.advance(1)
    assert await ext.reconcile() == 1
    [(evicted, reason, message)] = ext.writer.evicted
    assert (evicted, reason) == ("team-a/x", PODS_READY_TIMEOUT)
    assert "did not recover within waitForPodsReady.recoveryTimeout 30s" in message
    assert ext.state.requeues["team-a/Job/x"].count == 1


async def test_recovered_within_recovery_timeout_is_not_evicted(build_extender):
    """Seed 003 recoveryTimeout: a pod that is Ready again before recoveryTimeout runs out stays; its unready mark
    is cleared, so a later short loss of readiness starts a new count."""
    x = Pod("x").queue("q").cpu("2").wire()
    ext, clock = build(build_extender, wfpr(timeout="60s", recoveryTimeout="30s"))
    verbs = Verbs(ext)
    await admit(verbs, x)
    watch(ext, x, ready=True)
    clock.advance(100)
    watch(ext, x, ready=False)
    clock.advance(20)
    watch(ext, x, ready=True)
    assert ext.state.readiness[WorkloadKey(POD, "team-a", "x")].unready_at is None
    clock.advance(20)
    watch(ext, x, ready=False)
    clock.advance(20)                                        # 20s unready now, 40s since the first loss
    assert await ext.reconcile() == 0 and ext.writer.evicted == []


async def test_without_recovery_timeout_lost_readiness_is_never_evicted(build_extender):
    """Seed 003: recoveryTimeout "该参数无默认值,需显式设置": without it a workload that lost readiness stays."""
    x = Pod("x").queue("q").cpu("2").wire()
    ext, clock = build(build_extender, wfpr(timeout="60s"))
    verbs = Verbs(ext)
    await admit(verbs, x)
    watch(ext, x, ready=True)
    clock.advance(10)
    watch(ext, x, ready=False)
    clock.advance(24 * 3600)
    assert await ext.reconcile() == 0


async def test_member_that_succeeded_is_not_lost_readiness(build_extender):
    """recoveryTimeout, for a group: when one member of an all-Ready group finishes (Succeeded), the group has
    not lost readiness: no unready mark, never evicted; the member still running keeps it all Ready."""
    pods = [member(f"g-{i}", at=i) for i in range(2)]
    ext, clock = build(build_extender, wfpr(timeout="60s", recoveryTimeout="30s"), pending=pods)
    verbs = Verbs(ext)
    for p in pods:
        await admit(verbs, p)
    for p in pods:
        watch(ext, p, ready=True)
    clock.advance(10)
    watch(ext, pods[0], ready=False, phase="Succeeded")
    record = ext.state.readiness[GROUP_G]
    assert record.ready_at == START and record.unready_at is None
    clock.advance(3600)
    assert await ext.reconcile() == 0 and ext.writer.evicted == []


async def test_member_losing_readiness_evicts_the_whole_group(build_extender):
    """recoveryTimeout, for a group: one member unready for recoveryTimeout evicts every member."""
    pods = [member(f"g-{i}", at=i) for i in range(2)]
    ext, clock = build(build_extender, wfpr(timeout="60s", recoveryTimeout="30s"), pending=pods)
    verbs = Verbs(ext)
    for p in pods:
        await admit(verbs, p)
    for p in pods:
        watch(ext, p, ready=True)
    clock.advance(100)
    watch(ext, pods[1], ready=False)
    clock.advance(30)
    assert await ext.reconcile() == 2
    assert {k for k, _, _ in ext.writer.evicted} == {"team-a/g-0", "team-a/g-1"}
    assert ext.state.requeues["team-a/g"].count == 1


async def test_member_that_succeeded_before_the_rest_were_ready_still_counts(build_extender):
    """BUG (app/state/cluster.py track_readiness: `len(bound) >= expected` counts only bound, non-terminal
    members). Reproduction: group g of 2 (timeout 60s), both bound at START; g-0 Ready, then Succeeded at +5s;
    g-1 Ready at +30s; reconcile at +60s. Expected: no eviction: every pod of the group became Ready (Kueue's
    PodsReady counts succeeded pods with the ready ones). Actual: after g-0 leaves, 1 bound < 2 expected, so
    ready_at is never set and g-1 is evicted with PodsReadyTimeout ("not all Ready within timeout")."""
    pods = [member(f"g-{i}", at=i) for i in range(2)]
    ext, clock = build(build_extender, wfpr(timeout="60s"), pending=pods)
    verbs = Verbs(ext)
    for p in pods:
        await admit(verbs, p)
    watch(ext, pods[0], ready=True)
    clock.advance(5)
    watch(ext, pods[0], ready=False, phase="Succeeded")
    clock.advance(25)
    watch(ext, pods[1], ready=True)
    clock.advance(30)
    assert await ext.reconcile() == 0


async def test_member_lost_after_all_ready_starts_recovery(build_extender):
    """BUG (app/state/cluster.py track_readiness: once ready_at is set only the bound members' Ready conditions are
    looked at). Reproduction: group g of 2 (recoveryTimeout 30s) all Ready; g-1 is deleted (node lost) and its
    replacement g-1-r1 is created, pending (not placed yet); reconcile 100s later. Expected: the
    group is 1 of 2 Ready, it lost readiness (Kueue: fewer ready pods than the group's count), so it is evicted
    after 30s. Actual: bound = [g-0], all Ready, so no unready mark is ever set and nothing is evicted."""
    pods = [member(f"g-{i}", at=i) for i in range(2)]
    ext, clock = build(build_extender, wfpr(timeout="60s", recoveryTimeout="30s"), pending=pods)
    verbs = Verbs(ext)
    for p in pods:
        await admit(verbs, p)
    for p in pods:
        watch(ext, p, ready=True)
    watch(ext, pods[1], deleted=True)
    watch(ext, member("g-1-r1", at=150))
    clock.advance(100)
    assert await ext.reconcile() == 1


# ---- blockAdmission ---------------------------------------------------------------------------------------------

async def test_block_admission_holds_others_until_the_admitted_workload_is_ready(build_extender):
    """Seed 003 blockAdmission ("Workload 会被顺序准入"): a is admitted and not yet Ready, so b (room and quota
    to spare) is refused, unresolvable, saying why; once a is Ready, b is admitted. Without blockAdmission b is
    admitted at once."""
    a, b = Pod("a").queue("q").cpu("2").wire(), Pod("b").queue("q").cpu("2").created(1).wire()
    ext, clock = build(build_extender, wfpr(blockAdmission=True))
    verbs = Verbs(ext)
    await admit(verbs, a)
    reason = refused(verbs.filter(b, ALL), ALL)
    assert "waitForPodsReady.blockAdmission" in reason and "not all Ready" in reason
    assert uid(b) not in ext.state.reservations and usage(ext) == 2 * CPU
    clock.advance(20)
    watch(ext, a, ready=True)
    await admit(verbs, b)
    ext, _ = build(build_extender, wfpr())
    verbs = Verbs(ext)
    await admit(verbs, a)
    await admit(verbs, b)


async def test_block_admission_does_not_block_a_groups_own_members(build_extender):
    """blockAdmission counts a group as one workload: its members bind one after the other while it is not yet
    Ready, and a pod outside it waits until the whole group is Ready."""
    pods = [member(f"g-{i}", total=3, cpu="2", at=i) for i in range(3)]
    other = Pod("other").queue("q").cpu("1").created(10).wire()
    ext, clock = build(build_extender, wfpr(blockAdmission=True), pending=pods)
    verbs = Verbs(ext)
    for p in pods:
        await admit(verbs, p)
        assert "blockAdmission" in refused(verbs.filter(other, ALL), ALL)
    watch(ext, pods[0], ready=True)
    watch(ext, pods[1], ready=True)
    assert "blockAdmission" in refused(verbs.filter(other, ALL), ALL)
    watch(ext, pods[2], ready=True)
    await admit(verbs, other)


async def test_block_admission_counts_a_workload_from_its_admission_not_its_bind(build_extender):
    """BUG (app/scheduler/context.py ready_gate looks only at state.readiness, which track_readiness fills at bind).
    Reproduction: blockAdmission on; filter a (it passes, quota reserved: Quotient's admission); filter b before
    a's bind (kube-scheduler's binding cycle is asynchronous: the next pod's scheduling cycle runs meanwhile).
    Expected: b refused with blockAdmission (a is admitted and not Ready; Kueue blocks from quota reservation).
    Actual: b passes filter and reserves quota too; two workloads are admitted at once. The same holds for a
    group admitted whole (holds made) whose first member has not bound yet."""
    a, b = Pod("a").queue("q").cpu("2").wire(), Pod("b").queue("q").cpu("2").created(1).wire()
    ext, _ = build(build_extender, wfpr(blockAdmission=True))
    verbs = Verbs(ext)
    assert (verbs.filter(a, ALL))["NodeNames"]
    assert "blockAdmission" in refused(verbs.filter(b, ALL), ALL)


async def test_block_admission_refusal_names_the_pod(build_extender):
    """BUG (app/scheduler/context.py ready_gate: `unit.removeprefix('pod:')` is the pod's uid). Reproduction: as in
    test_block_admission_holds_others_until_the_admitted_workload_is_ready. Expected: the refusal names the
    workload as an admin can look it up, "team-a/a". Actual: "workload uid-team-a-a is admitted and not yet all
    Ready" (in the simulator a generated uid such as 22ea18b4-...). GET /debug/workloads keys single pods by uid
    too."""
    a, b = Pod("a").queue("q").cpu("2").wire(), Pod("b").queue("q").cpu("2").created(1).wire()
    ext, _ = build(build_extender, wfpr(blockAdmission=True))
    verbs = Verbs(ext)
    await admit(verbs, a)
    assert "workload team-a/a " in refused(verbs.filter(b, ALL), ALL)


# ---- requeuingStrategy.timestamp ----------------------------------------------------------------------------------

@pytest.mark.parametrize("timestamp", ["Creation", "Eviction"])
async def test_timestamp_creation_keeps_the_original_place_eviction_goes_to_the_back(build_extender,
                                                                                     timestamp):
    """Seed 003 timestamp: x (created first) is evicted at START+60s and its Job recreates it as x-r1 (created at
    the eviction). y was created between the two. With Creation, x-r1 sorts by x's creation time, ahead of y
    (state.queues.queue_key, the order of state.pending); with Eviction, by the eviction, behind y. BUG fixed (issue 13):
    /debug's pendingAhead counted by creation alone, so with Creation it put y ahead of x-r1, unlike admission."""
    x, y = owned("x", "x"), Pod("y").queue("q").cpu("2").created(10).wire()
    ext, clock = build(build_extender, wfpr(timeout="60s", requeuingStrategy={"timestamp": timestamp}),
                       quota=2, pending=[y])
    state = ext.state
    x_r1 = await timed_out_and_recreated(ext, clock, x)
    k_x, k_y = state.queues.queue_key(state.pods[uid(x_r1)]), state.queues.queue_key(state.pods[uid(y)])
    order = [state.pods[u].name for _, u in state.pending["cq"]]
    ahead = {state.pods[uid(p)].name: pending_ahead(state, state.pods[uid(p)], "cq") for p in (x_r1, y)}  # /debug
    if timestamp == "Creation":
        assert k_x[1] == T0 and k_x < k_y and order == ["x-r1", "y"] and ahead == {"x-r1": 0, "y": 1}
    else:
        assert k_x[1] == clock.now and k_y < k_x and order == ["y", "x-r1"] and ahead == {"x-r1": 1, "y": 0}
    assert state.requeues["team-a/Job/x"].first_created == T0


async def test_creation_order_decides_which_is_admitted_first_after_the_backoff(build_extender):
    """Seed 003 timestamp, seen in admission (as tests/scenarios/ready-requeue-*.yaml): quota 4, StrictFIFO; x (2 CPUs,
    never Ready) and c (2 CPUs, Ready) run, n (4 CPUs) waits. x is evicted at 60s; after its 60s backoff x-r1 would
    fit the 2 free CPUs. With Creation it is the head (n is behind it) and is admitted; with Eviction it is behind
    n, which does not fit, so StrictFIFO holds it back."""
    for timestamp, admitted in (("Creation", True), ("Eviction", False)):
        x, n = owned("x", "x"), Pod("n").queue("q").cpu("4").created(10).wire()
        ext, clock = build(build_extender, wfpr(timeout="60s", requeuingStrategy={"timestamp": timestamp}),
                           quota=4, strategy="StrictFIFO", pending=[n])
        verbs = Verbs(ext)
        c = Pod("c").queue("q").cpu("2").created(5).wire()
        await admit(verbs, x)
        await admit(verbs, c)
        watch(ext, c, ready=True)
        clock.advance(60)
        assert await ext.reconcile() == 1
        x_r1 = owned("x-r1", "x", at=clock.now - T0)
        watch(ext, x_r1)
        clock.advance(60)
        answer = verbs.filter(x_r1, ALL)
        if admitted:
            assert answer["NodeNames"] == ALL, (timestamp, answer)
        else:
            assert "StrictFIFO: team-a/n is ahead" in refused(answer, ALL), (timestamp, answer)


# ---- one workload across recreated pods -------------------------------------------------------------------------

async def test_recreated_pods_of_one_owner_share_one_requeue_record(build_extender):
    """The issue: "Evicted pods owned by a controller come back as new pods; Quotient recognises them as the same
    workload for backoff counting (by owner and group name)". x, then x-r1 (new name and uid, the same Job) are
    evicted: one record team-a/Job/x with count 2 (the second backoff is 120s, not 60s again); a pod of another
    Job has its own record."""
    ext, clock = build(build_extender, wfpr(timeout="60s"))
    state = ext.state
    verbs = Verbs(ext)
    await admit(verbs, owned("x", "x"))
    await admit(verbs, owned("other", "other", at=1))
    clock.advance(60)
    assert await ext.reconcile() == 2
    assert {k: q.count for k, q in state.requeues.items()} == {"team-a/Job/x": 1, "team-a/Job/other": 1}
    clock.advance(60)
    await admit(verbs, owned("x-r1", "x", at=clock.now - T0))
    clock.advance(60)
    assert await ext.reconcile() == 1
    q = state.requeues["team-a/Job/x"]
    assert (q.count, q.at - clock.now) == (2, 120)
    assert state.requeues["team-a/Job/other"].count == 1


async def test_waitforpodsready_off_tracks_and_evicts_nothing(build_extender):
    """waitForPodsReady off (the default): no readiness record, nothing evicted however long a pod stays unready,
    and no requeue gate."""
    ext, clock = build(build_extender, Configuration())
    verbs = Verbs(ext)
    await admit(verbs, owned("x", "x"))
    clock.advance(24 * 3600)
    assert await ext.reconcile() == 0
    await admit(verbs, Pod("y").queue("q").cpu("2").created(1).wire())
    assert ext.state.readiness == {} and ext.state.requeues == {}


# ---- bugs in the requeue records ------------------------------------------------------------------------------------

@pytest.mark.parametrize("limit", [None, 0], ids=["backing-off", "deactivated"])
async def test_requeued_workload_does_not_hold_its_place_while_it_cannot_be_admitted(build_extender, limit):
    """BUG (app/core/admission.py _ahead / queue_ahead: pending pods ahead are charged virtually whatever their
    PodsReadyTimeout gate says). Reproduction: quota 2, timestamp Creation; x (a Job's pod, 2 CPUs) is evicted by
    timeout; its Job recreates x-r1, which keeps x's place ahead of y (2 CPUs, created after x). y's filter while
    x-r1 waits out its backoff (or, with backoffLimitCount 0, is deactivated). Expected: y is admitted: Kueue
    keeps a workload in backoff out of the queue heads until requeueAt, and a deactivated one out of the queue
    altogether. Actual: y is refused, "cpu request 2 > 0 available ... counting 1 pending pod(s) ahead of it in
    queue order (team-a/x-r1)"; with a deactivated x-r1 this lasts until an admin reactivates it. (With timestamp
    Eviction the same happens to every pod created after x-r1.)"""
    x, y = owned("x", "x"), Pod("y").queue("q").cpu("2").created(10).wire()
    rq = {"timestamp": "Creation", **({"backoffLimitCount": limit} if limit is not None else {})}
    ext, clock = build(build_extender, wfpr(timeout="60s", requeuingStrategy=rq), quota=2)
    verbs = Verbs(ext)
    x_r1 = await timed_out_and_recreated(ext, clock, x)
    refused(verbs.filter(x_r1, ALL), ALL)
    answer = verbs.filter(y, ALL)
    assert answer["NodeNames"] == ALL, answer


async def test_a_new_job_with_the_same_name_starts_afresh(build_extender):
    """BUG (app/core/readiness.py requeue_key uses the owner's kind and name, not its uid; state.requeues entries
    are never removed when the workload is gone). Reproduction: backoffLimitCount 0; Job x's pod is evicted by
    timeout, deactivating team-a/Job/x; the user deletes Job x and creates a new Job x (new uid); its pod is
    filtered. Expected: admitted (a new Job is a new Kueue Workload with no requeueState). Actual: refused as
    deactivated, until an admin calls reactivate; and state.requeues grows by one entry per evicted workload for
    the life of the process."""
    ext, clock = build(build_extender, wfpr(timeout="60s", requeuingStrategy={"backoffLimitCount": 0}))
    verbs = Verbs(ext)
    await admit(verbs, owned("x", "x"))
    clock.advance(60)
    await ext.reconcile()
    assert ext.state.requeues["team-a/Job/x"].deactivated
    fresh = owned("x-abcde", "x", at=clock.now - T0 + 30, job_uid="uid-job-x-second")
    clock.advance(60)
    answer = verbs.filter(fresh, ALL)
    assert answer["NodeNames"] == ALL, answer


def test_a_head_backing_off_does_not_reclaim_and_the_next_pod_is_the_head(build_extender):
    """Seed 003 重新排队策略: a requeued workload waits out its backoff. Kueue keeps it out of the queue
    meanwhile, so it cannot start a reclaim either: self-driven reclaim (reconcile's queue heads)
    evicts nothing for it, and it passes the turn to the pod behind it; after the backoff it reclaims."""
    low = Pod("low").queue("q").cpu("8").priority(0).node("n1").ready().obj()
    x = Pod("x").queue("q").cpu("8").priority(100).created(1).wire()
    text = snapshot_yaml(*one_queue(8, preemption={"withinClusterQueue": "LowerPriority"}), low, x)
    clock = FakeClock(START)
    ext = build_extender(text, config=wfpr(), clock=clock, writer=lambda s: Recorder(s))
    state = ext.state
    state.requeues[readiness.requeue_key(state.pods[uid(x)])] = RequeueRecord(count=1, at=START + 60)
    assert ext.reclaim_for_heads() == 0
    assert not state.holds and uid(low) in state.admitted

    y = Pod("y").queue("q").cpu("8").priority(100).created(2).wire()     # behind x: the head while x backs off
    apply_object(state, {"apiVersion": "v1", "kind": "Pod", **y})
    assert ext.reclaim_for_heads() == 1
    assert set(state.holds) == {uid(y)}

    state.workloads.release_hold(uid(y))
    state.remove_pod(uid(y))
    clock.advance(61)                                                 # the backoff is over: x is the head again
    assert ext.reclaim_for_heads() == 1
    assert set(state.holds) == {uid(x)}


# ---- units that share one requeue key -----------------------------------------------------------------------------

def test_pods_of_one_replica_set_timing_out_together_count_one_requeue_each():
    """BUG found in review (issue 13): core.readiness.timeouts computed every unit's requeue from the record as it
    was before the reconcile, so three pods of one ReplicaSet (three units, one requeue key) timing out together
    counted 1 requeue instead of 3, and backoffLimitCount 1 never deactivated the workload. Each unit now counts
    on top of the one before, as the extender's loop did: requeues 1, 2, 3, deactivated from the second."""
    clock = FakeClock(T0)
    config = decode_configuration({"waitForPodsReady": {"enable": True, "timeout": "60s",
                                                        "requeuingStrategy": {"backoffLimitCount": 1}}})
    members = []
    for i in range(3):
        obj = Pod(f"web-{i}").queue("lq").cpu("1").node("n1").phase("Running").obj()
        obj["metadata"]["ownerReferences"] = [{"apiVersion": "apps/v1", "kind": "ReplicaSet", "name": "web",
                                               "uid": "rs-uid", "controller": True}]
        members.append(obj)
    state = make_state(ResourceFlavor("default-flavor").obj(), Node("n1").obj(),
                       ClusterQueue("cq").resource_group(FlavorQuotas("default-flavor").resource("cpu", "9")).obj(),
                       LocalQueue("lq", "team-a").cluster_queue("cq").obj(), *members,
                       config=config, clock=clock)
    ext = Scheduler(state, SnapshotWriter(state))
    assert len(state.readiness) == 3                     # each pod of a ReplicaSet is a unit of its own
    clock.advance(61)
    evictions = pods_ready_timeouts(ext)
    record = state.requeues["team-a/ReplicaSet/web"]
    assert (record.count, record.deactivated) == (3, True)
    assert sorted((e.record["requeues"], e.record["deactivated"]) for e in evictions) == \
        [(1, False), (2, True), (3, True)]
