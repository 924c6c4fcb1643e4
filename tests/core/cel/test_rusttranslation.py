"""``webhook.core.cel.rusttranslation``: device paths become inputs, and what Rust could answer
differently from the reference is declined."""

from __future__ import annotations

import pytest

from webhook.core.cel.environment import compile_expression
from webhook.core.cel.rusttranslation import Declined, translate
from webhook.core.cel.rustvalues import Input

GPU = "gpu.example.com"
#: The translation is pure: one run (the cel-rust pass) is enough.
pytestmark = pytest.mark.both_engines


def test_device_paths_become_named_inputs() -> None:
    translation = translate(
        compile_expression(f"device.driver == '{GPU}' && device.attributes['{GPU}'].model == 'a100'")
    )
    assert [spec for _, spec in translation.inputs] == [
        Input("driver"),
        Input("value", "attributes", GPU, "model"),
    ]
    for name, _ in translation.inputs:
        assert name.startswith(translation.prefix)
        assert name in translation.source
    assert translation.callbacks == ()


def test_library_functions_are_called_back_unless_constant() -> None:
    called = translate(compile_expression(f"device.capacity['{GPU}'].memory.isGreaterThan(quantity('1Gi'))"))
    assert called.callbacks == ("isGreaterThan",)  # quantity('1Gi') is folded into an encoded literal


@pytest.mark.parametrize(
    ("expression", "reason"),
    [
        (f"device.attributes['{GPU}'].index + 1 == 2", "addition"),  # int64 overflow differs
        (f"-device.attributes['{GPU}'].index < 0", "unary minus"),
        ("1u == 1u", "uint"),
        (f"device.attributes['{GPU}'].model.matches('a.*')", "function matches"),  # RE2 vs Python
        (f"device.attributes['{GPU}'] == {{}}", "map_lit"),
        ("device.driver.size() == 3 && device == device", "device used as a value"),
    ],
)
def test_what_rust_could_answer_differently_is_declined(expression: str, reason: str) -> None:
    with pytest.raises(Declined, match=reason):
        translate(compile_expression(expression))
