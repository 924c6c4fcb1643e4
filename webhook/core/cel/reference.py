"""The ``cel-python`` backend: celpy with this package's environment, the reference semantics."""

from __future__ import annotations

from typing import cast

from celpy.evaluation import Activation

from .environment import CompiledExpression, compile_expression
from .evaluator import evaluate, prepare_activation
from .values import CelDevice, device_value


class ReferenceBackend:
    """Programs are :class:`CompiledExpression` trees, prepared devices celpy activations."""

    name = "cel-python"

    def compile(self, expression: str) -> CompiledExpression:
        return compile_expression(expression)

    def prepare(self, device: CelDevice) -> Activation:
        return prepare_activation(device_value(device))

    def evaluate(self, program: object, prepared: object) -> bool:
        # No isinstance checks on the hot path (celpy's Activation is slow to test).
        return evaluate(cast(CompiledExpression, program), cast(Activation, prepared))

    def stats(self) -> dict[str, int]:
        return {}
