"""Everything an operator applies to install draxr (rendered by ``draxr manifests``).

Two Deployments, each with its own ServiceAccount and least-privilege RBAC: the webhook
(``serve --no-worker``) only reads; the worker (``serve --no-webhook``, leader elected) gets exactly
the verbs it uses. Webhook configurations call the webhook through its Service; pod hooks are
scoped by CEL ``matchConditions`` to pods that request non-native resources, the claim hook to
special claims, the DeviceClass hook to classes with ``extendedResourceName``, so failing closed
blocks only what draxr is responsible for.

A webhook is never rendered without a way for kube-apiserver to trust it, and a Secret is never
rendered empty (applying it would wipe a good one). ``render`` takes exactly one of:

* ``Certificates``: the CA bundle goes into every hook's ``caBundle`` and the serving pair into the
  Secret ``draxr-webhook-tls``. With the CA's key too (``draxr manifests`` makes the CA itself by
  default), the CA goes into the Secret ``draxr-webhook-ca`` and the worker's leader renews the
  serving certificate and the CA in the cluster (``--rotate-certificates``, runtime/rotation.py);
* ``cert_manager=True``: a self-signed Issuer and a Certificate, and cert-manager's CA injection
  (``cert-manager.io/inject-ca-from``) fills ``caBundle``; no Secret is rendered at all.

``manifests/`` holds the cert-manager rendering with the defaults (no key in the repository); a test
keeps it equal to this code, and the Helm chart under ``manifests/helm/draxr`` equal to it.
"""

from __future__ import annotations

import base64
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from ..core.api.constants import (
    EXTENDED_RESOURCE_CLAIM_ANNOTATION,
    EXTENDED_RESOURCE_NAME_ANNOTATION,
    GATE_PROBE_PREFIX,
)
from ..core.api.objects import Obj

DEFAULT_NAMESPACE = "draxr-system"
DEFAULT_IMAGE = "ghcr.io/draxr/draxr:0.1.0"
WEBHOOK = "draxr-webhook"
WORKER = "draxr-worker"
LEASE = "draxr-worker"
TLS_SECRET = "draxr-webhook-tls"
#: The CA the worker's leader signs renewed serving certificates with (self-managed certificates).
CA_SECRET = "draxr-webhook-ca"
#: The name of both webhook configurations.
WEBHOOK_CONFIGURATION = "draxr"
APP_LABEL = "app.kubernetes.io/name"
COMPONENT_LABEL = "app.kubernetes.io/component"
#: Namespaces labelled ``draxr.io/opt-out=true`` are never sent to draxr's hooks.
OPT_OUT_LABEL = "draxr.io/opt-out"
FAILURE_POLICIES = ("Fail", "Ignore")
ROUTES = ("default-only", "always", "never")
#: kube-apiserver accepts a webhook timeoutSeconds between 1 and 30.
MIN_TIMEOUT_SECONDS, MAX_TIMEOUT_SECONDS = 1, 30
WEBHOOK_PORT, WORKER_PORT = 8443, 8080

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


class ManifestError(ValueError):
    """What was asked cannot be rendered safely; the message is for the user."""


def _default_resources() -> Obj:
    return {"requests": {"cpu": "100m", "memory": "128Mi"}, "limits": {"cpu": "1", "memory": "512Mi"}}


@dataclass(frozen=True)
class InstallOptions:
    """What an operator may choose (``draxr manifests`` flags, the Helm chart's values)."""

    namespace: str = DEFAULT_NAMESPACE
    image: str = DEFAULT_IMAGE
    image_pull_policy: str = "IfNotPresent"
    webhook_replicas: int = 2
    worker_replicas: int = 2
    webhook_resources: Obj = field(default_factory=_default_resources)
    worker_resources: Obj = field(default_factory=_default_resources)
    priority_class_name: str = ""
    tolerations: Sequence[Obj] = ()
    node_selector: Mapping[str, str] = field(default_factory=dict)
    failure_policy: str = "Fail"
    timeout_seconds: int = 3
    #: ``draxr serve --route`` of the webhook.
    route: str = "default-only"
    #: Namespaces the hooks never see, besides kube-system and draxr's own.
    opt_out_namespaces: Sequence[str] = ()
    #: Namespaces labelled ``<label>=true`` are never sent to the hooks; "" turns that off.
    opt_out_label: str = OPT_OUT_LABEL
    #: Call the hooks at this URL (``https://host:port``, the hook's path appended) instead of the
    #: Service, where kube-apiserver cannot reach Services (envtest, no kube-proxy).
    webhook_url: str | None = None
    #: NetworkPolicies: only the served ports of draxr's pods accept connections.
    network_policy: bool = False
    #: ``draxr serve --cert-validity`` / ``--cert-renew-before`` of the leader that renews certificates
    #: (None: serve's defaults).
    cert_validity: str | None = None
    cert_renew_before: str | None = None

    def __post_init__(self) -> None:
        if self.failure_policy not in FAILURE_POLICIES:
            raise ManifestError(f"failurePolicy must be one of {', '.join(FAILURE_POLICIES)}")
        if not MIN_TIMEOUT_SECONDS <= self.timeout_seconds <= MAX_TIMEOUT_SECONDS:
            raise ManifestError(
                f"timeoutSeconds must be between {MIN_TIMEOUT_SECONDS} and {MAX_TIMEOUT_SECONDS}"
            )
        if self.route not in ROUTES:
            raise ManifestError(f"route must be one of {', '.join(ROUTES)}")
        if self.webhook_replicas < 1 or self.worker_replicas < 1:
            raise ManifestError("replicas must be at least 1")


