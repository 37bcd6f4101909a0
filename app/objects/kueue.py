"""Kueue's quota API: ResourceFlavor, ClusterQueue, Cohort, LocalQueue (and WorkloadPriorityClass), in
kueue.x-k8s.io/v1beta1 and v1beta2, mixed in one cluster as Kueue serves them.

Field names and defaults follow Kueue; validation follows Kueue's webhooks, so an object Kueue would refuse
is refused here with the same reason. What v1beta2 renamed or removed (apis/kueue/v1beta2, and the
conversions in apis/kueue/v1beta1/*_conversion.go) is read under each version's own name; a field of one
version used under the other is an error naming the field and the version that has it, never a silent
default (V1BETA1_ONLY, V1BETA2_ONLY).
"""
from __future__ import annotations

import math

from dataclasses import dataclass, field

from .quantity import QuantityError, parse_quantity
from .selectors import Selector
from . import coverage
from .annotations import fenced, preemption_delay
from .errors import InvalidObject
from .meta import listing, mapping, metadata, selector_field, string_map, text

GROUP = "kueue.x-k8s.io"
V1BETA1, V1BETA2 = "v1beta1", "v1beta2"
VERSIONS = (V1BETA1, V1BETA2)
# ClusterQueue spec fields of one version only -> what the other version has instead. v1beta1 has both
# admissionChecks and admissionChecksStrategy; v1beta2 keeps only the strategy.
V1BETA1_ONLY = {"cohort": "spec.cohortName", "admissionChecks": "spec.admissionChecksStrategy.admissionChecks"}
V1BETA2_ONLY = {"cohortName": "spec.cohort"}

QUEUEING_STRATEGIES = ("BestEffortFIFO", "StrictFIFO")
STOP_POLICIES = ("None", "Hold", "HoldAndDrain")
WITHIN_CQ = ("Never", "LowerPriority", "LowerOrNewerEqualPriority")
RECLAIM = ("Never", "LowerPriority", "Any")
BORROW_WITHIN = ("Never", "LowerPriority")
MAY_STOP_SEARCH, TRY_NEXT_FLAVOR = "MayStopSearch", "TryNextFlavor"
# v1beta1's Borrow and Preempt are the deprecated names of MayStopSearch; Kueue's conversion to
# v1beta2 renames them (apis/kueue/v1beta1/clusterqueue_conversion.go), and so does the decoder.
# v1beta2 knows only MayStopSearch and TryNextFlavor.
WHEN_CAN_BORROW = (MAY_STOP_SEARCH, TRY_NEXT_FLAVOR, "Borrow")
WHEN_CAN_PREEMPT = (MAY_STOP_SEARCH, TRY_NEXT_FLAVOR, "Preempt")
BORROWING_OVER_PREEMPTION, PREEMPTION_OVER_BORROWING = "BorrowingOverPreemption", "PreemptionOverBorrowing"
FUNGIBILITY_PREFERENCES = (BORROWING_OVER_PREEMPTION, PREEMPTION_OVER_BORROWING)
_OLD_FUNGIBILITY_NAMES = {"Borrow": MAY_STOP_SEARCH, "Preempt": MAY_STOP_SEARCH}


@dataclass(slots=True)
class ResourceFlavor:
    name: str
    node_labels: dict[str, str] = field(default_factory=dict)
    node_taints: list[dict] = field(default_factory=list)
    tolerations: list[dict] = field(default_factory=list)
    topology_name: str = ""     # spec.topologyName: its Topology, for pod groups asking a topology level

    def selects(self, node_labels: dict[str, str]) -> bool:
        """A node is the flavor's when it has every one of the flavor's nodeLabels."""
        return all(node_labels.get(k) == v for k, v in self.node_labels.items())


@dataclass(slots=True)
class Quota:
    nominal: int
    borrowing_limit: int | None = None
    lending_limit: int | None = None


@dataclass(slots=True)
class FlavorQuotas:
    name: str
    resources: dict[str, Quota]


@dataclass(slots=True)
class ResourceGroup:
    covered: tuple[str, ...]
    flavors: list[FlavorQuotas]


