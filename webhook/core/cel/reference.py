"""The ``cel-python`` backend: celpy with this package's environment, the reference semantics."""

from __future__ import annotations

from collections.abc import Sequence
from typing import cast

from celpy.evaluation import Activation

from .environment import CompiledExpression, compile_expression
from .errors import CelRuntimeError
from .evaluator import evaluate, prepare_activation
from .releases import SCHEDULER, CelEnvironment
from .values import CelDevice, device_value


class ReferenceBackend:
    """Programs are :class:`CompiledExpression` trees, prepared devices celpy activations."""

    name = "cel-python"
    cache_prepared = True  # a celpy activation per device: far dearer than a cache lookup

    def compile(self, expression: str, env: CelEnvironment = SCHEDULER) -> CompiledExpression:
        return compile_expression(expression, env)

    def prepare(self, device: CelDevice) -> Activation:
        return prepare_activation(device_value(device))

    def evaluate(self, program: object, prepared: object) -> bool:
        # No isinstance checks on the hot path (celpy's Activation is slow to test).
        return evaluate(cast(CompiledExpression, program), cast(Activation, prepared))

    def evaluate_many(self, program: object, prepared: Sequence[object]) -> list[bool | CelRuntimeError]:
        tree = cast(CompiledExpression, program)
        out: list[bool | CelRuntimeError] = []
        for values in prepared:
            try:
                out.append(evaluate(tree, cast(Activation, values)))
            except CelRuntimeError as e:
                out.append(e)
        return out

    def stats(self) -> dict[str, int]:
        return {}
