"""KEP-5004 on every cluster: the KEP example and the edge cases of rewrite mode (issue 12), with the
apiserver's ``DRAExtendedResource`` off and on.

draxr runs with its defaults (``--mode auto``): where the apiserver drops the KEP-5004 fields
(``emulator-gate-off``, ``1.34-gate-off``, ``1.35-gate-off``) its webhook rewrites each DRA-backed
extended resource into a claim of the pod made from a shared ResourceClaimTemplate (KEP-5004's
"Option 1"); where it keeps them (``emulator``, ``1.35-gate-on``, ``1.36-default``, ``1.37``) it
takes the native path and the rewrite does not happen. The scenarios are the same on both: what they
check is what each container gets
(``container_devices``: through the pod's claims, or through the special claim and the pod's request
mapping), and which path the pod took (``assert_path``).

Rewritten pods keep their ``schedulerName`` by default. The emulator has no kube-scheduler, so
draxr runs on ``emulator-gate-off`` with ``--route=always`` and its worker places the rewritten pods,
allocating their claims as any user claim; on the local rows the release's kube-scheduler places
them, and real kubelets run every pod. The pods and Deployments set
``terminationGracePeriodSeconds: 0``, so a deleted pod goes at once. Templates no pod uses go after
``--template-grace 1`` (set on every target of the suite).
"""

from __future__ import annotations

import copy
import json
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import pytest
import yaml

from webhook.core.api.constants import DRAXR_RESOURCES_ANNOTATION, EXTENDED_RESOURCE_NAME_ANNOTATION
from webhook.core.api.objects import Obj
from webhook.core.paths.rewrite import MANAGED_BY, MANAGED_BY_LABEL, REWRITTEN_ANNOTATION, TEMPLATE_REQUEST
from webhook.kube.resources import PODS

from .controlplane.nodes import TEST_CDI_KIND
from .kubelet_logs import cdi_records, prepared_twice
from .local import UNMANAGED_LABEL
from .podclaims import make_claims
from .target import DEPLOYMENTS, DRIVER, GATE, RESOURCES, Target

pytestmark = pytest.mark.any_gate

EXAMPLES = Path(__file__).resolve().parents[1] / "examples" / "kep-5004"
POD_CLAIM_NAME = "resource.kubernetes.io/pod-claim-name"
DRAXR_NAMESPACE = "draxr-system"
IMAGE = "registry.k8s.io/pause:3.10"


# -- the KEP example, made this run's own --------------------------------------------------------


def _example(name: str) -> Obj:
    doc: Obj = yaml.safe_load((EXAMPLES / name).read_text())
    return doc


def kep_class(target: Target) -> str:
    """examples/kep-5004/deviceclass.yaml for this run's name and devices, with the annotation an
    admin adds where the apiserver drops the field (both agree; the field wins where it is kept)."""
    dc = _example("deviceclass.yaml")
    dc["metadata"] = {
        "name": target.class_name(),
        "annotations": {EXTENDED_RESOURCE_NAME_ANNOTATION: target.ext},
    }
    dc["spec"]["extendedResourceName"] = target.ext
    dc["spec"]["selectors"] = [
        {
            "cel": {
                "expression": f'device.driver == "{DRIVER}" && '
                f'device.attributes["{DRIVER}"].run == "{target.run_id}"'
            }
        }
    ]
    return str(target.create("deviceclasses", dc)["metadata"]["name"])


def kep_slice(target: Target, node: str) -> Obj:
    """examples/kep-5004/resourceslice.yaml: the eight GPUs, on ``node``, from this run's driver."""
    rs = _example("resourceslice.yaml")
    pool = f"{node}-e2e-{target.run_id}"
    rs["metadata"] = {"name": pool}
    rs["spec"].update(
        driver=DRIVER, nodeName=node, pool={"name": pool, "generation": 1, "resourceSliceCount": 1}
    )
    for device in rs["spec"]["devices"]:
        device["attributes"]["run"] = {"string": target.run_id}
    return target.create("resourceslices", rs)


def kep_deployment(target: Target, name: str = "demo", replicas: int = 4) -> Obj:
    """examples/kep-5004/deployment.yaml in the test's namespace, asking for this run's name."""
    d = _example("deployment.yaml")
    d["metadata"] = {"name": name, "namespace": target.namespace}
    d["spec"]["replicas"] = replicas
    spec = d["spec"]["template"]["spec"]
    spec["terminationGracePeriodSeconds"] = 0
    for c in spec["containers"]:
        for section in ("requests", "limits"):
            values = c["resources"][section]
            values[target.ext] = values.pop("example.com/gpu")
    return d


