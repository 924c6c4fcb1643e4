"""``draxr plan``: the engine offline on manifests (issue 2's contract for JSON, table and exits)."""

from __future__ import annotations

import io
import json
import re
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.core import podfactory as factory
from tests.core.podfactory import container, pod
from webhook.cli import main
from webhook.commands.plan import build_plan, run
from webhook.core.api.objects import Obj
from webhook.loader import expand_workloads, load_paths

#: The KEP-5004 example (what ``make demo`` runs).
EXAMPLES = Path(__file__).resolve().parents[2] / "examples" / "kep-5004"


def plan(paths: list[Path | str], *args: str) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    fmt = "json" if "json" in args else "table"
    policy = "spread" if "spread" in args else "binpack"
    code = run(paths, fmt, policy, out, err)
    return code, out.getvalue(), err.getvalue()


def write(tmp: Path, name: str, docs: list[Obj]) -> Path:
    p = tmp / name
    p.write_text(yaml.safe_dump_all(docs))
    return p


def test_motivating_example_json_shape() -> None:
    code, out, _ = plan([EXAMPLES], "json")
    assert code == 0
    data = json.loads(out)
    assert set(data) == {"pods", "summary"}
    assert data["summary"] == {"scheduled": 4, "unschedulable": 0, "errors": 0}
    pods = data["pods"]
    assert [p["name"] for p in pods] == ["demo-0", "demo-1", "demo-2", "demo-3"]
    for p in pods:
        assert set(p) == {
            "namespace",
            "name",
            "node",
            "status",
            "message",
            "resources",
            "claim",
            "extendedResourceClaimStatus",
            "alignment",
            "path",
            "claims",
            "preemption",
            "bindingConditions",
            "podGroup",
        }
        assert (p["path"], p["claims"]) == ("native", [])
        assert p["alignment"] is None  # no class of the example aligns by a topology attribute
    dp = [p for p in pods if p["node"] == "device-plugin-node"]
    dra = [p for p in pods if p["node"] == "dra-node"]
    assert len(dp) == 2
    assert len(dra) == 2  # binpack fills the device-plugin node first
    for p in dp:
        assert p["resources"] == {"example.com/gpu": {"deviceClass": None, "via": "device-plugin"}}
        assert p["claim"] is None
        assert p["extendedResourceClaimStatus"] is None
    devices = set()
    for p in dra:
        assert p["resources"] == {"example.com/gpu": {"deviceClass": "gpu.example.com", "via": "dra"}}
        claim = p["claim"]
        name = claim["metadata"]["name"]
        assert claim["apiVersion"] == "resource.k8s.io/v1"
        assert re.fullmatch(re.escape(f"{p['name']}-extended-resources-") + "[a-z0-9]{5}", name)
        assert p["extendedResourceClaimStatus"] == {
            "requestMappings": [
                {
                    "containerName": "app",
                    "resourceName": "example.com/gpu",
                    "requestName": "container-0-request-1",
                }
            ],
            "resourceClaimName": name,
        }
        (result,) = claim["status"]["allocation"]["devices"]["results"]
        devices.add(result["device"])
    assert len(devices) == 2  # never the same device twice


def test_plan_is_deterministic_and_names_are_stable() -> None:
    assert plan([EXAMPLES], "json")[1] == plan([EXAMPLES], "json")[1]


def test_table_output_and_summary() -> None:
    code, out, _ = plan([EXAMPLES])
    assert code == 0
    assert "default/demo-2" in out
    assert re.search(r"dra-node\s+gpu.example.com\s+dra\s+2\s+6", out)
    assert re.search(r"device-plugin-node\s+example.com/gpu\s+device-plugin\s+2\s+0", out)
    assert out.rstrip().endswith("4 scheduled, 0 unschedulable, 0 errors")


def test_unschedulable_pods_exit_1_with_kube_scheduler_message(tmp_path: Path) -> None:
    docs = list(yaml.safe_load_all((EXAMPLES / "deployment.yaml").read_text()))
    docs[0]["spec"]["replicas"] = 11
    for f in ("nodes.yaml", "deviceclass.yaml", "resourceslice.yaml"):
        (tmp_path / f).write_text((EXAMPLES / f).read_text())
    write(tmp_path, "deployment.yaml", docs)
    code, out, _ = plan([tmp_path], "json")
    assert code == 1
    data = json.loads(out)
    assert data["summary"] == {"scheduled": 10, "unschedulable": 1, "errors": 0}
    last = data["pods"][-1]
    assert last["status"] == "Unschedulable"
    assert last["node"] is None
    assert last["message"] == (
        "0/2 nodes are available: 1 Insufficient example.com/gpu, 1 cannot allocate all claims."
    )


def test_running_pods_consume_devices_and_priority_orders_pending(tmp_path: Path) -> None:
    held = {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "ResourceClaim",
        "metadata": {"name": "held", "namespace": "default"},
        "spec": {"devices": {"requests": [{"name": "r", "exactly": {"deviceClassName": "gpu"}}]}},
        "status": {
            "allocation": {
                "devices": {
                    "results": [{"request": "r", "driver": "d.example.com", "pool": "n", "device": "a"}]
                }
            }
        },
    }

    def p(pod_name: str, prio: int) -> Obj:
        return pod(pod_name, [container("c", {"example.com/gpu": "1"})], priority=prio)

    node, cls = factory.node("n"), factory.device_class("gpu", ext="example.com/gpu")
    sl = factory.resource_slice(
        "s", [factory.device("a"), factory.device("b")], driver="d.example.com", node_name="n"
    )
    write(tmp_path, "all.yaml", [node, cls, sl, held, p("low", 1), p("high", 100)])
    code, out, _ = plan([tmp_path], "json")
    data = json.loads(out)
    assert code == 1
    assert [(x["name"], x["status"]) for x in data["pods"]] == [
        ("high", "Scheduled"),
        ("low", "Unschedulable"),
    ]
    assert data["pods"][0]["claim"]["status"]["allocation"]["devices"]["results"][0]["device"] == "b"


@pytest.mark.parametrize(
    ("content", "expected"),
    [
        (
            "apiVersion: v1\nkind: Pod\nmetadata: {name: a}\n---\nkind: Node\nmetadata: {name: b}\n",
            "document 1: apiVersion",
        ),
        ("- just\n- a list\n", "document 0"),
        ("apiVersion: v1\nkind: Pod\nmetadata: {name: [unclosed\n", "line"),
    ],
)
def test_unusable_input_exits_2_naming_file_document_and_field(
    tmp_path: Path, content: str, expected: str
) -> None:
    f = tmp_path / "bad.yaml"
    f.write_text(content)
    code, out, err = plan([f])
    assert code == 2
    assert out == ""
    assert str(f) in err
    assert expected in err


