"""``draxr certs``: create (or keep) the webhook's CA and serving certificate."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any, TextIO

from ..identity.names import DEFAULT_NAMESPACE, WEBHOOK
from ..identity.pki import DEFAULT_CERT_DIR, CertError
from ..install.certs import MAX_DAYS, describe, ensure_certs
from .flags import dns_label, dns_subdomain, integer_between, ip_address, non_empty, one_line
from .text import MACHINE_FORMATS, write_data


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    c = sub.add_parser("certs", help="create (or keep) the webhook's CA and serving certificate")
    c.add_argument("--out", type=non_empty, default=DEFAULT_CERT_DIR)
    c.add_argument("--service", type=dns_label, default=WEBHOOK)
    c.add_argument("--namespace", type=dns_label, default=DEFAULT_NAMESPACE)
    c.add_argument(
        "--dns", type=dns_subdomain, action="append", default=[], help="extra DNS name (repeatable)"
    )
    c.add_argument("--ip", type=ip_address, action="append", default=[], help="extra IP address (repeatable)")
    c.add_argument("--days", type=integer_between(1, MAX_DAYS), default=365)
    c.add_argument(
        "-o",
        "--output",
        choices=("text", *MACHINE_FORMATS),
        default="text",
        help="text: what was done, in sentences; json or yaml: both certificates' details",
    )
    c.set_defaults(func=main)


def main(args: argparse.Namespace) -> int:
    try:
        paths = ensure_certs(
            args.out, args.service, args.namespace, extra_dns=args.dns, extra_ips=args.ip, days=args.days
        )
    except (CertError, OSError) as e:
        print(f"draxr certs: error: {one_line(str(e))}", file=sys.stderr)
        return 1
    written = ", ".join(Path(p).name for p in paths.written) or "nothing (existing files are valid)"
    print(f"{paths.reason or 'certificates checked'}; wrote {written}", file=sys.stderr)
    output = getattr(args, "output", "text")
    if output in MACHINE_FORMATS:
        write_data(describe(paths), output, sys.stdout)
    else:
        write_text(describe(paths), sys.stdout)
    return 0


def _day(timestamp: Any) -> str:
    return str(timestamp)[:10]


def write_text(info: dict[str, Any], out: TextIO) -> None:
    """Both certificates in sentences: where they are, what they name, until when."""
    directory = Path(info["directory"])
    ca, serving = info["ca"], info["serving"]
    out.write(f"CA {directory / 'ca.crt'} ({ca['subject']}) is valid until {_day(ca['not_after'])}.\n")
    names = [*serving["dns_names"], *serving["ip_addresses"]]
    out.write(
        f"Serving certificate {directory / 'tls.crt'} (key tls.key) names {', '.join(names)}, "
        f"is signed by {serving['issuer']} and is valid until {_day(serving['not_after'])}.\n"
    )
    out.write(
        f"Next: draxr manifests --ca-bundle {directory / 'ca.crt'} | kubectl apply -f - "
        "(the private keys stay in this directory).\n"
    )
