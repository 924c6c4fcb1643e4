"""``draxr convert``: manifests rewritten offline into the webhook's rewrite form (KEP-5004's
"Option 2"), comments and key order kept, templates emitted once, schema-valid for 1.34-1.37."""

from __future__ import annotations

import copy
import io
import json
import os
from pathlib import Path
from typing import Any

import jsonpatch
import kubernetes_validate
import pytest
import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.admission.builders import GPU, GPU_CLASS, decode_patch, gpu_cluster, review
from tests.admission.conftest import Webhook
from webhook.admission import AdmissionConfig
from webhook.cli import main
from webhook.commands.convert import run
from webhook.core.api.objects import Obj
from webhook.core.paths.rewrite import REWRITTEN_ANNOTATION
from webhook.core.scheduling.plugins.dynamicresources.mappings import create_requests_and_mappings

ROOT = Path(__file__).resolve().parents[2]
EXAMPLES = ROOT / "examples" / "kep-5004"
VERSIONS = ["1.34", "1.35", "1.36", "1.37"]
PCIE_ROOT = "resource.kubernetes.io/pcieRoot"
IMPLICIT = f"deviceclass.resource.kubernetes.io/{GPU_CLASS}"
NIC, NIC_CLASS = "example.com/nic", "nic.example.com"

CLASSES = f"""\
apiVersion: resource.k8s.io/v1
kind: DeviceClass
metadata:
  name: {GPU_CLASS}
spec:
  extendedResourceName: {GPU}
---
apiVersion: resource.k8s.io/v1
kind: DeviceClass
metadata:
  name: {NIC_CLASS}
  annotations:
    draxr.io/extended-resource-name: {NIC}   # where the apiserver drops the field
spec: {{}}
"""


def convert(*paths: Path | str, classes: tuple[str, ...] = (), **kw: Any) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    code = run([str(p) for p in paths], out, err, classes=classes, **kw)
    return code, out.getvalue(), err.getvalue()


def docs(text: str) -> list[Obj]:
    return [d for d in yaml.safe_load_all(text) if d is not None]


def templates_of(objs: list[Obj]) -> dict[tuple[str | None, str], int]:
    """(namespace, name) -> device count of each ResourceClaimTemplate."""
    return {
        (o["metadata"].get("namespace"), o["metadata"]["name"]): o["spec"]["spec"]["devices"]["requests"][0][
            "exactly"
        ]["count"]
        for o in objs
        if o["kind"] == "ResourceClaimTemplate"
    }


def validate_all(objs: list[Obj], version: str) -> None:
    for obj in objs:
        items = obj["items"] if obj["kind"] == "List" else [obj]
        for item in items:
            kubernetes_validate.validate(item, version, strict=True)


# --- the KEP example, and the webhook's own form ---------------------------------------------------


def test_the_kep_example_converts_to_the_webhooks_rewrite() -> None:
    """The KEP example (examples/kep-5004): its Deployment asks for ``example.com/gpu: 1``."""
    code, out, err = convert(EXAMPLES)
    assert (code, err) == (0, "")
    objs = docs(out)
    deployment = objs[0]
    pod = deployment["spec"]["template"]
    c = pod["spec"]["containers"][0]
    assert c["resources"] == {
        "requests": {"cpu": "100m", "memory": "64Mi"},
        "limits": {},
        "claims": [{"name": "draxr-container-0-request-1", "request": "devices"}],
    }
    assert pod["spec"]["resourceClaims"] == [
        {"name": "draxr-container-0-request-1", "resourceClaimTemplateName": f"draxr-{GPU_CLASS}-1"}
    ]
    assert json.loads(pod["metadata"]["annotations"][REWRITTEN_ANNOTATION]) == {
        f"draxr-{GPU_CLASS}-1": [GPU_CLASS, 1]
    }
    assert templates_of(objs) == {("default", f"draxr-{GPU_CLASS}-1"): 1}
    assert objs[-1]["kind"] == "ResourceClaimTemplate"
    # Every other document of the example is written as it was.
    for name in ("deviceclass.yaml", "nodes.yaml", "resourceslice.yaml"):
        assert (EXAMPLES / name).read_text() in out
    assert out.startswith("# Unchanged workload: it asks for example.com/gpu")
    for version in VERSIONS:
        validate_all(objs, version)