def test_invalid_resource_slice_is_unusable_input(tmp_path: Path) -> None:
    sl = {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "ResourceSlice",
        "metadata": {"name": "s"},
        "spec": {
            "driver": "d",
            "pool": {"name": "p"},
            "nodeName": "n",
            "devices": [{"name": "x", "attributes": {"a": {"int": 1, "string": "two"}}}],
        },
    }
    f = write(tmp_path, "slice.yaml", [sl])
    code, _, err = plan([f])
    assert code == 2
    assert f"{f}: document 0: spec" in err


def test_kubectl_list_output_and_workload_kinds(tmp_path: Path) -> None:
    node = {"metadata": {"name": "n"}, "status": {"allocatable": {"cpu": "4", "memory": "4Gi", "pods": "10"}}}
    (tmp_path / "nodes.yaml").write_text(
        yaml.safe_dump({"apiVersion": "v1", "kind": "NodeList", "items": [node]})
    )
    tpl = {"metadata": {"labels": {"a": "b"}}, "spec": {"containers": [{"name": "c"}]}}
    docs = [
        {
            "apiVersion": "apps/v1",
            "kind": "StatefulSet",
            "metadata": {"name": "st", "namespace": "ml"},
            "spec": {"replicas": 2, "template": tpl},
        },
        {
            "apiVersion": "batch/v1",
            "kind": "Job",
            "metadata": {"name": "job"},
            "spec": {"parallelism": 3, "template": tpl},
        },
    ]
    write(tmp_path, "work.yaml", docs)
    code, out, _ = plan([tmp_path], "json")
    assert code == 0
    names = [(p["namespace"], p["name"]) for p in json.loads(out)["pods"]]
    assert names == [
        ("ml", "st-0"),
        ("ml", "st-1"),
        ("default", "job-0"),
        ("default", "job-1"),
        ("default", "job-2"),
    ]


def test_cli_entry_point(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["plan", "-f", str(EXAMPLES), "-o", "json", "--policy", "spread"]) == 0
    data = json.loads(capsys.readouterr().out)
    # spread prefers the emptier node: the 8-GPU DRA node gets the first pods
    assert data["pods"][0]["node"] == "dra-node"
    with pytest.raises(SystemExit):
        main(["plan"])  # -f is required


def test_cel_runtime_error_is_reported_as_error(tmp_path: Path) -> None:
    node = factory.node("n")
    cls = factory.device_class(
        "bad", ext="example.com/gpu", selectors=['device.attributes["d.example.com"].missing == 1']
    )
    sl = factory.resource_slice("s", [factory.device("a")], driver="d.example.com", node_name="n")
    gpu_pod = pod("p", [container("c", {"example.com/gpu": "1"})])
    write(tmp_path, "all.yaml", [node, cls, sl, gpu_pod])
    code, out, _ = plan([tmp_path], "json")
    data = json.loads(out)
    assert code == 1
    assert data["summary"] == {"scheduled": 0, "unschedulable": 0, "errors": 1}
    assert data["pods"][0]["status"] == "Error"
    assert (
        "class bad: selector #0 on device d.example.com/n/a: CEL runtime error" in data["pods"][0]["message"]
    )


def test_a_device_taint_rule_in_the_input_keeps_pods_off_its_devices(tmp_path: Path) -> None:
    for f in ("nodes.yaml", "deviceclass.yaml", "resourceslice.yaml", "deployment.yaml"):
        (tmp_path / f).write_text((EXAMPLES / f).read_text())
    slices = list(yaml.safe_load_all((EXAMPLES / "resourceslice.yaml").read_text()))
    pool = slices[0]["spec"]["pool"]["name"]
    rule = {
        "apiVersion": "resource.k8s.io/v1beta2",
        "kind": "DeviceTaintRule",
        "metadata": {"name": "maintenance"},
        "spec": {"deviceSelector": {"pool": pool}, "taint": {"key": "maintenance", "effect": "NoSchedule"}},
    }
    write(tmp_path, "rule.yaml", [rule])
    code, out, _ = plan([tmp_path], "json")
    data = json.loads(out)
    assert code == 1
    assert data["summary"] == {"scheduled": 2, "unschedulable": 2, "errors": 0}
    assert {p["node"] for p in data["pods"] if p["status"] == "Scheduled"} == {"device-plugin-node"}
    waiting = [p["message"] for p in data["pods"] if p["status"] == "Unschedulable"]
    assert (
        waiting
        == ["0/2 nodes are available: 1 Insufficient example.com/gpu, 1 cannot allocate all claims."] * 2
    )


def test_invalid_pools_give_upstreams_reason(tmp_path: Path) -> None:
    """``plan`` words an invalid pool as kube-scheduler does: "N invalid resource pools were
    encountered" (the allocator's ``ErrFailedAllocationOnNode``)."""
    docs = [yaml.safe_load(d) for d in (EXAMPLES / "deviceclass.yaml").read_text().split("---") if d.strip()]
    nodes = list(yaml.safe_load_all((EXAMPLES / "nodes.yaml").read_text()))
    slices = list(yaml.safe_load_all((EXAMPLES / "resourceslice.yaml").read_text()))
    for s in slices:
        devices = s["spec"]["devices"]
        devices[1]["name"] = devices[0]["name"]
    dra_only = [n for n in nodes if "example.com/gpu" not in n["status"].get("allocatable", {})]
    pod: Obj = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": "p"},
        "spec": {"containers": [{"name": "c", "resources": {"requests": {"example.com/gpu": "1"}}}]},
    }
    f = write(tmp_path, "all.yaml", [*docs, *dra_only, *slices, pod])
    code, out, _ = plan([f], "json")
    assert code == 1
    (result,) = json.loads(out)["pods"]
    assert result["message"] == "0/1 nodes are available: 1 invalid resource pools were encountered."


# --- resource.k8s.io/v1beta1 input (issue 10): the loader converts it to v1 ---------------------------


def _v1beta1_gpus() -> list[Obj]:
    """A v1beta1 ResourceSlice: device fields under ``basic``, as 1.32-1.35 drivers publish them."""
    devices = [
        {
            "name": f"gpu-{i}",
            "basic": {"attributes": {"model": {"string": m}}, "capacity": {"mem": {"value": "8Gi"}}},
        }
        for i, m in enumerate(["a", "b"])
    ]
    return [
        factory.node("n"),
        {
            "apiVersion": "resource.k8s.io/v1beta1",
            "kind": "ResourceSlice",
            "metadata": {"name": "n-gpus"},
            "spec": {"driver": "gpu.example.com", "nodeName": "n", "pool": {"name": "n"}, "devices": devices},
        },
    ]


