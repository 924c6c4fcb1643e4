"""Builds the images with buildah and mmdebstrap and exports each as a docker-archive tarball (what
``ctr -n k8s.io images import`` takes) into a cache outside the clone, named by its key (``keys``).

A tarball whose key is in the cache is never rebuilt; buildah's storage is only a working copy (an
image missing there is loaded back from its tarball when another build needs it as a base).
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import re
import shutil
import subprocess
import tarfile
import tempfile
import time
import zlib
from collections.abc import Callable, Iterator
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from . import keys

ROOT = Path(__file__).resolve().parents[2]
TOOLS = ("buildah", "mmdebstrap")
# The host's trust store, lent read-only to the draxr build's RUN steps so pip reaches PyPI through a
# TLS-intercepting proxy; it is a mount, never a layer of the image.
HOST_CA = Path(os.environ.get("DRAXR_IMAGE_BUILD_CA", "/etc/ssl/certs/ca-certificates.crt"))
# Build steps run as plain chroots: no runc, cgroups or network namespace needed on the host.
BUD = ("buildah", "bud", "--isolation", "chroot", "--quiet")
# Tarballs kept per image: the current one and the last few (another branch, a change undone).
KEEP = 3


class ImageError(Exception):
    """A build step failed or a tool is missing; the message says which and why."""


def cache_dir() -> Path:
    env = os.environ.get("DRAXR_IMAGE_CACHE")
    if env:
        return Path(env)
    xdg = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(xdg) / "draxr" / "images"


def missing_tools() -> list[str]:
    return [t for t in TOOLS if shutil.which(t) is None]


@dataclass
class Built:
    """One image: where its tarball is, how big it is and what this run spent on it."""

    name: str
    ref: str
    key: str
    tarball: str
    cached: bool
    seconds: float  # this run: the build when cold, the cache lookup when cached
    cold_seconds: float  # the build that made the tarball
    tarball_bytes: int
    gzip_bytes: int  # the tarball gzip -6 compressed: about what a registry would store
    unpacked_bytes: int  # the regular files of all layers

    def as_json(self) -> dict[str, Any]:
        return asdict(self)


def _run(cmd: list[str], log: Path, cwd: Path | None = None) -> str:
    """Runs a tool with its output appended to ``log``; a failure raises with the output's tail."""
    done = subprocess.run(cmd, cwd=cwd, capture_output=True, text=True, check=False)
    with log.open("a") as f:
        f.write(f"$ {' '.join(cmd)}\n{done.stdout}{done.stderr}\n")
    if done.returncode != 0:
        tail = "\n".join((done.stdout + done.stderr).strip().splitlines()[-15:])
        raise ImageError(f"{cmd[0]} {cmd[1]} failed (exit {done.returncode}; full log: {log}):\n{tail}")
    return done.stdout


def _sizes(tarball: Path) -> tuple[int, int]:
    """The tarball's gzip -6 size and its layers' unpacked size."""
    gz, comp = 0, zlib.compressobj(6)
    with tarball.open("rb") as f:
        while chunk := f.read(1 << 20):
            gz += len(comp.compress(chunk))
    gz += len(comp.flush())
    unpacked = 0
    with tarfile.open(tarball) as outer:
        manifest_member = outer.extractfile("manifest.json")
        if manifest_member is None:
            raise ImageError(f"{tarball} has no manifest.json: not a docker-archive")
        for layer in json.load(manifest_member)[0]["Layers"]:
            fileobj = outer.extractfile(layer)
            if fileobj is None:
                raise ImageError(f"{tarball} names a layer it lacks: {layer}")
            with tarfile.open(fileobj=fileobj, mode="r|*") as inner:
                unpacked += sum(m.size for m in inner if m.isreg())
    return gz, unpacked


def prune(cache: Path, name: str, keep: int = KEEP) -> list[Path]:
    """Removes all but the ``keep`` newest tarballs of an image (each webhook change makes a new
    draxr tarball of about 380 MB); returns what it removed."""
    # name-<16 hex>.tar: "draxr" must not match draxr-workload's tarballs.
    pattern = re.compile(re.escape(name) + r"-(?:\d+\.\d+-)?[0-9a-f]{16}\.tar")
    tarballs = [p for p in cache.glob(f"{name}-*.tar") if pattern.fullmatch(p.name)]
    tarballs.sort(key=lambda p: p.stat().st_mtime_ns, reverse=True)
    for old in tarballs[keep:]:
        old.unlink(missing_ok=True)
        old.with_suffix(".json").unlink(missing_ok=True)
    return tarballs[keep:]


