"""``draxr certs``: create (or keep) the webhook's CA and serving certificate."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from ..install.certs import CertError, describe, ensure_certs


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    c = sub.add_parser("certs", help="create (or keep) the webhook's CA and serving certificate")
    c.add_argument("--out", default="certs")
    c.add_argument("--service", default="draxr-webhook")
    c.add_argument("--namespace", default="draxr-system")
    c.add_argument("--dns", action="append", default=[], help="extra DNS name (repeatable)")
    c.add_argument("--ip", action="append", default=[], help="extra IP address (repeatable)")
    c.add_argument("--days", type=int, default=365)
    c.set_defaults(func=main)


def main(args: argparse.Namespace) -> int:
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