def test_convert_v1beta1_device_to_resource_device_lets_cel_read_basic_attributes(tmp_path: Path) -> None:
    """Before the conversion, CEL failed with ``no such key`` on every ``basic:`` device."""
    cls = factory.device_class(
        "gpu.example.com", "example.com/gpu", ['device.attributes["gpu.example.com"].model == "b"']
    )
    cls["apiVersion"] = "resource.k8s.io/v1beta1"
    write(
        tmp_path, "cluster.yaml", [*_v1beta1_gpus(), cls, pod("p", [container("c", {"example.com/gpu": 1})])]
    )
    code, out, _ = plan([tmp_path], "json")
    data = json.loads(out)
    assert code == 0, data
    (placed,) = data["pods"]
    assert placed["node"] == "n"
    (result,) = placed["claim"]["status"]["allocation"]["devices"]["results"]
    assert result["device"] == "gpu-1"


def test_convert_v1beta1_device_request_to_resource_device_request_allocates_a_flat_user_claim(
    tmp_path: Path,
) -> None:
    """A v1beta1 user claim with the request fields at the top level (no ``exactly``) is allocated."""
    claim = {
        "apiVersion": "resource.k8s.io/v1beta1",
        "kind": "ResourceClaim",
        "metadata": {"name": "mine", "namespace": "default"},
        "spec": {
            "devices": {
                "requests": [
                    {
                        "name": "r",
                        "deviceClassName": "gpu.example.com",
                        "allocationMode": "ExactCount",
                        "count": 1,
                        "selectors": [
                            {"cel": {"expression": 'device.attributes["gpu.example.com"].model == "b"'}}
                        ],
                    }
                ]
            }
        },
    }
    user = pod("p", resourceClaims=[{"name": "x", "resourceClaimName": "mine"}])
    docs = [*_v1beta1_gpus(), factory.device_class("gpu.example.com", selectors=["true"]), claim, user]
    write(tmp_path, "cluster.yaml", docs)
    code, out, _ = plan([tmp_path], "json")
    assert code == 0, out
    assert [p["node"] for p in json.loads(out)["pods"]] == ["n"]
    loaded = expand_workloads([item.obj for item in load_paths([tmp_path])])
    (decision,) = [r.decision for r in build_plan(loaded).results]
    (user_claim,) = decision.user_claims
    assert user_claim.allocation is not None
    assert [r["device"] for r in user_claim.allocation.to_api()["devices"]["results"]] == ["gpu-1"]


def _topology_cluster(tmp: Path) -> Path:
    dc = factory.device_class("gpu", "example.com/gpu", selectors=["true"])
    dc["metadata"]["annotations"] = {"draxr.io/align-by": "resource.kubernetes.io/pcieRoot"}
    gpus = [
        factory.device(f"gpu-{i}", {"resource.kubernetes.io/pcieRoot": {"string": f"pci-{i // 4}"}})
        for i in range(8)
    ]
    pods = [
        pod("one", [container("c", {"example.com/gpu": 1})]),
        pod("two", [container("c", {"example.com/gpu": 2})]),
        pod("four", [container("c", {"example.com/gpu": 4})]),
    ]
    for p in pods:
        p["metadata"].pop("uid")
    docs = [factory.node("n"), dc, factory.resource_slice("n-gpus", gpus, node_name="n", pool="n"), *pods]
    return write(tmp, "cluster.yaml", docs)


def test_plan_shows_each_pods_alignment_and_each_nodes_fragmentation(tmp_path: Path) -> None:
    path = _topology_cluster(tmp_path)
    code, out, _ = plan([path])
    assert code == 0
    lines = out.splitlines()
    assert lines[0].split() == ["POD", "PATH", "NODE", "DEVICES", "/", "REASON", "ALIGNMENT"]
    rows = {line.split()[0]: line for line in lines[1:4]}
    assert rows["default/one"].split()[-1] == "-"  # one device: nothing to align
    assert rows["default/two"].endswith("container-0: pcieRoot=pci-0")  # binpack: the root in use
    assert rows["default/four"].endswith("container-0: pcieRoot=pci-1")
    (summary,) = [line for line in lines if line.startswith("n ")]
    assert summary.split() == [
        "n",
        "gpu",
        "dra",
        "7",
        "1",
        "0/2",
        "pcieRoot",
        "whole,",
        "1",
        "free",
        "in",
        "broken",
    ]
    assert "FRAGMENTATION" in out


def test_plan_json_alignment_and_the_upstream_policy(tmp_path: Path) -> None:
    path = _topology_cluster(tmp_path)
    out, err = io.StringIO(), io.StringIO()
    assert run([path], "json", "binpack", out, err) == 0
    four = next(p for p in json.loads(out.getvalue())["pods"] if p["name"] == "four")
    assert four["alignment"] == {
        "policy": "binpack",
        "mode": "required",
        "constraints": [
            {
                "requests": ["container-0-request-0"],
                "attribute": "resource.kubernetes.io/pcieRoot",
                "values": ["pci-1"],
                "aligned": True,
            }
        ],
        "groups": {
            "attribute": "resource.kubernetes.io/pcieRoot",
            "total": 2,
            "wholeBefore": 1,
            "wholeAfter": 0,
        },
    }
    assert four["claim"]["spec"]["devices"]["constraints"] == [
        {"requests": ["container-0-request-0"], "matchAttribute": "resource.kubernetes.io/pcieRoot"}
    ]
    out = io.StringIO()
    assert run([path], "json", "upstream", out, err) == 0
    upstream = {p["name"]: p for p in json.loads(out.getvalue())["pods"]}
    assert upstream["four"]["alignment"] == {"policy": "upstream", "mode": "none", "constraints": []}
    assert "constraints" not in upstream["four"]["claim"]["spec"]["devices"]
    devices = [r["device"] for r in upstream["two"]["claim"]["status"]["allocation"]["devices"]["results"]]
    assert devices == ["gpu-1", "gpu-2"]  # first fit after "one" took gpu-0


def test_plan_policy_flag_takes_the_three_policies(capsys: pytest.CaptureFixture[str]) -> None:
    from webhook.cli import build_parser

    for policy in ("binpack", "spread", "upstream"):
        assert build_parser().parse_args(["plan", "-f", "x", "--policy", policy]).policy == policy
    with pytest.raises(SystemExit):
        build_parser().parse_args(["plan", "-f", "x", "--policy", "firstfit"])
    assert "invalid choice: 'firstfit'" in capsys.readouterr().err


