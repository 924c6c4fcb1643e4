"""``draxr serve``: the flags of the admission webhook and the allocation worker.

Each flag's default, and its help where it has one, is the setting's own (``ServeOptions().setting``):
written once, in the settings class of the component it configures.
"""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any, get_args

from ..core.paths.choice import MODES
from ..core.paths.routing import UNSUPPORTED_PODS, Route
from ..runtime.logs import FORMATS, LEVELS
from ..runtime.options import ServeOptions, default_writers
from ..runtime.serve import run
from .flags import (
    add_cel_engine,
    add_placement,
    dns_label,
    dns_subdomain,
    duration,
    fail,
    format_duration,
    label_selector,
    non_empty,
    non_negative_integer,
    non_negative_number,
    port,
    positive_integer,
    positive_number,
)

#: client-go's leader election: renewDeadline must exceed retryPeriod * JitterFactor.
JITTER_FACTOR = 1.2

DEFAULTS = ServeOptions()


def setting(name: str, *, default: bool = True) -> dict[str, Any]:
    """``default`` (unless ``default=False``: a repeatable flag starts from none) and ``help`` of the
    flag that sets ``name`` (a ``ServeOptions`` flat name or field)."""
    value, text = DEFAULTS.setting(name)
    out: dict[str, Any] = {"default": value} if default else {}
    if text is not None:
        out["help"] = text
    return out


def with_default(name: str, shown: str) -> dict[str, Any]:
    """``setting``, its help ending in ``(default: <shown>)``."""
    out = setting(name)
    out["help"] = f"{out['help']} (default: {shown})"
    return out


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    s = sub.add_parser("serve", help="run the admission webhook and the allocation worker")
    s.add_argument("--host", type=non_empty, **setting("host"))
    s.add_argument("--port", type=port, **setting("port"))
    s.add_argument("--cert-dir", type=non_empty, **with_default("cert_dir", f"{DEFAULTS.tls.cert_dir}/"))
    s.add_argument("--no-webhook", action="store_true", help="run only the worker")
    s.add_argument("--no-worker", action="store_true", help="run only the webhook")
    s.add_argument("--kubeconfig", type=non_empty, **setting("kubeconfig"))
    s.add_argument(
        "--snapshot", type=non_empty, action="append", metavar="PATH", **setting("snapshot", default=False)
    )
    s.add_argument("--scheduler-name", type=non_empty, **setting("scheduler_name"))
    s.add_argument("--route", choices=get_args(Route), **setting("route"))
    s.add_argument("--managed-classes", type=label_selector, metavar="SELECTOR", **setting("managed_classes"))
    s.add_argument("--unsupported-pods", choices=UNSUPPORTED_PODS, **setting("unsupported_pods"))
    s.add_argument(
        "--class-read-timeout", type=non_negative_number, metavar="SECONDS", **setting("class_read_timeout")
    )
    s.add_argument(
        "--allowed-writers",
        type=non_empty,
        action="append",
        metavar="USER",
        **setting("allowed_writers", default=False),
    )
    add_placement(s, percentage_help=DEFAULTS.setting("percentage_of_nodes_to_score")[1] or "")
    s.set_defaults(
        policy=DEFAULTS.scheduling.policy,
        percentage_of_nodes_to_score=DEFAULTS.scheduling.percentage_of_nodes_to_score,
    )
    s.add_argument("--mode", choices=MODES, **setting("mode"))
    s.add_argument("--force-rewrite", action="store_true", **setting("force_rewrite"))
    s.add_argument("--apiserver-gate", choices=("auto", "on", "off"), **setting("apiserver_gate"))
    s.add_argument(
        "--gate-probe-interval", type=positive_number, metavar="SECONDS", **setting("gate_probe_interval")
    )
    s.add_argument(
        "--template-grace", type=non_negative_number, metavar="SECONDS", **setting("template_grace")
    )
    s.add_argument("--binding-timeout", type=positive_number, metavar="SECONDS", **setting("binding_timeout"))
    s.add_argument(
        "--no-topology-aware-workload-scheduling",
        dest="topology_aware_workload_scheduling",
        action="store_false",
        **setting("topology_aware_workload_scheduling"),
    )
    s.add_argument(
        "--gang-search-steps", type=non_negative_integer, metavar="N", **setting("gang_search_steps")
    )
    s.add_argument(
        "--no-gang-two-phase-commit",
        dest="gang_two_phase_commit",
        action="store_false",
        **setting("gang_two_phase_commit"),
    )
    s.add_argument("--deployment", type=dns_subdomain, **setting("deployment"))
    s.add_argument("--namespace", type=dns_label, **setting("namespace"))
    s.add_argument("--lease-name", type=dns_subdomain, **setting("lease_name"))
    s.add_argument(
        "--leader-elect-lease-duration", type=positive_number, metavar="SECONDS", **setting("lease_duration")
    )
    s.add_argument(
        "--leader-elect-renew-deadline", type=positive_number, metavar="SECONDS", **setting("renew_deadline")
    )
    s.add_argument(
        "--leader-elect-retry-period", type=positive_number, metavar="SECONDS", **setting("retry_period")
    )
    s.add_argument("--no-leader-elect", dest="leader_elect", action="store_false")
    s.add_argument("--identity", type=non_empty, **setting("identity", default=False))
    s.add_argument(
        "--pod-initial-backoff-seconds",
        type=positive_number,
        metavar="SECONDS",
        **setting("pod_initial_backoff"),
    )
    s.add_argument(
        "--pod-max-backoff-seconds", type=positive_number, metavar="SECONDS", **setting("pod_max_backoff")
    )
    s.add_argument("--qps", type=positive_number, **setting("qps"))
    s.add_argument("--burst", type=positive_integer, **setting("burst"))
    s.add_argument(
        "--read-header-timeout", type=positive_number, metavar="SECONDS", **setting("read_header_timeout")
    )
    s.add_argument(
        "--read-body-timeout", type=positive_number, metavar="SECONDS", **setting("read_body_timeout")
    )
    s.add_argument("--review-threads", type=non_negative_integer, **setting("review_threads"))
    s.add_argument("--max-large-reviews", type=positive_integer, **setting("max_large_reviews"))
    s.add_argument("--log-level", choices=LEVELS, **setting("log_level"))
    s.add_argument("--log-format", choices=FORMATS, **setting("log_format"))
    add_cel_engine(s)
    s.add_argument("--rotate-certificates", action="store_true", **setting("rotate_certificates"))
    for flag, name in (
        ("--cert-validity", "cert_validity"),
        ("--cert-renew-before", "cert_renew_before"),
        ("--ca-validity", "ca_validity"),
    ):
        value, _ = DEFAULTS.setting(name)
        s.add_argument(flag, type=duration, metavar="DURATION", **with_default(name, format_duration(value)))
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
        managed_classes=args.managed_classes,
        unsupported_pods=args.unsupported_pods,
        class_read_timeout=args.class_read_timeout,
        allowed_writers=args.allowed_writers or default_writers(args.namespace),
        policy=args.policy,
        percentage_of_nodes_to_score=args.percentage_of_nodes_to_score,
        mode=args.mode,
        force_rewrite=args.force_rewrite,
        apiserver_gate=args.apiserver_gate,
        gate_probe_interval=args.gate_probe_interval,
        template_grace=args.template_grace,
        binding_timeout=args.binding_timeout,
        topology_aware_workload_scheduling=args.topology_aware_workload_scheduling,
        gang_search_steps=args.gang_search_steps,
        gang_two_phase_commit=args.gang_two_phase_commit,
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
