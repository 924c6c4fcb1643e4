"""Which webhooks a request reaches: ``rules``, ``namespaceSelector`` and ``objectSelector``.

Follows ``admission/plugin/webhook/predicates``: a rule matches operation, group, version, resource
(``pods``, ``pods/status``, ``*``, ``*/*``, ``pods/*``) and scope; the namespace selector applies to
namespaced requests and to Namespace objects; the object selector matches the new or the old object.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from webhook.core.api.objects import Obj

from ..selectors import labels_match
from .attributes import Attributes

NamespaceLabels = Callable[[str], dict[str, Any]]


def _has(values: Any, wanted: str) -> bool:
    return isinstance(values, list) and ("*" in values or wanted in values)


def _resource_matches(patterns: Any, resource: str, subresource: str) -> bool:
    if not isinstance(patterns, list):
        return False
    for pattern in patterns:
        if not isinstance(pattern, str):
            continue
        res, _, sub = pattern.partition("/")
        if (res == "*" or res == resource) and (sub == "*" or sub == subresource):
            return True
    return False


def _scope_matches(scope: Any, attrs: Attributes) -> bool:
    if scope in (None, "*"):
        return True
    is_namespace = attrs.rt.group == "" and attrs.rt.plural == "namespaces"
    if scope == "Namespaced":
        return not is_namespace and bool(attrs.namespace)
    if scope == "Cluster":
        return is_namespace or not attrs.namespace
    return False


def rule_matches(rule: Any, attrs: Attributes) -> bool:
    if not isinstance(rule, dict):
        return False
    rt = attrs.rt
    return (
        _has(rule.get("operations"), attrs.operation)
        and _has(rule.get("apiGroups"), rt.group)
        and _has(rule.get("apiVersions"), rt.version)
        and _resource_matches(rule.get("resources"), rt.plural, attrs.subresource)
        and _scope_matches(rule.get("scope"), attrs)
    )


def _labels(obj: Obj | None) -> dict[str, Any] | None:
    if not isinstance(obj, dict):
        return None
    meta = obj.get("metadata")
    labels = meta.get("labels") if isinstance(meta, dict) else None
    return labels if isinstance(labels, dict) else {}


def namespace_matches(webhook: Obj, attrs: Attributes, namespace_labels: NamespaceLabels) -> bool:
    selector = webhook.get("namespaceSelector")
    if not selector:
        return True
    if attrs.rt.group == "" and attrs.rt.plural == "namespaces":
        labels = _labels(attrs.obj if attrs.obj is not None else attrs.old) or {}
        return labels_match(selector, labels)
    if not attrs.namespace:
        return True  # cluster-scoped objects ignore the namespace selector
    return labels_match(selector, namespace_labels(attrs.namespace))


def object_matches(webhook: Obj, attrs: Attributes) -> bool:
    selector = webhook.get("objectSelector")
    if not selector:
        return True
    return any(
        labels is not None and labels_match(selector, labels)
        for labels in (_labels(attrs.obj), _labels(attrs.old))
    )


def webhook_applies(webhook: Obj, attrs: Attributes, namespace_labels: NamespaceLabels) -> bool:
    """Rules first (cheap), then the selectors; matchConditions are evaluated by the caller."""
    rules = webhook.get("rules")
    if not isinstance(rules, list) or not any(rule_matches(r, attrs) for r in rules):
        return False
    return namespace_matches(webhook, attrs, namespace_labels) and object_matches(webhook, attrs)
