"""draxr's MutatingWebhookConfiguration and ValidatingWebhookConfiguration: which hook gets which
requests (rules, ``matchConditions``, namespaces), how kube-apiserver calls it and what it does when
the call fails.

Each hook calls the webhook through its Service (or ``--webhook-url`` where kube-apiserver cannot
reach Services), with the CA bundle as ``caBundle`` or cert-manager's injection (trust.py).
"""

from __future__ import annotations

from typing import Any

from ..core.api.objects import Obj
from ..identity.names import WEBHOOK, WEBHOOK_CONFIGURATION, metadata
from .matchconditions import MATCH_CONDITIONS, mutate_conditions
from .options import InstallOptions, ManifestError


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


def configurations(opts: InstallOptions, ca_bundle: str | None, cert_manager: bool) -> list[Obj]:
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
        mutate_conditions(opts.route),
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
            "metadata": metadata(WEBHOOK_CONFIGURATION, None, "webhook", **extra),
            "webhooks": [mutating],
        },
        {
            "apiVersion": "admissionregistration.k8s.io/v1",
            "kind": "ValidatingWebhookConfiguration",
            "metadata": metadata(WEBHOOK_CONFIGURATION, None, "webhook", **extra),
            "webhooks": validating,
        },
    ]


def webhook_configurations(
    namespace: str, ca_bundle: str | None, cert_manager: bool = False, webhook_url: str | None = None
) -> list[Obj]:
    """The two webhook configurations with the defaults; ``ca_bundle`` is base64 PEM.

    ``ManifestError`` without a ``ca_bundle`` unless ``cert_manager``: such hooks could not be called.
    """
    return configurations(
        InstallOptions(namespace=namespace, webhook_url=webhook_url), ca_bundle, cert_manager
    )
