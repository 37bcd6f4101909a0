"""deploy/ and scheduler-config/: every manifest file parses and validates against the schema of its kind.
(tests/test_deploy_variants.py renders the kustomize variants these files make up and checks them as applied.)

- Kubernetes built-in kinds (Namespace, ServiceAccount, ConfigMap, Service, Deployment, RBAC,
  CustomResourceDefinition) are deserialized into kubernetes_asyncio's models (which reject
  a missing required field) and serialized back: the round trip must give the document
  unchanged, so no field is unknown to the kind, misplaced, or of the wrong type.
- The CRDs' openAPIV3Schema must also be structural (as the API server requires), and the
  Kueue objects of the shared scenarios, the repo's scenarios and the demo snapshot must
  validate against them (a small validator of the structural-schema subset used here).
- KubeSchedulerConfiguration documents validate against a schema of the
  kubescheduler.config.k8s.io/v1 fields (unknown fields are errors, as kube-scheduler's
  strict decoding makes them) plus kube-scheduler's own extender rules.
- Cross-references: names, namespaces, ports, mounts, the extender URL and the RBAC grants
  agree across files.
"""
from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import types
from pathlib import Path

import pytest
import yaml
from kubernetes_asyncio.client import ApiClient, Configuration

ROOT = Path(__file__).resolve().parents[1]
SHARED_EXAMPLES = ROOT.parent / "shared" / "scenarios" / "examples"
BASE, CRDS = ROOT / "deploy" / "base", ROOT / "deploy" / "crds" / "crds.yaml"
SCHEDULER = ROOT / "deploy" / "second-scheduler" / "scheduler.yaml"
# The manifest files of deploy/ (kustomize's own files and the components' cert-manager and Prometheus kinds
# are checked as rendered, in tests/test_deploy_variants.py) and scheduler-config/.
MANIFESTS = sorted(BASE.glob("*.yaml")) + [CRDS, SCHEDULER, ROOT / "deploy" / "main-scheduler" / "main-scheduler.yaml"]
MANIFESTS = [p for p in MANIFESTS if p.name != "kustomization.yaml"] + sorted((ROOT / "scheduler-config").glob("*.yaml"))
NAMESPACE = "quotient-system"


def documents(path: Path) -> list[dict]:
    return [d for d in yaml.safe_load_all(path.read_text()) if d is not None]


def by_kind(path: Path) -> dict[str, list[dict]]:
    out: dict[str, list[dict]] = {}
    for d in documents(path):
        out.setdefault(d["kind"], []).append(d)
    return out


def all_docs() -> list[tuple[Path, dict]]:
    return [(p, d) for p in MANIFESTS for d in documents(p)]


def ids(p: Path) -> str:
    return p.relative_to(ROOT).as_posix()


def test_every_expected_manifest_exists():
    names = {ids(p) for p in MANIFESTS}
    assert {"deploy/base/namespace.yaml", "deploy/crds/crds.yaml", "deploy/base/rbac.yaml", "deploy/base/quotient.yaml",
            "deploy/second-scheduler/scheduler.yaml", "deploy/base/networkpolicy.yaml",
            "deploy/main-scheduler/main-scheduler.yaml", "scheduler-config/http.yaml", "scheduler-config/https.yaml",
            "scheduler-config/main-scheduler.yaml"} <= names


@pytest.mark.parametrize("path", MANIFESTS, ids=ids)
def test_every_document_parses_and_has_api_version_and_kind(path):
    docs = documents(path)
    assert docs, f"{path} has no documents"
    for doc in docs:
        assert isinstance(doc, dict)
        assert isinstance(doc.get("apiVersion"), str) and doc["apiVersion"]
        assert isinstance(doc.get("kind"), str) and doc["kind"]


# --- Built-in kinds: kubernetes_asyncio models --------------------------------------------

BUILTIN = {
    ("v1", "Namespace"), ("v1", "ServiceAccount"), ("v1", "ConfigMap"), ("v1", "Service"), ("v1", "Secret"),
    ("apps/v1", "Deployment"),
    ("rbac.authorization.k8s.io/v1", "ClusterRole"), ("rbac.authorization.k8s.io/v1", "ClusterRoleBinding"),
    ("rbac.authorization.k8s.io/v1", "Role"), ("rbac.authorization.k8s.io/v1", "RoleBinding"),
    ("apiextensions.k8s.io/v1", "CustomResourceDefinition"),
    ("policy/v1", "PodDisruptionBudget"), ("networking.k8s.io/v1", "NetworkPolicy"),
    ("admissionregistration.k8s.io/v1", "MutatingWebhookConfiguration"),
}
OTHER = {("kubescheduler.config.k8s.io/v1", "KubeSchedulerConfiguration")}


def _api() -> ApiClient:
    # The model (de)serializers only need the configuration, not an HTTP session (which
    # would need a running event loop).
    api = ApiClient.__new__(ApiClient)
    api.configuration = Configuration.get_default_copy()
    return api


def round_trip(doc: dict) -> dict:
    """doc through the kubernetes_asyncio model of its kind and back (raises on a missing required field)."""
    api = _api()
    model = "V1" + doc["kind"]
    obj = api.deserialize(types.SimpleNamespace(data=json.dumps(doc)), model)
    assert type(obj).__name__ == model
    return api.sanitize_for_serialization(obj)


def _differences(a, b, at="") -> list[str]:
    if isinstance(a, dict) and isinstance(b, dict):
        out = []
        for k in sorted(set(a) | set(b)):
            if k not in b:
                out.append(f"{at}.{k}: dropped (not a field of the kind)")
            elif k not in a:
                out.append(f"{at}.{k}: added")
            else:
                out += _differences(a[k], b[k], f"{at}.{k}")
        return out
    if isinstance(a, list) and isinstance(b, list) and len(a) == len(b):
        return [d for i, (x, y) in enumerate(zip(a, b)) for d in _differences(x, y, f"{at}[{i}]")]
    return [] if (a == b and type(a) is type(b)) else [f"{at}: {a!r} became {b!r}"]


@pytest.mark.parametrize("path", MANIFESTS, ids=ids)
def test_every_kind_is_known(path):
    for doc in documents(path):
        assert (doc["apiVersion"], doc["kind"]) in BUILTIN | OTHER, (doc["apiVersion"], doc["kind"])


@pytest.mark.parametrize("path", [p for p in MANIFESTS if "deploy" in p.parts], ids=ids)
def test_builtin_kinds_round_trip_through_their_models_unchanged(path):
    for doc in documents(path):
        if (doc["apiVersion"], doc["kind"]) not in BUILTIN:
            continue
        original = json.loads(json.dumps(doc))
        diff = _differences(original, round_trip(doc))
        assert not diff, f"{doc['kind']} {doc['metadata'].get('name')}: " + "; ".join(diff)


def test_the_round_trip_catches_unknown_misplaced_mistyped_and_missing_fields():
    base = by_kind(BASE / "quotient.yaml")["Deployment"][0]
    assert not _differences(json.loads(json.dumps(base)), round_trip(base))
    typo = json.loads(json.dumps(base))
    typo["spec"]["template"]["spec"]["containers"][0]["readinessProbes"] = {}
    assert any("readinessProbes: dropped" in d for d in _differences(typo, round_trip(typo)))
    misplaced = json.loads(json.dumps(base))
    misplaced["spec"]["serviceAccountName"] = "quotient"      # belongs in the pod template
    assert _differences(misplaced, round_trip(misplaced))
    mistyped = json.loads(json.dumps(base))
    mistyped["spec"]["replicas"] = "2"
    assert _differences(mistyped, round_trip(mistyped))
    missing = json.loads(json.dumps(base))
    del missing["spec"]["template"]["spec"]["containers"][0]["name"]
    with pytest.raises(ValueError):
        round_trip(missing)


@pytest.mark.parametrize("path, doc", [(p, d) for p, d in all_docs() if (d["apiVersion"], d["kind"]) in BUILTIN],
                         ids=lambda x: ids(x) if isinstance(x, Path) else f"{x['kind']}/{x['metadata']['name']}")
def test_object_names_are_dns_names(path, doc):
    name = doc["metadata"]["name"]
    if doc["kind"] in ("ClusterRole", "ClusterRoleBinding", "Role", "RoleBinding"):
        assert re.fullmatch(r"[a-z0-9:]([-a-z0-9.:]*[a-z0-9])?", name), name
    else:
        assert re.fullmatch(r"[a-z0-9]([-a-z0-9.]*[a-z0-9])?", name) and len(name) <= 253, name


# --- A validator for the structural-schema subset the CRDs and configs use ----------------