# --- --mode rewrite ----------------------------------------------------------------------------

GPU = "example.com/gpu"


def rewrite_plan(objects: list[Obj]) -> list[dict[str, Any]]:
    return [r.to_json() for r in build_plan(expand_workloads(objects), mode="rewrite").results]


def test_the_kep_example_in_rewrite_mode_runs_on_dra_devices_through_claims() -> None:
    out = io.StringIO()
    assert run([EXAMPLES], "json", "binpack", out, io.StringIO(), None, "rewrite") == 0
    pods = json.loads(out.getvalue())["pods"]
    assert [(p["path"], p["node"]) for p in pods] == [("rewrite", "dra-node")] * 4
    for p in pods:
        assert (p["claim"], p["extendedResourceClaimStatus"]) == (None, None)  # no special claim
        (claim,) = p["claims"]
        assert claim["metadata"]["name"] == f"{p['name']}-draxr-container-0-request-1"
        assert claim["metadata"]["ownerReferences"][0]["name"] == p["name"]
        assert claim["spec"]["devices"]["requests"][0]["exactly"]["count"] == 1
        results = claim["status"]["allocation"]["devices"]["results"]
        assert [r["pool"] for r in results] == ["dra-node"]
    devices = [
        c["status"]["allocation"]["devices"]["results"][0]["device"] for p in pods for c in p["claims"]
    ]
    assert len(set(devices)) == 4


def test_rewrite_mode_makes_the_controllers_claims_and_records_them_on_the_pod() -> None:
    """The claims from templates are the resourceclaim controller's (``core.paths.templateclaims``),
    and the scheduled pod's status names each, as the controller records them."""
    objs = [
        factory.device_class("gpu", ext=GPU),
        factory.node("dra"),
        factory.resource_slice("s", factory.gpus(2), node_name="dra"),
        pod("p", [container("a", {GPU: "1"}), container("b", {GPU: "1"})], uid="uid-p"),
    ]
    plan_ = build_plan(expand_workloads(objs), mode="rewrite")
    (result,) = plan_.results
    assert len(result.claims) == 2
    for claim in result.claims:
        meta = claim["metadata"]
        assert meta["generateName"] == f"{meta['name']}-"
        assert meta["ownerReferences"] == [
            {"apiVersion": "v1", "kind": "Pod", "name": "p", "uid": "uid-p", "controller": True}
        ]
    made_for = {
        c["metadata"]["annotations"]["resource.kubernetes.io/pod-claim-name"]: c["metadata"]["name"]
        for c in result.claims
    }
    bound = plan_.state.allocated.pods["uid-p"]
    assert bound["spec"]["nodeName"] == "dra"
    assert bound["status"]["resourceClaimStatuses"] == [
        {"name": n, "resourceClaimName": made_for[n]} for n in sorted(made_for)
    ]


def test_a_shared_claim_keeps_its_allocation_and_each_consumer_once() -> None:
    """PreBind's change (``with_reservation``): a claim allocated and reserved for a running pod
    gets the pending pods after it, each once, and its allocation is never replaced."""
    allocation = {
        "devices": {
            "results": [{"request": "r", "driver": "gpu.example.com", "pool": "n", "device": "gpu-0"}]
        }
    }
    claim = {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "ResourceClaim",
        "metadata": {"name": "shared", "namespace": "default", "uid": "uid-shared"},
        "spec": {"devices": {"requests": [{"name": "r", "exactly": {"deviceClassName": "gpu"}}]}},
        "status": {
            "allocation": allocation,
            "reservedFor": [{"resource": "pods", "name": "running", "uid": "uid-running"}],
        },
    }

    def user(pod_name: str, **extra: Any) -> Obj:
        p = pod(pod_name, [container("c")], uid=f"uid-{pod_name}", **extra)
        p["spec"]["resourceClaims"] = [{"name": "gpu", "resourceClaimName": "shared"}]
        return p

    objs = [
        factory.device_class("gpu"),
        factory.node("n"),
        factory.resource_slice("s", factory.gpus(2), node_name="n"),
        claim,
        user("running", nodeName="n"),
        user("b"),
        user("c"),
    ]
    plan_ = build_plan(expand_workloads(objs))
    assert [(r.decision.status, r.decision.node) for r in plan_.results] == [("Scheduled", "n")] * 2
    after = plan_.state.allocated.claims[("default", "shared")]
    assert [r["uid"] for r in after["status"]["reservedFor"]] == ["uid-running", "uid-b", "uid-c"]
    assert after["status"]["allocation"] == allocation


def test_rewrite_mode_table_names_each_pods_path() -> None:
    out = io.StringIO()
    assert run([EXAMPLES], "table", "binpack", out, io.StringIO(), None, "rewrite") == 0
    rows = [line.split() for line in out.getvalue().splitlines()[1:5]]
    assert [(r[0], r[1], r[2]) for r in rows] == [
        (f"default/demo-{i}", "rewrite", "dra-node") for i in range(4)
    ]


def test_in_rewrite_mode_a_pod_dra_cannot_hold_goes_to_the_device_plugin() -> None:
    objs = [
        factory.device_class("gpu", ext=GPU),
        factory.node("dra"),
        factory.resource_slice("s", factory.gpus(2), node_name="dra"),
        factory.node("dp", {GPU: 4}),
        pod("big", [container("c", {GPU: "3"})]),
        pod("small", [container("c", {GPU: "1"})]),
        pod("plain", [container("c", {"cpu": "1"})]),
    ]
    by_name = {str(p["name"]): p for p in rewrite_plan(objs)}
    assert (by_name["big"]["path"], by_name["big"]["node"]) == ("device-plugin", "dp")
    assert by_name["big"]["claims"] == []
    assert (by_name["small"]["path"], by_name["small"]["node"]) == ("rewrite", "dra")
    assert by_name["plain"]["path"] == "-"


def test_rewrite_mode_gives_init_containers_and_sidecars_upstreams_devices() -> None:
    objs = [
        factory.device_class("gpu", ext=GPU),
        factory.node("dra"),
        factory.resource_slice("s", factory.gpus(4), node_name="dra"),
        pod(
            "p",
            [container("app", {GPU: "1"})],
            init=[container("init", {GPU: "2"}), container("side", {GPU: "1"}, sidecar=True)],
        ),
    ]
    (p,) = rewrite_plan(objs)
    assert (p["path"], p["status"]) == ("rewrite", "Scheduled")
    counts = sorted(c["spec"]["devices"]["requests"][0]["exactly"]["count"] for c in p["claims"])
    # upstream's mapping: the init container runs before the sidecar and the app start, so its
    # two devices are theirs (one each): two claims of one device, two devices in all
    allocated = sum(len(c["status"]["allocation"]["devices"]["results"]) for c in p["claims"])
    assert counts == [1, 1]
    assert allocated == 2


