"""Label and field selectors: the query-string forms and the ``LabelSelector`` object form.

Both compile to predicates once per request (or per watch), so list and watch filtering is a plain
function call per object.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from webhook.core.api.names import is_qualified_name
from webhook.core.api.objects import Obj

from . import errors

Predicate = Callable[[Obj], bool]

_FIELDS_ALL = frozenset({"metadata.name", "metadata.namespace"})
#: Field labels each resource supports beyond ``metadata.name``/``metadata.namespace``.
FIELD_LABELS: dict[str, frozenset[str]] = {
    "pods": frozenset(
        {
            "spec.nodeName",
            "spec.schedulerName",
            "spec.restartPolicy",
            "spec.serviceAccountName",
            "spec.hostNetwork",
            "status.phase",
            "status.podIP",
            "status.nominatedNodeName",
        }
    ),
    "nodes": frozenset({"spec.unschedulable"}),
    "namespaces": frozenset({"status.phase"}),
    "secrets": frozenset({"type"}),
    "events": frozenset(
        {
            "involvedObject.kind",
            "involvedObject.namespace",
            "involvedObject.name",
            "involvedObject.uid",
            "involvedObject.apiVersion",
            "involvedObject.resourceVersion",
            "involvedObject.fieldPath",
            "reason",
            "reportingComponent",
            "type",
        }
    ),
    "events.events.k8s.io": frozenset(
        {"reason", "regarding.kind", "regarding.name", "regarding.namespace", "type"}
    ),
    "resourceslices.resource.k8s.io": frozenset({"spec.nodeName", "spec.driver", "spec.pool.name"}),
}


@dataclass(frozen=True, slots=True)
class Requirement:
    key: str
    op: str  # "=", "!=", "in", "notin", "exists", "!"
    values: frozenset[str]

    def matches(self, labels: Mapping[str, Any]) -> bool:
        present = self.key in labels
        if self.op == "exists":
            return present
        if self.op == "!":
            return not present
        value = labels.get(self.key)
        if self.op in ("=", "in"):
            return present and value in self.values
        # "!=" and "notin" also match objects without the label, as upstream.
        return not present or value not in self.values


def _all(reqs: list[Requirement]) -> Predicate:
    def pred(obj: Obj) -> bool:
        meta = obj.get("metadata")
        labels = meta.get("labels") if isinstance(meta, dict) else None
        if not isinstance(labels, dict):
            labels = {}
        return all(r.matches(labels) for r in reqs)

    return pred


def _split_top(text: str) -> list[str]:
    """Split on commas outside parentheses."""
    parts: list[str] = []
    cur: list[str] = []
    depth = 0
    for ch in text:
        if ch == "(":
            depth += 1
        elif ch == ")":
            depth -= 1
        if ch == "," and depth == 0:
            parts.append("".join(cur))
            cur = []
        else:
            cur.append(ch)
    parts.append("".join(cur))
    return parts


def _check_key(key: str, text: str) -> str:
    key = key.strip()
    problems = is_qualified_name(key) if key else ["key must be non-empty"]
    if problems:
        raise errors.bad_request(f"unable to parse requirement: {text!r}: {'; '.join(problems)}")
    return key


def parse_label_selector(text: str) -> list[Requirement]:
    """``labels.Parse``: ``a=b,c!=d,e in (f,g),h notin (i),j,!k``; 400 BadRequest on bad syntax."""
    reqs: list[Requirement] = []
    if not text.strip():
        return reqs
    for raw in _split_top(text):
        part = raw.strip()
        if not part:
            raise errors.bad_request(
                f"unable to parse requirement: found '', expected: identifier in {text!r}"
            )
        for word, op in ((" notin ", "notin"), (" in ", "in")):
            idx = part.find(word)
            if idx > 0:
                key = _check_key(part[:idx], text)
                rest = part[idx + len(word) :].strip()
                if not (rest.startswith("(") and rest.endswith(")")):
                    raise errors.bad_request(f"unable to parse requirement: found {rest!r}, expected: '('")
                values = frozenset(v.strip() for v in rest[1:-1].split(",") if v.strip())
                reqs.append(Requirement(key, op, values))
                break
        else:
            if part.startswith("!"):
                reqs.append(Requirement(_check_key(part[1:], text), "!", frozenset()))
                continue
            for token, op in (("!=", "!="), ("==", "="), ("=", "=")):
                idx = part.find(token)
                if idx >= 0:
                    key = _check_key(part[:idx], text)
                    reqs.append(Requirement(key, op, frozenset({part[idx + len(token) :].strip()})))
                    break
            else:
                if any(c in part for c in "() "):
                    raise errors.bad_request(f"unable to parse requirement: invalid syntax {part!r}")
                reqs.append(Requirement(_check_key(part, text), "exists", frozenset()))
    return reqs


def label_predicate(text: str | None) -> Predicate | None:
    """A predicate for ``?labelSelector=``; None when it selects everything."""
    if not text:
        return None
    reqs = parse_label_selector(text)
    return _all(reqs) if reqs else None


_OPS = {"In": "in", "NotIn": "notin", "Exists": "exists", "DoesNotExist": "!"}


def selector_object_predicate(selector: Any) -> Predicate:
    """A ``metav1.LabelSelector`` (``matchLabels``/``matchExpressions``); null or ``{}`` selects all."""
    if not isinstance(selector, dict):
        return lambda obj: True
    reqs: list[Requirement] = []
    match_labels = selector.get("matchLabels")
    if isinstance(match_labels, dict):
        reqs.extend(Requirement(str(k), "=", frozenset({str(v)})) for k, v in match_labels.items())
    for expr in selector.get("matchExpressions") or []:
        if not isinstance(expr, dict):
            continue
        op = _OPS.get(str(expr.get("operator")))
        if op is None:
            # An operator the apiserver would have rejected: select nothing rather than everything.
            return lambda obj: False
        values = expr.get("values") or []
        reqs.append(Requirement(str(expr.get("key")), op, frozenset(str(v) for v in values)))
    return _all(reqs)


def labels_match(selector: Any, labels: Mapping[str, Any]) -> bool:
    return selector_object_predicate(selector)({"metadata": {"labels": dict(labels)}})


# --- field selectors -----------------------------------------------------------------------------


def _split_unescaped(text: str, sep: str) -> list[str]:
    out, cur, esc = [], [], False
    for ch in text:
        if esc:
            cur.append(ch)
            esc = False
        elif ch == "\\":
            cur.append(ch)
            esc = True
        elif ch == sep:
            out.append("".join(cur))
            cur = []
        else:
            cur.append(ch)
    out.append("".join(cur))
    return out


def _unescape(text: str) -> str:
    out, esc = [], False
    for ch in text:
        if esc:
            out.append(ch)
            esc = False
        elif ch == "\\":
            esc = True
        else:
            out.append(ch)
    return "".join(out)


def field_value(obj: Obj, path: str) -> str:
    """A field label's value as the apiserver's field set renders it (absent is the empty string)."""
    cur: Any = obj
    for part in path.split("."):
        cur = cur.get(part) if isinstance(cur, dict) else None
    if cur is None:
        return ""
    if isinstance(cur, bool):
        return "true" if cur else "false"
    return str(cur)


def field_predicate(text: str | None, resource_key: str) -> Predicate | None:
    """A predicate for ``?fieldSelector=``; 400 for a syntax error or an unsupported field label."""
    if not text:
        return None
    allowed = _FIELDS_ALL | FIELD_LABELS.get(resource_key, frozenset())
    terms: list[tuple[str, bool, str]] = []
    for raw in _split_unescaped(text, ","):
        if not raw:
            continue
        for token, neg in (("!=", True), ("==", False), ("=", False)):
            idx = raw.find(token)
            if idx >= 0:
                field, value, negated = raw[:idx].strip(), _unescape(raw[idx + len(token) :]), neg
                break
        else:
            raise errors.bad_request(f"invalid selector: '{text}'; can't understand '{raw}'")
        if field not in allowed:
            raise errors.bad_request(f"field label not supported: {field}")
        terms.append((field, negated, value))
    if not terms:
        return None

    def pred(obj: Obj) -> bool:
        return all((field_value(obj, f) != v) if neg else (field_value(obj, f) == v) for f, neg, v in terms)

    return pred


def combine(*preds: Predicate | None) -> Predicate | None:
    active = [p for p in preds if p is not None]
    if not active:
        return None
    if len(active) == 1:
        return active[0]
    return lambda obj: all(p(obj) for p in active)
