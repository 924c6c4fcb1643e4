"""``kubectl draxr`` (``kubectl-draxr``): status, why POD and plan on a draxr installation on the API
emulator (webhook and worker running, real client over real TLS), and through the real kubectl."""

from __future__ import annotations

import argparse
import contextlib
import io
import json
import os
import shutil
import socket
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from e2e.emulator.sandbox import Sandbox
from tests.test_cli import flags_without_bad_value
from tests.worker.harness import device_class, gpu_slice, node
from webhook.commands import kubectl
from webhook.core.api.objects import Obj
from webhook.core.scheduling.framework import UNSCHEDULABLE
from webhook.kube.client import KubeClient
from webhook.kube.resources import PODS

GPU = "example.com/gpu"


def _pod(pod_name: str, gpus: int, **spec: Any) -> Obj:
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": pod_name, "namespace": "default"},
        "spec": {
            "containers": [
                {"name": "c", "image": "x", "resources": {"requests": {GPU: gpus}, "limits": {GPU: gpus}}}
            ],
            **spec,
        },
    }


def _scheduled_condition(sb: Sandbox, pod_name: str) -> bool:
    conditions = sb.em.get("pods", pod_name, "default").get("status", {}).get("conditions", [])
    return any(c.get("type") == "PodScheduled" for c in conditions)


@pytest.fixture(scope="module")
def sb() -> Iterator[Sandbox]:
    """One node with two GPUs; ``one`` (1 GPU) bound by the worker, ``big`` (4 GPUs) waiting."""
    with Sandbox() as sandbox:
        sandbox.em.create("nodes", node("n1"))
        sandbox.em.create("deviceclasses", device_class())
        sandbox.em.create("resourceslices", gpu_slice("n1", 2))
        sandbox.admin.create(PODS, _pod("one", 1), "default")
        sandbox.admin.create(PODS, _pod("big", 4), "default")
        sandbox.em.wait_for(
            lambda: sandbox.em.get("pods", "one", "default")["spec"].get("nodeName"), 30, "one bound"
        )
        sandbox.em.wait_for(lambda: _scheduled_condition(sandbox, "big"), 30, "big unschedulable")
        yield sandbox


def draxr(sb: Sandbox, *argv: str) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    code = kubectl.run([*argv, "--kubeconfig", str(sb.kubeconfig("admin"))], out, err)
    return code, out.getvalue(), err.getvalue()


# -- status -----------------------------------------------------------------------------------------


def test_status_tells_the_installation_mode_classes_and_free_devices(sb: Sandbox) -> None:
    code, out, err = draxr(sb, "status")
    assert (code, err) == (0, "")
    lines = out.splitlines()
    assert lines[0] == "webhooks: mutating and validating configuration draxr installed"
    assert lines[1] == f"worker: leader {sb.leader()} (Lease draxr-system/draxr-worker)"
    assert lines[2].startswith("mode: native since ")
    assert lines[3] == "cluster: 1 node, 1 pending pod for draxr"  # singular nouns
    assert lines[4] == "double allocations: none (no device is in two claims)"
    assert "gpu.example.com  example.com/gpu, deviceclass.resource.kubernetes.io/gpu.example.com" in out
    assert lines[-2].split() == ["NODE", "DEVICECLASS", "FREE", "ALLOCATED"]
    assert lines[-1].split() == ["n1", "gpu.example.com", "1", "1"]


def test_status_as_json_and_yaml(sb: Sandbox) -> None:
    code, out, _ = draxr(sb, "status", "-o", "json")
    assert code == 0
    report = json.loads(out)
    assert report["webhooks"] == {"mutating": True, "validating": True}
    assert report["mode"]["mode"] == "native"
    assert report["classes"] == [
        {
            "name": "gpu.example.com",
            "extendedResourceName": GPU,
            "backs": [GPU, "deviceclass.resource.kubernetes.io/gpu.example.com"],
            "shadowedBy": None,
        }
    ]
    assert report["devices"] == [{"node": "n1", "class": "gpu.example.com", "free": 1, "allocated": 1}]
    code, out, _ = draxr(sb, "status", "-o", "yaml")
    assert code == 0
    assert yaml.safe_load(out) == report