# -- pods ----------------------------------------------------------------------------------------


def container(name: str, resources: Obj, **extra: Any) -> Obj:
    return {"name": name, "image": IMAGE, "resources": {"requests": resources, "limits": resources}, **extra}


def create_pod(target: Target, name: str, containers: list[Obj], **spec: Any) -> Obj:
    body: Obj = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name},
        "spec": {"containers": containers, "terminationGracePeriodSeconds": 0, **spec},
    }
    return target.create("pods", body, as_user=True)


def live(pods: list[Obj]) -> list[Obj]:
    return [p for p in pods if not p["metadata"].get("deletionTimestamp")]


def all_bound(n: int, names: set[str] | None = None) -> Callable[[list[Obj]], list[Obj] | None]:
    """``n`` live pods (of ``names``, if given), every one bound."""

    def check(pods: list[Obj]) -> list[Obj] | None:
        mine = [p for p in live(pods) if names is None or p["metadata"]["name"] in names]
        ok = len(mine) == n and all(p["spec"].get("nodeName") for p in mine)
        return sorted(mine, key=lambda p: str(p["metadata"]["name"])) if ok else None

    return check


def owned_by(claims: list[Obj], pod: Obj) -> list[Obj]:
    uid = pod["metadata"]["uid"]
    return [c for c in claims if any(o["uid"] == uid for o in c["metadata"].get("ownerReferences") or [])]


# -- what each container gets ----------------------------------------------------------------------


def _results(claim: Obj, request: str | None) -> set[str]:
    results = claim["status"]["allocation"]["devices"]["results"]
    return {
        f"{r['pool']}/{r['device']}"
        for r in results
        if request is None or r["request"] == request or r["request"].startswith(request + "/")
    }


def container_devices(target: Target, pod: Obj) -> dict[str, set[str]]:
    """Container name -> the devices its kubelet would hand it: through ``resources.claims`` (the
    pod's claims, as ``status.resourceClaimStatuses`` resolves claims from templates), plus, on the
    native path, through the special claim and ``status.extendedResourceClaimStatus``."""
    claims = {c["metadata"]["name"]: c for c in target.objects("resourceclaims")}
    spec, status = pod["spec"], pod.get("status") or {}
    generated = {s["name"]: s.get("resourceClaimName") for s in status.get("resourceClaimStatuses") or []}
    pod_claims = {
        pc["name"]: pc.get("resourceClaimName") or generated[pc["name"]]
        for pc in spec.get("resourceClaims") or []
    }
    out: dict[str, set[str]] = {}
    for c in [*spec.get("initContainers", []), *spec["containers"]]:
        got = out.setdefault(c["name"], set())
        for ref in (c.get("resources") or {}).get("claims") or []:
            got |= _results(claims[pod_claims[ref["name"]]], ref.get("request"))
    mapping = status.get("extendedResourceClaimStatus")
    if mapping:
        special = claims[mapping["resourceClaimName"]]
        for m in mapping["requestMappings"]:
            out[m["containerName"]] |= _results(special, m["requestName"])
    return out


def _running(names: set[str]) -> Callable[[list[Obj]], list[Obj] | None]:
    def check(pods: list[Obj]) -> list[Obj] | None:
        mine = [p for p in live(pods) if p["metadata"]["name"] in names]
        ok = len(mine) == len(names) and all((p.get("status") or {}).get("phase") == "Running" for p in mine)
        return mine if ok else None

    return check


def assert_kubelets_gave_the_devices(target: Target, pods: list[Obj]) -> None:
    """Where real kubelets run the pods (the local rows): each pod reaches Running, and each of its
    containers was created (every time it was) with the CDI IDs of exactly the devices
    ``container_devices`` says it gets, none twice, nothing for a container that gets none; no claim
    was prepared twice. Proves the devices reach the container, rewritten or native."""
    if target.cdi_log is None or target.prepare_log is None:
        return
    names = {str(p["metadata"]["name"]) for p in pods}
    for pod in target.wait("pods", _running(names), timeout=120):
        records = cdi_records(target.cdi_log, target.namespace, pod["metadata"]["name"])
        containers = [*pod["spec"].get("initContainers", []), *pod["spec"]["containers"]]
        assert {r["container"] for r in records} == {c["name"] for c in containers}, records
        for container_name, devices in container_devices(target, pod).items():
            # The scenarios' driver names a device <pool>-<device> in the class TEST_CDI_KIND.
            want = sorted(f"{TEST_CDI_KIND}={d.replace('/', '-', 1)}" for d in devices)
            for r in records:
                if r["container"] == container_name:
                    assert sorted(r["cdi_devices"]) == want, (pod["metadata"]["name"], r)
    assert prepared_twice(target.prepare_log) == []


