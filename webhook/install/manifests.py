"""Everything an operator applies to install draxr (rendered by ``draxr manifests``).

Two Deployments, each with its own ServiceAccount and least-privilege RBAC: the webhook
(``serve --no-worker``) only reads; the worker (``serve --no-webhook``, leader elected) gets exactly
the verbs it uses. Webhook configurations call the webhook through its Service; pod hooks are
scoped by CEL ``matchConditions`` to pods that request non-native resources, the claim hook to
special claims, the DeviceClass hook to classes with ``extendedResourceName``, so failing closed
blocks only what draxr is responsible for.

``manifests/`` holds the rendering with the defaults; a test keeps it equal to this code.
"""

from __future__ import annotations

import base64
from pathlib import Path
from typing import Any

import yaml

from ..core.constants import (
    EXTENDED_RESOURCE_CLAIM_ANNOTATION,
    EXTENDED_RESOURCE_NAME_ANNOTATION,
    GATE_PROBE_PREFIX,
)
from ..core.objects import Obj

DEFAULT_NAMESPACE = "draxr-system"
DEFAULT_IMAGE = "ghcr.io/draxr/draxr:0.1.0"
WEBHOOK = "draxr-webhook"
WORKER = "draxr-worker"
LEASE = "draxr-worker"
TLS_SECRET = "draxr-webhook-tls"
APP_LABEL = "app.kubernetes.io/name"
COMPONENT_LABEL = "app.kubernetes.io/component"

# CEL over a ResourceList's keys: a name DRA may back (extended names and the implicit
# deviceclass.resource.kubernetes.io/<class>; never cpu, memory, hugepages-*, ...).
_IMPLICIT = "k.startsWith('deviceclass.resource.kubernetes.io/')"
_DRA_NAME = f"k.contains('/') && (!k.contains('kubernetes.io/') || {_IMPLICIT})"


def _lists(c: str) -> str:
    requests = f"(has({c}.resources.requests) && {c}.resources.requests.exists(k, {_DRA_NAME}))"
    limits = f"(has({c}.resources.limits) && {c}.resources.limits.exists(k, {_DRA_NAME}))"
    return f"(has({c}.resources) && ({requests} || {limits}))"


REQUESTS_DRA_NAME = (
    f"object.spec.containers.exists(c, {_lists('c')}) || "
    f"(has(object.spec.initContainers) && object.spec.initContainers.exists(c, {_lists('c')}))"
)
# Used for UPDATEs only (oldObject is set). "request.operation" guards oldObject elsewhere: that
# form evaluates the same in cel-go and in cel-python (which cannot compare a map with null).
_ERCS_NEW = "(has(object.status) && has(object.status.extendedResourceClaimStatus))"
_ERCS_OLD = "(has(oldObject.status) && has(oldObject.status.extendedResourceClaimStatus))"
ERCS_CHANGED = (
    f"{_ERCS_NEW} != {_ERCS_OLD} || ({_ERCS_NEW} && {_ERCS_OLD} && "
    "object.status.extendedResourceClaimStatus != oldObject.status.extendedResourceClaimStatus)"
)
SPECIAL_CLAIM = (
    "(has(object.metadata.annotations) && "
    f"'{EXTENDED_RESOURCE_CLAIM_ANNOTATION}' in object.metadata.annotations)"
    " || (request.operation == 'UPDATE' && has(oldObject.metadata.annotations) && "
    f"'{EXTENDED_RESOURCE_CLAIM_ANNOTATION}' in oldObject.metadata.annotations)"
)
# What the claim hook guards: a CREATE, or an UPDATE of the annotation, the owners or the spec.
# Finalizer, label and status changes (the worker's Unreserve, the garbage collector, the
# resourceclaim controller) never depend on the webhook being reachable.
_ANNOTATIONS = "(has({o}.metadata.annotations) ? {o}.metadata.annotations : {{}})"
_OWNERS = "(has({o}.metadata.ownerReferences) ? {o}.metadata.ownerReferences : [])"
CLAIM_GUARDED_CHANGE = (
    "request.operation == 'CREATE' || "
    f"{_ANNOTATIONS.format(o='object')} != {_ANNOTATIONS.format(o='oldObject')} || "
    f"{_OWNERS.format(o='object')} != {_OWNERS.format(o='oldObject')} || "
    "object.spec != oldObject.spec"
)
# Classes that declare (or declared) an explicit name, and classes whose name is too long to serve
# as the implicit name deviceclass.resource.kubernetes.io/<class> (the webhook warns about those).
_NAMED = (
    "has({o}.spec.extendedResourceName) || (has({o}.metadata.annotations) && "
    f"'{EXTENDED_RESOURCE_NAME_ANNOTATION}' in {{o}}.metadata.annotations)"
)
HAS_EXTENDED_NAME = (
    f"!object.metadata.name.startsWith('{GATE_PROBE_PREFIX}') && ("
    f"{_NAMED.format(o='object')} || size(object.metadata.name) > 63 || "
    f"(request.operation == 'UPDATE' && ({_NAMED.format(o='oldObject')})))"
)