@dataclass(slots=True)
class Preemption:
    within_cluster_queue: str = "Never"
    reclaim_within_cohort: str = "Never"
    borrow_within_cohort: str = "Never"
    max_priority_threshold: int | None = None


@dataclass(slots=True)
class ClusterQueue:
    name: str
    cohort: str = ""                    # v1beta1 spec.cohort, v1beta2 spec.cohortName
    namespace_selector: Selector | None = None
    resource_groups: list[ResourceGroup] = field(default_factory=list)
    queueing_strategy: str = "BestEffortFIFO"
    stop_policy: str = "None"
    when_can_borrow: str = MAY_STOP_SEARCH
    when_can_preempt: str = TRY_NEXT_FLAVOR
    fungibility_preference: str = ""    # "" (unset) behaves as BorrowingOverPreemption
    preemption: Preemption = field(default_factory=Preemption)
    fair_weight: float = 1.0
    annotations: dict[str, str] = field(default_factory=dict)
    fence: bool = False                 # the preemption fence annotation (objects.annotations)
    preemption_delay: float = 0.0       # seconds, the preemption delay annotation
    api_version: str = V1BETA1          # the version it was read in (its status is written back in it)
    # .status as the API last showed it: Quotient writes it (observe.status) and reads it only to skip a write
    # that would change nothing; never part of equality, so an event that changes only it changes nothing.
    status: dict = field(default_factory=dict, compare=False, repr=False)
    # Why Quotient cannot serve it as written (fields objects.coverage refuses): it is inactive with these reasons.
    unsupported: tuple[str, ...] = ()

    def covered_resources(self) -> dict[str, int]:
        """resource name -> index of the resource group that covers it."""
        return {r: i for i, g in enumerate(self.resource_groups) for r in g.covered}


@dataclass(slots=True)
class Cohort:
    name: str
    parent: str = ""
    resource_groups: list[ResourceGroup] = field(default_factory=list)
    fair_weight: float = 1.0
    annotations: dict[str, str] = field(default_factory=dict)
    fence: bool = False


@dataclass(slots=True)
class LocalQueue:
    namespace: str
    name: str
    cluster_queue: str
    stop_policy: str = "None"           # spec.stopPolicy (both versions): Hold, HoldAndDrain stop admission
    api_version: str = V1BETA1          # the version it was read in (its status is written back in it)
    # .status as the API last showed it (observe.localqueue_status writes it) and metadata.generation (its
    # conditions' observedGeneration): never part of equality, so an event that changes only them changes nothing
    status: dict = field(default_factory=dict, compare=False, repr=False)
    generation: int = field(default=0, compare=False, repr=False)

    @property
    def key(self) -> str:
        return f"{self.namespace}/{self.name}"


def api_version(obj: dict, kind: str, name: str = "?") -> str:
    """v1beta1 or v1beta2 of kueue.x-k8s.io; any other apiVersion is an error naming the two."""
    api = obj.get("apiVersion")
    group, _, version = api.partition("/") if isinstance(api, str) else ("", "", "")
    if group != GROUP or version not in VERSIONS:
        raise InvalidObject(kind, name, f"apiVersion must be {GROUP}/{V1BETA1} or {GROUP}/{V1BETA2}, got {api!r}")
    return version


def _one_version_fields(spec: dict, version: str, kind: str, name: str) -> None:
    """A ClusterQueue field of the other version is an error naming it and the version that has it (the
    API server would refuse it as an unknown field)."""
    foreign, other, instead = (V1BETA1_ONLY, V1BETA1, V1BETA2) if version == V1BETA2 else \
        (V1BETA2_ONLY, V1BETA2, V1BETA1)
    for field_, replacement in foreign.items():
        if field_ in spec:
            raise InvalidObject(kind, name, f"spec.{field_} is a {GROUP}/{other} field; in {instead} it is "
                                f"{replacement}")


def _choice(value: object, allowed: tuple[str, ...], default: str, kind: str, name: str, field_: str) -> str:
    if value is None or value == "":
        return default
    if value not in allowed:
        raise InvalidObject(kind, name, f"{field_}: {value!r} is not one of {', '.join(allowed)}")
    return value


