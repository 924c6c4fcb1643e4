"""The API resources draxr reads and writes, and their REST paths."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class Resource:
    group: str
    version: str
    plural: str
    kind: str
    namespaced: bool

    @property
    def api_version(self) -> str:
        return f"{self.group}/{self.version}" if self.group else self.version

    def path(
        self, namespace: str | None = None, name: str | None = None, subresource: str | None = None
    ) -> str:
        base = f"/apis/{self.group}/{self.version}" if self.group else f"/api/{self.version}"
        if self.namespaced and namespace:
            base += f"/namespaces/{namespace}"
        base += f"/{self.plural}"
        if name is not None:
            base += f"/{name}"
            if subresource:
                base += f"/{subresource}"
        return base


PODS = Resource("", "v1", "pods", "Pod", True)
NODES = Resource("", "v1", "nodes", "Node", False)
EVENTS = Resource("", "v1", "events", "Event", True)
NAMESPACES = Resource("", "v1", "namespaces", "Namespace", False)
DEVICE_CLASSES = Resource("resource.k8s.io", "v1", "deviceclasses", "DeviceClass", False)
RESOURCE_SLICES = Resource("resource.k8s.io", "v1", "resourceslices", "ResourceSlice", False)
RESOURCE_CLAIMS = Resource("resource.k8s.io", "v1", "resourceclaims", "ResourceClaim", True)
LEASES = Resource("coordination.k8s.io", "v1", "leases", "Lease", True)
RESOURCE_QUOTAS = Resource("", "v1", "resourcequotas", "ResourceQuota", True)
POD_DISRUPTION_BUDGETS = Resource("policy", "v1", "poddisruptionbudgets", "PodDisruptionBudget", True)
SECRETS = Resource("", "v1", "secrets", "Secret", True)
CONFIG_MAPS = Resource("", "v1", "configmaps", "ConfigMap", True)
#: PodTopologySpread's system defaults read their selectors (``core/cluster/workloads.py``).
SERVICES = Resource("", "v1", "services", "Service", True)
REPLICATION_CONTROLLERS = Resource("", "v1", "replicationcontrollers", "ReplicationController", True)
REPLICA_SETS = Resource("apps", "v1", "replicasets", "ReplicaSet", True)
STATEFUL_SETS = Resource("apps", "v1", "statefulsets", "StatefulSet", True)
MUTATING_WEBHOOKS = Resource(
    "admissionregistration.k8s.io",
    "v1",
    "mutatingwebhookconfigurations",
    "MutatingWebhookConfiguration",
    False,
)
VALIDATING_WEBHOOKS = Resource(
    "admissionregistration.k8s.io",
    "v1",
    "validatingwebhookconfigurations",
    "ValidatingWebhookConfiguration",
    False,
)
RESOURCE_CLAIM_TEMPLATES = Resource(
    "resource.k8s.io", "v1", "resourceclaimtemplates", "ResourceClaimTemplate", True
)

#: The storage kinds the volume plugins read (VolumeBinding's PreBind patches claims and volumes).
PERSISTENT_VOLUME_CLAIMS = Resource("", "v1", "persistentvolumeclaims", "PersistentVolumeClaim", True)
PERSISTENT_VOLUMES = Resource("", "v1", "persistentvolumes", "PersistentVolume", False)
STORAGE_CLASSES = Resource("storage.k8s.io", "v1", "storageclasses", "StorageClass", False)
CSI_NODES = Resource("storage.k8s.io", "v1", "csinodes", "CSINode", False)
CSI_DRIVERS = Resource("storage.k8s.io", "v1", "csidrivers", "CSIDriver", False)
CSI_STORAGE_CAPACITIES = Resource("storage.k8s.io", "v1", "csistoragecapacities", "CSIStorageCapacity", True)
VOLUME_ATTACHMENTS = Resource("storage.k8s.io", "v1", "volumeattachments", "VolumeAttachment", False)

#: DeviceTaintRule's versions, newest first: v1 (1.37), v1beta2 (1.36), v1alpha3 (1.33-1.35, only
#: when enabled). A cluster may serve none; ``served`` finds out which.
DEVICE_TAINT_RULE_VERSIONS = ("v1", "v1beta2", "v1alpha3")


#: PodGroup's versions, newest first: v1beta1 (1.37), v1alpha3 (1.37), v1alpha2 (1.36), each served
#: only with ``GenericWorkload`` on (and the version enabled). 1.35's Workload held its groups inline.
POD_GROUP_VERSIONS = ("v1beta1", "v1alpha3", "v1alpha2")


#: 1.35's Workload, whose ``spec.podGroups`` its pods name (``spec.workloadRef``).
WORKLOADS = Resource("scheduling.k8s.io", "v1alpha1", "workloads", "Workload", True)


def pod_groups(version: str) -> Resource:
    return Resource("scheduling.k8s.io", version, "podgroups", "PodGroup", True)


def device_taint_rules(version: str) -> Resource:
    return Resource("resource.k8s.io", version, "devicetaintrules", "DeviceTaintRule", False)


BY_PLURAL = {
    r.plural: r
    for r in (
        PODS,
        NODES,
        EVENTS,
        NAMESPACES,
        DEVICE_CLASSES,
        RESOURCE_SLICES,
        RESOURCE_CLAIMS,
        LEASES,
        RESOURCE_QUOTAS,
        RESOURCE_CLAIM_TEMPLATES,
        PERSISTENT_VOLUME_CLAIMS,
        PERSISTENT_VOLUMES,
        STORAGE_CLASSES,
        CSI_NODES,
        CSI_DRIVERS,
        CSI_STORAGE_CAPACITIES,
        VOLUME_ATTACHMENTS,
        POD_DISRUPTION_BUDGETS,
        SERVICES,
        REPLICATION_CONTROLLERS,
        REPLICA_SETS,
        STATEFUL_SETS,
    )
}
