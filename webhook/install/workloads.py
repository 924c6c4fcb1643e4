"""draxr's two Deployments, the webhook's Service, their PodDisruptionBudgets and NetworkPolicies.

The webhook runs ``serve --no-worker`` behind its Service; the worker ``serve --no-webhook``, leader
elected (and, with self-managed certificates, renewing them). Both run hardened (non-root, read-only
root filesystem, no capabilities), spread over nodes and rolled without losing a ready replica.
"""

from __future__ import annotations

from ..core.api.objects import Obj
from ..identity.names import TLS_SECRET, WEBHOOK, WEBHOOK_PORT, WORKER, WORKER_PORT, labels, metadata
from .options import InstallOptions

#: How long a terminating webhook pod keeps serving before it is told to stop.
PRE_STOP_SECONDS = 5


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
    if component == "webhook":
        # Terminating, the pod leaves the Service's endpoints at once, but kube-apiserver sees that a
        # moment later: keep answering reviews meanwhile (kube-apiserver's --shutdown-delay-duration).
        container["lifecycle"] = {"preStop": {"sleep": {"seconds": PRE_STOP_SECONDS}}}
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
                            "labelSelector": {"matchLabels": labels(component)},
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
        "metadata": metadata(name, opts.namespace, component),
        "spec": {
            "replicas": replicas,
            "selector": {"matchLabels": labels(component)},
            "strategy": {"type": "RollingUpdate", "rollingUpdate": {"maxUnavailable": 0, "maxSurge": 1}},
            "template": {"metadata": {"labels": labels(component)}, "spec": pod_spec},
        },
    }


def _pdb(name: str, namespace: str, component: str) -> Obj:
    return {
        "apiVersion": "policy/v1",
        "kind": "PodDisruptionBudget",
        "metadata": metadata(name, namespace, component),
        "spec": {"minAvailable": 1, "selector": {"matchLabels": labels(component)}},
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
        "metadata": metadata(WEBHOOK, ns, "webhook"),
        "spec": {
            "selector": labels("webhook"),
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
            "metadata": metadata(f"draxr-{component}", namespace, component),
            "spec": {
                "podSelector": {"matchLabels": labels(component)},
                "policyTypes": ["Ingress"],
                "ingress": [{"ports": [{"protocol": "TCP", "port": port}]}],
            },
        }

    return [policy("webhook", WEBHOOK_PORT), policy("worker", WORKER_PORT)]
