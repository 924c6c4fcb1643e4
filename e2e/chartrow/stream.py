"""A stream of extended-resource pods through an operator's action: pods created one after another,
each bound before the next frees a device, the oldest deleted once more than ``keep`` are bound.
Every answer to a create that is not 201 is a failed admission, kept with its words; the stream
also records when each pod was created and first seen bound."""

from __future__ import annotations

import contextlib
import threading
import time
from dataclasses import dataclass, field
from typing import Any

from ..controlplane.launcher import Client

Obj = dict[str, Any]


def stream_pod(name: str, namespace: str, *, gated: bool = False) -> Obj:
    """One GPU through draxr (example.com/gpu: DRA devices on both nodes, the device plugin's on
    one), never started: the pod is placed, which is all a stream needs. ``gated``: held by a
    scheduling gate, so only admission sees it (neither scheduler places it)."""
    spec: Obj = {
        "terminationGracePeriodSeconds": 0,
        "containers": [
            {
                "name": "app",
                "image": "localhost/never-started:0",
                "resources": {"limits": {"example.com/gpu": "1"}},
            }
        ],
    }
    if gated:
        spec["schedulingGates"] = [{"name": "draxr.io/e2e-held"}]
    return {"metadata": {"name": name, "namespace": namespace}, "spec": spec}


@dataclass
class Stream:
    """Creates ``prefix-0``, ``prefix-1``, ... in ``namespace`` every ``interval`` seconds until
    stopped (at most ``limit``); keeps at most ``keep`` pods, deleting the oldest bound one."""

    client: Client
    namespace: str
    prefix: str
    interval: float = 0.5
    keep: int = 6
    limit: int = 400
    created: dict[str, float] = field(default_factory=dict)  # name: monotonic time of the 201
    bound: dict[str, float] = field(default_factory=dict)  # name: when first seen with a nodeName
    failed: list[str] = field(default_factory=list)
    _stop: threading.Event = field(default_factory=threading.Event)
    _thread: threading.Thread | None = None

    def start(self) -> Stream:
        self._thread = threading.Thread(target=self._run, name=f"stream-{self.prefix}", daemon=True)
        self._thread.start()
        return self

    def stop(self, timeout: float = 60) -> None:
        self._stop.set()
        assert self._thread is not None
        self._thread.join(timeout)
        assert not self._thread.is_alive(), "the stream did not stop"

    def _run(self) -> None:
        try:
            self._stream()
        except Exception as e:  # said by failed, never a thread dying unseen
            self.failed.append(f"the stream stopped: {type(e).__name__}: {e}")

    def _stream(self) -> None:
        path = f"/api/v1/namespaces/{self.namespace}/pods"
        alive: list[str] = []
        i = 0
        while not self._stop.is_set() and i < self.limit:
            name = f"{self.prefix}-{i}"
            i += 1
            try:
                status, body = self.client.post(path, stream_pod(name, self.namespace))
            except OSError as e:
                self.failed.append(f"{name}: {e}")
                continue
            if status == 201:
                self.created[name] = time.monotonic()
                alive.append(name)
            else:
                self.failed.append(f"{name}: {status} {body.get('message', body)}")
            self._see_bound()
            bound = [n for n in alive if n in self.bound]
            while len(alive) > self.keep and bound:
                oldest = bound.pop(0)
                alive.remove(oldest)
                with contextlib.suppress(OSError):  # left to the namespace's deletion
                    self.client.delete(f"{path}/{oldest}", gracePeriodSeconds="0")
            self._stop.wait(self.interval)

    def _see_bound(self) -> None:
        try:
            status, body = self.client.get(f"/api/v1/namespaces/{self.namespace}/pods")
        except OSError:  # a read that failed is read again on the next tick
            return
        if status != 200:
            return
        now = time.monotonic()
        for pod in body.get("items") or []:
            name = pod["metadata"]["name"]
            if name.startswith(f"{self.prefix}-") and pod["spec"].get("nodeName"):
                self.bound.setdefault(name, now)

    def unbound(self) -> list[str]:
        """Pods created and never seen bound (call once the stream stopped and waited)."""
        self._see_bound()
        return sorted(set(self.created) - set(self.bound))
