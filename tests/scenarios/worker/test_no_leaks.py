"""No device is held by a pod that is gone: repair at start and on leadership, release from watch
events, leftovers of failed cycles removed, and the worker's own writes never refused by draxr's
own hooks. The periodic orphan pass stays at its production interval (60 s) in every test here,
so nothing below passes because of it."""

from __future__ import annotations

import time
from typing import Any

import pytest

from tests.worker.harness import Cluster, device_class, gpu_slice, node
from webhook.core.api.constants import EXTENDED_RESOURCE_CLAIM_ANNOTATION, WRITER_ANNOTATION
from webhook.core.api.objects import Obj
from webhook.kube.resources import BY_PLURAL

#: A replacement pod binds within this many seconds of a worker start (the issue's bound).
BIND_AFTER_START = 5.0


def _claims_of_absent_pods(kube: Cluster) -> list[str]:
    pods = {p["metadata"]["uid"] for p in kube.pods()}
    return [
        c["metadata"]["name"] for c in kube.claims() if c["metadata"]["ownerReferences"][0]["uid"] not in pods
    ]


def _held_by_absent_pods(kube: Cluster) -> list[str]:
    """Devices in special claims whose owner pod no longer exists."""
    pods = {p["metadata"]["uid"] for p in kube.pods()}
    held = []
    for c in kube.claims():
        owner = c["metadata"]["ownerReferences"][0]["uid"]
        results = ((c.get("status") or {}).get("allocation") or {}).get("devices", {}).get("results", [])
        if owner not in pods:
            held += [r["device"] for r in results]
    return held


@pytest.mark.timed
def test_claims_of_pods_deleted_while_no_worker_ran_are_repaired_at_start(kube: Cluster) -> None:
    kube.apply(node("n"), device_class(), gpu_slice("n", 2))
    first = kube.worker("first")
    kube.pod("a")
    kube.pod("b")
    kube.wait_bound(2)
    first.kill()
    for p in ("a", "b"):
        kube.em.delete("pods", p, "default")
    kube.em.wait_for(lambda: not kube.pods(), 5)
    assert len(_held_by_absent_pods(kube)) == 2  # the finalizer keeps them: nobody released them
    kube.worker("second")
    started = time.monotonic()
    kube.pod("c")
    kube.pod("d")
    kube.wait_bound(2, timeout=BIND_AFTER_START)
    assert time.monotonic() - started < BIND_AFTER_START
    kube.em.wait_for(lambda: not _held_by_absent_pods(kube), 5, "no device held by an absent pod")
    kube.check_consistent()


def test_leadership_gain_repairs_at_once(kube: Cluster) -> None:
    kube.apply(node("n"), device_class(), gpu_slice("n", 1))
    lease = (1.5, 1.0, 0.2)
    leader = kube.worker("a", leader_elect=True, lease=lease)
    kube.em.wait_for(lambda: kube.em.find("leases", "draxr-worker", "draxr-system"), 10)
    kube.pod("gone")
    kube.wait_bound(1)
    leader.kill()
    kube.em.delete("pods", "gone", "default")
    kube.worker("b", leader_elect=True, lease=lease)
    kube.pod("next")
    assert kube.wait_bound(1, timeout=lease[0] + lease[2] + BIND_AFTER_START) == {"next": "n"}
    kube.check_consistent()


