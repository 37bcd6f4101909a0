"""Every field of Kueue's v1beta2 API and every Kueue label and annotation on pods and Jobs, honoured or refused, in
one place, so an admin who writes one is never silently ignored (issue 34).

HONOURED: Quotient acts on it as Kueue does. REFUSED: Quotient cannot; a ClusterQueue that uses it is inactive
with the reason (state.tree, shown in its status condition, /debug, the view and the metric), a pod that
carries it is refused by the named rule (core.admission.resolve). KUEUE_WRITES: an annotation Kueue's own
controllers and webhooks write on objects they manage; no admin input, nothing to honour or refuse.

The decoders (objects.kueue, objects.pod, objects.job) read their refusals from here, README.md's table is
checked against these lists, and tests/test_field_coverage.py walks the v1beta2 schemas of deploy/crds/crds.yaml
and fails on a field in neither list. Read against Kueue's apis/kueue/v1beta2, pkg/controller/constants,
pkg/controller/jobs/pod/constants and pkg/controller/jobs/job (main, ff69552).
"""
from __future__ import annotations

from dataclasses import dataclass

HONOURED, REFUSED, KUEUE_WRITES = "honoured", "refused", "written by Kueue"

# The rules a refused pod or Job is refused by (core.admission.resolve).
TOPOLOGY_RULE = "TopologyNotSupported"
DRA_RULE = "DRANotSupported"
FEATURE_RULE = "KueueFeatureNotSupported"
GATED_RULE = "AdmissionGated"

TOPOLOGY_WHY = ("Quotient does not implement this part of topology-aware scheduling (README, Topology-aware "
                "placement), so it could not place the pods as Kueue would")
ADMISSION_CHECKS_WHY = ("Quotient runs no admission checks (ProvisioningRequest, MultiKueue or custom ones), so "
                        "it could not wait for them as Kueue does; remove the checks, or let Kueue serve this "
                        "ClusterQueue")
AFS_WHY = ("admission fair sharing (ordering by LocalQueue usage) is not implemented by Quotient; use "
           "NoAdmissionFairSharing or remove admissionScope")
CONCURRENT_WHY = ("concurrent admission (workload variants migrating between flavors) is not implemented by "
                  "Quotient; remove concurrentAdmissionPolicy")
DRA_WHY = ("the pod claims devices through spec.resourceClaims (Dynamic Resource Allocation), which Quotient "
           "cannot charge to quota: admitted, its devices would bypass the ClusterQueue. Kueue refuses such "
           "workloads too unless its DRA integration is on (KueueDRARejectWorkloadsWhenDRADisabled); request the "
           "devices as an extended resource the ClusterQueue covers, or let Kueue serve it")


@dataclass(frozen=True, slots=True)
class Entry:
    """One field or annotation. says: what Quotient does with it (HONOURED) or the reason an admin sees
    (REFUSED). whole: an honoured object whose inside is Kubernetes' own type (a label selector, a taint, a
    toleration), read as Kubernetes reads it; the schema walk does not look inside."""
    verdict: str
    says: str
    whole: bool = False


def honoured(says: str, whole: bool = False) -> Entry:
    return Entry(HONOURED, says, whole)


def refused(says: str) -> Entry:
    return Entry(REFUSED, says)


_QUOTA = "the quota of that flavor and resource (Quota arithmetic)"
_GROUPS = {
    "spec.resourceGroups": honoured("quota per flavor and resource, in the group's order"),
    "spec.resourceGroups[].coveredResources": honoured("the resources the group covers"),
    "spec.resourceGroups[].flavors": honoured("the flavors tried in order (How a pod is admitted)"),
    "spec.resourceGroups[].flavors[].name": honoured("the ResourceFlavor; a missing one makes a ClusterQueue "
                                                     "inactive"),
    "spec.resourceGroups[].flavors[].resources": honoured(_QUOTA),
    "spec.resourceGroups[].flavors[].resources[].name": honoured("the resource"),
    "spec.resourceGroups[].flavors[].resources[].nominalQuota": honoured("nominal quota"),
    "spec.resourceGroups[].flavors[].resources[].borrowingLimit": honoured("at most this much borrowed"),
    "spec.resourceGroups[].flavors[].resources[].lendingLimit": honoured("at most this much lent"),
    "spec.fairSharing": honoured("fair sharing (Preemption)"),
    "spec.fairSharing.weight": honoured("the weight of its dominant resource share"),
}

