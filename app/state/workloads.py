"""What is held for a workload on its way to running: reservations (quota between filter and bind) and
preemption holds (the room and quota its victims free, kept for the preemptor), with their expiry.

The room plans count on a node is worked out from the holds once per change of the holds or the state, not
once per node asked about.
"""
from __future__ import annotations

import heapq
from dataclasses import dataclass, field
from typing import Callable

from ..config import Configuration
from ..core.drift import Decided, decided_on
from ..core.flavors import Charge
from .ledger import Ledger
from .store import Store


@dataclass(slots=True)
class Reservation:
    """Quota held between a pod passing filter and its bind, and what that decision was made on."""
    charge: Charge
    expires: float          # on ClusterState.timer (monotonic)
    decided: Decided | None = None
    gate: bool = False      # made when the pod's admission gate was removed (scheduler.ungate): its admission


@dataclass(slots=True)
class HeldRoom:
    """Room on a node, and quota, freed by a preemption and kept for the preemptor until it binds
    (YuniKorn's node reservation: the victims' room cannot be taken by anyone else)."""
    node: str
    requests: dict[str, int]
    expires: float          # on ClusterState.timer (monotonic)
    victims: dict[str, tuple[str, str]]          # victim uid -> (reason, message); shared by a group's holds
    evicted: set[str] = field(default_factory=set)       # victims whose eviction was issued; shared too

    def left(self, pods: dict) -> list[str]:
        """Victims still in the cluster (not yet evicted, or terminating): their quota is still used."""
        return [uid for uid in self.victims if uid in pods and not pods[uid].terminal]


