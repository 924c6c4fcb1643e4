"""The informer against the API emulator: resume from resourceVersion, relist on 410 Gone."""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator
from dataclasses import replace

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from e2e.emulator import Emulator
from e2e.emulator.resources import BUILTIN
from webhook.core.api.objects import Obj
from webhook.kube.client import KubeClient
from webhook.kube.informer import Informer, changes
from webhook.kube.pager import MAX_EXPIRED_PAGES
from webhook.kube.resources import DEVICE_TAINT_RULE_VERSIONS, NODES, Resource, device_taint_rules


class Recorder:
    def __init__(self) -> None:
        self.events: list[tuple[str, str]] = []
        self._cond = threading.Condition()

    def __call__(self, etype: str, obj: Obj) -> None:
        with self._cond:
            self.events.append((etype, str((obj.get("metadata") or {}).get("name"))))
            self._cond.notify_all()

    def wait(self, predicate: Callable[[list[tuple[str, str]]], bool], timeout: float = 15) -> None:
        with self._cond:
            assert self._cond.wait_for(lambda: predicate(self.events), timeout), self.events


@pytest.fixture
def em() -> Iterator[Emulator]:
    with Emulator(bookmark_interval=0.2) as e:
        yield e


def node(name: str) -> Obj:
    return {"metadata": {"name": name}}


def test_watch_resumes_from_its_resource_version_without_relisting(em: Emulator) -> None:
    em.create("nodes", node("a"))
    rec = Recorder()
    inf = Informer(KubeClient(em.api_client()), NODES, rec).start()
    try:
        rec.wait(lambda ev: ("ADDED", "a") in ev)
        em.drop_watches(abort=False)  # the stream ends like a server-side timeout
        em.create("nodes", node("b"))
        rec.wait(lambda ev: ("ADDED", "b") in ev)
        assert inf.relists == 1
        assert sorted(o["metadata"]["name"] for o in inf.items()) == ["a", "b"]
    finally:
        inf.stop()


def test_410_gone_relists_and_reports_what_changed_meanwhile(em: Emulator) -> None:
    em.create("nodes", node("stays"))
    em.create("nodes", node("goes"))
    rec = Recorder()
    inf = Informer(
        KubeClient(em.api_client(), retries=0), NODES, rec, min_backoff=0.05, max_backoff=0.2
    ).start()
    try:
        rec.wait(lambda ev: len(ev) == 2)
        blocked = em.inject(verbs="watch", resource="nodes", error=503)  # keep the watch down
        em.drop_watches(abort=True)
        em.delete("nodes", "goes")
        em.create("nodes", node("new"))
        em.compact()  # the informer's resourceVersion is now too old: its next watch gets 410
        em.faults.remove(blocked)
        rec.wait(lambda ev: ("DELETED", "goes") in ev and ("ADDED", "new") in ev)
        assert inf.relists == 2
        assert sorted(o["metadata"]["name"] for o in inf.items()) == ["new", "stays"]
        assert rec.events.count(("ADDED", "stays")) == 1  # unchanged objects are not reported again
    finally:
        inf.stop()


def test_an_optional_resource_is_watched_in_the_version_the_server_serves(em: Emulator) -> None:
    em.create("devicetaintrules", {"metadata": {"name": "r"}, "spec": {"deviceSelector": {}}})
    rec = Recorder()
    inf = Informer(
        KubeClient(em.api_client()),
        device_taint_rules(DEVICE_TAINT_RULE_VERSIONS[0]),
        rec,
        versions=DEVICE_TAINT_RULE_VERSIONS,
    ).start()
    try:
        rec.wait(lambda ev: ("ADDED", "r") in ev)
        assert inf.resource.version == "v1alpha3"  # v1 and v1beta2 do not serve it here
    finally:
        inf.stop()


def test_a_resource_the_server_does_not_serve_is_synced_empty(em: Emulator) -> None:
    rec = Recorder()
    inf = Informer(KubeClient(em.api_client()), device_taint_rules("v1"), rec, versions=("v1", "v1beta2"))
    inf.start()
    assert inf.synced.wait(10)
    inf.stop()
    assert inf.items() == []
    assert rec.events == []
    assert not [r for r in em.requests() if r.resource == "devicetaintrules"]  # never listed


