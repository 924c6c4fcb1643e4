"""``KubeClient``: JSON in, plain dicts out, over the official client's ``ApiClient``.

The generated model classes are bypassed on purpose: deserialising into them is slow and the
engine works on dicts. Configuration, authentication and TLS still come from the official client:
its headers and credentials (``update_params_for_auth``, the kubeconfig's refresh hook included)
and its urllib3 pool, which opens the TLS connections. Requests are then written and read on
those connections by ``transport`` (HTTP/1.1 on kept-alive sockets; a watch on a connection of its
own), past the generated REST layer, the pool manager and ``http.client``: about a third of the
worker's CPU at a few hundred requests a second. A client behind a proxy sends everything through
the official ``call_api``.

A client ``fenced`` by the leader election's fence sends no write while the fence is down: it is
asked before every attempt (retries of 429, 5xx and broken connections included) and again after
the write rate limiter's wait, so a write of a process that lost the lease never leaves it. Reads
are never fenced; the elector itself writes through the unfenced client. A write that leaves is
bounded by the fence's window (the time left before a follower may take the lease) and its
connection is reset, not closed, when that runs out: a graceful close leaves the request in the
kernel's send queue, retransmitted until it arrives, after a cut from the API server long after
the lease passed on.
"""

from __future__ import annotations

import copy
import math
import socket
import struct
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from functools import partial
from typing import Any, Literal, TypedDict
from urllib.parse import quote, urlencode

import kubernetes
import urllib3
from kubernetes.watch.watch import iter_resp_lines

from ..core.api.objects import Obj
from . import codec
from .ratelimit import TokenBucket
from .resources import PODS, Resource
from .transport import Answer, ProtocolError, Stream, Transport, connector

RequestHook = Callable[[str, str, int], None]  # (verb, resource plural, HTTP status)

MERGE_PATCH = "application/merge-patch+json"
JSON_PATCH = "application/json-patch+json"
STRATEGIC_PATCH = "application/strategic-merge-patch+json"


#: Seconds between two runs of the kubeconfig's credential refresh (see ``throttled``).
REFRESH_INTERVAL = 1.0


def throttled(hook: Callable[[Any], None], interval: float) -> Callable[[Any], None]:
    """A configuration's ``refresh_api_key_hook`` run at most once per ``interval`` seconds (and
    always the first time).

    A kubeconfig's loader refreshes the credential before every request: it checks the token's
    expiry and, whatever it finds, sets the configuration's host, TLS files and proxy again (the
    host's setter reads the whole proxy environment), and installs its hook afresh. Measured at
    about a third of a request's CPU; once a second still catches an expiring token well within
    its lifetime. The hook the loader installs is taken as the one to throttle next."""
    lock = threading.Lock()
    last = [-math.inf]
    current = [hook]

    def refresh(configuration: Any) -> None:
        now = time.monotonic()
        with lock:
            if now - last[0] < interval:
                return
            last[0] = now
        current[0](configuration)
        installed = getattr(configuration, "refresh_api_key_hook", None)
        if installed is not refresh and installed is not None:
            current[0] = installed
            configuration.refresh_api_key_hook = refresh

    return refresh


#: urllib3's own options and SO_LINGER 0: a connection given up is reset and its unsent request
#: dropped, never delivered late (see the module's docstring).
SOCKET_OPTIONS = [
    *urllib3.connection.HTTPConnection.default_socket_options,
    (socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0)),
]


class NotLeader(Exception):
    """Writes are fenced: this process does not hold the lease (now)."""


#: Verbs that only read: never rate limited, never fenced.
READS = frozenset({"get", "list", "watch"})


class ApiError(Exception):
    """A non-2xx answer, with the ``metav1.Status`` the server sent."""

    def __init__(self, status: int, body: Obj, verb: str = "", path: str = "") -> None:
        self.status = status
        self.body = body
        self.reason = str(body.get("reason", "")) if isinstance(body, dict) else ""
        self.message = str(body.get("message", "")) if isinstance(body, dict) else str(body)
        super().__init__(f"{verb} {path}: {status} {self.reason}: {self.message}".strip())

    retry_after: float = 0.0

    @property
    def transient(self) -> bool:
        """Worth retrying as is: throttled, a server-side error, or no answer at all."""
        return self.status in (0, 429, 500, 502, 503, 504)

    @property
    def not_found(self) -> bool:
        return self.status == 404

    @property
    def conflict(self) -> bool:
        return self.status == 409

    @property
    def gone(self) -> bool:
        return self.status == 410