def _labels(component: str) -> dict[str, str]:
    return {APP_LABEL: "draxr", COMPONENT_LABEL: component}


def _meta(name: str, namespace: str | None, component: str, **extra: Any) -> Obj:
    m: Obj = {"name": name, "labels": _labels(component)}
    if namespace:
        m["namespace"] = namespace
    m.update(extra)
    return m


def rbac(namespace: str) -> list[Obj]:
    webhook_rules = [
        {"apiGroups": [""], "resources": ["nodes", "resourcequotas"], "verbs": ["get", "list", "watch"]},
        {
            "apiGroups": ["resource.k8s.io"],
            "resources": ["deviceclasses", "devicetaintrules", "resourceclaims", "resourceslices"],
            "verbs": ["get", "list", "watch"],
        },
        # The gate probe: a dry-run create of a DeviceClass (nothing is ever stored).
        {"apiGroups": ["resource.k8s.io"], "resources": ["deviceclasses"], "verbs": ["create"]},
        {"apiGroups": [""], "resources": ["events"], "verbs": ["create"]},
    ]
    worker_rules = [
        {"apiGroups": [""], "resources": ["nodes", "resourcequotas"], "verbs": ["get", "list", "watch"]},
        {"apiGroups": [""], "resources": ["pods"], "verbs": ["get", "list", "watch"]},
        {"apiGroups": [""], "resources": ["pods/status"], "verbs": ["patch"]},
        {"apiGroups": [""], "resources": ["pods/binding"], "verbs": ["create"]},
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
        # 1.36+: writing status.allocation or status.reservedFor also needs this (the apiserver
        # checks it as a separate authorization; kube-scheduler's role has it since 1.36).
        {"apiGroups": ["resource.k8s.io"], "resources": ["resourceclaims/binding"], "verbs": ["update"]},
        {
            "apiGroups": ["resource.k8s.io"],
            "resources": ["resourceclaimtemplates"],
            "verbs": ["get", "list", "watch", "create", "delete"],
        },
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
    out: list[Obj] = []
    for sa, rules in ((WEBHOOK, webhook_rules), (WORKER, worker_rules)):
        component = "webhook" if sa == WEBHOOK else "worker"
        out.append(
            {"apiVersion": "v1", "kind": "ServiceAccount", "metadata": _meta(sa, namespace, component)}
        )
        out.append(
            {
                "apiVersion": "rbac.authorization.k8s.io/v1",
                "kind": "ClusterRole",
                "metadata": _meta(f"{sa}", None, component),
                "rules": rules,
            }
        )
        out.append(
            {
                "apiVersion": "rbac.authorization.k8s.io/v1",
                "kind": "ClusterRoleBinding",
                "metadata": _meta(f"{sa}", None, component),
                "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": sa},
                "subjects": [{"kind": "ServiceAccount", "name": sa, "namespace": namespace}],
            }
        )
    out.append(
        {
            "apiVersion": "rbac.authorization.k8s.io/v1",
            "kind": "Role",
            "metadata": _meta(f"{WORKER}-leader-election", namespace, "worker"),
            "rules": lease_rules,
        }
    )
    out.append(
        {
            "apiVersion": "rbac.authorization.k8s.io/v1",
            "kind": "RoleBinding",
            "metadata": _meta(f"{WORKER}-leader-election", namespace, "worker"),
            "roleRef": {
                "apiGroup": "rbac.authorization.k8s.io",
                "kind": "Role",
                "name": f"{WORKER}-leader-election",
            },
            "subjects": [{"kind": "ServiceAccount", "name": WORKER, "namespace": namespace}],
        }
    )
    return out


