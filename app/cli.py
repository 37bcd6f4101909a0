"""The command line: `quotient serve`, `simulate`, and `explain` / `queues`, which ask a running server's /debug."""
from __future__ import annotations

import argparse
import asyncio
import functools
import logging
import os
import socket
import sys

from .config import ConfigError, Configuration, decode_configuration, load_configuration, log_unused
from .state.heap import settle_heap
from .sync.snapshot import DEFAULT_SNAPSHOT, SnapshotError, apply_documents, read_snapshot


def build_from_snapshot(path: str, config_path: str | None = None):
    """State, writer and scheduler served from a snapshot file (the embedded default)."""
    from .act.writer import SnapshotWriter
    from .scheduler.scheduler import Scheduler
    from .state.cluster import ClusterState

    cluster, own = read_snapshot(path)
    config = load_configuration(config_path) if config_path else Configuration()
    if not config_path and own.get("Configuration"):
        config = decode_configuration(own["Configuration"][0].obj)
        log_unused(config, path)
    state = ClusterState(config)
    apply_documents(path, state, cluster)
    settle_heap()
    return Scheduler(state, SnapshotWriter(state))


class LiveModeError(RuntimeError):
    """Live mode cannot start; the message says why."""


def make_writer(api_client, state):
    """The live writer (bindings, evictions, pod conditions): app.act.kube.KubeWriter(api_client, state).
    Should that module be missing, live mode refuses to start rather than serve binds it cannot write."""
    try:
        from .act.kube import KubeWriter
    except ModuleNotFoundError as e:
        if e.name != f"{__package__}.act.kube":
            raise
        raise LiveModeError("live writes not implemented: app/act/kube.py (KubeWriter) is missing, so bindings and "
                            "evictions cannot be written to the API server; use --snapshot meanwhile") from None
    return KubeWriter(api_client, state)


async def serve_live(args: argparse.Namespace, tls: dict | None = None, conversion=None) -> int:
    """List+watch the API server (--kubeconfig, else the pod's service account) and serve from that state;
    conversion(gate_pods): makes the --conversion-port server, served beside the main one."""
    from .api.app import create_app
    from .api.exposure import is_loopback
    from .api.listeners import listen, serve_all, server
    from .scheduler.scheduler import Scheduler
    from .observe import attach
    from .state.cluster import ClusterState
    from .sync.apiserver import make_api_client
    from .sync.watch import WatchSource

    config = load_configuration(args.config) if args.config else Configuration()
    conversion = conversion(gate_pods=config.gate_pods) if conversion else None
    try:
        api_client = await make_api_client(args.kubeconfig)
    except Exception as e:      # kubernetes_asyncio's ConfigException, a missing file, no service account
        where = f"kubeconfig {args.kubeconfig}" if args.kubeconfig else "the in-cluster service account"
        raise LiveModeError(f"cannot load {where}: {e}") from None
    try:
        state = ClusterState(config)
        writer = make_writer(api_client, state)
        scheduler = Scheduler(state, writer)
        metrics = attach(scheduler).metrics
        source = WatchSource(api_client, state, metrics=metrics, stall_timeout=config.watch_stall_timeout)
        prefix = args.path_prefix if args.path_prefix is not None else config.path_prefix
        elector = _elector(args, api_client)
        label = _leader_label(api_client, elector, metrics)
        health = source.health
        app = create_app(scheduler, prefix, ready=lambda: health.ready, readiness=lambda: health.readiness,
                         reconcile_interval=config.reconcile_interval,
                         leading=(lambda: elector.leading) if elector else None, alive=lambda: health.alive,
                         clients_verified=bool(args.tls_client_ca), loopback_only=is_loopback(args.host),
                         identities=config.client_identities, gate_pods=config.gate_pods)
        main = server(app, args.host, args.port, args.log_level, tls or {}, limits=_limits(args))
        main.announce = lambda: logging.getLogger("quotient").info(
            "serving from the API server %s on %s:%d%s/{filter,prioritize,preempt,bind}; ready once every "
            "initial list is applied", api_client.configuration.host, args.host, args.port, prefix)
        view = _view(args, scheduler)
        listen(main, conversion, view)      # before any watch or lease: a port that cannot be had stops here
        source.start()
        electing = asyncio.create_task(elector.run()) if elector else None
        labelling = asyncio.create_task(label.run()) if label else None
        try:
            await serve_all(main, conversion, view)
        finally:
            # The Lease released (the standby may take it at once) and the label removed (the Service keeps no
            # endpoint here), side by side: a slow API server delays the exit by one timeout, not two.
            for stopping in (elector, label):
                if stopping:
                    stopping.stop()
            await asyncio.gather(*(t for t in (electing, labelling) if t))
            await source.stop()
            writer.close()
    finally:
        await api_client.close()
    return 0


