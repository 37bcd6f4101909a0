"""The kinds the reflectors list and watch, and where the API server serves each of them.

One Resource per kind, in the order the first bulk pass applies them: what pods refer to comes first. The
Kueue kinds' version is the one API discovery names (sync.discovery); the rest are fixed.
"""
from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Resource:
    kind: str
    group: str          # "" for the core API
    version: str
    plural: str
    namespaced: bool
    optional: bool = False      # a CRD that may not be installed: 404 means "none"

    @property
    def api_version(self) -> str:
        return f"{self.group}/{self.version}" if self.group else self.version

    @property
    def path(self) -> str:
        """The all-namespaces collection."""
        return f"/api/{self.version}/{self.plural}" if not self.group else \
            f"/apis/{self.group}/{self.version}/{self.plural}"

    def object_path(self, key: str) -> str:
        """One object, by its key ("namespace/name" or "name")."""
        base = f"/api/{self.version}" if not self.group else f"/apis/{self.group}/{self.version}"
        ns, _, name = key.rpartition("/")
        return f"{base}/namespaces/{ns}/{self.plural}/{name}" if ns else f"{base}/{self.plural}/{name}"


KUEUE = "kueue.x-k8s.io"
# Applied in this order in the bulk pass: what pods refer to comes first.
RESOURCES = (
    Resource("Namespace", "", "v1", "namespaces", False),
    Resource("Node", "", "v1", "nodes", False),
    Resource("PriorityClass", "scheduling.k8s.io", "v1", "priorityclasses", False),
    Resource("WorkloadPriorityClass", KUEUE, "v1beta1", "workloadpriorityclasses", False, optional=True),
    Resource("Topology", KUEUE, "v1beta1", "topologies", False, optional=True),
    Resource("ResourceFlavor", KUEUE, "v1beta1", "resourceflavors", False, optional=True),
    Resource("Cohort", KUEUE, "v1beta1", "cohorts", False, optional=True),
    Resource("ClusterQueue", KUEUE, "v1beta1", "clusterqueues", False, optional=True),
    Resource("LocalQueue", KUEUE, "v1beta1", "localqueues", True, optional=True),
    Resource("PodDisruptionBudget", "policy", "v1", "poddisruptionbudgets", True),
    Resource("PodGroup", "scheduling.x-k8s.io", "v1alpha1", "podgroups", True, optional=True),
    Resource("Job", "batch", "v1", "jobs", True),
    Resource("Pod", "", "v1", "pods", True),
)
