"""Discovery documents (``/api``, ``/apis``, ``/apis/<g>/<v>``, ``/version``) built from the resource table.

Served as the legacy (unaggregated) JSON forms: clients that ask for aggregated discovery fall back
to them when the response's content type is plain ``application/json``.
"""

from __future__ import annotations

from webhook.core.api.objects import Obj

from .resources import VERBS, ResourceIndex, ResourceType

#: The Kubernetes release the emulator claims to be (resource.k8s.io/v1 is GA since 1.34).
VERSION: Obj = {
    "major": "1",
    "minor": "35",
    "emulationMajor": "1",
    "emulationMinor": "35",
    "minCompatibilityMajor": "1",
    "minCompatibilityMinor": "34",
    "gitVersion": "v1.35.0-draxr-emulator",
    "gitCommit": "0000000000000000000000000000000000000000",
    "gitTreeState": "clean",
    "buildDate": "2025-12-17T00:00:00Z",
    "goVersion": "go1.25.5",
    "compiler": "gc",
    "platform": "linux/amd64",
}


def version_document(release: str | None = None) -> Obj:
    """``/version``: ``VERSION``, or the same claiming another release (``"1.37"``), so that a test
    can run draxr against what a newer or older kube-apiserver reports."""
    if release is None:
        return VERSION
    major, minor = release.split(".")[:2]
    return {
        **VERSION,
        "major": major,
        "minor": minor,
        "emulationMajor": major,
        "emulationMinor": minor,
        "gitVersion": f"v{major}.{minor}.0-draxr-emulator",
    }


_SUBRESOURCE_KIND = {"binding": ("Binding", ("create",)), "status": (None, ("get", "patch", "update"))}


def _resource_entries(rt: ResourceType) -> list[Obj]:
    main: Obj = {
        "name": rt.plural,
        "singularName": rt.singular_name,
        "namespaced": rt.namespaced,
        "kind": rt.kind,
        "verbs": list(VERBS),
    }
    if rt.short_names:
        main["shortNames"] = list(rt.short_names)
    if rt.categories:
        main["categories"] = list(rt.categories)
    out = [main]
    for sub in rt.subresources:
        kind, verbs = _SUBRESOURCE_KIND.get(sub, (None, ("get",)))
        out.append(
            {
                "name": f"{rt.plural}/{sub}",
                "singularName": "",
                "namespaced": rt.namespaced,
                "kind": kind or rt.kind,
                "verbs": list(verbs),
            }
        )
    return out


def core_versions(server_address: str) -> Obj:
    return {
        "kind": "APIVersions",
        "versions": ["v1"],
        "serverAddressByClientCIDRs": [{"clientCIDR": "0.0.0.0/0", "serverAddress": server_address}],
    }


def _group(index: ResourceIndex, group: str, versions: list[str]) -> Obj:
    gvs = [{"groupVersion": f"{group}/{v}", "version": v} for v in versions]
    return {"name": group, "versions": gvs, "preferredVersion": gvs[0]}


def group_list(index: ResourceIndex) -> Obj:
    groups = [_group(index, g, vs) for g, vs in index.group_versions().items() if g]
    return {"kind": "APIGroupList", "apiVersion": "v1", "groups": groups}


def group(index: ResourceIndex, name: str) -> Obj | None:
    versions = index.group_versions().get(name)
    if not name or not versions:
        return None
    return {"kind": "APIGroup", "apiVersion": "v1", **_group(index, name, versions)}


def resource_list(index: ResourceIndex, group: str, version: str) -> Obj | None:
    types = index.in_group_version(group, version)
    if not types:
        return None
    return {
        "kind": "APIResourceList",
        "apiVersion": "v1",
        "groupVersion": f"{group}/{version}" if group else version,
        "resources": [entry for rt in types for entry in _resource_entries(rt)],
    }
