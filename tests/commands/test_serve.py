"""``draxr serve`` flags reach the options the server runs with."""

from __future__ import annotations

import datetime as dt
from pathlib import Path

from webhook.cli import build_parser
from webhook.commands.serve import serve_options
from webhook.runtime.serve import ServeOptions, default_writers


def test_serve_defaults_are_the_documented_ones() -> None:
    # The flags' defaults and ServeOptions' defaults must not drift apart.
    assert serve_options(build_parser().parse_args(["serve"])) == ServeOptions()


def test_every_serve_flag_is_passed_on() -> None:
    argv = [
        "serve",
        "--host=127.0.0.1",
        "--port=9443",
        "--cert-dir=/tmp/c",
        "--no-worker",
        "--kubeconfig=/k",
        "--snapshot=a.yaml",
        "--snapshot=b.yaml",
        "--scheduler-name=other",
        "--route=always",
        "--class-read-timeout=0.5",
        "--policy=spread",
        "--mode=rewrite",
        "--force-rewrite",
        "--apiserver-gate=off",
        "--gate-probe-interval=30",
        "--template-grace=5",
        "--binding-timeout=120",
        "--no-topology-aware-workload-scheduling",
        "--gang-search-steps=7",
        "--no-gang-two-phase-commit",
        "--deployment=d",
        "--namespace=ops",
        "--lease-name=l",
        "--leader-elect-lease-duration=30",
        "--leader-elect-renew-deadline=20",
        "--leader-elect-retry-period=4",
        "--no-leader-elect",
        "--identity=me",
        "--pod-initial-backoff-seconds=0.5",
        "--pod-max-backoff-seconds=30",
        "--qps=200",
        "--burst=400",
        "--log-level=debug",
        "--read-header-timeout=0.5",
        "--read-body-timeout=1.5",
        "--review-threads=2",
        "--max-large-reviews=8",
        "--rotate-certificates",
        "--cert-validity=12h",
        "--cert-renew-before=1h30m",
        "--ca-validity=30d",
        "--percentage-of-nodes-to-score=30",
    ]
    assert serve_options(build_parser().parse_args(argv)) == ServeOptions(
        host="127.0.0.1",
        port=9443,
        cert_dir=Path("/tmp/c"),
        worker=False,
        kubeconfig="/k",
        snapshot=["a.yaml", "b.yaml"],
        scheduler_name="other",
        route="always",
        class_read_timeout=0.5,
        allowed_writers=default_writers("ops"),  # the writer identity follows the namespace
        policy="spread",
        mode="rewrite",
        force_rewrite=True,
        apiserver_gate="off",
        gate_probe_interval=30.0,
        template_grace=5.0,
        binding_timeout=120.0,
        topology_aware_workload_scheduling=False,
        gang_search_steps=7,
        gang_two_phase_commit=False,
        deployment="d",
        leader_elect=False,
        lease_namespace="ops",
        lease_name="l",
        lease_duration=30.0,
        renew_deadline=20.0,
        retry_period=4.0,
        identity="me",
        pod_initial_backoff=0.5,
        pod_max_backoff=30.0,
        qps=200.0,
        burst=400,
        log_level="debug",
        read_header_timeout=0.5,
        read_body_timeout=1.5,
        review_threads=2,
        max_large_reviews=8,
        rotate_certificates=True,
        cert_validity=dt.timedelta(hours=12),
        cert_renew_before=dt.timedelta(minutes=90),
        ca_validity=dt.timedelta(days=30),
        percentage_of_nodes_to_score=30,
    )
    named = build_parser().parse_args(
        ["serve", "--no-webhook", "--allowed-writers=u1", "--allowed-writers=u2"]
    )
    opts = serve_options(named)
    assert (opts.webhook, opts.worker, opts.admission.allowed_writers) == (
        False,
        True,
        frozenset({"u1", "u2"}),
    )


def test_serve_accepts_the_upstream_policy() -> None:
    args = build_parser().parse_args(["serve", "--policy=upstream"])
    assert serve_options(args).scheduling.policy == "upstream"
