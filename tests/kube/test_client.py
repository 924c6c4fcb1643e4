"""KubeClient against the API emulator: the verbs, ApiError, retries of transient failures (fault
injection; sleeps recorded, not slept), the write rate limit, watch streams and bindings; and its
transport against a recording HTTP server: the direct pool, and the official client behind a proxy."""

from __future__ import annotations

import http.server
import json
import socket
import threading
import urllib.parse
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import kubernetes
import pytest

from e2e.emulator import Emulator
from e2e.emulator.kubeconfig import api_client
from webhook.core.api.objects import Obj
from webhook.kube.client import (
    JSON_PATCH,
    MAX_RETRY_AFTER,
    STRATEGIC_PATCH,
    ApiError,
    KubeClient,
    NotLeader,
    throttled,
)
from webhook.kube.ratelimit import TokenBucket
from webhook.kube.resources import DEVICE_TAINT_RULE_VERSIONS, NODES, PODS


class Sleeps:
    """Stands in for the ``time`` module of the client (and of the rate limiter)."""

    def __init__(self) -> None:
        self.seen: list[float] = []

    def sleep(self, seconds: float) -> None:
        self.seen.append(seconds)


class CountingBucket(TokenBucket):
    def __init__(self) -> None:
        super().__init__(qps=1000, burst=1000)
        self.acquired = 0

    def acquire(self) -> None:
        self.acquired += 1


@pytest.fixture
def em() -> Iterator[Emulator]:
    with Emulator(bookmark_interval=0.2, watch_expired="http") as e:
        yield e


@pytest.fixture
def sleeps(monkeypatch: pytest.MonkeyPatch) -> Sleeps:
    fake = Sleeps()
    monkeypatch.setattr("webhook.kube.client.time", fake)
    monkeypatch.setattr("webhook.kube.ratelimit.time", fake)
    return fake


def pod_body(name: str = "p") -> Obj:
    return {
        "metadata": {"name": name, "namespace": "default"},
        "spec": {"containers": [{"name": "c", "image": "x"}]},
    }


def hits(em: Emulator, verb: str, resource: str) -> list[int]:
    return [r.code for r in em.requests() if (r.verb, r.resource) == (verb, resource)]


# -- verbs -----------------------------------------------------------------------------------------


def test_create_get_list_update_patch_delete(em: Emulator) -> None:
    c = KubeClient(em.api_client())
    created = c.create(NODES, {"metadata": {"name": "a", "labels": {"zone": "x"}}})
    assert created["metadata"]["uid"]
    c.create(NODES, {"metadata": {"name": "b", "labels": {"zone": "y"}}})
    assert c.get(NODES, "a")["metadata"]["uid"] == created["metadata"]["uid"]
    listing = c.list(NODES)
    assert sorted(n["metadata"]["name"] for n in listing["items"]) == ["a", "b"]
    assert listing["metadata"]["resourceVersion"]
    assert [n["metadata"]["name"] for n in c.list(NODES, label_selector="zone=y")["items"]] == ["b"]
    assert [n["metadata"]["name"] for n in c.list(NODES, field_selector="metadata.name=a")["items"]] == ["a"]
    created["metadata"]["labels"]["zone"] = "z"
    updated = c.update(NODES, created)
    assert updated["metadata"]["labels"] == {"zone": "z"}
    patched = c.patch(NODES, "a", {"metadata": {"labels": {"extra": "1"}}})
    assert patched["metadata"]["labels"] == {"zone": "z", "extra": "1"}
    c.delete(NODES, "a")
    assert em.find("nodes", "a") is None


def test_namespaced_objects_and_their_status_subresource(em: Emulator) -> None:
    c = KubeClient(em.api_client())
    c.create(PODS, pod_body(), "default")
    assert [p["metadata"]["name"] for p in c.list(PODS, "default")["items"]] == ["p"]
    assert c.list(PODS, "kube-system")["items"] == []
    assert [p["metadata"]["name"] for p in c.list(PODS)["items"]] == ["p"]  # every namespace
    c.patch(PODS, "p", {"status": {"phase": "Running"}}, namespace="default", subresource="status")
    assert em.get("pods", "p", "default")["status"]["phase"] == "Running"
    pod = c.get(PODS, "p", "default")
    pod["status"]["phase"] = "Succeeded"
    c.update(PODS, pod, subresource="status")
    assert em.get("pods", "p", "default")["status"]["phase"] == "Succeeded"


