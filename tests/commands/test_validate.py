"""``draxr validate -f``: the webhook's checks on manifest files, findings and exit codes."""

from __future__ import annotations

import io
from pathlib import Path

import pytest
import yaml

from tests.admission.builders import GPU, device_class, gpu_pod, mapping, special_claim, with_mapping
from tests.core.cel.cases import TOO_COMPLEX
from webhook.cli import main
from webhook.commands import convert
from webhook.commands.validate import run
from webhook.core.api.objects import Obj
from webhook.core.paths.explain import quota_warning
from webhook.loader import POD_TEMPLATES

EXAMPLES = Path(__file__).resolve().parents[2] / "examples" / "kep-5004"


def _write(path: Path, *docs: Obj) -> Path:
    path.write_text(yaml.safe_dump_all(docs, sort_keys=False))
    return path


def _run(*paths: Path, release: str = "1.36") -> tuple[int, list[str], str]:
    out, err = io.StringIO(), io.StringIO()
    code = run(list(paths), out, err, kubernetes_version=release)
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


def _workload(api_version: str, kind: str, path: tuple[str, ...], pod: Obj) -> Obj:
    """A ``kind`` named ``w`` holding ``pod``'s spec at ``path`` (its pod template)."""
    obj: Obj = {"apiVersion": api_version, "kind": kind, "metadata": {"name": "w"}}
    node = obj
    for key in path:
        node = node.setdefault(key, {})
    node["spec"] = pod["spec"]
    return obj


@pytest.mark.parametrize(("api_version", "kind"), [k for k in POD_TEMPLATES if k[1] != "Pod"])
def test_every_workload_convert_reads_is_checked(tmp_path: Path, api_version: str, kind: str) -> None:
    """``validate`` checks the pod template of every workload ``convert`` rewrites (a DaemonSet's
    and a CronJob's too), with the same finding."""
    classes = _write(tmp_path / "a-classes.yaml", yaml.safe_load((EXAMPLES / "deviceclass.yaml").read_text()))
    path = POD_TEMPLATES[(api_version, kind)]
    f = _write(tmp_path / "b-workload.yaml", _workload(api_version, kind, path, gpu_pod("p", "0.5")))
    finding = f"spec.containers[0].resources.requests[{GPU}]: Invalid value: 500m: must be an integer"
    code, lines, _ = _run(tmp_path)
    assert code == 1
    assert lines == [
        f"{f}: document 0: {kind} default/w (pod template): {finding}",
        "denied: 2 objects checked, 1 denied, 0 warnings",
    ]
    out, err = io.StringIO(), io.StringIO()
    assert convert.run([f], out, err, classes=[str(classes)]) == 2
    assert err.getvalue() == f"draxr convert: error: {f}: document 0: {kind} w: {'.'.join(path)}.{finding}\n"


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


# --- ResourceQuota: the webhook's warning, offline -----------------------------------------------------


def _quota(name: str, namespace: str, **hard: str) -> Obj:
    return {
        "apiVersion": "v1",
        "kind": "ResourceQuota",
        "metadata": {"name": name, "namespace": namespace},
        "spec": {"hard": hard},
    }


@pytest.mark.parametrize(
    ("release", "warned"), [("1.34", True), ("1.35", True), ("1.36", False), ("1.37", False)]
)
def test_a_quota_on_the_name_but_not_on_the_class_is_reported_where_claims_escape_it(
    tmp_path: Path, release: str, warned: bool
) -> None:
    """From 1.36 (the gate on as shipped) the claims of a class that names the resource in
    ``spec.extendedResourceName`` are charged ``requests.<name>`` (``resource_claims.go``
    ``addExtendedResourceQuota``): a rewritten pod stays limited, and no warning is due."""
    dc = yaml.safe_load((EXAMPLES / "deviceclass.yaml").read_text())
    gpu_key = "gpu.example.com.deviceclass.resource.k8s.io/devices"
    f = _write(
        tmp_path / "q.yaml",
        dc,
        _quota("compute", "team-a", **{"requests.example.com/gpu": "4", "cpu": "8"}),
        _quota("also", "team-a", **{"requests.example.com/gpu": "8"}),  # one warning per namespace
        _quota("compute", "team-b", **{"requests.example.com/gpu": "4"}),
        _quota("devices", "team-b", **{gpu_key: "4"}),  # quotas of a namespace add up
        _quota("cpu-only", "team-c", cpu="8"),
    )
    code, lines, err = _run(f, release=release)
    assert (code, err) == (0, "")
    warning = (
        f"{f}: document 1: ResourceQuota team-a/compute: warning: quota on example.com/gpu does not limit "
        f"rewritten pods; add {gpu_key}"
    )
    if warned:
        assert lines == [warning, "ok: 6 objects checked, 0 denied, 1 warning"]
    else:
        assert lines == ["ok: 6 objects checked, 0 denied, 0 warnings"]