def assert_path(target: Target, pod: Obj, native: bool | None = None) -> None:
    """The path the pod took: rewritten where the apiserver drops the KEP-5004 fields, native where
    it keeps them (``native``: where it did when the pod was admitted); either way the extended
    resource was resolved at admission."""
    native = target.native if native is None else native
    annotations = pod["metadata"].get("annotations") or {}
    assert target.ext in json.loads(annotations[DRAXR_RESOURCES_ANNOTATION])
    asks = [
        c
        for c in [*pod["spec"].get("initContainers", []), *pod["spec"]["containers"]]
        if target.ext in ((c.get("resources") or {}).get("requests") or {})
        or target.ext in ((c.get("resources") or {}).get("limits") or {})
    ]
    draxr_claims = [pc for pc in pod["spec"].get("resourceClaims") or [] if pc["name"].startswith("draxr-")]
    if native:
        assert REWRITTEN_ANNOTATION not in annotations
        assert asks
        assert not draxr_claims
        assert pod["status"]["extendedResourceClaimStatus"]["requestMappings"]
    else:
        assert not asks  # the name left requests and limits of every container
        assert draxr_claims
        assert "extendedResourceClaimStatus" not in pod["status"]
        templates = {t["metadata"]["name"]: t for t in target.objects("resourceclaimtemplates")}
        for pc in draxr_claims:
            t = templates[pc["resourceClaimTemplateName"]]
            assert t["metadata"]["labels"][MANAGED_BY_LABEL] == MANAGED_BY
        assert_claims_from_templates(target, pod)


def assert_claims_from_templates(target: Target, pod: Obj) -> None:
    """Each of the pod's claims from a template was made by the resourceclaim controller: owned by
    the pod, named in its status, allocated with the template's device count, reserved for it."""
    claims = {c["metadata"]["name"]: c for c in target.objects("resourceclaims")}
    templates = {t["metadata"]["name"]: t for t in target.objects("resourceclaimtemplates")}
    generated = {s["name"]: s["resourceClaimName"] for s in pod["status"].get("resourceClaimStatuses") or []}
    for pc in pod["spec"].get("resourceClaims") or []:
        if "resourceClaimTemplateName" not in pc:
            continue
        claim = claims[generated[pc["name"]]]
        meta = claim["metadata"]
        assert meta["annotations"][POD_CLAIM_NAME] == pc["name"]
        [owner] = meta["ownerReferences"]
        assert (owner["kind"], owner["uid"], owner["controller"]) == ("Pod", pod["metadata"]["uid"], True)
        assert [r["uid"] for r in claim["status"]["reservedFor"]] == [pod["metadata"]["uid"]]
        [request] = templates[pc["resourceClaimTemplateName"]]["spec"]["spec"]["devices"]["requests"]
        count = request["exactly"].get("count", 1)
        assert len(claim["status"]["allocation"]["devices"]["results"]) == count


# -- scenarios -----------------------------------------------------------------------------------


def test_the_kep_example_binds_and_each_container_gets_its_devices(target: Target, kubectl: str) -> None:
    """KEP-5004's motivating example (examples/kep-5004), unchanged but for names: the DeviceClass
    mapping the extended resource, eight GPUs on a DRA node, a Deployment of four replicas asking for
    one each, applied with kubectl. (The example's device-plugin node is left out: on a gate-off
    cluster it would keep the pods for the device plugin, the mixed-cluster rule of
    tests/scenarios/admission/test_rewrite.py.)"""
    target.require_controllers("a Deployment's pods")
    kep_class(target)
    kep_slice(target, target.nodes[0])
    done = target.kubectl("apply", "-f", "-", stdin=yaml.safe_dump(kep_deployment(target)))
    assert done.returncode == 0, done.stderr
    pods = target.wait("pods", all_bound(4), timeout=120)
    devices: set[str] = set()
    for pod in pods:
        assert_path(target, pod)
        got = container_devices(target, pod)
        assert list(got) == ["app"]
        assert len(got["app"]) == 1
        devices |= got["app"]
        if not target.native:
            # cpu, <ext>, memory: the name's index among the container's requests is 1.
            assert pod["status"]["resourceClaimStatuses"] == [
                {
                    "name": "draxr-container-0-request-1",
                    "resourceClaimName": owned_by(target.objects("resourceclaims"), pod)[0]["metadata"][
                        "name"
                    ],
                }
            ]
    assert len(devices) == 4  # one GPU each, none shared
    assert {d.split("/")[0] for d in devices} == {f"{target.nodes[0]}-e2e-{target.run_id}"}
    assert_kubelets_gave_the_devices(target, pods)


