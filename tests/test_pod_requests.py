"""app.objects.pod: a Pod's effective request (kube-scheduler's PodRequests) and decode_pod."""
import copy
import json
from pathlib import Path

import pytest

from app.objects.errors import InvalidObject
from app.objects.pod import QUEUE_LABEL, decode_pod, pod_requests

WIRE = Path(__file__).resolve().parents[1].parent / "shared" / "wire"
Mi = 2**20
Gi = 2**30


def container(name="c", requests=None, limits=None, **extra):
    resources = {}
    if requests is not None:
        resources["requests"] = requests
    if limits is not None:
        resources["limits"] = limits
    return {"name": name, "resources": resources, **extra}


def sidecar(name, requests):
    return container(name, requests, restartPolicy="Always")


def wire_pod() -> dict:
    path = WIRE / "filter-nodecache-true.request.json"
    if not path.exists():
        pytest.skip(f"{path} not found (../shared beside the repo)")
    return json.loads(path.read_text())["Pod"]


# --- pod_requests ---------------------------------------------------------------------------

def test_requests_of_app_containers_are_summed():
    spec = {"containers": [container("a", {"cpu": "100m", "memory": "64Mi"}),
                           container("b", {"cpu": "1", "memory": "1Gi"})]}
    assert pod_requests(spec) == {"cpu": 1100, "memory": 64 * Mi + Gi, "pods": 1}


def test_pods_is_always_one_even_without_containers_or_requests():
    assert pod_requests({}) == {"pods": 1}
    assert pod_requests({"containers": [container("a"), container("b")]}) == {"pods": 1}


def test_pods_is_one_even_if_a_container_requests_pods():
    assert pod_requests({"containers": [container("a", {"pods": "5"})]})["pods"] == 1


def test_regular_init_container_larger_than_the_containers_sets_the_request():
    spec = {"initContainers": [container("init", {"cpu": "2", "memory": "128Mi"})],
            "containers": [container("a", {"cpu": "500m", "memory": "1Gi"})]}
    # max per resource, not sum: cpu from the init container, memory from the app container
    assert pod_requests(spec) == {"cpu": 2000, "memory": Gi, "pods": 1}


def test_regular_init_container_smaller_than_the_containers_adds_nothing():
    spec = {"initContainers": [container("init", {"cpu": "100m"})],
            "containers": [container("a", {"cpu": "1"}), container("b", {"cpu": "1"})]}
    assert pod_requests(spec) == {"cpu": 2000, "pods": 1}


def test_regular_init_containers_take_the_max_of_each_other_not_the_sum():
    spec = {"initContainers": [container("i1", {"cpu": "3"}), container("i2", {"cpu": "2"})],
            "containers": [container("a", {"cpu": "1"})]}
    assert pod_requests(spec) == {"cpu": 3000, "pods": 1}


def test_init_container_resource_absent_from_app_containers_is_counted():
    spec = {"initContainers": [container("init", {"ephemeral-storage": "1Gi"})],
            "containers": [container("a", {"cpu": "1"})]}
    assert pod_requests(spec) == {"cpu": 1000, "ephemeral-storage": Gi, "pods": 1}


def test_sidecar_init_containers_add_to_the_app_containers():
    spec = {"initContainers": [sidecar("s1", {"cpu": "200m", "memory": "64Mi"}),
                               sidecar("s2", {"cpu": "300m"})],
            "containers": [container("a", {"cpu": "1", "memory": "1Gi"})]}
    assert pod_requests(spec) == {"cpu": 1500, "memory": Gi + 64 * Mi, "pods": 1}


def test_regular_init_container_after_a_sidecar_runs_alongside_it():
    # init runs with s1 already started: peak 2 + 0.5 = 2.5 > app 1 + sidecar 0.5 = 1.5
    spec = {"initContainers": [sidecar("s1", {"cpu": "500m"}), container("init", {"cpu": "2"})],
            "containers": [container("a", {"cpu": "1"})]}
    assert pod_requests(spec) == {"cpu": 2500, "pods": 1}


def test_regular_init_container_before_a_sidecar_does_not_run_alongside_it():
    # init runs before s1 starts: peak 2 vs app 1 + sidecar 0.5 = 1.5 -> 2
    spec = {"initContainers": [container("init", {"cpu": "2"}), sidecar("s1", {"cpu": "500m"})],
            "containers": [container("a", {"cpu": "1"})]}
    assert pod_requests(spec) == {"cpu": 2000, "pods": 1}


def test_init_container_with_restart_policy_other_than_always_is_a_regular_init_container():
    spec = {"initContainers": [container("i", {"cpu": "500m"}, restartPolicy="OnFailure")],
            "containers": [container("a", {"cpu": "1"})]}
    assert pod_requests(spec) == {"cpu": 1000, "pods": 1}


def test_overhead_is_added_on_top_of_the_containers():
    spec = {"containers": [container("a", {"cpu": "1", "memory": "1Gi"})],
            "overhead": {"cpu": "250m", "memory": "120Mi"}}
    assert pod_requests(spec) == {"cpu": 1250, "memory": Gi + 120 * Mi, "pods": 1}


def test_overhead_is_added_after_the_init_container_max():
    spec = {"initContainers": [container("init", {"cpu": "2"})],
            "containers": [container("a", {"cpu": "1"})],
            "overhead": {"cpu": "100m"}}
    assert pod_requests(spec) == {"cpu": 2100, "pods": 1}


def test_limit_without_request_counts_as_the_request():
    spec = {"containers": [container("a", limits={"cpu": "2", "memory": "1Gi"})]}
    assert pod_requests(spec) == {"cpu": 2000, "memory": Gi, "pods": 1}