def test_yaml_output_is_the_json_contract() -> None:
    out_json, out_yaml, err = io.StringIO(), io.StringIO(), io.StringIO()
    assert run([EXAMPLES], "json", "binpack", out_json, err) == 0
    assert run([EXAMPLES], "yaml", "binpack", out_yaml, err) == 0
    assert yaml.safe_load(out_yaml.getvalue()) == json.loads(out_json.getvalue())


def test_no_nodes_in_the_input_says_so(tmp_path: Path) -> None:
    path = write(tmp_path, "pods.yaml", [pod("p", [container("c", {"example.com/gpu": "1"})])])
    code, out, _ = plan([path])
    assert code == 1
    lines = out.splitlines()
    assert lines[0] == "no Nodes in the input: no pod can be scheduled"
    assert "no nodes available to schedule pods" in lines[3]  # kube-scheduler's words, not "0/0 ..."
    assert "0/0" not in out
    assert lines[-1] == "0 scheduled, 1 unschedulable, 0 errors"


def test_the_summary_counts_one_error_in_the_singular(tmp_path: Path) -> None:
    node = factory.node("n")
    cls = factory.device_class(
        "bad", ext="example.com/gpu", selectors=['device.attributes["d.example.com"].missing == 1']
    )
    sl = factory.resource_slice("s", [factory.device("a")], driver="d.example.com", node_name="n")
    write(tmp_path, "all.yaml", [node, cls, sl, pod("p", [container("c", {"example.com/gpu": "1"})])])
    code, out, _ = plan([tmp_path])
    assert code == 1
    assert out.splitlines()[-1] == "0 scheduled, 0 unschedulable, 1 error"


# -- volumes (issue 21) ------------------------------------------------------------------------------


def _gpu_statefulset_cluster(tmp: Path) -> Path:
    """GPU nodes in zones a (one GPU), b and c (two each); the default StorageClass
    (WaitForFirstConsumer, as on the big clouds) provisions in zones a and b only; the CSI driver
    attaches one volume to the node in zone b. A GPU StatefulSet of three claims ``data`` from a
    template naming no class, and a pod has a claim bound to a zone-c volume."""
    zone = "topology.kubernetes.io/zone"
    docs: list[Obj] = [factory.device_class("gpu.example.com", ext="example.com/gpu", selectors=["true"])]
    for z, gpus in (("a", 1), ("b", 2), ("c", 2)):
        docs += [
            factory.node(f"n-{z}", {"example.com/gpu": 0}, {zone: z}),
            factory.resource_slice(f"s-{z}", factory.gpus(gpus, prefix=f"n-{z}"), node_name=f"n-{z}"),
        ]
    docs += [
        {
            "apiVersion": "storage.k8s.io/v1",
            "kind": "StorageClass",
            "metadata": {
                "name": "standard-rwo",
                "annotations": {"storageclass.kubernetes.io/is-default-class": "true"},
            },
            "provisioner": "ebs.csi.aws.com",
            "volumeBindingMode": "WaitForFirstConsumer",
            "allowedTopologies": [{"matchLabelExpressions": [{"key": zone, "values": ["a", "b"]}]}],
        },
        {
            "apiVersion": "storage.k8s.io/v1",
            "kind": "CSINode",
            "metadata": {"name": "n-b"},
            "spec": {"drivers": [{"name": "ebs.csi.aws.com", "nodeID": "i-b", "allocatable": {"count": 1}}]},
        },
        {
            "apiVersion": "apps/v1",
            "kind": "StatefulSet",
            "metadata": {"name": "train", "namespace": "ml"},
            "spec": {
                "replicas": 3,
                "selector": {"matchLabels": {"app": "train"}},
                "template": {
                    "metadata": {"labels": {"app": "train"}},
                    "spec": {
                        "containers": [{"name": "c", "resources": {"requests": {"example.com/gpu": "1"}}}]
                    },
                },
                "volumeClaimTemplates": [
                    {
                        "metadata": {"name": "data"},
                        "spec": {
                            "accessModes": ["ReadWriteOnce"],
                            "resources": {"requests": {"storage": "100Gi"}},
                        },
                    }
                ],
            },
        },
        {
            "apiVersion": "v1",
            "kind": "PersistentVolume",
            "metadata": {"name": "zonal-c", "labels": {zone: "c"}},
            "spec": {
                "capacity": {"storage": "10Gi"},
                "csi": {"driver": "ebs.csi.aws.com", "volumeHandle": "vol-c"},
            },
            "status": {"phase": "Bound"},
        },
        {
            "apiVersion": "v1",
            "kind": "PersistentVolumeClaim",
            "metadata": {
                "name": "old-data",
                "namespace": "ml",
                "annotations": {"pv.kubernetes.io/bind-completed": "yes"},
            },
            "spec": {"volumeName": "zonal-c", "storageClassName": ""},
        },
        {
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {"name": "reader", "namespace": "ml"},
            "spec": {
                "containers": [{"name": "c"}],
                "volumes": [{"name": "d", "persistentVolumeClaim": {"claimName": "old-data"}}],
            },
        },
    ]
    return write(tmp, "cluster.yaml", docs)


def test_plan_places_a_gpu_statefulset_and_says_which_claims_get_which_node(tmp_path: Path) -> None:
    code, out, _ = plan([_gpu_statefulset_cluster(tmp_path)], "json")
    data = json.loads(out)
    pods = {p["name"]: p for p in data["pods"]}
    # n-c is outside the class's zones; n-b attaches one volume: the third replica has nowhere to go
    assert {n: (p["status"], p["node"]) for n, p in pods.items()} == {
        "train-0": ("Scheduled", pods["train-0"]["node"]),
        "train-1": ("Scheduled", pods["train-1"]["node"]),
        "train-2": ("Unschedulable", None),
        "reader": ("Scheduled", "n-c"),
    }
    # binpack fills n-a's one GPU first; n-b takes one volume; zone c provisions nothing
    assert (pods["train-0"]["node"], pods["train-1"]["node"]) == ("n-a", "n-b")
    for replica in ("train-0", "train-1"):
        assert pods[replica]["volumes"] == [
            {"claim": f"ml/data-{replica}", "selectedNode": pods[replica]["node"]}
        ]
    assert "volumes" not in pods["reader"]  # a bound claim: nothing for PreBind to do
    assert pods["train-2"]["message"] == (
        "0/3 nodes are available: 1 cannot allocate all claims, "
        "1 node(s) didn't find available persistent volumes to bind, 1 node(s) exceed max volume count."
    )
    assert code == 1
    code, table_out, _ = plan([tmp_path / "cluster.yaml"])
    rows = [line.split() for line in table_out.splitlines()]
    assert ["CLAIM", "POD", "NODE", "BINDING"] in rows
    for replica in ("train-0", "train-1"):
        node = pods[replica]["node"]
        assert [f"ml/data-{replica}", f"ml/{replica}", node, "selected-node", node] in rows