def test_a_pool_draxr_does_not_manage_is_placed_by_kube_scheduler(target: Target) -> None:
    """One allocator per device pool (issue 20) with the pool left to kube-scheduler: the rows run
    draxr with ``--managed-classes '!<UNMANAGED_LABEL>'``, so a pod asking for the name of a class
    with that label keeps ``default-scheduler``, and the row's kube-scheduler places it: where the
    gate is off through the claims of draxr's templates (the rewrite placed by the real
    kube-scheduler, issue 22), where it is on through the special claim it makes itself. The
    container gets the class's device either way."""
    if target.sandbox is not None or target.cdi_log is None:
        pytest.skip("needs the local rows' kube-scheduler and draxr's --managed-classes (make e2e-local)")
    ext = f"e2e-{target.run_id}.draxr.io/unmanaged"
    selector = f'device.driver == "{DRIVER}" && device.attributes["{DRIVER}"].run == "{target.run_id}"'
    target.create(
        "deviceclasses",
        {
            "apiVersion": "resource.k8s.io/v1",
            "kind": "DeviceClass",
            "metadata": {
                "name": target.class_name("unmanaged"),
                "labels": {UNMANAGED_LABEL: "true"},
                "annotations": {EXTENDED_RESOURCE_NAME_ANNOTATION: ext},
            },
            "spec": {"extendedResourceName": ext, "selectors": [{"cel": {"expression": selector}}]},
        },
    )
    target.slice(target.nodes[0], 1)
    pod = create_pod(target, "left", [container("c", {ext: "1"})])
    assert pod["spec"]["schedulerName"] == "default-scheduler"
    [bound] = target.wait("pods", all_bound(1, {"left"}), timeout=120)
    if target.native:
        assert bound["status"]["extendedResourceClaimStatus"]["requestMappings"]
    else:
        assert [c["name"] for c in bound["spec"]["resourceClaims"]] == ["draxr-container-0-request-0"]
    assert len(container_devices(target, bound)["c"]) == 1
    assert_kubelets_gave_the_devices(target, [bound])


def test_a_dry_run_shows_the_rewrite_and_creates_nothing(target: Target, kubectl: str) -> None:
    if not target.native:
        target.require_controllers("claims from draxr's templates")
    cls = kep_class(target)
    target.slice(target.nodes[0], 2)
    pod: Obj = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": "dry", "namespace": target.namespace},
        "spec": {"containers": [container("c", {"cpu": "100m", target.ext: "1"})]},
    }
    done = target.kubectl("apply", "--dry-run=server", "-o", "yaml", "-f", "-", stdin=yaml.safe_dump(pod))
    assert done.returncode == 0, done.stderr
    shown = yaml.safe_load(done.stdout)
    [c] = shown["spec"]["containers"]
    annotations = shown["metadata"]["annotations"]
    template = f"draxr-{cls}-1"
    if target.native:
        assert c["resources"]["requests"][target.ext] == "1"
        assert "resourceClaims" not in shown["spec"]
        assert REWRITTEN_ANNOTATION not in annotations
        assert "rewritten into DRA claims" not in done.stderr
    else:
        # What the rewrite patched: the name out of requests and limits, a claim from draxr's
        # template in, the container pointing at it.
        assert c["resources"]["requests"] == {"cpu": "100m"}
        assert target.ext not in (c["resources"].get("limits") or {})
        assert c["resources"]["claims"] == [
            {"name": "draxr-container-0-request-1", "request": TEMPLATE_REQUEST}
        ]
        assert shown["spec"]["resourceClaims"] == [
            {"name": "draxr-container-0-request-1", "resourceClaimTemplateName": template}
        ]
        assert json.loads(annotations[REWRITTEN_ANNOTATION]) == {template: [cls, 1]}
        assert (
            f"Warning: {target.ext}: rewritten into DRA claims (DRAExtendedResource is off in the apiserver)"
            in done.stderr
        )
    assert json.loads(annotations[DRAXR_RESOURCES_ANNOTATION]) == {target.ext: cls}
    # Nothing was created. A real pod after the dry run (two devices: another template) is seen
    # through to the end, so whatever the dry run could have caused would have happened by then.
    create_pod(target, "real", [container("c", {target.ext: "2"})])
    [real] = target.wait("pods", all_bound(1), timeout=60)
    assert [p["metadata"]["name"] for p in target.objects("pods")] == ["real"]
    claims = target.objects("resourceclaims")
    assert claims
    assert claims == owned_by(claims, real)
    templates = [t["metadata"]["name"] for t in target.objects("resourceclaimtemplates")]
    assert templates == ([] if target.native else [f"draxr-{cls}-2"])