def test_status_on_a_cluster_without_draxr() -> None:
    with Sandbox() as other:
        for kind in ("mutatingwebhookconfigurations", "validatingwebhookconfigurations"):
            other.em.delete(kind, "draxr")
        code, out, _ = draxr(other, "status", "--draxr-namespace", "elsewhere")
    assert code == 0
    assert "webhooks: not installed (no webhook configuration draxr): pods are not routed" in out
    assert "worker: no leader (Lease elsewhere/draxr-worker)" in out
    assert "mode: unknown (no Mode Event in elsewhere)" in out
    assert "cluster: 0 nodes, 0 pending pods for draxr" in out
    assert "no DeviceClasses: no name is backed by DRA" in out


def _allocated_claim(claim_name: str, device: str) -> Obj:
    return {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "ResourceClaim",
        "metadata": {"name": claim_name, "namespace": "default"},
        "spec": {
            "devices": {"requests": [{"name": "gpu", "exactly": {"deviceClassName": "gpu.example.com"}}]}
        },
        "status": {
            "allocation": {
                "devices": {
                    "results": [
                        {"request": "gpu", "driver": "gpu.example.com", "pool": "n1-gpu", "device": device}
                    ]
                }
            }
        },
    }


def test_status_names_a_device_in_two_claims_and_a_pod_without_devices() -> None:
    # Issue 20: a device two schedulers allocated was counted once, and nobody was told; issue 23:
    # a pod bound without its mapping ran without its GPU, silently.
    with Sandbox() as other:
        other.em.create("nodes", node("n1"))
        other.em.create("deviceclasses", device_class())
        other.em.create("resourceslices", gpu_slice("n1", 2))
        for claim_name in ("c2", "x0-extended-resources-zxlw7"):
            body = _allocated_claim(claim_name, "gpu-1")
            allocated = body.pop("status")
            created = other.em.create("resourceclaims", body)
            other.em.update_status("resourceclaims", {**created, "status": allocated})
        code, out, _ = draxr(other, "status")
        silent = _pod("silent", 1, nodeName="n1", schedulerName="default-scheduler")
        created = other.em.create("pods", silent)
        other.em.update_status("pods", {**created, "status": {"phase": "Running"}})
        code, out, _ = draxr(other, "status")
        _, as_json, _ = draxr(other, "status", "-o", "json")
    assert code == 0
    assert (
        "pods without devices: 1 pod asked for a DRA-backed name and run without it: default/silent on n1: "
        "its status has no extendedResourceClaimStatus (its scheduler did not allocate them)"
    ) in out.splitlines()
    assert [p["pod"] for p in json.loads(as_json)["podsWithoutDevices"]] == ["default/silent"]
    assert (
        "double allocations: 1 device in two claims at once (two schedulers allocated from one pool): "
        "gpu.example.com/n1-gpu/gpu-1 in default/c2 and default/x0-extended-resources-zxlw7"
    ) in out.splitlines()
    assert json.loads(as_json)["doubleAllocated"] == [
        {
            "device": "gpu.example.com/n1-gpu/gpu-1",
            "claims": ["default/c2", "default/x0-extended-resources-zxlw7"],
        }
    ]


# -- why --------------------------------------------------------------------------------------------


def test_why_a_bound_pod_names_node_claim_mapping_and_devices(sb: Sandbox) -> None:
    code, out, _ = draxr(sb, "why", "one")
    pod = sb.em.get("pods", "one", "default")
    claim = pod["status"]["extendedResourceClaimStatus"]["resourceClaimName"]
    assert code == 0
    assert out.splitlines() == [
        "default/one is bound to n1 (phase Pending)",
        f"claim: {claim}",
        f"  container c: {GPU} -> request container-0-request-0",
        "devices: gpu.example.com/n1-gpu/gpu-0",
    ]


