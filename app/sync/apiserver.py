"""Talking to the API server: the client, one GET, and what a refused answer means to a reflector.

HTTP goes through a kubernetes_asyncio ApiClient (call_api with the BearerToken auth setting), so TLS, tokens and
kubeconfig handling are kubernetes-asyncio's: see make_api_client. A failed request is a WatchError with a short,
bounded cause; a 410 is Gone (relist), a 404 of an optional resource is Absent (a CRD not installed).
"""
from __future__ import annotations

import asyncio

import aiohttp

from .resources import Resource


class Gone(Exception):
    """The resourceVersion is too old (410): relist."""


class WatchError(Exception):
    """A failed request or stream; `cause` is a short, bounded label."""

    def __init__(self, cause: str, detail: str = ""):
        super().__init__(f"{cause}: {detail}" if detail else cause)
        self.cause = cause
        self.detail = detail


class Absent(Exception):
    """An optional resource the API server does not serve (404)."""


async def make_api_client(kubeconfig: str | None = None, context: str | None = None):
    """An ApiClient from a kubeconfig file, else from the pod's service account (in-cluster)."""
    from kubernetes_asyncio import client, config

    cfg = client.Configuration()
    if kubeconfig:
        await config.load_kube_config(config_file=kubeconfig, context=context, client_configuration=cfg)
    else:
        config.load_incluster_config(client_configuration=cfg)
    api = client.ApiClient(cfg)
    _environment_once(api.rest_client, cfg.host)
    return api


def _environment_once(rest, host: str) -> None:
    """Read the environment's proxy for the API server once, here, rather than on every request.

    kubernetes_asyncio's aiohttp session trusts the environment, so aiohttp looks up HTTPS_PROXY /
    NO_PROXY and ~/.netrc for each request, each time in a worker thread: with 100 evictions at once
    that was 60% of the CPU an eviction costs and most of its latency (issue 21, the preemption
    benchmark). The proxy the environment names for this host (with its credentials) is kept as the
    client's, as a kubeconfig's proxy-url would be; netrc is not read (a kubeconfig carries the
    API server's credentials)."""
    session = rest.pool_manager
    if not getattr(session, "_trust_env", False):
        return
    if not rest.proxy:
        from aiohttp.helpers import get_env_proxy_for_url
        from yarl import URL

        try:
            proxy, auth = get_env_proxy_for_url(URL(host))
        except LookupError:         # no proxy for this host (none set, or NO_PROXY names it)
            proxy, auth = None, None
        if proxy is not None:
            rest.proxy = str(proxy)
            if auth is not None:
                rest.proxy_headers = {**(rest.proxy_headers or {}), "Proxy-Authorization": auth.encode()}
    session._trust_env = False


async def get(api, path: str, query: list[tuple[str, str]], timeout) -> aiohttp.ClientResponse:
    """GET path through the ApiClient api, the body left unread; a timeout or a failed connection is a WatchError."""
    try:
        return await api.call_api(path, "GET", query_params=query,
                                  header_params={"Accept": "application/json"},
                                  auth_settings=["BearerToken"], _preload_content=False,
                                  _request_timeout=timeout)
    except asyncio.TimeoutError:
        raise WatchError("timeout", f"no answer within the timeout ({path})") from None
    except aiohttp.ClientError as e:
        raise WatchError("connection failed", f"{type(e).__name__}: {e}") from None


async def status_error(resp: aiohttp.ClientResponse, res: Resource) -> Exception:
    """What an answer other than 200 means (the response is released): Gone, Absent or a WatchError."""
    try:
        body = (await resp.read())[:500].decode("utf-8", "replace")
    except Exception:
        body = ""
    finally:
        resp.release()
    if resp.status == 410:
        return Gone(body)
    if resp.status == 404 and res.optional:
        return Absent(body)
    return WatchError(f"http {resp.status}", body)
