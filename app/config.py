"""Quotient's Configuration: its own (quotient.dev/v1alpha1, strict: an unknown field is an error), or a Kueue
Configuration pasted as it is (config.kueue.x-k8s.io v1beta1 or v1beta2), of which Quotient reads what it
uses, under that version's names and defaults: waitForPodsReady, fairSharing, resources.excludeResourcePrefixes and
integrations.frameworks (apis/config/v1beta1 and v1beta2, configuration_types.go and defaults.go)."""
from __future__ import annotations

import logging
from dataclasses import dataclass, field

import yaml

from .objects.meta import parse_duration

API_VERSION = "quotient.dev/v1alpha1"
KUEUE_CONFIG_GROUP = "config.kueue.x-k8s.io"
KUEUE_CONFIG_VERSIONS = ("v1beta1", "v1beta2")
# The parts of a Kueue Configuration Quotient reads; the rest (the controller manager's) it leaves, logged.
# manageJobsWithoutQueueName is left too: Kueue scopes it by managedJobsNamespaceSelector and each integration,
# which Quotient does not have (its own Configuration's field applies to every pod of its profile).
KUEUE_CONFIG_READ = ("resources", "waitForPodsReady", "fairSharing", "integrations")
# Kueue's integrations.frameworks that Quotient implements: "pod", Kueue's plain-pod integration, whose pods the
# mutating webhook POST /mutate-pods gates with kueue.x-k8s.io/admission until their quota admits them
# (app/api/pod_gate.py). Job pods stay on the extender path whatever the list says; Kueue's other frameworks
# (batch/job, jobset.x-k8s.io/jobset, kubeflow.org/..., ray.io/...) are kept and logged as unused.
POD_FRAMEWORK = "pod"
FRAMEWORKS = (POD_FRAMEWORK,)
STRATEGIES = ("LessThanOrEqualToFinalShare", "LessThanInitialShare")     # Kueue's preemptionStrategies


class ConfigError(ValueError):
    """A Configuration that cannot be used, with the field that is wrong."""


# Roles a client certificate can have on the main port (app/api/identity.py says what each may call).
ROLES = ("scheduler", "viewer", "admin", "metrics")


@dataclass(frozen=True, slots=True)
class ClientIdentity:
    """One clientIdentities entry: a certificate whose subject has this CN (when given) and this O among its
    organizations (when given) gets `role`."""
    role: str
    common_name: str = ""
    organization: str = ""


# Without clientIdentities: one certificate per caller, named as deploy/certs.sh and cert-manager issue them.
DEFAULT_CLIENT_IDENTITIES = (ClientIdentity("scheduler", "quotient-scheduler"), ClientIdentity("admin", "quotient-admin"),
                             ClientIdentity("viewer", "quotient-viewer"), ClientIdentity("metrics", "quotient-metrics"))


@dataclass(slots=True)
class WaitForPodsReady:
    """Kueue's waitForPodsReady, with its field names and defaults (seed 003)."""
    timeout: float = 300.0
    recovery_timeout: float | None = None
    block_admission: bool = False
    timestamp: str = "Eviction"              # requeuingStrategy.timestamp: Eviction | Creation
    backoff_limit_count: int | None = None
    backoff_base_seconds: int = 60
    backoff_max_seconds: int = 3600

    def backoff(self, requeues: int) -> float:
        """Seconds before the n-th requeue: 60, 120, 240, ... capped at backoffMaxSeconds."""
        return float(min(self.backoff_base_seconds * 2 ** max(0, requeues - 1), self.backoff_max_seconds))


