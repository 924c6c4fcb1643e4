"""Watches where only the emulator can make them end: compaction on demand (410 Gone, inside the stream
or as HTTP), a bounded history, and watches dropped or ended by the server. The API's watch behaviour
is e2e/contract/test_watch.py's."""

from __future__ import annotations

import json
from typing import Any

import pytest
import urllib3
from kubernetes import client
from kubernetes.client.exceptions import ApiException

from ..contract.support import new_watch, pod, stream_in_thread
from . import Emulator


def _events(core: Any, **kw: Any) -> list[tuple[str, str]]:
    w = new_watch()
    out = []
    for ev in w.stream(core.list_namespaced_pod, "default", **kw):
        out.append((ev["type"], ev["raw_object"]["metadata"].get("name", "")))
    return out


def test_compacted_resource_version_is_410_inside_the_stream(core: Any, emulator: Emulator) -> None:
    emulator.create("pods", pod("a"))
    old = core.list_namespaced_pod("default").metadata.resource_version
    emulator.create("pods", pod("b"))
    emulator.compact()
    with pytest.raises(ApiException) as err:
        _events(core, resource_version=old, timeout_seconds=1)
    assert err.value.status == 410
    assert "too old resource version" in str(err.value.reason)
    # The raw stream is a 200 with one ERROR event holding a Status, as the apiserver sends it.
    r = urllib3.PoolManager().request(
        "GET", f"{emulator.url}/api/v1/namespaces/default/pods?watch=1&resourceVersion={old}"
    )
    assert r.status == 200
    event = json.loads(r.data.decode().splitlines()[0])
    assert event["type"] == "ERROR"
    assert event["object"]["kind"] == "Status"
    assert event["object"]["code"] == 410
    assert event["object"]["reason"] == "Expired"


def test_watch_retries_once_after_410_then_raises(core: Any, emulator: Emulator) -> None:
    emulator.create("pods", pod("a"))
    old = core.list_namespaced_pod("default").metadata.resource_version
    emulator.create("pods", pod("b"))
    emulator.compact()
    emulator.reset_requests()
    with pytest.raises(ApiException) as err:
        list(new_watch().stream(core.list_namespaced_pod, "default", resource_version=old))
    assert err.value.status == 410
    # The client resumed once from the same resourceVersion, then gave up.
    watches = [(r.verb, r.resource, r.code) for r in emulator.requests()]
    assert watches == [("watch", "pods", 200), ("watch", "pods", 200)]
    assert emulator.open_watches() == 0


def test_bounded_history_expires_old_versions() -> None:
    with Emulator(history_size=3) as em:
        api: Any = client.CoreV1Api(em.api_client())
        start = api.list_namespaced_pod("default").metadata.resource_version
        for i in range(5):
            em.create("pods", pod(f"p{i}"))
        with pytest.raises(ApiException) as err:
            list(
                new_watch().stream(
                    api.list_namespaced_pod, "default", resource_version=start, timeout_seconds=1
                )
            )
        assert err.value.status == 410
        recent = em.get("pods", "p1")["metadata"]["resourceVersion"]
        events = list(
            new_watch().stream(api.list_namespaced_pod, "default", resource_version=recent, timeout_seconds=1)
        )
        assert [e["raw_object"]["metadata"]["name"] for e in events] == ["p2", "p3", "p4"]
        api.api_client.close()


def test_http_410_mode() -> None:
    with Emulator(watch_expired="http") as em:
        api: Any = client.CoreV1Api(em.api_client())
        em.create("pods", pod("a"))
        old = api.list_namespaced_pod("default").metadata.resource_version
        em.create("pods", pod("b"))
        em.compact()
        r = urllib3.PoolManager().request(
            "GET", f"{em.url}/api/v1/namespaces/default/pods?watch=1&resourceVersion={old}"
        )
        assert r.status == 410
        assert json.loads(r.data)["reason"] == "Expired"
        with pytest.raises(ApiException) as err:
            list(
                new_watch().stream(
                    api.list_namespaced_pod, "default", resource_version=old, timeout_seconds=1
                )
            )
        assert err.value.status == 410
        api.api_client.close()


def test_live_events_reach_an_open_watch(core: Any, emulator: Emulator) -> None:
    rv = emulator.resource_version
    events, t = stream_in_thread(
        lambda: new_watch().stream(
            core.list_namespaced_pod, "default", resource_version=str(rv), timeout_seconds=10
        )
    )
    emulator.wait_for(lambda: emulator.open_watches() == 1, 5)
    emulator.create("pods", pod("live"))
    kind, event = events.get(timeout=5)
    assert kind == "event"
    assert event["type"] == "ADDED"
    assert event["object"].metadata.name == "live"
    emulator.drop_watches(abort=False)
    t.join(5)


def test_dropped_watch_connection_errors_the_client(core: Any, emulator: Emulator) -> None:
    events, t = stream_in_thread(
        lambda: new_watch().stream(core.list_namespaced_pod, "default", timeout_seconds=30)
    )
    emulator.wait_for(lambda: emulator.open_watches() == 1, 5)
    assert emulator.drop_watches() == 1
    kind, exc = events.get(timeout=5)
    assert kind == "error"
    assert isinstance(exc, urllib3.exceptions.HTTPError | ConnectionError)
    t.join(5)
    emulator.wait_for(lambda: emulator.open_watches() == 0, 5)


def test_gracefully_ended_watch_is_resumed_by_the_client(core: Any, emulator: Emulator) -> None:
    emulator.create("pods", pod("before"))
    events, t = stream_in_thread(lambda: new_watch().stream(core.list_namespaced_pod, "default"))
    kind, first = events.get(timeout=5)
    assert (kind, first["object"].metadata.name) == ("event", "before")
    emulator.wait_for(lambda: emulator.open_watches() == 1, 5)
    assert emulator.drop_watches(abort=False) == 1
    emulator.create("pods", pod("after"))
    # The client re-watches from the last resourceVersion it saw, so nothing is lost or repeated.
    kind, second = events.get(timeout=5)
    assert (kind, second["type"], second["object"].metadata.name) == ("event", "ADDED", "after")
    emulator.drop_watches()
    t.join(5)
