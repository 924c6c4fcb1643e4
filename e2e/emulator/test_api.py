"""The Python API: direct store access, waiting, identity, the request log, feature gates switched
under a running server, and kubeconfig."""

from __future__ import annotations

import json
import shutil
import subprocess
import threading
from pathlib import Path
from typing import Any

import pytest
import urllib3
from kubernetes import client, config

from ..contract.support import pod
from . import ApiError, Emulator


def test_direct_access_returns_copies(emulator: Emulator) -> None:
    created = emulator.create("pods", pod("p"))
    created["metadata"]["labels"] = {"mutated": "locally"}
    assert emulator.get("pods", "p")["metadata"].get("labels") is None
    with pytest.raises(ApiError) as err:
        emulator.get("pods", "missing")
    assert err.value.code == 404
    assert emulator.find("pods", "missing") is None


def test_resource_names_resolve_like_kubectl(emulator: Emulator) -> None:
    emulator.create("po", pod("a"))
    emulator.create("leases.coordination.k8s.io", {"metadata": {"name": "l"}})
    emulator.create("events.events.k8s.io", {"metadata": {"name": "e"}, "eventTime": None})
    assert [p["metadata"]["name"] for p in emulator.list("pods")] == ["a"]
    assert emulator.get("Lease", "l")["apiVersion"] == "coordination.k8s.io/v1"
    assert emulator.list("events") == []
    with pytest.raises(KeyError):
        emulator.list("widgets")


def test_wait_for_wakes_on_changes_from_another_thread(emulator: Emulator) -> None:
    emulator.create("pods", pod("p"))
    started = threading.Event()

    def writer() -> None:
        started.wait(5)
        emulator.patch("pods", "p", {"status": {"phase": "Running"}}, subresource="status")

    t = threading.Thread(target=writer)
    t.start()
    started.set()
    phase = emulator.wait_for(lambda: emulator.get("pods", "p")["status"]["phase"] == "Running" and "ok", 5)
    assert phase == "ok"
    t.join(5)
    with pytest.raises(TimeoutError, match="never"):
        emulator.wait_for(lambda: False, 0.05, "never")


def test_identity_from_tokens_and_anonymous(emulator: Emulator) -> None:
    http = urllib3.PoolManager()
    url = emulator.url + "/api/v1/namespaces/default/pods"
    emulator.reset_requests()
    assert http.request("GET", url, headers={"Authorization": "Bearer worker-token"}).status == 200
    assert http.request("GET", url).status == 200
    bad = http.request("GET", url, headers={"Authorization": "Bearer wrong"})
    assert bad.status == 401
    users = [r.user for r in emulator.requests()]
    assert users == ["system:serviceaccount:draxr-system:draxr-worker", "system:anonymous", "-"]


def test_kubeconfig_works_with_the_official_loader(emulator: Emulator, tmp_path: Path) -> None:
    path = emulator.kubeconfig(tmp_path / "kubeconfig", token="worker-token")
    api_client = config.new_client_from_config(config_file=str(path))  # type: ignore[no-untyped-call]
    api: Any = client.CoreV1Api(api_client)
    assert {n.metadata.name for n in api.list_namespace().items} >= {"default", "kube-system"}
    api_client.close()


def test_feature_gate_off_drops_new_fields_unless_already_set(emulator: Emulator) -> None:
    emulator.set_feature_gate("DRAExtendedResource", False)
    dc = emulator.create(
        "deviceclasses", {"metadata": {"name": "gpu"}, "spec": {"extendedResourceName": "example.com/gpu"}}
    )
    assert "extendedResourceName" not in dc["spec"]
    emulator.set_feature_gate("DRAExtendedResource", True)
    dc = emulator.patch("deviceclasses", "gpu", {"spec": {"extendedResourceName": "example.com/gpu"}})
    emulator.set_feature_gate("DRAExtendedResource", False)
    kept = emulator.patch("deviceclasses", "gpu", {"metadata": {"labels": {"a": "b"}}})
    assert kept["spec"]["extendedResourceName"] == "example.com/gpu"
    emulator.create(
        "pods",
        pod("p", containers=[{"name": "c", "image": "i", "resources": {"limits": {"example.com/gpu": "1"}}}]),
    )
    status = {
        "resourceClaimName": "claim",
        "requestMappings": [{"containerName": "c", "resourceName": "example.com/gpu", "requestName": "r"}],
    }
    out = emulator.patch(
        "pods", "p", {"status": {"extendedResourceClaimStatus": status}}, subresource="status"
    )
    assert "extendedResourceClaimStatus" not in out["status"]
    with pytest.raises(KeyError):
        emulator.set_feature_gate("NoSuchGate", True)