@dataclass(slots=True)
class Configuration:
    # Prefix of the verb paths: "/scheduler" serves /scheduler/filter etc.
    path_prefix: str = ""
    # Kueue's name: when true, a pod without the queue-name label is refused instead of passed.
    manage_jobs_without_queue_name: bool = False
    # How long quota held by a pod that passed filter waits for its bind.
    reservation_timeout: float = 30.0
    # Kueue's resources.excludeResourcePrefixes: requests that quota ignores.
    exclude_resource_prefixes: tuple[str, ...] = ()
    # How often decisions nobody asks for (HoldAndDrain evictions) are made.
    reconcile_interval: float = 5.0
    # A pending pod known only from kube-scheduler's requests is forgotten when not asked about this long.
    learned_pod_timeout: float = 600.0
    # How long a pod whose batch/v1 Job is not (yet) on the API waits for it, from when its Job's first pod was
    # seen, before it is judged by the pod rules (state.cluster: the Job and Pod watches are not ordered).
    job_wait_timeout: float = 5.0
    # A watch that shows neither an event nor a bookmark this long is stale: relisted, /readyz 503, no admission.
    watch_stall_timeout: float = 120.0
    # Most pending pods ahead of one pod that a StrictFIFO check walks (bounds filter latency).
    max_queue_scan: int = 200
    # preemption.mode (the ACK scheduler's policies): Quota, Priority, Auto (Quota for pods in a queue,
    # Priority for the others) or None.
    preemption_mode: str = "Auto"
    # preemption.guaranteeProtection (YuniKorn's law 2): a victim's ClusterQueue may not drop below nominal.
    guarantee_protection: bool = False
    # preemption.holdTimeout: how long quota and node room freed by a preemption wait for the preemptor.
    preemption_hold_timeout: float = 60.0
    # Kueue's fairSharing.enable and preemptionStrategies.
    fair_sharing: bool = False
    preemption_strategies: tuple[str, ...] = STRATEGIES
    # Kueue's waitForPodsReady: None when off.
    wait_for_pods_ready: "WaitForPodsReady | None" = None
    # Who may call what on the main port when it verifies client certificates (--tls-client-ca).
    client_identities: tuple[ClientIdentity, ...] = DEFAULT_CLIENT_IDENTITIES
    # Kueue's integrations.frameworks, as listed (Kueue's names).
    frameworks: tuple[str, ...] = ()
    raw: dict = field(default_factory=dict)
    # A Kueue Configuration's fields, and integrations.frameworks of either kind, that Quotient does not use
    # (logged at start, so nothing is silently lost).
    unused: tuple[str, ...] = ()

    @property
    def gate_pods(self) -> bool:
        """integrations.frameworks lists "pod": POST /mutate-pods gates plain pods with a queue label at CREATE."""
        return POD_FRAMEWORK in self.frameworks

    def excluded(self, resource: str) -> bool:
        return any(resource.startswith(p) for p in self.exclude_resource_prefixes)


_KNOWN = {"apiVersion", "kind", "metadata", "pathPrefix", "manageJobsWithoutQueueName",
          "reservationTimeout", "resources", "maxQueueScan", "learnedPodTimeout", "reconcileInterval", "watchStallTimeout",
          "preemption", "fairSharing", "waitForPodsReady", "jobWaitTimeout", "clientIdentities", "integrations"}
PREEMPTION_MODES = ("Quota", "Priority", "Auto", "None")


def decode_configuration(doc: dict | None) -> Configuration:
    """Build a Configuration from its document; ConfigError names the bad field."""
    doc = doc or {}
    if not isinstance(doc, dict):
        raise ConfigError("Configuration must be a mapping")
    api = doc.get("apiVersion", API_VERSION)
    group, _, version = api.partition("/") if isinstance(api, str) else ("", "", "")
    if doc.get("kind", "Configuration") == "Configuration" and group == KUEUE_CONFIG_GROUP \
            and version in KUEUE_CONFIG_VERSIONS:
        return _kueue_configuration(doc, version)
    if api != API_VERSION or doc.get("kind", "Configuration") != "Configuration":
        raise ConfigError(f"expected apiVersion {API_VERSION} (or Kueue's {KUEUE_CONFIG_GROUP}/v1beta1 or "
                          f"v1beta2), kind Configuration")
    unknown = sorted(set(doc) - _KNOWN)
    if unknown:
        raise ConfigError(f"unknown field(s) {', '.join(unknown)} (known: {', '.join(sorted(_KNOWN))})")
    cfg = Configuration(raw=doc)
    prefix = doc.get("pathPrefix", "")
    if not isinstance(prefix, str) or (prefix and not prefix.startswith("/")):
        raise ConfigError("pathPrefix must be empty or start with '/'")
    cfg.path_prefix = prefix.rstrip("/")
    cfg.manage_jobs_without_queue_name = _flag(doc, "manageJobsWithoutQueueName", "manageJobsWithoutQueueName")
    cfg.reservation_timeout = _duration(doc, "reservationTimeout", "reservationTimeout", cfg.reservation_timeout)
    cfg.reconcile_interval = _duration(doc, "reconcileInterval", "reconcileInterval", cfg.reconcile_interval)
    cfg.learned_pod_timeout = _duration(doc, "learnedPodTimeout", "learnedPodTimeout", cfg.learned_pod_timeout)
    cfg.job_wait_timeout = _duration(doc, "jobWaitTimeout", "jobWaitTimeout", cfg.job_wait_timeout)
    cfg.watch_stall_timeout = _duration(doc, "watchStallTimeout", "watchStallTimeout", cfg.watch_stall_timeout)
    if cfg.watch_stall_timeout <= 0:
        raise ConfigError("watchStallTimeout must be positive: a watch silent this long is relisted")
    resources = doc.get("resources") or {}
    if not isinstance(resources, dict) or set(resources) - {"excludeResourcePrefixes"}:
        raise ConfigError("resources may only hold excludeResourcePrefixes")
    cfg.exclude_resource_prefixes = _prefixes(resources)
    _preemption(cfg, doc.get("preemption") or {})
    cfg.wait_for_pods_ready = _wait_for_pods_ready(doc.get("waitForPodsReady") or {})
    _fair_sharing(cfg, doc.get("fairSharing") or {})
    scan = doc.get("maxQueueScan", cfg.max_queue_scan)
    if not isinstance(scan, int) or isinstance(scan, bool) or scan < 1:
        raise ConfigError("maxQueueScan must be a positive integer")
    cfg.max_queue_scan = scan
    if "clientIdentities" in doc:
        cfg.client_identities = _client_identities(doc["clientIdentities"])
    integrations = doc.get("integrations") or {}
    if not isinstance(integrations, dict) or set(integrations) - {"frameworks"}:
        raise ConfigError("integrations may only hold frameworks")
    cfg.unused = _integrations(cfg, integrations)
    return cfg


