"""``webhook.core.cel.rustvalues``: what crosses into Rust comes back as the reference's value, and a
device's flat variables read what the device holds."""

from __future__ import annotations

from typing import Any

import pytest

from webhook.core.api.quantity import Quantity
from webhook.core.api.semver import Semver
from webhook.core.cel import SimpleDevice
from webhook.core.cel.rustvalues import (
    MISSING,
    TAG_QUANTITY,
    TAG_SEMVER,
    Input,
    decode,
    encode,
    reader,
    validate,
)

GPU = "gpu.example.com"
#: Pure functions of the values: one run (the cel-rust pass) is enough.
pytestmark = pytest.mark.both_engines


@pytest.mark.parametrize(
    "value",
    [
        Quantity.parse("1536Mi"),
        Quantity.parse("0.5"),
        Semver.parse("1.2.3-rc.1"),
        ["a", 7, True, Quantity.parse("2")],
        {"k": Semver.parse("10.0.0"), "n": [1.5, b"x"]},
    ],
)
def test_encoded_values_decode_to_the_reference_values(value: Any) -> None:
    assert decode(encode(value)) == value


def test_quantities_and_versions_travel_as_canonical_text() -> None:
    assert encode(Quantity.parse("1Gi")) == encode(Quantity.parse("1024Mi")) == {TAG_QUANTITY: "1073741824/1"}
    assert encode(Semver.parse("1.2.3-rc.1")) == {TAG_SEMVER: "1.2.3-rc.1"}
    with pytest.raises(TypeError, match="cannot pass object to the Rust engine"):
        encode(object())


def test_readers_read_the_flat_variables_of_a_device() -> None:
    device = validate(
        SimpleDevice(
            GPU, {f"{GPU}/model": ("string", "a100"), f"{GPU}/version": ("version", Semver.parse("2.0.0"))}
        )
    )
    assert reader(Input("driver"))(device) == (GPU, GPU)
    assert reader(Input("value", "attributes", GPU, "model"))(device) == (("string", "a100"), "a100")
    assert reader(Input("value", "attributes", GPU, "version"))(device)[1] == {TAG_SEMVER: "2.0.0"}
    assert reader(Input("value", "attributes", GPU, "absent"))(device) == (MISSING, MISSING)
    assert reader(Input("has", "attributes", GPU, "model"))(device) == (True, True)
    assert reader(Input("has_domain", "attributes", "other.example.com"))(device) == (False, False)