def test_plan_volumes_the_input_already_holds_and_static_binding(tmp_path: Path) -> None:
    """A claim the input gives stands for the StatefulSet's claim of that name; a claim of a class
    without a provisioner binds an available local volume on its node, and the next claim finds
    that volume taken."""
    host = "kubernetes.io/hostname"
    docs: list[Obj] = [
        factory.node("n1"),
        factory.node("n2"),
        {
            "apiVersion": "storage.k8s.io/v1",
            "kind": "StorageClass",
            "metadata": {"name": "local"},
            "provisioner": "kubernetes.io/no-provisioner",
            "volumeBindingMode": "WaitForFirstConsumer",
        },
        {
            "apiVersion": "v1",
            "kind": "PersistentVolume",
            "metadata": {"name": "local-n2"},
            "spec": {
                "capacity": {"storage": "50Gi"},
                "accessModes": ["ReadWriteOnce"],
                "storageClassName": "local",
                "nodeAffinity": {
                    "required": {
                        "nodeSelectorTerms": [
                            {"matchExpressions": [{"key": host, "operator": "In", "values": ["n2"]}]}
                        ]
                    }
                },
            },
            "status": {"phase": "Available"},
        },
        {
            "apiVersion": "apps/v1",
            "kind": "StatefulSet",
            "metadata": {"name": "db"},
            "spec": {
                "replicas": 2,
                "template": {"spec": {"containers": [{"name": "c"}]}},
                "volumeClaimTemplates": [
                    {
                        "metadata": {"name": "data"},
                        "spec": {
                            "storageClassName": "local",
                            "accessModes": ["ReadWriteOnce"],
                            "resources": {"requests": {"storage": "10Gi"}},
                        },
                    }
                ],
            },
        },
    ]
    data = json.loads(plan([write(tmp_path, "c.yaml", docs)], "json")[1])
    pods = {p["name"]: p for p in data["pods"]}
    assert (pods["db-0"]["node"], pods["db-0"]["volumes"]) == (
        "n2",
        [{"claim": "default/data-db-0", "volume": "local-n2"}],
    )
    assert pods["db-1"]["status"] == "Unschedulable"
    assert (
        pods["db-1"]["message"]
        == "0/2 nodes are available: 2 node(s) didn't find available persistent volumes to bind."
    )
    # the input's own claim, bound elsewhere, stands for db-1's claim
    docs.append(
        {
            "apiVersion": "v1",
            "kind": "PersistentVolumeClaim",
            "metadata": {"name": "data-db-1", "namespace": "default"},
            "spec": {"storageClassName": "", "volumeName": "gone"},
        }
    )
    data = json.loads(plan([write(tmp_path, "c.yaml", docs)], "json")[1])
    db1 = next(p for p in data["pods"] if p["name"] == "db-1")
    assert db1["message"] == "0/2 nodes are available: pod has unbound immediate PersistentVolumeClaims."


def test_a_plan_of_objects_without_storage_is_volume_blind_unless_told_they_are_whole() -> None:
    """``kubectl draxr plan`` reads the live cluster without its claims: a pending pod with a claim is
    planned as before volumes were known. ``draxr plan`` says its input is the whole cluster: a claim
    it does not hold is missing."""
    p = pod("p", [container("c")])
    p["spec"]["volumes"] = [{"name": "d", "persistentVolumeClaim": {"claimName": "data"}}]
    objects = expand_workloads([factory.node("n"), p])
    assert build_plan(objects).results[0].decision.node == "n"
    whole = build_plan(objects, whole_storage=True).results[0].decision
    assert whole.message == '0/1 nodes are available: persistentvolumeclaim "data" not found.'


def test_plan_shows_whom_a_high_priority_pod_would_preempt_and_why(tmp_path: Path) -> None:
    """Issue 21: a full node of low-priority GPU pods, a high-priority one pending: the plan names
    the node it would be nominated to and the fewest, lowest victims (a PDB'd pod spared)."""
    node = factory.node("n", {"example.com/gpu": 0})
    cls = factory.device_class("gpu", ext="example.com/gpu", selectors=['device.driver == "d.example.com"'])
    sl = factory.resource_slice("s", factory.gpus(3), driver="d.example.com", node_name="n")

    def running(pod_name: str, prio: int, device: str, **labels: str) -> list[Obj]:
        p = pod(pod_name, [container("c", {"example.com/gpu": "1"})], priority=prio, nodeName="n")
        p["metadata"]["labels"] = dict(labels)
        claim = {
            "apiVersion": "resource.k8s.io/v1",
            "kind": "ResourceClaim",
            "metadata": {"name": f"{pod_name}-gpu", "namespace": "default"},
            "spec": {"devices": {"requests": [{"name": "r", "exactly": {"deviceClassName": "gpu"}}]}},
            "status": {
                "allocation": {
                    "devices": {
                        "results": [
                            {"request": "r", "driver": "d.example.com", "pool": "n", "device": device}
                        ]
                    }
                },
                "reservedFor": [{"resource": "pods", "name": pod_name, "uid": f"uid-{pod_name}"}],
            },
        }
        p["spec"]["resourceClaims"] = [{"name": "gpu", "resourceClaimName": f"{pod_name}-gpu"}]
        return [p, claim]

    budget = {
        "apiVersion": "policy/v1",
        "kind": "PodDisruptionBudget",
        "metadata": {"name": "keep", "namespace": "default"},
        "spec": {"selector": {"matchLabels": {"app": "keep"}}},
        "status": {"disruptionsAllowed": 0},
    }
    high = pod("train", [container("c", {"example.com/gpu": "2"})], priority=1000)
    docs = [
        node, cls, sl, budget,
        *running("a", 0, "gpu-0", app="keep"), *running("b", 0, "gpu-1"), *running("c", 10, "gpu-2"),
        high,
    ]  # fmt: skip
    write(tmp_path, "all.yaml", docs)
    code, out, _ = plan([tmp_path], "json")
    assert code == 1
    (train,) = json.loads(out)["pods"]
    assert train["preemption"] == {
        "nominatedNodeName": "n",
        "victims": [
            {"namespace": "default", "name": "c", "priority": 10},
            {"namespace": "default", "name": "b", "priority": 0},
        ],
        "pdbViolations": 0,
        "message": "preemption: found a potential placement for pod on node n, preempting 2 victims",
    }
    _, table_out, _ = plan([tmp_path])
    assert "preempting 2 victims: default/c, default/b" in table_out


