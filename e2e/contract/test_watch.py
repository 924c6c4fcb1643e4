"""Watches through the official client: the initial state, resuming from a resourceVersion, bookmarks,
selector filtering, timeouts, and namespaces. (An expired resourceVersion needs compaction on
demand: e2e/emulator/test_watch.py.)"""

from __future__ import annotations

import json
from typing import Any

from .backend import Api
from .support import new_watch, pod, stream_in_thread


def _events(core: Any, ns: str, **kw: Any) -> list[tuple[str, str]]:
    w = new_watch()
    out = []
    for ev in w.stream(core.list_namespaced_pod, ns, **kw):
        out.append((ev["type"], ev["raw_object"]["metadata"].get("name", "")))
    return out


def _rv(core: Any, ns: str) -> str:
    """The resourceVersion a list of ``ns``'s pods answers now (a resume point)."""
    return str(core.list_namespaced_pod(ns).metadata.resource_version)


def test_watch_without_resource_version_starts_with_current_state(api: Api, core: Any) -> None:
    core.create_namespaced_pod(api.namespace, pod("a"))
    core.create_namespaced_pod(api.namespace, pod("b"))
    assert _events(core, api.namespace, timeout_seconds=1) == [("ADDED", "a"), ("ADDED", "b")]


def test_watch_resumes_after_a_resource_version(api: Api, core: Any) -> None:
    ns = api.namespace
    core.create_namespaced_pod(ns, pod("old"))
    rv = _rv(core, ns)
    core.create_namespaced_pod(ns, pod("new"))
    core.patch_namespaced_pod("old", ns, {"metadata": {"labels": {"x": "1"}}})
    core.delete_namespaced_pod("new", ns)
    # A pod's deletion is graceful: marked (MODIFIED), then removed.
    assert _events(core, ns, resource_version=rv, timeout_seconds=1) == [
        ("ADDED", "new"),
        ("MODIFIED", "old"),
        ("MODIFIED", "new"),
        ("DELETED", "new"),
    ]


def test_deleted_event_carries_the_delete_resource_version(api: Api, core: Any) -> None:
    created = core.create_namespaced_pod(api.namespace, pod("gone"))
    core.delete_namespaced_pod("gone", api.namespace)
    w = new_watch()
    events = list(
        w.stream(
            core.list_namespaced_pod,
            api.namespace,
            resource_version=created.metadata.resource_version,
            timeout_seconds=1,
        )
    )
    assert events[-1]["type"] == "DELETED"
    assert int(events[-1]["raw_object"]["metadata"]["resourceVersion"]) > int(
        created.metadata.resource_version
    )


def test_bookmarks_carry_a_resumable_resource_version(api: Api, core: Any) -> None:
    core.create_namespaced_pod(api.namespace, pod("a"))
    w = new_watch()
    seen = []
    for ev in w.stream(
        core.list_namespaced_pod, api.namespace, allow_watch_bookmarks=True, timeout_seconds=10
    ):
        seen.append(ev)
        if ev["type"] == "BOOKMARK":
            w.stop()
    assert seen[0]["type"] == "ADDED"
    bookmark = seen[-1]["raw_object"]
    assert seen[-1]["type"] == "BOOKMARK"
    assert bookmark["kind"] == "Pod"
    assert bookmark["apiVersion"] == "v1"
    assert int(bookmark["metadata"]["resourceVersion"]) >= int(
        seen[0]["raw_object"]["metadata"]["resourceVersion"]
    )


def test_selector_watch_reports_objects_leaving_and_entering(api: Api, core: Any) -> None:
    ns = api.namespace
    core.create_namespaced_pod(ns, pod("p", labels={"app": "x"}))
    rv = _rv(core, ns)
    core.patch_namespaced_pod("p", ns, {"metadata": {"labels": {"app": "y"}}})
    core.patch_namespaced_pod("p", ns, {"metadata": {"labels": {"app": "x"}}})
    core.create_namespaced_pod(ns, pod("other", labels={"app": "z"}))
    assert _events(core, ns, resource_version=rv, label_selector="app=x", timeout_seconds=1) == [
        ("DELETED", "p"),
        ("ADDED", "p"),
    ]


def test_field_selector_watch_on_node_name(api: Api, core: Any) -> None:
    ns = api.namespace
    core.create_namespaced_pod(ns, pod("p"))
    rv = _rv(core, ns)
    binding = {"metadata": {"name": "p"}, "target": {"kind": "Node", "name": "node-1"}}
    core.create_namespaced_pod_binding("p", ns, binding, _preload_content=False)
    events = _events(core, ns, resource_version=rv, field_selector="spec.nodeName=", timeout_seconds=1)
    assert events == [("DELETED", "p")]


def test_live_events_reach_an_open_watch(api: Api, core: Any) -> None:
    """A watch from a resourceVersion sees what is created after it, however soon it connects."""
    rv = _rv(core, api.namespace)
    w = new_watch()
    events, t = stream_in_thread(
        lambda: w.stream(core.list_namespaced_pod, api.namespace, resource_version=rv, timeout_seconds=10)
    )
    core.create_namespaced_pod(api.namespace, pod("live"))
    kind, event = events.get(timeout=10)
    assert kind == "event"
    assert event["type"] == "ADDED"
    assert event["object"].metadata.name == "live"
    w.stop()
    t.join(15)


def test_timeout_seconds_ends_the_stream(api: Api, core: Any) -> None:
    rv = _rv(core, api.namespace)
    r = api.http(
        "GET", f"/api/v1/namespaces/{api.namespace}/pods?watch=true&timeoutSeconds=1&resourceVersion={rv}"
    )
    assert r.status == 200
    assert r.data == b""


def test_send_initial_events_ends_with_a_marked_bookmark(api: Api, core: Any) -> None:
    core.create_namespaced_pod(api.namespace, pod("a"))
    r = api.http(
        "GET",
        f"/api/v1/namespaces/{api.namespace}/pods?watch=1&sendInitialEvents=true"
        "&resourceVersionMatch=NotOlderThan&allowWatchBookmarks=true&timeoutSeconds=1",
    )
    lines = [json.loads(x) for x in r.data.decode().splitlines()]
    assert lines[0]["type"] == "ADDED"
    assert lines[1]["type"] == "BOOKMARK"
    assert lines[1]["object"]["metadata"]["annotations"] == {"k8s.io/initial-events-end": "true"}


def test_namespaced_watch_sees_only_its_namespace(api: Api, core: Any) -> None:
    there = api.new_namespace("elsewhere")
    run = {"run": api.suffix}  # the apiserver is shared: all namespaces means other tests' pods too
    rv = _rv(core, api.namespace)
    core.create_namespaced_pod(api.namespace, pod("here", labels=run))
    core.create_namespaced_pod(there, pod("there", labels=run))
    worker = api.core("worker")
    events = [
        e["object"].metadata.name
        for e in new_watch().stream(worker.list_namespaced_pod, there, resource_version=rv, timeout_seconds=1)
    ]
    assert events == ["there"]
    all_ns = [
        e["object"].metadata.name
        for e in new_watch().stream(
            core.list_pod_for_all_namespaces,
            resource_version=rv,
            label_selector=f"run={api.suffix}",
            timeout_seconds=1,
        )
    ]
    assert all_ns == ["here", "there"]
