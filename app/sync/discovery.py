"""Which version of Kueue's kinds to read: the one API discovery (GET /apis/kueue.x-k8s.io) names.

Without an answer the reflectors read the versions RESOURCES names (v1beta1); a Kueue kind the server does not
serve asks again when it is looked for again (rediscovered), since Kueue may have been installed or upgraded.
"""
from __future__ import annotations

import asyncio
import logging
from dataclasses import replace

import aiohttp
import orjson

from ..objects.kueue import VERSIONS as KUEUE_VERSIONS
from .apiserver import WatchError, get
from .resources import KUEUE, Resource

log = logging.getLogger("quotient.sync.watch")

DISCOVERY = Resource("APIGroup", KUEUE, "", "kueue.x-k8s.io discovery", False)


DISCOVERY_ATTEMPTS = 3


def kueue_version(group: object) -> str | None:
    """The served version to read: the preferred one (the highest-priority served version of Kueue's CRDs)
    if Quotient reads it, else the newest one it reads; None for an answer of any other shape."""
    if not isinstance(group, dict):
        return None
    versions = group.get("versions")
    served = [v.get("version") for v in versions if isinstance(v, dict)] if isinstance(versions, list) else []
    preferred = group.get("preferredVersion")
    preferred = preferred.get("version") if isinstance(preferred, dict) else None
    if preferred in KUEUE_VERSIONS:
        return preferred
    known = [v for v in KUEUE_VERSIONS if v in served]
    return known[-1] if known else None


async def kueue_discovery(api, request_timeout: float, count_error, backoff) -> str | None:
    """GET /apis/kueue.x-k8s.io: the version to read, or None (Kueue not installed, discovery refused or
    unreadable: logged and counted through count_error(DISCOVERY, cause, detail)). A transient failure is tried
    again a few times (after backoff(attempt) seconds), not forever: the other resources wait for it."""
    for attempt in range(DISCOVERY_ATTEMPTS):
        try:
            resp = await get(api, f"/apis/{KUEUE}", [], request_timeout)
            try:
                if resp.status == 404:
                    return None
                body = await resp.read()
            finally:
                resp.release()
            if resp.status != 200:
                raise WatchError(f"http {resp.status}", body[:300].decode("utf-8", "replace"))
            version = kueue_version(orjson.loads(body))
            if version is None:
                count_error(DISCOVERY, "no version Quotient reads", body[:300].decode("utf-8", "replace"))
            else:
                log.info("reading %s/%s (API discovery)", KUEUE, version)
            return version
        except asyncio.CancelledError:
            raise
        except WatchError as e:
            count_error(DISCOVERY, e.cause, e.detail)
            if e.cause.startswith("http 4") and e.cause != "http 429":      # refused (401, 403, ...): final
                return None
        except (aiohttp.ClientError, asyncio.TimeoutError, ValueError) as e:
            count_error(DISCOVERY, "bad answer", f"{type(e).__name__}: {e}")
        await asyncio.sleep(backoff(attempt))
    return None


def in_version(resources: tuple[Resource, ...], version: str | None) -> tuple[Resource, ...]:
    """resources with the Kueue kinds read in version (discovery's answer); unchanged when it is None."""
    if version is None:
        return resources
    return tuple(replace(r, version=version) if r.group == KUEUE else r for r in resources)


async def rediscovered(api, res: Resource, request_timeout: float, count_error, backoff) -> Resource:
    """An absent Kueue resource: the version discovery names now (Kueue installed or upgraded since)."""
    if res.group != KUEUE:
        return res
    version = await kueue_discovery(api, request_timeout, count_error, backoff)
    return replace(res, version=version) if version and version != res.version else res