def test_why_a_pending_pod_gives_the_workers_reasons_and_the_engines_now(sb: Sandbox) -> None:
    code, out, _ = draxr(sb, "why", "big", "-n", "default")
    assert code == 0
    reason = "0/1 nodes are available: 1 cannot allocate all claims."
    # the worker's condition carries DefaultPreemption's message after the fit error, as kube-scheduler's
    preemption = " preemption: 0/1 nodes are available: 1 No preemption victims found for incoming pod."
    assert out.splitlines() == [
        f"default/big is pending: Unschedulable: {reason}{preemption}",
        f"draxr's engine now: {reason}",
    ]
    code, out, _ = draxr(sb, "why", "big", "-o", "json")
    report = json.loads(out)
    assert report["now"]["status"] == UNSCHEDULABLE
    assert report["condition"]["reason"] == "Unschedulable"
    assert report["resources"] == {GPU: "gpu.example.com"}


def test_why_a_pod_of_another_scheduler(sb: Sandbox) -> None:
    sb.admin.create(PODS, _pod("elsewhere", 1, schedulerName="custom"), "default")
    code, out, _ = draxr(sb, "why", "elsewhere")
    assert code == 0
    lines = out.splitlines()
    assert lines[0].startswith("default/elsewhere is pending and not draxr's: spec.schedulerName is custom")
    assert lines[1] == "draxr's engine now: fits on n1, devices n1-gpu/gpu-1"
    sb.em.delete("pods", "elsewhere", "default")


def test_why_a_missing_pod_is_one_line(sb: Sandbox) -> None:
    code, out, err = draxr(sb, "why", "nope")
    assert (code, out) == (1, "")
    assert err == 'kubectl draxr why: error: pods "nope" not found in namespace default\n'


# -- plan -------------------------------------------------------------------------------------------


def test_plan_places_the_pending_pods_and_a_workload_from_a_file(sb: Sandbox, tmp_path: Path) -> None:
    code, out, _ = draxr(sb, "plan")
    assert code == 1  # big cannot fit
    assert out.splitlines()[1].split()[:4] == ["default/big", "native", "<none>", "0/1"]  # POD PATH NODE
    assert out.rstrip().endswith("0 scheduled, 1 unschedulable, 0 errors")
    (tmp_path / "try.yaml").write_text(yaml.safe_dump(_pod("try", 1)))
    code, out, _ = draxr(sb, "plan", "-f", str(tmp_path / "try.yaml"), "-o", "json")
    result = json.loads(out)
    by_name = {p["name"]: p for p in result["pods"]}
    assert by_name["try"]["node"] == "n1"  # the one free GPU, next to the running pod's
    assert by_name["big"]["status"] == UNSCHEDULABLE
    assert result["summary"] == {"scheduled": 1, "unschedulable": 1, "errors": 0}


def test_plan_on_a_cluster_without_nodes_says_so() -> None:
    with Sandbox() as empty:
        empty.admin.create(PODS, _pod("p", 1, schedulerName="draxr"), "default")
        code, out, _ = draxr(empty, "plan")
    assert code == 1
    assert out.splitlines()[0] == "no Nodes in the cluster: no pod can be scheduled"
    assert "default/p  -     <none>  no nodes available to schedule pods" in out


# -- failures ---------------------------------------------------------------------------------------


def test_an_unreachable_cluster_is_one_line(tmp_path: Path) -> None:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]  # closed once the block ends: nothing listens there
    config = {
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [{"name": "c", "cluster": {"server": f"http://127.0.0.1:{port}"}}],
        "users": [{"name": "u", "user": {"token": "t"}}],
        "contexts": [{"name": "x", "context": {"cluster": "c", "user": "u"}}],
        "current-context": "x",
    }
    (tmp_path / "kubeconfig").write_text(yaml.safe_dump(config))
    out, err = io.StringIO(), io.StringIO()
    code = kubectl.run(["status", "--kubeconfig", str(tmp_path / "kubeconfig")], out, err)
    assert code == 1
    assert len(err.getvalue().splitlines()) == 1
    assert err.getvalue().startswith("kubectl draxr status: error: ")
    assert "Traceback" not in err.getvalue()