def _quantity(value: object, resource: str, kind: str, name: str, where: str) -> int:
    try:
        return parse_quantity(value, resource)
    except QuantityError as e:
        raise InvalidObject(kind, name, f"{where}: {e}") from None


def _resource_groups(raw: object, kind: str, name: str, has_parent: bool) -> list[ResourceGroup]:
    groups: list[ResourceGroup] = []
    seen_flavors: set[str] = set()
    seen_resources: set[str] = set()
    raw_groups = listing(raw, kind, name, "spec.resourceGroups")
    _at_most(raw_groups, MAX_RESOURCE_GROUPS, kind, name, "spec.resourceGroups")
    for gi, g in enumerate(raw_groups):
        g = mapping(g, kind, name, f"resourceGroups[{gi}]")
        covered = listing(g.get("coveredResources"), kind, name, f"resourceGroups[{gi}].coveredResources")
        if not covered or not all(isinstance(r, str) and r for r in covered):
            raise InvalidObject(kind, name, f"resourceGroups[{gi}].coveredResources must list resource names")
        _at_most(covered, MAX_GROUP_ITEMS, kind, name, f"resourceGroups[{gi}].coveredResources")
        for r in covered:
            if r in seen_resources:
                raise InvalidObject(kind, name, f"resource {r} is covered by more than one resource group")
            seen_resources.add(r)
        flavors: list[FlavorQuotas] = []
        raw_flavors = listing(g.get("flavors"), kind, name, f"resourceGroups[{gi}].flavors")
        _at_most(raw_flavors, MAX_GROUP_ITEMS, kind, name, f"resourceGroups[{gi}].flavors")
        for fi, f in enumerate(raw_flavors):
            where = f"resourceGroups[{gi}].flavors[{fi}]"
            f = mapping(f, kind, name, where)
            fname = f.get("name")
            if not isinstance(fname, str) or not fname:
                raise InvalidObject(kind, name, f"{where}.name is required")
            if fname in seen_flavors:
                raise InvalidObject(kind, name, f"flavor {fname} appears in more than one place; "
                                    "a flavor may belong to one resource group only")
            seen_flavors.add(fname)
            resources: dict[str, Quota] = {}
            entries = listing(f.get("resources"), kind, name, f"{where}.resources")
            names = [e.get("name") if isinstance(e, dict) else None for e in entries]
            if names != list(covered):
                raise InvalidObject(kind, name, f"{where} (flavor {fname}) must list exactly the covered "
                                    f"resources in order {list(covered)}, got {names}")
            for e in entries:
                r = e["name"]
                q = Quota(nominal=_quantity(e.get("nominalQuota", 0), r, kind, name, f"{fname}/{r} nominalQuota"))
                if e.get("borrowingLimit") is not None:
                    if not has_parent:
                        raise InvalidObject(kind, name, f"{fname}/{r} borrowingLimit needs a cohort "
                                            "(there is nothing to borrow from)")
                    q.borrowing_limit = _quantity(e["borrowingLimit"], r, kind, name, f"{fname}/{r} borrowingLimit")
                if e.get("lendingLimit") is not None:
                    if not has_parent:
                        raise InvalidObject(kind, name, f"{fname}/{r} lendingLimit needs a cohort")
                    q.lending_limit = _quantity(e["lendingLimit"], r, kind, name, f"{fname}/{r} lendingLimit")
                    if kind == "ClusterQueue" and q.lending_limit > q.nominal:
                        raise InvalidObject(kind, name, f"{fname}/{r} lendingLimit must be <= nominalQuota")
                resources[r] = q
            flavors.append(FlavorQuotas(fname, resources))
        if not flavors:
            raise InvalidObject(kind, name, f"resourceGroups[{gi}] needs at least one flavor")
        groups.append(ResourceGroup(tuple(covered), flavors))
    for what, total in (("flavors", len(seen_flavors)), ("coveredResources", len(seen_resources))):
        if total > MAX_TOTAL_ITEMS:
            raise InvalidObject(kind, name, f"{total} {what} across resourceGroups; Kueue allows at most "
                                f"{MAX_TOTAL_ITEMS}")
    return groups


