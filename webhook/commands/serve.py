"""``draxr serve``: the flags of the admission webhook and the allocation worker."""

from __future__ import annotations

import argparse
from pathlib import Path

from ..core.cel import DEFAULT_ENGINE, ENGINES
from ..runtime.serve import ServeOptions, default_writers, run


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    s = sub.add_parser("serve", help="run the admission webhook and the allocation worker")
    s.add_argument("--host", default="0.0.0.0")
    s.add_argument("--port", type=int, default=8443)
    s.add_argument("--cert-dir", default="certs", help="holds ca.crt, tls.crt, tls.key (default: certs/)")
    s.add_argument("--no-webhook", action="store_true", help="run only the worker")
    s.add_argument("--no-worker", action="store_true", help="run only the webhook")
    s.add_argument("--kubeconfig", help="default: in-cluster config, then ~/.kube/config")
    s.add_argument(
        "--snapshot",
        action="append",
        metavar="PATH",
        help="serve the webhook from manifest files instead of a cluster (with --no-worker)",
    )
    s.add_argument("--scheduler-name", default="draxr")
    s.add_argument("--route", choices=("default-only", "always", "never"), default="default-only")
    s.add_argument(
        "--class-read-timeout",
        type=float,
        default=2.0,
        metavar="SECONDS",
        help="when the cache knows no DeviceClass for a name a new pod asks for, wait this long for a "
        "fresh list from the API server before routing (0: trust the cache)",
    )
    s.add_argument(
        "--allowed-writers",
        action="append",
        metavar="USER",
        help="identities allowed to write special claims and pod mappings (repeatable)",
    )
    s.add_argument("--policy", choices=("binpack", "spread"), default="binpack")
    s.add_argument("--namespace", default="draxr-system", help="draxr's namespace (lease, default writers)")
    s.add_argument("--lease-name", default="draxr-worker")
    s.add_argument(
        "--leader-elect-lease-duration",
        type=float,
        default=15.0,
        metavar="SECONDS",
        help="how long followers wait after the last renewal before taking over",
    )
    s.add_argument(
        "--leader-elect-renew-deadline",
        type=float,
        default=10.0,
        metavar="SECONDS",
        help="a leader that cannot renew for this long stops writing (less than the lease duration)",
    )
    s.add_argument(
        "--leader-elect-retry-period",
        type=float,
        default=2.0,
        metavar="SECONDS",
        help="how often to try to acquire or renew the lease",
    )
    s.add_argument("--no-leader-elect", dest="leader_elect", action="store_false")
    s.add_argument("--identity", help="leader election identity (default: hostname_pid)")
    s.add_argument(
        "--pod-initial-backoff-seconds",
        type=float,
        default=1.0,
        metavar="SECONDS",
        help="backoff after a pod's first failed attempt; doubles per attempt",
    )
    s.add_argument("--pod-max-backoff-seconds", type=float, default=60.0, metavar="SECONDS")
    s.add_argument("--qps", type=float, default=50.0, help="client-side write rate limit")
    s.add_argument("--burst", type=int, default=100)
    s.add_argument("--log-level", default="info", choices=("debug", "info", "warning", "error"))
    s.add_argument(
        "--cel-engine",
        choices=ENGINES,
        default=None,
        help="CEL engine of DeviceClass and request selectors; cel-rust needs the cel-fast extra "
        f"(default: {DEFAULT_ENGINE}, the reference)",
    )
    s.set_defaults(func=main)


def serve_options(args: argparse.Namespace) -> ServeOptions:
    """``draxr serve`` flags as the options ``runtime.serve.run`` takes."""
    return ServeOptions(
        host=args.host,
        port=args.port,
        cert_dir=Path(args.cert_dir),
        webhook=not args.no_webhook,
        worker=not args.no_worker,
        kubeconfig=args.kubeconfig,
        snapshot=args.snapshot or [],
        scheduler_name=args.scheduler_name,
        route=args.route,
        class_read_timeout=args.class_read_timeout,
        allowed_writers=args.allowed_writers or default_writers(args.namespace),
        policy=args.policy,
        leader_elect=args.leader_elect,
        lease_namespace=args.namespace,
        lease_name=args.lease_name,
        lease_duration=args.leader_elect_lease_duration,
        renew_deadline=args.leader_elect_renew_deadline,
        retry_period=args.leader_elect_retry_period,
        identity=args.identity or "",
        pod_initial_backoff=args.pod_initial_backoff_seconds,
        pod_max_backoff=args.pod_max_backoff_seconds,
        qps=args.qps,
        burst=args.burst,
        log_level=args.log_level,
        cel_engine=args.cel_engine,
    )


def main(args: argparse.Namespace) -> int:
    return run(serve_options(args))