def test_why_looks_in_the_namespace_of_the_context_kubectl_would_use(sb: Sandbox, tmp_path: Path) -> None:
    """Without ``-n``, the pod is looked up in the namespace of the current context, or of
    ``--context``'s, as kubectl does."""
    config = yaml.safe_load(sb.kubeconfig("admin").read_text())
    (ctx,) = config["contexts"]
    config["contexts"] = [
        {"name": "elsewhere", "context": {**ctx["context"], "namespace": "elsewhere"}},
        {"name": "here", "context": {**ctx["context"], "namespace": "default"}},
    ]
    config["current-context"] = "elsewhere"
    kubeconfig = tmp_path / "kubeconfig"
    kubeconfig.write_text(yaml.safe_dump(config))

    def why(*argv: str) -> tuple[int, str, str]:
        out, err = io.StringIO(), io.StringIO()
        code = kubectl.run(["why", "one", "--kubeconfig", str(kubeconfig), *argv], out, err)
        return code, out.getvalue(), err.getvalue()

    assert why() == (1, "", 'kubectl draxr why: error: pods "one" not found in namespace elsewhere\n')
    code, out, err = why("--context", "here")
    assert (code, err) == (0, "")
    assert out.startswith("default/one is bound to n1")
    code, _, err = why("--context", "nowhere")
    assert code == 1
    assert err.startswith("kubectl draxr why: error: kubeconfig: ")
    assert len(err.splitlines()) == 1


def test_a_missing_kubeconfig_is_one_line(tmp_path: Path) -> None:
    out, err = io.StringIO(), io.StringIO()
    code = kubectl.run(["status", "--kubeconfig", str(tmp_path / "none")], out, err)
    assert code == 1
    assert err.getvalue().startswith("kubectl draxr status: error: kubeconfig: ")
    assert len(err.getvalue().splitlines()) == 1


BAD_FLAGS: list[tuple[list[str], str]] = [
    ([], "kubectl draxr: error: the following arguments are required: COMMAND"),
    (["status", "-o", "xml"], "kubectl draxr status: error: -o/--output: invalid choice: 'xml'"),
    (["status", "--kubeconfig", ""], "kubectl draxr status: error: --kubeconfig: must not be empty"),
    (["status", "--context", " "], "kubectl draxr status: error: --context: must not be empty"),
    (
        ["status", "--draxr-namespace", "A_B"],
        "kubectl draxr status: error: --draxr-namespace: 'A_B' is not a valid DNS-1123 label",
    ),
    (["why"], "kubectl draxr why: error: the following arguments are required: POD"),
    (["why", "p", "-n", "Default"], "kubectl draxr why: error: -n/--namespace: 'Default' is not a valid"),
    (["plan", "--policy", "random"], "kubectl draxr plan: error: --policy: invalid choice: 'random'"),
    (["plan", "--scheduler-name", ""], "kubectl draxr plan: error: --scheduler-name: must not be empty"),
    (["plan", "-f"], "kubectl draxr plan: error: -f/--filename: expected one argument"),
]


