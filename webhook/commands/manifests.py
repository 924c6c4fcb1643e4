"""``draxr manifests``: render the installation manifests to standard output.

The webhook configurations always carry a way for kube-apiserver to trust the webhook:

* by default draxr makes (or keeps, when still valid) a CA and a serving certificate in
  ``--cert-dir`` (``certs/``), renders them into the Secrets ``draxr-webhook-ca`` and
  ``draxr-webhook-tls`` and every hook's ``caBundle``, and says on standard error where the private
  keys went; the worker's leader renews them in the cluster (``serve --rotate-certificates``);
* ``--ca-bundle FILE``: your certificates (``tls.crt``, ``tls.key`` beside ``FILE``; renewed in the
  cluster only when ``ca.key`` is there too);
* ``--cert-manager``: cert-manager's Issuer and Certificate, and its CA injection.

Anything else (``--cert-manager`` with ``--ca-bundle``, a directory that cannot be written) fails
with one line and renders nothing.
"""

from __future__ import annotations

import argparse
import base64
import ipaddress
import sys
from pathlib import Path
from typing import TextIO
from urllib.parse import urlsplit

from ..identity.names import CA_SECRET, DEFAULT_NAMESPACE, OPT_OUT_LABEL, TLS_SECRET, WEBHOOK
from ..identity.pki import DEFAULT_CERT_DIR, DEFAULT_VALIDITY, CertError, parse_bundle
from ..install import monitoring
from ..install.certs import ensure_certs, load_ca_bundle
from ..install.files import dump
from ..install.flowcontrol import DEFAULT_SHARES, MAX_SHARES, MIN_SHARES
from ..install.manifests import render
from ..install.options import (
    DEFAULT_IMAGE,
    FAILURE_POLICIES,
    MAX_TIMEOUT_SECONDS,
    MIN_TIMEOUT_SECONDS,
    ROUTES,
    InstallOptions,
    ManifestError,
)
from ..install.trust import Certificates
from .flags import (
    dns_label,
    dns_subdomain,
    integer_between,
    non_empty,
    one_line,
    optional_label_key,
    webhook_url,
)


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    m = sub.add_parser(
        "manifests",
        help="render the installation manifests",
        description="Render everything to install draxr. By default draxr makes its own CA and serving "
        "certificate in --cert-dir (kept while valid) and its worker renews them in the cluster; "
        "--ca-bundle uses yours, --cert-manager lets cert-manager make and inject them.",
    )
    m.add_argument("--namespace", type=dns_label, default=DEFAULT_NAMESPACE)
    m.add_argument("--image", type=non_empty, default=DEFAULT_IMAGE)
    m.add_argument(
        "--cert-dir",
        type=non_empty,
        metavar="DIR",
        help=f"where draxr makes (or keeps) its CA and serving certificate (default: {DEFAULT_CERT_DIR}/); "
        "the output then carries their private keys in Secrets",
    )
    m.add_argument(
        "--ca-bundle",
        type=non_empty,
        metavar="FILE",
        help="your CA certificate file (the caBundle); tls.crt and tls.key must be beside it",
    )
    m.add_argument(
        "--cert-manager",
        action="store_true",
        help="cert-manager makes the certificate and injects the CA (an Issuer and a Certificate, no Secret)",
    )
    m.add_argument(
        "--webhook-url",
        type=webhook_url,
        metavar="URL",
        help="the webhook configurations call https://HOST[:PORT][/PREFIX] + the hook's path "
        "(clientConfig.url) instead of the Service; for API servers that cannot reach Services "
        "(no kube-proxy: envtest, a local control plane). The certificate must name HOST "
        "(draxr's own certificates do)",
    )
    m.add_argument(
        "--monitoring",
        action="store_true",
        help="also render the worker's metrics Service, a ServiceMonitor and a PrometheusRule "
        "(Prometheus Operator); the Grafana dashboard is manifests/monitoring/grafana-dashboard.json",
    )
    m.add_argument(
        "--failure-policy",
        choices=FAILURE_POLICIES,
        default="Fail",
        help="every hook's failurePolicy (Ignore: availability over draxr's guarantees)",
    )
    m.add_argument(
        "--timeout-seconds",
        type=integer_between(MIN_TIMEOUT_SECONDS, MAX_TIMEOUT_SECONDS),
        default=3,
        metavar="SECONDS",
        help="every hook's timeoutSeconds",
    )
    m.add_argument(
        "--replicas", type=integer_between(1, 100), default=2, help="replicas of each Deployment (default: 2)"
    )
    m.add_argument("--route", choices=ROUTES, default="default-only", help="the webhook's `serve --route`")
    m.add_argument(
        "--opt-out-namespace",
        type=dns_label,
        action="append",
        default=[],
        metavar="NAMESPACE",
        help="a namespace the hooks never see (repeatable; kube-system and draxr's own always)",
    )
    m.add_argument(
        "--opt-out-label",
        type=optional_label_key,
        default=OPT_OUT_LABEL,
        metavar="KEY",
        help=f"namespaces labelled KEY=true are never sent to the hooks (default: {OPT_OUT_LABEL}; "
        "'' turns it off)",
    )
    m.add_argument("--priority-class-name", type=dns_subdomain, help="the pods' priorityClassName")
    m.add_argument(
        "--network-policy",
        action="store_true",
        help="NetworkPolicies: draxr's pods accept connections only on the ports they serve",
    )
    m.add_argument(
        "--no-flow-control",
        dest="flow_control",
        action="store_false",
        help="leave out draxr's FlowSchema and PriorityLevelConfiguration: its requests then share "
        "the apiserver's catch-all service-accounts level with every other controller",
    )
    m.add_argument(
        "--flow-control-shares",
        type=integer_between(MIN_SHARES, MAX_SHARES),
        default=DEFAULT_SHARES,
        metavar="SHARES",
        help=f"nominalConcurrencyShares of draxr's priority level (default: {DEFAULT_SHARES}, as "
        "kube-scheduler's workload-high)",
    )
    m.set_defaults(func=main, parser=m)