def _security_context() -> Obj:
    return {
        "allowPrivilegeEscalation": False,
        "readOnlyRootFilesystem": True,
        "runAsNonRoot": True,
        "runAsUser": 65532,
        "runAsGroup": 65532,
        "capabilities": {"drop": ["ALL"]},
        "seccompProfile": {"type": "RuntimeDefault"},
    }


def _deployment(
    name: str,
    namespace: str,
    image: str,
    component: str,
    args: list[str],
    port: int,
    scheme: str,
    volumes: list[Obj],
    mounts: list[Obj],
) -> Obj:
    container: Obj = {
        "name": "draxr",
        "image": image,
        "imagePullPolicy": "IfNotPresent",
        "args": args,
        "ports": [
            {"name": "https" if scheme == "HTTPS" else "http", "containerPort": port, "protocol": "TCP"}
        ],
        "readinessProbe": {
            "httpGet": {"path": "/readyz", "port": port, "scheme": scheme},
            "periodSeconds": 5,
            "failureThreshold": 3,
        },
        "livenessProbe": {
            "httpGet": {"path": "/healthz", "port": port, "scheme": scheme},
            "initialDelaySeconds": 10,
            "periodSeconds": 10,
            "failureThreshold": 3,
        },
        "resources": {
            "requests": {"cpu": "100m", "memory": "128Mi"},
            "limits": {"cpu": "1", "memory": "512Mi"},
        },
        "securityContext": _security_context(),
        "env": [{"name": "POD_NAME", "valueFrom": {"fieldRef": {"fieldPath": "metadata.name"}}}],
    }
    if mounts:
        container["volumeMounts"] = mounts
    pod_spec: Obj = {
        "serviceAccountName": name,
        "securityContext": {"runAsNonRoot": True, "seccompProfile": {"type": "RuntimeDefault"}},
        "affinity": {
            "podAntiAffinity": {
                "preferredDuringSchedulingIgnoredDuringExecution": [
                    {
                        "weight": 100,
                        "podAffinityTerm": {
                            "labelSelector": {"matchLabels": _labels(component)},
                            "topologyKey": "kubernetes.io/hostname",
                        },
                    }
                ]
            }
        },
        "containers": [container],
    }
    if volumes:
        pod_spec["volumes"] = volumes
    return {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": _meta(name, namespace, component),
        "spec": {
            "replicas": 2,
            "selector": {"matchLabels": _labels(component)},
            "strategy": {"type": "RollingUpdate", "rollingUpdate": {"maxUnavailable": 0, "maxSurge": 1}},
            "template": {"metadata": {"labels": _labels(component)}, "spec": pod_spec},
        },
    }


def _pdb(name: str, namespace: str, component: str) -> Obj:
    return {
        "apiVersion": "policy/v1",
        "kind": "PodDisruptionBudget",
        "metadata": _meta(name, namespace, component),
        "spec": {"minAvailable": 1, "selector": {"matchLabels": _labels(component)}},
    }


def workloads(namespace: str, image: str) -> list[Obj]:
    webhook = _deployment(
        WEBHOOK,
        namespace,
        image,
        "webhook",
        ["serve", "--no-worker", "--port=8443", "--cert-dir=/certs", f"--namespace={namespace}"],
        8443,
        "HTTPS",
        [{"name": "tls", "secret": {"secretName": TLS_SECRET}}],
        [{"name": "tls", "mountPath": "/certs", "readOnly": True}],
    )
    worker = _deployment(
        WORKER,
        namespace,
        image,
        "worker",
        ["serve", "--no-webhook", "--port=8080", f"--namespace={namespace}", "--identity=$(POD_NAME)"],
        8080,
        "HTTP",
        [],
        [],
    )
    service = {
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": _meta(WEBHOOK, namespace, "webhook"),
        "spec": {
            "selector": _labels("webhook"),
            "ports": [{"name": "https", "port": 443, "targetPort": 8443, "protocol": "TCP"}],
        },
    }
    return [webhook, _pdb(WEBHOOK, namespace, "webhook"), service, worker, _pdb(WORKER, namespace, "worker")]