def _pod_yaml(namespace: str = "default") -> str:
    return f"""\
apiVersion: v1
kind: Pod
metadata:
  name: demo-0
  namespace: {namespace}
spec:
  containers:
  - name: c
    image: busybox
    resources:
      requests:
        cpu: 100m
        {GPU}: 1
"""


def test_a_converted_pod_is_what_the_webhook_makes_and_passes_it_unchanged(
    webhook: Webhook, tmp_path: Path
) -> None:
    """Option 2 and Option 1 give the same pod: convert's output is the webhook's fixed point."""
    (tmp_path / "pod.yaml").write_text(_pod_yaml())
    (tmp_path / "classes.yaml").write_text(yaml.safe_dump_all(gpu_cluster()[:1]))
    code, out, _ = convert(tmp_path / "pod.yaml", classes=(str(tmp_path / "classes.yaml"),))
    assert code == 0
    converted, tmpl = docs(out)
    assert tmpl["kind"] == "ResourceClaimTemplate"

    # The gate off: the webhook rewrites. Routing is the cluster's, not the manifest's: without it
    # (--route=never) the webhook's pod is convert's.
    webhook.install(gpu_cluster(), config=AdmissionConfig(route="never"), apiserver_gate=False)
    original = yaml.safe_load(_pod_yaml())
    response = webhook.respond("/mutate/pods", review(original))
    by_webhook = jsonpatch.apply_patch(copy.deepcopy(original), decode_patch(response))
    assert converted == by_webhook
    again = webhook.respond("/mutate/pods", review(converted))
    assert again["allowed"] is True
    assert "patch" not in again
    assert webhook.respond("/validate/pods", review(converted))["allowed"] is True


# --- comments, key order, unchanged documents ---------------------------------------------------------

COMMENTED = f"""\
# Team A's workloads.
apiVersion: v1
kind: ConfigMap   # not a workload: kept byte for byte
metadata: {{name: settings, namespace: team-a}}
data:
  mode: "fast"
---
# The trainer.
apiVersion: apps/v1
kind: Deployment
metadata:
  name: trainer
  namespace: team-a
  labels: {{app: trainer}}
spec:
  replicas: 2   # two at a time
  selector:
    matchLabels: {{app: trainer}}
  template:
    metadata:
      labels: {{app: trainer}}
    spec:
      # the only container
      containers:
        - name: train
          image: trainer:1
          resources:
            limits:
              {GPU}: "2"   # two GPUs
              memory: 1Gi
---
apiVersion: v1
kind: Pod   # asks for a device plugin's name only: unchanged
metadata: {{name: legacy, namespace: team-a}}
spec:
  containers: [{{name: c, image: x, resources: {{limits: {{nvidia.com/gpu: 1}}}}}}]
"""


def test_a_commented_multi_document_file_round_trips(tmp_path: Path) -> None:
    f = tmp_path / "team-a.yaml"
    f.write_text(COMMENTED)
    (tmp_path / "classes.yaml").write_text(CLASSES)
    code, out, err = convert(f, classes=(str(tmp_path / "classes.yaml"),))
    assert (code, err) == (
        0,
        "draxr convert: warning: "
        f"{f}: document 2: Pod team-a/legacy: nvidia.com/gpu: no "
        "DeviceClass maps this name; left as it is\n",
    )
    first, _, third = COMMENTED.split("---\n")
    assert out.startswith(first)  # unchanged documents: byte for byte
    assert ("---\n" + third) in out
    changed = out[len(first) : out.index("---\n" + third)]
    for comment in ("# The trainer.", "# two at a time", "# the only container"):
        assert comment in changed
    assert "# two GPUs" not in changed  # it went with its line
    assert "        - name: train\n          image: trainer:1\n" in changed  # the file's indentation
    objs = docs(out)
    trainer = objs[1]
    assert list(trainer) == ["apiVersion", "kind", "metadata", "spec"]
    assert list(trainer["spec"]) == ["replicas", "selector", "template"]
    assert list(trainer["spec"]["template"]["metadata"]) == ["labels", "annotations"]
    assert list(trainer["spec"]["template"]["spec"]) == ["containers", "resourceClaims"]
    assert trainer["spec"]["template"]["spec"]["containers"][0]["resources"] == {
        "limits": {"memory": "1Gi"},
        "claims": [{"name": "draxr-container-0-request-0", "request": "devices"}],
    }
    assert templates_of(objs) == {("team-a", f"draxr-{GPU_CLASS}-2"): 2}
    assert out.endswith(
        "---\napiVersion: resource.k8s.io/v1\nkind: ResourceClaimTemplate\nmetadata:\n"
        f"  name: draxr-{GPU_CLASS}-2\n  namespace: team-a\n"
        f"  labels:\n    app.kubernetes.io/managed-by: draxr\n    draxr.io/device-class: {GPU_CLASS}\n"
        "spec:\n  spec:\n    devices:\n      requests:\n      - name: devices\n        exactly:\n"
        f"          deviceClassName: {GPU_CLASS}\n          allocationMode: ExactCount\n          count: 2\n"
    )
    for version in VERSIONS:
        validate_all(objs, version)
    # Converting the output again changes nothing and adds no template.
    f.write_text(out)
    code, again, _ = convert(f, classes=(str(tmp_path / "classes.yaml"),))
    assert (code, again) == (0, out)


