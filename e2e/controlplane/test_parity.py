"""The parity harness against kube-scheduler itself (issue 21, ``bench/parity.py``) on five fixed
seeds: 200 pods (three priorities, anti-affinity groups, zone spreads, taints and tolerations, CPUs,
zonal volumes, two GPU models selected by CEL) placed by the real kube-scheduler 1.37, each verdict
matched by draxr's engine on the same state (bound where kube-scheduler's node is feasible for draxr
too, Unschedulable with upstream's message byte for byte, or preempting victims of the same
priorities), then placed by draxr's worker with every binding valid."""

from __future__ import annotations

from pathlib import Path

import pytest

from bench.parity import failures, run_seed

from .launcher import find_binaries
from .test_nodes import require_built

SEEDS = (1, 2, 3, 4, 5)


@pytest.mark.parametrize("seed", SEEDS)
def test_draxr_agrees_with_kube_scheduler(seed: int, tmp_path: Path) -> None:
    require_built(find_binaries("1.37"))
    result = run_seed(seed, nodes=8, pods=40, version="1.37", workdir=tmp_path)
    kube = result["kube-scheduler"]
    assert kube["bound"] + kube["pending"] + kube["preempted"] == 40
    # A step where kube-scheduler also placed or preempted for a retried pod is skipped, not compared.
    assert kube["raced"] <= 4, kube
    assert kube["differences"] == []
    assert kube["invalid"] == []
    assert kube["skewed"] == []
    assert result["draxr"]["invalid"] == []
    # The stream both fits and overflows: bound and Unschedulable verdicts are both compared.
    assert kube["bound"] > 0
    assert kube["pending"] > 0
    assert failures(result) == 0