def _integrations(cfg: Configuration, integrations: dict) -> tuple[str, ...]:
    """integrations.frameworks into cfg.frameworks; what Quotient leaves of them, for `unused`."""
    frameworks = integrations.get("frameworks")
    frameworks = [] if frameworks is None else frameworks
    if not isinstance(frameworks, list) or not all(isinstance(f, str) for f in frameworks):
        raise ConfigError("integrations.frameworks must be a list of strings (Kueue's framework names, "
                          f"such as {POD_FRAMEWORK!r} or 'batch/job')")
    cfg.frameworks = tuple(frameworks)
    return tuple(f"integrations.frameworks[{f}]" for f in frameworks if f not in FRAMEWORKS)


def _client_identities(raw: object) -> tuple[ClientIdentity, ...]:
    """clientIdentities: a list of {role, commonName, organization}, each naming a CN, an O or both."""
    if not isinstance(raw, list) or not raw:
        raise ConfigError("clientIdentities must be a non-empty list of {role, commonName, organization} (leave it "
                          "out for the default: CN quotient-scheduler, quotient-admin, quotient-viewer, "
                          "quotient-metrics to the role of that name)")
    found = []
    for i, entry in enumerate(raw):
        where = f"clientIdentities[{i}]"
        if not isinstance(entry, dict) or set(entry) - {"role", "commonName", "organization"}:
            raise ConfigError(f"{where} may hold role, commonName and organization")
        role = entry.get("role")
        if role not in ROLES:
            raise ConfigError(f"{where}.role {role!r} is not one of {', '.join(ROLES)}")
        cn, org = entry.get("commonName") or "", entry.get("organization") or ""
        if not isinstance(cn, str) or not isinstance(org, str):
            raise ConfigError(f"{where}: commonName and organization must be strings")
        if not cn and not org:
            raise ConfigError(f"{where} names neither a commonName nor an organization: it would give role {role} "
                              "to every certificate the client CA signs")
        found.append(ClientIdentity(role, cn, org))
    return tuple(found)