def test_a_file_without_anything_to_convert_is_printed_as_it_is(tmp_path: Path) -> None:
    (tmp_path / "c.yaml").write_text(CLASSES)
    code, out, err = convert(tmp_path / "c.yaml")
    assert (code, out, err) == (0, CLASSES, "")


KUBECTL_LIST = f"""\
apiVersion: v1
items:
- apiVersion: apps/v1
  kind: DaemonSet
  metadata:
    creationTimestamp: "2026-01-02T03:04:05Z"
    generation: 1
    name: agent
    namespace: infra
    resourceVersion: "1234"
    uid: 0b7c6d3e-1111-4222-8333-944445555666
  spec:
    revisionHistoryLimit: 10
    selector:
      matchLabels:
        app: agent
    template:
      metadata:
        labels:
          app: agent
      spec:
        containers:
        - image: agent:2
          name: agent
          resources:
            limits:
              {IMPLICIT}: "1"
            requests:
              {IMPLICIT}: "1"
        restartPolicy: Always
  status:
    currentNumberScheduled: 0
    desiredNumberScheduled: 0
    numberMisscheduled: 0
    numberReady: 0
- apiVersion: resource.k8s.io/v1
  kind: DeviceClass
  metadata:
    name: {GPU_CLASS}
  spec:
    selectors:
    - cel:
        expression: device.driver == "gpu.example.com"
kind: List
metadata:
  resourceVersion: ""
"""


def test_a_kubectl_get_list_converts_item_by_item(tmp_path: Path) -> None:
    """``kubectl get ds,deviceclass -o yaml``: the implicit name needs only the class in the list."""
    f = tmp_path / "dump.yaml"
    f.write_text(KUBECTL_LIST)
    code, out, err = convert(f)
    assert (code, err) == (0, "")
    objs = docs(out)
    assert [o["kind"] for o in objs] == ["List", "ResourceClaimTemplate"]
    ds = objs[0]["items"][0]
    assert ds["status"]["numberReady"] == 0
    assert ds["spec"]["template"]["spec"]["containers"][0]["resources"] == {
        "limits": {},
        "requests": {},
        "claims": [{"name": "draxr-container-0-request-0", "request": "devices"}],
    }
    assert objs[0]["items"][1] == yaml.safe_load(KUBECTL_LIST)["items"][1]
    assert templates_of(objs) == {("infra", f"draxr-{GPU_CLASS}-1"): 1}
    assert out.index("kind: List") < out.index("kind: ResourceClaimTemplate")
    for version in VERSIONS:
        validate_all(objs, version)


# --- every workload kind --------------------------------------------------------------------------


def _pod_spec(resource: str = GPU, count: int = 1) -> Obj:
    return {"containers": [{"name": "c", "image": "x", "resources": {"limits": {resource: str(count)}}}]}


