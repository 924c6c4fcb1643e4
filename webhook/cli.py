"""The ``draxr`` command line: serve, plan, certs, manifests, validate, convert.

A bad flag or value, and any failure a command does not handle itself, ends with one line on
standard error and a non-zero exit status, never a traceback (``commands.flags``).
"""

from __future__ import annotations

import argparse
import sys

from . import __version__
from .commands import certs, convert, manifests, plan, serve, validate
from .commands.flags import OneLineParser, print_error, report

COMMANDS = (serve, plan, certs, manifests, validate, convert)
DESCRIPTION = (
    "draxr: KEP-5004 for real clusters, extended resource requests served by DRA devices. "
    "A bad flag or value, or any failure, ends with one line on standard error and a non-zero "
    "exit status."
)


def build_parser() -> argparse.ArgumentParser:
    parser = OneLineParser(prog="draxr", description=DESCRIPTION)
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
    except Exception as e:  # a bug or an unforeseen failure: one line, not a traceback
        print_error(report(args.command, e))
        return 1
    return code


if __name__ == "__main__":
    sys.exit(main())