def _kueue_configuration(doc: dict, version: str) -> Configuration:
    """A Kueue Configuration: what Quotient uses from it, with that version's semantics; Quotient's own
    settings keep their defaults (they belong in a quotient.dev/v1alpha1 Configuration)."""
    cfg = Configuration(raw=doc)
    resources = doc.get("resources") or {}
    if not isinstance(resources, dict):
        raise ConfigError("resources must be a mapping")
    if resources.get("transformations"):
        raise ConfigError("resources.transformations: Quotient does not apply Kueue's resource transformations, "
                          "so it would charge other amounts than Kueue; remove them (or use Quotient's own "
                          "Configuration)")
    left = sorted(set(doc) - set(KUEUE_CONFIG_READ) - {"apiVersion", "kind", "metadata"})
    left += sorted(f"resources.{k}" for k in set(resources) - {"excludeResourcePrefixes", "transformations"})
    integrations = doc.get("integrations") or {}
    if not isinstance(integrations, dict):
        raise ConfigError(f"integrations must be a mapping{_where(version)}")
    left += sorted(f"integrations.{k}" for k in set(integrations) - {"frameworks"})
    left += _integrations(cfg, integrations)
    cfg.unused = tuple(sorted(left))
    cfg.exclude_resource_prefixes = _prefixes(resources)
    wait, fair = doc.get("waitForPodsReady"), doc.get("fairSharing")
    for section, raw in (("waitForPodsReady", wait), ("fairSharing", fair)):
        if raw is not None and not isinstance(raw, dict):
            raise ConfigError(f"{section} must be a mapping{_where(version)}")
    if version == "v1beta1":
        cfg.wait_for_pods_ready = _wait_for_pods_ready(wait or {}, version)
        _fair_sharing(cfg, fair or {}, version)
        return cfg
    # v1beta2: the section's presence turns the feature on; enable is gone (Kueue #7628, #7583)
    for section, raw in (("waitForPodsReady", wait), ("fairSharing", fair)):
        if isinstance(raw, dict) and "enable" in raw:
            raise ConfigError(f"{section}.enable is {KUEUE_CONFIG_GROUP}/v1beta1's; in v1beta2 the {section} "
                              "section's presence enables it (remove enable, or the section to disable it)")
    if wait is not None:
        if "timeout" not in wait:
            raise ConfigError("waitForPodsReady.timeout is required in v1beta2")
        cfg.wait_for_pods_ready = _wait_for_pods_ready(wait, version)
    if fair is not None:
        if "preemptionStrategies" not in fair:
            raise ConfigError("fairSharing.preemptionStrategies is required in v1beta2")
        _fair_sharing(cfg, fair, version)
    return cfg


def _where(version: str) -> str:
    """A Kueue Configuration's version, as errors name it ("" for Quotient's own)."""
    return f" ({KUEUE_CONFIG_GROUP}/{version})" if version else ""


def _prefixes(resources: dict) -> tuple[str, ...]:
    prefixes = resources.get("excludeResourcePrefixes") or []
    if not isinstance(prefixes, list) or not all(isinstance(p, str) for p in prefixes):
        raise ConfigError("resources.excludeResourcePrefixes must be a list of strings")
    return tuple(prefixes)


def _flag(raw: dict, key: str, where: str, default: bool = False) -> bool:
    """An optional boolean field (default when absent)."""
    value = raw.get(key, default)
    if not isinstance(value, bool):
        raise ConfigError(f"{where} must be true or false")
    return value


def _duration(raw: dict, key: str, where: str, default: float) -> float:
    """An optional duration field ("30s", "5m", or seconds); present but null or malformed is an error."""
    if key not in raw:
        return default
    try:
        return parse_duration(raw[key], where)
    except ValueError as e:
        raise ConfigError(str(e)) from None


def _preemption(cfg: Configuration, raw: object) -> None:
    if not isinstance(raw, dict) or set(raw) - {"mode", "guaranteeProtection", "holdTimeout"}:
        raise ConfigError("preemption may hold mode, guaranteeProtection and holdTimeout")
    mode = raw.get("mode", "Auto")
    if mode not in PREEMPTION_MODES:
        raise ConfigError(f"preemption.mode {mode!r} is not one of {', '.join(PREEMPTION_MODES)}")
    cfg.preemption_mode = mode
    cfg.guarantee_protection = _flag(raw, "guaranteeProtection", "preemption.guaranteeProtection")
    cfg.preemption_hold_timeout = _duration(raw, "holdTimeout", "preemption.holdTimeout", cfg.preemption_hold_timeout)