# Kueue's own validation (apis/kueue/v1beta1 clusterqueue_types.go): up to 16 resource groups, each
# covering up to 64 resources with up to 64 flavors, and 256 flavors and resources across all groups.
MAX_RESOURCE_GROUPS = 16
MAX_GROUP_ITEMS = 64
MAX_TOTAL_ITEMS = 256


def _at_most(items: list, limit: int, kind: str, name: str, where: str) -> None:
    if len(items) > limit:
        raise InvalidObject(kind, name, f"{where} has {len(items)} items; Kueue allows at most {limit}")


def _weight(spec: dict, kind: str, name: str) -> float:
    fs = mapping(spec.get("fairSharing"), kind, name, "spec.fairSharing")
    raw = fs.get("weight", 1)
    try:
        weight = parse_quantity(raw, "cpu") / 1000 if isinstance(raw, str) else float(raw)
    except (QuantityError, TypeError, ValueError):
        raise InvalidObject(kind, name, f"spec.fairSharing.weight: {raw!r} is not a number") from None
    if not math.isfinite(weight):
        raise InvalidObject(kind, name, f"spec.fairSharing.weight: {raw!r} is not a finite number")
    if weight < 0:
        raise InvalidObject(kind, name, "spec.fairSharing.weight must not be negative")
    # Kueue reads it in thousandths (Quantity.MilliValue, rounded up); the float's own error is no thousandth
    return math.ceil(weight * 1000 - 1e-6) / 1000


def decode_resource_flavor(obj: dict) -> ResourceFlavor:
    meta, name = metadata(obj, "ResourceFlavor")
    spec = mapping(obj.get("spec"), "ResourceFlavor", name, "spec")
    if spec.get("topologyName") and not spec.get("nodeLabels"):
        raise InvalidObject("ResourceFlavor", name, "at least one nodeLabel is required when topology is set")
    return ResourceFlavor(
        name=name,
        node_labels=string_map(spec.get("nodeLabels"), "ResourceFlavor", name, "spec.nodeLabels"),
        node_taints=[t for t in listing(spec.get("nodeTaints"), "ResourceFlavor", name, "spec.nodeTaints")
                     if isinstance(t, dict)],
        tolerations=[t for t in listing(spec.get("tolerations"), "ResourceFlavor", name, "spec.tolerations")
                     if isinstance(t, dict)],
        topology_name=text(spec, "topologyName", "ResourceFlavor", name, "spec.topologyName"),
    )


def _flavor_fungibility(spec: dict, name: str, version: str) -> tuple[str, str, str]:
    """(whenCanBorrow, whenCanPreempt, preference) with v1beta1's old names mapped to MayStopSearch; a
    preference only with both policies TryNextFlavor, as Kueue's ClusterQueue validation requires."""
    kind, where = "ClusterQueue", "spec.flavorFungibility"
    fung = mapping(spec.get("flavorFungibility"), kind, name, where)
    if version == V1BETA2:
        for policy in ("whenCanBorrow", "whenCanPreempt"):
            if fung.get(policy) in _OLD_FUNGIBILITY_NAMES:
                raise InvalidObject(kind, name, f"{where}.{policy}: {fung[policy]} is {GROUP}/{V1BETA1}'s "
                                    f"(deprecated) name; {V1BETA2} calls it {MAY_STOP_SEARCH}")
    current = (MAY_STOP_SEARCH, TRY_NEXT_FLAVOR)
    borrow = _choice(fung.get("whenCanBorrow"), current if version == V1BETA2 else WHEN_CAN_BORROW, MAY_STOP_SEARCH,
                     kind, name, f"{where}.whenCanBorrow ({GROUP}/{version})")
    preempt = _choice(fung.get("whenCanPreempt"), current if version == V1BETA2 else WHEN_CAN_PREEMPT,
                      TRY_NEXT_FLAVOR, kind, name, f"{where}.whenCanPreempt ({GROUP}/{version})")
    borrow, preempt = _OLD_FUNGIBILITY_NAMES.get(borrow, borrow), _OLD_FUNGIBILITY_NAMES.get(preempt, preempt)
    preference = _choice(fung.get("preference"), FUNGIBILITY_PREFERENCES, "", kind, name, f"{where}.preference")
    if preference and (borrow, preempt) != (TRY_NEXT_FLAVOR, TRY_NEXT_FLAVOR):
        raise InvalidObject(kind, name, f"{where}.preference: preference {preference!r} requires both "
                            f"whenCanBorrow and whenCanPreempt to be TryNextFlavor (they are {borrow} and "
                            f"{preempt}; unset, whenCanBorrow is MayStopSearch)")
    return borrow, preempt, preference


