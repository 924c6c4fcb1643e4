"""The API server's selector checks as field errors (``core.cel.selectorcheck``)."""

from __future__ import annotations

from tests.core.cel.cases import TOO_COMPLEX
from webhook.core.api.objects import Obj
from webhook.core.cel import SelectorEngine
from webhook.core.cel.selectorcheck import over_cost_limit, selector_errors


def _class(*expressions: object) -> Obj:
    return {
        "kind": "DeviceClass",
        "metadata": {"name": "gpu"},
        "spec": {"selectors": [{"cel": {"expression": e}} for e in expressions]},
    }


def test_without_an_engine_only_the_cost_limit_is_checked() -> None:
    obj = _class("device.driver ==", TOO_COMPLEX)
    [cost] = selector_errors(obj)
    assert (cost.field, cost.type, cost.detail) == (
        "spec.selectors[1].cel.expression",
        "FieldValueForbidden",
        "too complex, exceeds cost limit",
    )
    compiled, _ = selector_errors(obj, SelectorEngine())
    assert compiled.field == "spec.selectors[0].cel.expression"
    assert compiled.type == "FieldValueInvalid"


def test_an_update_keeping_the_selectors_is_not_checked_again() -> None:
    obj = _class(TOO_COMPLEX)
    assert selector_errors(obj, old=_class(TOO_COMPLEX)) == []
    assert len(selector_errors(obj, old=_class("true"))) == 1


def test_what_does_not_compile_is_never_over_the_limit() -> None:
    assert over_cost_limit(TOO_COMPLEX)
    assert not over_cost_limit("device.driver ==")
    assert not over_cost_limit(["a list", "from YAML"])
    assert not over_cost_limit(None)
