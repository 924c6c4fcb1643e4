"""The chart row as installed: both Deployments ready, the pods' security settings, the KEP example's
workload seeing exactly its devices through containerd and CDI, as do an init container, a sidecar
and a zero request (none), ``kubectl draxr status`` (the row:
``conftest.py``)."""

from __future__ import annotations

import contextlib
import json
import os
import shutil
from pathlib import Path
from typing import Any

import pytest

from ..chart import (
    CHART,
    DEPLOYMENTS,
    NAMESPACE,
    deployment_available,
    draxr_available,
    helm_release,
    split_ref,
)
from ..local import KEP_DEVICE_CLASS_NAME
from .procs import pod_processes
from .row import ChartRow, run_kep_example

Obj = dict[str, Any]
NS = "kep-example"
DRA_NODE = "e2e-node-a"  # the DRA-only node: e2e-node-b also has the device plugin's example.com/gpu


def test_the_image_reference_splits_into_the_charts_repository_and_tag() -> None:
    """No binaries needed: what --set image.repository/tag get, a registry port kept in the repo."""
    assert split_ref("localhost/draxr:6fb6a9b4") == ("localhost/draxr", "6fb6a9b4")
    assert split_ref("registry.example:5000/draxr:0.1.0") == ("registry.example:5000/draxr", "0.1.0")
    with pytest.raises(ValueError, match="has no tag"):
        split_ref("registry.example:5000/draxr")


def _ready(replicas: int, generation: int) -> Obj:
    """A Deployment whose status says every one of its ``replicas`` is ready and Available."""
    return {
        "metadata": {"generation": generation},
        "spec": {"replicas": replicas},
        "status": {
            "observedGeneration": generation,
            "readyReplicas": replicas,
            "updatedReplicas": replicas,
            "conditions": [{"type": "Available", "status": "True"}],
        },
    }


def test_a_deployment_is_available_only_with_every_replica_ready() -> None:
    """No binaries needed: Available with one of two replicas ready (the PDB's minAvailable) is not
    enough, nor a status of an older generation."""
    ready = _ready(replicas=2, generation=2)
    assert deployment_available(ready)
    assert not deployment_available({**ready, "status": {**ready["status"], "readyReplicas": 1}})
    assert not deployment_available({**ready, "metadata": {"generation": 3}})


def test_install_and_upgrade_set_only_the_image_and_what_they_are_given() -> None:
    """No binaries needed: the chart's defaults otherwise, as docs/install.md says."""
    argv = helm_release(Path("/h/helm"), "upgrade", "localhost/draxr:abc", Path("/k"), "certs.validity=3m")
    assert argv == [
        "/h/helm", "upgrade", "draxr", str(CHART), "--namespace", NAMESPACE,
        "--set", "image.repository=localhost/draxr", "--set", "image.tag=abc",
        "--set", "certs.validity=3m", "--kubeconfig", "/k",
    ]  # fmt: skip


def test_draxr_is_available_only_with_both_deployments_available() -> None:
    ready = _ready(replicas=1, generation=1)
    both = [{**ready, "metadata": {**ready["metadata"], "name": n}} for n in DEPLOYMENTS]
    assert draxr_available(both)
    assert not draxr_available(both[:1])
    assert not draxr_available([both[0], {**both[1], "status": {}}])


def test_both_deployments_have_two_ready_replicas(row: ChartRow) -> None:
    chart = row.cluster.chart
    assert chart is not None
    for name in DEPLOYMENTS:
        d = row.get("-n", NAMESPACE, "deployment", name)
        assert d["spec"]["replicas"] == 2
        assert d["status"].get("readyReplicas") == 2, d["status"]
        assert d["status"].get("availableReplicas") == 2, d["status"]
        [container] = d["spec"]["template"]["spec"]["containers"]
        assert container["image"] == chart.image
    print(
        f"draxr image {chart.image}: {chart.draxr_image.unpacked_bytes / 1e6:.0f} MB unpacked, "  # type: ignore[union-attr]
        f"helm install to Available {chart.install_seconds:.1f}s, row start {row.started:.1f}s"
    )