QUANTITY = re.compile(r"^(\+|-)?(([0-9]+(\.[0-9]*)?)|(\.[0-9]+))(([KMGTPE]i)|[numkMGTPE]|([eE](\+|-)?(([0-9]+(\.[0-9]*)?)|(\.[0-9]+))))?$")
INT32 = (-2**31, 2**31 - 1)
INT64 = (-2**63, 2**63 - 1)


def _type_ok(value, t: str) -> bool:
    return {"object": isinstance(value, dict), "array": isinstance(value, list), "string": isinstance(value, str),
            "boolean": isinstance(value, bool),
            "integer": isinstance(value, int) and not isinstance(value, bool),
            "number": isinstance(value, (int, float)) and not isinstance(value, bool)}[t]


def validate(value, schema: dict, at: str = "") -> list[str]:
    """Errors of value against an OpenAPI v3 structural schema; unknown fields are errors
    unless x-kubernetes-preserve-unknown-fields (kubectl's strict field validation)."""
    errors: list[str] = []
    if schema.get("x-kubernetes-int-or-string"):
        if not (_type_ok(value, "integer") or _type_ok(value, "string")):
            return [f"{at}: {value!r} is neither an integer nor a string"]
    elif "type" in schema:
        if not _type_ok(value, schema["type"]):
            return [f"{at}: {value!r} is not of type {schema['type']}"]
    if "enum" in schema and value not in schema["enum"]:
        errors.append(f"{at}: {value!r} is not one of {schema['enum']}")
    if isinstance(value, str):
        if "pattern" in schema and not re.search(schema["pattern"], value):
            errors.append(f"{at}: {value!r} does not match {schema['pattern']}")
        if "maxLength" in schema and len(value) > schema["maxLength"]:
            errors.append(f"{at}: longer than {schema['maxLength']}")
        if schema.get("format") == "duration" and not re.fullmatch(r"(\d+(\.\d+)?(ns|us|µs|ms|s|m|h))+", value):
            errors.append(f"{at}: {value!r} is not a duration")
    if _type_ok(value, "integer"):
        lo, hi = {"int32": INT32, "int64": INT64}.get(schema.get("format"), (None, None))
        lo = schema.get("minimum", lo)
        hi = schema.get("maximum", hi)
        if (lo is not None and value < lo) or (hi is not None and value > hi):
            errors.append(f"{at}: {value} is out of range [{lo}, {hi}]")
    if isinstance(value, list):
        if len(value) < schema.get("minItems", 0) or len(value) > schema.get("maxItems", len(value)):
            errors.append(f"{at}: {len(value)} items, not within [{schema.get('minItems', 0)}, "
                          f"{schema.get('maxItems')}]")
        for i, item in enumerate(value):
            errors += validate(item, schema.get("items", {}), f"{at}[{i}]")
        keys = schema.get("x-kubernetes-list-map-keys")
        if keys and len({tuple(str(i.get(k)) for k in keys) for i in value}) != len(value):
            errors.append(f"{at}: duplicate {keys}")
    if isinstance(value, dict):
        props = schema.get("properties", {})
        for r in schema.get("required", []):
            if r not in value:
                errors.append(f"{at}.{r}: required")
        if len(value) > schema.get("maxProperties", len(value)):
            errors.append(f"{at}: more than {schema['maxProperties']} entries")
        extra = schema.get("additionalProperties")
        for k, v in value.items():
            if k in props:
                errors += validate(v, props[k], f"{at}.{k}")
            elif isinstance(extra, dict):
                errors += validate(v, extra, f"{at}.{k}")
            elif not schema.get("x-kubernetes-preserve-unknown-fields") and extra is not True \
                    and not (at == ".metadata"):
                errors.append(f"{at}.{k}: unknown field")
    return errors


def structural_problems(schema: dict, at: str = "") -> list[str]:
    """The API server's structural-schema rules, for the constructs these CRDs use."""
    out: list[str] = []
    int_or_string = schema.get("x-kubernetes-int-or-string")
    if "type" not in schema and not int_or_string and not schema.get("x-kubernetes-preserve-unknown-fields"):
        out.append(f"{at}: no type")
    if "anyOf" in schema:
        if not int_or_string:
            out.append(f"{at}: anyOf outside x-kubernetes-int-or-string")
        for alt in schema["anyOf"]:
            if set(alt) - {"type"} or alt.get("type") not in ("integer", "string"):
                out.append(f"{at}: anyOf may only name integer and string here")
    t = schema.get("type")
    if t == "object":
        if at.endswith(".metadata") and at.count(".") == 1:
            if set(schema) - {"type"}:
                out.append(f"{at}: metadata may only be type: object here")
        elif not ({"properties", "additionalProperties"} & set(schema)
                  or schema.get("x-kubernetes-preserve-unknown-fields")):
            out.append(f"{at}: object without properties, additionalProperties or preserve-unknown-fields")
        if "properties" in schema and isinstance(schema.get("additionalProperties"), dict):
            out.append(f"{at}: properties and additionalProperties together")
    if t == "array" and "items" not in schema:
        out.append(f"{at}: array without items")
    for k, sub in schema.get("properties", {}).items():
        out += structural_problems(sub, f"{at}.{k}")
    if isinstance(schema.get("additionalProperties"), dict):
        out += structural_problems(schema["additionalProperties"], f"{at}.*")
    if isinstance(schema.get("items"), dict):
        out += structural_problems(schema["items"], f"{at}[]")
    if schema.get("x-kubernetes-list-type") == "map":
        keys = schema.get("x-kubernetes-list-map-keys") or []
        item = schema.get("items", {})
        if not keys or any(k not in item.get("required", []) for k in keys):
            out.append(f"{at}: list-type map needs required map keys")
    return out


# --- CRDs ---------------------------------------------------------------------------------

KUEUE_KINDS = ["ResourceFlavor", "ClusterQueue", "LocalQueue", "Cohort"]      # the four Quotient converts
VERSIONS = ["v1beta1", "v1beta2"]
KIND_VERSIONS = [(k, v) for k in KUEUE_KINDS + ["WorkloadPriorityClass", "Topology"] for v in VERSIONS]


def crds() -> dict[str, dict]:
    return {d["spec"]["names"]["kind"]: d for d in documents(CRDS)}


def crd_version(kind: str, version: str) -> dict:
    (out,) = [v for v in crds()[kind]["spec"]["versions"] if v["name"] == version]
    return out


def crd_schema(kind: str, version: str) -> dict:
    return crd_version(kind, version)["schema"]["openAPIV3Schema"]


def test_crds_define_the_kueue_kinds_with_kueues_names_and_scopes_in_both_versions_v1beta2_stored():
    defined = crds()
    assert {k: (d["metadata"]["name"], d["spec"]["scope"]) for k, d in defined.items()} == {
        "ResourceFlavor": ("resourceflavors.kueue.x-k8s.io", "Cluster"),
        "ClusterQueue": ("clusterqueues.kueue.x-k8s.io", "Cluster"),
        "LocalQueue": ("localqueues.kueue.x-k8s.io", "Namespaced"),
        "Cohort": ("cohorts.kueue.x-k8s.io", "Cluster"),
        "WorkloadPriorityClass": ("workloadpriorityclasses.kueue.x-k8s.io", "Cluster"),
        "Topology": ("topologies.kueue.x-k8s.io", "Cluster"),        # its schema and Kueue's rules (issue 36)
    }
    for kind, d in defined.items():
        names = d["spec"]["names"]
        assert d["spec"]["group"] == "kueue.x-k8s.io"
        assert d["metadata"]["name"] == f"{names['plural']}.{d['spec']['group']}"
        assert names["listKind"] == kind + "List" and names["singular"] == kind.lower()
        assert d["metadata"]["labels"]["app.kubernetes.io/name"] == "quotient"      # certs.sh selects them so
        versions = d["spec"]["versions"]
        assert [(v["name"], v["served"]) for v in versions] == [("v1beta1", True), ("v1beta2", True)], kind
        assert [v["name"] for v in versions if v["storage"]] == ["v1beta2"], kind
    assert defined["ClusterQueue"]["spec"]["names"]["shortNames"] == ["cq"]
    assert "shortNames" not in defined["WorkloadPriorityClass"]["spec"]["names"]       # Kueue's has none


@pytest.mark.parametrize("kind, version", KIND_VERSIONS)
def test_crd_schemas_are_structural(kind, version):
    schema = crd_schema(kind, version)
    assert structural_problems(schema) == []
    assert schema["properties"]["metadata"] == {"type": "object"}
    if kind in KUEUE_KINDS:     # Kueue's fields Quotient does not read are kept as written.
        assert schema["properties"]["spec"].get("x-kubernetes-preserve-unknown-fields") is True


def _without(schema: dict, *paths: str) -> dict:
    """schema with the properties at the dotted paths removed."""
    out = json.loads(json.dumps(schema))
    for path in paths:
        *parents, last = path.split(".")
        node = out
        for p in parents:
            node = node["properties"][p]
        del node["properties"][last]
    return out


