"""CEL ``matchConditions`` (variables ``object``, ``oldObject``, ``request``) evaluated with celpy.

Programs are compiled once per expression text. The outcome follows the apiserver: any condition
false skips the webhook, all true calls it, and an error with no false leaves it to failurePolicy.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from dataclasses import dataclass
from typing import Any

import celpy
from celpy import celtypes
from celpy.adapter import json_to_cel

from .attributes import Attributes

_CACHE_SIZE = 512


class ConditionError(Exception):
    """A matchCondition failed to compile or evaluate, or did not return a bool."""


@dataclass(frozen=True, slots=True)
class Outcome:
    matched: bool
    error: str = ""


class ConditionEvaluator:
    """Compiled-program cache plus evaluation; safe to share between threads."""

    def __init__(self) -> None:
        self._env = celpy.Environment()
        self._programs: OrderedDict[str, Any] = OrderedDict()
        self._lock = threading.Lock()

    def _program(self, expression: str) -> Any:
        with self._lock:
            prog = self._programs.get(expression)
            if prog is not None:
                self._programs.move_to_end(expression)
                return prog
        try:
            prog = self._env.program(self._env.compile(expression))
        except Exception as exc:  # celpy raises CELParseError and assorted errors from its parser
            raise ConditionError(f"compilation failed: {exc}") from None
        with self._lock:
            self._programs[expression] = prog
            if len(self._programs) > _CACHE_SIZE:
                self._programs.popitem(last=False)
        return prog

    @staticmethod
    def activation(attrs: Attributes) -> dict[str, Any]:
        return {
            "object": json_to_cel(attrs.obj),
            "oldObject": json_to_cel(attrs.old),
            "request": json_to_cel(attrs.request(with_objects=False)),
        }

    def evaluate(self, conditions: Any, activation: dict[str, Any]) -> Outcome:
        """All conditions of one webhook against one request's activation; errors worded and joined
        as upstream's CEL filter and ``utilerrors.NewAggregate`` do."""
        if not isinstance(conditions, list) or not conditions:
            return Outcome(True)
        errors: list[str] = []
        for cond in conditions:
            expression = cond.get("expression") if isinstance(cond, dict) else None
            try:
                if not isinstance(expression, str):
                    raise ConditionError("expression must be a string")
                result = self._program(expression).evaluate(activation)
                if isinstance(result, Exception):
                    raise ConditionError(str(result))
                if not isinstance(result, celtypes.BoolType | bool):
                    raise ConditionError(f"must evaluate to bool, got {type(result).__name__}")
            except Exception as exc:  # ConditionError, celpy's CELEvalError, errors of its built-ins
                errors.append(f"expression '{expression}' resulted in error: {exc}")
                continue
            if not result:
                return Outcome(False)
        if errors:
            return Outcome(False, errors[0] if len(errors) == 1 else "[" + ", ".join(errors) + "]")
        return Outcome(True)