def test_draxr_pods_run_as_65532_with_a_read_only_root(row: ChartRow) -> None:
    pods = row.get("-n", NAMESPACE, "pods")["items"]
    assert len(pods) == 4, [p["metadata"]["name"] for p in pods]
    for pod in pods:
        assert pod["status"]["phase"] == "Running", pod["status"]
        spec = pod["spec"]
        pod_ctx = spec.get("securityContext") or {}
        for c in spec["containers"]:
            ctx = {**pod_ctx, **(c.get("securityContext") or {})}
            assert ctx.get("runAsUser") == 65532, (pod["metadata"]["name"], ctx)
            assert ctx.get("runAsNonRoot") is True
            assert c["securityContext"].get("readOnlyRootFilesystem") is True
        assert all(s.get("ready") for s in pod["status"]["containerStatuses"])


#: What the runtime itself mounts writable in every container (not the image, not the chart): the
#: pseudo filesystems, the kubelet's /etc/hosts and termination log, /dev/shm.
RUNTIME_RW = {
    "/proc",
    "/dev",
    "/dev/pts",
    "/dev/mqueue",
    "/dev/shm",
    "/sys/fs/cgroup",
    "/etc/hosts",
    "/dev/termination-log",
    "/proc/interrupts",
    "/proc/keys",
    "/proc/timer_list",
}


def test_draxr_processes_run_as_65532_and_write_nothing_outside_their_volumes(row: ChartRow) -> None:
    """As the host sees them: every id 65532, the root filesystem mounted read-only, no writable
    mount but what the runtime gives every container, no file open for writing, and nothing in the
    root filesystem's writable layer but the runtime's mount points (a process that wrote there,
    were the root writable, would leave files owned by 65532)."""
    pods = {p["metadata"]["name"] for p in row.get("-n", NAMESPACE, "pods")["items"]}
    procs = pod_processes(pods)
    assert set(procs) == pods, (sorted(pods), sorted(procs))
    for name, proc in procs.items():
        status = dict(line.split(":", 1) for line in (proc / "status").read_text().splitlines())
        assert status["Uid"].split() == ["65532"] * 4, (name, status["Uid"])
        assert status["Gid"].split() == ["65532"] * 4, (name, status["Gid"])
        mounts = [line.split() for line in (proc / "mountinfo").read_text().splitlines()]
        options = {m[4]: m[5].split(",") for m in mounts}
        assert "ro" in options["/"], (name, options["/"])
        writable = {point for point, opts in options.items() if "rw" in opts}
        assert writable <= RUNTIME_RW, (name, sorted(writable - RUNTIME_RW))
        for fd in (proc / "fdinfo").iterdir():
            with contextlib.suppress(OSError):
                flags = int((proc / "fdinfo" / fd.name).read_text().split("flags:")[1].split()[0], 8)
                target = os.readlink(proc / "fd" / fd.name)
                if target.startswith("/") and target != "/dev/null":
                    assert flags & os.O_ACCMODE == os.O_RDONLY, (name, target, oct(flags))
        [root] = [m for m in mounts if m[4] == "/"]
        upper = [o.split("=", 1)[1] for o in root[-1].split(",") if o.startswith("upperdir=")]
        if upper:  # the overlay snapshotter (the native one keeps no separate writable layer)
            points = {m[4] for m in mounts}
            for path in Path(upper[0]).rglob("*"):
                inside = "/" + str(path.relative_to(upper[0]))
                assert path.stat().st_uid != 65532, (name, inside)
                assert path.is_dir() or inside in points, (name, inside)


def test_the_kep_example_sees_exactly_its_devices(row: ChartRow) -> None:
    """The native path (1.37): the special claim's devices, and no other, in the container."""
    claim, want, seen = run_kep_example(row)
    assert claim["metadata"]["annotations"]["resource.kubernetes.io/extended-resource-claim"] == "true"
    assert seen == want


def _printing(name: str, gpus: str | None, *, sidecar: bool = False, then: str = "exec sleep 3600") -> Obj:
    """A container of the workload image printing its environment, asking ``gpus`` example.com/gpu."""
    container: Obj = {
        "name": name,
        "image": "",
        "imagePullPolicy": "Never",
        "command": ["sh", "-c", f"env; {then}"],
    }
    if gpus is not None:
        container["resources"] = {"requests": {"example.com/gpu": gpus}, "limits": {"example.com/gpu": gpus}}
    if sidecar:
        container["restartPolicy"] = "Always"
    return container