def _elector(args: argparse.Namespace, api_client):
    """Leader election on the Lease --lease (namespace/name) when --leader-elect, or in a pod of the
    Deployment (POD_NAME from the downward API): replicas keep in sync, one answers the verbs."""
    if not (args.leader_elect or env("POD_NAME")):
        return None
    from .leader import LeaderElector

    namespace, _, name = args.lease.rpartition("/")
    identity = env("POD_NAME") or f"{socket.gethostname()}-{os.getpid()}"
    return LeaderElector(api_client, namespace or pod_namespace(), name, identity,
                         lease_seconds=args.lease_seconds, renew_seconds=args.lease_seconds * 2 / 3,
                         retry_seconds=max(0.2, args.lease_seconds / 7))


def _leader_label(api_client, elector, metrics):
    """With leader election in a pod (POD_NAME, POD_NAMESPACE from the downward API): the leader labels its own
    pod quotient.dev/leader=true, which Service quotient selects (app/leader_label.py); else None."""
    pod = env("POD_NAME")
    if elector is None or not pod:
        return None
    from .leader_label import LeaderLabel

    label = LeaderLabel(api_client, pod_namespace(), pod, lambda: elector.leading,
                        retry_seconds=elector.retry_seconds, poll=min(1.0, elector.retry_seconds),
                        timeout=elector.renew_seconds, metrics=metrics)
    elector.on_change = label.wake
    return label


def pod_namespace() -> str:
    """The namespace of this pod (downward API), where its Lease and its own pod are; quotient-system elsewhere."""
    return env("POD_NAMESPACE") or "quotient-system"


def env(name: str) -> str | None:
    """An environment variable, None when unset or empty (`QUOTIENT_SERVER=` means the default, as in kubectl)."""
    return os.environ.get(name, "").strip() or None


def _loop_factory():
    """uvloop's event loop where it is installed (a dependency except on Windows), else asyncio's."""
    try:
        import uvloop
    except ImportError:
        return None
    return uvloop.new_event_loop


def _run(coro):
    """coro on uvloop, as uvicorn.run would pick: the event loop, its transports and TLS in C cost each pod
    less CPU than asyncio's own (issue 19, tests/bench/bench_throughput.py)."""
    with asyncio.Runner(loop_factory=_loop_factory()) as runner:
        return runner.run(coro)


