"""Issue 31, points 1 and 2: the charge follows the API. A pod's queue label or requests that change between
filter and bind are refused at bind (kube-scheduler tries it again and filter decides anew); a bound pod that
moves to another queue or is resized in place (pods/resize) is charged as the API now shows it, and a queue it
takes above its quota is reported (journal, metric, /debug) and admits nothing more until it is back within.

Judged on the API's own objects: the CPU of every pod tests/fakeapi.py shows bound and not finished, summed per
ClusterQueue (kube-scheduler's size: the most of the spec's, the allocated and the actual requests).
"""
from __future__ import annotations

import asyncio

import httpx
import pytest

from app.api.app import create_app
from app.objects.quantity import parse_quantity
from builders import QUEUE_LABEL, ClusterQueue, FlavorQuotas, LocalQueue, Namespace, Node, Pod, ResourceFlavor
from helpers import refused, uid
from live import Live, started, until

NOMINAL = {"cq-a": 4000, "cq-b": 2000}
CPU = ("default-flavor", "cpu")


@pytest.fixture
async def live(tmp_path):
    objects = [Namespace("team-a").obj(), Node("n1").cpu("64").obj(), ResourceFlavor("default-flavor").obj()]
    for cq, nominal in NOMINAL.items():
        objects.append(ClusterQueue(cq).resource_group(FlavorQuotas("default-flavor").resource("cpu", nominal // 1000))
                       .obj())
        objects.append(LocalQueue(f"lq-{cq[-1]}", "team-a").cluster_queue(cq).obj())
    async with started(tmp_path, objects) as kit:
        yield kit


def pod_cpu(pod: dict) -> int:
    """kube-scheduler's CPU for a pod: per container the most of spec, allocatedResources and actual requests."""
    statuses = {s.get("name"): s for s in (pod.get("status") or {}).get("containerStatuses") or []}
    total = 0
    for c in pod["spec"]["containers"]:
        s = statuses.get(c["name"], {})
        sizes = [(c.get("resources") or {}).get("requests", {}).get("cpu"), (s.get("allocatedResources") or {}).get("cpu"),
                 ((s.get("resources") or {}).get("requests") or {}).get("cpu")]
        total += max(parse_quantity(v, "cpu") for v in sizes if v is not None)
    return total


def api_usage(kit: Live) -> dict[str, int]:
    """CPU (millicores) per ClusterQueue of the pods the API shows bound and not finished."""
    used = dict.fromkeys(NOMINAL, 0)
    for pod in kit.api.objects("Pod"):
        if not pod["spec"].get("nodeName") or (pod.get("status") or {}).get("phase") in ("Succeeded", "Failed"):
            continue
        lq = kit.api.get("LocalQueue", pod["metadata"]["namespace"], pod["metadata"]["labels"].get(QUEUE_LABEL, ""))
        if lq is not None:
            used[lq["spec"]["clusterQueue"]] += pod_cpu(pod)
    return used


def within_quota(kit: Live) -> bool:
    return all(v <= NOMINAL[cq] for cq, v in api_usage(kit).items())


def charged(kit: Live) -> dict[str, int]:
    """What Quotient counts as running per ClusterQueue."""
    return {cq: kit.state.tree.queues[cq].bound.get(CPU, 0) for cq in NOMINAL}


async def bound_here(kit: Live, obj: dict) -> None:
    """Filter and bind by Quotient, then started by the kubelet, as the watch shows it."""
    await kit.deliver(obj)
    assert kit.filter(obj)["NodeNames"] == ["n1"]
    assert await kit.bind(obj) == ""
    kit.api.start_pod("team-a", obj["metadata"]["name"])
    await until(lambda: kit.knows(obj, phase="Running"), what="running")


async def move(kit: Live, name: str, queue: str) -> None:
    """Change the pod's queue label on the API, as `kubectl label --overwrite` does."""
    obj = kit.api.get("Pod", "team-a", name)
    obj["metadata"]["labels"][QUEUE_LABEL] = queue
    kit.api.apply(obj)
    await until(lambda: kit.knows(obj, queue_name=queue), what=f"the watch to deliver {name} in {queue}")


async def resize(kit: Live, name: str, cpu: str, actuate: bool = True) -> None:
    """PATCH pods/{name}/resize as `kubectl patch --subresource resize` does, then (actuate) the kubelet's answer."""
    async with httpx.AsyncClient(base_url=kit.api.url, headers={"Authorization": f"Bearer {kit.api.token}"}) as c:
        r = await c.patch(f"/api/v1/namespaces/team-a/pods/{name}/resize",
                          content=f'{{"spec":{{"containers":[{{"name":"main","resources":{{"requests":{{"cpu":"{cpu}"}}}}}}]}}}}',
                          headers={"Content-Type": "application/strategic-merge-patch+json"})
        assert r.status_code == 200, r.text
    if actuate and kit.api.get("Pod", "team-a", name)["spec"].get("nodeName"):
        kit.api.kubelet_resize("team-a", name)
    want = parse_quantity(cpu, "cpu")
    await until(lambda: kit.state.pods[uid(kit.api.get("Pod", "team-a", name))].requests.get("cpu") == want,
                what=f"the watch to deliver {name} resized")


def last(kit: Live, pod: str, verb: str | None = None) -> dict:
    return next(e for e in kit.ext.journal.of_pod(f"team-a/{pod}") if verb is None or e["verb"] == verb)


# ---- between filter and bind ----------------------------------------------------------------------------

async def test_a_queue_label_moved_between_filter_and_bind_is_refused_at_bind(live):
    """Before: bind charged cq-a (filter's decision); the watch then charged cq-b with no check: cq-b ran
    4,000m on a 2,000m nominal quota, nothing logged."""
    await live.deliver(Pod("full").queue("lq-b").cpu("2").node("n1").obj())
    p = Pod("p").queue("lq-a").cpu("2").obj()
    await live.deliver(p)
    assert live.filter(p)["NodeNames"] == ["n1"]
    await move(live, "p", "lq-b")
    error = await live.bind(p)
    assert "changed since filter" in error and "lq-a" in error and "lq-b" in error, error
    assert not live.api.get("Pod", "team-a", "p")["spec"].get("nodeName")
    assert last(live, "p", "bind")["reason"].startswith("ChangedSinceFilter: pod team-a/p changed since filter")
    assert uid(p) not in live.state.reservations          # filter decides anew
    assert "cq-b" in refused(live.filter(p), ["n1"])              # and cq-b is full
    assert within_quota(live) and charged(live) == api_usage(live)


async def test_requests_grown_between_filter_and_bind_are_refused_at_bind(live):
    """pods/resize on a pending pod, 1 -> 4 CPU after filter passed it at 1. Before: the charge stayed at filter's
    1 CPU: the API showed 7,000m in a 4,000m queue while Quotient counted 4 of 4."""
    await live.deliver(Pod("big").queue("lq-a").cpu("3").node("n1").obj())
    p = Pod("p").queue("lq-a").cpu("1").obj()
    await live.deliver(p)
    assert live.filter(p)["NodeNames"] == ["n1"]
    await resize(live, "p", "4")
    error = await live.bind(p)
    assert "changed since filter" in error and "cpu 1 -> 4" in error, error
    assert not live.api.get("Pod", "team-a", "p")["spec"].get("nodeName")
    assert "cq-a" in refused(live.filter(p), ["n1"])              # decided anew at its new size: it does not fit
    assert within_quota(live) and charged(live) == api_usage(live)


# ---- while bound --------------------------------------------------------------------------------------------

async def over_quota_shown(kit: Live, cq: str, pod: str) -> None:
    """/debug, the view and /metrics show the queue over quota with the rule; the journal names the pod."""
    entry = last(kit, pod, "charge")
    assert entry["outcome"] == "ClusterQueueOverQuota" and entry["queue"] == cq
    assert f"team-a/{pod}" in entry["reason"]
    app = create_app(kit.ext)
    async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://t") as c:
        shown = next(q for q in (await c.get("/debug/queues")).json()["clusterQueues"] if q["name"] == cq)
        assert shown["status"] == "overQuota", shown
        assert "ClusterQueueOverQuota" in shown["statusReason"] and f"team-a/{pod}" in shown["statusReason"]
        page = (await c.get(f"/ui/queues/{cq}")).text
        assert "overQuota" in page and "ClusterQueueOverQuota" in page
        metrics = (await c.get("/metrics")).text
        assert f'quotient_quota_overruns_total{{cluster_queue="{cq}"}} 1.0' in metrics


async def test_a_running_pod_resized_beyond_its_queue_is_charged_reported_and_blocks_the_queue(live):
    """In-place resize of a running pod (2 -> 4 CPU in a full 4 CPU queue). Before: the charge stayed at 2 CPU
    while the API showed 6,000m; /debug showed 4 of 4 and new pods were judged on that."""
    r = Pod("r").queue("lq-a").cpu("2").obj()
    await bound_here(live, r)
    await bound_here(live, Pod("s").queue("lq-a").cpu("2").obj())
    await resize(live, "r", "4")
    assert api_usage(live)["cq-a"] == 6000
    assert charged(live) == api_usage(live)               # the charge follows the API
    await over_quota_shown(live, "cq-a", "r")
    t = Pod("t").queue("lq-a").cpu("1").obj()
    await live.deliver(t)
    assert "no pod is admitted until it is back within quota" in refused(live.filter(t), ["n1"])
    assert last(live, "t", "filter")["outcome"] == "ClusterQueueOverQuota"
    live.api.delete("Pod", "team-a", "s")
    await resize(live, "r", "2")                          # 2 of 4: back within quota
    assert charged(live) == api_usage(live) == {"cq-a": 2000, "cq-b": 0}
    assert live.filter(t)["NodeNames"] == ["n1"]
    assert await live.bind(t) == ""
    assert within_quota(live)


async def test_a_binding_is_not_sent_again_into_a_queue_a_resize_took_above_quota_meanwhile(live):
    """Decided within quota, the Binding's first try answered 500 (not written); before its retry, a running pod of
    the queue is resized and the watch shows the queue above quota. Before: the retry was sent and landed, a pod
    joining a queue the API already had above quota (the fault run's seed hit it 1 in 16). Now it is not sent
    again: the read back shows the pod unbound, the charge is taken back, kube-scheduler asks again."""
    await bound_here(live, Pod("r").queue("lq-a").cpu("2").obj())
    p = Pod("p").queue("lq-a").cpu("2").obj()
    await live.deliver(p)
    assert live.filter(p)["NodeNames"] == ["n1"]          # 2 + 2 of 4
    live.api.fault("pause", resource="pods", verb="write", sub="binding")
    bind = asyncio.create_task(live.bind(p))
    await live.api.paused_request(caller=bind)
    live.api.fault("error", resource="pods", verb="write", sub="binding", code=500)    # the first try: not written
    await resize(live, "r", "3")
    await over_quota_shown(live, "cq-a", "r")
    live.api.resume()
    error = await bind
    assert "not sent again" in error and "no longer fits" in error, error
    assert live.api.get("Pod", "team-a", "p")["spec"].get("nodeName") is None
    assert api_usage(live)["cq-a"] == 3000 and within_quota(live)
    assert uid(p) not in live.state.admitted and charged(live) == api_usage(live)
    await live.equal_to_a_fresh_list()


async def test_a_resize_the_kubelet_finds_infeasible_is_charged_at_what_runs(live):
    """kube-scheduler's rule: a resize marked PodResizePending=Infeasible counts the allocated size, not the spec."""
    r = Pod("r").queue("lq-a").cpu("2").obj()
    await bound_here(live, r)
    await resize(live, "r", "1")
    live.api.kubelet_resize("team-a", "r")                # 1 CPU allocated and running
    await resize(live, "r", "40", actuate=False)
    assert charged(live)["cq-a"] == 40000                 # the desired size counts while the kubelet decides
    live.api.kubelet_resize("team-a", "r", infeasible=True)
    await until(lambda: live.state.pods[uid(r)].requests.get("cpu") == 1000, what="infeasible resize delivered")
    assert charged(live) == {"cq-a": 1000, "cq-b": 0}


async def test_a_queue_label_moved_after_bind_is_charged_to_the_new_queue_and_reported(live):
    """Kueue's webhook refuses a queue-name change on a pod that is not gated (admitted); an extender sees the
    change only after the API took it. Before: cq-b was charged 4,000m of 2,000m with no check, nothing logged,
    and pods of cq-b were still judged as if it had room in other resources."""
    await live.deliver(Pod("full").queue("lq-b").cpu("2").node("n1").obj())
    p = Pod("p").queue("lq-a").cpu("2").obj()
    await bound_here(live, p)
    await move(live, "p", "lq-b")
    assert api_usage(live) == {"cq-a": 0, "cq-b": 4000}
    assert charged(live) == api_usage(live)
    await over_quota_shown(live, "cq-b", "p")
    q = Pod("q").queue("lq-b").cpu("1").obj()
    await live.deliver(q)
    assert "ClusterQueue cq-b uses cpu 4 of nominal 2" in refused(live.filter(q), ["n1"])
    other = Pod("other").queue("lq-a").cpu("4").obj()     # cq-a is free again, and not blocked
    await live.deliver(other)
    assert live.filter(other)["NodeNames"] == ["n1"]
    live.api.delete("Pod", "team-a", "p")
    await until(lambda: uid(p) not in live.state.pods, what="p deleted")
    assert "no pod is admitted" not in refused(live.filter(q), ["n1"])     # cq-b is full, not over: QuotaExceeded
    assert last(live, "q", "filter")["outcome"] == "QuotaExceeded"
    assert api_usage(live)["cq-b"] == 2000


def test_a_resized_pod_counts_the_most_of_desired_allocated_and_actual_requests():
    """kube-scheduler's PodRequests with status resources (component-helpers): per resource the most of spec,
    allocatedResources and resources.requests; an Infeasible resize leaves the spec out."""
    from app.objects.pod import decode_pod
    pod = Pod("p").cpu("1").memory("1Gi").node("n1").obj()
    assert decode_pod(pod).requests["cpu"] == 1000
    pod["status"] = {"containerStatuses": [{"name": "main", "allocatedResources": {"cpu": "2", "memory": "1Gi"},
                                            "resources": {"requests": {"cpu": "3"}}}]}
    assert decode_pod(pod).requests["cpu"] == 3000            # shrinking: the old size runs until actuated
    pod["spec"]["containers"][0]["resources"]["requests"]["memory"] = "4Gi"
    pod["status"]["conditions"] = [{"type": "PodResizePending", "status": "True", "reason": "Infeasible"}]
    assert decode_pod(pod).requests["memory"] == 2 ** 30      # infeasible: the desired 4Gi does not count