def test_json_and_strategic_patches(em: Emulator) -> None:
    c = KubeClient(em.api_client())
    c.create(NODES, {"metadata": {"name": "a", "labels": {"x": "1"}}})
    c.patch(NODES, "a", [{"op": "add", "path": "/metadata/labels/y", "value": "2"}], patch_type=JSON_PATCH)
    c.patch(NODES, "a", {"metadata": {"labels": {"z": "3"}}}, patch_type=STRATEGIC_PATCH)
    assert em.get("nodes", "a")["metadata"]["labels"] == {"x": "1", "y": "2", "z": "3"}


def test_a_dry_run_create_stores_nothing(em: Emulator) -> None:
    c = KubeClient(em.api_client())
    answer = c.create(NODES, {"metadata": {"name": "a"}}, dry_run=True)
    assert answer["metadata"]["name"] == "a"
    assert em.find("nodes", "a") is None


def test_from_config_reads_a_kubeconfig(em: Emulator, tmp_path: Path) -> None:
    em.create("nodes", {"metadata": {"name": "a"}})
    c = KubeClient.from_config(str(em.kubeconfig(tmp_path / "kubeconfig")), retries=0)
    assert c.retries == 0
    assert c.get(NODES, "a")["metadata"]["name"] == "a"
    assert c.api.user_agent == "draxr"


def test_bind_assigns_the_node(em: Emulator) -> None:
    c = KubeClient(em.api_client())
    pod = c.create(PODS, pod_body(), "default")
    c.bind("default", "p", pod["metadata"]["uid"], "n1")
    assert em.get("pods", "p", "default")["spec"]["nodeName"] == "n1"


def test_a_binding_for_an_earlier_pod_of_the_name_is_refused(em: Emulator) -> None:
    """The Binding carries the pod's uid: a pod deleted and recreated under its name between the
    decision and the write is not placed by a decision made for the other."""
    c = KubeClient(em.api_client())
    earlier = c.create(PODS, pod_body(), "default")
    c.delete(PODS, "p", "default")
    c.create(PODS, pod_body(), "default")
    with pytest.raises(ApiError) as exc:
        c.bind("default", "p", earlier["metadata"]["uid"], "n1")
    assert exc.value.status == 409
    assert not em.get("pods", "p", "default")["spec"].get("nodeName")


def test_served_finds_the_version_a_resource_is_served_in(em: Emulator) -> None:
    c = KubeClient(em.api_client())
    assert c.served("resource.k8s.io", "devicetaintrules", DEVICE_TAINT_RULE_VERSIONS) == "v1alpha3"
    assert c.served("resource.k8s.io", "nothing", ("v1",)) is None


def test_the_hook_sees_every_request_with_its_status(em: Emulator) -> None:
    seen: list[tuple[str, str, int]] = []
    c = KubeClient(em.api_client(), hook=lambda verb, res, code: seen.append((verb, res, code)))
    c.create(PODS, pod_body(), "default")
    c.patch(PODS, "p", {"status": {"phase": "Running"}}, namespace="default", subresource="status")
    with pytest.raises(ApiError):
        c.get(PODS, "missing", "default")
    assert seen == [("create", "pods", 201), ("patch", "pods/status", 200), ("get", "pods", 404)]


# -- ApiError ----------------------------------------------------------------------------------------


def test_not_found_carries_the_servers_status(em: Emulator) -> None:
    c = KubeClient(em.api_client())
    with pytest.raises(ApiError) as info:
        c.get(NODES, "zz")
    e = info.value
    assert (e.status, e.reason, e.message) == (404, "NotFound", 'nodes "zz" not found')
    assert (e.not_found, e.conflict, e.gone, e.transient) == (True, False, False, False)
    assert str(e) == 'get /api/v1/nodes/zz: 404 NotFound: nodes "zz" not found'
    assert e.body["kind"] == "Status"


