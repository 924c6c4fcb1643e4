"""What the kubelet does for a Secret volume, for tests: watch one Secret through the API and project
its keys into a directory the way kubelet's AtomicWriter does, so a reader never sees a half-written
update: the files live in a fresh ``..<n>`` directory, ``..data`` is a symlink swapped to it with one
rename, and every key is a symlink ``<key> -> ..data/<key>``."""

from __future__ import annotations

import base64
import contextlib
import os
import shutil
import threading
from pathlib import Path

import urllib3

from webhook.core.api.objects import Obj
from webhook.kube.client import ApiError, KubeClient
from webhook.kube.resources import Resource

SECRETS = Resource("", "v1", "secrets", "Secret", True)


class SecretVolume:
    def __init__(self, client: KubeClient, namespace: str, name: str, directory: Path) -> None:
        self.client = client
        self.namespace = namespace
        self.name = name
        self.directory = directory
        self.projections = 0
        self._projected: dict[str, bytes] | None = None
        self._changed = threading.Condition()
        self._stop = threading.Event()
        self._stream: object | None = None
        self._thread = threading.Thread(target=self._run, name=f"secret-volume-{name}", daemon=True)

    def start(self) -> SecretVolume:
        self.directory.mkdir(parents=True, exist_ok=True)
        self._thread.start()
        return self

    def wait_projected(self, count: int = 1, timeout: float = 10.0) -> None:
        with self._changed:
            if not self._changed.wait_for(lambda: self.projections >= count, timeout):
                raise TimeoutError(f"Secret {self.name} not projected {count} times within {timeout}s")

    def stop(self) -> None:
        self._stop.set()
        stream = self._stream
        if stream is not None:
            with contextlib.suppress(Exception):
                stream.close()  # type: ignore[attr-defined]
        self._thread.join(timeout=10)

    # -- the kubelet's side ---------------------------------------------------------------------

    def _run(self) -> None:
        while not self._stop.is_set():
            try:
                listed = self.client.list(
                    SECRETS, self.namespace, field_selector=f"metadata.name={self.name}"
                )
                for item in listed.get("items") or []:
                    self._project(item)
                stream = self.client.watch(
                    SECRETS,
                    str(listed["metadata"]["resourceVersion"]),
                    namespace=self.namespace,
                    field_selector=f"metadata.name={self.name}",
                )
                self._stream = stream
                for event in stream:
                    if self._stop.is_set():
                        return
                    if event.get("type") in ("ADDED", "MODIFIED"):
                        self._project(event["object"])
            except (ApiError, OSError, ValueError, urllib3.exceptions.HTTPError):
                if self._stop.wait(0.05):  # the emulator went away or the watch broke: list again
                    return

    def _project(self, secret: Obj) -> None:
        if secret.get("metadata", {}).get("name") != self.name:
            return
        data = {k: base64.b64decode(v) for k, v in (secret.get("data") or {}).items()}
        if data == self._projected:
            return
        generation = self.projections + 1
        target = self.directory / f"..{generation}"
        target.mkdir()
        for key, value in data.items():
            (target / key).write_bytes(value)
        tmp = self.directory / "..data_tmp"
        with contextlib.suppress(FileNotFoundError):
            tmp.unlink()
        tmp.symlink_to(target.name)
        previous = (self.directory / "..data").resolve() if (self.directory / "..data").exists() else None
        os.replace(tmp, self.directory / "..data")  # the one atomic step
        for key in data:
            link = self.directory / key
            if not link.is_symlink():
                link.symlink_to(Path("..data") / key)
        if previous is not None and previous != target.resolve():
            shutil.rmtree(previous, ignore_errors=True)
        with self._changed:
            self._projected = data
            self.projections = generation
            self._changed.notify_all()