@dataclass(frozen=True)
class ClientConnection:
    """How ``draxr serve`` reaches kube-apiserver (kube-scheduler's ``clientConnection``)."""

    kubeconfig: str | None = field(
        default=None, metadata={"help": "default: in-cluster config, then ~/.kube/config"}
    )
    #: Writes only: reads (the informers' lists and watches) are not limited. Four times
    #: kube-scheduler's 50 and 100: a pod is 4 writes (its Event has a client of its own), so 200
    #: binds about 50 pods/s, the first 100 of a burst at once; draxr's chart puts the worker in a
    #: priority level of its own, where the API server sheds any excess with 429s the client
    #: honours (measured on one 2-core API server: 12, 25, 45 and 60 pods/s at 50, 100, 200 and
    #: 400; README, "Performance").
    qps: float = field(default=200.0, metadata={"help": "client-side write rate limit"})
    burst: int = 400


class KubeClient:
    def __init__(
        self,
        api_client: Any,
        *,
        qps: float = ClientConnection.qps,
        burst: int = ClientConnection.burst,
        field_manager: str = "draxr",
        hook: RequestHook | None = None,
        timeout: float = 30.0,
        retries: int = 4,
    ) -> None:
        self.api = api_client
        self.writes = TokenBucket(qps, burst)
        self.field_manager = field_manager
        self.hook = hook
        self.timeout = timeout
        self.retries = retries
        #: While this answers False no write is sent (``fenced``); None: never fenced.
        self.fence: Callable[[], bool] | None = None
        #: Seconds a write sent now may take (``fenced``); None: the timeout alone.
        self.window: Callable[[], float] | None = None
        # urllib3 would retry 429/503 itself (three times, sleeping the whole Retry-After): the
        # retries and their deadline are ``request``'s alone.
        manager = getattr(getattr(api_client, "rest_client", None), "pool_manager", None)
        if manager is not None:
            manager.connection_pool_kw["retries"] = False
            manager.connection_pool_kw["socket_options"] = SOCKET_OPTIONS
        #: Requests and watches on connections the API server's own pool opens, and the path its
        #: URL starts with (None: every request through ``call_api``). At least 4 connections kept
        #: when the configuration says none.
        self._transport: Transport | None = None
        self._prefix = ""
        if type(manager) is urllib3.PoolManager:
            url = urllib3.util.parse_url(str(api_client.configuration.host))
            pool = manager.connection_from_url(url.url)
            size = int(getattr(api_client.configuration, "connection_pool_maxsize", 0) or 0)
            self._transport = Transport(connector(pool), str(url.netloc), max(size, 4))
            self._prefix = url.path or ""

    @classmethod
    def from_config(cls, kubeconfig: str | None = None, **kwargs: Any) -> KubeClient:
        """In-cluster config when there is no kubeconfig, like every controller."""
        configuration = kubernetes.client.Configuration()
        if kubeconfig:
            kubernetes.config.load_kube_config(  # type: ignore[no-untyped-call]
                config_file=kubeconfig, client_configuration=configuration
            )
        else:
            try:
                kubernetes.config.load_incluster_config(  # type: ignore[no-untyped-call]
                    client_configuration=configuration
                )
            except kubernetes.config.ConfigException:
                kubernetes.config.load_kube_config(  # type: ignore[no-untyped-call]
                    client_configuration=configuration
                )
        # Informers hold one connection each (about 15) and 32 binding cycles run at once: a pool
        # smaller than both discards connections it cannot keep, and each new one is a TLS handshake.
        configuration.connection_pool_maxsize = max(configuration.connection_pool_maxsize or 0, 64)
        hook: Any = getattr(configuration, "refresh_api_key_hook", None)
        if hook is not None:
            configuration.refresh_api_key_hook = throttled(hook, REFRESH_INTERVAL)  # type: ignore[assignment]
        api = kubernetes.client.ApiClient(configuration)
        api.user_agent = "draxr"
        return cls(api, **kwargs)

    def fenced(self, fence: Callable[[], bool], window: Callable[[], float] | None = None) -> KubeClient:
        """This client (its connections, write rate limit and hook shared) sending writes only
        while ``fence()`` answers True, each given at most ``window()`` seconds; NotLeader
        otherwise."""
        twin = copy.copy(self)
        twin.fence = fence
        twin.window = window
        return twin

    def with_own_rate_limit(self) -> KubeClient:
        """This client (connections, fence and hook shared) with a write rate limit of its own, of
        the same qps and burst: kube-scheduler's Events go through a client of their own, so that
        they never hold a binding back."""
        twin = copy.copy(self)
        twin.writes = TokenBucket(self.writes.qps, self.writes.burst)
        return twin

    def with_own_connections(self, connections: int) -> KubeClient:
        """This client (credentials, fence and hook shared) with a rate limit and a connection pool
        of its own, ``connections`` wide: kube-scheduler's event client is a clientset of its own,
        so a burst of Events takes neither tokens nor connections from the bindings. Behind a
        proxy (no transport) only the rate limit is its own."""
        twin = self.with_own_rate_limit()
        if self._transport is not None:
            own = self._transport
            twin._transport = Transport(own.connect, own.host, connections)
        return twin

    def _check_fence(self, verb: str, path: str) -> None:
        if self.fence is not None and not self.fence():
            raise NotLeader(f"not the leader: {verb} {path} not sent")

    def _write_timeout(self, verb: str, path: str, timeout: float) -> float:
        """``timeout``, cut to the fence's window; NotLeader when none is left."""
        if self.window is None:
            return timeout
        left = self.window()
        if left <= 0:
            raise NotLeader(f"not the leader: {verb} {path} not sent")
        return min(timeout, left)

    # -- transport ---------------------------------------------------------------------------

    def request(self, verb: str, path: str, *, retries: int | None = None, **kwargs: Any) -> Any:
        """One API call; transient failures (429, 5xx, a broken connection) are retried a few
        times with a short exponential backoff, as client-go's rest client does for throttling.
        A fenced write asks the fence before every attempt."""
        delay = 0.05
        retries = self.retries if retries is None else retries
        write = verb not in READS
        for attempt in range(retries + 1):
            if write:
                self._check_fence(verb, path)
            try:
                return self._request_once(verb, path, **kwargs)
            except ApiError as e:
                if not e.transient or attempt == retries:
                    raise
                # The server's Retry-After in full (APF sheds load with it), else the backoff.
                wait = max(min(delay, 1.0), min(e.retry_after, MAX_RETRY_AFTER))
            time.sleep(wait)
            delay *= 2
        raise AssertionError("unreachable")

    def _request_once(
        self,
        verb: str,
        path: str,
        *,
        query: list[tuple[str, str]] | None = None,
        body: Any = None,
        content_type: str = "application/json",
        resource: str = "",
        timeout: float | None = None,
        stream: bool = False,
    ) -> Any:
        method = {
            "get": "GET",
            "list": "GET",
            "watch": "GET",
            "create": "POST",
            "update": "PUT",
            "patch": "PATCH",
            "delete": "DELETE",
        }[verb]
        timeout = timeout or self.timeout
        if method != "GET":
            self.writes.acquire()
            self._check_fence(verb, path)  # the wait may have outlasted the lease
            timeout = self._write_timeout(verb, path, timeout)
        headers = {"Accept": "application/json", "Content-Type": content_type}
        try:
            if self._transport is not None:
                opened = self._direct(method, path, list(query or []), headers, body, timeout, stream)
                if isinstance(opened, Stream):
                    self._record(verb, resource, opened.status)
                    return WatchStream(iter(opened), opened.close)
                answer = opened
            else:
                m, url, hdrs, _, post = self.api.param_serialize(
                    method,
                    path,
                    query_params=list(query or []),
                    header_params=headers,
                    auth_settings=["BearerToken"],
                )
                resp = self.api.call_api(m, url, hdrs, body, post, _request_timeout=timeout).response
                if stream and int(resp.status) < 400:
                    self._record(verb, resource, int(resp.status))
                    lines = iter_resp_lines(resp)  # type: ignore[no-untyped-call]
                    return WatchStream(lines, partial(_close_response, resp))
                answer = Answer(int(resp.status), {k.lower(): v for k, v in resp.headers.items()}, resp.data)
        except kubernetes.client.exceptions.ApiException as e:
            status = int(e.status or 0)
            self._record(verb, resource, status)
            raise ApiError(status, _json_or_text(e.body), verb, path) from None
        except (urllib3.exceptions.HTTPError, OSError, ProtocolError) as e:  # refused, reset, timed out
            self._record(verb, resource, 0)
            raise ApiError(0, {"message": f"{type(e).__name__}: {e}"}, verb, path) from None
        status = answer.status
        self._record(verb, resource, status)
        if status >= 400:
            err = ApiError(status, _json_or_text(answer.body), verb, path)
            err.retry_after = _retry_after(answer.headers.get("retry-after"))
            raise err
        return codec.loads(answer.body) if answer.body else {}

    def _direct(
        self,
        method: str,
        path: str,
        query: list[tuple[str, str]],
        headers: dict[str, str],
        body: Any,
        timeout: float,
        stream: bool = False,
    ) -> Answer | Stream:
        """One request on the transport: the official client's default headers, cookie and
        credentials (as ``param_serialize`` sets them), the body as ``call_api`` encodes it (JSON);
        no retries or redirects (``request`` retries). ``stream``: a watch, read as it comes."""
        assert self._transport is not None
        api = self.api
        headers.update(api.default_headers)
        if api.cookie:
            headers["Cookie"] = api.cookie
        api.update_params_for_auth(headers, query, ["BearerToken"], path, method, body)
        url = self._prefix + path
        if query:
            url += "?" + urlencode(query, quote_via=quote)
        if stream:
            return self._transport.stream(method, url, headers, timeout)
        data = codec.dumps(body) if body is not None else None
        return self._transport.request(method, url, headers, data, timeout)

    def _record(self, verb: str, resource: str, status: int) -> None:
        if self.hook is not None:
            self.hook(verb, resource, status)

    # -- verbs ------------------------------------------------------------------------------

    def get(
        self,
        res: Resource,
        name: str,
        namespace: str | None = None,
        *,
        timeout: float | None = None,
        retries: int | None = None,
    ) -> Obj:
        """``timeout`` and ``retries`` override the client's defaults (a caller with a deadline)."""
        result: Obj = self.request(
            "get", res.path(namespace, name), resource=res.plural, timeout=timeout, retries=retries
        )
        return result

    def list(
        self,
        res: Resource,
        namespace: str | None = None,
        *,
        label_selector: str | None = None,
        field_selector: str | None = None,
        resource_version: str | None = None,
        timeout: float | None = None,
        retries: int | None = None,
        limit: int | None = None,
        continue_token: str | None = None,
    ) -> Obj:
        """``timeout`` and ``retries`` override the client's defaults (a caller with a deadline).
        ``limit`` and ``continue_token``: one page of a paged list (``metadata.continue`` names the
        next; a token the server no longer honours is answered with 410)."""
        query: list[tuple[str, str]] = []
        if label_selector:
            query.append(("labelSelector", label_selector))
        if field_selector:
            query.append(("fieldSelector", field_selector))
        if resource_version is not None:
            query.append(("resourceVersion", resource_version))
        if limit:
            query.append(("limit", str(limit)))
        if continue_token:
            query.append(("continue", continue_token))
        result: Obj = self.request(
            "list", res.path(namespace), query=query, resource=res.plural, timeout=timeout, retries=retries
        )
        return result

    def server_version(self) -> str:
        """The API server's ``gitVersion`` (``GET /version``)."""
        found = self.request("get", "/version", retries=1)
        version = found.get("gitVersion") if isinstance(found, dict) else None
        return version if isinstance(version, str) else ""

    def served(self, group: str, plural: str, versions: tuple[str, ...]) -> str | None:
        """The first of ``versions`` in which the API server serves ``plural`` (discovery)."""
        for version in versions:
            try:
                found = self.request("get", f"/apis/{group}/{version}", retries=1)
            except ApiError as e:
                if e.not_found:
                    continue
                raise
            if any(isinstance(r, dict) and r.get("name") == plural for r in found.get("resources") or []):
                return version
        return None

    def watch(
        self,
        res: Resource,
        resource_version: str,
        *,
        timeout_seconds: int = 300,
        namespace: str | None = None,
        field_selector: str | None = None,
    ) -> WatchStream:
        """Open a watch; iterate the result for events, ``close()`` it from any thread to stop."""
        query = [
            ("watch", "true"),
            ("resourceVersion", resource_version),
            ("allowWatchBookmarks", "true"),
            ("timeoutSeconds", str(timeout_seconds)),
        ]
        if field_selector:
            query.append(("fieldSelector", field_selector))
        stream: WatchStream = self.request(
            "watch",
            res.path(namespace),
            query=query,
            resource=res.plural,
            timeout=timeout_seconds + 30,
            stream=True,
        )
        return stream

    def create(
        self,
        res: Resource,
        obj: Obj,
        namespace: str | None = None,
        *,
        dry_run: bool = False,
        timeout: float | None = None,
        retries: int | None = None,
    ) -> Obj:
        query = [("fieldManager", self.field_manager)]
        if dry_run:
            query.append(("dryRun", "All"))
        result: Obj = self.request(
            "create",
            res.path(namespace),
            query=query,
            body=obj,
            resource=res.plural,
            timeout=timeout,
            retries=retries,
        )
        return result

    def update(
        self,
        res: Resource,
        obj: Obj,
        *,
        subresource: str | None = None,
        timeout: float | None = None,
        retries: int | None = None,
    ) -> Obj:
        """``timeout`` and ``retries`` override the client's defaults (a caller with a deadline)."""
        meta = obj.get("metadata", {})
        path = res.path(meta.get("namespace"), meta["name"], subresource)
        result: Obj = self.request(
            "update",
            path,
            query=[("fieldManager", self.field_manager)],
            body=obj,
            resource=_label(res, subresource),
            timeout=timeout,
            retries=retries,
        )
        return result

    def patch(
        self,
        res: Resource,
        name: str,
        patch: Any,
        *,
        namespace: str | None = None,
        subresource: str | None = None,
        patch_type: str = MERGE_PATCH,
    ) -> Obj:
        result: Obj = self.request(
            "patch",
            res.path(namespace, name, subresource),
            query=[("fieldManager", self.field_manager)],
            body=patch,
            content_type=patch_type,
            resource=_label(res, subresource),
        )
        return result

    def delete(
        self,
        res: Resource,
        name: str,
        namespace: str | None = None,
        *,
        uid: str | None = None,
        resource_version: str | None = None,
    ) -> Obj:
        body: Obj = {"apiVersion": "v1", "kind": "DeleteOptions"}
        preconditions = {k: v for k, v in (("uid", uid), ("resourceVersion", resource_version)) if v}
        if preconditions:
            body["preconditions"] = preconditions
        result: Obj = self.request("delete", res.path(namespace, name), body=body, resource=res.plural)
        return result

    def bind(self, namespace: str, pod_name: str, pod_uid: str, node_name: str) -> Obj:
        path = PODS.path(namespace, pod_name, "binding")
        body = binding(namespace, pod_name, pod_uid, node_name)
        result: Obj = self.request("create", path, body=body, resource="pods/binding")
        return result