def serve(args: argparse.Namespace) -> int:
    from .api.app import create_app
    from .api.exposure import (ExposureError, check_conversion_exposure, check_exposure, check_view_exposure,
                               is_loopback)
    from .api.listeners import PortError, conversion_server, listen, serve_all, server
    from .api.connections import raise_file_limit
    from .api.tls import TLSError, uvicorn_tls_options
    from .api import certs

    certs.POLL_INTERVAL = args.tls_reload_interval
    ports = 1 + (args.conversion_port is not None) + (args.view_port is not None)
    args.connection_limits = raise_file_limit(ports, _limits(args))
    try:
        tls = uvicorn_tls_options(args.tls_cert, args.tls_key, args.tls_client_ca)
        check_exposure(args.host, args.tls_client_ca, args.insecure_no_client_auth)
        conversion = None
        if args.conversion_port is not None:
            check_conversion_exposure(args.host, args.port, args.conversion_port, args.tls_cert)
            # The serving certificate, no client certificates: kube-apiserver presents none to webhooks. Made
            # once the Configuration is read: /mutate-pods gates pods as its integrations.frameworks say.
            conversion = functools.partial(conversion_server, args.host, args.conversion_port, args.log_level,
                                           uvicorn_tls_options(args.tls_cert, args.tls_key, None), _limits(args))
        if args.view_port is not None:
            check_view_exposure(args.view_host, args.view_port, (args.port, args.conversion_port), args.tls_cert)
    except (TLSError, ExposureError) as e:
        print(f"quotient: {e}", file=sys.stderr)
        return 2
    # Live mode: --kubeconfig, or in a pod (KUBERNETES_SERVICE_HOST) when no --snapshot is given.
    if args.kubeconfig or (not args.snapshot and env("KUBERNETES_SERVICE_HOST")):
        if args.snapshot:
            print("quotient: --kubeconfig and --snapshot exclude each other", file=sys.stderr)
            return 2
        try:
            return _run(serve_live(args, tls, conversion))
        except (LiveModeError, ConfigError, PortError) as e:
            print(f"quotient: {e}", file=sys.stderr)
            return 2
    path = args.snapshot or DEFAULT_SNAPSHOT
    try:
        scheduler = build_from_snapshot(path, args.config)
    except (SnapshotError, ConfigError) as e:
        print(f"quotient: {e}", file=sys.stderr)
        return 2
    config = scheduler.state.config
    prefix = args.path_prefix if args.path_prefix is not None else config.path_prefix
    state = scheduler.state
    main = server(create_app(scheduler, prefix, reconcile_interval=config.reconcile_interval,
                             clients_verified=bool(args.tls_client_ca), loopback_only=is_loopback(args.host),
                             identities=config.client_identities, gate_pods=config.gate_pods),
                  args.host, args.port, args.log_level, tls, limits=_limits(args))
    main.announce = lambda: logging.getLogger("quotient").info(
        "serving snapshot %s: %d nodes, %d pods, %d ClusterQueues on %s://%s:%d%s/{filter,prioritize,preempt,bind}",
        path, len(state.nodes), len(state.pods), len(state.cluster_queues), "https" if tls else "http", args.host,
        args.port, prefix)
    view = _view(args, scheduler)
    conversion = conversion(gate_pods=config.gate_pods) if conversion else None
    try:
        listen(main, conversion, view)
    except PortError as e:
        print(f"quotient: {e}", file=sys.stderr)
        return 2
    _run(serve_all(main, conversion, view))
    return 0


def _view(args: argparse.Namespace, scheduler):
    """The --view-port server (/ui and /debug without client certificates, listeners.view_server), or None."""
    if args.view_port is None:
        return None
    from .api.listeners import view_server

    view = view_server(scheduler, args.view_host, args.view_port, args.log_level, args.tls_cert, args.tls_key,
                       _limits(args))
    view.announce = lambda: logging.getLogger("quotient").info(
        "serving /ui and /debug without client certificates on %s:%d (--view-port)", args.view_host, args.view_port)
    return view


def _limits(args: argparse.Namespace):
    """Each port's connection limits (app/api/connections.py): --max-connections, --idle-timeout,
    --read-timeout, as serve fitted them to the open-file limit."""
    from .api.connections import ConnectionLimits

    fitted = getattr(args, "connection_limits", None)
    if fitted is not None:
        return fitted
    defaults = ConnectionLimits()
    return ConnectionLimits(getattr(args, "idle_timeout", defaults.idle), getattr(args, "read_timeout", defaults.read),
                            getattr(args, "max_connections", defaults.cap))


def _ask(args: argparse.Namespace, method: str, path: str, body: bytes | None = None) -> int:
    """One request to a running Quotient's /debug; prints the answer, 0 on 200, 1 on an error answer,
    2 when the server cannot be reached."""
    import httpx

    url = args.server.rstrip("/") + path
    params = {"format": args.format}
    verify: object = True
    if args.ca or args.cert:           # a Quotient that requires client certificates (deploy/certs.sh)
        import ssl

        try:
            verify = ssl.create_default_context(cafile=args.ca)
            if args.cert:
                verify.load_cert_chain(args.cert, args.key)
        except OSError as e:           # ssl.SSLError too: a missing file, a key that does not match
            print(f"quotient: --ca/--cert/--key: {e}", file=sys.stderr)
            return 2
    try:
        with httpx.Client(timeout=args.timeout, trust_env=False, verify=verify) as client:
            r = client.request(method, url, params=params, content=body)
    except httpx.HTTPError as e:
        print(f"quotient: cannot reach Quotient at {args.server}: {e}", file=sys.stderr)
        return 2
    out = r.text if args.format == "text" else r.text + "\n"
    (sys.stdout if r.status_code == 200 else sys.stderr).write(out)
    return 0 if r.status_code == 200 else 1


