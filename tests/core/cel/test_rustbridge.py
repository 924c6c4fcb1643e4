"""``webhook.core.cel.rustbridge``: library functions called back from Rust are the reference's, a
failed one marks the evaluation failed, and the reference's outcome is its verdict or its error."""

from __future__ import annotations

import pytest

from webhook.core.api.quantity import Quantity
from webhook.core.cel import CelRuntimeError, SimpleDevice
from webhook.core.cel.environment import compile_expression
from webhook.core.cel.rustbridge import callback, callback_failed, reference_outcome
from webhook.core.cel.rustvalues import encode, validate

GPU = "gpu.example.com"
#: No Rust is called here: one run (the cel-rust pass) is enough.
pytestmark = pytest.mark.both_engines


def test_a_callback_is_the_reference_function_on_encoded_values() -> None:
    quantity = callback("quantity")
    callback_failed.value = False
    assert quantity("1Gi") == encode(Quantity.parse("1Gi"))
    assert callback_failed.value is False
    assert quantity("one gig") is None  # the reference's function returns a CEL error
    assert callback_failed.value is True


def test_the_reference_outcome_is_its_verdict_or_its_error() -> None:
    compiled = compile_expression(f"device.attributes['{GPU}'].model == 'a100'")
    assert (
        reference_outcome(compiled, validate(SimpleDevice(GPU, {f"{GPU}/model": ("string", "a100")}))) is True
    )
    missing = reference_outcome(compiled, validate(SimpleDevice(GPU, {})))
    assert isinstance(missing, CelRuntimeError)
    assert "model" in missing.message