def test_a_claim_whose_pod_is_gone_is_released_from_its_watch_event(kube: Cluster) -> None:
    """A special claim that appears for a pod the cache does not know (restored from a backup,
    written by another scheduler for a pod deleted since) is released when the claim event
    arrives, after the API confirms the pod is gone."""
    kube.apply(node("n"), device_class(), gpu_slice("n", 1))
    kube.worker()
    kube.pod("probe")  # the worker runs and has synced
    kube.wait_bound(1)
    kube.em.delete("pods", "probe", "default")
    kube.em.wait_for(lambda: not kube.claims(), 10)
    orphan: Obj = {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "ResourceClaim",
        "metadata": {
            "name": "orphan",
            "namespace": "default",
            "finalizers": ["resource.kubernetes.io/delete-protection"],
            "ownerReferences": [
                {"apiVersion": "v1", "kind": "Pod", "name": "ghost", "uid": "no-such-uid", "controller": True}
            ],
        },
        "spec": {
            "devices": {
                "requests": [
                    {
                        "name": "container-0-request-0",
                        "exactly": {"deviceClassName": "gpu.example.com", "count": 1},
                    }
                ]
            }
        },
    }
    created = kube.em.create("resourceclaims", orphan)
    created["status"] = {
        "allocation": {
            "devices": {
                "results": [
                    {
                        "request": "container-0-request-0",
                        "driver": "gpu.example.com",
                        "pool": "n-gpu",
                        "device": "gpu-0",
                    }
                ]
            }
        }
    }
    # Allocated before it is a special claim: the worker would release an unallocated orphan
    # between the create and the status write. The annotation then arrives as one watch event.
    allocated = kube.em.update_status("resourceclaims", created)
    allocated["metadata"]["annotations"] = {EXTENDED_RESOURCE_CLAIM_ANNOTATION: "true"}
    kube.em.update("resourceclaims", allocated)
    kube.em.wait_for(lambda: not kube.claims(), 5, "the orphan is released from its event")
    kube.pod("next")
    assert kube.wait_bound(1) == {"next": "n"}


def test_heavy_write_failures_leave_no_special_claim_behind(kube: Cluster) -> None:
    """60% conflicts and 20% server errors on every write: unallocated special claims left by
    failed cycles are reused or removed; after the pods bind only their own claims remain, pods
    that stay pending keep none, and after they leave, none at all."""
    kube.apply(node("n"), device_class(), gpu_slice("n", 4))
    writes = ["create", "update", "patch", "delete"]
    kube.em.inject(verbs=writes, error=409, probability=0.60, message="injected conflict")
    kube.em.inject(verbs=writes, error=500, probability=0.20, message="injected error")
    kube.worker(max_backoff=0.5)
    for i in range(6):
        kube.pod(f"p{i}")
    kube.wait_bound(4, timeout=120)
    failed = [r for r in kube.em.requests() if r.verb in writes and r.code in (409, 500)]
    assert len(failed) > 20  # the faults were hit: many writes were refused and retried
    kube.em.wait_for(
        lambda: len(kube.claims()) == 4, 30, "one special claim per bound pod, none for the rest"
    )
    kube.check_consistent()
    kube.em.clear_faults()
    for i in range(6):
        kube.em.delete("pods", f"p{i}", "default")
    kube.em.wait_for(lambda: not kube.claims(), 15, "no special claim after the pods left")
    assert kube.allocated() == []


@pytest.mark.timed
def test_crash_loop_binds_every_replacement_soon_after_each_start(kube: Cluster) -> None:
    """The worker is killed every round while pods are deleted and created: each round's
    replacement pods bind within 5 s of that round's worker start, and no device stays held by an
    absent pod."""
    kube.apply(node("n"), device_class(), gpu_slice("n", 4))
    latencies: list[float] = []
    alive: list[str] = []
    for round_ in range(6):
        proc = kube.worker(f"w{round_}")
        started = time.monotonic()
        want = [f"r{round_}-{i}" for i in range(4 - len(alive))]
        for name in want:
            kube.pod(name)
        kube.wait_bound(len(alive) + len(want), timeout=BIND_AFTER_START)
        latencies.append(time.monotonic() - started)
        alive += want
        proc.kill()
        # While no worker runs, two pods go away; their devices must come back at the next start.
        for name in alive[:2]:
            kube.em.delete("pods", name, "default")
        alive = alive[2:]
    assert max(latencies) < BIND_AFTER_START, latencies
    kube.worker("last")
    kube.em.wait_for(lambda: not _held_by_absent_pods(kube), BIND_AFTER_START, "nothing held by absent pods")
    kube.em.wait_for(lambda: not _claims_of_absent_pods(kube), 5, "their claims are gone too")
    kube.check_consistent()


