"""``draxr serve``: the flags of the admission webhook and the allocation worker."""

from __future__ import annotations

import argparse
from pathlib import Path

from ..admission.config import MAX_LARGE_REVIEWS, REVIEW_THREADS
from ..core.paths.choice import MODES
from ..install.certs import DEFAULT_CA_VALIDITY, DEFAULT_CERT_DIR, DEFAULT_RENEW_BEFORE, DEFAULT_VALIDITY
from ..install.manifests import DEFAULT_NAMESPACE, LEASE, WEBHOOK
from ..runtime.logs import FORMATS, LEVELS
from ..runtime.serve import ServeOptions, default_writers, run
from ..runtime.timeouts import DEFAULT_BODY_TIMEOUT, DEFAULT_HEADER_TIMEOUT
from .flags import (
    add_cel_engine,
    add_placement,
    dns_label,
    dns_subdomain,
    duration,
    fail,
    format_duration,
    non_empty,
    non_negative_integer,
    non_negative_number,
    port,
    positive_integer,
    positive_number,
)

#: client-go's leader election: renewDeadline must exceed retryPeriod * JitterFactor.
JITTER_FACTOR = 1.2


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    s = sub.add_parser("serve", help="run the admission webhook and the allocation worker")
    s.add_argument("--host", type=non_empty, default="0.0.0.0")
    s.add_argument("--port", type=port, default=8443)
    s.add_argument(
        "--cert-dir",
        type=non_empty,
        default=DEFAULT_CERT_DIR,
        help=f"holds ca.crt, tls.crt, tls.key (default: {DEFAULT_CERT_DIR}/)",
    )
    s.add_argument("--no-webhook", action="store_true", help="run only the worker")
    s.add_argument("--no-worker", action="store_true", help="run only the webhook")
    s.add_argument("--kubeconfig", type=non_empty, help="default: in-cluster config, then ~/.kube/config")
    s.add_argument(
        "--snapshot",
        type=non_empty,
        action="append",
        metavar="PATH",
        help="serve the webhook from manifest files instead of a cluster (with --no-worker)",
    )
    s.add_argument("--scheduler-name", type=non_empty, default="draxr")
    s.add_argument("--route", choices=("default-only", "always", "never"), default="default-only")
    s.add_argument(
        "--class-read-timeout",
        type=non_negative_number,
        default=2.0,
        metavar="SECONDS",
        help="when the cache knows no DeviceClass for a name a new pod asks for, wait this long for a "
        "fresh list from the API server before routing (0: trust the cache)",
    )
    s.add_argument(
        "--allowed-writers",
        type=non_empty,
        action="append",
        metavar="USER",
        help="identities allowed to write special claims and pod mappings (repeatable)",
    )
    add_placement(
        s,
        percentage_help="stop filtering once this share of the nodes fit and score only those, as "
        "kube-scheduler's percentageOfNodesToScore (0: adaptive, 50%% minus 1 per 125 nodes, at least 5%% "
        "and 100 nodes; 100: every node)",
    )
    s.add_argument(
        "--mode",
        choices=MODES,
        default="auto",
        help="the path of pods asking for DRA-backed names: native (KEP-5004), rewrite (into DRA claims), "
        "off; auto picks per pod from DRAExtendedResource on the apiserver and the kubelets",
    )
    s.add_argument(
        "--force-rewrite",
        action="store_true",
        help="rewrite even pods whose names a Ready node's device plugin advertises",
    )
    s.add_argument(
        "--apiserver-gate",
        choices=("auto", "on", "off"),
        default="auto",
        help="whether kube-apiserver keeps the KEP-5004 fields; auto probes with a dry-run create",
    )
    s.add_argument(
        "--gate-probe-interval",
        type=positive_number,
        default=300.0,
        metavar="SECONDS",
        help="how often auto re-probes",
    )
    s.add_argument(
        "--template-grace",
        type=non_negative_number,
        default=60.0,
        metavar="SECONDS",
        help="delete a rewrite ResourceClaimTemplate no pod has used for this long",
    )
    s.add_argument(
        "--deployment",
        type=dns_subdomain,
        default=WEBHOOK,
        help="draxr's webhook Deployment (mode Events)",
    )
    s.add_argument(
        "--namespace",
        type=dns_label,
        default=DEFAULT_NAMESPACE,
        help="draxr's namespace (lease, default writers)",
    )
    s.add_argument("--lease-name", type=dns_subdomain, default=LEASE)
    s.add_argument(
        "--leader-elect-lease-duration",
        type=positive_number,
        default=15.0,
        metavar="SECONDS",
        help="how long followers wait after the last renewal before taking over",
    )
    s.add_argument(
        "--leader-elect-renew-deadline",
        type=positive_number,
        default=10.0,
        metavar="SECONDS",
        help="a leader that cannot renew for this long stops writing (less than the lease duration)",
    )
    s.add_argument(
        "--leader-elect-retry-period",
        type=positive_number,
        default=2.0,
        metavar="SECONDS",
        help="how often to try to acquire or renew the lease",
    )
    s.add_argument("--no-leader-elect", dest="leader_elect", action="store_false")
    s.add_argument("--identity", type=non_empty, help="leader election identity (default: hostname_pid)")
    s.add_argument(
        "--pod-initial-backoff-seconds",
        type=positive_number,
        default=1.0,
        metavar="SECONDS",
        help="backoff after a pod's first failed attempt; doubles per attempt",
    )
    s.add_argument("--pod-max-backoff-seconds", type=positive_number, default=60.0, metavar="SECONDS")
    s.add_argument("--qps", type=positive_number, default=50.0, help="client-side write rate limit")
    s.add_argument("--burst", type=positive_integer, default=100)
    s.add_argument(
        "--read-header-timeout",
        type=positive_number,
        default=DEFAULT_HEADER_TIMEOUT,
        metavar="SECONDS",
        help="close a connection whose request line and headers take longer to arrive (slow clients)",
    )
    s.add_argument(
        "--read-body-timeout",
        type=positive_number,
        default=DEFAULT_BODY_TIMEOUT,
        metavar="SECONDS",
        help="close a connection whose request body takes longer to arrive after its headers",
    )
    s.add_argument(
        "--review-threads",
        type=non_negative_integer,
        default=REVIEW_THREADS,
        help="threads answering admission reviews over 64 KiB, off the event loop (0: on it)",
    )
    s.add_argument(
        "--max-large-reviews",
        type=positive_integer,
        default=MAX_LARGE_REVIEWS,
        help="admission reviews over 64 KiB in flight at once; more are refused with HTTP 429",
    )
    s.add_argument("--log-level", default="info", choices=LEVELS)
    s.add_argument(
        "--log-format",
        default="text",
        choices=FORMATS,
        help="text: one line per event with key=value context, for people (the default); "
        "json: one JSON object per line, for log pipelines",
    )
    add_cel_engine(s)
    s.add_argument(
        "--rotate-certificates",
        action="store_true",
        help="the worker's leader renews the webhook's self-managed certificates (the Secrets "
        "draxr-webhook-ca and draxr-webhook-tls, the webhook configurations' caBundle) before they expire",
    )
    s.add_argument(
        "--cert-validity",
        type=duration,
        default=DEFAULT_VALIDITY,
        metavar="DURATION",
        help=f"lifetime of a renewed serving certificate (default: {format_duration(DEFAULT_VALIDITY)})",
    )
    s.add_argument(
        "--cert-renew-before",
        type=duration,
        default=DEFAULT_RENEW_BEFORE,
        metavar="DURATION",
        help="renew a serving certificate this long before it expires "
        f"(default: {format_duration(DEFAULT_RENEW_BEFORE)})",
    )
    s.add_argument(
        "--ca-validity",
        type=duration,
        default=DEFAULT_CA_VALIDITY,
        metavar="DURATION",
        help="lifetime of a renewed CA; a CA is renewed once it could not outlive a serving certificate "
        f"and its renewal window (default: {format_duration(DEFAULT_CA_VALIDITY)})",
    )
    s.set_defaults(func=main, parser=s)