def tls_secret(namespace: str, cert_dir: Path | None) -> Obj:
    secret: Obj = {
        "apiVersion": "v1",
        "kind": "Secret",
        "metadata": _meta(TLS_SECRET, namespace, "webhook"),
        "type": "kubernetes.io/tls",
    }
    if cert_dir is not None:
        secret["data"] = {
            key: base64.b64encode((cert_dir / key).read_bytes()).decode()
            for key in ("ca.crt", "tls.crt", "tls.key")
        }
    else:
        secret["data"] = {"tls.crt": "", "tls.key": ""}
    return secret


def _hook(
    name: str,
    path: str,
    namespace: str,
    ca_bundle: str | None,
    rules: list[Obj],
    conditions: list[tuple[str, str]],
    failure_policy: str,
    webhook_url: str | None = None,
) -> Obj:
    client: Obj
    if webhook_url:
        client = {"url": webhook_url.rstrip("/") + path}
    else:
        client = {"service": {"namespace": namespace, "name": WEBHOOK, "path": path, "port": 443}}
    if ca_bundle:
        client["caBundle"] = ca_bundle
    return {
        "name": name,
        "clientConfig": client,
        "rules": rules,
        "failurePolicy": failure_policy,
        "matchPolicy": "Equivalent",
        "sideEffects": "None",
        "timeoutSeconds": 3,
        "admissionReviewVersions": ["v1"],
        "namespaceSelector": {
            "matchExpressions": [
                {
                    "key": "kubernetes.io/metadata.name",
                    "operator": "NotIn",
                    "values": ["kube-system", namespace],
                }
            ]
        },
        "matchConditions": [{"name": n, "expression": e} for n, e in conditions],
    }


def webhook_configurations(
    namespace: str, ca_bundle: str | None, cert_manager: bool = False, webhook_url: str | None = None
) -> list[Obj]:
    """``webhook_url``: call the webhook at this URL (``https://host:port``, the hook's path appended)
    instead of through the Service, as envtest does where no Service routes (no kube-proxy)."""
    pods_create = {
        "operations": ["CREATE"],
        "apiGroups": [""],
        "apiVersions": ["v1"],
        "resources": ["pods"],
        "scope": "Namespaced",
    }
    mutating = _hook(
        "pods.mutate.draxr.io",
        "/mutate/pods",
        namespace,
        ca_bundle,
        [pods_create],
        [("requests-dra-backed-names", REQUESTS_DRA_NAME)],
        "Fail",
        webhook_url,
    )
    mutating["reinvocationPolicy"] = "IfNeeded"
    validating = [
        _hook(
            "deviceclasses.validate.draxr.io",
            "/validate/deviceclasses",
            namespace,
            ca_bundle,
            [
                {
                    "operations": ["CREATE", "UPDATE"],
                    "apiGroups": ["resource.k8s.io"],
                    "apiVersions": ["v1"],
                    "resources": ["deviceclasses"],
                    "scope": "Cluster",
                }
            ],
            [("extended-resource-names", HAS_EXTENDED_NAME)],
            "Fail",
            webhook_url,
        ),
        _hook(
            "pods.validate.draxr.io",
            "/validate/pods",
            namespace,
            ca_bundle,
            [
                {
                    "operations": ["CREATE", "UPDATE"],
                    "apiGroups": [""],
                    "apiVersions": ["v1"],
                    "resources": ["pods", "pods/status"],
                    "scope": "Namespaced",
                }
            ],
            [
                (
                    "dra-names-or-claim-mapping",
                    f"request.operation == 'CREATE' ? ({REQUESTS_DRA_NAME}) : ({ERCS_CHANGED})",
                )
            ],
            "Fail",
            webhook_url,
        ),
        _hook(
            "resourceclaims.validate.draxr.io",
            "/validate/resourceclaims",
            namespace,
            ca_bundle,
            [
                {
                    "operations": ["CREATE", "UPDATE"],
                    "apiGroups": ["resource.k8s.io"],
                    "apiVersions": ["v1"],
                    "resources": ["resourceclaims"],
                    "scope": "Namespaced",
                }
            ],
            [("special-claims-only", SPECIAL_CLAIM), ("guarded-fields-change", CLAIM_GUARDED_CHANGE)],
            "Fail",
            webhook_url,
        ),
    ]
    # DeviceClasses are cluster-scoped: a namespaceSelector does not apply to them.
    del validating[0]["namespaceSelector"]
    annotations = {"cert-manager.io/inject-ca-from": f"{namespace}/{WEBHOOK}"} if cert_manager else None
    meta_m = _meta("draxr", None, "webhook", **({"annotations": annotations} if annotations else {}))
    meta_v = _meta("draxr", None, "webhook", **({"annotations": annotations} if annotations else {}))
    return [
        {
            "apiVersion": "admissionregistration.k8s.io/v1",
            "kind": "MutatingWebhookConfiguration",
            "metadata": meta_m,
            "webhooks": [mutating],
        },
        {
            "apiVersion": "admissionregistration.k8s.io/v1",
            "kind": "ValidatingWebhookConfiguration",
            "metadata": meta_v,
            "webhooks": validating,
        },
    ]


