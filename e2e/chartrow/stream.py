"""A stream of extended-resource pods through an operator's action or a fault: pods created one after
another (paused while ``keep`` wait to be bound), the oldest bound one deleted once more than
``keep`` are alive. A create the API server did not answer, or answered it cannot take now (429, 5xx
not naming a webhook: a restart, etcd away; "no endpoints available" for a webhook Service that has
a ready endpoint: an API server just restarted, its endpoints not listed yet), is tried again as a
user would; any other answer but 201 is a failed admission, kept with its words. The stream also
records when each pod was created and first seen bound."""

from __future__ import annotations

import contextlib
import re
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


def create(client: Client, namespace: str, name: str, retried: list[str] | None = None) -> str | None:
    """Creates ``stream_pod(name)`` as a user would: the empty string once created (409: an earlier
    attempt got through); None when the API server did not answer or answered that it cannot now
    (a restart, etcd away: a user tries again), with why appended to ``retried``; else the failed
    admission's words."""
    try:
        status, body = client.post(f"/api/v1/namespaces/{namespace}/pods", stream_pod(name, namespace))
    except OSError as e:
        words = f"no answer: {type(e).__name__}: {e}"
    else:
        if status in (201, 409):
            return ""
        words = f"{status} {body.get('message', body)}"
        if not _cannot_now(client, status, words):
            return words
    if retried is not None:
        retried.append(words)
    return None


def _cannot_now(client: Client, status: int, words: str) -> bool:
    """An answer the API server gives while it cannot take the create (a user tries again): 429 or
    a 5xx that names no webhook, or a webhook's Service or endpoints it has not listed yet."""
    if status in (429, 500, 503, 504) and "webhook" not in words:
        return True
    return status == 500 and _view_lagged(client, words)


#: The API server's words when its own view of a webhook's Service does not hold it yet, and
#: when its view of the Service's endpoints is empty.
NO_SERVICE = re.compile(r'https://([a-z0-9-]+)\.([a-z0-9-]+)\.svc[^ ]*: service \\?"\1\\?" not found')
NO_ENDPOINTS = re.compile(r'no endpoints available for service \\?"([a-z0-9.-]+)\\?"')


def _view_lagged(client: Client, words: str) -> bool:
    """Whether a call to a webhook failed because the API server, just restarted, had not yet
    listed what the cluster holds (it serves before its informers have synced): "service not
    found" while the Service exists, "no endpoints available" while it has a ready endpoint. A
    user tries again. With the Service gone or no endpoint ready, draxr's chart or replicas
    failed: kept."""
    if (found := NO_SERVICE.search(words)) is not None:
        name, namespace = found.groups()
        return _read(client, f"/api/v1/namespaces/{namespace}/services/{name}") is not None
    if (found := NO_ENDPOINTS.search(words)) is not None:
        service = f"kubernetes.io/service-name={found.group(1)}"
        slices = _read(client, "/apis/discovery.k8s.io/v1/endpointslices", labelSelector=service)
        return slices is not None and any(
            (e.get("conditions") or {}).get("ready")
            for s in slices.get("items") or []
            for e in s.get("endpoints") or []
        )
    return False


def _read(client: Client, path: str, **params: str) -> dict[str, Any] | None:
    """The object at ``path``; None when the API server does not answer it with 200."""
    try:
        status, body = client.get(path, **params)
    except OSError:
        return None
    return body if status == 200 else None


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
            # At most ``keep`` pods wait to be bound: through a long outage the stream pauses rather
            # than piling up more pods than there are devices.
            waiting = sum(n not in self.bound for n in alive)
            answer = create(self.client, self.namespace, name) if waiting < self.keep else None
            if answer is not None:  # else the API server is away: the same pod on the next tick
                i += 1
                if answer == "":
                    self.created[name] = time.monotonic()
                    alive.append(name)
                else:
                    self.failed.append(f"{name}: {answer}")
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