def test_a_pod_created_on_a_node_is_left_alone_with_a_warning(target: Target, kubectl: str) -> None:
    """Issue 23: a pod created with ``spec.nodeName`` is seen by no scheduler, so neither the rewrite
    (its claims would never be allocated: ContainerCreating for ever) nor the native path (its
    kubelet admits it without a device) can serve it. draxr leaves it alone, and warns where its
    node does not advertise the name."""
    cls = kep_class(target)
    target.slice(target.nodes[0], 2)
    node = target.nodes[0]
    pod: Obj = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": "placed", "namespace": target.namespace},
        "spec": {
            "nodeName": node,
            "terminationGracePeriodSeconds": 0,
            "containers": [container("c", {target.ext: "1"})],
        },
    }
    done = target.kubectl("create", "-o", "yaml", "-f", "-", stdin=yaml.safe_dump(pod))
    assert done.returncode == 0, done.stderr
    assert (
        f'Warning: {target.ext}: node "{node}" does not advertise it; a pod with spec.nodeName gets no '
        "DRA device"
    ) in done.stderr
    stored = target.admin.get(PODS, "placed", target.namespace)
    [c] = stored["spec"]["containers"]
    assert c["resources"]["requests"] == {target.ext: "1"}
    assert "claims" not in c["resources"]
    assert "resourceClaims" not in stored["spec"]
    assert stored["spec"].get("schedulerName", "default-scheduler") == "default-scheduler"
    annotations = stored["metadata"].get("annotations") or {}
    assert REWRITTEN_ANNOTATION not in annotations
    assert DRAXR_RESOURCES_ANNOTATION not in annotations
    assert not target.objects("resourceclaims")
    assert cls not in json.dumps(stored)


def test_200_pods_created_and_deleted_leave_only_what_is_in_use(target: Target) -> None:
    """200 pods (one or two devices each: two templates in rewrite mode) come and go while one pod
    stays: its claim and its template are all that is left. Nothing outlives the pods that use it:
    claims go with their pods (owner references), draxr's unused templates after
    ``--template-grace``."""
    if not target.native:
        target.require_controllers("claims from draxr's templates")
    cls = kep_class(target)
    for node in target.nodes:
        target.slice(node, 125)
    create_pod(target, "keeper", [container("c", {target.ext: "1"})])
    names = [f"p-{i}" for i in range(200)]
    with ThreadPoolExecutor(8) as pool:
        list(
            pool.map(
                lambda i: create_pod(
                    target, names[i], [container("c", {target.ext: "2" if i % 5 == 0 else "1"})]
                ),
                range(200),
            )
        )
    pods = target.wait("pods", all_bound(201), timeout=300)

    def one_each(claims: list[Obj]) -> list[Obj] | None:
        """One claim each: the special claim (the one the pod's status names), or the rewritten one."""
        for p in pods:
            mine = owned_by(claims, p)
            if len(mine) != 1:
                return None
            mapped = (p.get("status", {}).get("extendedResourceClaimStatus") or {}).get("resourceClaimName")
            if target.native and mine[0]["metadata"]["name"] != mapped:
                return None
        return claims

    # A binding cycle cut short (the worker's lease lost for a moment on a loaded machine) may leave
    # a claim it could not delete: freed as soon as its pod is seen bound with another.
    target.wait("resourceclaims", one_each, timeout=60)
    if not target.native:
        templates = {t["metadata"]["name"] for t in target.objects("resourceclaimtemplates")}
        assert templates == {f"draxr-{cls}-1", f"draxr-{cls}-2"}
    with ThreadPoolExecutor(8) as pool:
        list(pool.map(lambda n: target.user.delete(PODS, n, target.namespace), names))
    [keeper] = target.wait(
        "pods", lambda ps: ps if [p["metadata"]["name"] for p in ps] == ["keeper"] else None
    )
    target.wait("resourceclaims", lambda cs: cs if cs == owned_by(cs, keeper) else None, timeout=120)
    in_use = [] if target.native else [f"draxr-{cls}-1"]
    target.wait(
        "resourceclaimtemplates",
        lambda ts: sorted(t["metadata"]["name"] for t in ts) == in_use,
        timeout=60,
    )
    [claim] = target.objects("resourceclaims")
    assert [r["name"] for r in claim["status"]["reservedFor"]] == ["keeper"]


