"""``make demo`` (``python -m e2e.demo``): the KEP-5004 example end to end on the emulator, with the
gate on (the native path) and off (the rewrite); its flags and failures end in one line."""

from __future__ import annotations

import argparse
import io
import subprocess
import sys
from pathlib import Path

import pytest

from . import demo

ROOT = Path(__file__).resolve().parents[1]


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
    assert "resourceclaim controller" not in out  # the native path needs no claims from templates
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
    # The emulator runs no kube-controller-manager: the demo makes the claims and says so.
    assert (
        "      made 4 ResourceClaims from draxr's templates for the rewritten pods, as "
        "kube-controller-manager's resourceclaim controller would (the emulator runs none)\n" in out
    )
    assert "[6/6] every pod is bound" in out
    assert "Special ResourceClaims" not in out
    claims = out.split("ResourceClaims of the rewritten pods")[1].split("Rewritten containers")[0]
    rows = [line for line in claims.splitlines() if "Pod/demo-" in line]
    assert len(rows) == 4
    assert all("devices: 1 x gpu.example.com" in r and "gpu-" in r for r in rows)
    assert "demo-0/app: draxr-container-0-request-1/devices" in out
    assert "extendedResourceClaimStatus" not in out  # the apiserver keeps no such field


BAD_FLAGS = [
    (["--timeout", "-1"], "--timeout: must be a positive number, not -1"),
    (["--timeout", "0"], "--timeout: must be a positive number, not 0"),
    (["--timeout", "soon"], "--timeout: must be a number, not 'soon'"),
    (["--timeout"], "--timeout: expected one argument"),
    (["--gate", "maybe"], "--gate: invalid choice: 'maybe'"),
]


@pytest.mark.parametrize(("argv", "reason"), BAD_FLAGS, ids=[" ".join(a) for a, _ in BAD_FLAGS])
def test_a_bad_flag_or_value_fails_in_one_line(
    argv: list[str], reason: str, capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(SystemExit) as exit_:
        demo.main(argv)
    assert exit_.value.code == 2
    err = capsys.readouterr().err.splitlines()
    assert len(err) == 1, err
    assert err[0].startswith(f"python -m e2e.demo: error: {reason}")


def test_through_a_subprocess_one_line_and_exit_2() -> None:
    done = subprocess.run(
        [sys.executable, "-m", "e2e.demo", "--timeout", "-1"],
        capture_output=True,
        text=True,
        timeout=60,
        cwd=ROOT,
        check=False,
    )
    assert done.returncode == 2
    assert done.stdout == ""
    assert done.stderr.splitlines() == [
        "python -m e2e.demo: error: --timeout: must be a positive number, not -1"
    ]


def test_an_unhandled_failure_is_one_line_not_a_traceback(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    def broken(_args: argparse.Namespace, *_rest: object) -> int:
        raise KeyError("allocation")

    monkeypatch.setattr(demo, "run", broken)
    assert demo.main(["--timeout", "5"]) == 1
    assert capsys.readouterr().err.splitlines() == ["python -m e2e.demo: error: KeyError: 'allocation'"]


def test_demo_cut_short_reports_without_a_traceback(capsys: pytest.CaptureFixture[str]) -> None:
    # The reproduction: claims not yet allocated when the timeout ends the wait.
    code = demo.main(["--timeout", "0.02"])
    captured = capsys.readouterr()
    assert code == 1
    assert captured.err == ""
    assert "[6/6] gave up waiting" in captured.out
    assert captured.out.rstrip().endswith("(not every pod was bound)")  # the report ran to its end


class _Listing:
    """What ``demo._report`` reads from the emulator: a pod whose claim is not allocated yet."""

    def list(self, resource: str, namespace: str | None = None) -> list[dict[str, object]]:
        del namespace
        mapping = {
            "resourceClaimName": "p-claim",
            "requestMappings": [
                {"containerName": "c", "resourceName": "example.com/gpu", "requestName": "r"}
            ],
        }
        claim = {
            "metadata": {"name": "p-claim", "ownerReferences": [{"name": "p"}]},
            "spec": {"devices": {"requests": [{"name": "r", "exactly": {"deviceClassName": "gpu"}}]}},
            "status": {},
        }
        pod = {"metadata": {"name": "p"}, "spec": {}, "status": {"extendedResourceClaimStatus": mapping}}
        return {"pods": [pod], "resourceclaims": [claim], "resourceslices": [], "nodes": []}[resource]


def test_demo_report_of_a_claim_without_allocation() -> None:
    # KeyError: 'allocation' when --timeout ended the wait between the claim and its allocation.
    out = io.StringIO()
    demo._report(_Listing(), out)
    text = out.getvalue()
    assert "  p    <pending>  allocating\n" in text
    assert "  p-claim  Pod/p  r: 1 x gpu  -          -\n" in text