def workload(kind: str, pod_spec: Obj, name: str = "w", namespace: str | None = "default") -> Obj:
    meta: Obj = {"name": name} | ({"namespace": namespace} if namespace else {})
    template = {"metadata": {"labels": {"app": name}}, "spec": pod_spec}
    selector = {"matchLabels": {"app": name}}
    if kind == "Pod":
        return {"apiVersion": "v1", "kind": "Pod", "metadata": meta, "spec": pod_spec}
    if kind in ("Deployment", "ReplicaSet", "DaemonSet"):
        return {
            "apiVersion": "apps/v1",
            "kind": kind,
            "metadata": meta,
            "spec": {"selector": selector, "template": template},
        }
    if kind == "StatefulSet":
        return {
            "apiVersion": "apps/v1",
            "kind": kind,
            "metadata": meta,
            "spec": {"selector": selector, "serviceName": name, "template": template},
        }
    job_template = {**template, "spec": {**pod_spec, "restartPolicy": "Never"}}
    if kind == "Job":
        return {"apiVersion": "batch/v1", "kind": "Job", "metadata": meta, "spec": {"template": job_template}}
    return {
        "apiVersion": "batch/v1",
        "kind": "CronJob",
        "metadata": meta,
        "spec": {"schedule": "0 * * * *", "jobTemplate": {"spec": {"template": job_template}}},
    }


KINDS = ["Pod", "Deployment", "ReplicaSet", "StatefulSet", "DaemonSet", "Job", "CronJob"]


def pod_template(obj: Obj) -> Obj:
    if obj["kind"] == "Pod":
        return obj
    if obj["kind"] == "CronJob":
        return obj["spec"]["jobTemplate"]["spec"]["template"]  # type: ignore[no-any-return]
    return obj["spec"]["template"]  # type: ignore[no-any-return]


@pytest.mark.parametrize("kind", KINDS)
def test_every_workload_kind_is_converted(kind: str, tmp_path: Path) -> None:
    f = tmp_path / "w.yaml"
    f.write_text(CLASSES + "---\n" + yaml.safe_dump(workload(kind, _pod_spec(NIC, 2)), sort_keys=False))
    code, out, err = convert(f)
    assert (code, err) == (0, "")
    objs = docs(out)
    pod = pod_template(objs[2])
    assert pod["spec"]["resourceClaims"] == [
        {"name": "draxr-container-0-request-0", "resourceClaimTemplateName": f"draxr-{NIC_CLASS}-2"}
    ]
    assert pod["spec"]["containers"][0]["resources"]["limits"] == {}
    assert pod["metadata"]["annotations"]["draxr.io/extended-resources"] == json.dumps(
        {NIC: NIC_CLASS}, separators=(",", ":")
    )
    assert templates_of(objs) == {("default", f"draxr-{NIC_CLASS}-2"): 2}
    for version in VERSIONS:
        validate_all(objs, version)


# --- templates: once each, per namespace, class and count -----------------------------------------


def test_templates_are_emitted_once_per_namespace_class_and_count(tmp_path: Path) -> None:
    objs = [
        workload("Deployment", _pod_spec(GPU, 1), "a", "team-a"),
        workload("Job", _pod_spec(GPU, 1), "b", "team-a"),  # the same template
        workload("Pod", _pod_spec(GPU, 2), "c", "team-a"),  # another count
        workload("Pod", _pod_spec(IMPLICIT, 1), "d", "team-b"),  # another namespace, same class
        workload("CronJob", _pod_spec(GPU, 1), "e", None),  # no namespace: nor has its template
        {
            "apiVersion": "resource.k8s.io/v1",
            "kind": "ResourceClaimTemplate",
            "metadata": {"name": f"draxr-{GPU_CLASS}-2", "namespace": "team-a"},
            "spec": {
                "spec": {"devices": {"requests": [{"name": "mine", "exactly": {"deviceClassName": "x"}}]}}
            },
        },
    ]
    (tmp_path / "a.yaml").write_text(yaml.safe_dump_all(objs[:3], sort_keys=False))
    (tmp_path / "b.yaml").write_text(yaml.safe_dump_all(objs[3:], sort_keys=False) + "---\n" + CLASSES)
    code, out, _ = convert(tmp_path)
    assert code == 0
    result = docs(out)
    names = [
        (o["metadata"].get("namespace"), o["metadata"]["name"])
        for o in result
        if o["kind"] == "ResourceClaimTemplate" and o["metadata"].get("labels")
    ]
    assert names == [
        ("team-a", f"draxr-{GPU_CLASS}-1"),  # the input holds team-a's draxr-gpu.example.com-2
        ("team-b", f"draxr-{GPU_CLASS}-1"),
        (None, f"draxr-{GPU_CLASS}-1"),
    ]
    for version in VERSIONS:
        validate_all(result, version)


