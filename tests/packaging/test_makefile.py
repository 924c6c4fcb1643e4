"""The Makefile's first run (``make demo``/``make test`` on a fresh checkout) says what it is doing
before each slow step, instead of being silent for the whole installation."""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.skipif(shutil.which("make") is None and os.environ.get("CI") != "true", reason="no make on PATH")
def test_the_first_installation_prints_a_line_before_each_slow_step() -> None:
    # -n: print the recipe without running it; -W: as if pyproject.toml had changed (a fresh .venv).
    done = subprocess.run(
        ["make", "--no-print-directory", "-n", "-W", "pyproject.toml", ".venv/.installed"],
        cwd=ROOT,
        # Run from `make test`, the outer make's flags would add "Entering directory" lines.
        env={k: v for k, v in os.environ.items() if k not in ("MAKEFLAGS", "MAKELEVEL", "MFLAGS")},
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    )
    lines = done.stdout.splitlines()
    slow = [i for i, line in enumerate(lines) if " -m venv " in line or " -m pip install " in line]
    assert len(slow) == 3
    for i in slow:
        assert lines[i - 1].startswith('echo "draxr: '), lines[i - 1]
    assert lines[-1].startswith('echo "draxr: .venv ready')