@contextlib.contextmanager
def _locked(path: Path) -> Iterator[None]:
    """One build of a key at a time (two test sessions, or a test and the CLI)."""
    with path.open("w") as f:
        fcntl.flock(f, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(f, fcntl.LOCK_UN)


def _check_pause(binary: Path) -> None:
    if not binary.is_file():
        raise ImageError(f"--pause {binary}: no such file")
    with binary.open("rb") as f:
        if f.read(4) != b"\x7fELF" or not os.access(binary, os.X_OK):
            raise ImageError(f"--pause {binary}: not an executable ELF binary")


def _containerfile(ctx: Path, text: str) -> Path:
    path = ctx / "Containerfile"
    path.write_text(text)
    return path


class Builder:
    """Builds each image at most once per key; ``log`` gets one progress line per step."""

    def __init__(
        self, cache: Path | None = None, root: Path = ROOT, log: Callable[[str], None] | None = None
    ):
        self.cache = cache or cache_dir()
        self.root = root
        self.log = log or (lambda _line: None)
        self.logs = self.cache / "logs"

    # -- the images ------------------------------------------------------------------------------

    def python_base(self) -> Built:
        key = keys.python_key()
        return self._image("draxr-test-python", keys.python_ref(key), key, self._build_python)

    def draxr(self, base: Built) -> Built:
        self._ensure_loaded(base)
        key = keys.draxr_key(self.root, base.ref)
        return self._image(
            "draxr", f"localhost/draxr:{key}", key, lambda ref, tmp: self._build_draxr(ref, tmp, base)
        )

    def workload(self) -> Built:
        key = keys.workload_key()
        return self._image("draxr-workload", f"localhost/draxr-workload:{key}", key, self._build_workload)

    def pause(self, binary: Path) -> Built:
        _check_pause(binary)
        key = keys.pause_key(binary)
        return self._image(
            "draxr-pause",
            f"localhost/draxr-pause:{key}",
            key,
            lambda ref, tmp: self._build_pause(ref, tmp, binary),
        )

    def all(self, pause: Path | None = None) -> list[Built]:
        missing = missing_tools()
        if missing:
            raise ImageError(
                f"{', '.join(missing)} not on PATH: install them with .ci/image-tools.sh "
                "(apt-get install buildah mmdebstrap busybox-static)"
            )
        if pause is not None:
            _check_pause(pause)  # before minutes of other builds
        base = self.python_base()
        out = [base, self.draxr(base), self.workload()]
        if pause is not None:
            out.append(self.pause(pause))
        return out

    # -- how each is built -----------------------------------------------------------------------

    def _mmdebstrap(self, log: Path, variant: str, packages: tuple[str, ...], target: Path) -> None:
        _run(
            [
                "mmdebstrap",
                f"--variant={variant}",
                f"--include={','.join(packages)}",
                # No documentation, manual pages or translations (the copyright files stay).
                "--dpkgopt=path-exclude=/usr/share/doc/*",
                "--dpkgopt=path-include=/usr/share/doc/*/copyright",
                "--dpkgopt=path-exclude=/usr/share/man/*",
                "--dpkgopt=path-exclude=/usr/share/locale/*",
                "--dpkgopt=path-exclude=/usr/share/info/*",
                keys.SUITE,
                str(target),
                *keys.SOURCES,
            ],
            log,
        )

    def _build_python(self, ref: str, tmp: Path) -> None:
        log = self.logs / "draxr-test-python.log"
        self.log(f"mmdebstrap {keys.SUITE} minbase + {' '.join(keys.PYTHON_PACKAGES)}")
        # minbase, then the package lists and apt's cache dropped (mmdebstrap's own cleanup).
        self._mmdebstrap(log, "minbase", keys.PYTHON_PACKAGES, tmp / "rootfs.tar")
        cf = _containerfile(tmp, 'FROM scratch\nADD rootfs.tar /\nENV LANG=C.UTF-8\nCMD ["python3"]\n')
        self.log(f"buildah bud {ref}")
        _run([*BUD, "-f", str(cf), "-t", ref, str(tmp)], log)

    def _build_draxr(self, ref: str, tmp: Path, base: Built) -> None:
        log = self.logs / "draxr.log"
        mounts: list[str] = []
        if HOST_CA.is_file():
            (tmp / "pip.conf").write_text("[global]\ncert = /etc/ssl/certs/ca-certificates.crt\n")
            mounts = [
                f"--volume={HOST_CA}:/etc/ssl/certs/ca-certificates.crt:ro",
                f"--volume={tmp / 'pip.conf'}:/etc/pip.conf:ro",
            ]
        self.log(f"buildah bud {ref} (Dockerfile, BASE={base.ref}; pip installs from PyPI)")
        _run(
            [*BUD, *mounts, "--build-arg", f"BASE={base.ref}", "-f", "Dockerfile", "-t", ref, str(self.root)],
            log,
            cwd=self.root,
        )

    def _build_workload(self, ref: str, tmp: Path) -> None:
        log = self.logs / "draxr-workload.log"
        self.log(f"mmdebstrap {keys.SUITE} extract {' '.join(keys.WORKLOAD_PACKAGES)}")
        self._mmdebstrap(log, "extract", keys.WORKLOAD_PACKAGES, tmp / "extract")
        bin_dir = tmp / "rootfs" / "bin"
        bin_dir.mkdir(parents=True)
        shutil.copy2(tmp / "extract" / "bin" / "busybox", bin_dir / "busybox")
        for applet in keys.WORKLOAD_APPLETS:
            (bin_dir / applet).symlink_to("busybox")
        cf = _containerfile(tmp, 'FROM scratch\nCOPY rootfs/ /\nENV PATH=/bin\nCMD ["sh"]\n')
        self.log(f"buildah bud {ref}")
        _run([*BUD, "-f", str(cf), "-t", ref, str(tmp)], log)

    def _build_pause(self, ref: str, tmp: Path, binary: Path) -> None:
        log = self.logs / "draxr-pause.log"
        shutil.copy2(binary, tmp / "pause")
        cf = _containerfile(tmp, 'FROM scratch\nCOPY pause /pause\nUSER 65535:65535\nENTRYPOINT ["/pause"]\n')
        self.log(f"buildah bud {ref}")
        _run([*BUD, "-f", str(cf), "-t", ref, str(tmp)], log)

    # -- the cache -------------------------------------------------------------------------------

    def _image(self, name: str, ref: str, key: str, build: Callable[[str, Path], None]) -> Built:
        t0 = time.monotonic()
        tarball = self.cache / f"{name}-{key}.tar"
        meta = self.cache / f"{name}-{key}.json"
        self.logs.mkdir(parents=True, exist_ok=True)
        with _locked(self.cache / f".{name}.lock"):
            if tarball.is_file() and meta.is_file():
                record = json.loads(meta.read_text())
                self.log(f"{name}: cached ({tarball})")
                return Built(**{**record, "cached": True, "seconds": round(time.monotonic() - t0, 2)})
            self.log(f"{name}: building (key {key})")
            # A copy left in buildah's storage by another cache would stay behind untagged.
            subprocess.run(["buildah", "rmi", "--force", ref], capture_output=True, check=False)
            with tempfile.TemporaryDirectory(prefix=f"draxr-images-{name}-") as tmp:
                build(ref, Path(tmp))
                part = Path(tmp) / "image.tar"
                self.log(f"buildah push {ref} -> {tarball}")
                _run(
                    ["buildah", "push", "--quiet", ref, f"docker-archive:{part}:{ref}"],
                    self.logs / f"{name}.log",
                )
                gz, unpacked = _sizes(part)
                shutil.move(part, tarball.with_suffix(".tar.part"))
                tarball.with_suffix(".tar.part").rename(tarball)
            self._forget_older(ref)
            seconds = round(time.monotonic() - t0, 2)
            built = Built(
                name, ref, key, str(tarball), False, seconds, seconds, tarball.stat().st_size, gz, unpacked
            )
            meta.write_text(json.dumps(built.as_json(), indent=2) + "\n")
            prune(self.cache, name)
            return built

    def _ensure_loaded(self, built: Built) -> None:
        """Puts an image back into buildah's storage from its tarball (for a build that uses it)."""
        have = subprocess.run(
            ["buildah", "inspect", "--type", "image", built.ref], capture_output=True, check=False
        )
        if have.returncode != 0:
            self.log(f"buildah pull {built.ref} from {built.tarball}")
            _run(
                ["buildah", "pull", "--quiet", f"docker-archive:{built.tarball}"],
                self.logs / f"{built.name}.log",
            )

    def _forget_older(self, ref: str) -> None:
        """Removes the repository's other tags from buildah's storage: their tarballs stay cached."""
        repo = ref.rsplit(":", 1)[0]
        listed = subprocess.run(
            ["buildah", "images", "--noheading", "--format", "{{.Name}}:{{.Tag}}"],
            capture_output=True,
            text=True,
            check=False,
        )
        for other in listed.stdout.split():
            if other.rsplit(":", 1)[0] == repo and other != ref:
                subprocess.run(["buildah", "rmi", other], capture_output=True, check=False)
