"""Which Filter reasons preemption cannot resolve: upstream's UnschedulableAndUnresolvable statuses
(1.37.2), each named with its source. The parity harness (bench/parity.py) found the volume plugins'
missing: draxr tried a dry run on nodes kube-scheduler calls "Preemption is not helpful"."""

from __future__ import annotations

import pytest

from webhook.core.scheduling.plugins import nodeaffinity, nodeunschedulable, tainttoleration, volumezone
from webhook.core.scheduling.plugins.defaultpreemption.unresolvable import unresolvable
from webhook.core.scheduling.plugins.volumebinding import binder


@pytest.mark.parametrize(
    "reason",
    [
        nodeunschedulable.REASON,  # node_unschedulable.go
        nodeaffinity.REASON,  # node_affinity.go
        tainttoleration.REASON,  # taint_toleration.go
        binder.NODE_CONFLICT,  # volume_binding.go Filter: every FindPodVolumes reason
        binder.BIND_CONFLICT,
        binder.NOT_ENOUGH_SPACE,
        binder.PV_NOT_EXIST,
        volumezone.CONFLICT,  # volume_zone.go
    ],
)
def test_upstreams_unresolvable_reasons(reason: str) -> None:
    assert unresolvable([reason])
    assert unresolvable(["Insufficient cpu", reason])


@pytest.mark.parametrize(
    "reason",
    [
        "Insufficient cpu",  # NodeResourcesFit: Unschedulable
        "node(s) didn't match pod anti-affinity rules",  # InterPodAffinity: Unschedulable
        "node(s) didn't match pod topology spread constraints",  # PodTopologySpread: Unschedulable
        "node(s) exceed max volume count",  # NodeVolumeLimits: Unschedulable
    ],
)
def test_reasons_removing_pods_may_resolve(reason: str) -> None:
    assert not unresolvable([reason])