def _url_names(url: str | None) -> tuple[list[str], list[str]]:
    """The extra DNS names and IPs draxr's own certificate needs for ``--webhook-url``."""
    host = urlsplit(url).hostname if url else None
    if not host:
        return [], []
    try:
        ipaddress.ip_address(host)
    except ValueError:
        return [host], []
    return [], [host]


def main(args: argparse.Namespace) -> int:
    return run(args, sys.stdout, sys.stderr)


def _conflict(args: argparse.Namespace) -> str | None:
    if args.cert_manager and args.ca_bundle:
        return (
            "--cert-manager and --ca-bundle exclude each other: cert-manager injects its own CA into "
            "caBundle and would replace yours; drop --cert-manager to use your certificates"
        )
    if args.cert_manager and args.cert_dir:
        return "--cert-manager and --cert-dir exclude each other: cert-manager makes the certificate"
    if args.ca_bundle and args.cert_dir:
        return (
            "--ca-bundle and --cert-dir exclude each other: --ca-bundle uses your certificates, "
            "--cert-dir is where draxr makes its own"
        )
    if args.cert_manager and args.webhook_url:
        return (
            "--cert-manager and --webhook-url exclude each other: the Certificate names only the "
            "Service; use --ca-bundle or draxr's own certificates"
        )
    return None


def _own_certificates(args: argparse.Namespace, err: TextIO) -> Certificates:
    """Make or keep draxr's CA and serving certificate in the cert directory (``CertError``)."""
    directory = Path(args.cert_dir or DEFAULT_CERT_DIR)
    dns, ips = _url_names(args.webhook_url)
    paths = ensure_certs(
        directory, WEBHOOK, args.namespace, extra_dns=dns, extra_ips=ips, days=DEFAULT_VALIDITY.days
    )
    bundle = paths.ca_cert.read_bytes()
    certs = Certificates.from_dir(directory, bundle)
    if paths.ca_cert in paths.written:
        what = "made a CA and a serving certificate"
    elif paths.written:
        what = f"made a serving certificate ({paths.reason}) under the CA"
    else:
        what = "kept the CA and serving certificate"
    err.write(
        f"draxr manifests: {what} for {WEBHOOK}.{args.namespace}.svc in {directory}/ (ca.key and "
        "tls.key are private keys: keep them secret, never commit them); the output carries them in "
        f"the Secrets {CA_SECRET} and {TLS_SECRET}: treat it as a secret too\n"
    )
    return certs


def _your_certificates(args: argparse.Namespace, err: TextIO) -> Certificates | str:
    """The certificates beside ``--ca-bundle``, or why they cannot be used."""
    try:
        bundle_b64 = load_ca_bundle(args.ca_bundle)
    except (CertError, OSError) as e:
        return f"--ca-bundle {args.ca_bundle}: {one_line(str(e))}"
    candidate = Path(args.ca_bundle)
    cert_dir = candidate if candidate.is_dir() else candidate.parent
    if not all((cert_dir / f).is_file() for f in ("tls.crt", "tls.key")):
        return f"{cert_dir} must also hold tls.crt and tls.key (run `draxr certs` first)"
    bundle = base64.b64decode(bundle_b64)
    try:
        certs = Certificates.from_dir(cert_dir, bundle)
    except OSError as e:
        return f"--ca-bundle {args.ca_bundle}: {one_line(str(e))}"
    if not certs.renewable:
        expiry = parse_bundle(certs.tls_crt)[0].not_valid_after_utc
        err.write(
            f"draxr manifests: no ca.key in {cert_dir}/, so draxr will not renew the serving certificate "
            f"in the cluster: renew it yourself before {expiry:%Y-%m-%d}\n"
        )
    return certs


def run(args: argparse.Namespace, out: TextIO, err: TextIO) -> int:
    def fail(message: str) -> int:
        err.write(f"draxr manifests: error: {one_line(message)}\n")
        return 2

    problem = _conflict(args)
    if problem:
        return fail(problem)
    try:
        options = InstallOptions(
            namespace=args.namespace,
            image=args.image,
            webhook_replicas=args.replicas,
            worker_replicas=args.replicas,
            priority_class_name=args.priority_class_name or "",
            failure_policy=args.failure_policy,
            timeout_seconds=args.timeout_seconds,
            route=args.route,
            opt_out_namespaces=tuple(args.opt_out_namespace),
            opt_out_label=args.opt_out_label,
            webhook_url=args.webhook_url,
            network_policy=args.network_policy,
            flow_control=args.flow_control,
            flow_control_shares=args.flow_control_shares,
        )
        certificates: Certificates | None = None
        if args.ca_bundle:
            mine = _your_certificates(args, err)
            if isinstance(mine, str):
                return fail(mine)
            certificates = mine
        elif not args.cert_manager:
            certificates = _own_certificates(args, err)
        objects = render(options, certificates=certificates, cert_manager=args.cert_manager)
    except (CertError, ManifestError, OSError) as e:
        return fail(str(e))
    if args.monitoring:
        objects += monitoring.render(args.namespace)
    out.write(dump(objects))
    return 0
