"""``draxr demo``: the KEP-5004 example end to end (placeholder: plans the embedded example)."""

from __future__ import annotations

import argparse
from typing import TextIO

from . import __version__


def run(args: argparse.Namespace, out: TextIO, err: TextIO) -> int:
    from .cli import examples_dir
    from .plan import run as plan

    out.write(f"draxr {__version__}: planning the KEP-5004 example in {examples_dir()}\n\n")
    return plan([examples_dir()], "table", "binpack", out, err)
