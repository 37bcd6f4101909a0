"""The four verbs on the wire: kube-scheduler's body decoded into a request, the scheduler asked, its Outcome
encoded into the answer kube-scheduler reads (k8s.io/kube-scheduler/extender/v1).

filter's common answer (NodeNames, no reasons) is spliced from bytes cached with the offered node list
(app/api/offered.py), and prioritize is answered from a template of the same list.
"""
from __future__ import annotations


from ..objects.offered_nodes import OfferedNodes
from ..scheduler.outcome import Outcome
from ..scheduler.request import BindAsk, Offer, PreemptAsk
from ..scheduler.scheduler import Scheduler
from . import wire
from .offered import OfferedNodeCache, encode_priorities

FILTER_TAIL = b',"FailedNodes":{},"FailedAndUnresolvableNodes":{},"Error":""}'


class Verbs:
    """Wire bytes in, wire bytes out, for one Scheduler."""

    def __init__(self, scheduler: Scheduler):
        self.scheduler = scheduler
        self.offered = OfferedNodeCache(skip=scheduler.state.skip)

    def _offer(self, raw: bytes) -> tuple[Offer, dict | None]:
        """(the pod and its offered nodes, Node objects by name when nodeCacheCapable is false)."""
        fast = self.offered.split(raw)
        if fast is not None:
            body, offered = fast
            pod = body.get("Pod")
            if not isinstance(pod, dict):
                raise wire.WireError('"Pod" must be a Pod object')
            return Offer(pod, offered), None
        args = wire.decode_extender_args(raw)
        return Offer(args.pod, OfferedNodes(args.node_names)), args.nodes

    def filter(self, raw: bytes) -> bytes:
        offer, nodes = self._offer(raw)
        out = self.scheduler.filter(offer)
        if out.remember:
            self.offered.remember(out.encoded, out.nodes)
        return filter_answer(out, nodes, offer.offered)

    def prioritize(self, raw: bytes) -> bytes:
        offer, _ = self._offer(raw)
        return encode_priorities(offer.offered, self.scheduler.prioritize(offer).scores)

    def preempt(self, raw: bytes) -> bytes:
        args = wire.decode_preemption_args(raw)
        out = self.scheduler.preempt(PreemptAsk(args.pod, sorted(args.victims)))
        if out.passthrough:
            return wire.encode_preemption(args.victims, args.pdb_violations)
        return wire.encode_preemption(out.victims, out.violations)

    async def bind(self, raw: bytes) -> bytes:
        args = wire.decode_binding_args(raw)
        out = await self.scheduler.bind(BindAsk(args.pod_name, args.pod_namespace, args.pod_uid, args.node))
        return wire.encode_binding(out.error)


def filter_answer(out: Outcome, nodes: dict | None, offered: OfferedNodes) -> bytes:
    """ExtenderFilterResult: the nodes passed; or none, with the refusal as a retry (Error), as FailedNodes
    (kube-scheduler's preemption may help) or as FailedAndUnresolvableNodes. The common answer (NodeNames, no
    reasons) is spliced from cached bytes."""
    if out.nodes is not None:
        return _answer(nodes, out.nodes, out.encoded)
    if out.error:
        return wire.encode_filter(nodes, [], {}, {}, out.error)
    if out.resolvable:
        return _answer(nodes, [], b"[]", failed=dict.fromkeys(offered.names, out.reason))
    return _answer(nodes, [], b"[]", unresolvable=dict.fromkeys(offered.names, out.reason))


def _answer(nodes: dict | None, passing: list[str], encoded: bytes, failed: dict | None = None,
            unresolvable: dict | None = None) -> bytes:
    if nodes is None and not failed and not unresolvable:
        return b'{"Nodes":null,"NodeNames":' + encoded + FILTER_TAIL
    return wire.encode_filter(nodes, passing, failed or {}, unresolvable or {})