def decode_cluster_queue(obj: dict) -> ClusterQueue:
    kind = "ClusterQueue"
    meta, name = metadata(obj, kind)
    version = api_version(obj, kind, name)
    spec = mapping(obj.get("spec"), kind, name, "spec")
    _one_version_fields(spec, version, kind, name)
    cohort_field = "cohortName" if version == V1BETA2 else "cohort"
    cohort = spec.get(cohort_field) or ""
    if not isinstance(cohort, str):
        raise InvalidObject(kind, name, f"spec.{cohort_field} must be a string")
    selector = selector_field(spec, "namespaceSelector", kind, name)
    pre = mapping(spec.get("preemption"), kind, name, "spec.preemption")
    bwc = mapping(pre.get("borrowWithinCohort"), kind, name, "spec.preemption.borrowWithinCohort")
    threshold = bwc.get("maxPriorityThreshold")
    if threshold is not None and (not isinstance(threshold, int) or isinstance(threshold, bool)):
        raise InvalidObject(kind, name, "borrowWithinCohort.maxPriorityThreshold must be an integer")
    preemption = Preemption(
        within_cluster_queue=_choice(pre.get("withinClusterQueue"), WITHIN_CQ, "Never", kind, name,
                                     "spec.preemption.withinClusterQueue"),
        reclaim_within_cohort=_choice(pre.get("reclaimWithinCohort"), RECLAIM, "Never", kind, name,
                                      "spec.preemption.reclaimWithinCohort"),
        borrow_within_cohort=_choice(bwc.get("policy"), BORROW_WITHIN, "Never", kind, name,
                                     "spec.preemption.borrowWithinCohort.policy"),
        max_priority_threshold=threshold,
    )
    if preemption.borrow_within_cohort != "Never" and preemption.reclaim_within_cohort == "Never":
        raise InvalidObject(kind, name, "borrowWithinCohort needs reclaimWithinCohort other than Never")
    when_can_borrow, when_can_preempt, preference = _flavor_fungibility(spec, name, version)
    annotations = string_map(meta.get("annotations"), kind, name, "metadata.annotations")
    return ClusterQueue(
        name=name,
        cohort=cohort,
        namespace_selector=selector,
        resource_groups=_resource_groups(spec.get("resourceGroups"), kind, name, bool(cohort)),
        queueing_strategy=_choice(spec.get("queueingStrategy"), QUEUEING_STRATEGIES, "BestEffortFIFO",
                                  kind, name, "spec.queueingStrategy"),
        stop_policy=_choice(spec.get("stopPolicy"), STOP_POLICIES, "None", kind, name, "spec.stopPolicy"),
        when_can_borrow=when_can_borrow,
        when_can_preempt=when_can_preempt,
        fungibility_preference=preference,
        preemption=preemption,
        fair_weight=_weight(spec, kind, name),
        annotations=annotations,
        fence=fenced(annotations),
        preemption_delay=preemption_delay(annotations),
        api_version=version,
        status=obj["status"] if isinstance(obj.get("status"), dict) else {},
        unsupported=_unsupported(spec),
    )


