"""``draxr demo``: the KEP-5004 example end to end on the emulator, with the gate on (the native
path) and off (the rewrite), as ``make demo`` runs it."""

from __future__ import annotations

import argparse
import io

from webhook.commands import demo


def run_demo(gate: str) -> tuple[int, str]:
    out, err = io.StringIO(), io.StringIO()
    code = demo.run(argparse.Namespace(timeout=60.0, gate=gate), out, err)
    assert err.getvalue() == ""
    return code, out.getvalue()


def test_the_kep_example_with_the_gate_on_takes_the_native_path() -> None:
    code, out = run_demo("on")
    assert code == 0
    assert "Kubernetes 1.36.3 cluster, DRAExtendedResource on" in out
    assert "[4/6] draxr detected mode native: apiserver DRAExtendedResource: on (probe)" in out
    assert "routed 4 to schedulerName=draxr" in out
    assert "rewrote" not in out
    assert "[6/6] every pod is bound" in out
    assert "Special ResourceClaims" in out
    assert "Pods' status.extendedResourceClaimStatus:" in out
    assert "ResourceClaims of the rewritten pods" not in out


def test_the_kep_example_with_the_gate_off_is_rewritten_and_bound() -> None:
    code, out = run_demo("off")
    assert code == 0
    assert "Kubernetes 1.35.4 cluster, DRAExtendedResource off" in out
    assert "[4/6] draxr detected mode rewrite: apiserver DRAExtendedResource: off (probe)" in out
    assert "rewrote 4 into DRA claims and routed 4 to schedulerName=draxr" in out
    assert "[6/6] every pod is bound" in out
    assert "Special ResourceClaims" not in out
    claims = out.split("ResourceClaims of the rewritten pods")[1].split("Rewritten containers")[0]
    rows = [line for line in claims.splitlines() if "Pod/demo-" in line]
    assert len(rows) == 4
    assert all("devices: 1 x gpu.example.com" in r and "gpu-" in r for r in rows)
    assert "demo-0/app: draxr-container-0-request-1/devices" in out
    assert "extendedResourceClaimStatus" not in out  # the apiserver keeps no such field
