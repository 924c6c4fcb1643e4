"""The API server's checks of selector expressions, as field errors: compile errors and the cost.

``pkg/apis/resource/validation`` compiles each new selector of a DeviceClass, ResourceClaim or
ResourceClaimTemplate: a compile error is ``Invalid`` with the compiler's words, and an estimated
cost over ``CELSelectorExpressionMaxCost`` is ``Forbidden: too complex, exceeds cost limit``
(:mod:`.estimate`), both at ``<selectors>[i].cel.expression``. A DeviceClass update that keeps its
selectors exactly as they were is not checked again (upstream treats them as stored).
"""

from __future__ import annotations

import functools
from typing import Any

from ..api.fielderrors import FieldError, forbidden, invalid
from ..api.fielderrors import Path as FieldPath
from ..api.objects import Obj, as_dict, as_list
from .engine import SelectorEngine
from .environment import compile_expression
from .errors import CelCompileError
from .estimate import COST_LIMIT_DETAIL, exceeds_limit


def selector_expressions(obj: Obj) -> list[tuple[FieldPath, Any]]:
    """(field path, expression) of every CEL selector of a DeviceClass, ResourceClaim or
    ResourceClaimTemplate, in any resource.k8s.io version (as the input wrote it)."""
    kind = obj.get("kind")
    root = FieldPath("spec")
    if kind == "DeviceClass":
        return _selectors(as_dict(obj.get("spec")).get("selectors"), root.child("selectors"))
    body = as_dict(obj.get("spec"))
    if kind == "ResourceClaimTemplate":
        body, root = as_dict(body.get("spec")), root.child("spec")
    elif kind != "ResourceClaim":
        return []
    out: list[tuple[FieldPath, Any]] = []
    requests = root.child("devices", "requests")
    for i, request in enumerate(as_list(as_dict(body.get("devices")).get("requests"))):
        request = as_dict(request)
        at = requests.index(i)
        out += _selectors(request.get("selectors"), at.child("selectors"))  # v1beta1
        out += _selectors(as_dict(request.get("exactly")).get("selectors"), at.child("exactly", "selectors"))
        for k, sub in enumerate(as_list(request.get("firstAvailable"))):
            out += _selectors(
                as_dict(sub).get("selectors"), at.child("firstAvailable").index(k).child("selectors")
            )
    return out


def _selectors(value: Any, path: FieldPath) -> list[tuple[FieldPath, Any]]:
    return [
        (path.index(i).child("cel", "expression"), as_dict(as_dict(sel).get("cel")).get("expression"))
        for i, sel in enumerate(as_list(value))
        if "expression" in as_dict(as_dict(sel).get("cel"))
    ]


def selector_errors(
    obj: Obj, engine: SelectorEngine | None = None, old: Obj | None = None
) -> list[FieldError]:
    """The API server's findings on ``obj``'s selectors; ``old`` (an UPDATE's stored object)
    exempts a DeviceClass whose selectors did not change. With ``engine`` a selector it cannot
    compile is an error; without, only the cost limit is checked (the admission webhook: the API
    server has compiled them already, and where draxr's compiler is stricter than upstream's, the
    allocator reports it instead)."""
    if old is not None and obj.get("kind") == "DeviceClass" and _same_selectors(obj, old):
        return []
    out: list[FieldError] = []
    for path, expression in selector_expressions(obj):
        if engine is not None:
            try:
                engine.compile(expression)
            except CelCompileError as e:
                out.append(invalid(path, expression, e.message))
                continue
        if over_cost_limit(expression):
            out.append(forbidden(path, COST_LIMIT_DETAIL))
    return out


def _same_selectors(new: Obj, old: Obj) -> bool:
    return as_dict(new.get("spec")).get("selectors") == as_dict(old.get("spec")).get("selectors")


def over_cost_limit(expression: object) -> bool:
    """Whether upstream's estimate of a selector that compiles passes the cost limit (False for one
    that does not compile, a non-string included: that is the compiler's finding)."""
    return isinstance(expression, str) and _over_cost_limit(expression)


@functools.lru_cache(maxsize=4096)
def _over_cost_limit(expression: str) -> bool:
    """A pure function of the text: each expression is parsed and estimated once, however often a
    class with it is reviewed."""
    try:
        return exceeds_limit(compile_expression(expression))
    except CelCompileError:
        return False