def _unsupported(spec: dict) -> tuple[str, ...]:
    """The reasons, one per field objects.coverage refuses, that a ClusterQueue is inactive: admission checks (v1beta2
    admissionChecksStrategy, v1beta1 also admissionChecks; an empty list asks for none), admissionScope with
    UsageBasedAdmissionFairSharing (NoAdmissionFairSharing is Kueue's default), a concurrentAdmissionPolicy."""
    out = []
    strategy = _list_of(spec.get("admissionChecksStrategy"), "admissionChecks")
    for path, rules in ((coverage.CQ_ADMISSION_CHECKS, strategy),
                        ("spec.admissionChecks", _list_of(spec, "admissionChecks"))):     # v1beta1's list of names
        if rules:
            names = [str(c.get("name") if isinstance(c, dict) else c) for c in rules[:8]]
            more = f" and {len(rules) - 8} more" if len(rules) > 8 else ""
            out.append(coverage.unsupported_field(path, f"admission checks {', '.join(names)}{more}"))
    scope = spec.get("admissionScope")
    mode = scope.get("admissionMode") if isinstance(scope, dict) else scope
    if scope is not None and mode != "NoAdmissionFairSharing":
        out.append(coverage.unsupported_field(coverage.CQ_ADMISSION_SCOPE, f"admissionMode {mode}"))
    if spec.get("concurrentAdmissionPolicy") is not None:
        out.append(coverage.unsupported_field(coverage.CQ_CONCURRENT))
    return tuple(out)


def _list_of(obj: object, key: str) -> list:
    value = obj.get(key) if isinstance(obj, dict) else None
    return value if isinstance(value, list) else []


def decode_cohort(obj: dict) -> Cohort:
    kind = "Cohort"
    meta, name = metadata(obj, kind)
    spec = mapping(obj.get("spec"), kind, name, "spec")
    parent = spec.get("parentName") or ""
    annotations = string_map(meta.get("annotations"), kind, name, "metadata.annotations")
    if not isinstance(parent, str):
        raise InvalidObject(kind, name, "spec.parentName must be a string")
    if parent == name:
        raise InvalidObject(kind, name, "spec.parentName must not name the cohort itself")
    return Cohort(
        name=name,
        parent=parent,
        resource_groups=_resource_groups(spec.get("resourceGroups"), kind, name, bool(parent)),
        fair_weight=_weight(spec, kind, name),
        annotations=annotations,
        fence=fenced(annotations),
    )


def decode_local_queue(obj: dict) -> LocalQueue:
    meta, name = metadata(obj, "LocalQueue")
    namespace = meta.get("namespace") or "default"
    spec = mapping(obj.get("spec"), "LocalQueue", f"{namespace}/{name}", "spec")
    cq = spec.get("clusterQueue")
    if not isinstance(cq, str) or not cq:
        raise InvalidObject("LocalQueue", f"{namespace}/{name}", "spec.clusterQueue is required")
    version = api_version(obj, "LocalQueue", f"{namespace}/{name}") if "apiVersion" in obj else V1BETA1
    stop = _choice(spec.get("stopPolicy"), STOP_POLICIES, "None", "LocalQueue", f"{namespace}/{name}",
                   "spec.stopPolicy")
    generation = meta.get("generation")
    return LocalQueue(namespace=namespace, name=name, cluster_queue=cq, stop_policy=stop, api_version=version,
                      status=obj["status"] if isinstance(obj.get("status"), dict) else {},
                      generation=generation if isinstance(generation, int) and not isinstance(generation, bool) else 0)


INT32 = (-2**31, 2**31 - 1)


@dataclass(frozen=True, slots=True)
class WorkloadPriorityClass:
    """A workload's queueing and preemption priority, apart from its pods' PriorityClass (KEP-973)."""
    name: str
    value: int


def decode_workload_priority_class(obj: dict) -> WorkloadPriorityClass:
    """A top-level int32 `value`, required in both versions (`json:"value"`,
    apis/kueue/v1beta*/workloadpriorityclass_types.go)."""
    kind = "WorkloadPriorityClass"
    meta, name = metadata(obj, kind)
    version = api_version(obj, kind, name)
    value = obj.get("value")
    if not isinstance(value, int) or isinstance(value, bool) or not INT32[0] <= value <= INT32[1]:
        raise InvalidObject(kind, name, f"value must be a 32-bit integer ({GROUP}/{version}), got {value!r}")
    return WorkloadPriorityClass(name, value)