@dataclass(frozen=True)
class Certificates:
    """The webhook's TLS material (PEM), rendered into Secrets and ``caBundle``.

    ``ca_bundle``: the CAs kube-apiserver trusts (every hook's ``caBundle``, the TLS Secret's
    ``ca.crt``); ``tls_crt``/``tls_key``: the serving pair; ``ca_crt``/``ca_key``: the CA that signs
    it, when draxr is to renew it in the cluster (else None: the certificates are the operator's).
    """

    ca_bundle: bytes
    tls_crt: bytes
    tls_key: bytes
    ca_crt: bytes | None = None
    ca_key: bytes | None = None

    def __post_init__(self) -> None:
        for what, value in (
            ("CA bundle", self.ca_bundle),
            ("tls.crt", self.tls_crt),
            ("tls.key", self.tls_key),
        ):
            if not value.strip():
                raise ManifestError(f"{what} is empty: a webhook nobody can trust would refuse every call")
        if (self.ca_crt is None) != (self.ca_key is None):
            raise ManifestError("the CA certificate and its key go together")

    @property
    def renewable(self) -> bool:
        """draxr holds the CA, so its leader can renew the serving certificate in the cluster."""
        return self.ca_key is not None

    @classmethod
    def from_dir(cls, directory: Path, ca_bundle: bytes) -> Certificates:
        """``tls.crt``/``tls.key`` of ``directory`` (``OSError`` when missing), with its ``ca.crt`` and
        ``ca.key`` when it holds the key (``draxr certs`` output)."""
        tls_crt = (directory / "tls.crt").read_bytes()
        tls_key = (directory / "tls.key").read_bytes()
        ca_key_file = directory / "ca.key"
        if ca_key_file.is_file():
            return cls(
                ca_bundle, tls_crt, tls_key, (directory / "ca.crt").read_bytes(), ca_key_file.read_bytes()
            )
        return cls(ca_bundle, tls_crt, tls_key)