def test_a_deployment_applied_twice_with_kubectl(target: Target, kubectl: str) -> None:
    """draxr mutates pods, never their Deployment: the pod template keeps asking for the extended
    resource, so its pod-template hash (the ReplicaSet's name) is the template's own, and kubectl's
    three-way merge finds nothing to change on the second apply. Scaling is a clean update: one
    ReplicaSet, one set of claims per pod."""
    target.require_controllers("a Deployment's pods")
    kep_class(target)
    kep_slice(target, target.nodes[0])
    manifest = kep_deployment(target, "twice", replicas=2)
    first = target.kubectl("apply", "-f", "-", stdin=yaml.safe_dump(manifest))
    assert first.returncode == 0, first.stderr
    assert first.stdout.strip() == "deployment.apps/twice created"
    pods = target.wait("pods", all_bound(2), timeout=120)
    before = target.admin.get(DEPLOYMENTS, "twice", target.namespace)
    [rs] = target.objects("replicasets")

    second = target.kubectl("apply", "-f", "-", stdin=yaml.safe_dump(manifest))
    assert second.returncode == 0, second.stderr
    assert second.stdout.strip() == "deployment.apps/twice unchanged"
    after = target.admin.get(DEPLOYMENTS, "twice", target.namespace)
    assert after["metadata"]["generation"] == before["metadata"]["generation"]
    [c] = after["spec"]["template"]["spec"]["containers"]
    assert c["resources"]["requests"][target.ext] == "1"  # the template is not rewritten
    assert "resourceClaims" not in after["spec"]["template"]["spec"]
    assert [r["metadata"]["name"] for r in target.objects("replicasets")] == [rs["metadata"]["name"]]
    assert rs["metadata"]["name"] == f"twice-{rs['metadata']['labels']['pod-template-hash']}"
    assert {p["metadata"]["name"] for p in live(target.objects("pods"))} == {
        p["metadata"]["name"] for p in pods
    }

    manifest["spec"]["replicas"] = 3
    third = target.kubectl("apply", "-f", "-", stdin=yaml.safe_dump(manifest))
    assert third.returncode == 0, third.stderr
    assert third.stdout.strip() == "deployment.apps/twice configured"
    pods = target.wait("pods", all_bound(3), timeout=120)
    assert [r["metadata"]["name"] for r in target.objects("replicasets")] == [rs["metadata"]["name"]]
    claims = target.objects("resourceclaims")
    assert len(claims) == 3  # no duplicates: one per pod
    devices: set[str] = set()
    for p in pods:
        assert p["metadata"]["labels"]["pod-template-hash"] == rs["metadata"]["labels"]["pod-template-hash"]
        assert len(owned_by(claims, p)) == 1
        assert_path(target, p)
        devices |= container_devices(target, p)["app"]
    assert len(devices) == 3


def test_init_containers_and_sidecars_get_the_devices_the_spec_maps(target: Target) -> None:
    """kep5004-semantics.md §3.4 on one class: ``init-0`` (1) runs before the sidecar starts and
    reuses its device; ``init-2`` (3) runs after the sidecar started, so it reuses only the app's
    device and gets two of its own; the sidecar and the app have one each. Four devices in all."""
    if not target.native:
        target.require_controllers("claims from draxr's templates")
    kep_class(target)
    target.slice(target.nodes[0], 4)
    create_pod(
        target,
        "init",
        [container("app", {target.ext: "1"})],
        initContainers=[
            container("init-0", {target.ext: "1"}),
            container("side", {target.ext: "1"}, restartPolicy="Always"),
            container("init-2", {target.ext: "3"}),
        ],
    )
    [pod] = target.wait("pods", all_bound(1), timeout=60)
    assert_path(target, pod)
    got = container_devices(target, pod)
    side, app = got["side"], got["app"]
    assert len(side) == 1
    assert len(app) == 1
    assert side != app
    assert got["init-0"] == side
    assert app < got["init-2"]
    assert len(got["init-2"]) == 3
    assert not side & got["init-2"]
    assert len(set().union(*got.values())) == 4
    assert_kubelets_gave_the_devices(target, [pod])


