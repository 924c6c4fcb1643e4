"""What each image is built from, hashed into the key of its tag and tarball: an unchanged input is
never rebuilt, a changed one always is. Pure functions of files and constants, tested without buildah."""

from __future__ import annotations

import hashlib
from collections.abc import Iterable, Iterator
from pathlib import Path

# Bumped when the way an image is built changes (the Containerfiles, mmdebstrap's options, the export).
RECIPE = "1"

SUITE = "bookworm"
# Debian's python3 in SUITE: the base image's tag says it.
PYTHON_VERSION = "3.11"
MIRROR = "http://deb.debian.org/debian"
SOURCES = (
    f"deb {MIRROR} {SUITE} main",
    f"deb {MIRROR} {SUITE}-updates main",
    f"deb http://deb.debian.org/debian-security {SUITE}-security main",
)
PYTHON_PACKAGES = ("python3", "python3-venv", "ca-certificates")
WORKLOAD_PACKAGES = ("busybox-static",)
# The workload image's commands: symlinks to busybox.
WORKLOAD_APPLETS = ("sh", "env", "sleep")

# Everything the Dockerfile's COPY lines read, with the Dockerfile and .dockerignore themselves
# (tests/e2e_images checks the list against the Dockerfile).
DRAXR_INPUTS = ("Dockerfile", ".dockerignore", "pyproject.toml", "README.md", "webhook", "examples")
# Never part of an input: bytecode and caches differ between checkouts of the same source.
_SKIP_DIRS = frozenset({"__pycache__", ".mypy_cache", ".pytest_cache", ".ruff_cache"})


def _digest(parts: Iterable[bytes]) -> str:
    h = hashlib.sha256()
    for part in parts:
        h.update(len(part).to_bytes(8, "big"))
        h.update(part)
    return h.hexdigest()[:16]


def _files(root: Path, rel: str) -> Iterator[str]:
    """The files under ``root/rel`` (or the file itself), as sorted paths relative to ``root``."""
    top = root / rel
    if top.is_file():
        yield rel
        return
    found: list[str] = []
    for path in top.rglob("*"):
        parts = path.relative_to(root).parts
        if any(p in _SKIP_DIRS for p in parts) or path.suffix == ".pyc" or not path.is_file():
            continue
        found.append("/".join(parts))
    yield from sorted(found)


def _tree_parts(root: Path, inputs: Iterable[str]) -> Iterator[bytes]:
    for rel in inputs:
        if not (root / rel).exists():
            raise FileNotFoundError(f"image input {rel} is missing under {root}")
        for name in _files(root, rel):
            yield name.encode()
            yield (root / name).read_bytes()


def python_key() -> str:
    """The Python base: Debian's suite, sources and packages."""
    return _digest(s.encode() for s in ("python", RECIPE, SUITE, *SOURCES, *sorted(PYTHON_PACKAGES)))


def python_ref(key: str | None = None) -> str:
    return f"localhost/draxr-test-python:{PYTHON_VERSION}-{key or python_key()}"


def draxr_key(root: Path, base_ref: str) -> str:
    """draxr's image: the files its Dockerfile reads and the base it is built on."""
    head = [b"draxr", RECIPE.encode(), base_ref.encode()]
    return _digest([*head, *_tree_parts(root, DRAXR_INPUTS)])


def workload_key() -> str:
    return _digest(
        s.encode() for s in ("workload", RECIPE, SUITE, *SOURCES, *WORKLOAD_PACKAGES, *WORKLOAD_APPLETS)
    )


def pause_key(pause: Path) -> str:
    """The pause image: the binary's bytes."""
    return _digest([b"pause", RECIPE.encode(), pause.read_bytes()])
