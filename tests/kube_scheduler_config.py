"""A strict decoder of kubescheduler.config.k8s.io/v1 KubeSchedulerConfiguration, as kube-scheduler decodes its
--config file: every key must be a field of the v1 types (k8s.io/kube-scheduler/config/v1 types.go and
types_pluginargs.go; LeaderElection, ClientConnection and Debugging from k8s.io/component-base/config/v1alpha1),
matched case-sensitively, once, with a value of the field's Go type. There is no Go toolchain here, so the types
are written down below, field by field; `decode` returns the problems (empty: kube-scheduler would load it).

Plugin args are decoded strictly for the plugin whose arguments the shipped files set (NodeResourcesFit); the
args of other in-tree plugins are only required to be objects, out-of-tree ones are skipped (as kube-scheduler
skips args it has no type for)."""
from __future__ import annotations

import base64
import re

import yaml

# Go types. A struct is a dict of json name -> type; [t] is a slice of t.
BOOL, STRING, INT32, INT64, FLOAT32, DURATION, BYTES, RAW = (
    "bool", "string", "int32", "int64", "float32", "metav1.Duration", "[]byte", "runtime.RawExtension")

PLUGIN = {"name": STRING, "weight": INT32}
PLUGIN_SET = {"enabled": [PLUGIN], "disabled": [PLUGIN]}
PLUGINS = {point: PLUGIN_SET for point in (
    "preEnqueue", "queueSort", "preFilter", "filter", "postFilter", "preScore", "score", "reserve", "permit",
    "preBind", "bind", "postBind", "multiPoint", "placementGenerate", "placementScore", "placementFeasible",
    "podGroupPostFilter")}
PLUGIN_CONFIG = {"name": STRING, "args": RAW}
PROFILE = {"schedulerName": STRING, "percentageOfNodesToScore": INT32, "percentageOfPlacementsToScore": INT32,
           "plugins": PLUGINS, "pluginConfig": [PLUGIN_CONFIG]}
EXTENDER_TLS = {"insecure": BOOL, "serverName": STRING, "certFile": STRING, "keyFile": STRING, "caFile": STRING,
                "certData": BYTES, "keyData": BYTES, "caData": BYTES}
EXTENDER = {"urlPrefix": STRING, "filterVerb": STRING, "preemptVerb": STRING, "prioritizeVerb": STRING,
            "weight": INT64, "bindVerb": STRING, "enableHTTPS": BOOL, "tlsConfig": EXTENDER_TLS,
            "httpTimeout": DURATION, "nodeCacheCapable": BOOL,
            "managedResources": [{"name": STRING, "ignoredByScheduler": BOOL}], "ignorable": BOOL}
# k8s.io/component-base/config/v1alpha1
LEADER_ELECTION = {"leaderElect": BOOL, "leaseDuration": DURATION, "renewDeadline": DURATION,
                   "retryPeriod": DURATION, "resourceLock": STRING, "resourceName": STRING,
                   "resourceNamespace": STRING}
CLIENT_CONNECTION = {"kubeconfig": STRING, "acceptContentTypes": STRING, "contentType": STRING,
                     "qps": FLOAT32, "burst": INT32}
DEBUGGING = {"enableProfiling": BOOL, "enableContentionProfiling": BOOL}
KUBE_SCHEDULER_CONFIGURATION = {
    "apiVersion": STRING, "kind": STRING,                 # metav1.TypeMeta
    "parallelism": INT32, "leaderElection": LEADER_ELECTION, "clientConnection": CLIENT_CONNECTION,
    **DEBUGGING,                                          # inlined (json:"")
    "percentageOfNodesToScore": INT32, "percentageOfPlacementsToScore": INT32,
    "podInitialBackoffSeconds": INT64, "podMaxBackoffSeconds": INT64,
    "profiles": [PROFILE], "extenders": [EXTENDER], "delayCacheUntilActive": BOOL}
# types_pluginargs.go: the args kube-scheduler decodes strictly, by plugin name + "Args".
RESOURCE_SPEC = {"name": STRING, "weight": INT64}
PLUGIN_ARGS = {
    "NodeResourcesFit": {
        "apiVersion": STRING, "kind": STRING,
        "ignoredResources": [STRING], "ignoredResourceGroups": [STRING],
        "scoringStrategy": {"type": STRING, "resources": [RESOURCE_SPEC],
                            "requestedToCapacityRatio": {"shape": [{"utilization": INT32, "score": INT32}]}}},
}
IN_TREE_PLUGINS = {
    "DefaultBinder", "DefaultPreemption", "DynamicResources", "ImageLocality", "InterPodAffinity", "NodeAffinity",
    "NodeName", "NodePorts", "NodeResourcesBalancedAllocation", "NodeResourcesFit", "NodeUnschedulable",
    "NodeVolumeLimits", "PodTopologySpread", "PrioritySort", "SchedulingGates", "TaintToleration",
    "VolumeBinding", "VolumeRestrictions", "VolumeZone", "NodeDeclaredFeatures", "GangScheduling"}

_DURATION = re.compile(r"[-+]?((\d+(\.\d*)?|\.\d+)(ns|us|µs|μs|ms|s|m|h))+|0")
_INT_RANGE = {INT32: (-2**31, 2**31 - 1), INT64: (-2**63, 2**63 - 1)}


