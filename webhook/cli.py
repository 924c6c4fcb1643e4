"""The ``draxr`` command line: serve, plan, certs, manifests, validate, demo."""

from __future__ import annotations

import argparse
import sys
from importlib import resources
from pathlib import Path

from . import __version__


def examples_dir() -> Path:
    """The embedded KEP-5004 example (``examples/kep-5004`` in the source tree)."""
    return Path(str(resources.files("webhook") / "data" / "examples" / "kep-5004"))


def _plan(args: argparse.Namespace) -> int:
    from .plan import run

    return run(args.filename, args.output, args.policy, sys.stdout, sys.stderr)


def _demo(args: argparse.Namespace) -> int:
    from .plan import run

    print(f"draxr {__version__}: planning the KEP-5004 example in {examples_dir()}\n")
    return run([examples_dir()], "table", "binpack", sys.stdout, sys.stderr)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="draxr", description=__doc__)
    parser.add_argument("--version", action="version", version=f"draxr {__version__}")
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")

    p = sub.add_parser("plan", help="schedule pods offline on cluster manifests")
    p.add_argument(
        "-f",
        "--filename",
        action="append",
        required=True,
        metavar="PATH",
        help="YAML/JSON file or directory (repeatable)",
    )
    p.add_argument("-o", "--output", choices=("table", "json"), default="table")
    p.add_argument("--policy", choices=("binpack", "spread"), default="binpack")
    p.set_defaults(func=_plan)

    d = sub.add_parser("demo", help="run the KEP-5004 example end to end")
    d.set_defaults(func=_demo)
    return parser


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    try:
        code: int = args.func(args)
    except BrokenPipeError:  # `draxr plan ... | head` is fine
        return 0
    except KeyboardInterrupt:
        return 130
    return code


if __name__ == "__main__":
    sys.exit(main())
