"""An AdmissionReview for a Pod CREATE answered: the pod held behind Kueue's scheduling gate until its quota
admits it, so kube-scheduler never cycles a pod that waits (issue 32, the gated design).

The one job of POST /mutate-pods that needs no HTTP (app/api/convert.py routes it). What is modelled is
kube-apiserver's mutating admission webhook contract, admission.k8s.io/v1 (apiserver's
pkg/admission/plugin/webhook/request/admissionreview.go, VerifyAdmissionResponse): the answer is an
admission.k8s.io/v1 AdmissionReview whose response.uid is the request's, `allowed`, and when it mutates a
base64 `patch` with `patchType: JSONPatch`, the two always together. This webhook never refuses a pod: it
answers `allowed: true` always, and adds `{name: kueue.x-k8s.io/admission}` to spec.schedulingGates (Kueue's
plain-pod gate, app.objects.pod.ADMISSION_GATE) when the pod is one Quotient admits by ungating:

- gating is on (the Configuration's integrations.frameworks lists "pod"), the operation is CREATE of a core v1
  Pod, it has a non-empty kueue.x-k8s.io/queue-name label;
- it is not a batch Job's pod (a controller ownerReference of apiVersion batch/*, kind Job): those stay on the
  extender path, as their Job is the workload;
- spec.nodeName is empty: the API server refuses schedulingGates on a pod created already bound (its validation:
  "spec.nodeName: Forbidden: cannot be set until all schedulingGates have been cleared"), so gating one would make
  the create fail;
- it is not terminal (status.phase Succeeded or Failed) and does not carry the gate already.

A pod without a spec mapping is left alone (the API server's validation refuses it anyway; a patch on a missing
/spec would fail the create instead of saying why). A body that is not an admission.k8s.io/v1 AdmissionReview
with a request.uid is a WireError (the route answers 400): kube-apiserver then applies failurePolicy, which
deploy/ sets to Ignore, so the pod goes ungated down the extender path.
"""
from __future__ import annotations

import base64

import orjson

from ..objects.pod import ADMISSION_GATE, QUEUE_LABEL
from .wire import WireError, review_request

REVIEW_API = "admission.k8s.io/v1"
POD_KIND = {"group": "", "version": "v1", "kind": "Pod"}
TERMINAL = ("Succeeded", "Failed")


def review(body: bytes, gate_pods: bool) -> bytes:
    """The AdmissionReview answering `body`: always allowed, with the JSONPatch that gates the pod when it should be
    gated; WireError when `body` is not an admission.k8s.io/v1 AdmissionReview with a uid to answer."""
    doc, request, uid = review_request(body, "an AdmissionReview", REVIEW_API, "uid, kind, operation, object")
    if (doc.get("apiVersion"), doc.get("kind")) != (REVIEW_API, "AdmissionReview"):
        raise WireError(f"expected a {REVIEW_API} AdmissionReview, got {doc.get('apiVersion')!r:.80} "
                        f"{doc.get('kind')!r:.80}: set admissionReviewVersions: [v1] in the webhook configuration")
    response = {"uid": uid, "allowed": True}
    patch = gate_patch(request) if gate_pods else None
    if patch is not None:
        response["patchType"] = "JSONPatch"
        response["patch"] = base64.b64encode(orjson.dumps(patch)).decode()
    return orjson.dumps({"apiVersion": REVIEW_API, "kind": "AdmissionReview", "response": response})


def gate_patch(request: dict) -> list[dict] | None:
    """The JSON patch (RFC 6902) adding Kueue's admission gate to the pod this request creates, or None when the
    pod is not to be gated."""
    if request.get("operation") != "CREATE" or request.get("kind") != POD_KIND or request.get("subResource"):
        return None
    pod = request.get("object")
    if not isinstance(pod, dict):
        return None
    meta, spec, status = (pod.get(k) for k in ("metadata", "spec", "status"))
    if not isinstance(meta, dict) or not isinstance(spec, dict):
        return None
    labels = meta.get("labels")
    queue = labels.get(QUEUE_LABEL) if isinstance(labels, dict) else None
    if not isinstance(queue, str) or not queue or _owned_by_job(meta) or spec.get("nodeName"):
        return None
    if isinstance(status, dict) and status.get("phase") in TERMINAL:
        return None
    gates = spec.get("schedulingGates")
    gate = {"name": ADMISSION_GATE}
    if not isinstance(gates, list):         # absent or null: the list is created
        return [{"op": "add", "path": "/spec/schedulingGates", "value": [gate]}]
    if any(isinstance(g, dict) and g.get("name") == ADMISSION_GATE for g in gates):
        return None
    return [{"op": "add", "path": "/spec/schedulingGates/-", "value": gate}]


def _owned_by_job(meta: dict) -> bool:
    """A controller ownerReference to a batch Job (any batch/* version, as the API server may serve more)."""
    owners = meta.get("ownerReferences")
    if not isinstance(owners, list):
        return False
    return any(isinstance(o, dict) and o.get("controller") is True and o.get("kind") == "Job"
               and isinstance(o.get("apiVersion"), str) and o["apiVersion"].startswith("batch/") for o in owners)