def _decode(value, t, at: str) -> list[str]:
    if value is None:       # JSON null leaves a Go field at its zero value
        return []
    if isinstance(t, list):
        if not isinstance(value, list):
            return [f"{at}: {value!r} is not a list"]
        return [p for i, v in enumerate(value) for p in _decode(v, t[0], f"{at}[{i}]")]
    if isinstance(t, dict):
        if not isinstance(value, dict):
            return [f"{at}: {value!r} is not an object"]
        out = []
        for k, v in value.items():
            if k not in t:
                near = [f for f in t if f.lower() == str(k).lower()]
                out.append(f"{at}.{k}: unknown field" + (f" (the field is {near[0]!r})" if near else ""))
            else:
                out += _decode(v, t[k], f"{at}.{k}")
        return out
    if t == BOOL:
        return [] if isinstance(value, bool) else [f"{at}: {value!r} is not a bool"]
    if t == STRING:
        return [] if isinstance(value, str) else [f"{at}: {value!r} is not a string"]
    if t in _INT_RANGE:
        if not isinstance(value, int) or isinstance(value, bool):
            return [f"{at}: {value!r} is not an integer"]
        lo, hi = _INT_RANGE[t]
        return [] if lo <= value <= hi else [f"{at}: {value} is out of {t}'s range"]
    if t == FLOAT32:
        return [] if isinstance(value, (int, float)) and not isinstance(value, bool) else [f"{at}: {value!r} is not a number"]
    if t == DURATION:
        return [] if isinstance(value, str) and _DURATION.fullmatch(value) else [f"{at}: {value!r} is not a duration"]
    if t == BYTES:
        try:
            base64.b64decode(value, validate=True)
            return []
        except Exception:
            return [f"{at}: {value!r} is not base64"]
    if t == RAW:
        return [] if isinstance(value, dict) else [f"{at}: {value!r} is not an object"]
    raise AssertionError(t)


class _UniqueKeyLoader(yaml.SafeLoader):
    """YAML that refuses a key given twice in one mapping (kube-scheduler's strict decoding does)."""


def _no_duplicates(loader, node, deep=False):
    keys = [loader.construct_object(k, deep=deep) for k, _ in node.value]
    twice = sorted({str(k) for k in keys if keys.count(k) > 1})
    if twice:
        raise yaml.constructor.ConstructorError(None, None, f"duplicate field(s) {', '.join(twice)}", node.start_mark)
    return yaml.SafeLoader.construct_mapping(loader, node, deep)


_UniqueKeyLoader.add_constructor(yaml.resolver.BaseResolver.DEFAULT_MAPPING_TAG,
                                 lambda loader, node: dict(_no_duplicates(loader, node, deep=True)))


def load(text: str) -> dict:
    """The document of a --config file, refusing duplicate keys."""
    return yaml.load(text, Loader=_UniqueKeyLoader)


def decode(cfg) -> list[str]:
    """Problems kube-scheduler's strict decoding (and its validation of the extender and plugin args the
    shipped files use) would report; empty when it loads."""
    if isinstance(cfg, str):
        try:
            cfg = load(cfg)
        except yaml.YAMLError as e:
            return [str(e).splitlines()[0]]
    if not isinstance(cfg, dict):
        return ["not an object"]
    out = []
    if (cfg.get("apiVersion"), cfg.get("kind")) != ("kubescheduler.config.k8s.io/v1", "KubeSchedulerConfiguration"):
        out.append(f"apiVersion/kind {cfg.get('apiVersion')}/{cfg.get('kind')} is not "
                   "kubescheduler.config.k8s.io/v1 KubeSchedulerConfiguration")
    out += _decode(cfg, KUBE_SCHEDULER_CONFIGURATION, "")
    for i, profile in enumerate(cfg.get("profiles") or []):
        if isinstance(profile, dict):
            for j, plugin in enumerate(profile.get("pluginConfig") or []):
                name = plugin.get("name") if isinstance(plugin, dict) else None
                if name in PLUGIN_ARGS:
                    out += _decode(plugin.get("args") or {}, PLUGIN_ARGS[name],
                                   f".profiles[{i}].pluginConfig[{j}].args")
    # ValidateKubeSchedulerConfiguration's rules for what the shipped files set.
    for i, ext in enumerate(cfg.get("extenders") or []):
        if not isinstance(ext, dict):
            continue
        if not ext.get("urlPrefix"):
            out.append(f".extenders[{i}].urlPrefix: required")
        if ext.get("prioritizeVerb") and not (isinstance(ext.get("weight"), int) and ext["weight"] > 0):
            out.append(f".extenders[{i}].weight: must be positive with a prioritizeVerb")
    if sum(1 for e in cfg.get("extenders") or [] if isinstance(e, dict) and e.get("bindVerb")) > 1:
        out.append(".extenders: only one extender can implement bind")
    pct = cfg.get("percentageOfNodesToScore")
    if isinstance(pct, int) and not 0 <= pct <= 100:
        out.append(".percentageOfNodesToScore: not within 0..100")
    return out
