"""A ConversionReview answered: its objects converted between the Kueue versions, or its Failure said.

The one job of the conversion webhook that needs no HTTP: app/api/convert.py calls it for a small review on the
event loop, app/api/convertworker.py in its child process for a large one.
"""
from __future__ import annotations

import logging

import orjson

from ..objects.conversion import ConversionError, convert
from ..objects.kueue import GROUP, VERSIONS
from .wire import review_request

log = logging.getLogger("quotient.api")
REVIEW_API = "apiextensions.k8s.io/v1"
KUEUE_VERSIONS = tuple(f"{GROUP}/{v}" for v in VERSIONS)


def review(body: bytes) -> bytes:
    """The ConversionReview answering `body`; WireError when it is not a review with a uid to answer."""
    doc, request, uid = review_request(body, "a ConversionReview", REVIEW_API, "uid, desiredAPIVersion, objects")
    try:
        converted = _converted(doc, request)
    except ConversionError as e:
        log.info("conversion review %.80r refused: %s", uid, e)
        response = {"uid": uid, "result": {"status": "Failure", "message": str(e)}}
    else:
        response = {"uid": uid, "result": {"status": "Success"}, "convertedObjects": converted}
    return orjson.dumps({"apiVersion": REVIEW_API, "kind": "ConversionReview", "response": response})


def _converted(doc: dict, request: dict) -> list[dict]:
    if (doc.get("apiVersion"), doc.get("kind")) != (REVIEW_API, "ConversionReview"):
        raise ConversionError(f"expected a {REVIEW_API} ConversionReview, got {doc.get('apiVersion')!r:.80} "
                              f"{doc.get('kind')!r:.80}: set conversionReviewVersions: [v1] in the CRD")
    desired = request.get("desiredAPIVersion")
    if desired not in KUEUE_VERSIONS:
        raise ConversionError(f"desiredAPIVersion {desired!r:.80}: this webhook converts only between "
                              f"{' and '.join(KUEUE_VERSIONS)}; name it only in the Kueue CRDs (deploy/crds/crds.yaml)")
    objects = request.get("objects")
    if not isinstance(objects, list):
        raise ConversionError(f"request.objects must be a list, got {type(objects).__name__}")
    version = desired.rpartition("/")[2]
    out = []
    for i, obj in enumerate(objects):
        api = obj.get("apiVersion") if isinstance(obj, dict) else None
        if api not in KUEUE_VERSIONS:
            raise ConversionError(f"{_named(i, obj)}: apiVersion {api!r:.80} is not {' or '.join(KUEUE_VERSIONS)}")
        try:
            out.append(convert(obj, version))
        except ConversionError as e:
            raise ConversionError(f"{_named(i, obj)}: {e}") from None
    return out


def _named(i: int, obj: object) -> str:
    """objects[i] (Kind 'name'), for a message."""
    meta = obj.get("metadata") if isinstance(obj, dict) else None
    kind = obj.get("kind") if isinstance(obj, dict) else type(obj).__name__
    return f"objects[{i}] ({kind!s:.80} {meta.get('name') if isinstance(meta, dict) else None!r:.80})"