def test_the_versions_differ_only_where_kueues_do():
    """v1beta2 renamed cohort, dropped admissionChecks and the old fungibility names, added
    concurrentAdmissionPolicy, and renamed LocalQueue's flavorUsage; everything else is one schema (a fix to one
    version is made to both)."""
    for kind in ("ResourceFlavor", "Cohort", "WorkloadPriorityClass"):
        assert crd_schema(kind, "v1beta1") == crd_schema(kind, "v1beta2"), kind
    old, new = crd_schema("ClusterQueue", "v1beta1"), crd_schema("ClusterQueue", "v1beta2")
    spec_old, spec_new = old["properties"]["spec"]["properties"], new["properties"]["spec"]["properties"]
    assert spec_old["cohort"] == spec_new["cohortName"]
    assert spec_old["admissionChecks"] == {"description": spec_old["admissionChecks"]["description"],
                                           "type": "array", "items": {"type": "string"}}
    fungibility = {p: spec_new["flavorFungibility"]["properties"][p]["enum"]
                   for p in ("whenCanBorrow", "whenCanPreempt")}
    assert fungibility == {"whenCanBorrow": ["MayStopSearch", "TryNextFlavor"],
                           "whenCanPreempt": ["MayStopSearch", "TryNextFlavor"]}
    assert set(spec_old["flavorFungibility"]["properties"]["whenCanBorrow"]["enum"]) == \
        {"Borrow", "MayStopSearch", "TryNextFlavor"}
    assert set(spec_old["flavorFungibility"]["properties"]["whenCanPreempt"]["enum"]) == \
        {"Preempt", "MayStopSearch", "TryNextFlavor"}
    same = ("spec.flavorFungibility.properties.whenCanBorrow", "spec.flavorFungibility.properties.whenCanPreempt")
    assert _without(old, "spec.cohort", "spec.admissionChecks", *(p.replace(".properties", "") for p in same)) == \
        _without(new, "spec.cohortName", "spec.concurrentAdmissionPolicy", *(p.replace(".properties", "") for p in same))
    lq_old, lq_new = crd_schema("LocalQueue", "v1beta1"), crd_schema("LocalQueue", "v1beta2")
    assert lq_old["properties"]["status"]["properties"]["flavorUsage"] == \
        lq_new["properties"]["status"]["properties"]["flavorsUsage"]
    assert _without(lq_old, "status.flavorUsage") == _without(lq_new, "status.flavorsUsage")


def test_structural_check_catches_what_the_api_server_refuses():
    assert structural_problems({"type": "object", "properties": {"a": {}}}) == [".a: no type"]
    assert structural_problems({"type": "object", "properties": {"a": {"type": "object"}}})
    assert structural_problems({"type": "object", "properties": {"a": {"type": "array"}}})
    assert structural_problems({"type": "object", "properties": {
        "a": {"anyOf": [{"type": "integer"}, {"type": "string"}]}}})


def _path_in_schema(schema: dict, json_path: str) -> bool:
    node = schema
    for part in json_path.strip(".").split("."):
        if part in ("metadata",) and node is schema:
            return True
        node = node.get("properties", {}).get(part)
        if node is None:
            return False
    return True


@pytest.mark.parametrize("kind, version", KIND_VERSIONS)
def test_printer_columns_name_fields_of_their_versions_schema(kind, version):
    columns = crd_version(kind, version).get("additionalPrinterColumns", [])
    assert columns or kind in ("ResourceFlavor", "Topology")       # as in Kueue's CRDs
    for col in columns:
        assert _path_in_schema(crd_schema(kind, version), col["jsonPath"]), col


@pytest.mark.parametrize("version, cohort", [("v1beta1", ".spec.cohort"), ("v1beta2", ".spec.cohortName")])
def test_clusterqueue_has_kueues_printer_columns_and_a_status_subresource_with_what_quotient_writes(version, cohort):
    v = crd_version("ClusterQueue", version)
    assert [(c["name"], c["jsonPath"]) for c in v["additionalPrinterColumns"]] == [
        ("Cohort", cohort), ("Strategy", ".spec.queueingStrategy"),
        ("Pending Workloads", ".status.pendingWorkloads"), ("Admitted Workloads", ".status.admittedWorkloads")]
    assert v["subresources"] == {"status": {}}
    status = crd_schema("ClusterQueue", version)["properties"]["status"]["properties"]
    assert {"flavorsUsage", "pendingWorkloads", "admittedWorkloads", "fairSharing"} <= set(status)
    assert status["fairSharing"]["properties"]["weightedShare"]["type"] == "integer"
    sample = {"flavorsUsage": [{"name": "on-demand", "resources": [{"name": "cpu", "total": "9", "borrowed": 0}]}],
              "pendingWorkloads": 3, "admittedWorkloads": 2, "fairSharing": {"weightedShare": 250}}
    assert validate(sample, crd_schema("ClusterQueue", version)["properties"]["status"], ".status") == []


def test_workload_priority_class_is_kueues():
    v = crd_version("WorkloadPriorityClass", "v1beta2")
    assert [(c["name"], c["type"], c["jsonPath"]) for c in v["additionalPrinterColumns"]] == \
        [("Value", "integer", ".value")]
    assert crds()["WorkloadPriorityClass"]["spec"]["conversion"] == {"strategy": "None"}
    schema = crd_schema("WorkloadPriorityClass", "v1beta2")
    wpc = {"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "WorkloadPriorityClass", "metadata": {"name": "high"},
           "value": 10000, "description": "production jobs"}
    assert validate(wpc, schema) == []
    assert validate({**wpc, "value": "high"}, schema) and validate({**wpc, "value": 2**31}, schema)
    assert validate({k: v for k, v in wpc.items() if k != "value"}, schema) == [".value: required"]
    assert validate({**wpc, "description": "x" * 2049}, schema)
    assert validate({**wpc, "spec": {}}, schema) == [".spec: unknown field"]


def _kueue_objects() -> list[tuple[str, dict]]:
    files = sorted(SHARED_EXAMPLES.glob("*.yaml")) + sorted((ROOT / "tests" / "scenarios").glob("*.yaml")) \
        + [ROOT / "app" / "data" / "demo-snapshot.yaml"]
    out = []
    for f in files:
        for i, d in enumerate(yaml.safe_load_all(f.read_text())):
            if isinstance(d, dict) and str(d.get("apiVersion", "")).startswith("kueue.x-k8s.io/"):
                out.append((f"{f.parent.name}/{f.name}#{i}", d))
    return out


def test_there_are_example_kueue_objects_to_check():
    found = {d["kind"] for _, d in _kueue_objects()}
    assert {"ResourceFlavor", "ClusterQueue", "LocalQueue"} <= found
    assert any(where.startswith("examples/") for where, _ in _kueue_objects()) or not SHARED_EXAMPLES.exists()
    assert {d["apiVersion"] for _, d in _kueue_objects()} == {"kueue.x-k8s.io/v1beta1", "kueue.x-k8s.io/v1beta2"}


@pytest.mark.parametrize("where, obj", _kueue_objects(), ids=lambda x: x if isinstance(x, str) else "")
def test_example_kueue_objects_validate_against_our_crds_in_their_version_and_converted(where, obj):
    """Each object against the schema of its own apiVersion; converted by the webhook to the other version, it
    validates against that one (what the API server checks before storing it)."""
    from app.objects.conversion import convert

    group, _, version = obj["apiVersion"].partition("/")
    assert obj["kind"] in crds(), obj["kind"]
    assert validate(obj, crd_schema(obj["kind"], version)) == []
    assert isinstance(obj["metadata"].get("name"), str)
    other = "v1beta1" if version == "v1beta2" else "v1beta2"
    converted = convert(obj, other)
    assert converted["apiVersion"] == f"{group}/{other}"
    assert validate(converted, crd_schema(obj["kind"], other)) == []
    assert convert(converted, version) == obj or version == "v1beta1"   # v1beta1's Borrow comes back MayStopSearch


