"""``worker.bindingcycle``: the line a failed binding logs (its PreBind and Bind writes are in
test_binder, Unreserve end to end in test_resilience)."""

from __future__ import annotations

import logging

import pytest

from tests.worker.harness import GPU, Cluster, device_class, gpu_slice, node
from tests.worker.workers import log_lines


def test_a_failed_binding_is_one_line_with_its_reason(
    kube: Cluster, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, logger="draxr")
    kube.apply(node("n"), device_class(), gpu_slice("n", 1))
    kube.em.inject(verbs="create", resource="pods/binding", error=403, message="nope", times=1)
    kube.worker()
    kube.pod("p", {GPU: 1})
    kube.em.wait_for(lambda: log_lines(caplog, "bound"), 10, "bound by the retry after the failure")
    [failed] = log_lines(caplog, "binding failed")
    assert failed["pod"] == "default/p"
    assert failed["node"] == "n"
    assert failed["devices"] == ["gpu.example.com/n-gpu/gpu-0"]
    assert failed["reason"] == "binding rejected: nope"
