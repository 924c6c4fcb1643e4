"""Events are rate limited: the same message for the same pod at most once per interval; the
PodScheduled condition is written to the pod it is about."""

import pytest

from tests.worker.harness import Cluster
from webhook.kube.client import ApiError, KubeClient
from webhook.worker.events import EventRecorder, set_unschedulable, unschedulable_patch


def test_same_event_is_deduplicated_within_the_interval() -> None:
    now = [0.0]
    rec = EventRecorder(
        client=KubeClient(None),
        component="draxr",
        instance="x",
        interval=30,
        qps=5,
        burst=25,
        clock=lambda: now[0],
    )
    assert rec.allow("pod-1", "FailedScheduling", "0/2 nodes are available")
    assert not rec.allow("pod-1", "FailedScheduling", "0/2 nodes are available")
    assert rec.allow("pod-1", "FailedScheduling", "0/3 nodes are available")  # a new message
    assert rec.allow("pod-2", "FailedScheduling", "0/2 nodes are available")  # another pod
    now[0] += 30
    assert rec.allow("pod-1", "FailedScheduling", "0/2 nodes are available")
    assert rec.dropped == 1


def test_every_pod_bound_at_once_gets_its_event() -> None:
    """The spam filter is per object, as client-go's (EventSourceObjectSpamFilter): one global
    bucket of 5/s left 27 Scheduled Events for 1,000 binds (issue 20)."""
    rec = EventRecorder(client=KubeClient(None), component="draxr", instance="x", clock=lambda: 0.0)
    assert all(rec.allow(f"pod-{i}", "Scheduled", "ok") for i in range(1000))
    assert rec.dropped == 0


def test_one_object_gets_a_burst_of_25_events_then_one_every_five_minutes() -> None:
    now = [0.0]
    rec = EventRecorder(client=KubeClient(None), component="draxr", instance="x", clock=lambda: now[0])
    allowed = [rec.allow("pod-1", "FailedScheduling", f"attempt {i}") for i in range(30)]
    assert allowed == [True] * 25 + [False] * 5
    assert rec.allow("pod-2", "FailedScheduling", "attempt 0")  # another object: its own bucket
    now[0] += 299
    assert not rec.allow("pod-1", "FailedScheduling", "attempt 30")
    now[0] += 1
    assert rec.allow("pod-1", "FailedScheduling", "attempt 31")  # dropped events cost no token
    assert not rec.allow("pod-1", "FailedScheduling", "attempt 32")


def test_unschedulable_condition_patch() -> None:
    patch = unschedulable_patch(
        "Unschedulable", "0/1 nodes are available: 1 Insufficient cpu.", "2026-01-01T00:00:00Z"
    )
    (cond,) = patch["status"]["conditions"]
    assert cond == {
        "type": "PodScheduled",
        "status": "False",
        "reason": "Unschedulable",
        "message": "0/1 nodes are available: 1 Insufficient cpu.",
        "lastProbeTime": None,
        "lastTransitionTime": "2026-01-01T00:00:00Z",
    }


def test_scheduled_message_keeps_kube_schedulers_words_and_adds_the_devices() -> None:
    from tests.core.allocation.test_placement import HALF_USED, gpu_pod, gpu_state
    from webhook.core.scheduling.scheduler import Scheduler
    from webhook.worker.events import relaxed_alignment_message, scheduled_message

    d = Scheduler(gpu_state(HALF_USED, [4]), "binpack").schedule(gpu_pod([2]))
    assert scheduled_message(d.pod, d) == (
        "Successfully assigned default/p to n; devices gpus/gpu-5, gpus/gpu-6: container-0 aligned on "
        "resource.kubernetes.io/pcieRoot=r1 (required); binpack fills the fullest "
        "resource.kubernetes.io/pcieRoot group with room: 1 of 2 groups left whole (1 before)"
    )
    assert relaxed_alignment_message(d) is None
    relaxed = Scheduler(gpu_state(HALF_USED, [0, 1, 4, 5]), "binpack").schedule(gpu_pod([4], "preferred"))
    assert relaxed_alignment_message(relaxed) == (
        "draxr.io/align: preferred: no free set of devices on n shares resource.kubernetes.io/pcieRoot for "
        "container-0; placed on devices spanning r0, r1"
    )


def test_the_unschedulable_condition_never_lands_on_a_pod_recreated_under_its_name(kube: Cluster) -> None:
    old = kube.pod("p")
    kube.em.delete("pods", "p", "default")
    kube.pod("p")
    with pytest.raises(ApiError) as refused:
        set_unschedulable(kube.client(), old, "Unschedulable", "0/1 nodes are available")
    assert refused.value.status == 422
    assert kube.condition("p") is None
    assert set_unschedulable(kube.client(), kube.em.get("pods", "p", "default"), "Unschedulable", "x")
    assert (kube.condition("p") or {}).get("reason") == "Unschedulable"