class BindingMetadata(TypedDict):
    name: str
    namespace: str
    #: The pod's: the API server refuses the Binding for another pod of the same name.
    uid: str


class NodeReference(TypedDict):
    apiVersion: Literal["v1"]
    kind: Literal["Node"]
    name: str


class Binding(TypedDict):
    """The ``pods/binding`` body that places a pod on its node (the binding cycle's last write)."""

    apiVersion: Literal["v1"]
    kind: Literal["Binding"]
    metadata: BindingMetadata
    target: NodeReference


def binding(namespace: str, pod_name: str, pod_uid: str, node_name: str) -> Binding:
    """What ``bind`` posts: upstream's ``v1.Binding``, the pod's uid as its precondition."""
    return {
        "apiVersion": "v1",
        "kind": "Binding",
        "metadata": {"name": pod_name, "namespace": namespace, "uid": pod_uid},
        "target": {"apiVersion": "v1", "kind": "Node", "name": node_name},
    }


class WatchStream:
    """The lines of one watch response, decoded; closable from another thread."""

    def __init__(self, lines: Iterator[bytes | str], close: Callable[[], None]) -> None:
        self._lines = lines
        self._close = close

    def __iter__(self) -> Iterator[Obj]:
        try:
            for line in self._lines:
                if line:
                    yield codec.loads(line)
        finally:
            self.close()

    def close(self) -> None:
        self._close()


def _close_response(raw: Any) -> None:
    """Closes urllib3's response of a watch (a proxied client's)."""
    try:
        if hasattr(raw, "shutdown"):
            raw.shutdown()
        raw.close()
        raw.release_conn()
    except Exception:  # closing a socket that another thread reads from may race; harmless
        pass


#: The longest Retry-After a request waits before its next attempt (seconds): kube-apiserver asks
#: for 1 to a few; a larger value is bounded, so a worker thread is never parked for long.
MAX_RETRY_AFTER = 30.0


def _retry_after(value: Any) -> float:
    try:
        return float(value) if value is not None else 0.0
    except (TypeError, ValueError):
        return 0.0


def _label(res: Resource, subresource: str | None) -> str:
    return f"{res.plural}/{subresource}" if subresource else res.plural


def _json_or_text(data: Any) -> Obj:
    if isinstance(data, bytes):
        data = data.decode("utf-8", "replace")
    if isinstance(data, str):
        try:
            parsed = codec.loads(data)
        except ValueError:
            return {"message": data}
        return parsed if isinstance(parsed, dict) else {"message": data}
    return {"message": str(data)}
