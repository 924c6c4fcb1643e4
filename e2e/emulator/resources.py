"""The resource types the emulator serves, with their discovery facts and storage traits.

One table drives routing, discovery and storage, so adding a resource is one row here.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from webhook.kube.resources import Resource

#: Every served resource supports every verb (no authorization here).
VERBS = ("create", "delete", "deletecollection", "get", "list", "patch", "update", "watch")


@dataclass(frozen=True, slots=True)
class ResourceType(Resource):
    """A served resource (``group/version/plural``, as draxr's client names it) and how its storage
    behaves."""

    singular: str = ""
    short_names: tuple[str, ...] = ()
    #: Subresources served besides the main resource (``status``, ``binding``).
    subresources: tuple[str, ...] = ()
    #: PUT on a missing object creates it (leases and events do upstream).
    create_on_update: bool = False
    #: Create drops a client-sent ``status`` (the strategy's PrepareForCreate resets it).
    reset_status_on_create: bool = False
    categories: tuple[str, ...] = ()
    #: ``metadata.generation`` is kept (1 on create, one more per spec change): not every kind does.
    generation: bool = False
    #: PUT without ``metadata.resourceVersion`` is allowed (``AllowUnconditionalUpdate``).
    unconditional_update: bool = True
    #: ``/status`` keeps the old labels, annotations, finalizers and owner references
    #: (``ResetObjectMetaForStatus``); otherwise it takes them from the request, as pods' does.
    status_keeps_meta: bool = False

    @property
    def key(self) -> str:
        """Storage key and the ``GroupResource`` string: ``pods``, ``leases.coordination.k8s.io``."""
        return f"{self.plural}.{self.group}" if self.group else self.plural

    @property
    def list_kind(self) -> str:
        return self.kind + "List"

    @property
    def has_status(self) -> bool:
        return "status" in self.subresources

    @property
    def singular_name(self) -> str:
        return self.singular or self.kind.lower()


#: Everything draxr, its tests and kubectl need.
BUILTIN: tuple[ResourceType, ...] = (
    ResourceType("", "v1", "namespaces", "Namespace", False, short_names=("ns",), subresources=("status",)),
    ResourceType("", "v1", "nodes", "Node", False, short_names=("no",), subresources=("status",)),
    ResourceType(
        "",
        "v1",
        "pods",
        "Pod",
        True,
        short_names=("po",),
        subresources=("status", "binding"),
        reset_status_on_create=True,
        categories=("all",),
        generation=True,
    ),
    ResourceType("", "v1", "events", "Event", True, short_names=("ev",), create_on_update=True),
    ResourceType(
        "",
        "v1",
        "services",
        "Service",
        True,
        short_names=("svc",),
        subresources=("status",),
        categories=("all",),
    ),
    ResourceType(
        "",
        "v1",
        "replicationcontrollers",
        "ReplicationController",
        True,
        short_names=("rc",),
        subresources=("status",),
        categories=("all",),
        generation=True,
    ),
    ResourceType("", "v1", "secrets", "Secret", True),
    ResourceType(
        "", "v1", "resourcequotas", "ResourceQuota", True, short_names=("quota",), subresources=("status",)
    ),
    ResourceType("", "v1", "configmaps", "ConfigMap", True, short_names=("cm",)),
    ResourceType("", "v1", "serviceaccounts", "ServiceAccount", True, short_names=("sa",)),
    ResourceType("events.k8s.io", "v1", "events", "Event", True, short_names=("ev",), create_on_update=True),
    ResourceType(
        "coordination.k8s.io",
        "v1",
        "leases",
        "Lease",
        True,
        create_on_update=True,
        unconditional_update=False,
    ),
    ResourceType(
        "",
        "v1",
        "persistentvolumeclaims",
        "PersistentVolumeClaim",
        True,
        short_names=("pvc",),
        subresources=("status",),
    ),
    ResourceType(
        "",
        "v1",
        "persistentvolumes",
        "PersistentVolume",
        False,
        short_names=("pv",),
        subresources=("status",),
    ),
    ResourceType("storage.k8s.io", "v1", "storageclasses", "StorageClass", False, short_names=("sc",)),
    ResourceType("storage.k8s.io", "v1", "csinodes", "CSINode", False),
    ResourceType("storage.k8s.io", "v1", "csidrivers", "CSIDriver", False),
    ResourceType("storage.k8s.io", "v1", "csistoragecapacities", "CSIStorageCapacity", True),
    ResourceType(
        "storage.k8s.io", "v1", "volumeattachments", "VolumeAttachment", False, subresources=("status",)
    ),
    # policy/v1 PodDisruptionBudget (preemption reads them): its strategy keeps generation.
    ResourceType(
        "policy",
        "v1",
        "poddisruptionbudgets",
        "PodDisruptionBudget",
        True,
        short_names=("pdb",),
        subresources=("status",),
        generation=True,
    ),
    ResourceType("resource.k8s.io", "v1", "deviceclasses", "DeviceClass", False, generation=True),
    ResourceType("resource.k8s.io", "v1", "resourceslices", "ResourceSlice", False, generation=True),
    ResourceType(
        "resource.k8s.io",
        "v1",
        "resourceclaims",
        "ResourceClaim",
        True,
        subresources=("status",),
        reset_status_on_create=True,
        status_keeps_meta=True,
    ),
    ResourceType("resource.k8s.io", "v1", "resourceclaimtemplates", "ResourceClaimTemplate", True),
    # 1.35 serves DeviceTaintRule as v1alpha3 when enabled (the emulator enables it).
    ResourceType(
        "resource.k8s.io",
        "v1alpha3",
        "devicetaintrules",
        "DeviceTaintRule",
        False,
        subresources=("status",),
        generation=True,
        status_keeps_meta=True,
    ),
    # 1.35's Workload (v1alpha1, with GenericWorkload on): its pods name it in spec.workloadRef.
    ResourceType("scheduling.k8s.io", "v1alpha1", "workloads", "Workload", True, generation=True),
    # 1.37 serves PodGroup as v1beta1 with GenericWorkload on (the emulator serves it).
    ResourceType(
        "scheduling.k8s.io",
        "v1beta1",
        "podgroups",
        "PodGroup",
        True,
        subresources=("status",),
        reset_status_on_create=True,
        generation=True,
        status_keeps_meta=True,
    ),
    ResourceType(
        "admissionregistration.k8s.io",
        "v1",
        "mutatingwebhookconfigurations",
        "MutatingWebhookConfiguration",
        False,
        generation=True,
        unconditional_update=False,
    ),
    ResourceType(
        "admissionregistration.k8s.io",
        "v1",
        "validatingwebhookconfigurations",
        "ValidatingWebhookConfiguration",
        False,
        generation=True,
        unconditional_update=False,
    ),
    ResourceType(
        "apps",
        "v1",
        "deployments",
        "Deployment",
        True,
        short_names=("deploy",),
        subresources=("status",),
        reset_status_on_create=True,
        categories=("all",),
        generation=True,
    ),
    ResourceType(
        "apps",
        "v1",
        "replicasets",
        "ReplicaSet",
        True,
        short_names=("rs",),
        subresources=("status",),
        reset_status_on_create=True,
        categories=("all",),
        generation=True,
    ),
    ResourceType(
        "apps",
        "v1",
        "statefulsets",
        "StatefulSet",
        True,
        short_names=("sts",),
        subresources=("status",),
        reset_status_on_create=True,
        categories=("all",),
        generation=True,
    ),
)


class ResourceIndex:
    """Lookups by URL coordinates, by ``apiVersion``+``kind`` and by a short name for the Python API."""

    def __init__(self, types: Iterable[ResourceType]) -> None:
        self.types: tuple[ResourceType, ...] = tuple(types)
        self._by_gvr = {(t.group, t.version, t.plural): t for t in self.types}
        self._by_kind = {(t.api_version, t.kind): t for t in self.types}
        self._by_key = {t.key: t for t in self.types}
        self._by_alias: dict[str, ResourceType] = {}
        # The core group wins an ambiguous short alias ("events"), as kubectl's RESTMapper does.
        for t in sorted(self.types, key=lambda t: t.group != ""):
            for alias in (t.plural, t.kind.lower(), t.singular_name, *t.short_names):
                self._by_alias.setdefault(alias, t)

    def by_gvr(self, group: str, version: str, plural: str) -> ResourceType | None:
        return self._by_gvr.get((group, version, plural))

    def by_kind(self, api_version: str, kind: str) -> ResourceType | None:
        return self._by_kind.get((api_version, kind))

    def by_key(self, key: str) -> ResourceType | None:
        return self._by_key.get(key)

    def resolve(self, name: str) -> ResourceType:
        """``pods``, ``pod``, ``po``, ``leases.coordination.k8s.io`` or ``Lease``; KeyError if unknown."""
        found = self._by_key.get(name) or self._by_alias.get(name) or self._by_alias.get(name.lower())
        if found is None:
            raise KeyError(f"unknown resource {name!r}")
        return found

    def group_versions(self) -> dict[str, list[str]]:
        """Served versions per group, in table order (the core group is ``""``)."""
        out: dict[str, list[str]] = {}
        for t in self.types:
            versions = out.setdefault(t.group, [])
            if t.version not in versions:
                versions.append(t.version)
        return out

    def in_group_version(self, group: str, version: str) -> list[ResourceType]:
        return [t for t in self.types if t.group == group and t.version == version]
