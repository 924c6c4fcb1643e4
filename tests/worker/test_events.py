"""Events are rate limited: the same message for the same pod at most once per interval."""

from webhook.kube.client import KubeClient
from webhook.worker.events import EventRecorder, unschedulable_patch


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


def test_global_rate_limit() -> None:
    rec = EventRecorder(
        client=KubeClient(None),
        component="draxr",
        instance="x",
        qps=1,
        burst=3,
        clock=lambda: 0.0,
    )
    allowed = [rec.allow(f"pod-{i}", "Scheduled", "ok") for i in range(5)]
    assert allowed == [True, True, True, False, False]


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
