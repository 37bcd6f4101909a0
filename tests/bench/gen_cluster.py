"""Generate a large, deterministic cluster snapshot for benchmarks (plain dicts).

Defaults: 5,000 nodes (80% instance-type=on-demand, 20% spot, three zones;
64 CPU / 256Gi / 110 pods each), ResourceFlavors on-demand and spot (nodeLabels
only), 10 Cohorts, 100 ClusterQueues (10 per cohort, namespaceSelector {}, one
resource group cpu/memory/pods over on-demand then spot), 100 namespaces with
one LocalQueue each, and 50,000 running pods (cpu 500m, memory 1Gi) spread
evenly over the queues, split over the flavors like the nodes and placed
round-robin on the nodes of their flavor. Each ClusterQueue's nominal quota is
its own usage times `slack` (rounded up), so every cohort's total exceeds what
runs in it; queues named in `generous` get `generous_factor` times that.

    python tests/bench/gen_cluster.py OUT [--format yaml|json] [--nodes N] [--pods N] ...

JSON is written as a v1 List with orjson; YAML as a multi-document stream.
"""
from __future__ import annotations

import argparse
import math
import random
import sys
import uuid
from dataclasses import dataclass
from datetime import datetime, timedelta, timezone

import orjson
import yaml

QUEUE_LABEL = "kueue.x-k8s.io/queue-name"
KUEUE = "kueue.x-k8s.io/v1beta1"
FLAVORS = ("on-demand", "spot")
ZONES = ("zone-a", "zone-b", "zone-c")
LOCAL_QUEUE = "user-queue"
POD_CPU_M = 500            # millicores per running pod
POD_MEMORY_GI = 1          # GiB per running pod
EPOCH = datetime(2025, 1, 1, tzinfo=timezone.utc)


@dataclass
class Params:
    nodes: int = 5000
    spot_fraction: float = 0.2
    cohorts: int = 10
    queues: int = 100           # ClusterQueues, spread evenly over cohorts; one namespace + LocalQueue each
    pods: int = 50000           # running pods
    slack: float = 1.25         # nominal quota = usage * slack
    generous: tuple[str, ...] = ()
    generous_factor: float = 100.0
    seed: int = 42
    node_cpu: int = 64
    node_memory_gi: int = 256
    node_pods: int = 110
    plain_queue: bool = False   # also ClusterQueue cq-plain: one flavor without nodeLabels (quota only)


def node_name(i: int) -> str:
    return f"node-{i:05d}"


def queue_name(i: int) -> str:
    return f"cq-{i:03d}"


def namespace_name(i: int) -> str:
    return f"ns-{i:03d}"


def cohort_name(i: int) -> str:
    return f"cohort-{i:02d}"


def node_flavor(i: int, p: Params) -> str:
    """Spot for an evenly spread spot_fraction of the nodes (every 5th node at 20%)."""
    if p.spot_fraction <= 0:
        return "on-demand"
    period = max(1, round(1 / p.spot_fraction))
    return "spot" if i % period == period - 1 else "on-demand"


def _uid(rng: random.Random) -> str:
    return str(uuid.UUID(int=rng.getrandbits(128), version=4))


def _time(seconds: float) -> str:
    return (EPOCH + timedelta(seconds=seconds)).strftime("%Y-%m-%dT%H:%M:%SZ")


def make_node(i: int, p: Params) -> dict:
    name = node_name(i)
    return {
        "apiVersion": "v1", "kind": "Node",
        "metadata": {"name": name, "labels": {
            "instance-type": node_flavor(i, p),
            "topology.kubernetes.io/zone": ZONES[i % len(ZONES)],
            "kubernetes.io/hostname": name,
        }},
        "status": {"allocatable": {"cpu": str(p.node_cpu), "memory": f"{p.node_memory_gi}Gi",
                                   "pods": str(p.node_pods)}},
    }


def make_pod(name: str, namespace: str, uid: str, created: str, node: str | None,
             cpu: str = f"{POD_CPU_M}m", memory: str = f"{POD_MEMORY_GI}Gi", queue: str = LOCAL_QUEUE) -> dict:
    """A Pod object as the API server returns it (trimmed); node None = pending."""
    spec = {
        "containers": [{"name": "main", "image": "registry.k8s.io/pause:3.10",
                        "resources": {"requests": {"cpu": cpu, "memory": memory}}}],
        "restartPolicy": "Never",
        "schedulerName": "default-scheduler",
        "priority": 0,
    }
    if node:
        spec["nodeName"] = node
    return {
        "apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": name, "namespace": namespace, "uid": uid, "creationTimestamp": created,
                     "labels": {QUEUE_LABEL: queue, "app": "bench"}},
        "spec": spec,
        "status": {"phase": "Running" if node else "Pending"},
    }