def test_a_pod_with_its_own_resource_claims_keeps_them(target: Target) -> None:
    """A pod that asks for the extended resource and also has claims of its own (one from the user's
    template, one shared ResourceClaim) keeps both; its container gets all three devices."""
    target.require_controllers("claims from templates")
    cls = kep_class(target)
    target.slice(target.nodes[0], 4)
    devices = {"devices": {"requests": [{"name": "mine", "exactly": {"deviceClassName": cls}}]}}
    target.create(
        "resourceclaimtemplates",
        {
            "apiVersion": "resource.k8s.io/v1",
            "kind": "ResourceClaimTemplate",
            "metadata": {"name": "own"},
            "spec": {"spec": devices},
        },
    )
    target.create(
        "resourceclaims",
        {
            "apiVersion": "resource.k8s.io/v1",
            "kind": "ResourceClaim",
            "metadata": {"name": "shared"},
            "spec": devices,
        },
    )
    own_claims = [
        {"name": "own", "resourceClaimTemplateName": "own"},
        {"name": "shared", "resourceClaimName": "shared"},
    ]
    c = container("c", {target.ext: "1"})
    c["resources"]["claims"] = [{"name": "own"}, {"name": "shared"}]
    create_pod(target, "mixed", [c], resourceClaims=copy.deepcopy(own_claims))
    [pod] = target.wait("pods", all_bound(1), timeout=60)
    assert pod["spec"]["resourceClaims"][:2] == own_claims
    assert pod["spec"]["containers"][0]["resources"]["claims"][:2] == [{"name": "own"}, {"name": "shared"}]
    assert_path(target, pod)
    assert_claims_from_templates(target, pod)  # the user's template too
    shared = target.admin.get(RESOURCES["resourceclaims"], "shared", target.namespace)
    assert [r["name"] for r in shared["status"]["reservedFor"]] == ["mixed"]
    assert len(container_devices(target, pod)["c"]) == 3
    assert_kubelets_gave_the_devices(target, [pod])


# -- the mode, and switching the gate under a running draxr ---------------------------------------


def assert_mode(target: Target, mode: str) -> None:
    """draxr's webhook reports ``mode`` on ``/readyz`` and in the ``draxr_mode`` gauge."""
    assert target.processes is not None
    status, body = target.processes.webhook_get("/readyz")
    assert status == 200, body
    assert f"mode: {mode} (--mode=auto)" in body.splitlines()
    gate = "on" if mode == "native" else "off"
    # Probed by this process, or (a webhook apart from the workers) the answer the workers' leader
    # probed and published (kube/sharedgate.py).
    [line] = [x for x in body.splitlines() if x.startswith("apiserver DRAExtendedResource: ")]
    assert line == f"apiserver DRAExtendedResource: {gate} (probe)" or line.startswith(
        f"apiserver DRAExtendedResource: {gate} (shared by "
    ), line
    _, metrics = target.processes.webhook_get("/metrics")
    for m in ("native", "rewrite", "off"):
        assert f'draxr_mode{{mode="{m}"}} {1.0 if m == mode else 0.0}' in metrics.splitlines()


def test_draxr_reports_the_mode_it_detected(target: Target) -> None:
    if target.processes is None:
        pytest.skip("the suite does not run draxr on this target, so it cannot read draxr's /readyz")
    assert_mode(target, "native" if target.native else "rewrite")


def _unschedulable(pod: str) -> Callable[[list[Obj]], bool]:
    def check(pods: list[Obj]) -> bool:
        return any(
            c["type"] == "PodScheduled" and c["status"] == "False"
            for p in pods
            if p["metadata"]["name"] == pod
            for c in (p.get("status") or {}).get("conditions") or []
        )

    return check


def _mode_event(mode: str, before: str) -> Callable[[list[Obj]], list[Obj]]:
    def check(events: list[Obj]) -> list[Obj]:
        return [
            e
            for e in events
            if e.get("reason") == "ModeChanged"
            and e.get("message", "").startswith(f"draxr mode: {mode} (was {before});")
        ]

    return check