def explain(args: argparse.Namespace) -> int:
    try:
        body = sys.stdin.buffer.read() if args.file == "-" else open(args.file, "rb").read()
    except OSError as e:
        print(f"quotient: {args.file}: {e.strerror or e}", file=sys.stderr)
        return 2
    return _ask(args, "POST", "/debug/explain", body)


def queues(args: argparse.Namespace) -> int:
    from urllib.parse import quote

    return _ask(args, "GET", "/debug/queues" + (f"/{quote(args.name, safe='')}" if args.name else ""))


def _weight(text: str) -> int:
    """An extender weight: 0 (not registered) or more, as kube-scheduler requires of a prioritizeVerb."""
    return _number(text, int, lambda v: v >= 0, "a weight (0 or a positive integer)")


def _number(text: str, convert, within, what: str):
    """A flag's value converted and checked, or argparse's one-line error naming what it must be."""
    try:
        value = convert(text)
    except ValueError:
        value = None
    if value is None or not within(value):
        raise argparse.ArgumentTypeError(f"{text!r} is not {what}")
    return value


def _count(text: str) -> int:
    return _number(text, int, lambda v: v >= 1, "a count (a positive integer)")


def _port(text: str) -> int:
    return _number(text, int, lambda v: 0 < v < 65536, "a port (1 to 65535)")


LOG_LEVELS = ("critical", "error", "warning", "info", "debug", "trace")     # uvicorn's


def _seconds(text: str) -> float:
    return _number(text, float, lambda v: 0 < v < 86400, "a duration in seconds (more than 0, under a day)")


def _lease_seconds(text: str) -> float:
    """A Lease's duration: whole seconds in the Lease, so at least 1 (a shorter one would expire at once)."""
    value = _seconds(text)
    if value < 1:
        raise argparse.ArgumentTypeError(f"{text!r} is not a lease duration in seconds (at least 1)")
    return value


def simulate(args: argparse.Namespace) -> int:
    from .sim.run import run_file

    return run_file(args.file, verbose=not args.quiet, prioritize_weight=args.prioritize_weight)