def cert_manager_objects(namespace: str) -> list[Obj]:
    return [
        {
            "apiVersion": "cert-manager.io/v1",
            "kind": "Issuer",
            "metadata": _meta("draxr-selfsigned", namespace, "webhook"),
            "spec": {"selfSigned": {}},
        },
        {
            "apiVersion": "cert-manager.io/v1",
            "kind": "Certificate",
            "metadata": _meta(WEBHOOK, namespace, "webhook"),
            "spec": {
                "secretName": TLS_SECRET,
                "issuerRef": {"name": "draxr-selfsigned", "kind": "Issuer"},
                "dnsNames": [f"{WEBHOOK}.{namespace}.svc", f"{WEBHOOK}.{namespace}.svc.cluster.local"],
            },
        },
    ]


def render(
    namespace: str = DEFAULT_NAMESPACE,
    image: str = DEFAULT_IMAGE,
    *,
    ca_bundle: str | None = None,
    cert_dir: Path | None = None,
    cert_manager: bool = False,
    webhook_url: str | None = None,
) -> list[Obj]:
    ns = {"apiVersion": "v1", "kind": "Namespace", "metadata": _meta(namespace, None, "namespace")}
    objects = [ns, *rbac(namespace), *workloads(namespace, image)]
    if cert_manager:
        objects += cert_manager_objects(namespace)
    else:
        objects.append(tls_secret(namespace, cert_dir))
    objects += webhook_configurations(
        namespace, None if cert_manager else ca_bundle, cert_manager, webhook_url
    )
    return objects


def dump(objects: list[Obj]) -> str:
    return yaml.safe_dump_all(objects, sort_keys=False, default_flow_style=False, width=120)


FILES = {
    "00-namespace.yaml": ("Namespace",),
    "10-rbac.yaml": ("ServiceAccount", "ClusterRole", "ClusterRoleBinding", "Role", "RoleBinding"),
    "20-workloads.yaml": ("Deployment", "PodDisruptionBudget", "Service", "Secret"),
    "30-webhooks.yaml": ("MutatingWebhookConfiguration", "ValidatingWebhookConfiguration"),
}


def split(objects: list[Obj]) -> dict[str, list[Obj]]:
    """The default rendering as it is kept in ``manifests/``."""
    return {f: [o for o in objects if o["kind"] in kinds] for f, kinds in FILES.items()}


HEADER = "# Rendered by `draxr manifests` with the defaults; regenerate with `make manifests`.\n"


def write_defaults(directory: str | Path) -> None:
    for filename, objects in split(render()).items():
        (Path(directory) / filename).write_text(HEADER + dump(objects))
