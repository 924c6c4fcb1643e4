"""Least-privilege RBAC of draxr's two ServiceAccounts.

The webhook (``serve --no-worker``) only reads, besides the gate probe's dry-run create; the worker
(``serve --no-webhook``) gets exactly the verbs its binding cycle, cleanup, leader election and the
gate probe use; in draxr's namespace its leader writes the shared gate answer, which the webhook reads;
with self-managed certificates, its leader may also update the two Secrets and the two webhook
configurations it renews, by name. A test keeps each role equal to an explicit set of rules.
"""

from __future__ import annotations

from ..core.api.objects import Obj
from ..identity.names import (
    CA_SECRET,
    GATE_CONFIGMAP,
    LEASE,
    TLS_SECRET,
    WEBHOOK,
    WEBHOOK_CONFIGURATION,
    WORKER,
    metadata,
)


def rbac(namespace: str) -> list[Obj]:
    webhook_rules = [
        {"apiGroups": [""], "resources": ["nodes", "resourcequotas"], "verbs": ["get", "list", "watch"]},
        {
            "apiGroups": ["resource.k8s.io"],
            "resources": [
                "deviceclasses",
                "devicetaintrules",
                "resourceclaims",
                "resourceclaimtemplates",
                "resourceslices",
            ],
            "verbs": ["get", "list", "watch"],
        },
        # The gate probe: a dry-run create of a DeviceClass (nothing is ever stored).
        {"apiGroups": ["resource.k8s.io"], "resources": ["deviceclasses"], "verbs": ["create"]},
        {"apiGroups": [""], "resources": ["events"], "verbs": ["create"]},
        # A pod group member's priority and preemption policy are checked against its PodGroup (or
        # 1.35's Workload).
        {
            "apiGroups": ["scheduling.k8s.io"],
            "resources": ["podgroups", "workloads"],
            "verbs": ["get", "list", "watch"],
        },
    ]
    worker_rules = [
        {"apiGroups": [""], "resources": ["nodes", "resourcequotas"], "verbs": ["get", "list", "watch"]},
        # delete: preemption's victims (pods/status patch: their DisruptionTarget condition and the
        # preemptor's nominatedNodeName, besides PodScheduled).
        {"apiGroups": [""], "resources": ["pods"], "verbs": ["get", "list", "watch", "delete"]},
        # Pod affinity's namespace selectors read the Namespaces' labels (an informer).
        {"apiGroups": [""], "resources": ["namespaces"], "verbs": ["list", "watch"]},
        {"apiGroups": [""], "resources": ["pods/status"], "verbs": ["patch"]},
        {"apiGroups": [""], "resources": ["pods/binding"], "verbs": ["create"]},
        {"apiGroups": ["policy"], "resources": ["poddisruptionbudgets"], "verbs": ["list", "watch"]},
        {"apiGroups": [""], "resources": ["events"], "verbs": ["create"]},
        {
            "apiGroups": ["resource.k8s.io"],
            "resources": ["deviceclasses", "devicetaintrules", "resourceslices"],
            "verbs": ["get", "list", "watch"],
        },
        {
            "apiGroups": ["resource.k8s.io"],
            "resources": ["resourceclaims"],
            "verbs": ["get", "list", "watch", "create", "update", "delete"],
        },
        {"apiGroups": ["resource.k8s.io"], "resources": ["resourceclaims/status"], "verbs": ["update"]},
        # The leader's gate probe (kube/gates.py): a dry-run create of a DeviceClass, nothing stored.
        {"apiGroups": ["resource.k8s.io"], "resources": ["deviceclasses"], "verbs": ["create"]},
        # 1.36+: writing status.allocation or status.reservedFor also needs this (the apiserver
        # checks it as a separate authorization; kube-scheduler's role has it since 1.36).
        {"apiGroups": ["resource.k8s.io"], "resources": ["resourceclaims/binding"], "verbs": ["update"]},
        {
            "apiGroups": ["resource.k8s.io"],
            "resources": ["resourceclaimtemplates"],
            "verbs": ["get", "list", "watch", "create", "delete"],
        },
        # The volume plugins' informers (list and watch only); VolumeBinding's PreBind patches a
        # volume's claimRef and a claim's selected-node annotation.
        {
            "apiGroups": [""],
            "resources": ["persistentvolumeclaims", "persistentvolumes"],
            "verbs": ["list", "watch", "patch"],
        },
        {
            "apiGroups": ["storage.k8s.io"],
            "resources": [
                "csidrivers",
                "csinodes",
                "csistoragecapacities",
                "storageclasses",
                "volumeattachments",
            ],
            "verbs": ["list", "watch"],
        },
        # Gangs: the PodGroups (and 1.35's Workloads), and their PodGroupInitiallyScheduled condition.
        {
            "apiGroups": ["scheduling.k8s.io"],
            "resources": ["podgroups", "workloads"],
            "verbs": ["get", "list", "watch"],
        },
        {"apiGroups": ["scheduling.k8s.io"], "resources": ["podgroups/status"], "verbs": ["patch"]},
        # PodTopologySpread's system defaults: the selectors of Services and workload controllers.
        {"apiGroups": [""], "resources": ["services", "replicationcontrollers"], "verbs": ["list", "watch"]},
        {"apiGroups": ["apps"], "resources": ["replicasets", "statefulsets"], "verbs": ["list", "watch"]},
    ]
    lease_rules = [
        {"apiGroups": ["coordination.k8s.io"], "resources": ["leases"], "verbs": ["create"]},
        {
            "apiGroups": ["coordination.k8s.io"],
            "resources": ["leases"],
            "resourceNames": [LEASE],
            "verbs": ["get", "update"],
        },
    ]
    # The shared gate answer (kube/sharedgate.py): the worker's leader creates and updates it, the
    # webhook reads it; by name, in draxr's namespace only.
    gate_rules = {
        WORKER: [
            {"apiGroups": [""], "resources": ["configmaps"], "verbs": ["create"]},
            {
                "apiGroups": [""],
                "resources": ["configmaps"],
                "resourceNames": [GATE_CONFIGMAP],
                "verbs": ["get", "update"],
            },
        ],
        WEBHOOK: [
            {
                "apiGroups": [""],
                "resources": ["configmaps"],
                "resourceNames": [GATE_CONFIGMAP],
                "verbs": ["get"],
            }
        ],
    }
    out: list[Obj] = []
    for sa, rules in ((WEBHOOK, webhook_rules), (WORKER, worker_rules)):
        component = "webhook" if sa == WEBHOOK else "worker"
        out.append(
            {"apiVersion": "v1", "kind": "ServiceAccount", "metadata": metadata(sa, namespace, component)}
        )
        out.append(
            {
                "apiVersion": "rbac.authorization.k8s.io/v1",
                "kind": "ClusterRole",
                "metadata": metadata(f"{sa}", None, component),
                "rules": rules,
            }
        )
        out.append(
            {
                "apiVersion": "rbac.authorization.k8s.io/v1",
                "kind": "ClusterRoleBinding",
                "metadata": metadata(f"{sa}", None, component),
                "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": sa},
                "subjects": [{"kind": "ServiceAccount", "name": sa, "namespace": namespace}],
            }
        )
    out.append(
        {
            "apiVersion": "rbac.authorization.k8s.io/v1",
            "kind": "Role",
            "metadata": metadata(f"{WORKER}-leader-election", namespace, "worker"),
            "rules": lease_rules,
        }
    )
    out.append(
        {
            "apiVersion": "rbac.authorization.k8s.io/v1",
            "kind": "RoleBinding",
            "metadata": metadata(f"{WORKER}-leader-election", namespace, "worker"),
            "roleRef": {
                "apiGroup": "rbac.authorization.k8s.io",
                "kind": "Role",
                "name": f"{WORKER}-leader-election",
            },
            "subjects": [{"kind": "ServiceAccount", "name": WORKER, "namespace": namespace}],
        }
    )
    for sa, rules in gate_rules.items():
        component = "webhook" if sa == WEBHOOK else "worker"
        role = f"{sa}-apiserver-gate"
        out.append(
            {
                "apiVersion": "rbac.authorization.k8s.io/v1",
                "kind": "Role",
                "metadata": metadata(role, namespace, component),
                "rules": rules,
            }
        )
        out.append(
            {
                "apiVersion": "rbac.authorization.k8s.io/v1",
                "kind": "RoleBinding",
                "metadata": metadata(role, namespace, component),
                "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": role},
                "subjects": [{"kind": "ServiceAccount", "name": sa, "namespace": namespace}],
            }
        )
    return out


