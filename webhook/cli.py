"""The ``draxr`` command line: serve, plan, certs, manifests, validate, demo."""

from __future__ import annotations

import argparse
import json
import sys
from importlib import resources
from pathlib import Path
from typing import TYPE_CHECKING

from . import __version__

if TYPE_CHECKING:
    from .serve import ServeOptions


def examples_dir() -> Path:
    """The embedded KEP-5004 example (``examples/kep-5004`` in the source tree)."""
    return Path(str(resources.files("webhook") / "data" / "examples" / "kep-5004"))


def _plan(args: argparse.Namespace) -> int:
    from .plan import run

    return run(args.filename, args.output, args.policy, sys.stdout, sys.stderr)


def serve_options(args: argparse.Namespace) -> ServeOptions:
    """``draxr serve`` flags as the options ``serve.run`` takes."""
    from .serve import ServeOptions, default_writers

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
        identity=args.identity or "",
        qps=args.qps,
        burst=args.burst,
        log_level=args.log_level,
    )


def _serve(args: argparse.Namespace) -> int:
    from .serve import run

    return run(serve_options(args))


def _certs(args: argparse.Namespace) -> int:
    from .certs import CertError, describe, ensure_certs

    try:
        paths = ensure_certs(
            args.out, args.service, args.namespace, extra_dns=args.dns, extra_ips=args.ip, days=args.days
        )
    except CertError as e:
        print(f"error: {e}", file=sys.stderr)
        return 1
    written = ", ".join(Path(p).name for p in paths.written) or "nothing (existing files are valid)"
    print(f"{paths.reason or 'certificates checked'}; wrote {written}", file=sys.stderr)
    print(json.dumps(describe(paths), indent=2, default=str))
    return 0


def _validate(args: argparse.Namespace) -> int:
    from .validate_cmd import run

    return run(args.filename, sys.stdout, sys.stderr)


def _manifests(args: argparse.Namespace) -> int:
    from .manifests import run

    return run(args, sys.stdout, sys.stderr)


def _demo(args: argparse.Namespace) -> int:
    from .demo import run

    return run(args, sys.stdout, sys.stderr)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="draxr", description=__doc__)
    parser.add_argument("--version", action="version", version=f"draxr {__version__}")
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")

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
    s.add_argument("--no-leader-elect", dest="leader_elect", action="store_false")
    s.add_argument("--identity", help="leader election identity (default: hostname_pid)")
    s.add_argument("--qps", type=float, default=50.0, help="client-side write rate limit")
    s.add_argument("--burst", type=int, default=100)
    s.add_argument("--log-level", default="info", choices=("debug", "info", "warning", "error"))
    s.set_defaults(func=_serve)

    p = sub.add_parser("plan", help="schedule pods offline on cluster manifests")
    p.add_argument(
        "-f",
        "--filename",
        action="append",
        required=True,
        metavar="PATH",
        help="YAML/JSON file or directory (repeatable)",
    )
    p.add_argument("-o", "--output", choices=("table", "json"), default="table")
    p.add_argument("--policy", choices=("binpack", "spread"), default="binpack")
    p.set_defaults(func=_plan)

    c = sub.add_parser("certs", help="create (or keep) the webhook's CA and serving certificate")
    c.add_argument("--out", default="certs")
    c.add_argument("--service", default="draxr-webhook")
    c.add_argument("--namespace", default="draxr-system")
    c.add_argument("--dns", action="append", default=[], help="extra DNS name (repeatable)")
    c.add_argument("--ip", action="append", default=[], help="extra IP address (repeatable)")
    c.add_argument("--days", type=int, default=365)
    c.set_defaults(func=_certs)

    m = sub.add_parser("manifests", help="render the installation manifests")
    m.add_argument("--namespace", default="draxr-system")
    m.add_argument("--image", default="ghcr.io/draxr/draxr:0.1.0")
    m.add_argument("--ca-bundle", help="CA certificate file (for the webhook configurations' caBundle)")
    m.add_argument(
        "--cert-manager",
        action="store_true",
        help="use cert-manager CA injection instead of a literal caBundle",
    )
    m.set_defaults(func=_manifests)

    v = sub.add_parser("validate", help="run the webhook's checks offline on manifest files")
    v.add_argument("-f", "--filename", action="append", required=True, metavar="PATH")
    v.set_defaults(func=_validate)

    d = sub.add_parser("demo", help="run the KEP-5004 example end to end")
    d.add_argument("--timeout", type=float, default=60.0)
    d.set_defaults(func=_demo)
    return parser


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    try:
        code: int = args.func(args)
    except BrokenPipeError:  # `draxr plan ... | head` is fine
        return 0
    except KeyboardInterrupt:
        return 130
    return code


if __name__ == "__main__":
    sys.exit(main())