class Workloads:
    def __init__(self, config: Configuration, store: Store, ledger: Ledger, timer: Callable[[], float], cluster):
        self.config, self.store, self.ledger, self.timer = config, store, ledger, timer
        self.cluster = cluster                          # ClusterState: its generation and skips
        self.holding_changed: Callable[[str], None] = lambda uid: None    # a pod's reservation taken or dropped
        self.jobs_preempted: Callable[[object], None] = lambda uids: None  # victims chosen: their Jobs' admissions end
        self.reservations: dict[str, Reservation] = {}
        self._expiry: list[tuple[float, str]] = []
        self.holds: dict[str, HeldRoom] = {}              # preemptor uid -> what was freed for it
        self._holds_version = 0                           # bumps when a hold is taken or ends (victims)
        self._victims: tuple[int, frozenset[str]] = (-1, frozenset())
        self._rooms: tuple[tuple, dict] = ((), {})        # (holds version, generation, holder) -> the room changes

    # ---- preemption holds -------------------------------------------------------
    def hold_for_preemptor(self, uid: str, node: str, requests: dict[str, int], charge: Charge | None,
                           victims: dict[str, tuple[str, str]], evicted: set[str] | None = None) -> HeldRoom:
        """Keep the quota and room a preemption frees for the preemptor, for preemption.holdTimeout."""
        timeout = self.config.preemption_hold_timeout
        held = self.holds[uid] = HeldRoom(node, dict(requests), self.timer() + timeout, victims,
                                          set() if evicted is None else evicted)
        self._holds_version += 1
        self.jobs_preempted(victims)
        going, admitted = self.ledger.going, self.ledger.admitted
        for victim in victims:      # plans count their quota as the preemptor's now; it runs until they are gone
            running = admitted.get(victim)
            if running is not None and victim not in going:
                going.add(victim)
                self.ledger.release(running, running=False)
        if charge is not None:
            self.reserve(uid, charge, timeout)
        self.cluster.generation += 1
        return held

    def release_hold(self, uid: str) -> HeldRoom | None:
        """End a hold (the preemptor bound, left, or waited too long); victims still running get
        their quota back."""
        held = self.holds.pop(uid, None)
        if held is not None:
            self._holds_version += 1
            still = self.victims() if held.victims else ()
            going = self.ledger.going
            for victim in held.victims:
                if victim in going and victim not in still:
                    going.discard(victim)
                    charge = self.ledger.admitted.get(victim)
                    if charge is not None:
                        self.ledger.apply(charge, running=False)
            self.cluster.generation += 1
        return held

    def _leaving(self, held: HeldRoom) -> bool:
        """Victims still terminate (the API shows their deletion): the hold waits for them rather than
        ending and letting the preemptor choose new victims while these are still going."""
        pods = self.store.pods
        return any(pods[uid].deleting for uid in held.left(pods))

    def victims(self) -> frozenset[str]:
        """Pods chosen as victims by a hold still in force (worked out again only when the holds change: every
        decision that needs room asks, and hundreds of holds can stand in a busy cohort)."""
        if self._victims[0] != self._holds_version:
            chosen = frozenset(uid for held in self.holds.values() for uid in held.victims)
            self._victims = (self._holds_version, chosen)
        return self._victims[1]

    def expire_holds(self) -> None:
        """End the holds past their time whose victims are not still terminating."""
        now = self.timer()
        for uid in [u for u, h in self.holds.items() if h.expires <= now and not self._leaving(h)]:
            self.release_hold(uid)
            self.cluster.skips["preemption hold expired"] += 1

    # ---- room on nodes, as plans count it --------------------------------------------
    def room(self, node: str, holder: str = "") -> dict[str, int]:
        """Free resources on the node as plans count them: victims already chosen are as good as
        gone, and what holds keep for pods other than holder is taken."""
        return self.rooms(holder)(node)

    def rooms(self, holder: str = ""):
        """room(node) for many nodes: the holds are added up per node once, not once per node, and again only
        when the holds or the state changed."""
        key = (self._holds_version, self.cluster.generation, holder)
        if self._rooms[0] == key:
            return self._room_of(self._rooms[1])
        change: dict[str, dict[str, int]] = {}
        for uid, hold in self.holds.items():
            if uid != holder:
                held = change.setdefault(hold.node, {})
                for r, v in hold.requests.items():
                    held[r] = held.get(r, 0) - v
        pods = self.store.pods
        for victim in self.victims():       # once each, though a group's holds share them
            pod = pods.get(victim)
            if pod is not None and pod.node_name and not pod.terminal:
                back = change.setdefault(pod.node_name, {})
                for r, v in pod.requests.items():
                    back[r] = back.get(r, 0) + v

        self._rooms = (key, change)
        return self._room_of(change)

    def _room_of(self, change: dict[str, dict[str, int]]):
        node_free = self.ledger.node_free

        def room(node: str) -> dict[str, int]:
            free = node_free(node)
            for r, v in change.get(node, {}).items():
                free[r] = free.get(r, 0) + v
            return free
        return room

    # ---- reservations -----------------------------------------------------------------
    def reserve(self, uid: str, charge: Charge, timeout: float | None = None, gate: bool = False) -> Reservation:
        """Hold quota for a pod that passed filter (or was let through its admission gate) until it binds or the
        timeout passes."""
        self.drop_reservation(uid)
        r = Reservation(charge, self.timer() + (self.config.reservation_timeout if timeout is None else timeout),
                        self.decided(uid, charge.cluster_queue), gate)
        self.store_reservation(uid, r)
        self.holding_changed(uid)
        self.cluster.generation += 1
        return r

    def admitted_at_gate(self, uid: str) -> Charge | None:
        """The charge reserved when the pod's admission gate was removed, while nothing it was decided on has
        changed: that admission stands, as Kueue's QuotaReserved does; filter only places the pod (a pod of higher
        priority come since must preempt it, not overtake it). None: decide anew."""
        r = self.reservations.get(uid)
        if r is None or not r.gate:
            return None
        pod = self.store.pods.get(uid)
        _, cq = self.store.queue_of(pod) if pod is not None else (None, None)
        return r.charge if cq is not None and r.decided == self.decided(uid, cq.name) else None

    def decided(self, uid: str, cluster_queue: str) -> Decided | None:
        """What a decision for the pod is made on now (core.drift.Decided); None for a pod not known."""
        pod = self.store.pods.get(uid)
        return decided_on(pod, self.ledger.quota_requests(pod), cluster_queue) if pod is not None else None

    def store_reservation(self, uid: str, r: Reservation) -> None:
        """Keep the reservation, its quota charged to the plans, and its expiry."""
        self.reservations[uid] = r
        self.ledger.apply(r.charge, running=False)
        heapq.heappush(self._expiry, (r.expires, uid))

    def drop_reservation(self, uid: str) -> Reservation | None:
        r = self.reservations.pop(uid, None)
        if r is not None:
            self.ledger.release(r.charge, running=False)
            self.holding_changed(uid)
            self.cluster.generation += 1
        return r

    def expire_reservations(self) -> int:
        """Drop reservations whose bind never came (one whose hold lives on keeps its quota); returns how many."""
        now, dropped = self.timer(), 0
        while self._expiry and self._expiry[0][0] <= now:
            expires, uid = heapq.heappop(self._expiry)
            r = self.reservations.get(uid)
            if r is not None and r.expires == expires:
                if uid in self.holds:        # its hold lives on (victims still terminating): so does its quota
                    r.expires = now + self.config.reservation_timeout
                    heapq.heappush(self._expiry, (r.expires, uid))
                    continue
                self.drop_reservation(uid)
                self.cluster.skips["reservation expired"] += 1
                dropped += 1
        return dropped