def check_together(args: argparse.Namespace, parser: argparse.ArgumentParser) -> None:
    """Values that are wrong only together (client-go's and kube-scheduler's own checks)."""
    lease, renew, retry = (
        args.leader_elect_lease_duration,
        args.leader_elect_renew_deadline,
        args.leader_elect_retry_period,
    )
    if not lease > renew:
        fail(
            parser,
            f"--leader-elect-lease-duration ({lease:g}) must be greater than "
            f"--leader-elect-renew-deadline ({renew:g})",
        )
    if not renew > retry * JITTER_FACTOR:
        fail(
            parser,
            f"--leader-elect-renew-deadline ({renew:g}) must be greater than "
            f"{JITTER_FACTOR:g} times --leader-elect-retry-period ({retry:g})",
        )
    if args.pod_max_backoff_seconds < args.pod_initial_backoff_seconds:
        fail(
            parser,
            f"--pod-max-backoff-seconds ({args.pod_max_backoff_seconds:g}) must not be less than "
            f"--pod-initial-backoff-seconds ({args.pod_initial_backoff_seconds:g})",
        )
    validity, renew, ca = args.cert_validity, args.cert_renew_before, args.ca_validity
    if not renew < validity:
        fail(
            parser,
            f"--cert-renew-before ({format_duration(renew)}) must be less than "
            f"--cert-validity ({format_duration(validity)})",
        )
    if not ca > validity + renew:
        fail(
            parser,
            f"--ca-validity ({format_duration(ca)}) must be longer than --cert-validity plus "
            f"--cert-renew-before ({format_duration(validity + renew)})",
        )
    if args.no_webhook and args.no_worker:
        fail(parser, "--no-webhook and --no-worker together leave nothing to run")


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
        percentage_of_nodes_to_score=args.percentage_of_nodes_to_score,
        mode=args.mode,
        force_rewrite=args.force_rewrite,
        apiserver_gate=args.apiserver_gate,
        gate_probe_interval=args.gate_probe_interval,
        template_grace=args.template_grace,
        deployment=args.deployment,
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
        log_format=args.log_format,
        read_header_timeout=args.read_header_timeout,
        read_body_timeout=args.read_body_timeout,
        review_threads=args.review_threads,
        max_large_reviews=args.max_large_reviews,
        cel_engine=args.cel_engine,
        rotate_certificates=args.rotate_certificates,
        cert_validity=args.cert_validity,
        cert_renew_before=args.cert_renew_before,
        ca_validity=args.ca_validity,
    )


def main(args: argparse.Namespace) -> int:
    check_together(args, args.parser)
    return run(serve_options(args))