def test_explicit_request_wins_over_limit():
    spec = {"containers": [container("a", {"cpu": "500m"}, {"cpu": "2", "memory": "1Gi"})]}
    assert pod_requests(spec) == {"cpu": 500, "memory": Gi, "pods": 1}


def test_limit_only_on_an_init_container_counts_as_its_request():
    spec = {"initContainers": [container("init", limits={"cpu": "3"})],
            "containers": [container("a", {"cpu": "1"})]}
    assert pod_requests(spec) == {"cpu": 3000, "pods": 1}


def test_extended_resources_are_counted_in_base_units():
    spec = {"containers": [container("a", {"nvidia.com/gpu": "2"}), container("b", {"nvidia.com/gpu": 1})]}
    assert pod_requests(spec) == {"nvidia.com/gpu": 3, "pods": 1}


def test_zero_requests_are_left_out():
    spec = {"containers": [container("a", {"cpu": "0", "memory": "64Mi"})]}
    assert pod_requests(spec) == {"memory": 64 * Mi, "pods": 1}


# --- decode_pod on the real wire sample -----------------------------------------------------

def test_decode_wire_pod_from_filter_request():
    """The Pod kube-scheduler v1.36.2 sent in filter-nodecache-true.request.json (wire README
    §2: no kind/apiVersion, no managedFields, spec.priority filled in by admission)."""
    pod = decode_pod(wire_pod())
    assert pod.name == "plain-1"
    assert pod.namespace == "e2e"
    assert pod.key == "e2e/plain-1"
    assert pod.uid == "1c72a287-8708-4141-80d2-322670d8257c"
    assert pod.requests == {"cpu": 100, "memory": 64 * Mi, "pods": 1}
    assert pod.priority == 0
    assert pod.preemption_policy == "PreemptLowerPriority"
    assert pod.scheduler_name == "default-scheduler"
    assert pod.phase == "Pending"
    assert pod.node_name == ""
    assert pod.nominated_node == ""
    assert pod.labels == {"app": "e2e"}
    assert pod.queue_name == ""
    assert [t["key"] for t in pod.tolerations] == ["node.kubernetes.io/not-ready",
                                                   "node.kubernetes.io/unreachable"]
    assert pod.created is not None


def test_decode_takes_priority_from_spec_priority():
    raw = wire_pod()
    raw["spec"]["priority"] = 1000
    raw["spec"]["priorityClassName"] = "high"
    pod = decode_pod(raw)
    assert pod.priority == 1000
    assert pod.priority_class == "high"


def test_decode_pod_without_priority_has_none():
    pod = decode_pod({"metadata": {"name": "p", "namespace": "ns"}, "spec": {"containers": []}})
    assert pod.priority is None
    assert pod.namespace == "ns"
    assert pod.requests == {"pods": 1}


def test_decode_reads_the_queue_name_label():
    raw = wire_pod()
    raw["metadata"]["labels"][QUEUE_LABEL] = "team-a"
    assert decode_pod(raw).queue_name == "team-a"


def test_decode_reads_nominated_node_after_preemption():
    """Wire README §4: after a preemption the pod carries status.nominatedNodeName."""
    raw = wire_pod()
    raw["status"]["nominatedNodeName"] = "node-c"
    assert decode_pod(raw).nominated_node == "node-c"


def test_decode_pod_without_uid_gets_a_stable_uid():
    raw = {"metadata": {"name": "p", "namespace": "ns"}, "spec": {}}
    assert decode_pod(raw).uid == decode_pod(copy.deepcopy(raw)).uid != ""


# --- bad input ------------------------------------------------------------------------------

def test_requests_that_are_a_string_raise_invalid_object_naming_the_field():
    raw = wire_pod()
    raw["spec"]["containers"][0]["resources"]["requests"] = "100m"
    with pytest.raises(InvalidObject, match=r"resources\.requests must be an object") as exc:
        decode_pod(raw)
    assert exc.value.kind == "Pod"
    assert exc.value.name == "e2e/plain-1"


def test_negative_request_raises_invalid_object_naming_container_and_resource():
    raw = wire_pod()
    raw["spec"]["containers"][0]["resources"]["requests"]["cpu"] = "-100m"
    with pytest.raises(InvalidObject, match=r"container c: cpu: '-100m' is negative"):
        decode_pod(raw)


def test_malformed_request_raises_invalid_object_naming_the_resource():
    raw = wire_pod()
    raw["spec"]["containers"][0]["resources"]["requests"]["memory"] = "64Q"
    with pytest.raises(InvalidObject, match=r"memory: '64Q'"):
        decode_pod(raw)


def test_malformed_overhead_raises_invalid_object_naming_overhead():
    with pytest.raises(InvalidObject, match=r"overhead: cpu"):
        pod_requests({"overhead": {"cpu": "lots"}})


def test_non_integer_priority_raises_invalid_object_naming_spec_priority():
    raw = wire_pod()
    raw["spec"]["priority"] = "high"
    with pytest.raises(InvalidObject, match=r"spec\.priority must be an integer, got 'high'"):
        decode_pod(raw)


def test_boolean_priority_is_rejected():
    raw = wire_pod()
    raw["spec"]["priority"] = True
    with pytest.raises(InvalidObject, match=r"spec\.priority"):
        decode_pod(raw)


def test_containers_not_a_list_raises_invalid_object():
    with pytest.raises(InvalidObject, match=r"spec\.containers must be a list"):
        pod_requests({"containers": {"name": "c"}})


def test_missing_name_raises_invalid_object():
    with pytest.raises(InvalidObject, match=r"metadata\.name is required"):
        decode_pod({"metadata": {"namespace": "e2e"}, "spec": {}})
