"""No product module over 800 lines: a module that long holds more than one concept, and its next
maintainer reads it as a chapter instead of a page. Split it by concept (as ``core/allocation`` is:
the search in ``allocator``, the requests, constraints, counters, order and results beside it)."""

from __future__ import annotations

from pathlib import Path

PACKAGE = Path(__file__).resolve().parents[1] / "webhook"

#: The most lines a module under ``webhook/`` may have.
MAX_LINES = 800


def oversized(package: Path = PACKAGE, limit: int = MAX_LINES) -> list[str]:
    """``<module> has <n> lines`` for each Python module under ``package`` longer than ``limit``."""
    found = []
    for path in sorted(package.rglob("*.py")):
        lines = len(path.read_text().splitlines())
        if lines > limit:
            found.append(f"{path.relative_to(package.parent).as_posix()} has {lines} lines (at most {limit})")
    return found


def test_no_product_module_is_over_800_lines() -> None:
    assert oversized() == []


def test_the_size_checker_sees_a_long_module(tmp_path: Path) -> None:
    package = tmp_path / "webhook" / "core"
    package.mkdir(parents=True)
    (package / "short.py").write_text("x = 1\n" * 800)
    (package / "long.py").write_text("x = 1\n" * 801)
    assert oversized(tmp_path / "webhook") == ["webhook/core/long.py has 801 lines (at most 800)"]