def test_the_crd_schemas_refuse_what_kueue_refuses_and_keep_what_kueue_adds():
    cq = {"apiVersion": "kueue.x-k8s.io/v1beta1", "kind": "ClusterQueue", "metadata": {"name": "cq"},
          "spec": {"cohort": "c", "namespaceSelector": {}, "queueingStrategy": "StrictFIFO",
                   "resourceGroups": [{"coveredResources": ["cpu", "memory"], "flavors": [
                       {"name": "on-demand", "resources": [{"name": "cpu", "nominalQuota": 9, "borrowingLimit": "1"},
                                                           {"name": "memory", "nominalQuota": "36Gi"}]}]}],
                   "preemption": {"reclaimWithinCohort": "Any",
                                  "borrowWithinCohort": {"policy": "LowerPriority", "maxPriorityThreshold": 100}},
                   "flavorFungibility": {"whenCanBorrow": "MayStopSearch"},
                   "fairSharing": {"weight": "1.5"},
                   # Kueue fields Quotient does not read:
                   "admissionChecks": ["prov"], "admissionScope": {"admissionMode": "NoAdmissionFairSharing"}}}
    schema = crd_schema("ClusterQueue", "v1beta1")
    assert validate(cq, schema) == []

    def broken(change, version="v1beta1") -> list[str]:
        bad = json.loads(json.dumps(cq))
        change(bad["spec"])
        return validate(bad, crd_schema("ClusterQueue", version))

    assert broken(lambda s: s.update(queueingStrategy="LIFO"))
    assert broken(lambda s: s["resourceGroups"][0]["flavors"][0]["resources"][0].update(nominalQuota="lots"))
    assert broken(lambda s: s["resourceGroups"][0]["flavors"][0].pop("name"))
    assert broken(lambda s: s["resourceGroups"][0]["flavors"][0].update(name="On_Demand"))
    assert broken(lambda s: s["preemption"].update(withinClusterQueue="Always"))
    # flavorFungibility: Kueue's current names and v1beta1's older ones (issue 9 point 5), nothing else.
    for fung in ({"whenCanBorrow": "Borrow", "whenCanPreempt": "Preempt"},
                 {"whenCanBorrow": "MayStopSearch", "whenCanPreempt": "MayStopSearch"},
                 {"whenCanBorrow": "TryNextFlavor", "whenCanPreempt": "TryNextFlavor",
                  "preference": "PreemptionOverBorrowing"}):
        assert not broken(lambda s: s.update(flavorFungibility=fung)), fung
    assert broken(lambda s: s.update(flavorFungibility={"whenCanPreempt": "Borrow"}))
    assert broken(lambda s: s.update(flavorFungibility={"whenCanBorrow": "Always"}))
    assert broken(lambda s: s.update(flavorFungibility={"preference": "Cheapest"}))
    assert broken(lambda s: s.update(cohort=7))
    assert broken(lambda s: s.update(admissionChecks="prov"))
    assert broken(lambda s: s["resourceGroups"][0]["flavors"].append(s["resourceGroups"][0]["flavors"][0]))
    # v1beta2: cohortName typed as cohort was; v1beta1's fungibility names refused.
    assert not broken(lambda s: (s.update(cohortName=s.pop("cohort")), s.pop("admissionChecks")), "v1beta2")
    assert broken(lambda s: s.update(cohortName="Not A Name"), "v1beta2")
    assert broken(lambda s: s.update(flavorFungibility={"whenCanBorrow": "Borrow"}), "v1beta2")
    assert broken(lambda s: s.update(flavorFungibility={"whenCanPreempt": "Preempt"}), "v1beta2")
    for version, usage in (("v1beta1", "flavorUsage"), ("v1beta2", "flavorsUsage")):
        lq = {"apiVersion": f"kueue.x-k8s.io/{version}", "kind": "LocalQueue",
              "metadata": {"name": "q", "namespace": "team-a"}, "spec": {"clusterQueue": "cq"},
              "status": {usage: [{"name": "f", "resources": [{"name": "cpu", "total": "2"}]}]}}
        assert validate(lq, crd_schema("LocalQueue", version)) == []
        assert validate({**lq, "spec": {"clusterQueue": "Not A Name"}}, crd_schema("LocalQueue", version))
        assert validate({**lq, "status": {usage: [{"resources": []}]}}, crd_schema("LocalQueue", version))
    rf = {"apiVersion": "kueue.x-k8s.io/v1beta1", "kind": "ResourceFlavor", "metadata": {"name": "spot"},
          "spec": {"nodeLabels": {"instance-type": "spot"},
                   "nodeTaints": [{"key": "spot", "value": "true", "effect": "NoSchedule"}]}}
    assert validate(rf, crd_schema("ResourceFlavor", "v1beta1")) == []
    assert validate({**rf, "spec": {"nodeTaints": [{"key": "spot", "effect": "Sometimes"}]}},
                    crd_schema("ResourceFlavor", "v1beta1"))


def test_the_crd_schemas_accept_what_quotient_decodes():
    """Every Kueue object the decoders accept in the examples is also accepted by the CRDs
    (checked above) and, conversely, what the CRDs type is what the decoders read."""
    from app.objects import kueue
    from app.objects.topology import decode_topology

    for _, obj in _kueue_objects():
        decode = {"ResourceFlavor": kueue.decode_resource_flavor, "ClusterQueue": kueue.decode_cluster_queue,
                  "LocalQueue": kueue.decode_local_queue, "Cohort": kueue.decode_cohort,
                  "WorkloadPriorityClass": kueue.decode_workload_priority_class,
                  "Topology": decode_topology}[obj["kind"]]
        decode(obj)
    for version, cohort in (("v1beta1", "cohort"), ("v1beta2", "cohortName")):
        spec = crd_schema("ClusterQueue", version)["properties"]["spec"]["properties"]
        assert {cohort, "namespaceSelector", "resourceGroups", "queueingStrategy", "stopPolicy",
                "flavorFungibility", "preemption", "fairSharing"} <= set(spec)
        assert {"parentName", "resourceGroups", "fairSharing"} <= set(
            crd_schema("Cohort", version)["properties"]["spec"]["properties"])
        assert {"nodeLabels", "nodeTaints", "tolerations"} <= set(
            crd_schema("ResourceFlavor", version)["properties"]["spec"]["properties"])


def test_the_conversion_webhook_is_quotients_conversion_port():
    """Each Kueue kind's conversion webhook is Service quotient-webhook's `conversion` port (every replica),
    which reaches the Deployment's containerPort `conversion`, where `serve --conversion-port` listens; the path
    is the route's."""
    from app.api.convert import PATH

    kinds = by_kind(BASE / "quotient.yaml")
    (service,) = [s for s in kinds["Service"] if s["metadata"]["name"] == "quotient-webhook"]
    assert service["spec"]["selector"] == quotient_deployment()["spec"]["selector"]["matchLabels"]
    (c,) = quotient_deployment()["spec"]["template"]["spec"]["containers"]
    container_ports = {p["name"]: p["containerPort"] for p in c["ports"]}
    listening = int(c["args"][c["args"].index("--conversion-port") + 1])
    assert container_ports["conversion"] == listening
    (port,) = [p for p in service["spec"]["ports"] if p["name"] == "conversion"]
    assert container_ports[port["targetPort"]] == listening
    for kind in KUEUE_KINDS:
        conversion = crds()[kind]["spec"]["conversion"]
        assert conversion["strategy"] == "Webhook"
        webhook = conversion["webhook"]
        assert webhook["conversionReviewVersions"] == ["v1"]
        assert "caBundle" not in webhook["clientConfig"]       # cert-manager or certs.sh sets it; applying keeps it
        assert webhook["clientConfig"]["service"] == {"namespace": service["metadata"]["namespace"],
                                                      "name": service["metadata"]["name"], "path": PATH,
                                                      "port": port["port"]}
    assert "--tls-cert" in c["args"]       # kube-apiserver calls webhooks over HTTPS only


@pytest.mark.skipif(shutil.which("openssl") is None, reason="needs the openssl command")
def test_certs_script_sets_the_ca_bundle_of_quotients_conversion_webhooks_only(tmp_path):
    """deploy/certs.sh, with a kubectl that records its calls: the Secrets, then a merge patch setting the CA as
    caBundle on each CRD of deploy/crds/crds.yaml with a conversion webhook, found by Quotient's label."""
    import base64

    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    calls = tmp_path / "calls"
    webhook_crds = " ".join(crds()[k]["metadata"]["name"] for k in KUEUE_KINDS)
    (bin_dir / "kubectl").write_text(f"""#!/bin/sh
printf '%s\\n' "$*" >> {calls}
case "$*" in
  "get crd -l app.kubernetes.io/name=quotient "*) printf '%s\\n' {webhook_crds} ;;
  *" -o yaml") echo "kind: Secret" ;;
  "apply -f -") cat > /dev/null ;;
esac
""")
    (bin_dir / "kubectl").chmod(0o755)
    env = {**os.environ, "PATH": f"{bin_dir}:{os.environ['PATH']}"}
    done = subprocess.run(["bash", str(ROOT / "deploy" / "certs.sh"), "--dir", str(tmp_path / "certs"), "--days", "2"],
                          capture_output=True, text=True, timeout=120, env=env)
    assert done.returncode == 0, done.stderr
    lines = calls.read_text().splitlines()
    listing = next(c for c in lines if c.startswith("get crd"))
    assert "?(@.spec.conversion.strategy==\"Webhook\")" in listing      # never WorkloadPriorityClass's (None)
    patches = [c.split() for c in lines if c.startswith("patch crd")]
    assert [p[2] for p in patches] == webhook_crds.split()
    ca = (tmp_path / "certs" / "ca.crt").read_bytes()
    for p in patches:
        assert p[3:6] == ["--type", "merge", "-p"]
        patch = json.loads(p[6])
        assert base64.b64decode(patch["spec"]["conversion"]["webhook"]["clientConfig"]["caBundle"]) == ca
    # --no-apply, or no CRDs of ours: the command to run instead, with the same bundle
    done = subprocess.run(["bash", str(ROOT / "deploy" / "certs.sh"), "--dir", str(tmp_path / "c2"), "--no-apply",
                           "--days", "2"], capture_output=True, text=True, timeout=120)
    bundle = base64.b64encode((tmp_path / "c2" / "ca.crt").read_bytes()).decode()
    assert done.returncode == 0 and "kubectl patch crd" in done.stdout and bundle in done.stdout