def pod_layout(p: Params) -> list[tuple[int, str]]:
    """(queue index, flavor) of every running pod, in creation order.

    Pods go round-robin over the queues; within each queue, the flavor split
    follows the node split, so every flavor's nodes carry the same load."""
    layout = []
    counts = [0] * p.queues
    period = max(1, round(1 / p.spot_fraction)) if p.spot_fraction > 0 else 0
    for k in range(p.pods):
        q = k % p.queues
        n = counts[q]
        counts[q] += 1
        flavor = "spot" if period and n % period == period - 1 else "on-demand"
        layout.append((q, flavor))
    return layout


def pods_per_queue(p: Params) -> dict[str, dict[str, int]]:
    """ClusterQueue name -> flavor -> running pods charged to it (pod_layout counted)."""
    used: dict[str, dict[str, int]] = {}
    for q, flavor in pod_layout(p):
        counts = used.setdefault(queue_name(q), dict.fromkeys(FLAVORS, 0))
        counts[flavor] += 1
    return used


def _cpu(millis: int) -> str:
    return str(millis // 1000) if millis % 1000 == 0 else f"{millis}m"


def generate(p: Params | None = None, **overrides) -> list[dict]:
    """Every object of the snapshot, as plain dicts, in an order a snapshot may be applied in."""
    p = p or Params()
    for k, v in overrides.items():
        setattr(p, k, v)
    rng = random.Random(p.seed)
    docs: list[dict] = []
    nodes = [make_node(i, p) for i in range(p.nodes)]
    by_flavor: dict[str, list[str]] = {f: [] for f in FLAVORS}
    for i, n in enumerate(nodes):
        by_flavor[node_flavor(i, p)].append(n["metadata"]["name"])
    layout = pod_layout(p)
    if p.pods and any(not by_flavor[f] for _, f in layout):
        raise ValueError("a flavor with running pods has no nodes; raise nodes or spot_fraction")

    # Quota: each queue's usage per flavor, times slack (generous queues: times generous_factor more).
    used: list[dict[str, int]] = [{f: 0 for f in FLAVORS} for _ in range(p.queues)]
    for q, f in layout:
        used[q][f] += 1
    for i in range(p.queues):
        docs.append({"apiVersion": "v1", "kind": "Namespace",
                     "metadata": {"name": namespace_name(i), "labels": {"team": f"team-{i:03d}",
                                                                         "cohort": cohort_name(i % p.cohorts)}}})
    for f in FLAVORS:
        docs.append({"apiVersion": KUEUE, "kind": "ResourceFlavor", "metadata": {"name": f},
                     "spec": {"nodeLabels": {"instance-type": f}}})
    for c in range(p.cohorts):
        docs.append({"apiVersion": KUEUE, "kind": "Cohort", "metadata": {"name": cohort_name(c)}, "spec": {}})
    per_cohort = math.ceil(p.queues / p.cohorts)
    for i in range(p.queues):
        factor = p.slack * (p.generous_factor if queue_name(i) in p.generous else 1.0)
        flavors = []
        for f in FLAVORS:
            # at least one pod's worth, so an empty queue can still admit
            pods = max(1, math.ceil(used[i][f] * factor))
            flavors.append({"name": f, "resources": [
                {"name": "cpu", "nominalQuota": _cpu(pods * POD_CPU_M)},
                {"name": "memory", "nominalQuota": f"{pods * POD_MEMORY_GI}Gi"},
                {"name": "pods", "nominalQuota": pods},
            ]})
        docs.append({"apiVersion": KUEUE, "kind": "ClusterQueue", "metadata": {"name": queue_name(i)},
                     "spec": {"cohort": cohort_name(i // per_cohort), "namespaceSelector": {},
                              "queueingStrategy": "BestEffortFIFO",
                              "resourceGroups": [{"coveredResources": ["cpu", "memory", "pods"],
                                                  "flavors": flavors}]}})
        docs.append({"apiVersion": KUEUE, "kind": "LocalQueue",
                     "metadata": {"name": LOCAL_QUEUE, "namespace": namespace_name(i)},
                     "spec": {"clusterQueue": queue_name(i)}})
    if p.plain_queue:
        docs += plain_queue_docs(p)
    docs.extend(nodes)
    cursor = {f: 0 for f in FLAVORS}
    for k, (q, f) in enumerate(layout):
        names = by_flavor[f]
        node = names[cursor[f] % len(names)]
        cursor[f] += 1
        docs.append(make_pod(f"job-{k:06d}", namespace_name(q), _uid(rng), _time(k * 0.5), node))
    return docs


PLAIN = "plain"


def plain_queue_docs(p: Params) -> list[dict]:
    """ClusterQueue cq-plain (namespace ns-plain): a flavor with no nodeLabels, so filter restricts no node."""
    return [
        {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": f"ns-{PLAIN}"}},
        {"apiVersion": KUEUE, "kind": "ResourceFlavor", "metadata": {"name": "default-flavor"}},
        {"apiVersion": KUEUE, "kind": "ClusterQueue", "metadata": {"name": f"cq-{PLAIN}"},
         "spec": {"namespaceSelector": {}, "resourceGroups": [{
             "coveredResources": ["cpu", "memory", "pods"],
             "flavors": [{"name": "default-flavor", "resources": [
                 {"name": "cpu", "nominalQuota": p.nodes * p.node_cpu},
                 {"name": "memory", "nominalQuota": f"{p.nodes * p.node_memory_gi}Gi"},
                 {"name": "pods", "nominalQuota": p.nodes * p.node_pods}]}]}]}},
        {"apiVersion": KUEUE, "kind": "LocalQueue", "metadata": {"name": LOCAL_QUEUE, "namespace": f"ns-{PLAIN}"},
         "spec": {"clusterQueue": f"cq-{PLAIN}"}},
    ]


def cluster_totals(docs: list[dict]) -> dict:
    """Counts by kind, for checks and printing."""
    counts: dict[str, int] = {}
    for d in docs:
        counts[d["kind"]] = counts.get(d["kind"], 0) + 1
    return counts


def write(docs: list[dict], path: str, fmt: str | None = None) -> str:
    """Write docs as YAML (multi-document) or JSON (v1 List); fmt defaults from the extension."""
    fmt = fmt or ("json" if path.lower().endswith(".json") else "yaml")
    if fmt == "json":
        with open(path, "wb") as f:
            f.write(orjson.dumps({"apiVersion": "v1", "kind": "List", "metadata": {}, "items": docs}))
    elif fmt == "yaml":
        dumper = getattr(yaml, "CSafeDumper", yaml.SafeDumper)
        with open(path, "w") as f:
            f.write("# Generated by tests/bench/gen_cluster.py: a synthetic cluster for benchmarks.\n")
            yaml.dump_all(docs, f, Dumper=dumper, sort_keys=False, default_flow_style=False, width=1000)
    else:
        raise ValueError(f"unknown format {fmt!r} (yaml or json)")
    return path


def main(argv: list[str] | None = None) -> int:
    d = Params()
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("out")
    ap.add_argument("--format", choices=("yaml", "json"), default=None,
                    help="default: from the file extension (.json = json, else yaml)")
    ap.add_argument("--nodes", type=int, default=d.nodes)
    ap.add_argument("--pods", type=int, default=d.pods)
    ap.add_argument("--queues", type=int, default=d.queues)
    ap.add_argument("--cohorts", type=int, default=d.cohorts)
    ap.add_argument("--spot-fraction", type=float, default=d.spot_fraction)
    ap.add_argument("--slack", type=float, default=d.slack)
    ap.add_argument("--generous", action="append", default=[], help="ClusterQueue given far more quota")
    ap.add_argument("--seed", type=int, default=d.seed)
    a = ap.parse_args(argv)
    docs = generate(Params(nodes=a.nodes, pods=a.pods, queues=a.queues, cohorts=a.cohorts,
                           spot_fraction=a.spot_fraction, slack=a.slack, generous=tuple(a.generous),
                           seed=a.seed))
    write(docs, a.out, a.format)
    print(f"{a.out}: " + ", ".join(f"{n} {k}" for k, n in cluster_totals(docs).items()), file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