def test_a_stale_update_or_a_wrong_precondition_is_a_conflict(em: Emulator) -> None:
    c = KubeClient(em.api_client())
    node = c.create(NODES, {"metadata": {"name": "a"}})
    c.patch(NODES, "a", {"metadata": {"labels": {"x": "1"}}})
    with pytest.raises(ApiError) as stale:
        c.update(NODES, node)
    assert stale.value.conflict
    assert stale.value.reason == "Conflict"
    with pytest.raises(ApiError) as wrong_uid:
        c.delete(NODES, "a", uid="not-the-uid")
    assert wrong_uid.value.conflict
    with pytest.raises(ApiError) as wrong_rv:
        c.delete(NODES, "a", resource_version=node["metadata"]["resourceVersion"])
    assert wrong_rv.value.conflict
    assert em.find("nodes", "a") is not None


def test_a_watch_from_a_compacted_version_is_gone(em: Emulator) -> None:
    c = KubeClient(em.api_client())
    rv = c.list(NODES)["metadata"]["resourceVersion"]
    c.create(NODES, {"metadata": {"name": "a"}})
    em.compact()
    with pytest.raises(ApiError) as info:
        c.watch(NODES, rv)
    assert info.value.gone
    assert info.value.status == 410


@pytest.mark.parametrize(
    ("status", "transient"),
    [
        (0, True),
        (429, True),
        (500, True),
        (502, True),
        (503, True),
        (504, True),
        (400, False),
        (403, False),
        (409, False),
        (410, False),
    ],
)
def test_which_statuses_are_transient(status: int, transient: bool) -> None:
    assert ApiError(status, {"message": "m"}).transient is transient


def test_an_error_body_that_is_not_a_status_still_reads() -> None:
    e = ApiError(502, {"message": "<html>bad gateway</html>"}, "get", "/x")
    assert (e.reason, e.message) == ("", "<html>bad gateway</html>")


def test_a_refused_connection_is_status_zero_and_transient(sleeps: Sleeps) -> None:
    c = KubeClient(api_client("http://127.0.0.1:1", None), retries=0, timeout=2)
    with pytest.raises(ApiError) as info:
        c.get(NODES, "a")
    assert info.value.status == 0
    assert info.value.transient
    assert sleeps.seen == []


# -- retries -----------------------------------------------------------------------------------------


def test_server_errors_are_retried_with_exponential_backoff(em: Emulator, sleeps: Sleeps) -> None:
    em.create("nodes", {"metadata": {"name": "a"}})
    rule = em.inject(verbs="get", resource="nodes", error=500, times=3)
    c = KubeClient(em.api_client())
    assert c.get(NODES, "a")["metadata"]["name"] == "a"
    assert rule.hits == 3
    assert sleeps.seen == [0.05, 0.1, 0.2]


def test_retries_give_up_with_the_last_error(em: Emulator, sleeps: Sleeps) -> None:
    em.inject(verbs="list", resource="nodes", error=503, message="overloaded")
    c = KubeClient(em.api_client(), retries=2)
    with pytest.raises(ApiError, match="overloaded") as info:
        c.list(NODES)
    assert info.value.status == 503
    assert hits(em, "list", "nodes") == [503, 503, 503]
    assert len(sleeps.seen) == 2
    em.reset_requests()
    with pytest.raises(ApiError):
        c.list(NODES, retries=0)  # a caller with a deadline
    assert hits(em, "list", "nodes") == [503]


def test_errors_that_are_not_transient_are_not_retried(em: Emulator, sleeps: Sleeps) -> None:
    em.inject(verbs="create", resource="nodes", error=403)
    c = KubeClient(em.api_client())
    with pytest.raises(ApiError) as info:
        c.create(NODES, {"metadata": {"name": "a"}})
    assert info.value.status == 403
    assert hits(em, "create", "nodes") == [403]
    assert sleeps.seen == []


def test_too_many_requests_waits_its_whole_retry_after(em: Emulator, sleeps: Sleeps) -> None:
    """API Priority and Fairness sheds load with 429 and a Retry-After: a client retrying sooner
    only adds to the overload (client-go's rest client waits the whole Retry-After). An absurd value
    is bounded, so a worker thread is never parked for an hour."""
    em.inject(verbs="create", resource="nodes", error=429, retry_after=3, times=1)
    em.inject(verbs="create", resource="nodes", error=429, retry_after=0, times=1)
    em.inject(verbs="create", resource="nodes", error=429, retry_after=3600, times=1)
    c = KubeClient(em.api_client())
    c.create(NODES, {"metadata": {"name": "a"}})
    assert hits(em, "create", "nodes") == [429, 429, 429, 201]
    assert sleeps.seen == [3.0, 0.1, MAX_RETRY_AFTER]  # Retry-After 3, the backoff (0), the bound


