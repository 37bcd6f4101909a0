"""Kueue's conversion between kueue.x-k8s.io/v1beta1 and v1beta2, on plain objects.

deploy/crds/crds.yaml stores v1beta2 and serves both versions, so the API server asks a conversion webhook
(app/api/convert.py) to turn every object into the version a client reads or the one it stores. This is
what Kueue's webhook does (apis/kueue/v1beta1/*_conversion.go and zz_generated.conversion.go):

- ClusterQueue: spec.cohort (v1beta1) <-> spec.cohortName (v1beta2). To v1beta2: flavorFungibility's
  Borrow and Preempt become MayStopSearch; a non-empty spec.admissionChecks ["a"] becomes
  spec.admissionChecksStrategy.admissionChecks [{name: a}] (an empty one is dropped); status
  pendingWorkloadsStatus and fairSharing.admissionFairSharingStatus are dropped.
- Cohort: status.fairSharing.admissionFairSharingStatus is dropped to v1beta2.
- LocalQueue: status.flavorUsage (v1beta1) <-> status.flavorsUsage (v1beta2); status.flavors is dropped
  to v1beta2.
- ResourceFlavor, WorkloadPriorityClass and any other kind: only apiVersion changes.

Every other field is kept as written (the CRDs preserve fields they do not type). A container that is not
an object (spec: 3, status: null) has nothing to rename and passes through; a field the conversion must
rewrite but cannot read raises ConversionError naming it.
"""
from __future__ import annotations

import orjson

from .kueue import GROUP, V1BETA2, VERSIONS

_OLD_FUNGIBILITY = {"whenCanBorrow": "Borrow", "whenCanPreempt": "Preempt"}   # v1beta1's names of MayStopSearch


class ConversionError(ValueError):
    """The object cannot be converted; the message says which field and why."""


def convert(obj: dict, version: str) -> dict:
    """obj as Kueue serves it in kueue.x-k8s.io/`version`: a new object (obj is never changed). An object of
    another group, or already in `version`, comes back as an equal copy."""
    if version not in VERSIONS:
        raise ConversionError(f"cannot convert to {GROUP}/{version}: the versions are {', '.join(VERSIONS)}")
    if not isinstance(obj, dict):
        raise ConversionError(f"not an object: {type(obj).__name__}")
    try:
        out = orjson.loads(orjson.dumps(obj))
    except TypeError as e:
        raise ConversionError(f"not a JSON object: {e}") from None
    group, _, have = str(out.get("apiVersion") or "").partition("/")
    if group != GROUP or have == version:
        return out
    out["apiVersion"] = f"{GROUP}/{version}"
    spec, status = _object(out, "spec"), _object(out, "status")
    kind = out.get("kind")
    if kind == "ClusterQueue":
        _cluster_queue_spec(spec, version)
        if version == V1BETA2:
            _drop(status, "pendingWorkloadsStatus")
            _drop(_object(status, "fairSharing"), "admissionFairSharingStatus")
    elif kind == "Cohort" and version == V1BETA2:
        _drop(_object(status, "fairSharing"), "admissionFairSharingStatus")
    elif kind == "LocalQueue":
        _rename(status, "flavorUsage", "flavorsUsage", version)
        if version == V1BETA2:
            _drop(status, "flavors")
    return out


def _cluster_queue_spec(spec: dict, version: str) -> None:
    """apis/kueue/v1beta1/clusterqueue_conversion.go, Convert_*_ClusterQueueSpec_To_*."""
    _rename(spec, "cohort", "cohortName", version)
    if version != V1BETA2:
        return      # v1beta1 has admissionChecksStrategy and every fungibility name v1beta2 has
    fungibility = _object(spec, "flavorFungibility")
    for policy, old in _OLD_FUNGIBILITY.items():
        if fungibility.get(policy) == old:
            fungibility[policy] = "MayStopSearch"
    if "admissionChecks" in spec:
        checks = spec.pop("admissionChecks")
        if not isinstance(checks, list) or not all(isinstance(c, str) for c in checks):
            raise ConversionError(f"ClusterQueue spec.admissionChecks must be a list of AdmissionCheck names to "
                                  f"move under spec.admissionChecksStrategy in {V1BETA2}, got {checks!r:.80}")
        if checks:  # as Kueue, the list replaces any admissionChecksStrategy
            spec["admissionChecksStrategy"] = {"admissionChecks": [{"name": c} for c in checks]}


def _rename(parent: dict, v1beta1_name: str, v1beta2_name: str, version: str) -> None:
    """The field under the name `version` has for it, replacing any field already of that name (as Kueue's
    typed conversion does); an empty value is dropped, as Go's omitempty does."""
    old, new = (v1beta1_name, v1beta2_name) if version == V1BETA2 else (v1beta2_name, v1beta1_name)
    if old in parent:
        value = parent.pop(old)
        parent.pop(new, None)
        if value not in ("", None, []):
            parent[new] = value


def _object(parent: dict, name: str) -> dict:
    """parent[name] when it is an object, else an unattached {} (nothing under it to convert)."""
    value = parent.get(name)
    return value if isinstance(value, dict) else {}


def _drop(parent: dict, name: str) -> None:
    parent.pop(name, None)

