"""The bindings Quotient makes: committed (charged under the quota invariant), undone when their write fails,
and the assume cache: a binding Quotient made outranks, for ASSUMED_TTL, the watch events that do not show it
yet (kube-scheduler's assume cache), and the newest such event is kept should the binding fail or never show."""
from __future__ import annotations

from dataclasses import replace
from typing import Callable

from ..core.flavors import Charge
from ..objects.pod import PodInfo

ASSUMED_TTL = 60.0      # seconds a binding Quotient made outranks watch events that do not show it yet


class Bindings:
    def __init__(self, timer: Callable[[], float], skip: Callable[[str], None], cluster):
        self.timer, self.skip = timer, skip
        self.cluster = cluster                            # ClusterState: a binding is applied as an event
        self.assumed: dict[str, float] = {}               # uid -> when (timer) Quotient bound it, until the API shows it
        self.held_back: dict[str, PodInfo] = {}           # uid -> the newest unbinding event ignored meanwhile

    def commit(self, uid: str, node: str, charge: Charge | None) -> str:
        """Record a binding Quotient made: the pod runs on node and its quota is charged. Every charge
        Quotient makes passes here, so here the quota invariant is enforced: a charge that would take
        a ClusterQueue or Cohort above its quota is refused (its reason returned, counted), and nothing
        changes (ledger.charge_binding)."""
        state = self.cluster
        if charge is not None:
            over = state.ledger.charge_binding(uid, charge)
            if over:
                return over
        state.workloads.drop_reservation(uid)   # after the charge: a Job's pod holds its quota throughout (sync_job)
        state.workloads.release_hold(uid)
        self.assumed[uid] = self.timer()
        state.upsert_pod(replace(state.pods[uid], node_name=node), force=True)
        return ""

    def undo(self, uid: str, node: str) -> bool:
        """Take back a binding to node whose write failed: the pod is pending again, its quota free,
        as the API last showed it. If the watch has spoken since (the pod bound after all, bound
        elsewhere, or deleted), its word stands and nothing is undone (False)."""
        if self.assumed.pop(uid, None) is None:
            return False
        latest = self.held_back.pop(uid, None)
        pod = self.cluster.pods.get(uid)
        if pod is None or pod.node_name != node:
            return False
        self.cluster.upsert_pod(latest or replace(pod, node_name=""), force=True)
        return True

    def stale(self, old: PodInfo, pod: PodInfo, bulk: bool) -> str:
        """Why an event for a known pod must not be applied ("" when it may): it would move the pod
        backwards, unbinding a pod Quotient bound before the API has shown that binding (an event
        written before the bind, delivered after it, as kube-scheduler's assume cache guards against),
        or it is a watch event no newer (resourceVersion) than what is known and unbinds a bound pod.
        A list (a bulk pass) is the API's whole word at one moment: it is believed whatever its
        resourceVersions say (an API server restored from a backup goes back to older ones), and the
        watch events after it are judged against the versions it listed."""
        if not old.node_name or pod.node_name == old.node_name or pod.terminal or pod.deleting:
            return ""
        if not bulk and old.resource_version.isdigit() and pod.resource_version.isdigit() \
                and int(pod.resource_version) <= int(old.resource_version):
            return "pod event older (resourceVersion) than the known state ignored"
        since = self.assumed.get(pod.uid)
        if since is not None and not pod.node_name:
            if self.timer() - since < ASSUMED_TTL:
                self.held_back[pod.uid] = pod      # the API's newest word, should the binding fail
                return "pod event older than Quotient's own binding ignored"
            self.confirmed(pod.uid)
            self.skip(f"binding not confirmed by the API within {ASSUMED_TTL:.0f}s: the API's state is taken")
        return ""

    def expire_assumed(self) -> int:
        """Take the API's word for the bindings it has not shown within ASSUMED_TTL when it sent an unbinding
        event meanwhile (held back): the newest such event is applied now, as stale would apply the next one. A pod
        the API shows unbound (its Binding lost, or undone by a restored API server) would otherwise stay charged
        until some later event of it came, and a pending pod may get none. Returns how many."""
        late = [uid for uid in self.past_guard() if uid in self.held_back]
        for uid in late:
            latest = self.held_back[uid]
            self.confirmed(uid)
            self.skip(f"binding not confirmed by the API within {ASSUMED_TTL:.0f}s: the API's state is taken")
            pod = self.cluster.pods.get(uid)
            if pod is None or not pod.node_name or pod.terminal or pod.deleting:
                continue        # the API has spoken since (finished, deleted, unbound): its newer word stands
            # Forced, as undo is: stale judged it when it came. A relist after a restore shows the pod pending at
            # the very version the binding was decided on, which the state still carries; judged again by
            # version, it would be dropped as no newer and the pod stay bound here for good, nothing assumed.
            self.cluster.upsert_pod(latest, force=True)
        return len(late)

    def past_guard(self) -> list[str]:
        """The bindings Quotient made that the API has not shown within ASSUMED_TTL."""
        now = self.timer()
        return [uid for uid, since in self.assumed.items() if now - since >= ASSUMED_TTL]

    def confirmed(self, uid: str) -> None:
        """The API has spoken about a pod Quotient assumed bound: its word stands from now on."""
        self.assumed.pop(uid, None)
        self.held_back.pop(uid, None)
