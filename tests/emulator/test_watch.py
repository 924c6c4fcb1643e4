"""Watches through the official client: resume, 410, bookmarks, filtering, timeouts and drops."""

from __future__ import annotations

import json
import queue
import threading
from collections.abc import Callable, Iterator
from typing import Any

import pytest
import urllib3
from kubernetes import client
from kubernetes.client.exceptions import ApiException

from e2e.emulator import Emulator

from .conftest import TOKENS, new_watch, pod


def _events(core: Any, **kw: Any) -> list[tuple[str, str]]:
    w = new_watch()
    out = []
    for ev in w.stream(core.list_namespaced_pod, "default", **kw):
        out.append((ev["type"], ev["raw_object"]["metadata"].get("name", "")))
    return out


def test_watch_without_resource_version_starts_with_current_state(core: Any, emulator: Emulator) -> None:
    emulator.create("pods", pod("a"))
    emulator.create("pods", pod("b"))
    assert _events(core, timeout_seconds=1) == [("ADDED", "a"), ("ADDED", "b")]


def test_watch_resumes_after_a_resource_version(core: Any, emulator: Emulator) -> None:
    emulator.create("pods", pod("old"))
    rv = core.list_namespaced_pod("default").metadata.resource_version
    emulator.create("pods", pod("new"))
    emulator.patch("pods", "old", {"metadata": {"labels": {"x": "1"}}})
    emulator.delete("pods", "new")
    assert _events(core, resource_version=rv, timeout_seconds=1) == [
        ("ADDED", "new"),
        ("MODIFIED", "old"),
        ("DELETED", "new"),
    ]


def test_deleted_event_carries_the_delete_resource_version(core: Any, emulator: Emulator) -> None:
    created = emulator.create("pods", pod("gone"))
    emulator.delete("pods", "gone")
    w = new_watch()
    events = list(
        w.stream(
            core.list_namespaced_pod,
            "default",
            resource_version=created["metadata"]["resourceVersion"],
            timeout_seconds=1,
        )
    )
    assert events[-1]["type"] == "DELETED"
    assert int(events[-1]["raw_object"]["metadata"]["resourceVersion"]) > int(
        created["metadata"]["resourceVersion"]
    )


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


def test_bookmarks_carry_a_resumable_resource_version(core: Any, emulator: Emulator) -> None:
    emulator.create("pods", pod("a"))
    w = new_watch()
    seen = []
    for ev in w.stream(core.list_namespaced_pod, "default", allow_watch_bookmarks=True, timeout_seconds=10):
        seen.append(ev)
        if ev["type"] == "BOOKMARK":
            w.stop()
    assert seen[0]["type"] == "ADDED"
    bookmark = seen[-1]["raw_object"]
    assert bookmark["kind"] == "Pod"
    assert bookmark["apiVersion"] == "v1"
    assert int(bookmark["metadata"]["resourceVersion"]) >= int(
        seen[0]["raw_object"]["metadata"]["resourceVersion"]
    )


def test_selector_watch_reports_objects_leaving_and_entering(core: Any, emulator: Emulator) -> None:
    emulator.create("pods", pod("p", labels={"app": "x"}))
    rv = emulator.resource_version
    emulator.patch("pods", "p", {"metadata": {"labels": {"app": "y"}}})
    emulator.patch("pods", "p", {"metadata": {"labels": {"app": "x"}}})
    emulator.create("pods", pod("other", labels={"app": "z"}))
    assert _events(core, resource_version=str(rv), label_selector="app=x", timeout_seconds=1) == [
        ("DELETED", "p"),
        ("ADDED", "p"),
    ]


def test_field_selector_watch_on_node_name(core: Any, emulator: Emulator) -> None:
    emulator.create("pods", pod("p"))
    rv = emulator.resource_version
    emulator.bind("p", "node-1")
    events = _events(core, resource_version=str(rv), field_selector="spec.nodeName=", timeout_seconds=1)
    assert events == [("DELETED", "p")]


def _stream_in_thread(fn: Callable[[], Iterator[Any]]) -> tuple[queue.Queue[Any], threading.Thread]:
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


def test_live_events_reach_an_open_watch(core: Any, emulator: Emulator) -> None:
    rv = emulator.resource_version
    events, t = _stream_in_thread(
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
    events, t = _stream_in_thread(
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
    events, t = _stream_in_thread(lambda: new_watch().stream(core.list_namespaced_pod, "default"))
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


def test_timeout_seconds_ends_the_stream(emulator: Emulator) -> None:
    r = urllib3.PoolManager().request(
        "GET",
        f"{emulator.url}/api/v1/namespaces/default/pods?watch=true&timeoutSeconds=1&resourceVersion={emulator.resource_version}",
    )
    assert r.status == 200
    assert r.data == b""


def test_send_initial_events_ends_with_a_marked_bookmark(emulator: Emulator) -> None:
    emulator.create("pods", pod("a"))
    url = (
        f"{emulator.url}/api/v1/namespaces/default/pods?watch=1&sendInitialEvents=true"
        "&resourceVersionMatch=NotOlderThan&allowWatchBookmarks=true&timeoutSeconds=1"
    )
    lines = [json.loads(x) for x in urllib3.PoolManager().request("GET", url).data.decode().splitlines()]
    assert lines[0]["type"] == "ADDED"
    assert lines[1]["type"] == "BOOKMARK"
    assert lines[1]["object"]["metadata"]["annotations"] == {"k8s.io/initial-events-end": "true"}


def test_namespaced_watch_sees_only_its_namespace(emulator: Emulator) -> None:
    api: Any = client.CoreV1Api(emulator.api_client("worker-token"))
    rv = emulator.resource_version
    emulator.create("pods", pod("here"))
    emulator.create("pods", pod("there"), namespace="elsewhere")
    events = [
        e["object"].metadata.name
        for e in new_watch().stream(
            api.list_namespaced_pod, "elsewhere", resource_version=str(rv), timeout_seconds=1
        )
    ]
    assert events == ["there"]
    all_ns = [
        e["object"].metadata.name
        for e in new_watch().stream(
            api.list_pod_for_all_namespaces, resource_version=str(rv), timeout_seconds=1
        )
    ]
    assert all_ns == ["here", "there"]
    assert TOKENS  # the fixture's tokens authenticate this client
    api.api_client.close()