def certificate_rbac(namespace: str) -> list[Obj]:
    """What the worker's leader needs to renew self-managed certificates: read and update the two
    Secrets and the two webhook configurations, by name."""
    role = f"{WORKER}-certificates"
    secrets = {
        "apiGroups": [""],
        "resources": ["secrets"],
        "resourceNames": [CA_SECRET, TLS_SECRET],
        "verbs": ["get", "update"],
    }
    configurations = {
        "apiGroups": ["admissionregistration.k8s.io"],
        "resources": ["mutatingwebhookconfigurations", "validatingwebhookconfigurations"],
        "resourceNames": [WEBHOOK_CONFIGURATION],
        "verbs": ["get", "update"],
    }
    subjects = [{"kind": "ServiceAccount", "name": WORKER, "namespace": namespace}]
    return [
        {
            "apiVersion": "rbac.authorization.k8s.io/v1",
            "kind": "ClusterRole",
            "metadata": metadata(role, None, "worker"),
            "rules": [configurations],
        },
        {
            "apiVersion": "rbac.authorization.k8s.io/v1",
            "kind": "ClusterRoleBinding",
            "metadata": metadata(role, None, "worker"),
            "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": role},
            "subjects": subjects,
        },
        {
            "apiVersion": "rbac.authorization.k8s.io/v1",
            "kind": "Role",
            "metadata": metadata(role, namespace, "worker"),
            "rules": [secrets],
        },
        {
            "apiVersion": "rbac.authorization.k8s.io/v1",
            "kind": "RoleBinding",
            "metadata": metadata(role, namespace, "worker"),
            "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": role},
            "subjects": subjects,
        },
    ]
