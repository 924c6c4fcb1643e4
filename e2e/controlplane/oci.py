"""A minimal OCI image writer: one uncompressed layer of host files, a config, a manifest and an index,
as an OCI archive that ``ctr -n k8s.io images import`` takes. Nothing is pulled: the rows' pause and
workload images are made from binaries on this machine (upstream's pause.c, Debian's busybox-static).
"""

from __future__ import annotations

import hashlib
import io
import json
import tarfile
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

LAYER = "application/vnd.oci.image.layer.v1.tar"
CONFIG = "application/vnd.oci.image.config.v1+json"
MANIFEST = "application/vnd.oci.image.manifest.v1+json"


@dataclass(frozen=True)
class Image:
    """What goes into the image: ``files`` maps a path in the image to a host file (copied, mode
    kept); ``links`` maps a path to a symlink target (busybox's applets)."""

    name: str  # a full reference, e.g. "draxr.invalid/e2e/pause:3.10"
    files: Mapping[str, Path]
    links: Mapping[str, str] = field(default_factory=dict)
    entrypoint: Sequence[str] = ()
    cmd: Sequence[str] = ()
    env: Sequence[str] = ("PATH=/bin",)


def _add(tar: tarfile.TarFile, info: tarfile.TarInfo, data: bytes = b"") -> None:
    info.mtime = 0  # the same inputs give the same digests
    info.uid = info.gid = 0
    info.uname = info.gname = ""
    tar.addfile(info, io.BytesIO(data) if data else None)


def _layer(image: Image) -> bytes:
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w", format=tarfile.PAX_FORMAT) as tar:
        dirs = sorted(
            {str(Path(p).parent).strip("/") for p in [*image.files, *image.links]} - {""},
        )
        seen: set[str] = set()
        for d in dirs:
            parts = Path(d).parts
            for i in range(1, len(parts) + 1):
                sub = "/".join(parts[:i])
                if sub not in seen:
                    seen.add(sub)
                    info = tarfile.TarInfo(sub)
                    info.type, info.mode = tarfile.DIRTYPE, 0o755
                    _add(tar, info)
        for path, src in sorted(image.files.items()):
            data = Path(src).read_bytes()
            info = tarfile.TarInfo(path.strip("/"))
            info.size, info.mode = len(data), Path(src).stat().st_mode & 0o7777
            _add(tar, info, data)
        for path, target in sorted(image.links.items()):
            info = tarfile.TarInfo(path.strip("/"))
            info.type, info.linkname, info.mode = tarfile.SYMTYPE, target, 0o777
            _add(tar, info)
    return buf.getvalue()


def _blob(tar: tarfile.TarFile, data: bytes, media_type: str) -> dict[str, object]:
    digest = hashlib.sha256(data).hexdigest()
    info = tarfile.TarInfo(f"blobs/sha256/{digest}")
    info.size, info.mode = len(data), 0o644
    _add(tar, info, data)
    return {"mediaType": media_type, "digest": f"sha256:{digest}", "size": len(data)}


def write_archive(image: Image, path: Path) -> Path:
    """Writes ``image`` as an OCI archive at ``path``."""
    layer = _layer(image)
    config = {
        "architecture": "amd64",
        "os": "linux",
        "config": {
            "Entrypoint": list(image.entrypoint) or None,
            "Cmd": list(image.cmd) or None,
            "Env": list(image.env),
        },
        "rootfs": {"type": "layers", "diff_ids": [f"sha256:{hashlib.sha256(layer).hexdigest()}"]},
    }
    tag = image.name.rsplit(":", 1)[1] if ":" in image.name.rsplit("/", 1)[-1] else "latest"
    with tarfile.open(path, "w") as tar:
        layer_desc = _blob(tar, layer, LAYER)
        config_desc = _blob(tar, json.dumps(config, sort_keys=True).encode(), CONFIG)
        manifest = {"schemaVersion": 2, "mediaType": MANIFEST, "config": config_desc, "layers": [layer_desc]}
        manifest_desc = _blob(tar, json.dumps(manifest, sort_keys=True).encode(), MANIFEST)
        manifest_desc["annotations"] = {
            "io.containerd.image.name": image.name,
            "org.opencontainers.image.ref.name": tag,
        }
        index = {"schemaVersion": 2, "manifests": [manifest_desc]}
        for name, data in (
            ("oci-layout", json.dumps({"imageLayoutVersion": "1.0.0"}).encode()),
            ("index.json", json.dumps(index).encode()),
        ):
            info = tarfile.TarInfo(name)
            info.size, info.mode = len(data), 0o644
            _add(tar, info, data)
    return path


def pause_image(pause: Path, name: str) -> Image:
    """The sandbox image: upstream's pause binary (build/pause/linux/pause.c, static)."""
    return Image(name=name, files={"/pause": pause}, entrypoint=["/pause"])


#: The applets the workload image links to busybox: a shell, ``env`` and ``sleep`` and a few helpers.
APPLETS = ("sh", "env", "sleep", "cat", "ls", "mkdir", "wget", "nc", "httpd", "echo", "true")


def busybox_image(busybox: Path, name: str) -> Image:
    """The workload image: a static busybox (Debian's busybox-static) and its applets as symlinks."""
    return Image(
        name=name,
        files={"/bin/busybox": busybox},
        links={f"/bin/{a}": "busybox" for a in APPLETS},
        cmd=["sh"],
    )