def test_quota_on_an_implicit_name_and_on_a_name_from_the_annotation(tmp_path: Path) -> None:
    annotated = {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "DeviceClass",
        "metadata": {"name": "nic", "annotations": {"draxr.io/extended-resource-name": "example.com/nic"}},
        "spec": {},
    }
    f = _write(
        tmp_path / "q.yaml",
        annotated,
        _quota(
            "q",
            "default",
            **{"requests.example.com/nic": "1", "requests.deviceclass.resource.kubernetes.io/nic": "1"},
        ),
    )
    code, lines, _ = _run(f)
    assert code == 0
    # Word for word the webhook's admission warning (120 characters at most, so it may be cut).
    where = f"{f}: document 1: ResourceQuota default/q: warning: "
    assert lines[:2] == [
        where + quota_warning("deviceclass.resource.kubernetes.io/nic", "nic"),
        where + quota_warning("example.com/nic", "nic"),
    ]
    assert quota_warning("example.com/nic", "nic").endswith("add nic.deviceclass.resource.k8s.io/devices")


# --- --strict ---------------------------------------------------------------------------------------------


def _strict(*paths: Path | str, version: str = "1.36") -> tuple[int, list[str], str]:
    out, err = io.StringIO(), io.StringIO()
    code = run(list(paths), out, err, strict=True, kubernetes_version=version)
    return code, out.getvalue().splitlines(), err.getvalue()


def test_strict_passes_the_kep_example_for_every_version() -> None:
    for version in ("1.34", "1.35", "1.36", "1.37"):
        code, lines, err = _strict(EXAMPLES, version=version)
        assert (code, err) == (0, "")
        assert lines == ["ok: 5 objects checked, 0 denied, 0 warnings"]  # nodes and slices too


def test_strict_rejects_unknown_fields(tmp_path: Path) -> None:
    dc = device_class("gpu")
    dc["spec"]["extendedResourceNam"] = GPU
    f = _write(tmp_path / "typo.yaml", dc)
    assert _run(f)[0] == 0  # the webhook's checks alone do not see it
    code, lines, _ = _strict(f)
    assert code == 1
    assert lines == [
        f"{f}: document 0: DeviceClass gpu: spec.extendedResourceNam: Forbidden: unknown field (not in the "
        "Kubernetes 1.36 schema)",
        "denied: 1 object checked, 1 denied, 0 warnings",
    ]


def test_strict_checks_types_required_fields_and_served_versions(tmp_path: Path) -> None:
    deployment = yaml.safe_load((EXAMPLES / "deployment.yaml").read_text())
    del deployment["spec"]["selector"]
    deployment["spec"]["paused"] = "yes"
    rule = {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "DeviceTaintRule",
        "metadata": {"name": "r"},
        "spec": {"taint": {"key": "k", "effect": "NoSchedule"}},
    }
    widget = {"apiVersion": "example.com/v1", "kind": "Widget", "metadata": {"name": "w"}}
    f = _write(tmp_path / "w.yaml", deployment, rule, widget)
    code, lines, _ = _strict(f, version="1.36")
    assert code == 1
    assert lines == [
        f"{f}: document 0: Deployment default/demo: "
        'spec.paused: Invalid value: "yes": must be of type boolean',
        f"{f}: document 0: Deployment default/demo: spec.selector: Required value",
        f"{f}: document 1: DeviceTaintRule r: "
        'apiVersion: Invalid value: "resource.k8s.io/v1": Kubernetes 1.36 serves no DeviceTaintRule in '
        "resource.k8s.io/v1",
        f"{f}: document 2: Widget w: warning: "
        "example.com/v1 Widget is not a Kubernetes 1.36 type: its schema is not checked",
        "denied: 3 objects checked, 2 denied, 1 warning",
    ]
    code, lines, _ = _strict(f, version="1.37")  # resource.k8s.io/v1 DeviceTaintRule is 1.37's
    assert [line for line in lines if "DeviceTaintRule" in line] == []