def test_a_class_that_asks_for_alignment_gets_aligned_templates_unless_the_pod_opts_out(
    tmp_path: Path,
) -> None:
    """As the webhook's rewrite does (the devices of each claim share the class's ``align-by``
    attribute), so a converted workload lands as it would have at admission."""
    aligned = CLASSES.replace(
        f"  name: {GPU_CLASS}\n",
        f"  name: {GPU_CLASS}\n  annotations:\n    draxr.io/align-by: {PCIE_ROOT}\n",
        1,
    )
    opted_out = workload("Deployment", _pod_spec(GPU, 4), "b")
    opted_out["spec"]["template"]["metadata"]["annotations"] = {"draxr.io/align": "none"}
    f = tmp_path / "w.yaml"
    f.write_text(
        yaml.safe_dump_all([workload("Deployment", _pod_spec(GPU, 4), "a"), opted_out]) + "---\n" + aligned
    )
    code, out, err = convert(f)
    assert (code, err) == (0, "")
    made = {o["metadata"]["name"]: o for o in docs(out) if o["kind"] == "ResourceClaimTemplate"}
    [name] = [n for n in made if "-aligned-" in n]
    assert sorted(made) == sorted([name, f"draxr-{GPU_CLASS}-4"])
    constraints = made[name]["spec"]["spec"]["devices"]["constraints"]
    assert constraints == [{"requests": ["devices"], "matchAttribute": PCIE_ROOT}]
    assert "constraints" not in made[f"draxr-{GPU_CLASS}-4"]["spec"]["spec"]["devices"]


def test_a_class_that_tolerates_taints_gets_tolerating_templates(tmp_path: Path) -> None:
    """``draxr.io/extended-resource-tolerations`` (issue 23): as the webhook's rewrite does; the
    templates stay schema-valid on every release (tolerations are a v1 request field)."""
    toleration = {"key": "example.com/maintenance", "operator": "Exists", "effect": "NoSchedule"}
    tolerating = CLASSES.replace(
        f"  name: {GPU_CLASS}\n",
        f"  name: {GPU_CLASS}\n  annotations:\n    draxr.io/extended-resource-tolerations: "
        f"'{json.dumps([toleration])}'\n",
        1,
    )
    f = tmp_path / "w.yaml"
    f.write_text(yaml.safe_dump_all([workload("Deployment", _pod_spec(GPU, 2), "a")]) + "---\n" + tolerating)
    code, out, err = convert(f)
    assert (code, err) == (0, "")
    [made] = [o for o in docs(out) if o["kind"] == "ResourceClaimTemplate"]
    assert made["metadata"]["name"].startswith(f"draxr-{GPU_CLASS}-2-tolerating-")
    assert made["spec"]["spec"]["devices"]["requests"][0]["exactly"]["tolerations"] == [toleration]
    for version in VERSIONS:
        validate_all([made], version)


# --- --classes, --in-place, standard input, -o json -------------------------------------------------


def test_classes_come_from_the_input_or_from_classes(tmp_path: Path) -> None:
    f = tmp_path / "w.yaml"
    f.write_text(yaml.safe_dump(workload("Deployment", _pod_spec())))
    code, out, err = convert(f)
    assert (code, out) == (0, f.read_text())
    assert err == (
        f"draxr convert: warning: {f}: document 0: Deployment default/w: {GPU}: no DeviceClass maps this "
        "name; left as it is\n"
    )
    (tmp_path / "classes").mkdir()
    (tmp_path / "classes" / "c.yaml").write_text(CLASSES)
    code, out, err = convert(f, classes=(str(tmp_path / "classes"),))
    assert (code, err) == (0, "")
    assert templates_of(docs(out)) == {("default", f"draxr-{GPU_CLASS}-1"): 1}
    assert CLASSES not in out  # --classes only informs; it is not part of the output
    (tmp_path / "empty.yaml").write_text("apiVersion: v1\nkind: ConfigMap\nmetadata: {name: x}\n")
    code, out, err = convert(f, classes=(str(tmp_path / "empty.yaml"),))
    assert (code, out) == (2, "")
    assert err == f"draxr convert: error: --classes {tmp_path / 'empty.yaml'}: no DeviceClass in it\n"