@pytest.mark.parametrize(("argv", "start"), BAD_FLAGS, ids=[" ".join(a) or "(none)" for a, _ in BAD_FLAGS])
def test_a_bad_flag_fails_in_one_line(
    argv: list[str], start: str, capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(SystemExit) as exit_info:
        kubectl.run(argv, io.StringIO(), io.StringIO())
    assert exit_info.value.code == 2
    err = capsys.readouterr().err.splitlines()
    assert len(err) == 1, err
    assert err[0].startswith(start)


def test_every_flag_has_a_bad_value_case() -> None:
    # --kubeconfig, --context and --output have the same type in every command: one case covers them.
    shared = ("kubeconfig", "context", "output")
    assert flags_without_bad_value(kubectl.build_parser(), BAD_FLAGS, shared) == []


def test_help_is_plain_text() -> None:
    parser = kubectl.build_parser()
    sub = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    for text in [parser.format_help(), *(c.format_help() for c in sub.choices.values())]:
        assert "``" not in text
        assert "**" not in text


# -- through kubectl --------------------------------------------------------------------------------

KUBECTL = shutil.which("kubectl")
PLUGIN = Path(sys.executable).parent / "kubectl-draxr"


@pytest.mark.skipif(
    KUBECTL is None and os.environ.get("CI") != "true",
    reason="no kubectl on PATH: `.ci/kubectl.sh` fetches it into .ci/bin",
)
def test_kubectl_runs_the_installed_plugin_through_the_normal_kubeconfig(sb: Sandbox, tmp_path: Path) -> None:
    assert KUBECTL is not None, "CI=true: kubectl must be on PATH"
    assert PLUGIN.is_file(), f"{PLUGIN} missing: reinstall the package (make .venv/.installed)"
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    (bin_dir / "kubectl-draxr").symlink_to(PLUGIN)
    env = {
        "PATH": f"{bin_dir}{os.pathsep}{os.environ.get('PATH', '')}",
        "KUBECONFIG": str(sb.kubeconfig("admin")),
        "HOME": str(tmp_path),
    }
    listed = subprocess.run([KUBECTL, "plugin", "list"], capture_output=True, text=True, env=env, timeout=60)
    assert str(bin_dir / "kubectl-draxr") in listed.stdout
    done = subprocess.run(
        [KUBECTL, "draxr", "why", "one", "-o", "json"], capture_output=True, text=True, env=env, timeout=60
    )
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["node"] == "n1"
    missing = subprocess.run(
        [KUBECTL, "draxr", "why", "nope"], capture_output=True, text=True, env=env, timeout=60
    )
    assert missing.returncode == 1
    assert missing.stderr == 'kubectl draxr why: error: pods "nope" not found in namespace default\n'


def test_listing_starts_over_when_a_continue_token_expires() -> None:
    with Sandbox() as sandbox:
        for i in range(kubectl.PAGE + 3):  # two pages of pods
            sandbox.em.create("pods", _pod(f"p{i}", 0, schedulerName="other"), "default")
        injected: list[bool] = []

        def after_each_request(verb: str, resource: str, code: int) -> None:
            if verb == "list" and resource == "pods" and code == 200 and not injected:
                injected.append(True)  # the server forgets the list after its first page
                sandbox.em.inject(
                    verbs="list", resource="pods", error=410, message="too old resource version", times=1
                )

        client = KubeClient(sandbox.em.api_client("admin"), hook=after_each_request)
        pods = kubectl.list_all(client, PODS, "default")
    assert injected == [True]
    assert sorted(p["metadata"]["name"] for p in pods) == sorted(f"p{i}" for i in range(kubectl.PAGE + 3))
    assert {p["kind"] for p in pods} == {"Pod"}


def test_why_a_member_of_a_gang_waits(sb: Sandbox) -> None:
    group = {
        "apiVersion": "scheduling.k8s.io/v1beta1",
        "kind": "PodGroup",
        "metadata": {"name": "train", "namespace": "default"},
        "spec": {"schedulingPolicy": {"gang": {"minCount": 3}}},
    }
    sb.em.create("podgroups", group)
    for i in range(2):
        sb.admin.create(PODS, _pod(f"t{i}", 1, schedulingGroup={"podGroupName": "train"}), "default")
    try:
        code, out, _ = draxr(sb, "why", "t0")
        assert code == 0
        lines = out.splitlines()
        assert lines[1] == "pod group default/train (gang, minCount 3): 2 pods, 0 bound"
        assert (
            lines[2]
            == "  waiting for minCount pods from a gang to appear in scheduling queue (1 short of minCount)"
        )
        sb.admin.create(PODS, _pod("t2", 1, schedulingGroup={"podGroupName": "train"}), "default")
        report = json.loads(draxr(sb, "why", "t0", "-o", "json")[1])["podGroup"]
        assert report["pods"] == 3
        assert report["waiting"] is None
        assert report["now"]["status"] == UNSCHEDULABLE  # 3 GPUs wanted, 1 free
    finally:
        for i in range(3):
            with contextlib.suppress(Exception):
                sb.em.delete("pods", f"t{i}", "default")
        sb.em.delete("podgroups", "train", "default")
