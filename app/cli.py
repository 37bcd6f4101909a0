"""`quotient serve` and `quotient simulate`: the command line of the extender."""
from __future__ import annotations

import argparse
import gc
import logging
import sys

from .config import ConfigError, Configuration, decode_configuration, load_configuration
from .sync.snapshot import DEFAULT_SNAPSHOT, SnapshotError, apply_documents, read_snapshot


def build_from_snapshot(path: str, config_path: str | None = None):
    """State, writer and extender served from a snapshot file (the embedded default)."""
    from .act.writer import SnapshotWriter
    from .extender import Extender
    from .state.cluster import ClusterState

    cluster, own = read_snapshot(path)
    config = load_configuration(config_path) if config_path else Configuration()
    if not config_path and own.get("Configuration"):
        config = decode_configuration(own["Configuration"][0].obj)
    state = ClusterState(config)
    apply_documents(path, state, cluster)
    # Tens of thousands of long-lived objects: move them out of the collector's
    # sight so a full collection does not rescan them on the request path.
    gc.collect()
    gc.freeze()
    return Extender(state, SnapshotWriter(state))


def serve(args: argparse.Namespace) -> int:
    import uvicorn

    from .api.app import create_app

    path = args.snapshot or DEFAULT_SNAPSHOT
    try:
        extender = build_from_snapshot(path, args.config)
    except (SnapshotError, ConfigError) as e:
        print(f"quotient: {e}", file=sys.stderr)
        return 2
    config = extender.state.config
    prefix = args.path_prefix if args.path_prefix is not None else config.path_prefix
    state = extender.state
    logging.getLogger("quotient").info(
        "serving snapshot %s: %d nodes, %d pods, %d ClusterQueues on http://%s:%d%s/{filter,prioritize,preempt,bind}",
        path, len(state.nodes), len(state.pods), len(state.cluster_queues), args.host, args.port, prefix)
    uvicorn.run(create_app(extender, prefix, reconcile_interval=config.reconcile_interval), host=args.host, port=args.port, log_level=args.log_level,
                access_log=False)
    return 0


def simulate(args: argparse.Namespace) -> int:
    from .sim.run import run_file

    return run_file(args.file, verbose=not args.quiet)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="quotient", description=__doc__)
    sub = parser.add_subparsers(dest="command", required=True)
    s = sub.add_parser("serve", help="serve the extender verbs (default: the bundled demo snapshot)")
    s.add_argument("--snapshot", help="snapshot file (YAML, JSON, JSON lines); default: bundled demo")
    s.add_argument("--config", help="Configuration file (quotient.dev/v1alpha1)")
    s.add_argument("--host", default="127.0.0.1")
    s.add_argument("--port", type=int, default=8888)
    s.add_argument("--path-prefix", default=None, help="prefix of the verb paths, e.g. /scheduler")
    s.add_argument("--log-level", default="info")
    s.set_defaults(func=serve)
    m = sub.add_parser("simulate", help="run a scenario file through a simulated kube-scheduler")
    m.add_argument("file")
    m.add_argument("-q", "--quiet", action="store_true", help="print only the verdict")
    m.set_defaults(func=simulate)
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO if args.command == "serve" else logging.WARNING,
                        format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    return args.func(args)


if __name__ == "__main__":
    sys.exit(main())