def test_in_place_rewrites_the_files_and_appends_templates_to_the_first(tmp_path: Path) -> None:
    a, b, c, d = (tmp_path / n for n in ("a.yaml", "b.yaml", "c.yaml", "d.json"))
    a.write_text(CLASSES)
    b.write_text("# b\n" + yaml.safe_dump(workload("Deployment", _pod_spec(), "b"), sort_keys=False))
    c.write_text(yaml.safe_dump(workload("StatefulSet", _pod_spec(), "c"), sort_keys=False))
    d.write_text(json.dumps(workload("Job", _pod_spec(GPU, 3), "d", "other"), indent=4))
    os.chmod(b, 0o640)
    before_a = a.stat().st_mtime_ns
    code, out, err = convert(tmp_path, in_place=True)
    assert (code, err) == (0, "")
    assert out == (
        f"{b}: 1 converted, 1 ResourceClaimTemplate added\n{c}: 1 converted\n"
        f"{d}: 1 converted, 1 ResourceClaimTemplate added\n"
    )
    assert a.read_text() == CLASSES
    assert a.stat().st_mtime_ns == before_a  # nothing to do: not written
    assert b.stat().st_mode & 0o777 == 0o640
    assert b.read_text().startswith("# b\n")
    assert templates_of(docs(b.read_text())) == {("default", f"draxr-{GPU_CLASS}-1"): 1}
    assert templates_of(docs(c.read_text())) == {}
    as_json = json.loads(d.read_text())
    assert as_json["kind"] == "List"
    assert [i["kind"] for i in as_json["items"]] == ["Job", "ResourceClaimTemplate"]
    assert sorted(p.name for p in tmp_path.iterdir()) == [
        "a.yaml",
        "b.yaml",
        "c.yaml",
        "d.json",
    ]  # no leftovers
    for f in (b, c):
        validate_all(docs(f.read_text()), "1.36")
    validate_all(as_json["items"], "1.36")
    # A second run finds nothing left to do.
    code, out, _ = convert(tmp_path, in_place=True)
    assert (code, out) == (0, "")


def test_standard_input_and_json_output(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    text = CLASSES + "---\n" + _pod_yaml("team-a")
    monkeypatch.setattr("sys.stdin", io.TextIOWrapper(io.BytesIO(text.encode())))
    code, out, _ = convert("-", output="json")
    assert code == 0
    body = json.loads(out)
    assert body["kind"] == "List"
    assert [i["kind"] for i in body["items"]] == [
        "DeviceClass",
        "DeviceClass",
        "Pod",
        "ResourceClaimTemplate",
    ]
    assert (
        body["items"][2]["spec"]["resourceClaims"][0]["resourceClaimTemplateName"] == f"draxr-{GPU_CLASS}-1"
    )
    f = tmp_path / "p.yaml"
    f.write_text(_pod_yaml())
    (tmp_path / "c.yaml").write_text(CLASSES)
    code, out, _ = convert(f, output="json")
    assert json.loads(out)["kind"] == "Pod"  # one object: printed alone, not in a List


def test_the_command_line(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    f = tmp_path / "p.yaml"
    f.write_text(CLASSES + "---\n" + _pod_yaml())
    assert main(["convert", "-f", str(f), "-o", "yaml"]) == 0
    assert "kind: ResourceClaimTemplate" in capsys.readouterr().out
    assert main(["convert", "-f", str(f), "--in-place"]) == 0
    assert capsys.readouterr().out == f"{f}: 1 converted, 1 ResourceClaimTemplate added\n"


# --- unusable input ---------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("kind: [", "w.yaml: document 0: line 2, column 11: did not find expected ',' or ']'"),
        (
            "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: a}\nmetadata: {name: b}\n",
            "w.yaml: document 0: cannot keep comments and key order: line 4, column 1: found duplicate key",
        ),
        (
            yaml.safe_dump(workload("Deployment", _pod_spec(GPU, 1))).replace("'1'", "0.5"),
            "w.yaml: document 0: Deployment default/w: spec.template.spec.containers[0].resources."
            f"limits[{GPU}]: Invalid value: 500m: must be an integer",
        ),
    ],
)
def test_unusable_input_is_one_line_and_exit_2(tmp_path: Path, text: str, message: str) -> None:
    f = tmp_path / "w.yaml"
    f.write_text(text + "---\n" + CLASSES)
    code, out, err = convert(f)
    assert (code, out) == (2, "")
    assert err.startswith(f"draxr convert: error: {tmp_path}/{message}")
    assert err.count("\n") == 1


