"""What the contract suite's tests and the emulator's own share: a pod manifest, the Status of a
failed call, a 404 check, a watch and a stream read in a thread, and the TLS admission webhook."""

from __future__ import annotations

import json
import queue
import threading
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from kubernetes import watch
from kubernetes.client.exceptions import ApiException

from .webhook_server import WebhookServer, start_webhook_server


@pytest.fixture(scope="session")
def webhook_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[WebhookServer]:
    server = start_webhook_server(tmp_path_factory.mktemp("webhook-tls"))
    yield server
    server.stop()


def new_watch() -> Any:
    """``kubernetes.watch.Watch`` (untyped upstream)."""
    return watch.Watch()  # type: ignore[no-untyped-call]


def stream_in_thread(fn: Callable[[], Iterator[Any]]) -> tuple[queue.Queue[Any], threading.Thread]:
    """Read ``fn()``'s items in a thread: ``("event", item)`` each, then ``("end", None)`` or
    ``("error", exc)``."""
    out: queue.Queue[Any] = queue.Queue()

    def run() -> None:
        try:
            for item in fn():
                out.put(("event", item))
            out.put(("end", None))
        except Exception as exc:
            out.put(("error", exc))

    t = threading.Thread(target=run, daemon=True)
    t.start()
    return out, t


def status_of(exc: ApiException) -> dict[str, Any]:
    """The ``Status`` body of a failed call, checked for the fields every error carries."""
    body: dict[str, Any] = json.loads(exc.body or "{}")
    assert body["kind"] == "Status"
    assert body["apiVersion"] == "v1"
    assert body["status"] == "Failure"
    assert body["code"] == exc.status
    return body


def missing(read: Any, *args: Any) -> bool:
    """Whether ``read(*args)`` answers 404."""
    try:
        read(*args)
    except ApiException as e:
        if e.status == 404:
            return True
        raise
    return False


def pod(
    name: str = "", generate_name: str = "", labels: dict[str, str] | None = None, **spec: Any
) -> dict[str, Any]:
    """A minimal pod manifest as a plain dict."""
    meta: dict[str, Any] = {"name": name} if name else {"generateName": generate_name}
    if labels:
        meta["labels"] = labels
    body_spec: dict[str, Any] = {"containers": [{"name": "main", "image": "registry.example/app:1"}]}
    body_spec.update(spec)
    return {"apiVersion": "v1", "kind": "Pod", "metadata": meta, "spec": body_spec}