# -- pod placement (issue 21): what plan reads of pods and Namespaces ------------------------------

GPU = "example.com/gpu"


def gpu_cluster(nodes: int = 3) -> list[Obj]:
    """``nodes`` nodes with two GPUs each, in zone z<i>."""
    docs: list[Obj] = [
        factory.device_class("gpu.example.com", ext=GPU, selectors=['device.driver == "gpu.example.com"'])
    ]
    for i in range(nodes):
        docs.append(factory.node(f"n{i}", {GPU: 0}, {"topology.kubernetes.io/zone": f"z{i}"}))
        docs.append(factory.resource_slice(f"s{i}", factory.gpus(2, f"n{i}"), node_name=f"n{i}"))
    return docs


def anti_affine(term: Obj, labels: dict[str, str] | None = None, replicas: int = 3) -> Obj:
    return {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": "infer", "namespace": "ml"},
        "spec": {
            "replicas": replicas,
            "template": {
                "metadata": {"labels": labels or {"app": "infer"}},
                "spec": {
                    "containers": [{"name": "c", "resources": {"requests": {GPU: "1"}}}],
                    "affinity": {
                        "podAntiAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [term]}
                    },
                },
            },
        },
    }


HOSTNAME_TERM: Obj = {
    "labelSelector": {"matchLabels": {"app": "infer"}},
    "topologyKey": "kubernetes.io/hostname",
}


def test_replicas_with_required_anti_affinity_take_a_node_each(tmp_path: Path) -> None:
    write(tmp_path, "all.yaml", [*gpu_cluster(2), anti_affine(HOSTNAME_TERM)])
    code, out, _ = plan([tmp_path], "json")
    pods = json.loads(out)["pods"]
    assert code == 1
    assert sorted(p["node"] for p in pods[:2]) == ["n0", "n1"]
    assert pods[2]["status"] == "Unschedulable"
    assert pods[2]["message"] == "0/2 nodes are available: 2 node(s) didn't match pod anti-affinity rules."


def running(name: str, node: str, ns: str, labels: dict[str, str]) -> Obj:
    p = pod(name, [container("c", {"cpu": "100m"})], namespace=ns, nodeName=node)
    p["metadata"]["labels"] = labels
    return p


def test_namespaces_reach_the_namespace_selector(tmp_path: Path) -> None:
    """A running app=infer pod on n0 in a namespace labelled team=a: a term selecting team=a namespaces
    keeps every replica off n0 only when the Namespace is in the input."""
    term = {**HOSTNAME_TERM, "namespaceSelector": {"matchLabels": {"team": "a"}}}
    ns = {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "team-a", "labels": {"team": "a"}}}
    docs = [*gpu_cluster(3), running("old", "n0", "team-a", {"app": "infer"}), anti_affine(term, replicas=2)]
    write(tmp_path, "all.yaml", [*docs, ns])
    data = json.loads(plan([tmp_path], "json")[1])
    assert "n0" not in [p["node"] for p in data["pods"]]
    write(tmp_path, "all.yaml", docs)
    data = json.loads(plan([tmp_path], "json")[1])
    assert "n0" in [p["node"] for p in data["pods"]]


def test_match_label_keys_are_merged_as_the_apiserver_does(tmp_path: Path) -> None:
    """The replicas' anti-affinity has ``matchLabelKeys: [version]``: a running app=infer pod of
    another version does not repel them (kube-apiserver merged ``version In (v2)`` into the selector);
    one of the same version does."""
    term = {**HOSTNAME_TERM, "matchLabelKeys": ["version"]}
    labels = {"app": "infer", "version": "v2"}
    for version, n0_used in (("v1", True), ("v2", False)):
        old = running("old", "n0", "ml", {"app": "infer", "version": version})
        write(tmp_path, "all.yaml", [*gpu_cluster(3), old, anti_affine(term, labels, replicas=3)])
        nodes = [p["node"] for p in json.loads(plan([tmp_path], "json")[1])["pods"]]
        assert ("n0" in nodes) is n0_used, (version, nodes)


def test_a_nominated_pending_pod_keeps_its_room(tmp_path: Path) -> None:
    """A pending pod nominated to n0 asks for both of its GPUs: the pods of equal priority planned
    before it leave them free (without the nomination they would take n0, binpack's first choice),
    and it gets them."""
    big = pod("big", [container("c", {GPU: "2"})])
    big["status"] = {"nominatedNodeName": "n0"}
    small = [pod(f"small-{i}", [container("c", {GPU: "1"})]) for i in range(2)]
    write(tmp_path, "all.yaml", [*gpu_cluster(2), *small, big])
    data = json.loads(plan([tmp_path], "json")[1])
    assert {p["name"]: p["node"] for p in data["pods"]} == {"small-0": "n1", "small-1": "n1", "big": "n0"}
    del big["status"]
    write(tmp_path, "all.yaml", [*gpu_cluster(2), *small, big])
    data = json.loads(plan([tmp_path], "json")[1])
    assert {p["name"]: p["node"] for p in data["pods"]} == {"small-0": "n0", "small-1": "n0", "big": "n1"}


def test_a_zone_spread_puts_the_replicas_in_every_zone(tmp_path: Path) -> None:
    """Three replicas with a DoNotSchedule zone spread (maxSkew 1) over three single-node zones: one
    per zone; without the spread binpack fills n0 first."""
    spread = {
        "maxSkew": 1,
        "topologyKey": "topology.kubernetes.io/zone",
        "whenUnsatisfiable": "DoNotSchedule",
        "labelSelector": {"matchLabels": {"app": "infer"}},
    }
    deployment = anti_affine(HOSTNAME_TERM)
    template = deployment["spec"]["template"]["spec"]
    del template["affinity"]
    write(tmp_path, "all.yaml", [*gpu_cluster(3), deployment])
    nodes = [p["node"] for p in json.loads(plan([tmp_path], "json")[1])["pods"]]
    assert nodes.count("n0") == 2
    template["topologySpreadConstraints"] = [spread]
    write(tmp_path, "all.yaml", [*gpu_cluster(3), deployment])
    nodes = [p["node"] for p in json.loads(plan([tmp_path], "json")[1])["pods"]]
    assert sorted(nodes) == ["n0", "n1", "n2"]


