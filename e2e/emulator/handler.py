"""The HTTP face of the emulator: one aiohttp handler that authenticates, injects faults, routes to
discovery or the registry, streams watches and turns every failure into a ``Status`` body.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable
from typing import Any

from aiohttp import web

from . import codec, discovery, errors, openapi
from .auth import Authenticator, UserInfo
from .faults import FaultInjector, RequestRecord
from .patching import APPLY_PATCH, decode_patch, media_type
from .registry import Registry, Request
from .requestinfo import RequestInfo, parse
from .resources import ResourceIndex, ResourceType
from .selectors import combine, field_predicate, label_predicate
from .watch import WatchOptions, WatchStream

log = logging.getLogger(__name__)

DEFAULT_WATCH_TIMEOUT = 1800.0
_JSON_TYPES = ("", "application/json", "*/*")
_YAML_TYPES = ("application/yaml", "application/x-yaml", "text/yaml")


def _json_response(
    body: Any, status: int = 200, warnings: list[str] | None = None, extra: dict[str, str] | None = None
) -> web.Response:
    headers = [("Content-Type", "application/json"), *(extra or {}).items()]
    for text in warnings or ():
        escaped = text.replace("\\", "\\\\").replace('"', '\\"')
        headers.append(("Warning", f'299 - "{escaped}"'))
    return web.Response(body=codec.encode(body), status=status, headers=headers)


def error_response(exc: errors.ApiError, warnings: list[str] | None = None) -> web.Response:
    if exc.plain:
        return web.Response(text=exc.message + "\n", status=exc.code, content_type="text/plain")
    return _json_response(exc.status(), exc.code, warnings, exc.headers)


def _int_param(query: Any, name: str, default: int | None = None) -> int | None:
    raw = query.get(name)
    if raw is None or raw == "":
        return default
    try:
        value = int(raw)
    except ValueError:
        raise errors.bad_request(f"invalid value for {name}: {raw!r}: must be an integer") from None
    if value < 0:
        raise errors.bad_request(f"invalid value for {name}: {raw!r}: must not be negative")
    return value


def _dry_run(query: Any) -> bool:
    values = query.getall("dryRun", [])
    for v in values:
        if v != "All":
            raise errors.bad_request(f'Invalid dry run value "{v}": supported values: "All"')
    return bool(values)


def _bool_param(query: Any, name: str) -> bool:
    return str(query.get(name, "")).lower() in ("true", "1")


class ApiHandler:
    """Callable for ``aiohttp.web.Server``; owns the set of open watch streams."""

    def __init__(
        self,
        index: ResourceIndex,
        registry: Registry,
        authenticator: Authenticator,
        faults: FaultInjector,
        *,
        address: Callable[[], str],
        bookmark_interval: float,
        watch_expired_as_http: Callable[[], bool],
        release: str | None = None,
    ) -> None:
        self._index = index
        self._registry = registry
        self._auth = authenticator
        self._faults = faults
        self._address = address
        self._bookmark_interval = bookmark_interval
        self._watch_expired_as_http = watch_expired_as_http
        self._version = discovery.version_document(release)
        self.watches: set[WatchStream] = set()

    async def __call__(self, request: web.BaseRequest) -> web.StreamResponse:
        started = time.monotonic()
        info = parse(request.method, request.path, request.query.get("watch"))
        user = "-"
        dry_run = False
        warnings: list[str] = []
        try:
            identity = self._auth.authenticate(request.headers.get("Authorization"))
            user = identity.username
            if not info.is_resource:
                response: web.StreamResponse = self._non_resource(request, info)
            else:
                dry_run = "dryRun" in request.query
                response = await self._resource(request, info, identity, warnings)
        except errors.ApiError as exc:
            response = error_response(exc, warnings)
        except asyncio.CancelledError:
            raise
        except Exception as exc:  # a bug in the emulator: still answer with a Status, never a traceback
            log.exception("emulator failed on %s %s", request.method, request.path)
            response = error_response(errors.internal(f"emulator error: {type(exc).__name__}: {exc}"))
        self._faults.record(
            RequestRecord(
                info.verb or request.method.lower(),
                info.resource_path,
                info.namespace,
                info.name,
                response.status,
                user,
                started,
                time.monotonic() - started,
                dry_run,
            )
        )
        return response

    # --- non-resource paths ---------------------------------------------------------------------

    def _non_resource(self, request: web.BaseRequest, info: RequestInfo) -> web.StreamResponse:
        if request.method not in ("GET", "HEAD"):
            raise errors.method_not_allowed(request.method, info.path)
        parts = info.parts
        doc: Any = None
        if parts in ((), ("",)):
            doc = {"paths": ["/api", "/api/v1", "/apis", "/healthz", "/livez", "/readyz", "/version"]}
        elif parts == ("version",):
            doc = self._version
        elif parts == ("api",):
            doc = discovery.core_versions(self._address())
        elif parts == ("apis",):
            doc = discovery.group_list(self._index)
        elif len(parts) == 2 and parts[0] == "api":
            doc = discovery.resource_list(self._index, "", parts[1])
        elif len(parts) == 2 and parts[0] == "apis":
            doc = discovery.group(self._index, parts[1])
        elif len(parts) == 3 and parts[0] == "apis":
            doc = discovery.resource_list(self._index, parts[1], parts[2])
        elif parts[:2] == ("openapi", "v3"):
            doc = openapi.lookup(self._index, parts)
        elif len(parts) >= 1 and parts[0] in ("healthz", "livez", "readyz"):
            return web.Response(text="ok", content_type="text/plain")
        if doc is None:
            raise errors.page_not_found()
        return _json_response(doc)

    # --- resources ------------------------------------------------------------------------------

    def _resolve(self, info: RequestInfo) -> tuple[ResourceType, str]:
        rt = self._index.by_gvr(info.group, info.version, info.resource)
        if rt is None:
            if not self._index.in_group_version(info.group, info.version):
                raise errors.page_not_found()
            raise errors.endpoint_not_found()
        if info.subresource and info.subresource not in rt.subresources:
            raise errors.endpoint_not_found()
        if rt.kind == "Namespace":
            return rt, ""
        if not rt.namespaced and info.namespace:
            raise errors.endpoint_not_found()
        if rt.namespaced and not info.namespace and info.verb not in ("list", "watch"):
            raise errors.endpoint_not_found()
        return rt, info.namespace

    async def _resource(
        self, request: web.BaseRequest, info: RequestInfo, user: UserInfo, warnings: list[str]
    ) -> web.StreamResponse:
        rt, namespace = self._resolve(info)
        fired = self._faults.fire(info.verb, rt.group, info.resource_path, info.namespace, info.name)
        if fired is not None:
            if fired.latency > 0:
                await asyncio.sleep(fired.latency)
            if fired.error is not None:
                raise fired.error
        query = request.query
        req = Request(rt, namespace, info.name, user, info.subresource, warnings=warnings)
        verb = info.verb
        if verb in ("get", "list", "watch"):
            return await self._read(request, info, req)
        req.dry_run = _dry_run(query)
        if (verb == "create" and info.name and not info.subresource) or (
            verb in ("update", "patch") and not info.name
        ):
            raise errors.method_not_allowed(request.method, info.path)
        if verb == "create":
            body = await self._body(request)
            if info.subresource == "binding":
                return _json_response(await self._registry.bind(req, body), 201, warnings)
            if info.subresource:
                raise errors.method_not_allowed("create", info.resource_path)
            return _json_response(await self._registry.create(req, body), 201, warnings)
        if verb == "update":
            body = await self._body(request)
            existed = self._registry.store.get(rt.key, namespace, info.name) is not None
            result = await self._registry.update(req, body)
            return _json_response(result, 200 if existed else 201, warnings)
        if verb == "patch":
            patch_type = media_type(request.headers.get("Content-Type"))
            if patch_type == APPLY_PATCH and not query.get("fieldManager"):
                raise errors.invalid(
                    "meta.k8s.io",
                    "PatchOptions",
                    "",
                    [errors.required("fieldManager", "is required for apply patch")],
                )
            patch = decode_patch(patch_type, await self._raw_body(request))
            existed = self._registry.store.get(rt.key, namespace, info.name) is not None
            result = await self._registry.patch(req, patch_type, patch)
            return _json_response(result, 200 if existed else 201, warnings)
        if verb in ("delete", "deletecollection"):
            options = await self._delete_options(request)
            req.dry_run = req.dry_run or options.get("dryRun") == ["All"]
            if verb == "delete":
                return _json_response(await self._registry.delete(req, options), 200, warnings)
            pred = self._predicate(query, rt)
            return _json_response(await self._registry.delete_collection(req, pred, options), 200, warnings)
        raise errors.method_not_allowed(request.method, info.resource_path)

    @staticmethod
    def _predicate(query: Any, rt: ResourceType) -> Any:
        return combine(
            label_predicate(query.get("labelSelector")), field_predicate(query.get("fieldSelector"), rt.key)
        )

    async def _read(self, request: web.BaseRequest, info: RequestInfo, req: Request) -> web.StreamResponse:
        query = request.query
        if info.verb == "get":
            return _json_response(self._registry.get(req))
        predicate = self._predicate(query, req.rt)
        rv_text = query.get("resourceVersion", "")
        if info.verb == "watch":
            return await self._watch(request, req, predicate, rv_text)
        if rv_text and rv_text != "0":
            _parse_rv(rv_text)
        listed = self._registry.list_objects(
            req, predicate, _int_param(query, "limit", 0) or 0, query.get("continue", "")
        )
        return _json_response(listed)

    async def _watch(
        self, request: web.BaseRequest, req: Request, predicate: Any, rv_text: str
    ) -> web.StreamResponse:
        query = request.query
        send_initial = _bool_param(query, "sendInitialEvents")
        since = None if (not rv_text or rv_text == "0" or send_initial) else _parse_rv(rv_text)
        timeout = _int_param(query, "timeoutSeconds")
        options = WatchOptions(
            since=since,
            bookmarks=_bool_param(query, "allowWatchBookmarks"),
            timeout=float(timeout) if timeout else DEFAULT_WATCH_TIMEOUT,
            bookmark_interval=self._bookmark_interval,
            initial_events_end=send_initial,
        )
        stream = WatchStream(
            self._registry.store,
            req.rt,
            req.namespace if req.rt.namespaced and req.namespace else None,
            predicate,
            options,
        )
        try:
            stream.open()
        except errors.ApiError as exc:
            if self._watch_expired_as_http():
                raise
            line = codec.encode({"type": "ERROR", "object": exc.status()}) + b"\n"
            return web.Response(body=line, headers={"Content-Type": "application/json"})
        response = web.StreamResponse(status=200, headers={"Content-Type": "application/json"})
        response.enable_chunked_encoding()
        self.watches.add(stream)
        self._registry.store.touch()
        try:
            await response.prepare(request)
            async for chunk in stream.chunks():
                await response.write(chunk)
            if stream.ended_by == "abort":
                if request.transport is not None:
                    request.transport.abort()
                return response
            await response.write_eof()
        except (ConnectionResetError, ConnectionError):
            pass
        finally:
            self.watches.discard(stream)
            stream.close()
            self._registry.store.touch()
        return response

    # --- bodies ---------------------------------------------------------------------------------

    @staticmethod
    async def _raw_body(request: web.BaseRequest) -> bytes:
        try:
            return await request.read()
        except web.HTTPRequestEntityTooLarge:
            raise errors.ApiError(413, "RequestEntityTooLarge", "Request entity too large") from None

    async def _body(self, request: web.BaseRequest) -> Any:
        raw = await self._raw_body(request)
        ctype = media_type(request.headers.get("Content-Type"))
        try:
            if ctype in _YAML_TYPES:
                return codec.decode_yaml(raw)
            if ctype not in _JSON_TYPES:
                raise errors.unsupported_media_type(ctype, ("application/json", "application/yaml"))
            return codec.decode(raw)
        except (ValueError, UnicodeDecodeError, RecursionError) as exc:
            raise errors.bad_request(f"error decoding request body: {exc}") from None

    async def _delete_options(self, request: web.BaseRequest) -> dict[str, Any]:
        raw = await self._raw_body(request)
        options: dict[str, Any] = {}
        if raw.strip():
            try:
                decoded = codec.decode(raw)
            except (ValueError, UnicodeDecodeError, RecursionError) as exc:
                raise errors.bad_request(f"error decoding DeleteOptions: {exc}") from None
            if not isinstance(decoded, dict):
                raise errors.bad_request("DeleteOptions must be a JSON object")
            options = decoded
        query = request.query
        grace = _int_param(query, "gracePeriodSeconds")
        if grace is not None:
            options["gracePeriodSeconds"] = grace
        if query.get("propagationPolicy"):
            options["propagationPolicy"] = query["propagationPolicy"]
        if options.get("propagationPolicy") not in (None, "Orphan", "Background", "Foreground"):
            raise errors.bad_request(
                f'propagationPolicy: Unsupported value: "{options["propagationPolicy"]}": '
                'supported values: "Foreground", "Background", "Orphan"'
            )
        return options

    def drop_watches(self, abort: bool = True) -> int:
        streams = list(self.watches)
        for stream in streams:
            stream.drop(abort)
        return len(streams)


def _parse_rv(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise errors.bad_request(
            f'resourceVersion: Invalid value: "{text}": strconv.ParseUint: parsing "{text}": invalid syntax'
        ) from None
    if value < 0:
        raise errors.bad_request(f'resourceVersion: Invalid value: "{text}": must not be negative')
    return value
