"""Listing a kind in pages (limit and continue), as one list with the list's resourceVersion.

A continue token the server has let expire (410 on a page) starts the list again from its first page, three times
at most; then the list fails (WatchError "list continue expired") and the reflector backs off.
"""
from __future__ import annotations

import asyncio

import aiohttp
import orjson

from .apiserver import Gone, WatchError, get, status_error
from .resources import Resource


async def list_all(api, res: Resource, page_size: int, request_timeout: float, count_error) -> tuple[list[dict], str]:
    """Every object of the resource and the list's resourceVersion (paged; a 410 on a page lists again, counted
    through count_error(res, cause))."""
    for _ in range(3):
        items: list[dict] = []
        cont = ""
        try:
            while True:
                query = [("limit", str(page_size))] if page_size else []
                if cont:
                    query.append(("continue", cont))
                resp = await get(api, res.path, query, request_timeout)
                if resp.status != 200:
                    raise await status_error(resp, res)
                try:
                    raw = await resp.read()
                except (aiohttp.ClientError, asyncio.TimeoutError) as e:
                    raise WatchError("list interrupted", f"{type(e).__name__}: {e}") from None
                finally:
                    resp.release()
                try:
                    body = orjson.loads(raw)
                    page, meta = body["items"], body["metadata"]
                    if not isinstance(page, list) or not isinstance(meta, dict):
                        raise TypeError("items must be a list and metadata an object")
                except (orjson.JSONDecodeError, KeyError, TypeError) as e:
                    raise WatchError("list undecodable", str(e)) from None
                items.extend(page or ())
                cont = meta.get("continue") or ""
                if not cont:
                    return items, str(meta.get("resourceVersion") or "")
        except Gone:
            count_error(res, "list continue expired")
            continue
    raise WatchError("list continue expired", "three times in a row")
