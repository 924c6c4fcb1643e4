"""``python -m e2e.images [--pause PATH] [--json]``: builds what is missing and prints each image's
tarball, reference, sizes and the time its step took (cold build or cache lookup)."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from .build import Builder, Built, ImageError, cache_dir


def _mb(n: int) -> str:
    return f"{n / 1e6:.1f} MB"


def _line(b: Built) -> str:
    how = f"cached {b.seconds:.1f}s (cold {b.cold_seconds:.1f}s)" if b.cached else f"built {b.seconds:.1f}s"
    return (
        f"{b.name:<18} {b.ref}\n  {b.tarball}\n  tarball {_mb(b.tarball_bytes)}, gzip {_mb(b.gzip_bytes)}, "
        f"unpacked {_mb(b.unpacked_bytes)}; {how}"
    )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m e2e.images", description=__doc__)
    parser.add_argument("--pause", type=Path, help="a static pause binary: also build the pause image")
    parser.add_argument("--json", action="store_true", help="one JSON object per image, one per line")
    parser.add_argument("--cache", type=Path, default=None, help=f"tarball cache (default {cache_dir()})")
    args = parser.parse_args(argv)
    builder = Builder(
        cache=args.cache, log=lambda line: print(f"[images] {line}", file=sys.stderr, flush=True)
    )
    try:
        built = builder.all(pause=args.pause)
    except ImageError as e:
        print(f"error: {e}", file=sys.stderr)
        return 1
    for b in built:
        print(json.dumps(b.as_json(), sort_keys=True) if args.json else _line(b))
    return 0


if __name__ == "__main__":
    sys.exit(main())