def controller_claims(target: Target, pod_name: str) -> None:
    """The claims kube-controller-manager's resourceclaim controller makes for a rewritten pod
    (``e2e/podclaims.py``; none for a native one), once draxr's worker has made the templates."""

    def template(template_name: str) -> Obj:
        [found] = target.wait(
            "resourceclaimtemplates", lambda ts: [t for t in ts if t["metadata"]["name"] == template_name]
        )
        return dict(found)

    make_claims(target.admin, target.admin.get(PODS, pod_name, target.namespace), template)


def test_switching_the_gate_while_draxr_runs_changes_the_mode_not_admitted_pods(target: Target) -> None:
    """The emulator flips the apiserver's gate under a running draxr (an upgrade, or a restart with
    other ``--feature-gates``). Within the gate probe interval (0.5 s here) the mode follows: an
    Event on draxr's Deployment, ``/readyz``, the gauge; the next pod takes the new path. A pod
    admitted before is never touched: same object, same claims; a rewritten pod still pending then
    binds later with its claims. (A native pod still pending when the gate goes off is not bound:
    the apiserver drops its mapping, tests/worker/test_binder.py.) The pods name draxr as their
    scheduler: a rewritten pod keeps its own (a dry run shows a pod of the default scheduler keeping
    it on ``emulator``, which routes with the default ``--route=default-only``). The emulator runs no
    kube-controller-manager: the scenario makes a rewritten pod's claims as its resourceclaim
    controller would (``controller_claims``)."""
    box = target.sandbox
    if box is None:
        pytest.skip("only the emulator can flip the apiserver's gate under a running draxr")
    modes = ("native", "rewrite") if target.native else ("rewrite", "native")
    kep_class(target)
    target.slice(target.nodes[0], 4)
    assert_mode(target, modes[0])
    create_pod(target, "before", [container("c", {target.ext: "1"})], schedulerName="draxr")
    controller_claims(target, "before")
    [before] = target.wait("pods", all_bound(1), timeout=60)
    create_pod(target, "pending", [container("c", {target.ext: "5"})], schedulerName="draxr")
    controller_claims(target, "pending")
    target.wait("pods", _unschedulable("pending"))
    before = target.admin.get(PODS, "before", target.namespace)
    claims_before = owned_by(target.objects("resourceclaims"), before)
    interval = float(box.options["gate_probe_interval"])

    box.em.set_feature_gate(GATE, not target.native)
    target.wait("events", _mode_event(modes[1], modes[0]), timeout=interval + 10, namespace=DRAXR_NAMESPACE)
    assert_mode(target, modes[1])
    create_pod(target, "after", [container("c", {target.ext: "1"})], schedulerName="draxr")
    controller_claims(target, "after")
    [after] = target.wait("pods", all_bound(1, {"after"}), timeout=60)
    assert_path(target, after, native=not target.native)  # the new path
    assert after["spec"]["schedulerName"] == "draxr"
    if modes[1] == "rewrite":
        # A pod of the default scheduler is routed to draxr when rewritten, as every pod consuming
        # a class draxr manages (one allocator per device pool, issue 20), unless --route=never.
        probe: Obj = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "probe"}}
        probe["spec"] = {"containers": [container("c", {target.ext: "1"})]}
        shown = target.user.create(PODS, probe, target.namespace, dry_run=True)
        assert shown["spec"]["resourceClaims"]
        assert shown["spec"]["schedulerName"] == ("default-scheduler" if box.route == "never" else "draxr")
    assert target.admin.get(PODS, "before", target.namespace) == before
    kept = {c["metadata"]["name"]: c for c in target.objects("resourceclaims")}
    for c in claims_before:
        assert kept[c["metadata"]["name"]] == c
    assert not container_devices(target, before)["c"] & container_devices(target, after)["c"]
    if modes[0] == "rewrite":
        target.slice(target.nodes[1], 8)
        [pending] = target.wait("pods", all_bound(1, {"pending"}), timeout=60)
        assert_path(target, pending, native=False)  # as admitted
        assert len(container_devices(target, pending)["c"]) == 5

    box.em.set_feature_gate(GATE, target.native)
    target.wait("events", _mode_event(modes[0], modes[1]), timeout=interval + 10, namespace=DRAXR_NAMESPACE)
    assert_mode(target, modes[0])