def test_use_before_start_is_an_error() -> None:
    em = Emulator()
    with pytest.raises(RuntimeError, match="not started"):
        em.create("pods", pod("p"))
    em.stop()


def test_bind_through_python_api(emulator: Emulator) -> None:
    emulator.create("pods", pod("p"))
    status: Any = emulator.bind("p", "node-a")
    assert status["status"] == "Success"
    assert emulator.get("pods", "p")["spec"]["nodeName"] == "node-a"


@pytest.mark.skipif(shutil.which("kubectl") is None, reason="no kubectl binary on PATH")
def test_the_request_log_marks_a_server_dry_run(emulator: Emulator, tmp_path: Path) -> None:
    kubeconfig = emulator.kubeconfig(tmp_path / "kubeconfig", token="alice-token")
    manifest = json.dumps(pod("demo"))
    done = subprocess.run(
        [
            str(shutil.which("kubectl")),
            "--kubeconfig",
            str(kubeconfig),
            "apply",
            "--dry-run=server",
            "-f",
            "-",
        ],
        input=manifest,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    creates = [r for r in emulator.requests() if r.verb == "create"]
    assert creates
    assert all(r.dry_run for r in creates)
    assert emulator.find("pods", "demo") is None


def test_version_reports_the_release_asked_for() -> None:
    with Emulator(tokens={"t": ("alice", [])}, release="1.37") as em:
        api = em.api_client("t")
        try:
            doc = client.VersionApi(api).get_code()
        finally:
            api.close()
    assert (doc.major, doc.minor, doc.git_version) == ("1", "37", "v1.37.0-draxr-emulator")


def test_claim_status_devices_conditions_are_kept(emulator: Emulator) -> None:
    """A DRA driver reports binding conditions in ``status.devices`` (KEP-5007): the status
    subresource keeps them beside the allocation and its ``allocationTimestamp``."""
    claim = emulator.create(
        "resourceclaims",
        {
            "apiVersion": "resource.k8s.io/v1",
            "kind": "ResourceClaim",
            "metadata": {"name": "c", "namespace": "default"},
            "spec": {"devices": {"requests": [{"name": "r", "exactly": {"deviceClassName": "gpu"}}]}},
        },
    )
    result = {"request": "r", "driver": "d.example.com", "pool": "p", "device": "x"}
    claim["status"] = {
        "allocation": {
            "devices": {"results": [{**result, "bindingConditions": ["Attached"]}]},
            "allocationTimestamp": "2026-01-01T00:00:00Z",
        },
        "devices": [
            {
                "driver": "d.example.com",
                "pool": "p",
                "device": "x",
                "conditions": [
                    {
                        "type": "Attached",
                        "status": "True",
                        "reason": "Done",
                        "message": "",
                        "lastTransitionTime": "2026-01-01T00:00:01Z",
                    }
                ],
            }
        ],
    }
    emulator.update_status("resourceclaims", claim)
    kept = emulator.get("resourceclaims", "c", "default")["status"]
    assert kept["allocation"]["allocationTimestamp"] == "2026-01-01T00:00:00Z"
    assert kept["allocation"]["devices"]["results"][0]["bindingConditions"] == ["Attached"]
    assert kept["devices"][0]["conditions"][0]["status"] == "True"