def _wait_for_pods_ready(raw: object, version: str = "") -> WaitForPodsReady | None:
    """Kueue's waitForPodsReady; version is a pasted Kueue Configuration's ("" for Quotient's own, which reads
    as v1beta1 but keeps blockAdmission false). v1beta1 turns it on with enable and defaults blockAdmission to
    true once enabled; v1beta2 turns it on by the section's presence (it has no enable) and defaults
    recoveryTimeout to timeout, "0s" turning it off."""
    v1beta2 = version == "v1beta2"
    known = {"timeout", "recoveryTimeout", "blockAdmission", "requeuingStrategy"} | (set() if v1beta2 else {"enable"})
    if not isinstance(raw, dict) or set(raw) - known:
        raise ConfigError(f"waitForPodsReady may hold {', '.join(sorted(known))}{_where(version)}")
    if not v1beta2 and not _flag(raw, "enable", "waitForPodsReady.enable"):
        return None
    w = WaitForPodsReady()
    w.timeout = _duration(raw, "timeout", "waitForPodsReady.timeout", w.timeout)
    if raw.get("recoveryTimeout") is not None:        # no default (seed 003): unset or null is off
        w.recovery_timeout = _duration(raw, "recoveryTimeout", "waitForPodsReady.recoveryTimeout", 0.0)
    elif v1beta2:
        w.recovery_timeout = w.timeout
    if v1beta2 and w.recovery_timeout == 0:
        w.recovery_timeout = None
    w.block_admission = _flag(raw, "blockAdmission", "waitForPodsReady.blockAdmission", version == "v1beta1")
    rq = raw.get("requeuingStrategy")
    rq = {} if rq is None else rq
    rq_known = {"timestamp", "backoffLimitCount", "backoffBaseSeconds", "backoffMaxSeconds"}
    if not isinstance(rq, dict) or set(rq) - rq_known:
        raise ConfigError(f"waitForPodsReady.requeuingStrategy may hold {', '.join(sorted(rq_known))}")
    w.timestamp = rq.get("timestamp", "Eviction")
    if w.timestamp not in ("Eviction", "Creation"):
        raise ConfigError("waitForPodsReady.requeuingStrategy.timestamp must be Eviction or Creation")
    for name, attr in (("backoffLimitCount", "backoff_limit_count"), ("backoffBaseSeconds", "backoff_base_seconds"),
                       ("backoffMaxSeconds", "backoff_max_seconds")):
        value = rq.get(name)
        if value is None:
            continue
        if not isinstance(value, int) or isinstance(value, bool) or value < 0:
            raise ConfigError(f"waitForPodsReady.requeuingStrategy.{name} must be a non-negative integer")
        setattr(w, attr, value)
    return w


def _fair_sharing(cfg: Configuration, raw: object, version: str = "") -> None:
    """Kueue's fairSharing: on with enable, or in a v1beta2 Kueue Configuration by the section's presence."""
    v1beta2 = version == "v1beta2"
    if not isinstance(raw, dict) or set(raw) - {"preemptionStrategies"} - (set() if v1beta2 else {"enable"}):
        shown = "preemptionStrategies" if v1beta2 else "enable and preemptionStrategies"
        raise ConfigError(f"fairSharing may hold {shown}{_where(version)}")
    cfg.fair_sharing = v1beta2 or _flag(raw, "enable", "fairSharing.enable")
    strategies = raw.get("preemptionStrategies", list(STRATEGIES))
    if not isinstance(strategies, list) or not strategies or any(s not in STRATEGIES for s in strategies):
        raise ConfigError(f"fairSharing.preemptionStrategies must list some of {', '.join(STRATEGIES)}")
    cfg.preemption_strategies = tuple(strategies)


def load_configuration(path: str | None) -> Configuration:
    """Read a Configuration file (YAML or JSON); no path gives the defaults."""
    if not path:
        return Configuration()
    try:
        with open(path, encoding="utf-8") as f:
            doc = yaml.load(f, Loader=yaml.CSafeLoader)
    except (OSError, yaml.YAMLError) as e:
        raise ConfigError(f"{path}: {e}") from None
    try:
        cfg = decode_configuration(doc)
    except ConfigError as e:
        raise ConfigError(f"{path}: {e}") from None
    log_unused(cfg, path)
    return cfg


def log_unused(cfg: Configuration, where: str) -> None:
    """Say which fields of a pasted Kueue Configuration (and which integrations.frameworks) Quotient leaves to
    Kueue."""
    if cfg.unused:
        kueue = "a Kueue Configuration; " if cfg.raw.get("apiVersion", API_VERSION) != API_VERSION else ""
        logging.getLogger("quotient.config").info("%s: %sQuotient does not use %s", where, kueue,
                                                  ", ".join(cfg.unused))
