"""API defaulting for the fields draxr and its tests read back (a subset of ``SetDefaults_*``).

The apiserver defaults every object it decodes, so a webhook sees and a client reads back e.g.
``spec.schedulerName: default-scheduler`` and requests copied from limits. Defaulting is idempotent:
it runs on every create, update and patch result.
"""

from __future__ import annotations

from typing import Any

from webhook.core.api.objects import Obj
from webhook.core.api.quantity import try_parse


def _quantities(values: Any) -> None:
    """Quantities decode from JSON numbers too but always serialise as strings (``1`` -> ``"1"``)."""
    if isinstance(values, dict):
        for name, value in values.items():
            if isinstance(value, int | float) and not isinstance(value, bool):
                values[name] = str(value)


def _container(c: Any) -> None:
    if not isinstance(c, dict):
        return
    c.setdefault("terminationMessagePath", "/dev/termination-log")
    c.setdefault("terminationMessagePolicy", "File")
    image = c.get("image")
    if "imagePullPolicy" not in c and isinstance(image, str):
        tail = image.rsplit("/", 1)[-1]
        tagged = ":" in tail and not tail.endswith(":latest")
        c["imagePullPolicy"] = "IfNotPresent" if tagged or "@" in image else "Always"
    resources = c.get("resources")
    if not isinstance(resources, dict):
        c["resources"] = {}
        return
    limits = resources.get("limits")
    _quantities(limits)
    _quantities(resources.get("requests"))
    if isinstance(limits, dict) and limits:
        requests = resources.get("requests")
        if not isinstance(requests, dict):
            requests = {}
            resources["requests"] = requests
        for name, value in limits.items():
            requests.setdefault(name, value)


def pod_spec(spec: Any) -> None:
    """``SetDefaults_PodSpec`` and container defaults (plus the Priority plugin's fields)."""
    if not isinstance(spec, dict):
        return
    spec.setdefault("restartPolicy", "Always")
    spec.setdefault("terminationGracePeriodSeconds", 30)
    spec.setdefault("dnsPolicy", "ClusterFirst")
    spec.setdefault("securityContext", {})
    spec.setdefault("schedulerName", "default-scheduler")
    spec.setdefault("enableServiceLinks", True)
    spec.setdefault("priority", 0)
    spec.setdefault("preemptionPolicy", "PreemptLowerPriority")
    for field in ("initContainers", "containers"):
        items = spec.get(field)
        if isinstance(items, list):
            for c in items:
                _container(c)


def _device_requests(devices: Any) -> None:
    if not isinstance(devices, dict) or not isinstance(devices.get("requests"), list):
        return
    for req in devices["requests"]:
        if not isinstance(req, dict):
            continue
        alternatives = req.get("firstAvailable")
        subs = [req.get("exactly"), *(alternatives if isinstance(alternatives, list) else [])]
        for sub in subs:
            if isinstance(sub, dict):
                sub.setdefault("allocationMode", "ExactCount")
                if sub["allocationMode"] == "ExactCount":
                    sub.setdefault("count", 1)


def _webhooks(obj: Obj, mutating: bool) -> None:
    """``SetDefaults_(Mutating|Validating)Webhook`` and ``SetDefaults_Rule``."""
    hooks = obj.get("webhooks")
    if not isinstance(hooks, list):
        return
    for hook in hooks:
        if not isinstance(hook, dict):
            continue
        hook.setdefault("failurePolicy", "Fail")
        hook.setdefault("matchPolicy", "Equivalent")
        hook.setdefault("namespaceSelector", {})
        hook.setdefault("objectSelector", {})
        hook.setdefault("timeoutSeconds", 10)
        if mutating:
            hook.setdefault("reinvocationPolicy", "Never")
        for rule in hook.get("rules") or []:
            if isinstance(rule, dict):
                rule.setdefault("scope", "*")
        config = hook.get("clientConfig")
        service = config.get("service") if isinstance(config, dict) else None
        if isinstance(service, dict):
            service.setdefault("port", 443)


def apply(kind: str, obj: Obj) -> None:
    """Default ``obj`` in place by kind."""
    spec = obj.get("spec")
    if kind == "Pod":
        pod_spec(spec)
    elif kind == "ResourceClaim" and isinstance(spec, dict):
        _device_requests(spec.get("devices"))
    elif kind == "ResourceClaimTemplate" and isinstance(spec, dict):
        inner = spec.get("spec")
        if isinstance(inner, dict):
            _device_requests(inner.get("devices"))
    elif kind == "Node":
        status = obj.get("status")
        if isinstance(status, dict):
            _quantities(status.get("capacity"))
            _quantities(status.get("allocatable"))
    elif kind in ("MutatingWebhookConfiguration", "ValidatingWebhookConfiguration"):
        _webhooks(obj, kind.startswith("Mutating"))
    elif kind in ("Deployment", "ReplicaSet") and isinstance(spec, dict):
        spec.setdefault("replicas", 1)
        template = spec.get("template")
        if isinstance(template, dict):
            pod_spec(template.get("spec"))


def _resource_pairs(c: Obj) -> tuple[dict[str, Any], dict[str, Any]]:
    r = c.get("resources")
    r = r if isinstance(r, dict) else {}
    req, lim = r.get("requests"), r.get("limits")
    return (req if isinstance(req, dict) else {}), (lim if isinstance(lim, dict) else {})


def qos_class(spec: Any) -> str:
    """``GetPodQOS`` over cpu and memory: BestEffort, Guaranteed or Burstable."""
    if not isinstance(spec, dict):
        return "BestEffort"
    containers = [
        c for f in ("initContainers", "containers") for c in (spec.get(f) or []) if isinstance(c, dict)
    ]
    any_set, guaranteed = False, bool(containers)
    for c in containers:
        req, lim = _resource_pairs(c)
        for name in ("cpu", "memory"):
            r, li = try_parse(req.get(name)), try_parse(lim.get(name))
            if (r is not None and r.sign() != 0) or (li is not None and li.sign() != 0):
                any_set = True
            if li is None or r is None or r != li:
                guaranteed = False
    if not any_set:
        return "BestEffort"
    return "Guaranteed" if guaranteed else "Burstable"