# kind -> v1beta2 field path (spec.x, [] for a list's items) -> Entry
FIELDS: dict[str, dict[str, Entry]] = {
    "ClusterQueue": {
        "spec": honoured("the ClusterQueue"),
        **_GROUPS,
        "spec.cohortName": honoured("its cohort (v1beta1: spec.cohort)"),
        "spec.namespaceSelector": honoured("namespaces that may use it", whole=True),
        "spec.queueingStrategy": honoured("StrictFIFO or BestEffortFIFO"),
        "spec.stopPolicy": honoured("Hold and HoldAndDrain"),
        "spec.flavorFungibility": honoured("whether to try the next flavor"),
        "spec.flavorFungibility.whenCanBorrow": honoured("MayStopSearch or TryNextFlavor"),
        "spec.flavorFungibility.whenCanPreempt": honoured("MayStopSearch or TryNextFlavor"),
        "spec.flavorFungibility.preference": honoured("BorrowingOverPreemption or PreemptionOverBorrowing"),
        "spec.preemption": honoured("Preemption"),
        "spec.preemption.withinClusterQueue": honoured("Never, LowerPriority, LowerOrNewerEqualPriority"),
        "spec.preemption.reclaimWithinCohort": honoured("Never, LowerPriority, Any"),
        "spec.preemption.borrowWithinCohort": honoured("preemption while borrowing"),
        "spec.preemption.borrowWithinCohort.policy": honoured("Never or LowerPriority"),
        "spec.preemption.borrowWithinCohort.maxPriorityThreshold": honoured("victims at most this priority"),
        "spec.admissionChecksStrategy": refused(ADMISSION_CHECKS_WHY + " (an empty list is honoured)"),
        "spec.admissionScope": refused("admissionMode UsageBasedAdmissionFairSharing: " + AFS_WHY
                                       + " (NoAdmissionFairSharing is honoured: it is the default)"),
        "spec.concurrentAdmissionPolicy": refused(CONCURRENT_WHY),
    },
    "Cohort": {
        "spec": honoured("the Cohort"),
        **_GROUPS,
        "spec.parentName": honoured("its parent in the cohort tree"),
    },
    "LocalQueue": {
        "spec": honoured("the LocalQueue"),
        "spec.clusterQueue": honoured("the ClusterQueue its pods are admitted by"),
        "spec.stopPolicy": honoured("Hold and HoldAndDrain"),
        "spec.fairSharing": honoured("no effect, as in Kueue without admission fair sharing, which a "
                                     "ClusterQueue turns on with admissionScope (refused)"),
        "spec.fairSharing.weight": honoured("no effect (see spec.fairSharing)"),
    },
    "ResourceFlavor": {
        "spec": honoured("the ResourceFlavor"),
        "spec.nodeLabels": honoured("the flavor's nodes; pods are kept to them"),
        "spec.nodeTaints": honoured("a pod must tolerate them to use the flavor", whole=True),
        "spec.tolerations": honoured(
            "counted with the pod's own against the flavor's nodeTaints, as Kueue's flavor assigner does; Kueue also "
            "writes them into the admitted pod, which a scheduler cannot: a pod meant for tainted nodes carries the "
            "toleration itself, else kube-scheduler offers none of them and the pod is refused NoFlavorNodes",
            whole=True),
        "spec.topologyName": honoured(
            "the flavor's Topology: a pod group asking for a topology level is placed in its domains as Kueue's "
            "TAS places it; a ClusterQueue with a flavor naming a Topology that does not exist is inactive "
            "(TopologyNotFound)"),
    },
    "WorkloadPriorityClass": {
        "value": honoured("the workload's priority"),
        "description": honoured("a description; nothing to act on"),
    },
    "Topology": {
        "spec": honoured("the topology's levels (spec.levels[].nodeLabel), widest first, validated as Kueue does; "
                         "a node carrying every level's label is in one domain of each", whole=True),
    },
}

# Inactive reasons of a ClusterQueue, by what it uses (objects.kueue.decode_cluster_queue, state.tree).
CQ_ADMISSION_CHECKS = "spec.admissionChecksStrategy"
CQ_ADMISSION_SCOPE = "spec.admissionScope"
CQ_CONCURRENT = "spec.concurrentAdmissionPolicy"


def unsupported_field(path: str, detail: str = "") -> str:
    """The words of a refused ClusterQueue field: the field (and what it says), then why."""
    why = {CQ_ADMISSION_CHECKS: ADMISSION_CHECKS_WHY, "spec.admissionChecks": ADMISSION_CHECKS_WHY,
           CQ_ADMISSION_SCOPE: AFS_WHY, CQ_CONCURRENT: CONCURRENT_WHY}[path]
    return f"ClusterQueue field {path}{f' ({detail})' if detail else ''} is not supported: {why}"


# ---- labels and annotations on pods and Jobs ---------------------------------------------------------------------

K = "kueue.x-k8s.io/"


