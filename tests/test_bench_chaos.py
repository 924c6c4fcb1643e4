"""``bench/chaos.py`` (a benchmark, no module of the package: so here, not in a mirror): its watch
sees what it must count (a device in two claims, a claim freed under a running pod, devices of
pods that are gone), and not a pod that is merely gone; its options refuse a shape whose pods could
not all bind."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from bench.chaos import Watch, main
from bench.common import held_by_absent
from e2e.emulator import Emulator
from webhook.core.api.objects import Obj


@pytest.fixture
def em() -> Iterator[Emulator]:
    with Emulator() as e:
        yield e


def _claim(em: Emulator, name: str, device: str | None, reserved_for: Obj | None = None) -> Obj:
    owner = [{"apiVersion": "v1", "kind": "Pod", "name": "x", "uid": f"uid-{name}", "controller": True}]
    claim = em.create(
        "resourceclaims",
        {
            "metadata": {"name": name, "namespace": "default", "ownerReferences": owner},
            "spec": {"devices": {"requests": [{"name": "r", "exactly": {"deviceClassName": "gpu"}}]}},
        },
    )
    if device is not None:
        result = {"request": "r", "driver": "gpu.example.com", "pool": "n0", "device": device}
        claim["status"] = {"allocation": {"devices": {"results": [result]}}}
        if reserved_for is not None:
            uid = reserved_for["metadata"]["uid"]
            claim["status"]["reservedFor"] = [{"resource": "pods", "name": "p", "uid": uid}]
        claim = em.update_status("resourceclaims", claim)
    return claim


GPU_CONTAINER = {"name": "c", "image": "x", "resources": {"requests": {"example.com/gpu": "1"}}}


def _bound_pod(em: Emulator, name: str, claim_name: str) -> Obj:
    em.create(
        "pods",
        {
            "metadata": {"name": name, "namespace": "default"},
            "spec": {"containers": [GPU_CONTAINER]},
        },
    )
    em.bind(name, "n0", "default")
    pod = em.get("pods", name, "default")
    pod["status"]["extendedResourceClaimStatus"] = {
        "resourceClaimName": claim_name,
        "requestMappings": [{"containerName": "c", "resourceName": "example.com/gpu", "requestName": "r"}],
    }
    return em.update_status("pods", pod)


def test_a_device_in_two_claims_is_counted_once(em: Emulator) -> None:
    _claim(em, "a", "gpu-0")
    _claim(em, "b", "gpu-1")
    watch = Watch(em)
    watch.sample()
    assert watch.doubled == set()
    _claim(em, "c", "gpu-0")
    watch.sample()
    watch.sample()
    assert watch.doubled == {("gpu.example.com", "n0", "gpu-0")}


def test_a_running_pod_whose_claim_is_gone_or_not_reserved_for_it_is_counted(em: Emulator) -> None:
    held = _bound_pod(em, "held", "held-claim")
    _claim(em, "held-claim", "gpu-0", reserved_for=held)
    _bound_pod(em, "orphaned", "missing-claim")
    _bound_pod(em, "unreserved", "unreserved-claim")
    _claim(em, "unreserved-claim", "gpu-1")
    watch = Watch(em)
    watch.sample()
    names = {claim for _, claim in watch.freed_under_running}
    assert names == {"missing-claim", "unreserved-claim"}


def test_devices_of_pods_that_are_gone_are_counted(em: Emulator) -> None:
    assert held_by_absent(em) == 0
    _claim(em, "left-behind", "gpu-0")
    _claim(em, "never-allocated", None)
    assert held_by_absent(em) == 1


def test_more_pods_than_gpus_is_refused_with_a_usage_error(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as done:
        main(["--nodes", "1", "--devices", "2", "--replicas", "2", "--churn", "1"])
    assert done.value.code == 2
    assert "must not exceed the GPUs" in capsys.readouterr().err