def test_the_retry_after_header_is_kept_on_the_error(em: Emulator, sleeps: Sleeps) -> None:
    em.inject(verbs="create", resource="nodes", error=429, retry_after=7)
    c = KubeClient(em.api_client(), retries=0)
    with pytest.raises(ApiError) as info:
        c.create(NODES, {"metadata": {"name": "a"}})
    assert info.value.retry_after == 7.0


def test_retries_zero_means_one_request_even_for_too_many_requests(em: Emulator, sleeps: Sleeps) -> None:
    em.create("nodes", {"metadata": {"name": "a"}})
    rule = em.inject(verbs="get", resource="nodes", error=429, retry_after=0)
    c = KubeClient(em.api_client(), retries=0)
    with pytest.raises(ApiError):
        c.get(NODES, "a")
    assert rule.hits == 1


# -- the write rate limit ------------------------------------------------------------------------------


def test_the_rate_limit_applies_to_writes_only(em: Emulator) -> None:
    c = KubeClient(em.api_client())
    bucket = CountingBucket()
    c.writes = bucket
    pod = c.create(PODS, pod_body(), "default")
    c.get(PODS, "p", "default")
    c.list(PODS, "default")
    c.watch(PODS, c.list(PODS)["metadata"]["resourceVersion"], timeout_seconds=1).close()
    c.served("resource.k8s.io", "resourceclaims", ("v1",))
    assert bucket.acquired == 1
    c.patch(PODS, "p", {"metadata": {"labels": {"a": "b"}}}, namespace="default")
    pod = c.get(PODS, "p", "default")
    c.update(PODS, pod)
    c.bind("default", "p", pod["metadata"]["uid"], "n")
    c.delete(PODS, "p", "default")
    assert bucket.acquired == 5


def test_writes_beyond_the_burst_wait_for_tokens(em: Emulator, sleeps: Sleeps) -> None:
    c = KubeClient(em.api_client())
    c.writes = TokenBucket(qps=2, burst=1, clock=lambda: 0.0)
    c.create(NODES, {"metadata": {"name": "a"}})
    c.get(NODES, "a")
    assert sleeps.seen == []
    c.create(NODES, {"metadata": {"name": "b"}})
    c.create(NODES, {"metadata": {"name": "c"}})
    assert sleeps.seen == [0.5, 1.0]


# -- watch -----------------------------------------------------------------------------------------


def test_watch_streams_events_after_its_resource_version(em: Emulator) -> None:
    c = KubeClient(em.api_client())
    em.create("nodes", {"metadata": {"name": "before"}})
    rv = c.list(NODES)["metadata"]["resourceVersion"]
    stream = c.watch(NODES, rv, timeout_seconds=10)
    em.create("nodes", {"metadata": {"name": "after"}})
    em.delete("nodes", "before")
    events: list[tuple[str, str]] = []
    for event in stream:
        if event["type"] == "BOOKMARK":
            continue
        events.append((event["type"], event["object"]["metadata"]["name"]))
        if len(events) == 2:
            break
    stream.close()
    assert events == [("ADDED", "after"), ("DELETED", "before")]


def test_closing_a_watch_from_another_thread_ends_its_reader(em: Emulator) -> None:
    c = KubeClient(em.api_client())
    stream = c.watch(NODES, c.list(NODES)["metadata"]["resourceVersion"], timeout_seconds=60)
    started, ended = threading.Event(), threading.Event()

    def read() -> None:
        started.set()
        try:
            for _ in stream:
                pass
        except Exception:  # the cut connection surfaces as a protocol error; the informer retries
            pass
        ended.set()

    reader = threading.Thread(target=read, daemon=True)
    reader.start()
    assert started.wait(5)
    stream.close()
    assert ended.wait(5)


class Loader:
    """What kubernetes' kubeconfig loader does: its hook installs a fresh hook on every run."""

    def __init__(self) -> None:
        self.runs = 0
        self.refresh_api_key_hook: Any = self.hook()

    def hook(self) -> Any:
        def refresh(configuration: Any) -> None:
            self.runs += 1
            configuration.refresh_api_key_hook = self.hook()

        return refresh