def test_a_pod_claim_named_as_the_rewrite_names_one(tmp_path: Path) -> None:
    spec = _pod_spec()
    spec["resourceClaims"] = [
        {"name": "mine", "resourceClaimName": "mine"},
        {"name": "draxr-container-0-request-0", "resourceClaimName": "clash"},
    ]
    f = tmp_path / "w.yaml"
    f.write_text(yaml.safe_dump(workload("CronJob", spec)) + "---\n" + CLASSES)
    code, _, err = convert(f)
    assert code == 2
    assert err == (
        f"draxr convert: error: {f}: document 0: CronJob default/w: "
        "spec.jobTemplate.spec.template.spec.resourceClaims[1].name: Duplicate value: "
        '"draxr-container-0-request-0": draxr\'s rewrite gives this name to the claim of a converted '
        "request; rename this claim\n"
    )


def test_a_missing_file_and_flags_that_do_not_go_together(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code, _, err = convert(tmp_path / "nope.yaml")
    assert (code, err) == (2, f"draxr convert: error: {tmp_path / 'nope.yaml'}: no such file or directory\n")
    for argv, message in [
        (["-f", "-", "--in-place"], "--in-place: standard input (-f -) cannot be rewritten in place"),
        (["-f", "x", "--in-place", "-o", "json"], "--in-place writes each file in its own format"),
        (["-f", "-", "--classes", "-"], "--classes: standard input is read by -f -"),
    ]:
        with pytest.raises(SystemExit) as exit_:
            main(["convert", *argv])
        assert exit_.value.code == 2
        assert capsys.readouterr().err.startswith(f"draxr convert: error: {message}")


# --- the property: any workload converts to a valid spec with upstream's devices ---------------------

DRA = {GPU: GPU_CLASS, IMPLICIT: GPU_CLASS, NIC: NIC_CLASS}
names = st.sampled_from([GPU, IMPLICIT, NIC, "nvidia.com/gpu", "cpu", "memory"])


def _amount(resource: str) -> st.SearchStrategy[Any]:
    if resource == "memory":
        return st.sampled_from(["64Mi", "1Gi"])
    if resource == "cpu":
        return st.sampled_from(["100m", 1, "2"])
    return st.one_of(st.integers(0, 3), st.integers(0, 3).map(str))


@st.composite
def containers(draw: Any, prefix: str, count: int, sidecars: bool = False) -> list[Obj]:
    out: list[Obj] = []
    for i in range(count):
        c: Obj = {"name": f"{prefix}{i}", "image": "x"}
        resources: Obj = {}
        for section in ("requests", "limits"):
            chosen = draw(st.lists(names, unique=True, max_size=3))
            if chosen:
                resources[section] = {n: draw(_amount(n)) for n in chosen}
        # Kubernetes wants an extended resource's request and limit equal: copy limits over.
        for n, v in resources.get("limits", {}).items():
            if "/" in n and n in resources.get("requests", {}):
                resources["requests"][n] = v
        if resources:
            c["resources"] = resources
        if sidecars and draw(st.booleans()):
            c["restartPolicy"] = "Always"
        out.append(c)
    return out


@st.composite
def workloads(draw: Any) -> Obj:
    spec: Obj = {"containers": draw(containers("c", draw(st.integers(1, 3))))}
    init = draw(containers("i", draw(st.integers(0, 2)), sidecars=True))
    if init:
        spec["initContainers"] = init
    if draw(st.booleans()):
        spec["resourceClaims"] = [{"name": "own", "resourceClaimTemplateName": "users-own"}]
        spec["containers"][0].setdefault("resources", {})["claims"] = [{"name": "own"}]
    kind = draw(st.sampled_from(KINDS))
    namespace = draw(st.sampled_from(["default", "team-a", None]))
    return workload(kind, spec, "w", namespace)


def _devices(pod: Obj, counts: dict[str, int]) -> dict[str, int]:
    """What each container gets: the device counts of the draxr templates its claims come from."""
    by_claim = {
        pc["name"]: counts.get(pc.get("resourceClaimTemplateName", ""), 0)
        for pc in pod["spec"].get("resourceClaims", [])
    }
    return {
        c["name"]: sum(by_claim.get(e["name"], 0) for e in (c.get("resources") or {}).get("claims", []))
        for section in ("initContainers", "containers")
        for c in pod["spec"].get(section, [])
    }


def _upstream(pod: Obj) -> dict[str, int]:
    requests, mappings = create_requests_and_mappings(pod, DRA)
    counts = {r["name"]: r["exactly"]["count"] for r in requests}
    return {
        c["name"]: sum(counts[m["requestName"]] for m in mappings if m["containerName"] == c["name"])
        for section in ("initContainers", "containers")
        for c in pod["spec"].get(section, [])
    }


@pytest.fixture(scope="module")
def classes_file(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("classes") / "classes.yaml"
    path.write_text(CLASSES)
    return path


@settings(max_examples=120, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(obj=workloads())
def test_any_workload_converts_to_a_valid_spec_with_upstreams_devices(
    obj: Obj, classes_file: Path, tmp_path_factory: pytest.TempPathFactory
) -> None:
    f = tmp_path_factory.mktemp("w") / "w.yaml"
    f.write_text(yaml.safe_dump(obj, sort_keys=False))
    code, out, err = convert(f, classes=(str(classes_file),))
    assert code == 0, err
    result = docs(out)
    validate_all(result, "1.36")
    converted, templates = result[0], result[1:]
    assert all(t["kind"] == "ResourceClaimTemplate" for t in templates)
    namespace = obj["metadata"].get("namespace")
    assert all(t["metadata"].get("namespace") == namespace for t in templates)
    counts = {name: n for (_, name), n in templates_of(templates).items()}
    before, after = pod_template(obj), pod_template(converted)
    assert _devices(after, counts) == _upstream(before)
    # No DRA-backed name is left asking for devices (a zero, which needs none, the webhook leaves too).
    for section in ("initContainers", "containers"):
        for c in after["spec"].get(section, []):
            resources = c.get("resources") or {}
            for values in (resources.get("requests", {}), resources.get("limits", {})):
                assert all(str(values[n]) == "0" for n in set(values) & set(DRA)), values
    if not counts:  # nothing DRA-backed asked for: the document is printed as it was
        assert out == f.read_text()


def test_a_file_named_twice_is_converted_once(tmp_path: Path) -> None:
    f = tmp_path / "j.yaml"
    f.write_text(
        "apiVersion: batch/v1\nkind: Job\nmetadata: {name: j}\nspec:\n  template:\n    metadata:\n"
        "    spec:\n      restartPolicy: Never\n"
        f"      containers: [{{name: c, image: x, resources: {{limits: {{{GPU}: 1}}}}}}]\n---\n" + CLASSES
    )
    code, out, _ = convert(f, tmp_path, f, in_place=True)
    assert (code, out) == (0, f"{f}: 1 converted, 1 ResourceClaimTemplate added\n")
    objs = docs(f.read_text())
    assert [o["kind"] for o in objs] == ["Job", "DeviceClass", "DeviceClass", "ResourceClaimTemplate"]
    assert "annotations" in objs[0]["spec"]["template"]["metadata"]  # a null template metadata filled in
    validate_all(objs, "1.36")


REQUESTS = '{"requests": {"memory": "10Gi"}}'


def test_a_class_with_capacity_requests_gets_templates_of_shares(tmp_path: Path) -> None:
    """Issue 23: ``draxr.io/capacity-requests`` goes onto the template's request in ``convert`` as
    in the webhook's rewrite, so the converted workload takes shares, not whole devices."""
    shared = CLASSES.replace(  # REQUESTS: KEP-6406's CapacityRequirements as JSON
        f"  name: {GPU_CLASS}\n",
        f"  name: {GPU_CLASS}\n  annotations:\n    draxr.io/capacity-requests: '{REQUESTS}'\n",
        1,
    )
    f = tmp_path / "w.yaml"
    f.write_text(yaml.safe_dump_all([workload("Deployment", _pod_spec(GPU, 1), "a")]) + "---\n" + shared)
    code, out, err = convert(f)
    assert (code, err) == (0, "")
    (made,) = [o for o in docs(out) if o["kind"] == "ResourceClaimTemplate"]
    assert made["metadata"]["name"].startswith(f"draxr-{GPU_CLASS}-1-cap-")
    (request,) = made["spec"]["spec"]["devices"]["requests"]
    assert request["exactly"]["capacity"] == {"requests": {"memory": "10Gi"}}
    validate_all(docs(out), "1.37")
