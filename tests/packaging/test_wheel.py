"""What the wheel (and so the production image, built from it) carries: draxr without the API emulator
(``e2e/emulator``) or the demo built on it."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import sysconfig
import zipfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def wheel(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The wheel built from a copy of the sources (the build writes into the tree it builds)."""
    work = tmp_path_factory.mktemp("wheel")
    src = work / "src"
    shutil.copytree(
        ROOT,
        src,
        symlinks=True,
        ignore=shutil.ignore_patterns(
            ".git", ".venv", ".ci", "*.egg-info", "build", "__pycache__", ".*_cache", "e2e", "tests", "bench"
        ),
    )
    out = work / "dist"
    subprocess.run(
        [
            sys.executable,
            "-m",
            "pip",
            "wheel",
            "--no-deps",
            "--no-build-isolation",
            "-q",
            "-w",
            str(out),
            str(src),
        ],
        check=True,
        capture_output=True,
        timeout=180,
    )
    (built,) = out.glob("draxr-*.whl")
    return built


def _names(wheel: Path) -> list[str]:
    with zipfile.ZipFile(wheel) as z:
        return z.namelist()


def test_the_wheel_has_no_emulator(wheel: Path) -> None:
    names = _names(wheel)
    assert [n for n in names if not n.startswith(("webhook/", "draxr-"))] == []
    assert [n for n in names if "emulator" in n or "demo" in n] == []
    assert "webhook/runtime/serve.py" in names
    assert "webhook/data/examples/kep-5004/deviceclass.yaml" in names
    assert "webhook/py.typed" in names


def _python(site: Path, cwd: Path, *args: str) -> subprocess.CompletedProcess[str]:
    """This interpreter with the wheel's files as ``webhook`` and the installed dependencies, but
    not the editable install of the sources (``-S``: no ``.pth`` files; the cwd keeps them off too)."""
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(site), sysconfig.get_paths()["purelib"]])}
    return subprocess.run(
        [sys.executable, "-S", *args], env=env, cwd=cwd, capture_output=True, text=True, timeout=60
    )


def test_the_installed_wheel_serves_and_offers_no_demo(wheel: Path, tmp_path: Path) -> None:
    site = tmp_path / "site"
    with zipfile.ZipFile(wheel) as z:
        z.extractall(site)
    probe = (
        "import importlib.util, webhook, webhook.runtime.serve, webhook.commands.serve; "
        "print(webhook.__file__); print(importlib.util.find_spec('e2e') is None)"
    )
    shown = _python(site, tmp_path, "-c", probe)
    assert shown.returncode == 0, shown.stderr
    assert shown.stdout.split() == [str(site / "webhook" / "__init__.py"), "True"]
    usage = _python(site, tmp_path, "-m", "webhook", "--help")
    assert usage.returncode == 0, usage.stderr
    assert "serve" in usage.stdout
    assert "demo" not in usage.stdout
    demo = _python(site, tmp_path, "-m", "webhook", "demo")
    assert demo.returncode == 2
    assert demo.stdout == ""
    assert demo.stderr.strip().startswith("draxr: error: COMMAND: invalid choice: 'demo'")


def test_the_wheel_carries_the_license_and_both_executables(wheel: Path) -> None:
    with zipfile.ZipFile(wheel) as z:
        names = z.namelist()
        [dist_info] = {n.split("/", 1)[0] for n in names if ".dist-info/" in n}
        metadata = z.read(f"{dist_info}/METADATA").decode()
        entry_points = z.read(f"{dist_info}/entry_points.txt").decode()
        license_text = z.read(f"{dist_info}/licenses/LICENSE").decode()
    assert "License-Expression: Apache-2.0" in metadata.splitlines()
    assert "License-File: LICENSE" in metadata.splitlines()
    assert license_text == (ROOT / "LICENSE").read_text()
    assert "Apache License" in license_text
    scripts = entry_points.split("[console_scripts]", 1)[1].split("[", 1)[0].split()
    assert "draxr = webhook.cli:main" in " ".join(scripts)
    assert "kubectl-draxr = webhook.commands.kubectl:main" in " ".join(scripts)