def _shared_gpu_docs() -> list[Obj]:
    cls = factory.device_class("gpu.example.com", ext="example.com/gpu")
    cls["metadata"]["annotations"] = {"draxr.io/capacity-requests": '{"requests": {"memory": "10Gi"}}'}
    gpu = factory.device("gpu-0", capacity={"memory": {"value": "40Gi"}}, allowMultipleAllocations=True)
    pods = [pod(f"p{i}", [container("c", {"example.com/gpu": 1})]) for i in range(4)]
    return [factory.node("n"), cls, factory.resource_slice("n-gpus", [gpu], node_name="n", pool="n"), *pods]


def test_plan_shows_each_pods_share_of_a_shared_device(tmp_path: Path) -> None:
    """Issue 23: ``draxr plan`` shows shares, in both modes (four pods, one 40Gi device)."""
    path = write(tmp_path, "shared.yaml", _shared_gpu_docs())
    code, out, _ = plan([path])
    assert code == 0, out
    rows = [line.split(None, 3) for line in out.splitlines()[1:5]]
    assert [r[3].split("  ")[0] for r in rows] == ["n/gpu-0 (share memory=10Gi)"] * 4
    for mode in ("native", "rewrite"):
        buf = io.StringIO()
        assert run([path], "json", "binpack", buf, io.StringIO(), None, mode) == 0
        pods = json.loads(buf.getvalue())["pods"]
        if mode == "native":
            results = [r for p in pods for r in p["claim"]["status"]["allocation"]["devices"]["results"]]
        else:
            results = [
                r for p in pods for c in p["claims"] for r in c["status"]["allocation"]["devices"]["results"]
            ]
        assert [(r["device"], r["consumedCapacity"]) for r in results] == [("gpu-0", {"memory": "10Gi"})] * 4
        assert len({r["shareID"] for r in results}) == 4


def _fabric(tmp: Path) -> Path:
    """One node with a plain GPU and a fabric-attached one whose binding waits for ``Attached``."""
    attachable = factory.device(
        "fabric-0",
        bindingConditions=["gpu.example.com/Attached"],
        bindingFailureConditions=["gpu.example.com/AttachFailed"],
        bindsToNode=True,
    )
    return write(
        tmp,
        "fabric.yaml",
        [
            factory.node("n1"),
            factory.device_class("gpu.example.com", "example.com/gpu"),
            factory.resource_slice("local", factory.gpus(1), node_name="n1", pool="local"),
            factory.resource_slice("fabric", [attachable], pool="fabric", allNodes=True),
            pod("a", [container("c", {"example.com/gpu": 1})]),
            pod("b", [container("c", {"example.com/gpu": 1})]),
        ],
    )


def test_plan_shows_a_device_that_will_wait_for_binding_conditions(tmp_path: Path) -> None:
    path = _fabric(tmp_path)
    code, out, _ = plan([path])
    assert code == 0
    rows = {line.split()[0]: line for line in out.splitlines() if line.startswith("default/")}
    assert "local/gpu-0" in rows["default/a"]  # the plain device first
    assert "waits for binding" not in rows["default/a"]
    assert "fabric/fabric-0 (waits for binding conditions: gpu.example.com/Attached)" in rows["default/b"]
    code, out, _ = plan([path], "json")
    pods = {p["name"]: p for p in json.loads(out)["pods"]}
    assert pods["a"]["bindingConditions"] == []
    assert pods["b"]["bindingConditions"] == [
        {
            "device": "gpu.example.com/fabric/fabric-0",
            "conditions": ["gpu.example.com/Attached"],
            "failureConditions": ["gpu.example.com/AttachFailed"],
        }
    ]
    allocation = pods["b"]["claim"]["status"]["allocation"]
    assert allocation["devices"]["results"][0]["bindingConditions"] == ["gpu.example.com/Attached"]
    assert allocation["nodeSelector"]["nodeSelectorTerms"][0]["matchFields"][0]["values"] == ["n1"]


def test_in_rewrite_mode_a_device_with_binding_conditions_is_never_picked(tmp_path: Path) -> None:
    out, err = io.StringIO(), io.StringIO()
    code = run([_fabric(tmp_path)], "json", "binpack", out, err, mode="rewrite")
    assert code == 1
    pods = {p["name"]: p for p in json.loads(out.getvalue())["pods"]}
    assert pods["a"]["node"] == "n1"
    assert pods["b"]["node"] is None


def _gang_input(min_count: int, members: int, gpus: int) -> list[Obj]:
    node, cls = factory.node("n"), factory.device_class("gpu", ext="example.com/gpu")
    sl = factory.resource_slice("s", factory.gpus(4), driver="d.example.com", node_name="n")
    group: Obj = {
        "apiVersion": "scheduling.k8s.io/v1beta1",
        "kind": "PodGroup",
        "metadata": {"name": "train", "namespace": "default"},
        "spec": {"schedulingPolicy": {"gang": {"minCount": min_count}}},
    }
    pods = [
        pod(
            f"m{i}",
            [container("c", {"example.com/gpu": str(gpus)})],
            schedulingGroup={"podGroupName": "train"},
        )
        for i in range(members)
    ]
    return [node, cls, sl, group, *pods]


def test_a_gang_is_placed_whole_as_the_worker_places_it(tmp_path: Path) -> None:
    write(tmp_path, "all.yaml", _gang_input(2, 2, 2))
    code, out, _ = plan([tmp_path], "json")
    data = json.loads(out)
    assert code == 0
    assert [(x["name"], x["status"], x["podGroup"]) for x in data["pods"]] == [
        ("m0", "Scheduled", "default/train"),
        ("m1", "Scheduled", "default/train"),
    ]
    devices = {
        r["device"] for x in data["pods"] for r in x["claim"]["status"]["allocation"]["devices"]["results"]
    }
    assert len(devices) == 4


def test_a_gang_that_cannot_fit_places_nobody_and_says_why(tmp_path: Path) -> None:
    write(tmp_path, "all.yaml", _gang_input(3, 3, 2))
    code, out, _ = plan([tmp_path], "json")
    data = json.loads(out)
    assert code == 1
    assert [x["status"] for x in data["pods"]] == ["Unschedulable"] * 3
    assert all(x["claim"] is None for x in data["pods"])
    assert any("pod group is unschedulable" in x["message"] for x in data["pods"])


def test_a_gang_short_of_min_count_waits_for_its_pods(tmp_path: Path) -> None:
    write(tmp_path, "all.yaml", _gang_input(3, 2, 1))
    _, out, _ = plan([tmp_path], "json")
    assert {x["message"] for x in json.loads(out)["pods"]} == {
        "waiting for minCount pods from a gang to appear in scheduling queue"
    }