def test_the_credential_refresh_runs_at_most_once_per_interval_and_stays_throttled() -> None:
    config = Loader()
    config.refresh_api_key_hook = throttled(config.refresh_api_key_hook, 3600.0)
    for _ in range(5):
        config.refresh_api_key_hook(config)
    assert config.runs == 1  # the first call runs, the rest fall in the interval
    assert config.refresh_api_key_hook.__qualname__ == "throttled.<locals>.refresh"
    every_time = Loader()
    every_time.refresh_api_key_hook = throttled(every_time.refresh_api_key_hook, 0.0)
    for _ in range(3):
        every_time.refresh_api_key_hook(every_time)
    assert every_time.runs == 3  # each run's new hook is the one run next


def test_a_client_from_a_kubeconfig_refreshes_its_token_throttled_and_still_authenticates(
    em: Emulator, tmp_path: Path
) -> None:
    em.add_token("t", "admin", ["system:masters"])
    c = KubeClient.from_config(str(em.kubeconfig(tmp_path / "kubeconfig", token="t")), retries=0)
    hook = c.api.configuration.refresh_api_key_hook
    assert hook is not None
    assert hook.__qualname__ == "throttled.<locals>.refresh"
    for _ in range(3):
        assert c.list(NODES)["kind"] == "NodeList"
    assert c.api.configuration.refresh_api_key_hook is hook  # the loader's re-install was caught


# -- the leader fence ---------------------------------------------------------------------------------


class Leading:
    """A fence the test takes down (from the client's hook, or while the client waits)."""

    def __init__(self) -> None:
        self.leading = True

    def __call__(self) -> bool:
        return self.leading

    def lose(self, *_: Any) -> None:
        self.leading = False


def test_a_fenced_client_writes_nothing_without_the_lease_and_reads_as_ever(em: Emulator) -> None:
    em.create("nodes", {"metadata": {"name": "a"}})
    fence = Leading()
    fence.lose()
    c = KubeClient(em.api_client()).fenced(fence)
    assert c.get(NODES, "a")["metadata"]["name"] == "a"
    assert len(c.list(NODES)["items"]) == 1
    em.reset_requests()
    writes: list[Callable[[], Obj]] = [
        lambda: c.create(NODES, {"metadata": {"name": "b"}}),
        lambda: c.patch(NODES, "a", {"metadata": {"labels": {"x": "y"}}}),
        lambda: c.delete(NODES, "a"),
        lambda: c.bind("default", "p", "u", "a"),
    ]
    for write in writes:
        with pytest.raises(NotLeader):
            write()
    assert em.writes() == 0


def test_the_fence_is_checked_again_before_every_retry(em: Emulator) -> None:
    """A write that meets 503 is retried (4 times, up to 30 s each): a process that lost the lease
    meanwhile must not send it again."""
    fence = Leading()
    rule = em.inject(verbs="create", resource="nodes", error=503)
    c = KubeClient(em.api_client(), hook=lambda verb, res, code: fence.lose() if code == 503 else None)
    fenced = c.fenced(fence)
    with pytest.raises(NotLeader):
        fenced.create(NODES, {"metadata": {"name": "a"}})
    assert rule.hits == 1  # not retried: leadership was lost after the first answer


def test_the_fence_is_checked_again_after_the_rate_limiters_wait(
    em: Emulator, monkeypatch: pytest.MonkeyPatch
) -> None:
    fence = Leading()

    class LoseWhileWaiting:
        @staticmethod
        def sleep(seconds: float) -> None:
            fence.lose()

    monkeypatch.setattr("webhook.kube.ratelimit.time", LoseWhileWaiting)
    c = KubeClient(em.api_client()).fenced(fence)
    c.writes = TokenBucket(qps=1, burst=1, clock=lambda: 0.0)
    c.create(NODES, {"metadata": {"name": "a"}})  # the burst's token
    with pytest.raises(NotLeader):
        c.create(NODES, {"metadata": {"name": "b"}})  # waits a second for a token, the lease is lost
    assert [n["metadata"]["name"] for n in em.list("nodes")] == ["a"]


