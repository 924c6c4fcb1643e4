"""A minimal OpenAPI v3 surface: just what kubectl reads before ``apply``/``create``.

kubectl's default ``--validate=strict`` asks ``/openapi/v3`` whether a kind's PATCH operation takes
the ``fieldValidation`` query parameter; if it does, validation is left to the server and no schema
is needed. Without OpenAPI kubectl refuses ("failed to download openapi"). The documents list one
PATCH per kind with that parameter and without strategic merge patch, so ``kubectl apply`` computes
its patch from its compiled-in types (or a JSON merge patch) instead of from schemas.
"""

from __future__ import annotations

import hashlib
import json

from webhook.core.api.objects import Obj

from .resources import ResourceIndex, ResourceType

_PATCH_TYPES = ("application/json-patch+json", "application/merge-patch+json", "application/apply-patch+yaml")


def _gv_path(group: str, version: str) -> str:
    return f"apis/{group}/{version}" if group else f"api/{version}"


def _item_path(rt: ResourceType) -> str:
    prefix = "/" + _gv_path(rt.group, rt.version)
    if rt.namespaced:
        return f"{prefix}/namespaces/{{namespace}}/{rt.plural}/{{name}}"
    return f"{prefix}/{rt.plural}/{{name}}"


def _patch_operation(rt: ResourceType) -> Obj:
    return {
        "operationId": f"patch{rt.kind}",
        "x-kubernetes-action": "patch",
        "x-kubernetes-group-version-kind": {"group": rt.group, "version": rt.version, "kind": rt.kind},
        "parameters": [
            {"name": "dryRun", "in": "query", "schema": {"type": "string", "uniqueItems": True}},
            {"name": "fieldManager", "in": "query", "schema": {"type": "string", "uniqueItems": True}},
            {"name": "fieldValidation", "in": "query", "schema": {"type": "string", "uniqueItems": True}},
        ],
        "requestBody": {
            "content": {t: {"schema": {"type": "object"}} for t in _PATCH_TYPES},
            "required": True,
        },
        "responses": {"200": {"description": "OK"}},
    }


def group_version_document(index: ResourceIndex, group: str, version: str) -> Obj | None:
    types = index.in_group_version(group, version)
    if not types:
        return None
    return {
        "openapi": "3.0.0",
        "info": {"title": "Kubernetes", "version": "v1.35.0"},
        "paths": {_item_path(rt): {"patch": _patch_operation(rt)} for rt in types},
        "components": {"schemas": {}},
    }


def root_document(index: ResourceIndex) -> Obj:
    paths: Obj = {}
    for group, versions in index.group_versions().items():
        for version in versions:
            doc = group_version_document(index, group, version)
            digest = hashlib.sha256(json.dumps(doc, sort_keys=True).encode()).hexdigest()[:32].upper()
            gv = _gv_path(group, version)
            paths[gv] = {"serverRelativeURL": f"/openapi/v3/{gv}?hash={digest}"}
    return {"paths": paths}


def lookup(index: ResourceIndex, parts: tuple[str, ...]) -> Obj | None:
    """The document for ``/openapi/v3[/api/<v>|/apis/<g>/<v>]``; None when there is none."""
    if parts == ("openapi", "v3"):
        return root_document(index)
    rest = parts[2:]
    if len(rest) == 2 and rest[0] == "api":
        return group_version_document(index, "", rest[1])
    if len(rest) == 3 and rest[0] == "apis":
        return group_version_document(index, rest[1], rest[2])
    return None
