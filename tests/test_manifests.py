"""deploy/ and scheduler-config/: every manifest parses and the extender registration is right."""
from pathlib import Path

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[1]
MANIFESTS = sorted((ROOT / "deploy").glob("*.yaml")) + sorted((ROOT / "scheduler-config").glob("*.yaml"))


def documents(path: Path) -> list[dict]:
    return [d for d in yaml.safe_load_all(path.read_text()) if d is not None]


def by_kind(path: Path) -> dict[str, list[dict]]:
    out: dict[str, list[dict]] = {}
    for d in documents(path):
        out.setdefault(d["kind"], []).append(d)
    return out


def test_every_expected_manifest_exists():
    names = {p.relative_to(ROOT).as_posix() for p in MANIFESTS}
    assert {"deploy/namespace.yaml", "deploy/rbac.yaml", "deploy/quotient.yaml",
            "scheduler-config/kube-scheduler-config.yaml"} <= names


@pytest.mark.parametrize("path", MANIFESTS, ids=lambda p: p.relative_to(ROOT).as_posix())
def test_every_document_parses_and_has_api_version_and_kind(path):
    docs = documents(path)
    assert docs, f"{path} has no documents"
    for doc in docs:
        assert isinstance(doc, dict)
        assert isinstance(doc.get("apiVersion"), str) and doc["apiVersion"]
        assert isinstance(doc.get("kind"), str) and doc["kind"]


def scheduler_config() -> dict:
    (cfg,) = documents(ROOT / "scheduler-config" / "kube-scheduler-config.yaml")
    assert cfg["apiVersion"] == "kubescheduler.config.k8s.io/v1"
    assert cfg["kind"] == "KubeSchedulerConfiguration"
    return cfg


def test_scheduler_config_extender_has_all_four_verbs():
    (ext,) = scheduler_config()["extenders"]
    assert (ext["filterVerb"], ext["prioritizeVerb"], ext["preemptVerb"], ext["bindVerb"]) == (
        "filter", "prioritize", "preempt", "bind")


def test_scheduler_config_extender_is_node_cache_capable_and_not_ignorable():
    (ext,) = scheduler_config()["extenders"]
    assert ext["nodeCacheCapable"] is True
    assert ext["ignorable"] is False
    assert ext["enableHTTPS"] is False
    assert ext["weight"] == 2
    assert ext["httpTimeout"] == "5s"


def test_scheduler_config_scores_every_node():
    assert scheduler_config()["percentageOfNodesToScore"] == 100


def test_scheduler_config_profile_and_url_point_at_the_deployed_service():
    cfg = scheduler_config()
    assert [p["schedulerName"] for p in cfg["profiles"]] == ["quotient-scheduler"]
    (ext,) = cfg["extenders"]
    assert ext["urlPrefix"] == "http://quotient.quotient-system.svc:8888/scheduler"
    service = by_kind(ROOT / "deploy" / "quotient.yaml")["Service"][0]
    assert service["metadata"]["name"] == "quotient"
    assert service["metadata"]["namespace"] == "quotient-system"
    assert [p["port"] for p in service["spec"]["ports"]] == [8888]


def test_configmap_path_prefix_matches_the_extender_url():
    cm = by_kind(ROOT / "deploy" / "quotient.yaml")["ConfigMap"][0]
    config = yaml.safe_load(cm["data"]["config.yaml"])
    assert config == {"apiVersion": "quotient.dev/v1alpha1", "kind": "Configuration",
                      "pathPrefix": "/scheduler"}
    (ext,) = scheduler_config()["extenders"]
    assert ext["urlPrefix"].endswith(config["pathPrefix"])


def test_deployment_runs_the_image_with_the_mounted_config_and_probes():
    kinds = by_kind(ROOT / "deploy" / "quotient.yaml")
    pod = kinds["Deployment"][0]["spec"]["template"]["spec"]
    (c,) = pod["containers"]
    assert c["image"] == "quotient:0.1.0"
    assert c["args"] == ["serve", "--host", "0.0.0.0", "--config", "/etc/quotient/config.yaml"]
    assert c["readinessProbe"]["httpGet"]["path"] == "/readyz"
    assert c["livenessProbe"]["httpGet"]["path"] == "/livez"
    assert pod["securityContext"]["runAsNonRoot"] is True
    assert pod["serviceAccountName"] == "quotient"
    mount = next(m for m in c["volumeMounts"] if m["mountPath"] == "/etc/quotient")
    volume = next(v for v in pod["volumes"] if v["name"] == mount["name"])
    assert volume["configMap"]["name"] == kinds["ConfigMap"][0]["metadata"]["name"]


def test_rbac_grants_the_writes_quotient_makes():
    role = by_kind(ROOT / "deploy" / "rbac.yaml")["ClusterRole"][0]
    granted = {(g, r, v) for rule in role["rules"] for g in rule["apiGroups"]
               for r in rule["resources"] for v in rule["verbs"]}
    for need in [("", "pods/binding", "create"), ("", "pods/eviction", "create"),
                 ("", "pods/status", "patch"), ("events.k8s.io", "events", "create"),
                 ("kueue.x-k8s.io", "clusterqueues/status", "update"),
                 ("", "pods", "watch"), ("kueue.x-k8s.io", "cohorts", "list")]:
        assert need in granted, need
