"""The images built for real-runtime rows (``make e2e-local``; slow when cold, seconds when cached).

draxr's image runs as uid 65532 on a read-only root filesystem, the workload image has ``sh``,
``env`` and ``sleep``, and a second build finds everything cached. Skips without buildah and
mmdebstrap, except under CI=true (.ci/image-tools.sh installs them). The pause image is made from the
pause binary `make controlplane` compiles from upstream's pause.c (DRAXR_PAUSE_BINARY names another).
"""

from __future__ import annotations

import json
import os
import subprocess
import tarfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from e2e.controlplane.runtime_bins import find_pause

from .build import Builder, Built, missing_tools

pytestmark = pytest.mark.timeout(1800)


def _unusable(reason: str) -> None:
    """Skip, or fail when CI=true: CI must not pass by building nothing."""
    if os.environ.get("CI") == "true":
        pytest.fail(reason)
    pytest.skip(reason)


@pytest.fixture(scope="module")
def images() -> dict[str, Built]:
    if missing := missing_tools():
        _unusable(f"{', '.join(missing)} not on PATH (.ci/image-tools.sh installs them)")
    if os.geteuid() != 0:
        _unusable("building and running the images here needs root (buildah, chroot)")
    built = Builder(log=print).all(pause=pause_binary())
    return {b.name: b for b in built}


def pause_binary() -> Path:
    """DRAXR_PAUSE_BINARY, or the pause binary `make controlplane` built (skip, or fail under CI=true,
    without one)."""
    if named := os.environ.get("DRAXR_PAUSE_BINARY"):
        return Path(named)
    found = find_pause()
    if isinstance(found, str):
        _unusable(found)
    assert isinstance(found, Path)
    return found


def _config(tarball: str) -> dict[str, Any]:
    """The image config inside a docker-archive tarball: what the runtime importing it will see."""
    with tarfile.open(tarball) as t:
        manifest = t.extractfile("manifest.json")
        assert manifest is not None
        config = t.extractfile(json.load(manifest)[0]["Config"])
        assert config is not None
        out: dict[str, Any] = json.load(config)["config"]
        return out


@pytest.fixture
def rootfs() -> Iterator[Any]:
    """Mounts an image's tarball as a buildah working container; yields a function that does it."""
    made: list[str] = []

    def mount(tarball: str) -> Path:
        name = subprocess.run(
            ["buildah", "from", "--quiet", f"docker-archive:{tarball}"],
            capture_output=True,
            text=True,
            check=True,
        ).stdout.strip()
        made.append(name)
        path = subprocess.run(["buildah", "mount", name], capture_output=True, text=True, check=True)
        return Path(path.stdout.strip())

    yield mount
    for name in made:
        subprocess.run(["buildah", "umount", name], capture_output=True, check=False)
        subprocess.run(["buildah", "rm", name], capture_output=True, check=False)


def _run_read_only(
    root: Path, user: str, env: list[str], argv: list[str], env_bin: str = "/usr/bin/env"
) -> subprocess.CompletedProcess[str]:
    """Runs argv as ``user`` chrooted into ``root`` bind-mounted read-only, with exactly ``env``
    (a private mount namespace: the read-only mount goes away with the process)."""
    script = 'mount --bind "$1" "$1" && mount -o remount,bind,ro "$1" && shift && exec chroot "$@"'
    return subprocess.run(
        ["unshare", "--mount", "--fork", "sh", "-c", script, "sh", str(root),
         f"--userspec={user}", str(root), env_bin, "-i", *env, *argv],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )  # fmt: skip


def test_the_draxr_image_runs_as_65532_with_entrypoint_draxr(images: dict[str, Built]) -> None:
    draxr = images["draxr"]
    assert Path(draxr.tarball).is_file()
    config = _config(draxr.tarball)
    assert config["User"] == "65532:65532"
    assert config["Entrypoint"] == ["draxr"]
    assert config["Cmd"] == ["serve"]


def test_draxr_starts_on_a_read_only_root_as_65532(images: dict[str, Built], rootfs: Any) -> None:
    draxr = images["draxr"]
    config = _config(draxr.tarball)
    root = rootfs(draxr.tarball)
    for args in (["--version"], ["serve", "--help"]):
        done = _run_read_only(root, config["User"], config["Env"], [*config["Entrypoint"], *args])
        assert done.returncode == 0, done.stderr
    assert "draxr 0.1" in _run_read_only(root, "65532:65532", config["Env"], ["draxr", "--version"]).stdout
    # The root really is read-only there: a write fails.
    wrote = _run_read_only(root, "65532:65532", config["Env"], ["sh", "-c", "echo x > /opt/draxr/x"])
    assert wrote.returncode != 0
    assert not (root / "opt/draxr/x").exists()


def test_the_python_base_has_venv_and_tls(images: dict[str, Built], rootfs: Any) -> None:
    base = images["draxr-test-python"]
    root = rootfs(base.tarball)
    done = _run_read_only(
        root,
        "65532:65532",
        ["PATH=/usr/bin:/bin"],
        ["python3", "-c", "import ssl, venv; print(ssl.get_default_verify_paths().cafile)"],
    )
    assert done.returncode == 0, done.stderr
    assert not (root / "usr/share/man").exists() or not any((root / "usr/share/man").iterdir())
    assert not any((root / "var/lib/apt/lists").glob("*_Packages"))


def test_the_workload_image_runs_env_and_sleep(images: dict[str, Built], rootfs: Any) -> None:
    workload = images["draxr-workload"]
    config = _config(workload.tarball)
    root = rootfs(workload.tarball)
    env = [*config["Env"], "DRA_DEVICE_GPU_0=gpu.example.com/node-a/gpu-0"]
    done = _run_read_only(root, "65534:65534", env, ["sh", "-c", "env; sleep 0"], env_bin="/bin/env")
    assert done.returncode == 0, done.stderr
    assert "DRA_DEVICE_GPU_0=gpu.example.com/node-a/gpu-0" in done.stdout.splitlines()
    assert sorted(p.name for p in (root / "bin").iterdir()) == ["busybox", "env", "sh", "sleep"]


def test_the_pause_image(images: dict[str, Built]) -> None:
    config = _config(images["draxr-pause"].tarball)
    assert config["User"] == "65535:65535"
    assert config["Entrypoint"] == ["/pause"]


def test_a_second_build_finds_every_image_cached(images: dict[str, Built]) -> None:
    before = {b.name: Path(b.tarball).stat().st_mtime_ns for b in images.values()}
    t0 = time.monotonic()
    again = Builder().all(pause=pause_binary())
    assert time.monotonic() - t0 < 30
    assert all(b.cached for b in again)
    assert {b.name: Path(b.tarball).stat().st_mtime_ns for b in again} == before