def test_a_v1beta1_only_server_gives_v1_objects_from_list_and_watch() -> None:
    """A cluster serving ResourceSlices only as v1beta1 (``basic:`` devices): the informer lists and
    watches that version but stores and hands on v1 (``core.versions``)."""
    types = [replace(t, version="v1beta1") if t.plural == "resourceslices" else t for t in BUILTIN]

    def beta_slice(name: str) -> Obj:
        device = {"name": "d", "basic": {"attributes": {"model": {"string": "a"}}}}
        return {"metadata": {"name": name}, "spec": {"driver": "x", "nodeName": "", "devices": [device]}}

    seen: list[Obj] = []
    rec = Recorder()

    def handler(etype: str, obj: Obj) -> None:
        seen.append(obj)
        rec(etype, obj)

    with Emulator(bookmark_interval=0.2, resources=types) as em:
        em.create("resourceslices", beta_slice("listed"))
        inf = Informer(
            KubeClient(em.api_client()),
            Resource("resource.k8s.io", "v1", "resourceslices", "ResourceSlice", False),
            handler,
            versions=("v1", "v1beta2", "v1beta1"),
        ).start()
        try:
            rec.wait(lambda ev: ("ADDED", "listed") in ev)
            em.create("resourceslices", beta_slice("watched"))
            rec.wait(lambda ev: ("ADDED", "watched") in ev)
            assert inf.resource.version == "v1beta1"  # listed and watched as served
            assert inf.relists == 1
            stored = sorted(inf.items(), key=lambda o: str(o["metadata"]["name"]))
        finally:
            inf.stop()
    for obj in [*seen, *stored]:
        assert obj["apiVersion"] == "resource.k8s.io/v1"
        assert obj["spec"] == {
            "driver": "x",
            "devices": [{"name": "d", "attributes": {"model": {"string": "a"}}}],
        }
    assert [o["metadata"]["name"] for o in stored] == ["listed", "watched"]


# -- paged lists ---------------------------------------------------------------------------------------


def test_a_list_is_read_in_pages_and_the_watch_starts_from_its_resource_version(em: Emulator) -> None:
    for i in range(7):
        em.create("nodes", node(f"n{i}"))
    rec = Recorder()
    inf = Informer(KubeClient(em.api_client()), NODES, rec, page_size=2).start()
    try:
        rec.wait(lambda ev: len(ev) == 7)
        assert inf.pages == 4  # 2 + 2 + 2 + 1
        assert inf.relists == 1
        em.create("nodes", node("late"))  # the watch, from the list's resourceVersion, sees it
        rec.wait(lambda ev: ("ADDED", "late") in ev)
        assert len(inf) == 8
    finally:
        inf.stop()
    lists = [r for r in em.requests() if r.verb == "list" and r.resource == "nodes"]
    assert len(lists) == 4


def test_an_expired_continue_token_starts_the_list_over(em: Emulator) -> None:
    for i in range(5):
        em.create("nodes", node(f"n{i}"))
    armed = threading.Event()

    def after_each_request(verb: str, resource: str, code: int) -> None:
        # After the first page: the server forgets the list (410 Expired on the next page).
        if verb == "list" and resource == "nodes" and code == 200 and not armed.is_set():
            armed.set()
            em.inject(verbs="list", resource="nodes", error=410, message="too old resource version", times=1)

    rec = Recorder()
    inf = Informer(KubeClient(em.api_client(), hook=after_each_request), NODES, rec, page_size=2).start()
    try:
        rec.wait(lambda ev: len(ev) == 5)
        assert inf.expired_lists == 1
        assert inf.pages == 1 + 3  # the first page, then 2 + 2 + 1 from the start
        assert inf.relists == 1
        assert sorted(name for etype, name in rec.events) == [f"n{i}" for i in range(5)]  # each once
    finally:
        inf.stop()


def test_lists_that_keep_expiring_end_in_one_unpaged_list(em: Emulator) -> None:
    for i in range(5):
        em.create("nodes", node(f"n{i}"))
    pages: list[int] = []

    def after_each_request(verb: str, resource: str, code: int) -> None:
        if verb == "list" and resource == "nodes" and code == 200:
            pages.append(1)
            em.inject(verbs="list", resource="nodes", error=410, times=1)  # every next page expires

    rec = Recorder()
    inf = Informer(KubeClient(em.api_client(), hook=after_each_request), NODES, rec, page_size=2).start()
    try:
        rec.wait(lambda ev: len(ev) == 5)
        assert inf.expired_lists == MAX_EXPIRED_PAGES
        # One first page per paged attempt, then one page holding all five: the unpaged list.
        assert inf.pages == len(pages) == MAX_EXPIRED_PAGES + 1
        assert len(inf) == 5
    finally:
        inf.stop()


def test_a_410_on_the_first_page_is_the_servers_answer_not_an_expired_token(em: Emulator) -> None:
    em.create("nodes", node("a"))
    em.inject(verbs="list", resource="nodes", error=410, times=1)
    rec = Recorder()
    inf = Informer(KubeClient(em.api_client(), retries=0), NODES, rec, page_size=2, min_backoff=0.05).start()
    try:
        rec.wait(lambda ev: ("ADDED", "a") in ev)
        assert inf.expired_lists == 0  # retried as any failed list, after the backoff
    finally:
        inf.stop()


# -- the transform ------------------------------------------------------------------------------------