def test_init_containers_sidecars_and_a_zero_request_see_exactly_their_devices(row: ChartRow) -> None:
    """Through containerd and CDI: an init container, a sidecar and the app container, each asking
    one example.com/gpu, see exactly the devices of the requests the pod's mapping names for them;
    a container asking 0 and one asking nothing see none."""
    chart = row.cluster.chart
    assert chart is not None
    containers = {
        "init": _printing("init", "1", then="true"),
        "sidecar": _printing("sidecar", "1", sidecar=True),
        "app": _printing("app", "1"),
        "zero": _printing("zero", "0"),
        "plain": _printing("plain", None),
    }
    for c in containers.values():
        c["image"] = chart.workload
    pod = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": "mapped", "namespace": NS},
        "spec": {
            "nodeSelector": {"kubernetes.io/hostname": DRA_NODE},
            "initContainers": [containers["init"], containers["sidecar"]],
            "containers": [containers["app"], containers["zero"], containers["plain"]],
        },
    }
    row.namespace(NS)
    row.kubectl("apply", "-f", "-", stdin=json.dumps(pod))
    waited = row.kubectl(
        "-n",
        NS,
        "wait",
        "--for=jsonpath={.status.phase}=Running",
        "pod/mapped",
        "--timeout=120s",
        timeout=130,
        check=False,
    )
    assert "condition met" in waited, row.kubectl("-n", NS, "describe", "pod", "mapped")
    status = row.get("-n", NS, "pod", "mapped")["status"]["extendedResourceClaimStatus"]
    claim = row.get("-n", NS, "resourceclaim", status["resourceClaimName"])
    results = claim["status"]["allocation"]["devices"]["results"]
    want: dict[str, set[str]] = {name: set() for name in containers}
    for mapping in status["requestMappings"]:
        want[mapping["containerName"]] |= {
            f"DRA_DEVICE_{r['device'].upper().replace('-', '_')}={r['driver']}/{r['pool']}/{r['device']}"
            for r in results
            if r["request"] == mapping["requestName"]
        }
    assert [len(want[n]) for n in ("init", "sidecar", "app", "zero", "plain")] == [1, 1, 1, 0, 0], want
    # The init container's device may serve a later container too (it has finished by then, as
    # upstream's mapping allows): what each container must see is what the mapping says.

    def seen(name: str) -> set[str]:
        log = row.kubectl("-n", NS, "logs", "mapped", "-c", name)
        assert "PATH=" in log, f"{name} printed no environment"  # Running: every container printed
        return {line for line in log.splitlines() if line.startswith("DRA_DEVICE_")}

    row.cluster.cp.wait_for(
        "a container printed no environment",
        lambda: all("PATH=" in row.kubectl("-n", NS, "logs", "mapped", "-c", n) for n in containers),
        30,
    )
    assert {name: seen(name) for name in containers} == want
    row.kubectl("-n", NS, "delete", "pod", "mapped", "--wait=true", timeout=120)


def test_kubectl_draxr_status_against_the_deployed_draxr(row: ChartRow) -> None:
    """The plugin reads the chart's install: both hooks, a worker pod holding the Lease, the KEP
    class backing example.com/gpu and no device in two claims."""
    assert shutil.which("kubectl-draxr", path=row.env["PATH"]), "kubectl-draxr is not on PATH"
    report = json.loads(row.kubectl("draxr", "status", "--draxr-namespace", NAMESPACE, "-o", "json"))
    assert report["webhooks"] == {"mutating": True, "validating": True}, report
    workers = {
        p["metadata"]["name"]
        for p in row.get("-n", NAMESPACE, "pods", "-l", "app.kubernetes.io/component=worker")["items"]
    }
    assert report["leader"] in workers, (report["leader"], workers)
    assert report["nodes"] == 2
    [kep] = [c for c in report["classes"] if c["name"] == KEP_DEVICE_CLASS_NAME]
    assert "example.com/gpu" in kep["backs"], kep
    assert report["doubleAllocated"] == []