# --- KubeSchedulerConfiguration -----------------------------------------------------------

_S = {"type": "string"}
_B = {"type": "boolean"}
_DURATION = {"type": "string", "format": "duration"}
# NodeResourcesFitArgs (k8s.io/kube-scheduler/config/v1), the plugin whose arguments these files set;
# other plugins' arguments are not checked here.
_RESOURCE_SPEC = {"type": "object", "required": ["name"], "properties": {
    "name": _S, "weight": {"type": "integer", "format": "int64", "minimum": 1, "maximum": 100}}}
NODE_RESOURCES_FIT_ARGS = {"type": "object", "properties": {
    "ignoredResources": {"type": "array", "items": _S},
    "ignoredResourceGroups": {"type": "array", "items": _S},
    "scoringStrategy": {"type": "object", "required": ["type"], "properties": {
        "type": {"type": "string", "enum": ["LeastAllocated", "MostAllocated", "RequestedToCapacityRatio"]},
        "resources": {"type": "array", "items": _RESOURCE_SPEC},
        "requestedToCapacityRatio": {"type": "object", "x-kubernetes-preserve-unknown-fields": True}}}}}
PLUGIN_CONFIG = {"type": "object", "required": ["name"], "properties": {"name": _S, "args": {
    "type": "object", "x-kubernetes-preserve-unknown-fields": True}}}
KUBE_SCHEDULER_CONFIGURATION = {
    # kubescheduler.config.k8s.io/v1 (k8s.io/kube-scheduler/config/v1 types), the fields
    # these files may use; kube-scheduler decodes the file strictly, so unknown = error.
    "type": "object",
    "required": ["apiVersion", "kind"],
    "properties": {
        "apiVersion": {"type": "string", "enum": ["kubescheduler.config.k8s.io/v1"]},
        "kind": {"type": "string", "enum": ["KubeSchedulerConfiguration"]},
        "parallelism": {"type": "integer", "format": "int32", "minimum": 1},
        "leaderElection": {"type": "object", "properties": {
            "leaderElect": _B, "leaseDuration": _DURATION, "renewDeadline": _DURATION, "retryPeriod": _DURATION,
            "resourceLock": {"type": "string", "enum": ["leases"]}, "resourceName": _S, "resourceNamespace": _S}},
        "clientConnection": {"type": "object", "properties": {
            "kubeconfig": _S, "acceptContentTypes": _S, "contentType": _S,
            "qps": {"type": "number"}, "burst": {"type": "integer", "format": "int32"}}},
        "percentageOfNodesToScore": {"type": "integer", "format": "int32", "minimum": 0, "maximum": 100},
        "podInitialBackoffSeconds": {"type": "integer", "format": "int64", "minimum": 1},
        "podMaxBackoffSeconds": {"type": "integer", "format": "int64", "minimum": 1},
        "enableProfiling": _B, "enableContentionProfiling": _B, "delayCacheUntilActive": _B,
        "profiles": {"type": "array", "minItems": 1, "items": {"type": "object", "required": ["schedulerName"],
                     "properties": {"schedulerName": _S,
                                    "percentageOfNodesToScore": {"type": "integer", "minimum": 0, "maximum": 100},
                                    "plugins": {"type": "object", "x-kubernetes-preserve-unknown-fields": True},
                                    "pluginConfig": {"type": "array", "items": PLUGIN_CONFIG}}}},
        "extenders": {"type": "array", "items": {"type": "object", "required": ["urlPrefix"], "properties": {
            # The fields of Extender, as in ../shared/wire/README.md and kube-scheduler's types.
            "urlPrefix": {"type": "string", "pattern": r"^https?://"},
            "filterVerb": _S, "preemptVerb": _S, "prioritizeVerb": _S, "bindVerb": _S,
            "weight": {"type": "integer", "format": "int64", "minimum": 0},
            "enableHTTPS": _B,
            "tlsConfig": {"type": "object", "properties": {
                "insecure": _B, "serverName": _S, "certFile": _S, "keyFile": _S, "caFile": _S,
                # []byte: base64 in YAML/JSON.
                "certData": {"type": "string", "pattern": r"^[A-Za-z0-9+/=\s]*$"},
                "keyData": {"type": "string", "pattern": r"^[A-Za-z0-9+/=\s]*$"},
                "caData": {"type": "string", "pattern": r"^[A-Za-z0-9+/=\s]*$"}}},
            "httpTimeout": _DURATION,
            "nodeCacheCapable": _B,
            "managedResources": {"type": "array", "items": {"type": "object", "required": ["name"], "properties": {
                "name": _S, "ignoredByScheduler": _B}}},
            "ignorable": _B}}},
    },
}


def scheduler_config_files() -> list[Path]:
    return [p for p in MANIFESTS for d in documents(p) if d["kind"] == "KubeSchedulerConfiguration"]


def extender_rules(cfg: dict) -> list[str]:
    """kube-scheduler's ValidateKubeSchedulerConfiguration rules for extenders and profiles, and the
    arguments of NodeResourcesFit where a profile sets them."""
    out = []
    names = [p["schedulerName"] for p in cfg.get("profiles", [])]
    if len(set(names)) != len(names):
        out.append("duplicate schedulerName")
    exts = cfg.get("extenders", [])
    if sum(1 for e in exts if e.get("bindVerb")) > 1:
        out.append("only one extender can implement bind")
    for e in exts:
        weight = e.get("weight", 0)
        if e.get("prioritizeVerb") and isinstance(weight, int) and weight <= 0:
            out.append(f"{e['urlPrefix']}: weight must be > 0 with a prioritizeVerb")
        if bool(e.get("enableHTTPS")) != e["urlPrefix"].startswith("https://"):
            out.append(f"{e['urlPrefix']}: enableHTTPS and the URL scheme disagree")
        for r in e.get("managedResources", []):
            if not re.fullmatch(r"[a-z0-9]([-a-z0-9.]*[a-z0-9])?(/[a-zA-Z0-9]([-a-zA-Z0-9_.]*[a-zA-Z0-9])?)?",
                                r["name"]):
                out.append(f"managedResources {r['name']!r} is not a resource name")
    for profile in cfg.get("profiles", []):
        for plugin in profile.get("pluginConfig", []):
            if plugin["name"] == "NodeResourcesFit":
                out += validate(plugin.get("args") or {}, NODE_RESOURCES_FIT_ARGS, "NodeResourcesFit.args")
    return out


@pytest.mark.parametrize("path", scheduler_config_files(), ids=ids)
def test_scheduler_configurations_validate(path):
    for cfg in documents(path):
        if cfg["kind"] != "KubeSchedulerConfiguration":
            continue
        assert validate(cfg, KUBE_SCHEDULER_CONFIGURATION) == []
        assert extender_rules(cfg) == []


def test_the_scheduler_configuration_schema_accepts_the_recorded_config_and_refuses_mistakes():
    recorded = ROOT.parent / "shared" / "wire" / "kube-scheduler-config.yaml"
    if recorded.exists():   # the config a real kube-scheduler v1.36.2 ran with
        (cfg,) = documents(recorded)
        assert validate(cfg, KUBE_SCHEDULER_CONFIGURATION) == []
        assert extender_rules(cfg) == []
    (good,) = documents(ROOT / "scheduler-config" / "http.yaml")
    for change, why in [
        (lambda c: c["extenders"][0].update(nodeCachable=True), "unknown field"),
        (lambda c: c["extenders"][0].update(httpTimeout="5 seconds"), "not a duration"),
        (lambda c: c["extenders"][0].update(weight="2"), "type integer"),
        (lambda c: c.update(percentageOfNodesToScore=101), "out of range"),
        (lambda c: c["extenders"][0].update(urlPrefix="quotient:8888"), "does not match"),
        (lambda c: c.update(extenders=[c["extenders"][0], dict(c["extenders"][0])]), "only one extender"),
        (lambda c: c["extenders"][0].update(prioritizeVerb="prioritize", weight=0), "weight must be > 0"),
        (lambda c: plugin_args(c["profiles"][0], "NodeResourcesFit")["scoringStrategy"].update(type="Most"),
         "not one of"),
        (lambda c: plugin_args(c["profiles"][0], "NodeResourcesFit")["scoringStrategy"]["resources"][0].update(
            weight=0), "out of range"),
        (lambda c: c["extenders"][0].update(enableHTTPS=True), "disagree"),
    ]:
        bad = json.loads(json.dumps(good))
        change(bad)
        problems = validate(bad, KUBE_SCHEDULER_CONFIGURATION) + extender_rules(bad)
        assert any(why in p for p in problems), (why, problems)