def test_listed_and_watched_objects_are_stored_and_handed_on_transformed(em: Emulator) -> None:
    em.create("nodes", {"metadata": {"name": "listed", "labels": {"a": "b"}}})
    seen: list[Obj] = []

    def handler(etype: str, obj: Obj) -> None:
        seen.append(obj)

    def labels_only(obj: Obj) -> Obj:
        return {"kind": obj["kind"], "metadata": {"name": obj["metadata"]["name"], "labels": {"kept": "yes"}}}

    inf = Informer(KubeClient(em.api_client()), NODES, handler, transform=labels_only).start()
    try:
        em.create("nodes", {"metadata": {"name": "watched"}})
        em.wait_for(lambda: len(seen) == 2, 10, "both nodes")
        stored = inf.items()
    finally:
        inf.stop()
    for obj in [*seen, *stored]:
        assert obj["metadata"]["labels"] == {"kept": "yes"}
        assert set(obj) == {"kind", "metadata"}


# -- a key whose object changed uid -------------------------------------------------------------------


class UidRecorder:
    """(event type, name, uid) of every event, in order."""

    def __init__(self) -> None:
        self.events: list[tuple[str, str, str]] = []
        self._cond = threading.Condition()

    def __call__(self, etype: str, obj: Obj) -> None:
        meta = obj.get("metadata") or {}
        with self._cond:
            self.events.append((etype, str(meta.get("name")), str(meta.get("uid"))))
            self._cond.notify_all()

    def wait(self, predicate: Callable[[list[tuple[str, str, str]]], bool], timeout: float = 15) -> None:
        with self._cond:
            assert self._cond.wait_for(lambda: predicate(self.events), timeout), self.events


def test_a_relist_that_finds_an_object_recreated_under_its_name_reports_deleted_then_added(
    em: Emulator,
) -> None:
    """client-go hands ``UpdateFunc(old, new)`` and its users compare uids; draxr's handlers get one
    object per event, so the old one leaves (DELETED, with its uid) before the new one comes."""
    em.create("nodes", node("stays"))
    old_uid = em.create("nodes", node("recreated"))["metadata"]["uid"]
    rec = UidRecorder()
    inf = Informer(
        KubeClient(em.api_client(), retries=0), NODES, rec, min_backoff=0.05, max_backoff=0.2
    ).start()
    try:
        rec.wait(lambda ev: len(ev) == 2)
        blocked = em.inject(verbs="watch", resource="nodes", error=503)  # keep the watch down
        em.drop_watches(abort=True)
        em.delete("nodes", "recreated")
        new_uid = em.create("nodes", node("recreated"))["metadata"]["uid"]
        em.compact()  # the next watch gets 410: the informer relists
        em.faults.remove(blocked)
        rec.wait(lambda ev: inf.relists == 2 and len(ev) >= 4)
        assert rec.events[2:] == [("DELETED", "recreated", old_uid), ("ADDED", "recreated", new_uid)]
        stored = {o["metadata"]["uid"] for o in inf.items() if o["metadata"]["name"] == "recreated"}
        assert stored == {new_uid}
    finally:
        inf.stop()


@settings(max_examples=300, deadline=None)
@given(
    st.lists(
        st.tuples(st.sampled_from(["a", "b"]), st.sampled_from([1, 2, 3, None]), st.booleans()),
        max_size=16,
    )
)
def test_what_handlers_are_told_keeps_their_view_by_uid_equal_to_the_store(
    observations: list[tuple[str, int | None, bool]],
) -> None:
    """Whatever a key's object did between two observations (a watch event, or a relist: the object
    now there, or none), handlers that index by uid (the cache's pods, the engine) are told ADDED only
    for a uid they do not hold, MODIFIED only for one they hold, and end holding the store's objects."""
    store: dict[str, Obj] = {}
    held: dict[str, Obj] = {}  # what the handlers hold, by uid
    for version, (key, incarnation, watched) in enumerate(observations, start=1):
        prev = store.get(key)
        if incarnation is None:
            if watched and prev is None:
                continue  # a watch never deletes what was never there
            final = {"metadata": {**prev["metadata"], "resourceVersion": str(version)}} if prev else None
            told = changes(prev, final, deleted=True) if watched and final else changes(prev, None)
            store.pop(key, None)
        else:
            obj_uid = f"{key}-{incarnation}"  # uids are unique across keys
            obj = {"metadata": {"name": key, "uid": obj_uid, "resourceVersion": str(version)}}
            told = changes(prev, obj)
            store[key] = obj
        for etype, o in told:
            u = o["metadata"]["uid"]
            if etype == "DELETED":
                assert u in held, (etype, u)
                del held[u]
            else:
                assert etype == ("MODIFIED" if u in held else "ADDED"), (etype, u)
                held[u] = o
    assert held == {o["metadata"]["uid"]: o for o in store.values()}
