"""Where the real node runtime's binaries are: what ``build.sh`` (``build-runtime.sh``) builds into the
cache, found by the same keys, plus Debian's runc.

    found = find_runtime("1.37")
    if isinstance(found, str):
        pytest.skip(found)
    found.containerd, found.cni_dir, found.kube_proxy, found.pause, found.runc

Each cache directory is ``bin/<what>-v<version>-<key>-<go version>/`` (pause: ``-gcc<version>``); the key
is ``launcher.source_key`` of its generated Go module (for pause: ``pause_key``), so a clone finds what
another built and a changed pin or recipe is not mistaken for a built one.
"""

from __future__ import annotations

import hashlib
import os
import re
import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path

from .launcher import _built, cache_dir, kube_version, read_versions

CONTAINERD_TOOLS = ("containerd", "ctr", "containerd-shim-runc-v2")
CNI_PLUGINS = ("bridge", "host-local", "loopback", "portmap")


@dataclass(frozen=True)
class RuntimeBinaries:
    """The node runtime of one Kubernetes release. ``cni_dir`` holds the CNI plugins (a CNI ``bin_dir``)."""

    version: str  # the release's kube-proxy, "1.37.2"
    containerd: Path
    ctr: Path
    shim: Path  # containerd-shim-runc-v2; containerd finds it on PATH (or next to itself)
    cni_dir: Path
    kube_proxy: Path
    pause: Path
    runc: Path


def runtime_releases() -> tuple[str, ...]:
    """The minors that run on the real runtime (``RUNTIME_RELEASES``), e.g. ``("1.37", "1.35")``."""
    return tuple(read_versions().get("RUNTIME_RELEASES", "").split())


def pause_key(source: bytes, version: str, recipe: str) -> str:
    """build-runtime.sh's ``pause_key``: BUILD_RECIPE, the -DVERSION string and pause.c."""
    digest = hashlib.sha256(f"draxr-pause recipe={recipe} version={version}\n".encode())
    digest.update(source)
    return digest.hexdigest()[:16]


def kubernetes_module_dir(version: str) -> Path | str:
    """k8s.io/kubernetes v<version>'s source in the Go module cache (build.sh downloaded it), or why not."""
    modcache = os.environ.get("GOMODCACHE")
    if not modcache:
        go = shutil.which("go")
        if go is None:
            gopath = os.environ.get("GOPATH") or str(Path.home() / "go")
            modcache = str(Path(gopath.split(os.pathsep)[0]) / "pkg" / "mod")
        else:
            done = subprocess.run([go, "env", "GOMODCACHE"], capture_output=True, text=True, timeout=60)
            modcache = done.stdout.strip()
    found = Path(modcache) / f"k8s.io/kubernetes@v{version}"
    if not (found / "build" / "pause" / "linux" / "pause.c").is_file():
        return (
            f"k8s.io/kubernetes v{version} is not in the Go module cache {modcache}: run `make controlplane`"
        )
    return found


def find_pause() -> Path | str:
    """The pause binary built from the PAUSE_KUBE pin's pause.c, or why there is none."""
    try:
        versions = read_versions()
        recipe = versions["BUILD_RECIPE"]
        kube = kube_version(versions["PAUSE_KUBE"])
    except (OSError, KeyError, ValueError) as e:
        return f"cannot read the pinned versions: {e}"
    kdir = kubernetes_module_dir(kube)
    if isinstance(kdir, str):
        return f"pause is not built: {kdir}"
    makefile = (kdir / "build" / "pause" / "Makefile").read_text()
    tag = re.search(r"^TAG \?= (\S+)", makefile, re.MULTILINE)
    if tag is None:
        return f"no TAG in k8s.io/kubernetes v{kube}'s build/pause/Makefile"
    key = pause_key((kdir / "build/pause/linux/pause.c").read_bytes(), f"v{tag[1]}-v{kube}", recipe)
    found = [d / "pause" for d in (cache_dir() / "bin").glob(f"pause-v{tag[1]}-{key}-gcc*")]
    found = [p for p in found if os.access(p, os.X_OK)]
    if not found:
        return f"pause (key {key}) not built in {cache_dir() / 'bin'}: run `make controlplane`"
    return max(found, key=lambda p: p.stat().st_mtime)


def find_runtime(version: str, *, runc: bool = True) -> RuntimeBinaries | str:
    """The runtime's binaries for a Kubernetes minor in RUNTIME_RELEASES (``"1.37"``), or why they are
    missing. ``runc=False`` does not ask for runc (what build.sh cannot build: a Debian package)."""
    try:
        versions = read_versions()
        kube = kube_version(version)
        containerd_v, cni_v = versions["CONTAINERD"], versions["CNI_PLUGINS"]
    except (OSError, KeyError, ValueError) as e:
        return f"cannot read the pinned versions: {e}"
    minor = ".".join(kube.split(".")[:2])
    if minor not in runtime_releases():
        return f"Kubernetes {minor} does not run on the real runtime (RUNTIME_RELEASES in versions.env)"
    containerd = _built(f"containerd-v{containerd_v}", "containerd", CONTAINERD_TOOLS)
    if isinstance(containerd, str):
        return f"the node runtime for Kubernetes v{kube} is not built: containerd: {containerd}"
    cni = _built(f"cni-plugins-v{cni_v}", "cni", CNI_PLUGINS)
    if isinstance(cni, str):
        return f"the node runtime for Kubernetes v{kube} is not built: the CNI plugins: {cni}"
    proxy = _built(f"kube-proxy-v{kube}", f"kube-proxy-{minor}", ("kube-proxy",))
    if isinstance(proxy, str):
        return f"the node runtime for Kubernetes v{kube} is not built: kube-proxy: {proxy}"
    pause = find_pause()
    if isinstance(pause, str):
        return f"the node runtime for Kubernetes v{kube} is not built: {pause}"
    runc_path = shutil.which("runc")
    if runc and runc_path is None:
        return "runc is not installed: `apt-get install runc` (.ci/runtime-packages.sh installs it)"
    return RuntimeBinaries(
        version=kube,
        containerd=containerd / "containerd",
        ctr=containerd / "ctr",
        shim=containerd / "containerd-shim-runc-v2",
        cni_dir=cni,
        kube_proxy=proxy / "kube-proxy",
        pause=pause,
        runc=Path(runc_path or "runc"),
    )


def runtime_unavailable() -> str | None:
    """Why some release of RUNTIME_RELEASES lacks a built runtime (runc aside), or None: for
    ``make e2e-local``, which runs build.sh when this says something."""
    for minor in runtime_releases():
        found = find_runtime(minor, runc=False)
        if isinstance(found, str):
            return found
    return None
