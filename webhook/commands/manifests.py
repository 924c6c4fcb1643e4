"""``draxr manifests``: render the installation manifests to standard output."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import TextIO
from urllib.parse import urlsplit

from ..install import monitoring
from ..install.certs import CertError, load_ca_bundle
from ..install.manifests import DEFAULT_IMAGE, DEFAULT_NAMESPACE, dump, render
from .flags import dns_label, non_empty, one_line


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    m = sub.add_parser("manifests", help="render the installation manifests")
    m.add_argument("--namespace", type=dns_label, default=DEFAULT_NAMESPACE)
    m.add_argument("--image", type=non_empty, default=DEFAULT_IMAGE)
    m.add_argument("--ca-bundle", help="CA certificate file (for the webhook configurations' caBundle)")
    m.add_argument(
        "--cert-manager",
        action="store_true",
        help="use cert-manager CA injection instead of a literal caBundle",
    )
    m.add_argument(
        "--webhook-url",
        type=webhook_url,
        metavar="URL",
        help="the webhook configurations call https://HOST[:PORT][/PREFIX] + the hook's path "
        "(clientConfig.url) instead of the Service; for API servers that cannot reach Services "
        "(no kube-proxy: envtest, a local control plane). The certificate must name HOST",
    )
    m.add_argument(
        "--monitoring",
        action="store_true",
        help="also render the worker's metrics Service, a ServiceMonitor and a PrometheusRule "
        "(Prometheus Operator); the Grafana dashboard is manifests/monitoring/grafana-dashboard.json",
    )
    m.set_defaults(func=main)


def url_problem(url: str) -> str | None:
    """Why kube-apiserver would reject ``url`` as a webhook's ``clientConfig.url`` base, or None."""
    try:
        parts = urlsplit(url)
        _ = parts.port  # raises on a malformed port
    except ValueError as e:
        return str(e)
    if parts.scheme != "https":
        return "the scheme must be https"
    if not parts.hostname:
        return "no host"
    if parts.username or parts.password:
        return "user information is not allowed"
    if parts.query or parts.fragment or url.endswith(("?", "#")):
        return "a query or fragment is not allowed"
    return None


def webhook_url(text: str) -> str:
    """``--webhook-url``'s type: a URL kube-apiserver accepts as a webhook's ``clientConfig.url``."""
    problem = url_problem(text)
    if problem is not None:
        raise argparse.ArgumentTypeError(f"{text!r}: {problem}")
    return text


def main(args: argparse.Namespace) -> int:
    return run(args, sys.stdout, sys.stderr)


def run(args: argparse.Namespace, out: TextIO, err: TextIO) -> int:
    url = getattr(args, "webhook_url", None)
    ca_bundle = None
    cert_dir = None
    if args.ca_bundle:
        try:
            ca_bundle = load_ca_bundle(args.ca_bundle)
        except (CertError, OSError) as e:
            err.write(f"draxr manifests: error: --ca-bundle {args.ca_bundle}: {one_line(str(e))}\n")
            return 2
        candidate = Path(args.ca_bundle)
        cert_dir = candidate if candidate.is_dir() else candidate.parent
        if not all((cert_dir / f).is_file() for f in ("tls.crt", "tls.key")):
            err.write(
                f"draxr manifests: error: {cert_dir} must also hold tls.crt and tls.key "
                "(run `draxr certs` first)\n"
            )
            return 2
    objects = render(
        args.namespace,
        args.image,
        ca_bundle=ca_bundle,
        cert_dir=cert_dir,
        cert_manager=args.cert_manager,
        webhook_url=url,
    )
    if getattr(args, "monitoring", False):
        objects += monitoring.render(args.namespace)
    out.write(dump(objects))
    return 0