def scheduler_config(name: str = "http.yaml") -> dict:
    (cfg,) = documents(ROOT / "scheduler-config" / name)
    assert cfg["apiVersion"] == "kubescheduler.config.k8s.io/v1"
    assert cfg["kind"] == "KubeSchedulerConfiguration"
    return cfg


def plugin_args(profile: dict, plugin: str) -> dict:
    return next(c.get("args") or {} for c in profile.get("pluginConfig", []) if c["name"] == plugin)


@pytest.mark.parametrize("name", ["http.yaml", "https.yaml", "main-scheduler.yaml"])
def test_scheduler_config_recommended_settings(name):
    """filter, preempt and bind; packing by kube-scheduler's MostAllocated scoring, not the prioritize verb
    (issue 19), with the weights the simulator scores by (app/sim/scoring.py)."""
    from app.sim.scoring import SHIPPED_PLUGIN_WEIGHT, SHIPPED_WEIGHTS

    cfg = scheduler_config(name)
    (ext,) = cfg["extenders"]
    assert (ext["filterVerb"], ext["preemptVerb"], ext["bindVerb"]) == ("filter", "preempt", "bind")
    assert "prioritizeVerb" not in ext and "weight" not in ext
    (profile,) = cfg["profiles"]
    strategy = plugin_args(profile, "NodeResourcesFit")["scoringStrategy"]
    assert validate(plugin_args(profile, "NodeResourcesFit"), NODE_RESOURCES_FIT_ARGS) == []
    assert strategy["type"] == "MostAllocated"
    assert {r["name"]: r.get("weight", 1) for r in strategy["resources"]} == SHIPPED_WEIGHTS
    assert profile["plugins"]["score"]["enabled"] == [{"name": "NodeResourcesFit", "weight": SHIPPED_PLUGIN_WEIGHT}]
    assert ext["nodeCacheCapable"] is True
    assert ext["ignorable"] is False
    assert ext["httpTimeout"] == "10s"           # above the 5 s default, see the comment in http.yaml
    assert ext["managedResources"] == []
    assert cfg["percentageOfNodesToScore"] == 100
    assert ext["urlPrefix"].endswith(":8888/scheduler")


def test_the_recommendations_are_explained_in_comments():
    text = (ROOT / "scheduler-config" / "http.yaml").read_text()
    lines = text.splitlines()
    for setting in ("percentageOfNodesToScore", "nodeCacheCapable", "ignorable", "httpTimeout", "pluginConfig"):
        line = next(i for i, l in enumerate(lines) if l.strip().startswith(setting + ":"))
        above = [lines[line - 1], lines[line - 2]]
        assert any(a.lstrip().startswith("#") for a in above), f"{setting} has no comment above it"
    assert "10%" in text and "5s" in text
    assert "prioritizeVerb: prioritize" in text and "weight: 2" in text     # how to opt in, in a comment


def test_https_config_uses_a_client_certificate_mounted_into_the_scheduler():
    (ext,) = scheduler_config("https.yaml")["extenders"]
    assert ext["enableHTTPS"] is True and ext["urlPrefix"].startswith("https://")
    tls = ext["tlsConfig"]
    assert tls["insecure"] is False
    assert tls["serverName"] == "quotient.quotient-system.svc"
    assert {"caFile", "certFile", "keyFile"} <= set(tls)
    pod = scheduler_deployment()["spec"]["template"]["spec"]
    (c,) = pod["containers"]
    mount = next(m for m in c["volumeMounts"] if m["name"] == "tls")
    for f in ("caFile", "certFile", "keyFile"):
        assert tls[f].startswith(mount["mountPath"] + "/"), tls[f]
    volume = next(v for v in pod["volumes"] if v["name"] == "tls")
    assert volume["secret"]["secretName"] == "quotient-scheduler-tls"
    assert not volume["secret"].get("optional")        # the secure layout is the default: no Secret, no start


def test_second_scheduler_profile_and_url_point_at_the_deployed_service():
    cfg = scheduler_config()
    assert [p["schedulerName"] for p in cfg["profiles"]] == ["quotient-scheduler"]
    (ext,) = cfg["extenders"]
    assert ext["urlPrefix"] == "http://quotient.quotient-system.svc:8888/scheduler"
    service = by_kind(BASE / "quotient.yaml")["Service"][0]
    assert service["metadata"]["name"] == "quotient"
    assert service["metadata"]["namespace"] == NAMESPACE
    assert {p["name"]: p["port"] for p in service["spec"]["ports"]} == {"https": 8888}
    assert [p["schedulerName"] for p in scheduler_config("main-scheduler.yaml")["profiles"]] == ["default-scheduler"]


def test_configmap_configuration_decodes_and_its_path_prefix_matches_the_extender_url():
    from app.config import decode_configuration

    cm = by_kind(BASE / "quotient.yaml")["ConfigMap"][0]
    config = yaml.safe_load(cm["data"]["config.yaml"])
    # One certificate per caller, each CN one role (the issue 33 interfaces, item 1).
    # Kueue's plain-pod integration: the pod gate (deploy/base/pod-gate.yaml) gates pods with a queue label.
    assert config == {"apiVersion": "quotient.dev/v1alpha1", "kind": "Configuration", "pathPrefix": "/scheduler",
                      "clientIdentities": [{"role": r, "commonName": f"quotient-{r}"}
                                           for r in ("scheduler", "metrics", "admin", "viewer")],
                      "integrations": {"frameworks": ["pod"]}}
    decoded = decode_configuration(config)
    assert decoded.path_prefix == "/scheduler" and decoded.gate_pods and decoded.unused == ()
    assert sorted((i.role, i.common_name) for i in decoded.client_identities) == sorted(
        (r, f"quotient-{r}") for r in ("scheduler", "metrics", "admin", "viewer"))
    for name in ("http.yaml", "https.yaml", "main-scheduler.yaml"):
        (ext,) = scheduler_config(name)["extenders"]
        assert ext["urlPrefix"].endswith(config["pathPrefix"])


# --- The deployment as a whole ------------------------------------------------------------

def test_namespaced_objects_live_in_quotient_system():
    """Every namespaced object of deploy/ is in quotient-system, which the variant's `namespace:` replaces:
    none may live elsewhere (kustomize would move it too)."""
    (ns,) = documents(BASE / "namespace.yaml")
    assert ns["metadata"]["name"] == NAMESPACE
    cluster_scoped = {"Namespace", "ClusterRole", "ClusterRoleBinding", "CustomResourceDefinition",
                      "MutatingWebhookConfiguration"}
    for path, doc in all_docs():
        if "deploy" not in path.parts or doc["kind"] in cluster_scoped:
            assert "namespace" not in doc.get("metadata", {}) or doc["kind"] not in cluster_scoped
            continue
        assert doc["metadata"].get("namespace") == NAMESPACE, (path.name, doc["kind"], doc["metadata"]["name"])


def quotient_deployment() -> dict:
    return by_kind(BASE / "quotient.yaml")["Deployment"][0]


def test_deployment_runs_the_image_with_the_mounted_config_and_probes():
    kinds = by_kind(BASE / "quotient.yaml")
    pod = kinds["Deployment"][0]["spec"]["template"]["spec"]
    (c,) = pod["containers"]
    assert c["image"] == "quotient:0.1.0"         # the variants' `images:` replaces it
    assert c["args"] == ["serve", "--host", "0.0.0.0", "--port", "8888", "--tls-cert", "/etc/quotient/tls/tls.crt",
                         "--tls-key", "/etc/quotient/tls/tls.key", "--tls-client-ca", "/etc/quotient/tls/ca.crt",
                         "--conversion-port", "9443", "--config", "/etc/quotient/config/config.yaml"]
    # /livez and /readyz need no client certificate: kubelet's plain httpGet probes
    assert c["readinessProbe"]["httpGet"] == {"scheme": "HTTPS", "port": "https", "path": "/readyz"}
    assert c["livenessProbe"]["httpGet"] == {"scheme": "HTTPS", "port": "https", "path": "/livez"}
    tls = next(v for v in pod["volumes"] if v["name"] == "tls")
    assert tls["secret"]["secretName"] == "quotient-tls" and not tls["secret"].get("optional")
    assert pod["securityContext"]["runAsNonRoot"] is True
    assert c["securityContext"]["readOnlyRootFilesystem"] is True
    assert pod["serviceAccountName"] == "quotient"
    mount = next(m for m in c["volumeMounts"] if c["args"][-1].startswith(m["mountPath"] + "/"))
    volume = next(v for v in pod["volumes"] if v["name"] == mount["name"])
    assert volume["configMap"]["name"] == kinds["ConfigMap"][0]["metadata"]["name"]
    assert c["args"][-1].rsplit("/", 1)[1] in kinds["ConfigMap"][0]["data"]