def test_a_fenced_write_gets_no_more_than_the_fence_s_window_and_none_without_one(em: Emulator) -> None:
    windows = [0.0]
    c = KubeClient(em.api_client(), timeout=30.0).fenced(lambda: True, lambda: windows[0])
    with pytest.raises(NotLeader):
        c.create(NODES, {"metadata": {"name": "a"}})
    assert em.writes() == 0
    windows[0] = 4.5
    assert c._write_timeout("create", "/api/v1/nodes", 30.0) == 4.5
    assert c._write_timeout("create", "/api/v1/nodes", 2.0) == 2.0
    c.create(NODES, {"metadata": {"name": "a"}})
    assert [n["metadata"]["name"] for n in em.list("nodes")] == ["a"]


def test_a_write_given_up_is_reset_so_the_request_can_never_arrive_late() -> None:
    """An API server that takes the request and never answers: once the window runs out the
    client resets the connection (SO_LINGER 0). A graceful close would leave the request in the
    kernel's send queue, retransmitted after a cut until it lands, after the lease passed on."""
    listener = socket.create_server(("127.0.0.1", 0))
    port = listener.getsockname()[1]
    seen: list[str] = []

    def serve() -> None:
        conn, _ = listener.accept()
        with conn:
            data = b""
            while b"\r\n\r\n" not in data:
                data += conn.recv(4096)
            head, _, body = data.partition(b"\r\n\r\n")
            length = int(head.lower().split(b"content-length:")[1].split(b"\r\n")[0])
            while len(body) < length:
                body += conn.recv(4096)
            try:
                seen.append("eof" if conn.recv(4096) == b"" else "data")
            except ConnectionResetError:
                seen.append("reset")

    server = threading.Thread(target=serve)
    server.start()
    configuration = kubernetes.client.Configuration(host=f"http://127.0.0.1:{port}")
    c = KubeClient(kubernetes.client.ApiClient(configuration), retries=0).fenced(lambda: True, lambda: 0.3)
    with pytest.raises(ApiError, match="timed out"):
        c.create(NODES, {"metadata": {"name": "a"}})
    server.join(10)
    listener.close()
    assert seen == ["reset"]


def test_a_fenced_client_shares_the_rate_limit_and_the_hook(em: Emulator) -> None:
    seen: list[str] = []
    c = KubeClient(em.api_client(), hook=lambda verb, res, code: seen.append(verb))
    fenced = c.fenced(lambda: True)
    assert fenced.writes is c.writes
    fenced.create(NODES, {"metadata": {"name": "a"}})
    assert seen == ["create"]
    assert c.fence is None  # the original stays unfenced (the elector's)


def test_a_client_with_its_own_rate_limit_shares_the_rest(em: Emulator) -> None:
    c = KubeClient(em.api_client(), qps=7, burst=3).fenced(lambda: True)
    own = c.with_own_rate_limit()
    assert own.writes is not c.writes
    assert (own.writes.qps, own.writes.burst) == (7, 3)
    assert own.fence is c.fence
    assert own.api is c.api


def test_a_client_with_its_own_connections_takes_no_token_nor_connection_of_the_other(em: Emulator) -> None:
    """The Events' client (kube-scheduler's event client): its writes leave the main client's
    bucket and pool untouched, and it is still fenced and authenticated like it."""
    up = [True]
    em.add_token("t", "events-writer", ["system:masters"])
    c = KubeClient(em.api_client("t"), qps=1, burst=1).fenced(lambda: up[0])
    own = c.with_own_connections(4)
    assert own._transport is not None
    assert c._transport is not None
    assert own._transport is not c._transport
    assert own._transport.maxsize == 4
    own.writes = TokenBucket(qps=1000, burst=1000)
    for i in range(5):
        own.create(NODES, {"metadata": {"name": f"n{i}"}})
    assert c._transport.idle == 0  # the main client never opened a connection
    assert own._transport.idle == 1  # one kept-alive connection served all five
    assert c.writes.reserve() == 0.0  # its one token is still there: nothing waited on it
    up[0] = False
    with pytest.raises(NotLeader):
        own.create(NODES, {"metadata": {"name": "late"}})
    assert len(em.list("nodes")) == 5
    assert {r.user for r in em.requests() if r.verb == "create"} == {"events-writer"}


# -- the transport -------------------------------------------------------------------------------


