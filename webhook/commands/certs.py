"""``draxr certs``: create (or keep) the webhook's CA and serving certificate."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from ..install.certs import MAX_DAYS, CertError, describe, ensure_certs
from .flags import dns_label, dns_subdomain, integer_between, ip_address, non_empty, one_line


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    c = sub.add_parser("certs", help="create (or keep) the webhook's CA and serving certificate")
    c.add_argument("--out", type=non_empty, default="certs")
    c.add_argument("--service", type=dns_label, default="draxr-webhook")
    c.add_argument("--namespace", type=dns_label, default="draxr-system")
    c.add_argument(
        "--dns", type=dns_subdomain, action="append", default=[], help="extra DNS name (repeatable)"
    )
    c.add_argument("--ip", type=ip_address, action="append", default=[], help="extra IP address (repeatable)")
    c.add_argument("--days", type=integer_between(1, MAX_DAYS), default=365)
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
    print(json.dumps(describe(paths), indent=2, default=str))
    return 0
