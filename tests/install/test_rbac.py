"""Least-privilege RBAC: every role is exactly the expected set of rules, none with a wildcard, and the
certificate roles come only with self-managed certificates."""

from __future__ import annotations

from tests.install.builders import certificates
from webhook.core.api.objects import Obj
from webhook.install.files import dump
from webhook.install.manifests import render
from webhook.kube.sharedgate import CONFIGMAP


def _rules(kind: str, name: str) -> list[Obj]:
    objects = render(certificates=certificates())
    (obj,) = [o for o in objects if o["kind"] == kind and o["metadata"]["name"] == name]
    rules: list[Obj] = obj["rules"]
    return rules


def _flatten(rules: list[Obj]) -> set[tuple[str, str, str, str]]:
    return {
        (g, r, v, n)
        for rule in rules
        for g in rule["apiGroups"]
        for r in rule["resources"]
        for v in rule["verbs"]
        for n in (rule.get("resourceNames") or ["*any*"])
    }


def test_rbac_is_exactly_the_expected_set() -> None:
    read = ("get", "list", "watch")
    assert _flatten(_rules("ClusterRole", "draxr-webhook")) == {
        *(("", r, v, "*any*") for r in ("nodes", "resourcequotas") for v in read),
        *(
            ("resource.k8s.io", r, v, "*any*")
            for r in (
                "deviceclasses",
                "devicetaintrules",
                "resourceclaims",
                "resourceclaimtemplates",  # routing by the classes of a pod's own claims
                "resourceslices",
            )
            for v in read
        ),
        ("resource.k8s.io", "deviceclasses", "create", "*any*"),  # the gate probe, a dry run
        ("", "events", "create", "*any*"),
        # a member's priority, against its PodGroup or 1.35's Workload
        *(("scheduling.k8s.io", r, v, "*any*") for r in ("podgroups", "workloads") for v in read),
    }
    assert _flatten(_rules("ClusterRole", "draxr-worker")) == {
        *(("", r, v, "*any*") for r in ("nodes", "pods", "resourcequotas") for v in read),
        ("", "pods", "delete", "*any*"),  # preemption's victims
        *(("", "namespaces", v, "*any*") for v in ("list", "watch")),
        ("", "pods/status", "patch", "*any*"),
        *(("policy", "poddisruptionbudgets", v, "*any*") for v in ("list", "watch")),
        ("", "pods/binding", "create", "*any*"),
        ("", "events", "create", "*any*"),
        *(
            ("resource.k8s.io", r, v, "*any*")
            for r in ("deviceclasses", "devicetaintrules", "resourceslices")
            for v in read
        ),
        *(("resource.k8s.io", "resourceclaims", v, "*any*") for v in (*read, "create", "update", "delete")),
        ("resource.k8s.io", "resourceclaims/status", "update", "*any*"),
        ("resource.k8s.io", "deviceclasses", "create", "*any*"),  # the leader's gate probe, a dry run
        ("resource.k8s.io", "resourceclaims/binding", "update", "*any*"),
        *(("resource.k8s.io", "resourceclaimtemplates", v, "*any*") for v in (*read, "create", "delete")),
        # The volume plugins read the storage kinds; VolumeBinding's PreBind patches claims and volumes.
        *(
            ("", r, v, "*any*")
            for r in ("persistentvolumeclaims", "persistentvolumes")
            for v in ("list", "watch", "patch")
        ),
        *(
            ("storage.k8s.io", r, v, "*any*")
            for r in ("csidrivers", "csinodes", "csistoragecapacities", "storageclasses", "volumeattachments")
            for v in ("list", "watch")
        ),
        # PodTopologySpread's system defaults read Services' and workload controllers' selectors.
        *(("", r, v, "*any*") for r in ("services", "replicationcontrollers") for v in ("list", "watch")),
        *(("apps", r, v, "*any*") for r in ("replicasets", "statefulsets") for v in ("list", "watch")),
        # Gangs: the PodGroups (and 1.35's Workloads), and their PodGroupInitiallyScheduled condition.
        *(("scheduling.k8s.io", r, v, "*any*") for r in ("podgroups", "workloads") for v in read),
        ("scheduling.k8s.io", "podgroups/status", "patch", "*any*"),
    }
    assert _flatten(_rules("Role", "draxr-worker-leader-election")) == {
        ("coordination.k8s.io", "leases", "create", "*any*"),
        ("coordination.k8s.io", "leases", "get", "draxr-worker"),
        ("coordination.k8s.io", "leases", "update", "draxr-worker"),
    }
    # The shared apiserver gate answer (kube/sharedgate.py): the worker's leader writes it, the webhook
    # reads it, by name.
    assert _flatten(_rules("Role", "draxr-worker-apiserver-gate")) == {
        ("", "configmaps", "create", "*any*"),
        ("", "configmaps", "get", CONFIGMAP),
        ("", "configmaps", "update", CONFIGMAP),
    }
    assert _flatten(_rules("Role", "draxr-webhook-apiserver-gate")) == {("", "configmaps", "get", CONFIGMAP)}
    # Self-managed certificates: the leader reads and updates exactly its two Secrets and two configurations.
    assert _flatten(_rules("Role", "draxr-worker-certificates")) == {
        ("", "secrets", v, n) for v in ("get", "update") for n in ("draxr-webhook-ca", "draxr-webhook-tls")
    }
    assert _flatten(_rules("ClusterRole", "draxr-worker-certificates")) == {
        ("admissionregistration.k8s.io", r, v, "draxr")
        for r in ("mutatingwebhookconfigurations", "validatingwebhookconfigurations")
        for v in ("get", "update")
    }
    for objects in (render(certificates=certificates()), render(cert_manager=True)):
        text = dump(objects)
        for role in [o for o in objects if o["kind"] in ("ClusterRole", "Role")]:
            for rule in role["rules"]:
                assert "*" not in rule["verbs"] + rule["resources"] + rule["apiGroups"], text
    bound = {
        (o["kind"], o["metadata"]["name"])
        for o in render(certificates=certificates())
        if o["kind"].endswith("Binding")
    }
    assert ("RoleBinding", "draxr-worker-certificates") in bound
    assert ("ClusterRoleBinding", "draxr-worker-certificates") in bound
    assert not [o for o in render(cert_manager=True) if o["metadata"]["name"] == "draxr-worker-certificates"]
