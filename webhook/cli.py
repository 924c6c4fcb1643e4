"""The ``draxr`` command line: serve, plan, certs, manifests, validate, demo."""

from __future__ import annotations

import argparse
import sys

from . import __version__
from .commands import certs, demo, manifests, plan, serve, validate

COMMANDS = (serve, plan, certs, manifests, validate, demo)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="draxr", description=__doc__)
    parser.add_argument("--version", action="version", version=f"draxr {__version__}")
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    for command in COMMANDS:
        command.register(sub)
    return parser


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        code: int = args.func(args)
    except BrokenPipeError:  # `draxr plan ... | head` is fine
        return 0
    except KeyboardInterrupt:
        return 130
    return code


if __name__ == "__main__":
    sys.exit(main())
