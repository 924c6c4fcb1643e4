"""Resuming an interrupted binding cycle (draxr's, upstream has none): an allocated special claim the
worker wrote is continued only while its devices are still what the allocator would give the pod
(issue 20: "Resume trusts old devices"); otherwise it is stale and PostFilter starts over, as
upstream does with any special claim from an earlier cycle."""

from __future__ import annotations

import pytest

from tests.core.harness import state_of
from tests.core.podfactory import container, device, device_class, gpus, node, pod, resource_slice
from webhook.core.allocation.claims import as_obj, special_claim_after_prebind
from webhook.core.api.constants import WRITER_ANNOTATION
from webhook.core.api.objects import Obj
from webhook.core.cluster.state import ClusterState
from webhook.core.scheduling.framework import SCHEDULED, UNSCHEDULABLE
from webhook.core.scheduling.scheduler import Scheduler

GPU = "example.com/gpu"
CLASS = device_class("gpu.example.com", ext=GPU, selectors=['device.driver == "gpu.example.com"'])


def interrupted() -> tuple[ClusterState, Obj, Obj]:
    """A pod whose PreBind wrote its special claim (allocated on n, gpu-0) and then stopped."""
    st = state_of(node("n", {GPU: 0}), CLASS, resource_slice("s", gpus(2), node_name="n"))
    p = pod("p", [container("c", {GPU: 1})])
    s = Scheduler(st, writer="draxr")
    d = s.schedule(p)
    assert d.status == SCHEDULED
    assert d.special is not None
    c = as_obj(special_claim_after_prebind(p, d.requests, d.special, "p-extended-resources-abcde"))
    c["metadata"]["uid"] = "claim-uid"
    c["metadata"]["annotations"][WRITER_ANNOTATION] = "draxr"
    st.apply("ResourceClaim", c)
    return st, p, c


def test_a_claim_whose_devices_are_still_good_is_resumed() -> None:
    st, p, c = interrupted()
    d = Scheduler(st, writer="draxr").schedule(p)
    assert (d.status, d.resumed) == (SCHEDULED, c)


def taint(st: ClusterState) -> None:
    sl = resource_slice("s", gpus(2), node_name="n")
    sl["spec"]["devices"][0]["taints"] = [{"key": "broken", "effect": "NoSchedule"}]
    st.apply("ResourceSlice", sl)


def vanish(st: ClusterState) -> None:
    st.apply("ResourceSlice", resource_slice("s", [device("gpu-1", {"index": {"int": 1}})], node_name="n"))


def reselect(st: ClusterState) -> None:
    st.apply(
        "DeviceClass",
        device_class(
            "gpu.example.com", ext=GPU, selectors=["device.attributes['gpu.example.com'].index == 1"]
        ),
    )


def incomplete(st: ClusterState) -> None:
    st.apply("ResourceSlice", resource_slice("s", gpus(2), node_name="n", count=2))


@pytest.mark.parametrize("change", [taint, vanish, reselect, incomplete])
def test_a_claim_whose_devices_changed_is_not_resumed_but_started_over(change: object) -> None:
    st, p, c = interrupted()
    assert callable(change)
    change(st)
    d = Scheduler(st, writer="draxr").schedule(p)
    assert d.resumed is None
    # The claim is stale now: PostFilter deletes it and the pod is scheduled afresh.
    assert d.status == UNSCHEDULABLE
    assert d.stale_claim is not None
    assert d.stale_claim["metadata"]["name"] == c["metadata"]["name"]


def test_a_claim_whose_pool_moved_on_is_not_resumed() -> None:
    """A newer generation of the pool no longer publishes the device: the old slice is ignored."""
    st, p, _ = interrupted()
    pool = resource_slice("s", gpus(2), node_name="n")["spec"]["pool"]["name"]
    st.apply(
        "ResourceSlice", resource_slice("s2", gpus(2, prefix="new"), node_name="n", pool=pool, generation=2)
    )
    assert Scheduler(st, writer="draxr").schedule(p).resumed is None
