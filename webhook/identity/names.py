"""The names of what draxr installs, and the labels its objects carry.

The renderings (manifests, the chart's inputs, monitoring) name the objects with these, and the running
processes find their own objects in the cluster by them (``draxr serve``'s Lease, the certificate
rotation's Secrets and webhook configurations, ``kubectl draxr``): one place, so what is applied and
what is looked for cannot drift apart.
"""

from __future__ import annotations

from typing import Any

from ..core.api.objects import Obj

DEFAULT_NAMESPACE = "draxr-system"
WEBHOOK = "draxr-webhook"
WORKER = "draxr-worker"
LEASE = "draxr-worker"
#: The worker's leader publishes the apiserver's gate answer here; every replica reads it
#: (``kube/sharedgate.py``).
GATE_CONFIGMAP = "draxr-apiserver-gate"
TLS_SECRET = "draxr-webhook-tls"
#: The CA the worker's leader signs renewed serving certificates with (self-managed certificates).
CA_SECRET = "draxr-webhook-ca"
#: The name of both webhook configurations.
WEBHOOK_CONFIGURATION = "draxr"
#: The FlowSchema and PriorityLevelConfiguration of draxr's two ServiceAccounts (flowcontrol.py).
FLOW_CONTROL = "draxr"
APP_LABEL = "app.kubernetes.io/name"
COMPONENT_LABEL = "app.kubernetes.io/component"
#: Namespaces labelled ``draxr.io/opt-out=true`` are never sent to draxr's hooks.
OPT_OUT_LABEL = "draxr.io/opt-out"
WEBHOOK_PORT, WORKER_PORT = 8443, 8080


def labels(component: str) -> dict[str, str]:
    return {APP_LABEL: "draxr", COMPONENT_LABEL: component}


def metadata(name: str, namespace: str | None, component: str, **extra: Any) -> Obj:
    m: Obj = {"name": name, "labels": labels(component)}
    if namespace:
        m["namespace"] = namespace
    m.update(extra)
    return m