def _claim(request: Obj) -> Obj:
    """ResourceClaim default/c asking for ``request``."""
    return {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "ResourceClaim",
        "metadata": {"name": "c", "namespace": "default"},
        "spec": {"devices": {"requests": [request]}},
    }


def test_strict_compiles_every_cel_expression(tmp_path: Path) -> None:
    dc = device_class("gpu", None, ['device.driver == "a"', "device.driver =="])
    claim = _claim(
        {
            "name": "r",
            "firstAvailable": [
                {"name": "s", "deviceClassName": "gpu", "selectors": [{"cel": {"expression": "nope"}}]}
            ],
        }
    )
    template = {
        "apiVersion": "resource.k8s.io/v1beta1",
        "kind": "ResourceClaimTemplate",
        "metadata": {"name": "t", "namespace": "default"},
        "spec": {
            "spec": {
                "devices": {
                    "requests": [
                        {
                            "name": "r",
                            "deviceClassName": "gpu",
                            "selectors": [{"cel": {"expression": "1 + 1"}}],
                        }
                    ]
                }
            }
        },
    }
    f = _write(tmp_path / "cel.yaml", dc, claim, template)
    code, lines, _ = _strict(f)
    assert code == 1
    assert len(lines) == 4
    assert lines[0].startswith(
        f"{f}: document 0: DeviceClass gpu: "
        'spec.selectors[1].cel.expression: Invalid value: "device.driver ==": compilation failed: '
    )
    assert lines[1].startswith(
        f"{f}: document 1: ResourceClaim default/c: "
        'spec.devices.requests[0].firstAvailable[0].selectors[0].cel.expression: Invalid value: "nope": '
    )
    assert lines[2].startswith(
        f"{f}: document 2: ResourceClaimTemplate default/t: "
        'spec.spec.devices.requests[0].selectors[0].cel.expression: Invalid value: "1 + 1": '
    )
    assert lines[3] == "denied: 3 objects checked, 3 denied, 0 warnings"


def test_strict_refuses_a_selector_over_the_estimated_cost_limit(tmp_path: Path) -> None:
    dc = device_class("gpu", None, ['device.driver == "a"', TOO_COMPLEX])
    claim = _claim(
        {
            "name": "r",
            "exactly": {"deviceClassName": "gpu", "selectors": [{"cel": {"expression": TOO_COMPLEX}}]},
        }
    )
    f = _write(tmp_path / "cost.yaml", dc, claim)
    code, lines, _ = _strict(f)
    assert code == 1
    assert lines == [
        f"{f}: document 0: DeviceClass gpu: "
        "spec.selectors[1].cel.expression: Forbidden: too complex, exceeds cost limit",
        f"{f}: document 1: ResourceClaim default/c: "
        "spec.devices.requests[0].exactly.selectors[0].cel.expression: Forbidden: too complex, "
        "exceeds cost limit",
        "denied: 2 objects checked, 2 denied, 0 warnings",
    ]


def test_empty_input_is_an_error_with_strict_and_a_warning_without(tmp_path: Path) -> None:
    (tmp_path / "notes.yaml").write_text("# nothing here yet\n")
    code, lines, err = _strict(tmp_path)
    assert (code, lines, err) == (2, [], f"draxr validate: error: {tmp_path}: no objects to validate\n")
    code, lines, err = _run(tmp_path)
    assert (code, err) == (0, "")
    assert lines == [
        f"{tmp_path}: warning: no objects to validate (--strict makes this an error)",
        "ok: 0 objects checked, 0 denied, 1 warning",
    ]


def _stdin(monkeypatch: pytest.MonkeyPatch, data: bytes) -> None:
    monkeypatch.setattr("sys.stdin", io.TextIOWrapper(io.BytesIO(data)))