def main(argv: list[str] | None = None) -> int:
    from .version import version

    parser = argparse.ArgumentParser(prog="quotient", description=__doc__)
    parser.add_argument("--version", action="version", version=f"%(prog)s {version()}")
    sub = parser.add_subparsers(dest="command", required=True)
    s = sub.add_parser("serve", help="serve the extender verbs (default: the bundled demo snapshot)")
    s.add_argument("--snapshot", help="snapshot file (YAML, JSON, JSON lines); default: bundled demo")
    s.add_argument("--kubeconfig", help="list+watch this cluster (kubeconfig file) instead of a snapshot; in a pod "
                   "(KUBERNETES_SERVICE_HOST set) without --snapshot, the service account is used")
    s.add_argument("--config", help="Configuration file (quotient.dev/v1alpha1)")
    s.add_argument("--leader-elect", action="store_true",
                   help="with --kubeconfig: only the holder of --lease answers the verbs (on by default in a pod "
                        "that has POD_NAME set; there the leader labels its pod quotient.dev/leader=true, which "
                        "Service quotient selects)")
    s.add_argument("--lease", default="quotient", help="[namespace/]name of the coordination.k8s.io Lease "
                   "(namespace: POD_NAMESPACE, else quotient-system)")
    s.add_argument("--lease-seconds", type=_lease_seconds, default=15.0,
                   help="lease duration (at least 1); renewals every 1/7 of it")
    s.add_argument("--host", default="127.0.0.1")
    s.add_argument("--port", type=_port, default=8888)
    s.add_argument("--path-prefix", default=None, help="prefix of the verb paths, e.g. /scheduler")
    s.add_argument("--log-level", default="info", type=str.lower, choices=LOG_LEVELS,
                   help="debug also logs each reservation filter takes")
    s.add_argument("--log-format", choices=("text", "json"), default="text",
                   help="json: one JSON object per line, decisions with their fields")
    s.add_argument("--tls-cert", metavar="FILE", help="serve HTTPS with this PEM certificate (chain)")
    s.add_argument("--tls-key", metavar="FILE", help="the PEM private key of --tls-cert")
    s.add_argument("--tls-client-ca", metavar="FILE",
                   help="verify client certificates against this PEM CA; each caller then gets the routes of its "
                        "role (the Configuration's clientIdentities), health routes answer anyone")
    s.add_argument("--tls-reload-interval", type=_seconds, default=10.0, metavar="S",
                   help="look at the TLS files every S seconds and serve changed ones without a restart "
                        "(default %(default)s)")
    s.add_argument("--conversion-port", type=_port, metavar="PORT",
                   help="also serve the Kueue CRDs' conversion webhook (POST /convert, nothing else) on this port, "
                        "with --tls-cert and no client certificates: kube-apiserver presents none (deploy/crds/crds.yaml)")
    s.add_argument("--view-port", type=_port, metavar="PORT",
                   help="also serve the read-only /ui and /debug on this port, asking for no client certificate "
                        "(for kubectl port-forward or a browser): plain HTTP on loopback, else HTTPS with --tls-cert; "
                        "reactivate is not served there")
    s.add_argument("--view-host", default="127.0.0.1",
                   help="address of --view-port (default 127.0.0.1, which kubectl port-forward reaches); another "
                        "address needs --tls-cert")
    s.add_argument("--max-connections", type=_count, default=4096, metavar="N",
                   help="connections each port holds at once; at the cap the quietest one not being answered is "
                        "closed to make room (default %(default)s; the open-file limit is raised to fit)")
    s.add_argument("--idle-timeout", type=_seconds, default=30.0, metavar="S",
                   help="close a connection with no request under way after S seconds (default %(default)s)")
    s.add_argument("--read-timeout", type=_seconds, default=10.0, metavar="S",
                   help="a request must arrive whole (headers and body) within S seconds of its first byte, else "
                        "408 and the connection is closed (default %(default)s)")
    s.add_argument("--insecure-no-client-auth", action="store_true",
                   help="allow a non-loopback --host without --tls-client-ca: anyone who reaches the port can "
                        "then bind pods and reserve quota (a NetworkPolicy must fence it); a warning is logged")
    s.set_defaults(func=serve)
    m = sub.add_parser("simulate", help="run a scenario file through a simulated kube-scheduler")
    m.add_argument("file")
    m.add_argument("-q", "--quiet", action="store_true", help="print only the verdict")
    m.add_argument("--prioritize-weight", type=_weight, default=0, metavar="W",
                   help="simulate a scheduler configuration that opts in to the prioritize verb with this weight "
                        "(the shipped ones do not register it; packing is NodeResourcesFit's MostAllocated)")
    m.set_defaults(func=simulate)
    e = sub.add_parser("explain", help="what a running Quotient would decide now for a Pod manifest (changes nothing)")
    e.add_argument("file", help="Pod manifest, YAML or JSON ('-' reads standard input)")
    q = sub.add_parser("queues", help="the quota tree of a running Quotient, or one ClusterQueue with its pending pods")
    q.add_argument("name", nargs="?", help="a ClusterQueue (or Cohort); without it, every queue")
    for c, func in ((e, explain), (q, queues)):
        c.add_argument("--server", default=env("QUOTIENT_SERVER") or "http://127.0.0.1:8888",
                       help="where Quotient serves (default: $QUOTIENT_SERVER, else %(default)s)")
        c.add_argument("--format", choices=("text", "json"), default="text")
        c.add_argument("--timeout", type=_seconds, default=10.0, help="seconds to wait for the answer")
        for flag, name, what in (("--ca", "QUOTIENT_CA", "CA file that signed Quotient's serving certificate"),
                                ("--cert", "QUOTIENT_CERT", "client certificate to present (deploy/certs.sh: admin.crt)"),
                                ("--key", "QUOTIENT_KEY", "its private key")):
            c.add_argument(flag, metavar="FILE", default=env(name), help=f"{what} (default: ${name})")
        c.set_defaults(func=func)
    args = parser.parse_args(argv)
    if args.command == "serve":
        from .observe.logs import setup_logging

        setup_logging(args.log_format, args.log_level)
    else:
        logging.basicConfig(level=logging.WARNING, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    return args.func(args)


if __name__ == "__main__":
    sys.exit(main())