@dataclass(frozen=True, slots=True)
class Mark:
    """A Kueue label or annotation. on: where an admin puts it; acts: the values with an effect in Kueue (None:
    any value); rule: the rule a refused one is refused by."""
    verdict: str
    says: str
    on: tuple[str, ...] = ("pod",)
    acts: frozenset[str] | None = None
    rule: str = ""


def _topology(says: str) -> Mark:
    return Mark(REFUSED, f"{says}: {TOPOLOGY_WHY}", ("pod",), None, TOPOLOGY_RULE)


def _placed(says: str) -> Mark:
    return Mark(HONOURED, f"{says}, on a pod group's members, a Job's pod template or a lone pod (core.topology, as "
                "Kueue's TAS; a group no domain holds preempts inside the domain where the fewest victims make it "
                "fit, core.preemption.gang)")


def _feature(says: str, on: tuple[str, ...], acts: frozenset[str] | None = None) -> Mark:
    return Mark(REFUSED, says, on, acts, FEATURE_RULE)


TRUE, FALSE = frozenset({"true"}), frozenset({"false"})

# (label or annotation key, "label" / "annotation") -> Mark
MARKS: dict[tuple[str, str], Mark] = {
    (K + "queue-name", "label"): Mark(HONOURED, "the LocalQueue the pod or Job is admitted through", ("pod", "Job")),
    (K + "priority-class", "label"): Mark(HONOURED, "the workload's WorkloadPriorityClass", ("pod", "Job")),
    (K + "pod-group-name", "label"): Mark(HONOURED, "the pod group (gang) the pod belongs to"),
    (K + "pod-group-total-count", "annotation"): Mark(HONOURED, "how many pods the group needs"),
    (K + "pod-group-name", "annotation"): _feature(
        "Kueue reads a pod group's name from this annotation first (WorkloadIdentifierAnnotations, on by default), "
        "Quotient from the label kueue.x-k8s.io/pod-group-name only; put the name in the label (the annotation "
        "may stay when it repeats the label)", ("pod",)),
    (K + "admission-gated-by", "annotation"): Mark(
        HONOURED, "admission gated by other controllers: as in Kueue, nothing is admitted while it is present; "
        "the pods are refused (AdmissionGated) until those controllers remove it", ("pod", "Job"), None,
        GATED_RULE),
    (K + "job-min-parallelism", "annotation"): Mark(HONOURED, "partial admission's floor", ("Job",)),
    (K + "job-completions-equal-parallelism", "annotation"): _feature(
        "with partial admission (job-min-parallelism), Kueue lowers the Job's completions along with its "
        "parallelism; Quotient does not change Jobs", ("Job",), TRUE),
    (K + "podset-required-topology", "annotation"): _placed("a required topology level: all in one domain of it"),
    (K + "podset-preferred-topology", "annotation"): _placed("a preferred topology level, going up when none fits"),
    (K + "podset-unconstrained-topology", "annotation"): _placed("topology-aware placement without a level"),
    (K + "podset-slice-required-topology", "annotation"): _placed("a topology level per slice"),
    (K + "podset-slice-size", "annotation"): _placed("a slice size for topology-aware placement"),
    (K + "podset-slice-required-topology-constraints", "annotation"): _topology("topology constraints per slice"),
    (K + "podset-group-name", "annotation"): _topology("pod sets placed in one topology domain"),
    (K + "pod-group-pod-index-label", "annotation"): _topology("the label ranking pods in a topology domain"),
    (K + "pod-group-fast-admission", "annotation"): _feature(
        "fast admission admits a pod group before all its pods exist; Quotient admits a group once its pods "
        "are all there", ("pod",), TRUE),
    (K + "pod-group-serving", "annotation"): _feature(
        "a serving pod group (its pods replaced, never finished) is not implemented by Quotient", ("pod",), TRUE),
    (K + "retriable-in-group", "annotation"): _feature(
        "a non-retriable pod group (finished by its first failed pod) is not implemented by Quotient", ("pod",),
        FALSE),
    (K + "max-exec-time-seconds", "label"): _feature(
        "a maximum execution time (Kueue deactivates the workload when it runs out) is not implemented by "
        "Quotient", ("pod", "Job")),
    (K + "prebuilt-workload-name", "label"): _feature(
        "a prebuilt Workload: Quotient does not read Workload objects", ("pod", "Job")),
    (K + "prebuilt-workload-name", "annotation"): _feature(
        "a prebuilt Workload: Quotient does not read Workload objects", ("pod", "Job")),
    (K + "elastic-job", "annotation"): _feature(
        "an elastic Job (resized through Workload slices) is not implemented by Quotient", ("Job",), TRUE),
    (K + "safe-to-forcefully-delete", "annotation"): _feature(
        "Kueue's failure recovery (force-deleting the pod stuck on an unreachable node) is not implemented by "
        "Quotient", ("pod",), TRUE),
    # Written by Kueue's webhooks and controllers on what they manage, not by an admin.
    (K + "managed", "label"): Mark(KUEUE_WRITES, "Kueue's mark on the pods it manages"),
    (K + "podset", "label"): Mark(KUEUE_WRITES, "the pod set a pod belongs to"),
    (K + "pod-group-pod-index", "label"): Mark(KUEUE_WRITES, "a pod's index in its group"),
    (K + "workload", "annotation"): Mark(KUEUE_WRITES, "the admitted Workload's name", ("Job's pod template",)),
    (K + "workload-slice-name", "annotation"): Mark(KUEUE_WRITES, "the first Workload of a slice chain"),
    (K + "pod-index-offset", "annotation"): Mark(KUEUE_WRITES, "a pod's index offset in its replica"),
    (K + "pod-suspending-parent", "annotation"): Mark(KUEUE_WRITES, "the parent that suspends the pod"),
    (K + "role-hash", "annotation"): Mark(KUEUE_WRITES, "the hash of a group member's role"),
    (K + "stopping", "annotation"): Mark(KUEUE_WRITES, "Kueue is stopping the Job", ("Job",)),
    (K + "job-uid", "label"): Mark(KUEUE_WRITES, "the Job a Workload belongs to", ("Workload",)),
    (K + "multikueue-origin", "label"): Mark(KUEUE_WRITES, "MultiKueue's origin cluster", ("Job",)),
    ("provreq.kueue.x-k8s.io/*", "annotation"): Mark(
        HONOURED, "no effect: only a ProvisioningRequest admission check reads it, and a ClusterQueue with "
        "admission checks is inactive", ("pod", "Job")),
}