def _b64(data: bytes) -> str:
    return base64.b64encode(data).decode("ascii")


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
        # Pod affinity's namespace selectors read the Namespaces' labels (an informer).
        {"apiGroups": [""], "resources": ["namespaces"], "verbs": ["list", "watch"]},
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
            "metadata": _meta(role, None, "worker"),
            "rules": [configurations],
        },
        {
            "apiVersion": "rbac.authorization.k8s.io/v1",
            "kind": "ClusterRoleBinding",
            "metadata": _meta(role, None, "worker"),
            "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": role},
            "subjects": subjects,
        },
        {
            "apiVersion": "rbac.authorization.k8s.io/v1",
            "kind": "Role",
            "metadata": _meta(role, namespace, "worker"),
            "rules": [secrets],
        },
        {
            "apiVersion": "rbac.authorization.k8s.io/v1",
            "kind": "RoleBinding",
            "metadata": _meta(role, namespace, "worker"),
            "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": role},
            "subjects": subjects,
        },
    ]


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
    opts: InstallOptions,
    name: str,
    component: str,
    args: list[str],
    port: int,
    scheme: str,
    volumes: list[Obj],
    mounts: list[Obj],
) -> Obj:
    replicas, resources = (
        (opts.webhook_replicas, opts.webhook_resources)
        if component == "webhook"
        else (opts.worker_replicas, opts.worker_resources)
    )
    container: Obj = {
        "name": "draxr",
        "image": opts.image,
        "imagePullPolicy": opts.image_pull_policy,
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
        "resources": dict(resources),
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
    if opts.priority_class_name:
        pod_spec["priorityClassName"] = opts.priority_class_name
    if opts.node_selector:
        pod_spec["nodeSelector"] = dict(opts.node_selector)
    if opts.tolerations:
        pod_spec["tolerations"] = [dict(t) for t in opts.tolerations]
    if volumes:
        pod_spec["volumes"] = volumes
    return {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": _meta(name, opts.namespace, component),
        "spec": {
            "replicas": replicas,
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


def workloads(opts: InstallOptions, *, rotate_certificates: bool = False) -> list[Obj]:
    """The two Deployments, their PodDisruptionBudgets (with more than one replica: one replica and
    ``minAvailable: 1`` would block every node drain) and the webhook's Service."""
    ns = opts.namespace
    webhook_args = [
        "serve",
        "--no-worker",
        f"--port={WEBHOOK_PORT}",
        "--cert-dir=/certs",
        f"--namespace={ns}",
    ]
    if opts.route != "default-only":
        webhook_args.append(f"--route={opts.route}")
    worker_args = [
        "serve",
        "--no-webhook",
        f"--port={WORKER_PORT}",
        f"--namespace={ns}",
        "--identity=$(POD_NAME)",
    ]
    if rotate_certificates:
        worker_args.append("--rotate-certificates")
        if opts.cert_validity:
            worker_args.append(f"--cert-validity={opts.cert_validity}")
        if opts.cert_renew_before:
            worker_args.append(f"--cert-renew-before={opts.cert_renew_before}")
    webhook = _deployment(
        opts,
        WEBHOOK,
        "webhook",
        webhook_args,
        WEBHOOK_PORT,
        "HTTPS",
        [{"name": "tls", "secret": {"secretName": TLS_SECRET}}],
        [{"name": "tls", "mountPath": "/certs", "readOnly": True}],
    )
    worker = _deployment(opts, WORKER, "worker", worker_args, WORKER_PORT, "HTTP", [], [])
    service = {
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": _meta(WEBHOOK, ns, "webhook"),
        "spec": {
            "selector": _labels("webhook"),
            "ports": [{"name": "https", "port": 443, "targetPort": WEBHOOK_PORT, "protocol": "TCP"}],
        },
    }
    out: list[Obj] = [webhook]
    if opts.webhook_replicas > 1:
        out.append(_pdb(WEBHOOK, ns, "webhook"))
    out += [service, worker]
    if opts.worker_replicas > 1:
        out.append(_pdb(WORKER, ns, "worker"))
    return out


def network_policies(namespace: str) -> list[Obj]:
    """Ingress to draxr's pods only on the ports they serve (the apiserver's address is not known in
    advance, so from anywhere); everything else is refused. Egress stays open: the API server."""

    def policy(component: str, port: int) -> Obj:
        return {
            "apiVersion": "networking.k8s.io/v1",
            "kind": "NetworkPolicy",
            "metadata": _meta(f"draxr-{component}", namespace, component),
            "spec": {
                "podSelector": {"matchLabels": _labels(component)},
                "policyTypes": ["Ingress"],
                "ingress": [{"ports": [{"protocol": "TCP", "port": port}]}],
            },
        }

    return [policy("webhook", WEBHOOK_PORT), policy("worker", WORKER_PORT)]


def certificate_secrets(namespace: str, certs: Certificates) -> list[Obj]:
    """The serving pair (``draxr-webhook-tls``, mounted by the webhook) and, when draxr holds it, the
    CA (``draxr-webhook-ca``, read by the worker's leader to renew). Never empty."""
    out: list[Obj] = []
    if certs.ca_crt is not None and certs.ca_key is not None:
        out.append(
            {
                "apiVersion": "v1",
                "kind": "Secret",
                "metadata": _meta(CA_SECRET, namespace, "webhook"),
                "type": "kubernetes.io/tls",
                "data": {"tls.crt": _b64(certs.ca_crt), "tls.key": _b64(certs.ca_key)},
            }
        )
    out.append(
        {
            "apiVersion": "v1",
            "kind": "Secret",
            "metadata": _meta(TLS_SECRET, namespace, "webhook"),
            "type": "kubernetes.io/tls",
            "data": {
                "ca.crt": _b64(certs.ca_bundle),
                "tls.crt": _b64(certs.tls_crt),
                "tls.key": _b64(certs.tls_key),
            },
        }
    )
    return out


def _namespace_selector(opts: InstallOptions) -> Obj:
    expressions: list[Obj] = [
        {
            "key": "kubernetes.io/metadata.name",
            "operator": "NotIn",
            "values": list(dict.fromkeys(["kube-system", opts.namespace, *opts.opt_out_namespaces])),
        }
    ]
    if opts.opt_out_label:
        expressions.append({"key": opts.opt_out_label, "operator": "NotIn", "values": ["true"]})
    return {"matchExpressions": expressions}


def _hook(
    opts: InstallOptions,
    name: str,
    path: str,
    ca_bundle: str | None,
    rules: list[Obj],
    conditions: list[tuple[str, str]],
) -> Obj:
    client: Obj
    if opts.webhook_url:
        client = {"url": opts.webhook_url.rstrip("/") + path}
    else:
        client = {"service": {"namespace": opts.namespace, "name": WEBHOOK, "path": path, "port": 443}}
    if ca_bundle:
        client["caBundle"] = ca_bundle
    return {
        "name": name,
        "clientConfig": client,
        "rules": rules,
        "failurePolicy": opts.failure_policy,
        "matchPolicy": "Equivalent",
        "sideEffects": "None",
        "timeoutSeconds": opts.timeout_seconds,
        "admissionReviewVersions": ["v1"],
        "namespaceSelector": _namespace_selector(opts),
        "matchConditions": [{"name": n, "expression": e} for n, e in conditions],
    }


#: Each hook's CEL ``matchConditions`` (also read by the Helm chart from files/match-conditions.yaml).
MATCH_CONDITIONS: dict[str, list[tuple[str, str]]] = {
    "pods.mutate.draxr.io": [("requests-dra-backed-names", REQUESTS_DRA_NAME)],
    "deviceclasses.validate.draxr.io": [("extended-resource-names", HAS_EXTENDED_NAME)],
    "pods.validate.draxr.io": [
        (
            "dra-names-or-claim-mapping",
            f"request.operation == 'CREATE' ? ({REQUESTS_DRA_NAME}) : ({ERCS_CHANGED})",
        )
    ],
    "resourceclaims.validate.draxr.io": [
        ("special-claims-only", SPECIAL_CLAIM),
        ("guarded-fields-change", CLAIM_GUARDED_CHANGE),
    ],
}


def _configurations(opts: InstallOptions, ca_bundle: str | None, cert_manager: bool) -> list[Obj]:
    if not ca_bundle and not cert_manager:
        raise ManifestError(
            "no way to trust the webhook: give a CA bundle or use cert-manager's CA injection"
        )
    pods_create = {
        "operations": ["CREATE"],
        "apiGroups": [""],
        "apiVersions": ["v1"],
        "resources": ["pods"],
        "scope": "Namespaced",
    }
    mutating = _hook(
        opts,
        "pods.mutate.draxr.io",
        "/mutate/pods",
        ca_bundle,
        [pods_create],
        MATCH_CONDITIONS["pods.mutate.draxr.io"],
    )
    mutating["reinvocationPolicy"] = "IfNeeded"
    validating = [
        _hook(
            opts,
            "deviceclasses.validate.draxr.io",
            "/validate/deviceclasses",
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
            MATCH_CONDITIONS["deviceclasses.validate.draxr.io"],
        ),
        _hook(
            opts,
            "pods.validate.draxr.io",
            "/validate/pods",
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
            MATCH_CONDITIONS["pods.validate.draxr.io"],
        ),
        _hook(
            opts,
            "resourceclaims.validate.draxr.io",
            "/validate/resourceclaims",
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
            MATCH_CONDITIONS["resourceclaims.validate.draxr.io"],
        ),
    ]
    # DeviceClasses are cluster-scoped: a namespaceSelector does not apply to them.
    del validating[0]["namespaceSelector"]
    extra: dict[str, Any] = {}
    if cert_manager:
        extra["annotations"] = {"cert-manager.io/inject-ca-from": f"{opts.namespace}/{WEBHOOK}"}
    return [
        {
            "apiVersion": "admissionregistration.k8s.io/v1",
            "kind": "MutatingWebhookConfiguration",
            "metadata": _meta(WEBHOOK_CONFIGURATION, None, "webhook", **extra),
            "webhooks": [mutating],
        },
        {
            "apiVersion": "admissionregistration.k8s.io/v1",
            "kind": "ValidatingWebhookConfiguration",
            "metadata": _meta(WEBHOOK_CONFIGURATION, None, "webhook", **extra),
            "webhooks": validating,
        },
    ]


def webhook_configurations(
    namespace: str, ca_bundle: str | None, cert_manager: bool = False, webhook_url: str | None = None
) -> list[Obj]:
    """The two webhook configurations with the defaults; ``ca_bundle`` is base64 PEM.

    ``ManifestError`` without a ``ca_bundle`` unless ``cert_manager``: such hooks could not be called.
    """
    return _configurations(
        InstallOptions(namespace=namespace, webhook_url=webhook_url), ca_bundle, cert_manager
    )


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
    options: InstallOptions | None = None,
    *,
    certificates: Certificates | None = None,
    cert_manager: bool = False,
) -> list[Obj]:
    """Every object to apply, in order. Exactly one of ``certificates`` and ``cert_manager``
    (``ManifestError`` otherwise: nothing is rendered that kube-apiserver could not call)."""
    opts = options if options is not None else InstallOptions()
    if cert_manager and certificates is not None:
        raise ManifestError(
            "cert-manager injects the CA bundle itself: give certificates or cert_manager, not both"
        )
    if not cert_manager and certificates is None:
        raise ManifestError("no certificates and no cert-manager: the webhook could not be trusted")
    rotate = certificates is not None and certificates.renewable
    ns = {"apiVersion": "v1", "kind": "Namespace", "metadata": _meta(opts.namespace, None, "namespace")}
    objects = [ns, *rbac(opts.namespace)]
    if rotate:
        objects += certificate_rbac(opts.namespace)
    objects += workloads(opts, rotate_certificates=rotate)
    if opts.network_policy:
        objects += network_policies(opts.namespace)
    if certificates is not None:
        objects += certificate_secrets(opts.namespace, certificates)
        objects += _configurations(opts, _b64(certificates.ca_bundle), False)
    else:
        objects += cert_manager_objects(opts.namespace)
        objects += _configurations(opts, None, True)
    return objects


def dump(objects: list[Obj]) -> str:
    return yaml.safe_dump_all(objects, sort_keys=False, default_flow_style=False, width=120)


FILES = {
    "00-namespace.yaml": ("Namespace",),
    "10-rbac.yaml": ("ServiceAccount", "ClusterRole", "ClusterRoleBinding", "Role", "RoleBinding"),
    "20-workloads.yaml": ("Deployment", "PodDisruptionBudget", "Service", "NetworkPolicy"),
    "25-certificates.yaml": ("Issuer", "Certificate", "Secret"),
    "30-webhooks.yaml": ("MutatingWebhookConfiguration", "ValidatingWebhookConfiguration"),
}


def split(objects: list[Obj]) -> dict[str, list[Obj]]:
    """A rendering as it is kept in ``manifests/``, one file per group of kinds."""
    return {f: [o for o in objects if o["kind"] in kinds] for f, kinds in FILES.items()}


HEADER = (
    "# `draxr manifests --cert-manager` with the defaults (needs cert-manager; plain `draxr manifests` "
    "makes its own certificates); regenerate with `make manifests`.\n"
)

#: The kustomization that makes ``kubectl apply -k manifests/`` apply the files above.
KUSTOMIZATION = "kustomization.yaml"
#: Where the Helm chart reads the hooks' CEL matchConditions from (written by ``make manifests``).
CHART = Path("helm") / "draxr"
CHART_MATCH_CONDITIONS = CHART / "files" / "match-conditions.yaml"


def kustomization() -> str:
    body = {
        "apiVersion": "kustomize.config.k8s.io/v1beta1",
        "kind": "Kustomization",
        "resources": list(FILES),
    }
    return HEADER + yaml.safe_dump(body, sort_keys=False, default_flow_style=False)


def chart_match_conditions() -> str:
    """The CEL ``matchConditions`` of each hook, as the Helm chart includes them."""
    body = {
        hook: [{"name": n, "expression": e} for n, e in conditions]
        for hook, conditions in MATCH_CONDITIONS.items()
    }
    header = (
        "# Written by `make manifests` from webhook/install/manifests.py (MATCH_CONDITIONS): do not edit.\n"
    )
    return header + yaml.safe_dump(body, sort_keys=False, default_flow_style=False, width=120)


def defaults() -> dict[str, str]:
    """Every generated file under ``manifests/`` (relative path -> text)."""
    files = {name: HEADER + dump(objects) for name, objects in split(render(cert_manager=True)).items()}
    files[KUSTOMIZATION] = kustomization()
    files[str(CHART_MATCH_CONDITIONS)] = chart_match_conditions()
    return files


def write_defaults(directory: str | Path) -> None:
    for name, text in defaults().items():
        path = Path(directory) / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