def test_unreserve_goes_through_draxrs_own_hooks(tmp_path: Any) -> None:
    """With the webhooks registered (failurePolicy Fail), the worker's Unreserve (finalizer
    removal, claim deletion, clearing the pod's mapping) is never refused by them."""
    from e2e.emulator.sandbox import Sandbox

    with Sandbox(lease=(1.5, 1.0, 0.2)) as box:
        box.serve("worker-0")
        admin = box.em
        admin.create(
            "nodes",
            {"metadata": {"name": "n"}},
        )
        n = admin.get("nodes", "n")
        n["status"] = {
            "allocatable": {"cpu": "8", "memory": "8Gi", "pods": "110"},
            "conditions": [{"type": "Ready", "status": "True"}],
        }
        admin.update_status("nodes", n)
        admin.create("deviceclasses", device_class())
        admin.create("resourceslices", gpu_slice("n", 1))
        rule = admin.inject(verbs="create", resource="pods/binding", error=403, times=1)
        box.dev.create(
            BY_PLURAL["pods"],
            {
                "apiVersion": "v1",
                "kind": "Pod",
                "metadata": {"name": "p"},
                "spec": {
                    "containers": [
                        {"name": "c", "image": "x", "resources": {"limits": {"example.com/gpu": "1"}}}
                    ]
                },
            },
            "default",
        )
        admin.wait_for(lambda: admin.get("pods", "p", "default")["spec"].get("nodeName"), 30, "bound")
        assert rule.hits == 1
        claims = admin.list("resourceclaims", "default")
        assert len(claims) == 1  # the first cycle's claim was deleted through the hooks
        worker = "system:serviceaccount:draxr-system:draxr-worker"
        refused = [
            r
            for r in admin.requests()
            if r.user == worker and r.code in (400, 403, 422) and r.resource != "pods/binding"
        ]
        assert refused == []


def test_a_pending_pod_keeps_no_leftover_claim(kube: Cluster) -> None:
    """A failed cycle may leave an unallocated special claim the worker wrote (its Unreserve could
    not delete it). If the next attempt finds no node, PostFilter removes it: a pending pod holds
    no claim (nor quota for one)."""
    kube.apply(node("n"), device_class())  # no devices at all
    pod = kube.pod("waiting")
    leftover: Obj = {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "ResourceClaim",
        "metadata": {
            "generateName": "waiting-extended-resources-",
            "namespace": "default",
            "annotations": {EXTENDED_RESOURCE_CLAIM_ANNOTATION: "true", WRITER_ANNOTATION: "draxr"},
            "ownerReferences": [
                {
                    "apiVersion": "v1",
                    "kind": "Pod",
                    "name": "waiting",
                    "uid": pod["metadata"]["uid"],
                    "controller": True,
                }
            ],
        },
        "spec": {
            "devices": {
                "requests": [
                    {
                        "name": "container-0-request-0",
                        "exactly": {
                            "deviceClassName": "gpu.example.com",
                            "allocationMode": "ExactCount",
                            "count": 1,
                        },
                    }
                ]
            }
        },
    }
    kube.em.create("resourceclaims", leftover)
    kube.worker()
    kube.em.wait_for(lambda: kube.condition("waiting") is not None, 10)
    kube.em.wait_for(lambda: not kube.claims(), 10, "the leftover claim is removed")
    assert "cannot allocate all claims" in (kube.condition("waiting") or {}).get("message", "")


def test_a_pod_recreated_under_its_name_while_the_watch_was_down_frees_the_old_ones_devices(
    kube: Cluster,
) -> None:
    """A StatefulSet pod deleted and recreated under its name while the pod watch was down: the
    relist (410 Gone) finds the same key with another uid. The old pod left (its special claim is
    released), the new one came (it binds on the one-GPU node)."""
    kube.apply(node("n"), device_class(), gpu_slice("n", 1))
    kube.worker()
    old_uid = kube.pod("web-0")["metadata"]["uid"]
    kube.wait_bound(1)
    blocked = kube.em.inject(verbs="watch", resource="pods", error=503)  # keep the pod watch down
    kube.em.drop_watches(abort=True)
    kube.em.delete("pods", "web-0", "default")
    new_uid = kube.pod("web-0")["metadata"]["uid"]
    kube.em.compact()  # the pod watch's resourceVersion is gone: it relists
    kube.em.faults.remove(blocked)

    def new_pod_bound() -> bool:
        pod = kube.em.get("pods", "web-0", "default")
        return pod["metadata"]["uid"] == new_uid and bool(pod["spec"].get("nodeName"))

    kube.em.wait_for(new_pod_bound, 20, "the new web-0 binds on the only GPU")
    kube.em.wait_for(lambda: not _held_by_absent_pods(kube), 10, "the old web-0's device is free")
    assert old_uid not in {c["metadata"]["ownerReferences"][0]["uid"] for c in kube.claims()}
    kube.check_consistent()