def refused_marks(labels: dict[str, str], annotations: dict[str, str], on: str) -> tuple[str, str] | None:
    """(rule, reason) for the first Kueue label or annotation an object (on: "pod" or "Job") carries that Quotient
    refuses (or honours by refusing: admission-gated-by) with a value that acts in Kueue; None when it carries
    none. TOPOLOGY_RULE first: the one a pod most often meets."""
    found = []
    for (key, where), mark in MARKS.items():
        if not mark.rule or on not in mark.on:
            continue
        value = (labels if where == "label" else annotations).get(key)
        if value is None or (mark.acts is not None and value.strip().lower() not in mark.acts):
            continue
        if where == "annotation" and labels.get(key) == value:
            continue            # repeats its label, which Quotient reads: it acts as the label does
        found.append((mark.rule != TOPOLOGY_RULE, key, where, value, mark))
    if not found:
        return None
    _, key, where, value, mark = min(found, key=lambda f: f[:2])
    if mark.rule == GATED_RULE:
        return mark.rule, (f"{on} {where} {key}={value!r}: admission is gated by {value}; like Kueue, Quotient "
                           "admits nothing until the annotation is removed")
    return mark.rule, (f"{on} {where} {key}={value!r} is not supported: {mark.says}; remove it, or let Kueue "
                       "serve this workload")


def refused_claims(spec: dict) -> tuple[str, str] | None:
    """(DRA_RULE, reason) for a pod that claims devices (spec.resourceClaims), as Kueue's
    KueueDRARejectWorkloadsWhenDRADisabled does (pkg/controller/core/workload_controller.go)."""
    claims = spec.get("resourceClaims")
    if isinstance(claims, list) and claims:
        names = ", ".join(str(c.get("name")) for c in claims if isinstance(c, dict))
        return DRA_RULE, f"spec.resourceClaims ({names}): {DRA_WHY}"
    return None


def table() -> str:
    """README.md's table ("Kueue's API, field by field"), from the lists above: tests/test_field_coverage.py checks
    README holds it as rendered here."""
    rows = ["| Kind | Field, label or annotation | Quotient | What it does, or the reason an admin sees |",
            "|---|---|---|---|"]
    for kind, fields in FIELDS.items():
        for path, entry in fields.items():
            inactive = ": ClusterQueue inactive" if entry.verdict == REFUSED and kind != "Topology" else ""
            rows.append(f"| {kind} | `{path}` | {entry.verdict}{inactive} | {entry.says} |")
    for (key, where), mark in MARKS.items():
        when = f" when {' or '.join(repr(v) for v in sorted(mark.acts))}" if mark.acts and mark.rule else ""
        rule = f": rule {mark.rule}{when}" if mark.rule else ""
        rows.append(f"| {', '.join(mark.on)} {where} | `{key}` | {mark.verdict}{rule} | {mark.says} |")
    return "\n".join(rows) + "\n"