class Recorder(http.server.BaseHTTPRequestHandler):
    """A server (or proxy) that answers every request with ``{"ok": true}`` and keeps its request
    line, headers (names in lower case) and body."""

    seen: list[tuple[str, str, dict[str, str], bytes]] = []

    def _answer(self) -> None:
        length = int(self.headers.get("Content-Length") or 0)
        body = self.rfile.read(length) if length else b""
        self.seen.append((self.command, self.path, {k.lower(): v for k, v in self.headers.items()}, body))
        data = b'{"ok": true}'
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    do_GET = do_PATCH = do_POST = _answer

    def log_message(self, *args: Any) -> None:
        pass


@pytest.fixture
def recorder() -> Iterator[tuple[str, list[tuple[str, str, dict[str, str], bytes]]]]:
    seen: list[tuple[str, str, dict[str, str], bytes]] = []
    handler = type("Handler", (Recorder,), {"seen": seen})
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}", seen
    finally:
        server.shutdown()
        server.server_close()


def configured(host: str, **settings: Any) -> KubeClient:
    configuration = kubernetes.client.Configuration()
    configuration.host = host
    configuration.api_key = {"authorization": "secret"}
    configuration.api_key_prefix = {"authorization": "Bearer"}
    for key, value in settings.items():
        setattr(configuration, key, value)
    api = kubernetes.client.ApiClient(configuration)
    api.user_agent = "draxr-test"
    return KubeClient(api)


def test_a_request_goes_to_the_pool_with_the_clients_headers_credentials_and_path(
    recorder: tuple[str, list[tuple[str, str, dict[str, str], bytes]]],
) -> None:
    base, seen = recorder
    client = configured(base + "/prefix")  # a server URL with a path (a proxy in front, say)
    assert client._transport is not None
    assert client.list(PODS, "ns", label_selector="app in (a, b),!x", field_selector="a=b") == {"ok": True}
    assert client.patch(PODS, "p", {"metadata": {"annotations": {"é": "ü"}}}, namespace="ns") == {"ok": True}
    (get_verb, get_path, get_headers, _), (patch_verb, patch_path, patch_headers, body) = seen
    path, _, query = get_path.partition("?")
    assert (get_verb, path) == ("GET", "/prefix/api/v1/namespaces/ns/pods")
    assert urllib.parse.parse_qs(query) == {"labelSelector": ["app in (a, b),!x"], "fieldSelector": ["a=b"]}
    for headers in (get_headers, patch_headers):
        assert headers["authorization"] == "Bearer secret"
        assert headers["user-agent"] == "draxr-test"
        assert headers["accept"] == "application/json"
    assert (patch_verb, patch_path) == ("PATCH", "/prefix/api/v1/namespaces/ns/pods/p?fieldManager=draxr")
    assert patch_headers["content-type"] == "application/merge-patch+json"
    assert json.loads(body) == {"metadata": {"annotations": {"é": "ü"}}}


def test_a_client_behind_a_proxy_sends_through_the_official_client(
    recorder: tuple[str, list[tuple[str, str, dict[str, str], bytes]]],
) -> None:
    proxy, seen = recorder
    client = configured("http://kube-apiserver.invalid:6443", proxy=proxy)
    assert client._transport is None  # the pool manager's proxy, not the transport
    assert client.get(NODES, "n") == {"ok": True}
    ((verb, target, headers, _),) = seen
    assert (verb, target) == ("GET", "http://kube-apiserver.invalid:6443/api/v1/nodes/n")
    assert headers["authorization"] == "Bearer secret"


def test_requests_share_one_kept_alive_connection_and_a_watch_has_its_own(em: Emulator) -> None:
    client = KubeClient(em.api_client())
    assert client._transport is not None
    created = client.create(PODS, pod_body(), "default")
    assert client.get(PODS, "p", "default")["metadata"]["uid"] == created["metadata"]["uid"]
    assert client._transport.idle == 1
    stream = client.watch(PODS, "0", namespace="default", timeout_seconds=60)
    assert next(iter(stream))["object"]["metadata"]["uid"] == created["metadata"]["uid"]
    stream.close()
    assert client._transport.idle == 1  # the watch's connection is never given back
    assert client.get(PODS, "p", "default")["metadata"]["name"] == "p"