def test_deployment_is_shaped_for_leader_election():
    d = quotient_deployment()
    assert d["spec"]["replicas"] == 2
    # Every synced replica is Ready: a rollout replaces one pod at a time and keeps a synced standby.
    assert d["spec"]["strategy"]["rollingUpdate"] == {"maxSurge": 1, "maxUnavailable": 0}
    (c,) = d["spec"]["template"]["spec"]["containers"]
    env = {e["name"]: e for e in c["env"]}
    assert env["POD_NAME"]["valueFrom"]["fieldRef"]["fieldPath"] == "metadata.name"
    assert env["POD_NAMESPACE"]["valueFrom"]["fieldRef"]["fieldPath"] == "metadata.namespace"
    anti = d["spec"]["template"]["spec"]["affinity"]["podAntiAffinity"]
    assert anti["preferredDuringSchedulingIgnoredDuringExecution"][0]["podAffinityTerm"]["topologyKey"] == \
        "kubernetes.io/hostname"
    (pdb,) = by_kind(BASE / "quotient.yaml")["PodDisruptionBudget"]
    assert pdb["spec"] == {"minAvailable": 1, "selector": d["spec"]["selector"]}


def test_pods_mount_only_volumes_they_define_and_services_select_their_pods():
    for path, doc in all_docs():
        if doc["kind"] != "Deployment":
            continue
        tpl = doc["spec"]["template"]
        assert doc["spec"]["selector"]["matchLabels"].items() <= tpl["metadata"]["labels"].items()
        volumes = {v["name"] for v in tpl["spec"]["volumes"]}
        for c in tpl["spec"]["containers"]:
            assert {m["name"] for m in c["volumeMounts"]} <= volumes
            mounts = [m["mountPath"] for m in c["volumeMounts"]]
            for a in mounts:    # no mount inside another (a read-only volume cannot take a mount point)
                assert not any(b != a and b.startswith(a + "/") for b in mounts), (a, mounts)
        sa = tpl["spec"]["serviceAccountName"]
        assert any(d["kind"] == "ServiceAccount" and d["metadata"]["name"] == sa for _, d in all_docs())
    pod = quotient_deployment()["spec"]["template"]
    ports = {p["name"]: p["containerPort"] for p in pod["spec"]["containers"][0]["ports"]}
    for service in by_kind(BASE / "quotient.yaml")["Service"]:
        # `quotient` also selects the label the leader puts on its own pod
        assert service["spec"]["selector"].items() <= {**pod["metadata"]["labels"], "quotient.dev/leader": "true"}.items()
        assert all(p["targetPort"] in ports for p in service["spec"]["ports"])
    assert ports["https"] == 8888


def rbac_grants(*files: str, kinds=("ClusterRole", "Role")) -> dict[str, set[tuple]]:
    out: dict[str, set[tuple]] = {}
    for f in files:
        for doc in documents(BASE / f):
            if doc["kind"] in kinds:
                key = f"{doc['kind']}/{doc['metadata'].get('namespace', '')}/{doc['metadata']['name']}"
                out[key] = {(g, r, v) for rule in doc["rules"] for g in rule["apiGroups"]
                            for r in rule["resources"] for v in rule["verbs"]}
    return out


def test_rbac_grants_the_writes_quotient_makes_and_no_other():
    grants = rbac_grants("rbac.yaml")
    cluster = grants["ClusterRole//quotient"]
    for need in [("", "pods/binding", "create"), ("", "pods/eviction", "create"),
                 ("", "pods/status", "patch"), ("events.k8s.io", "events", "create"),
                 ("kueue.x-k8s.io", "clusterqueues/status", "update"),
                 ("kueue.x-k8s.io", "clusterqueues/status", "patch"),
                 ("kueue.x-k8s.io", "localqueues/status", "update"),
                 ("kueue.x-k8s.io", "localqueues/status", "patch"),
                 ("scheduling.x-k8s.io", "podgroups", "watch"),
                 ("", "pods", "watch"), ("", "nodes", "list"), ("kueue.x-k8s.io", "cohorts", "list"),
                 ("kueue.x-k8s.io", "workloadpriorityclasses", "watch"),
                 ("policy", "poddisruptionbudgets", "watch"), ("scheduling.k8s.io", "priorityclasses", "watch")]:
        assert need in cluster, need
    writes = {g for g in cluster if g[2] not in ("get", "list", "watch")}
    # ("", "pods", "patch"): the pod gate's kueue.x-k8s.io/admission removed from a pod Quotient admits.
    assert writes == {("", "pods/binding", "create"), ("", "pods/eviction", "create"), ("", "pods/status", "patch"),
                      ("", "pods", "patch"),
                      ("events.k8s.io", "events", "create"), ("kueue.x-k8s.io", "clusterqueues/status", "update"),
                      ("kueue.x-k8s.io", "clusterqueues/status", "patch"),
                      ("kueue.x-k8s.io", "localqueues/status", "update"), ("kueue.x-k8s.io", "localqueues/status", "patch")}
    # Leader election: leases in its own namespace only, and the leader label on its own pods.
    leases = grants[f"Role/{NAMESPACE}/quotient-leader-election"]
    assert leases == {("coordination.k8s.io", "leases", v) for v in ("get", "create", "update")} | \
        {("", "pods", "get"), ("", "pods", "patch")}
    assert not any(r == "leases" for _, r, _ in cluster)


def test_no_rbac_wildcards_and_every_binding_names_a_role_and_an_account_that_exist():
    roles = {(d["kind"], d["metadata"].get("namespace"), d["metadata"]["name"]) for _, d in all_docs()
             if d["kind"] in ("Role", "ClusterRole")}
    accounts = {(d["metadata"]["namespace"], d["metadata"]["name"]) for _, d in all_docs()
                if d["kind"] == "ServiceAccount"}
    builtin = {("ClusterRole", "system:kube-scheduler"), ("ClusterRole", "system:volume-scheduler")}
    for _, d in all_docs():
        if d["kind"] in ("Role", "ClusterRole"):
            for rule in d["rules"]:
                assert "*" not in rule["apiGroups"] + rule["resources"] + rule["verbs"], rule
        if d["kind"] in ("RoleBinding", "ClusterRoleBinding"):
            ref = d["roleRef"]
            ns = d["metadata"].get("namespace") if ref["kind"] == "Role" else None
            assert (ref["kind"], ns, ref["name"]) in roles or (ref["kind"], ref["name"]) in builtin, ref
            for s in d["subjects"]:
                assert (s["namespace"], s["name"]) in accounts, s


def scheduler_deployment() -> dict:
    return by_kind(SCHEDULER)["Deployment"][0]


def test_second_scheduler_runs_a_pinned_stock_image_with_the_https_config():
    kinds = by_kind(SCHEDULER)
    (cm,) = kinds["ConfigMap"]
    shipped = yaml.safe_load(cm["data"]["config.yaml"])
    https = scheduler_config("https.yaml")
    # https.yaml's Lease namespace comes from --leader-elect-resource-namespace in the cluster
    assert https["leaderElection"].pop("resourceNamespace") == NAMESPACE
    assert shipped == https
    pod = scheduler_deployment()["spec"]["template"]["spec"]
    (c,) = pod["containers"]
    assert re.fullmatch(r"registry\.k8s\.io/kube-scheduler:v\d+\.\d+\.\d+", c["image"]), c["image"]
    config_flag = next(a for a in c["command"] if a.startswith("--config="))
    path = config_flag.split("=", 1)[1]
    mount = next(m for m in c["volumeMounts"] if path.startswith(m["mountPath"] + "/"))
    volume = next(v for v in pod["volumes"] if v["name"] == mount["name"])
    assert volume["configMap"]["name"] == cm["metadata"]["name"]
    assert path.rsplit("/", 1)[1] in cm["data"]
    assert pod["securityContext"]["runAsNonRoot"] is True
    assert c["livenessProbe"]["httpGet"]["scheme"] == "HTTPS"


