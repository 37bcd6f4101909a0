"""The quota ledger: what is charged where, kept incrementally, and the quota invariant every binding passes.

The live quota tree (usage of the plans and of the pods really on nodes) and its mirror that decisions read
and simulate on; the charge of every pod holding quota (admitted) and of the victims on their way out (going);
what each node's pods request. A running pod's charge follows the API: charged to the ClusterQueue it names
now, at the size it has now, checked against the quota when the watch shows it grown or moved (overrun).
"""
from __future__ import annotations

import logging
import math
from collections import Counter
from dataclasses import replace
from typing import Callable

from ..config import Configuration
from ..core.drift import Overrun, usage_note
from ..core.flavors import Charge, quota_usage, running_flavors
from ..objects.quantity import format_quantity
from ..core.resource_node import QuotaNode, available
from ..core.resource_node import charge as charge_usage
from ..objects.kueue import ClusterQueue
from ..objects.node import NodeInfo
from ..objects.pod import PodInfo
from .admissions import Admissions, change_of
from .nodetable import NodeTable
from .store import Store
from .tree import QuotaTree, build_tree, mirror

log = logging.getLogger("quotient.state")
BOUND_HERE = "bind"      # Charge.admitted_from of a pod Quotient bound: its bind moment


class Ledger:
    def __init__(self, config: Configuration, store: Store, clock: Callable[[], float],
                 skip: Callable[[str], None]):
        self.config, self.store, self.clock, self.skip = config, store, clock, skip
        self.node_requested: dict[str, dict[str, int]] = {}
        self.node_pods: dict[str, set[str]] = {}          # node -> uids of pods bound there
        self.node_table = NodeTable()                      # the same amounts as numpy columns, for scoring
        self.membership_generation = 0                     # bumps when a flavor's node set may change
        self.tree = QuotaTree()                         # live usage: changed by charges only
        self._decisions = QuotaTree()                   # its mirror, that decisions read and simulate on
        self._unmirrored: set[str] = set()              # ClusterQueues whose live usage the mirror lacks
        self.flavor_nodes: dict[str, set[str] | None] = {}
        self.admitted = Admissions()
        self.going: set[str] = set()                      # victims of holds, out of the planning usage
        self.quota_refusals: Counter = Counter()          # ClusterQueue -> charges refused by the invariant
        self.overruns: dict[str, Overrun] = {}            # uid -> a bound pod's change that took its queue above quota
        self.overrun_counts: Counter = Counter()          # ClusterQueue -> such changes seen
        self.on_overrun: Callable[[Overrun], None] | None = None     # the scheduler journals each one

    # ---- the tree decisions read ----------------------------------------------
    def quota_node(self, cq_name: str) -> QuotaNode | None:
        """The ClusterQueue's node in the decisions' tree (quota_tree)."""
        if self._unmirrored:
            self._refresh()
        return self._decisions.queues.get(cq_name)

    def quota_tree(self) -> QuotaTree:
        """The quota tree decisions read: a mirror of the live one, brought up to date here, on which a
        decision may simulate charges and removals (core.overlay) without touching the live usage."""
        if self._unmirrored:
            self._refresh()
        return self._decisions

    def _refresh(self) -> None:
        """Copy into the mirror the live usage of the ClusterQueues charged since, and their Cohorts."""
        for name in self._unmirrored:
            live, twin = self.tree.queues.get(name), self._decisions.queues.get(name)
            while live is not None and twin is not None:
                twin.usage = dict(live.usage)
                live, twin = live.parent, twin.parent
        self._unmirrored.clear()

    def rebuild(self, going) -> dict[str, Charge]:
        """Build the tree and the flavors' node sets anew, uncharged: returns the charges it held (admitted), for
        charging again; `going`: the victims of the holds in force."""
        self.tree = build_tree(self.store.cluster_queues, self.store.cohorts, self.store.flavors,
                               self.store.topologies)
        self._decisions, self._unmirrored = mirror(self.tree), set(self.tree.queues)     # charged again after
        self.membership_generation += 1
        self.flavor_nodes.clear()
        for fname, flavor in self.store.flavors.items():
            if not flavor.node_labels:
                self.flavor_nodes[fname] = None
                continue
            self.flavor_nodes[fname] = {n.name for n in self.store.nodes.values() if self._selects(flavor, n.labels)}
        admitted = dict(self.admitted)
        self.admitted.clear()
        self.going.clear()
        self.going.update(going)
        return admitted

    # ---- nodes -----------------------------------------------------------
    def _selects(self, flavor, labels: dict[str, str]) -> bool:
        """The flavor's nodes: its nodeLabels, and, naming a Topology, every level's label too (Kueue's
        NodeMatchesFlavor: a TAS flavor's nodes are only those its Topology places on, for every workload)."""
        if not flavor.selects(labels):
            return False
        topology = self.store.topologies.get(flavor.topology_name) if flavor.topology_name else None
        return topology is None or all(level in labels for level in topology.levels)

    def node_in_flavor(self, node: str, flavor: str) -> bool:
        members = self.flavor_nodes.get(flavor)
        return members is None or node in members

    def node_free(self, node: str) -> dict[str, int]:
        info = self.store.nodes.get(node)
        if info is None:
            return {}
        used = self.node_requested.get(node, {})
        return {r: v - used.get(r, 0) for r, v in info.allocatable.items()}

    def node_changed(self, node: NodeInfo, old: NodeInfo | None) -> None:
        """A node stored anew: its row, the flavors whose node sets take or lose it, the charges read off its labels."""
        fresh = node.name not in self.node_table.index
        self.node_table.set_node(node.name, node.allocatable)
        if fresh:
            self.node_table.add_requested(node.name, self.node_requested.get(node.name, {}))
        self.node_requested.setdefault(node.name, {})
        for fname, flavor in self.store.flavors.items():
            members = self.flavor_nodes.get(fname)
            if members is None:
                continue
            if self._selects(flavor, node.labels):
                members.add(node.name)
            else:
                members.discard(node.name)
        if old is None or old.labels != node.labels:
            self.membership_generation += 1
            self._recharge_inferred(node.name)

    def _recharge_inferred(self, node: str) -> None:
        """Flavors read off a node's labels are read again when the labels arrive or change."""
        for uid in self.node_pods.get(node, ()):
            charge = self.admitted.get(uid)
            if charge is not None and charge.inferred:
                del self.admitted[uid]
                self.release(charge, planned=uid not in self.going)
                self.charge_running(self.store.pods[uid], None)

    def node_removed(self, name: str) -> None:
        self.node_table.remove_node(name)
        self.membership_generation += 1
        for members in self.flavor_nodes.values():
            if members is not None:
                members.discard(name)

    def add_node_requests(self, pod: PodInfo) -> None:
        self.node_pods.setdefault(pod.node_name, set()).add(pod.uid)
        used = self.node_requested.setdefault(pod.node_name, {})
        for r, v in pod.requests.items():
            used[r] = used.get(r, 0) + v
        self.node_table.add_requested(pod.node_name, pod.requests)

    def remove_node_requests(self, pod: PodInfo) -> None:
        self.node_pods.get(pod.node_name, set()).discard(pod.uid)
        used = self.node_requested.get(pod.node_name)
        if used is not None:
            for r, v in pod.requests.items():
                used[r] = used.get(r, 0) - v
            self.node_table.add_requested(pod.node_name, pod.requests, -1)

    # ---- charges ---------------------------------------------------------------
    def quota_requests(self, pod: PodInfo) -> dict[str, int]:
        """The pod's requests that quota counts (excludeResourcePrefixes removed)."""
        if not self.config.exclude_resource_prefixes:
            return pod.requests
        return {r: v for r, v in pod.requests.items() if not self.config.excluded(r)}

    def uncharge(self, uid: str) -> Charge | None:
        """Take the pod's charge off (a victim's planning usage is off already); returns it."""
        charge = self.admitted.pop(uid, None)
        if charge is not None:
            self.release(charge, planned=uid not in self.going)
        return charge

    def charge_binding(self, uid: str, charge: Charge) -> str:
        """Charge a binding Quotient makes, under the quota invariant: a charge that would take a ClusterQueue or
        Cohort above its quota is refused (its reason returned, counted), and nothing changes."""
        standing = self.overrun(charge.cluster_queue)
        over = standing.refusal() if standing is not None else self.over_quota(charge)
        if over:
            self.quota_refusals[charge.cluster_queue] += 1
            log.warning("binding refused by the quota invariant: %s", over)
            return over
        # the bind moment, to the second as the API's PodScheduled records it
        charge.admitted_at, charge.admitted_from = float(math.floor(self.clock())), BOUND_HERE
        self.admitted[uid] = charge   # kept by upsert_pod's charge_running
        self.going.discard(uid)       # a victim the API showed pending again: bound anew, no longer on its way out
        self.apply(charge)
        return ""

    def charge_running(self, pod: PodInfo, previous: Charge | None, observed: bool = False,
                       watched: bool = False) -> None:
        """Charge a bound pod to the ClusterQueue it names now, at the size the API shows now (a pod resized in
        place keeps its flavors), keeping its flavors when still valid; observed: a pod seen running that
        Quotient did not bind, which runs whatever the quota says (counted if over); watched: the watch's
        word, so a pod it shows moved to another ClusterQueue or grown is checked against the quota, and
        one above it is reported (_overran)."""
        _, cq = self.store.queue_of(pod)
        if cq is None or cq.name not in self.tree.queues:
            return
        requests = self.quota_requests(pod)
        if previous is not None and not previous.inferred and previous.cluster_queue == cq.name \
                and self.charge_valid(previous) and self._covers(previous, cq, requests):
            charge = previous
            usage = quota_usage(requests, previous.flavors)
            if usage != previous.usage:         # resized in place (pods/resize): same flavors, the new size
                charge = replace(previous, usage=usage)
            if charge.admitted_from == BOUND_HERE and pod.scheduled_at is not None:
                # The API's record of the bind Quotient made: what a restart reads, so the order it rebuilds
                # is this one even where Quotient's clock and the API server's fall in different seconds.
                charge.admitted_at, charge.admitted_from = pod.observed_admission()
        else:
            flavors = self.infer_flavors(pod, cq)
            at, source = pod.observed_admission()
            charge = Charge(cq.name, flavors, quota_usage(self.quota_requests(pod), flavors), inferred=True,
                            admitted_at=at, admitted_from=source)
        how = change_of(previous, charge, observed) if watched else ""
        over = self.over_quota(charge) if observed or how else ""
        node = self.tree.queues[cq.name]
        frs = [fr for fr, v in charge.usage.items() if v > available(node, fr, bound=True)] if over else []
        if over and observed:
            self.skip(f"a running pod Quotient did not bind puts ClusterQueue {cq.name} above its quota")
            log.warning("pod %s runs above quota: %s", pod.key, over)
        self.admitted[pod.uid] = charge
        self.apply(charge, planned=pod.uid not in self.going)
        if over and how:
            self._overran(pod, charge, how, over, frs)

    def _covers(self, charge: Charge, cq: ClusterQueue, requests: dict[str, int]) -> bool:
        """The charge's flavors still cover every resource of the pod the ClusterQueue counts (a resize may
        add one the pod did not request before)."""
        covered = cq.covered_resources()
        return all(r in charge.flavors for r in requests if r in covered)

    def _overran(self, pod: PodInfo, charge: Charge, how: str, over: str, frs: list) -> None:
        """The API took a change of a bound pod that puts its ClusterQueue above quota: counted, kept (its queue
        admits nothing until back within: overrun), and reported."""
        node = self.tree.queues[charge.cluster_queue]
        reason = (f"ClusterQueue {charge.cluster_queue} uses {usage_note(node, frs or list(charge.usage))} since "
                  f"pod {pod.key} {how} ({over})")
        found = self.overruns[pod.uid] = Overrun(pod.key, charge.cluster_queue, reason, self.clock())
        self.overrun_counts[charge.cluster_queue] += 1
        log.warning("%s", found.refusal())
        if self.on_overrun is not None:
            self.on_overrun(found)

    def overrun(self, cq_name: str) -> Overrun | None:
        """The change that keeps the ClusterQueue above quota, if one still does: its pod still charged there
        and not fitting beside the others. Those that no longer do are forgotten here."""
        for uid, found in list(self.overruns.items()):
            if found.cluster_queue != cq_name:
                continue
            charge = self.admitted.get(uid)
            if charge is not None and charge.cluster_queue == cq_name and self.no_room_beside_others(uid):
                return found
            del self.overruns[uid]
        return None

    def no_room_beside_others(self, uid: str) -> str:
        """Why the pod's charge no longer fits beside the others running now ("" when it does, or it has none):
        a change the watch delivered after the decision (a running pod resized, a quota lowered) took its
        ClusterQueue or a Cohort above quota. A Binding is not sent again then (act.kube)."""
        charge = self.admitted.get(uid)
        if charge is None:
            return ""
        self.apply(charge, planned=False, sign=-1)         # the others, without it: does it fit?
        why = self.over_quota(charge)
        self.apply(charge, planned=False)
        return why

    def charge_valid(self, charge: Charge) -> bool:
        node = self.tree.queues.get(charge.cluster_queue)
        return node is not None and all(fr in node.quotas for fr in charge.usage)

    def infer_flavors(self, pod: PodInfo, cq: ClusterQueue) -> dict[str, str]:
        """Flavors of a pod found running (core.flavors.running_flavors); a flavor that does not exist has no node."""
        def known_and_holds(node: str, flavor: str) -> bool:
            members = self.flavor_nodes.get(flavor, ())
            return members is None or node in members
        node = pod.node_name if pod.node_name in self.store.nodes else None
        return running_flavors(cq, self.quota_requests(pod), node, known_and_holds)

    def apply(self, charge: Charge, planned: bool = True, running: bool = True, sign: int = 1) -> None:
        """Charge the planning usage (planned) and the running truth (running) of the live tree (sign -1:
        release them); the decisions' mirror is brought up to date when next read."""
        node = self.tree.queues.get(charge.cluster_queue)
        if node is None:
            return
        if planned:
            charge_usage(node, charge.usage, sign)
            self._unmirrored.add(node.name)
        if running:
            charge_usage(node, charge.usage, sign, bound=True)

    def release(self, charge: Charge, planned: bool = True, running: bool = True) -> None:
        self.apply(charge, planned, running, -1)

    def over_quota(self, charge: Charge) -> str:
        """The quota invariant for one charge about to run: why it would take its ClusterQueue or a
        Cohort above what Kueue's rules allow, counting only pods really on a node (terminating
        victims included, reservations not), or "" when it fits."""
        node = self.tree.queues.get(charge.cluster_queue)
        if node is None:
            return ""
        for (flavor, resource), v in charge.usage.items():
            room = available(node, (flavor, resource), bound=True)
            if v > room:
                used = node.bound.get((flavor, resource), 0)
                return (f"ClusterQueue {charge.cluster_queue} flavor {flavor}: {resource} "
                        f"{format_quantity(v, resource)} > {format_quantity(room, resource)} free now "
                        f"({format_quantity(used, resource)} used by pods on nodes, terminating ones included)")
        return ""
