"""How ``make e2e-local`` shares the clusters between its pytest-xdist workers (``conftest.py``):
each test id names the cluster group one worker runs whole."""

from __future__ import annotations

import pytest

from .conftest import cluster_group


@pytest.mark.parametrize(
    ("nodeid", "group"),
    [
        ("e2e/test_e2e.py::test_native_path[1.37]", "row-1.37"),
        ("e2e/test_rewrite.py::test_x[1.35-gate-off]", "row-1.35-gate-off"),
        ("e2e/test_rewrite.py::test_x[1.35-gate-on]", "row-1.35-gate-on"),
        ("e2e/test_rewrite.py::test_x[zero-1.36-default]", "row-1.36-default"),
        ("e2e/test_rewrite.py::test_x[1.36-default-zero]", "row-1.36-default"),
        ("e2e/test_rewrite.py::test_x[v1.37.2]", "e2e/test_rewrite.py"),
        ("e2e/test_rewrite.py::test_x[emulator]", "e2e/test_rewrite.py"),
        ("e2e/chartrow/test_operators.py::test_drain", "containerd"),
        ("e2e/test_chart_gate_off.py::test_kep[1.35-gate-off]", "containerd"),
        ("e2e/controlplane/test_realnode.py::test_pods_get_ips", "containerd"),
        ("e2e/controlplane/test_faults.py::test_etcd", "e2e/controlplane/test_faults.py"),
        ("e2e/contract/test_crud.py::test_create[apiserver]", "contract-apiserver"),
        ("e2e/contract/test_crud.py::test_create[emulator]", "e2e/contract/test_crud.py"),
        ("e2e/test_gate_off.py::Suite::test_y[1.34-gate-off]", "row-1.34-gate-off"),
    ],
)
def test_a_test_id_names_its_cluster_group(nodeid: str, group: str) -> None:
    assert cluster_group(nodeid) == group