def test_second_scheduler_rbac_matches_its_leader_election():
    cfg = scheduler_config("https.yaml")
    le = cfg["leaderElection"]
    assert le["leaderElect"] is True and le["resourceName"] != "kube-scheduler"
    role = next(d for d in documents(SCHEDULER) if d["kind"] == "Role")
    assert role["metadata"]["namespace"] == le["resourceNamespace"]
    named = [r for r in role["rules"] if r.get("resourceNames")]
    assert named and all(r["resourceNames"] == [le["resourceName"]] for r in named)
    bound = {d["roleRef"]["name"] for d in documents(SCHEDULER)
             if d["kind"] in ("RoleBinding", "ClusterRoleBinding")}
    assert {"system:kube-scheduler", "system:volume-scheduler", role["metadata"]["name"]} <= bound


# --- Dockerfile and its pinned dependencies -----------------------------------------------

def test_dockerfile_is_slim_non_root_pinned_and_health_checked():
    text = (ROOT / "Dockerfile").read_text()
    froms = re.findall(r"^FROM\s+(\S+)", text, re.M)
    assert froms and all(re.fullmatch(r"python:3\.\d+(\.\d+)?-slim(-\w+)?(@sha256:[0-9a-f]{64})?", f)
                         for f in froms), froms
    users = re.findall(r"^USER\s+(\S+)", text, re.M)
    assert users and not users[-1].startswith(("0", "root"))
    assert re.search(r"^HEALTHCHECK .*", text, re.M) and "/livez" in text
    assert "constraints.txt" in text and re.search(r"pip install[^\n]*(-c|--constraint)", text)


def test_constraints_pin_every_runtime_dependency_within_pyproject():
    import tomllib

    from packaging.requirements import Requirement

    pins = {}
    for line in (ROOT / "deploy" / "constraints.txt").read_text().splitlines():
        line = line.split("#", 1)[0].strip()
        if line:
            name, _, version = line.partition("==")
            assert version, f"not pinned: {line}"
            pins[name.lower().replace("_", "-")] = version
    deps = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["dependencies"]
    for dep in map(Requirement, deps):
        key = dep.name.lower().replace("_", "-")
        assert key in pins, f"{dep.name} is not pinned in deploy/constraints.txt"
        assert dep.specifier.contains(pins[key]), f"{dep.name}=={pins[key]} is outside {dep.specifier}"
    assert not {"pytest", "pytest-asyncio", "quotient"} & set(pins)


# --- The docs name files that exist -------------------------------------------------------

def _deploy_section() -> str:
    text = (ROOT / "README.md").read_text()
    start = text.index("## Deploying to a cluster")
    assert start < text.index("## Decisions and reasons")
    return text[start:text.index("\n## ", start + 1)]


@pytest.mark.parametrize("doc", ["README.md", "deploy/README.md", "scheduler-config/README.md"])
def test_the_deploy_docs_name_only_files_that_exist(doc):
    text = _deploy_section() if doc == "README.md" else (ROOT / doc).read_text()
    base = ROOT if doc == "README.md" else (ROOT / doc).parent
    named = {m.rstrip(".") for m in re.findall(
        r"(?<![\w/.<-])((?:\.\./)*(?:deploy|scheduler-config|components)(?:/[\w.-]+)+)", text)}
    named -= {"deploy/quotient", "deploy/quotient-scheduler"}     # kubectl's deploy/NAME (rollout status ...)
    named |= {m for m in re.findall(r"`([\w-]+\.(?:yaml|txt|py|sh))`", text)}
    assert named
    for name in named:
        candidates = [base / name, ROOT / name, ROOT / "deploy" / name, ROOT / "scheduler-config" / name,
                      *(ROOT / "deploy").rglob(name)]
        assert any(c.exists() for c in candidates), f"{doc} names {name}, which does not exist"


def test_the_readme_deploy_section_is_one_command_per_variant_and_the_admins_choices():
    text = _deploy_section()
    for needle in ("kubectl apply --server-side --field-manager=quotient -k deploy/second-scheduler",
                   "kubectl apply --server-side --field-manager=quotient -k deploy/main-scheduler",
                   "components/cert-manager", "deploy/certs.sh --namespace", "components/prometheus",
                   "components/view-port", "components/kueue", "namespace:", "images:",
                   "schedulerName: quotient-scheduler", "kueue.x-k8s.io/queue-name", "/readyz", "port-forward"):
        assert needle in text, needle


# --- The secure layout ---------------------------------------------------------------------

def test_the_base_network_policy_opens_the_conversion_port_alone():
    """The conversion port from anywhere (kube-apiserver's addresses cannot be selected, and /convert changes no
    state); who reaches the main port is each variant's rule (tests/test_deploy_variants.py checks them)."""
    (policy,) = documents(BASE / "networkpolicy.yaml")
    pod = quotient_deployment()["spec"]["template"]
    assert policy["spec"]["podSelector"]["matchLabels"].items() <= pod["metadata"]["labels"].items()
    assert policy["spec"]["policyTypes"] == ["Ingress"]
    (conversion,) = policy["spec"]["ingress"]
    ports = {p["name"]: p["containerPort"] for p in pod["spec"]["containers"][0]["ports"]}
    assert "from" not in conversion and [p["port"] for p in conversion["ports"]] == [ports["conversion"]]


@pytest.mark.skipif(shutil.which("openssl") is None, reason="needs the openssl command")
def test_certs_script_makes_what_the_manifests_mount_and_quotient_verifies(tmp_path):
    """deploy/certs.sh --no-apply: a CA, a serving certificate for the Service names and 127.0.0.1, and one client
    certificate per caller; `quotient serve` with them answers each client certificate, and a caller without one
    only on the health routes."""
    import ssl

    import httpx

    from test_tls import serve_tls

    done = subprocess.run(["bash", str(ROOT / "deploy" / "certs.sh"), "--dir", str(tmp_path), "--no-apply",
                           "--days", "2"], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    for name in ("ca", "server", "scheduler", "metrics", "admin", "viewer"):
        assert (tmp_path / f"{name}.crt").exists() and (tmp_path / f"{name}.key").exists()
    san = subprocess.run(["openssl", "x509", "-in", str(tmp_path / "server.crt"), "-noout", "-ext",
                          "subjectAltName"], capture_output=True, text=True, check=True).stdout
    (ext,) = scheduler_config("https.yaml")["extenders"]
    assert f"DNS:{ext['tlsConfig']['serverName']}" in san and "IP Address:127.0.0.1" in san
    shutil.copy(tmp_path / "scheduler.crt", tmp_path / "client.crt")      # what serve_tls presents
    shutil.copy(tmp_path / "scheduler.key", tmp_path / "client.key")
    shutil.copy(ROOT / "app" / "data" / "demo-snapshot.yaml", tmp_path / "snapshot.yaml")
    with serve_tls(tmp_path, "--tls-cert", str(tmp_path / "server.crt"), "--tls-key", str(tmp_path / "server.key"),
                   "--tls-client-ca", str(tmp_path / "ca.crt"), "--host", "0.0.0.0") as port:
        url = f"https://127.0.0.1:{port}/livez"
        for who in ("scheduler", "metrics", "admin", "viewer"):
            ctx = ssl.create_default_context(cafile=str(tmp_path / "ca.crt"))
            ctx.load_cert_chain(str(tmp_path / f"{who}.crt"), str(tmp_path / f"{who}.key"))
            assert httpx.get(url, verify=ctx, timeout=5).status_code == 200, who
        anonymous = ssl.create_default_context(cafile=str(tmp_path / "ca.crt"))     # health answers anyone, no more
        assert httpx.get(url, verify=anonymous, timeout=5).status_code == 200
        assert httpx.get(url.replace("/livez", "/debug/queues"), verify=anonymous, timeout=5).status_code == 403
        # the admin's CLI, as the README's step 6 runs it
        env = {**os.environ, "QUOTIENT_SERVER": f"https://127.0.0.1:{port}", "QUOTIENT_CA": str(tmp_path / "ca.crt"),
               "QUOTIENT_CERT": str(tmp_path / "admin.crt"), "QUOTIENT_KEY": str(tmp_path / "admin.key")}
        cli = subprocess.run([str(ROOT / ".venv" / "bin" / "quotient"), "queues"], env=env, capture_output=True,
                             text=True, timeout=60)
        assert cli.returncode == 0 and "team-a-cq" in cli.stdout, cli.stderr
        env.pop("QUOTIENT_CERT")
        cli = subprocess.run([str(ROOT / ".venv" / "bin" / "quotient"), "queues"], env=env, capture_output=True,
                             text=True, timeout=60)
        assert cli.returncode == 1 and "presented none" in cli.stderr