def test_dash_reads_standard_input(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    _stdin(monkeypatch, yaml.safe_dump(device_class("c", "bad")).encode())
    assert main(["validate", "-f", "-", "--strict", "--kubernetes-version", "1.34"]) == 1
    out = capsys.readouterr().out
    assert out.startswith("<stdin>: document 0: DeviceClass c: spec.extendedResourceName: Invalid value:")
    _stdin(monkeypatch, b"")
    assert main(["validate", "-f", "-", "--strict"]) == 2
    assert capsys.readouterr().err == "draxr validate: error: -: no objects to validate\n"


def test_unreadable_standard_input(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    _stdin(monkeypatch, b"\xff\xfeapiVersion: v1")
    assert main(["validate", "-f", "-"]) == 2
    assert capsys.readouterr().err == "draxr validate: error: <stdin>: not UTF-8 text (byte 0)\n"


def test_kubernetes_version_chooses_the_quota_rules_without_strict(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    quota = _quota("q", "a", **{f"requests.{GPU}": "1"})
    f = _write(tmp_path / "q.yaml", device_class("gpu.example.com", GPU), quota)
    assert main(["validate", "-f", str(f), "--kubernetes-version", "1.35"]) == 0
    assert capsys.readouterr().out.endswith("ok: 2 objects checked, 0 denied, 1 warning\n")
    assert main(["validate", "-f", str(f), "--kubernetes-version", "1.37"]) == 0
    assert capsys.readouterr().out.endswith("ok: 2 objects checked, 0 denied, 0 warnings\n")


def test_a_pods_extended_resource_claim_is_the_one_quota_verifies(tmp_path: Path) -> None:
    """``getVerifiedPodUsage``: with no pod status, the earliest owned claim is the pod's (1.36 on);
    under 1.35's rules every owned claim is, so a second one is always a duplicate."""
    owner = gpu_pod("p")
    later = special_claim("p-extended-resources-aaaaa", owner)
    earliest = special_claim("p-extended-resources-zzzzz", owner)
    later["metadata"]["creationTimestamp"] = "2026-10-01T00:00:09Z"
    earliest["metadata"]["creationTimestamp"] = "2026-10-01T00:00:00Z"
    f = _write(tmp_path / "claims.yaml", later, earliest)
    duplicate = (
        f"{f}: document 1: ResourceClaim default/p-extended-resources-zzzzz: "
        'metadata.ownerReferences[0].uid: Duplicate value: "uid-p": '
        'Pod "p" already has the extended resource claim "p-extended-resources-aaaaa"'
    )
    assert _run(f, release="1.36")[1] == ["ok: 2 objects checked, 0 denied, 0 warnings"]
    assert _run(f, release="1.35")[1] == [duplicate, "denied: 2 objects checked, 1 denied, 0 warnings"]
    # the pod in the files names the later claim: that one is the pod's, the earliest a duplicate
    named = with_mapping(gpu_pod("p", 1), mapping("p-extended-resources-aaaaa"))
    g = _write(tmp_path / "named.yaml", named, later, earliest)
    assert _run(g, release="1.37")[1][0] == duplicate.replace(f"{f}: document 1", f"{g}: document 2")


def test_strict_compiles_in_the_new_expressions_environment_of_the_release(tmp_path: Path) -> None:
    """The API server validates a new selector in its release's environment for new expressions:
    ``includes`` in none of 1.34-1.37, ext.Lists from 1.35 (1.34's compatibility version lacks it)."""
    f = _write(
        tmp_path / "cel.yaml",
        device_class("a", None, ["[1, 2].includes(2)"]),
        device_class("b", None, ["[2, 1].sort()[0] == 1"]),
    )
    code, lines, _ = _strict(f, version="1.34")
    assert code == 1
    assert "DeviceClass a: spec.selectors[0].cel.expression: Invalid value" in lines[0]
    assert "undeclared reference to 'includes'" in lines[0]
    assert "undeclared reference to 'sort'" in lines[1]
    code, lines, _ = _strict(f, version="1.35")
    assert code == 1
    assert "undeclared reference to 'includes'" in lines[0]
    assert lines[1].startswith("denied: 2 objects checked, 1 denied")
