"""``draxr validate -f``: the webhook's checks on manifest files, findings and exit codes."""

from __future__ import annotations

import io
from pathlib import Path

import pytest
import yaml

from tests.admission.builders import GPU, device_class, gpu_pod, mapping, special_claim, with_mapping
from webhook.cli import main
from webhook.commands.validate import run
from webhook.core.objects import Obj

EXAMPLES = Path(__file__).resolve().parents[2] / "examples" / "kep-5004"


def _write(path: Path, *docs: Obj) -> Path:
    path.write_text(yaml.safe_dump_all(docs, sort_keys=False))
    return path


def _run(*paths: Path) -> tuple[int, list[str], str]:
    out, err = io.StringIO(), io.StringIO()
    code = run(list(paths), out, err)
    return code, out.getvalue().splitlines(), err.getvalue()


def test_the_kep_example_passes() -> None:
    code, lines, err = _run(EXAMPLES)
    assert (code, lines, err) == (0, ["ok: 2 objects checked, 0 denied, 0 warnings"], "")


def test_a_name_declared_twice_is_a_finding_on_both(tmp_path: Path) -> None:
    f = _write(tmp_path / "classes.yaml", device_class("gpu-a", GPU), device_class("gpu-b", GPU))
    code, lines, _ = _run(f)
    assert code == 1
    assert lines == [
        f'{f}: document 0: DeviceClass gpu-a: spec.extendedResourceName: Duplicate value: "example.com/gpu": '
        'already declared by DeviceClass "gpu-b"',
        f'{f}: document 1: DeviceClass gpu-b: spec.extendedResourceName: Duplicate value: "example.com/gpu": '
        'already declared by DeviceClass "gpu-a"',
        "denied: 2 objects checked, 2 denied, 0 warnings",
    ]


def test_invalid_names_and_warnings(tmp_path: Path) -> None:
    f = _write(tmp_path / "c.yaml", device_class("c", "example.com"), device_class("x" * 64))
    code, lines, _ = _run(f)
    assert code == 1
    assert lines == [
        f'{f}: document 0: DeviceClass c: spec.extendedResourceName: Invalid value: "example.com": must be a '
        "valid extended resource name",
        f"{f}: document 0: DeviceClass c: warning: spec.extendedResourceName: a name must be a "
        "domain-prefixed path, such as 'example.com/my-prop'",
        f"{f}: document 1: DeviceClass {'x' * 64}: warning: implicit name "
        "deviceclass.resource.kubernetes.io/<name> unusable in pods: name part must be no more than 63 bytes",
        "denied: 2 objects checked, 1 denied, 2 warnings",
    ]


def test_warnings_alone_do_not_fail(tmp_path: Path) -> None:
    f = _write(tmp_path / "c.yaml", device_class("x" * 64))
    code, lines, _ = _run(f)
    assert code == 0
    assert lines[-1] == "ok: 1 object checked, 0 denied, 1 warning"


def test_pods_and_workload_templates(tmp_path: Path) -> None:
    deployment = yaml.safe_load((EXAMPLES / "deployment.yaml").read_text())
    deployment["spec"]["replicas"] = 0  # checked even when it scales to zero
    deployment["spec"]["template"]["spec"]["containers"][0]["resources"]["limits"][GPU] = "0.5"
    classes = _write(tmp_path / "a-classes.yaml", yaml.safe_load((EXAMPLES / "deviceclass.yaml").read_text()))
    workloads = _write(tmp_path / "b-workloads.yaml", deployment, gpu_pod("p", "-1"))
    code, lines, _ = _run(tmp_path)
    assert code == 1
    assert lines == [
        f"{workloads}: document 0: Deployment default/demo (pod template): "
        f"spec.containers[0].resources.limits[{GPU}]: Invalid value: 500m: must be an integer",
        f"{workloads}: document 1: Pod default/p: spec.containers[0].resources.requests[{GPU}]: "
        'Invalid value: "-1": must be greater than or equal to 0',
        "denied: 3 objects checked, 2 denied, 0 warnings",
    ]
    assert classes.exists()


def test_a_pod_carrying_a_mapping(tmp_path: Path) -> None:
    bad = with_mapping(gpu_pod("p", 1), mapping("c", request="Bad_Request"))
    good = with_mapping(gpu_pod("q", 1), mapping("c"))
    f = _write(tmp_path / "pods.yaml", bad, good)
    code, lines, _ = _run(f)
    assert code == 1
    assert len(lines) == 2
    assert lines[0].startswith(
        f"{f}: document 0: Pod default/p: status.extendedResourceClaimStatus.requestName: "
        'Invalid value: "Bad_Request"'
    )


def test_extended_resource_claims(tmp_path: Path) -> None:
    owner = gpu_pod("p")
    first = special_claim("p-extended-resources-aaaaa", owner)
    second = special_claim("p-extended-resources-bbbbb", owner)
    broken = special_claim("q-extended-resources-ccccc", gpu_pod("q"))
    broken["spec"]["devices"]["requests"][0]["exactly"]["adminAccess"] = True
    ordinary = special_claim("mine", owner, annotation=None)
    f = _write(tmp_path / "claims.yaml", first, second, broken, ordinary)
    code, lines, _ = _run(f)
    assert code == 1
    assert lines == [
        f"{f}: document 1: ResourceClaim default/p-extended-resources-bbbbb: "
        'metadata.ownerReferences[0].uid: Duplicate value: "uid-p": '
        'Pod "p" already has the extended resource claim "p-extended-resources-aaaaa"',
        f"{f}: document 2: ResourceClaim default/q-extended-resources-ccccc: "
        "spec.devices.requests[0].exactly.adminAccess: Forbidden: admin access is not allowed in an extended "
        "resource claim",
        "denied: 3 objects checked, 2 denied, 0 warnings",
    ]


def test_list_items_are_located(tmp_path: Path) -> None:
    f = _write(
        tmp_path / "list.yaml", {"apiVersion": "v1", "kind": "List", "items": [device_class("c", "bad")]}
    )
    _, lines, _ = _run(f)
    assert lines[0].startswith(f"{f}: document 0: item 0: DeviceClass c: spec.extendedResourceName: ")


@pytest.mark.parametrize(
    ("content", "message"),
    [
        ("kind: [", "document 0: line 2, column 1: did not find expected node content"),
        ("apiVersion: v1\nkind: Pod\nmetadata: {name: p}\nspec: {containers: 3}\n", "spec.containers"),
    ],
)
def test_unusable_input_exits_2(tmp_path: Path, content: str, message: str) -> None:
    f = tmp_path / "bad.yaml"
    f.write_text(content)
    code, lines, err = _run(f)
    assert (code, lines) == (2, [])
    assert err.startswith(f"draxr validate: error: {f}: ")
    assert message in err


def test_a_missing_path_exits_2(tmp_path: Path) -> None:
    code, _, err = _run(tmp_path / "nope.yaml")
    assert code == 2
    assert err == f"draxr validate: error: {tmp_path / 'nope.yaml'}: no such file or directory\n"


def test_the_cli_runs_it(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    f = _write(tmp_path / "c.yaml", device_class("c", "bad"))
    assert main(["validate", "-f", str(f)]) == 1
    assert capsys.readouterr().out.endswith("denied: 1 object checked, 1 denied, 1 warning\n")
