"""``webhook.core.cel.celrust``: the backend's per-program memo, which steps aside while every device
reads different inputs and never changes an answer."""

from __future__ import annotations

from typing import Any

import pytest

from webhook.core.cel import SimpleDevice
from webhook.core.cel.backend import make_backend
from webhook.core.cel.celrust import MAX_MEMO, UNMEMOISED

RUST = "cel-rust"
GPU = "gpu.example.com"


@pytest.mark.both_engines
def test_the_memo_steps_aside_while_inputs_are_unique_per_device_and_answers_stay_the_same() -> None:
    backend: Any = make_backend(RUST)
    expression = f"device.attributes['{GPU}'].index >= 3"
    unique = backend.compile(expression)
    devices = [
        backend.prepare(SimpleDevice(GPU, {f"{GPU}/index": ("int", i)})) for i in range(MAX_MEMO + 100)
    ]
    assert backend.evaluate_many(unique, devices) == [i >= 3 for i in range(len(devices))]
    assert unique.unmemoised == UNMEMOISED - 99  # a full memo without hits: the next ones skip it
    shared = backend.compile(expression)
    repeated = [devices[i % 8] for i in range(MAX_MEMO + 100)]
    assert backend.evaluate_many(shared, repeated) == [i % 8 >= 3 for i in range(len(repeated))]
    assert shared.unmemoised == 0
    assert len(shared.memo) == 8  # eight distinct inputs, each evaluated once
