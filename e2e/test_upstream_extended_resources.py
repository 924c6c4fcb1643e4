"""Upstream's own DRAExtendedResource e2e cases (``test/e2e/dra/dra.go`` of k8s.io/kubernetes v1.37.2,
the context ``WithFeatureGate(features.DRAExtendedResource)``), transcribed for every target: each test
names the upstream ``ginkgo.It`` it follows.

Upstream checks what each container got through the environment its test driver injects
(``container_<i>_request_<j>=true``); here the fake runtime's CDI log says which devices each container
was created with (``assert_kubelets_gave_the_devices``), on the local rows where real kubelets run the
pods. On the emulator (no kubelet) the same scenarios check the allocation and the mapping. The classes
carry draxr's annotation besides the field, so on the gate-off rows draxr rewrites the pods and the
release's kube-scheduler places them.
"""

from __future__ import annotations

from collections.abc import Callable

import pytest

from webhook.core.api.constants import EXTENDED_RESOURCE_NAME_ANNOTATION
from webhook.core.api.objects import Obj

from .controlplane.nodes import CDI_KIND, DEVICE_PLUGIN_CDI_KIND, EXTENDED_RESOURCE, TEST_CDI_KIND
from .kubelet_logs import cdi_records
from .target import DRIVER, RESOURCES, Target
from .test_rewrite import (
    all_bound,
    assert_kubelets_gave_the_devices,
    container,
    container_devices,
    create_pod,
)

pytestmark = pytest.mark.any_gate


def mapped_class(target: Target, suffix: str, ext: str, annotations: dict[str, str] | None = None) -> str:
    """upstream's ``b.ClassWithExtendedResource(name)``: a class of this run's devices mapping ``ext``
    (the field, and draxr's annotation for where the apiserver drops it), with more ``annotations``."""
    body: Obj = {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "DeviceClass",
        "metadata": {
            "name": target.class_name(suffix),
            "annotations": {EXTENDED_RESOURCE_NAME_ANNOTATION: ext, **(annotations or {})},
        },
        "spec": {
            "extendedResourceName": ext,
            "selectors": [
                {
                    "cel": {
                        "expression": f'device.driver == "{DRIVER}" && '
                        f'device.attributes["{DRIVER}"].run == "{target.run_id}"'
                    }
                }
            ],
        },
    }
    return str(target.create("deviceclasses", body)["metadata"]["name"])


def _extended_resource_test(target: Target, names: list[str]) -> None:
    """upstream's ``extendedResourceTest``: a pod whose container asks for one of each name, with an
    init container asking two of each, a sidecar one of each and a second init container one of each;
    it runs, its container gets one device per name, and every container gets exactly the devices
    its requests map to it."""
    one = dict.fromkeys(names, "1")
    create_pod(
        target,
        "ext",
        [container("c", one)],
        initContainers=[
            container("c-init", dict.fromkeys(names, "2")),
            container("c-sidecar", one, restartPolicy="Always"),
            container("c-init-1", one),
        ],
    )
    [pod] = target.wait("pods", all_bound(1), timeout=60)
    got = container_devices(target, pod)
    assert len(got["c"]) == len(names)
    assert len(got["c-init"]) == 2 * len(names)
    assert_kubelets_gave_the_devices(target, [pod])


@pytest.mark.parametrize(
    ("case", "classes", "implicit"),
    [
        ("explicit-one-resource", 1, False),
        ("implicit-one-resource", 1, True),
        ("explicit-three-resources", 3, False),
    ],
)
def test_one_container(target: Target, case: str, classes: int, implicit: bool) -> None:
    """upstream: "must run a pod with explicit extended resource with one container one resource",
    "... implicit extended resource with one container one resource" and "... explicit extended
    resource with one container three resources" (``extendedResourceTest``)."""
    if not target.native:
        target.require_controllers("claims from draxr's templates")
    names = []
    for i in range(classes):
        ext = f"e2e-{target.run_id}.draxr.io/{case}{i}"
        class_name = mapped_class(target, f"{case}{i}", ext)
        names.append(f"deviceclass.resource.kubernetes.io/{class_name}" if implicit else ext)
    target.slice(target.nodes[0], 4 * classes)
    _extended_resource_test(target, names)


@pytest.mark.parametrize(
    "asks",
    [[[0], [1], [2]], [[0], [1, 2], [3, 4, 5]]],
    ids=["one-resource-each", "multiple-resources-each"],
)
def test_three_containers(target: Target, asks: list[list[int]]) -> None:
    """upstream: "must run a pod with explicit extended resource with three containers one resource
    each" and "... three containers multiple resources each": one explicit name per class; container
    ``c`` asks for one of each of the names ``asks[c]`` (three names, or six: the first, the next two,
    the last three). Each container gets exactly the devices of its own names, all distinct."""
    if not target.native:
        target.require_controllers("claims from draxr's templates")
    prefix = f"e2e-{target.run_id}.draxr.io/multi"
    n = sum(len(names) for names in asks)
    for i in range(n):
        mapped_class(target, f"multi{i}", f"{prefix}{i}")
    target.slice(target.nodes[0], n)
    create_pod(
        target,
        "multi",
        [container(f"container{c}", {f"{prefix}{i}": "1" for i in names}) for c, names in enumerate(asks)],
    )
    [pod] = target.wait("pods", all_bound(1), timeout=60)
    got = container_devices(target, pod)
    assert {c: len(d) for c, d in got.items()} == {
        f"container{c}": len(names) for c, names in enumerate(asks)
    }
    assert len(set().union(*got.values())) == n  # none shared
    assert_kubelets_gave_the_devices(target, [pod])


def _allocated_claim_of(pod: Obj) -> Callable[[list[Obj]], Obj | None]:
    """The pod's claim, once allocated (seen on the watch even if it is deleted right after)."""
    uid = pod["metadata"]["uid"]

    def check(claims: list[Obj]) -> Obj | None:
        for claim in claims:
            owners = claim["metadata"].get("ownerReferences") or []
            if any(o["uid"] == uid for o in owners) and (claim.get("status") or {}).get("allocation"):
                return claim
        return None

    return check


def _phase(name: str, phase: str) -> Callable[[list[Obj]], list[Obj] | None]:
    def check(pods: list[Obj]) -> list[Obj] | None:
        done = [
            p for p in pods if p["metadata"]["name"] == name and (p.get("status") or {}).get("phase") == phase
        ]
        return done or None

    return check


@pytest.mark.parametrize(
    ("script", "phase"),
    [("exit 0", "Succeeded"), ("exit 1", "Failed")],
    ids=["when-pods-complete", "when-pods-fail"],
)
def test_claims_are_cleaned_up(target: Target, script: str, phase: str) -> None:
    """upstream: "must cleanup extended resource claims when pods complete" and "... when pods fail"
    (``runExtendedClaimCleanup``): a ``restartPolicy: Never`` pod asking for one device through an
    explicit name runs ``sh -c <script>``; its container is created with the device; once the pod is
    Succeeded (Failed) the claim made for it (the special claim, or draxr's claim from a template
    where the apiserver drops the fields) is deleted."""
    if target.cdi_log is None:
        pytest.skip("needs kubelets to end the pod (the local rows of make e2e-local)")
    ext = f"e2e-{target.run_id}.draxr.io/cleanup"
    mapped_class(target, "cleanup", ext)
    target.slice(target.nodes[0], 1)
    c = container("c", {ext: "1"}, command=["/bin/sh"], args=["-c", script])
    pod = create_pod(target, "job", [c], restartPolicy="Never")
    claim = target.wait("resourceclaims", _allocated_claim_of(pod), timeout=60)
    target.wait("pods", _phase("job", phase), timeout=120)
    [record] = cdi_records(target.cdi_log, target.namespace, "job")
    [result] = claim["status"]["allocation"]["devices"]["results"]
    assert record["cdi_devices"] == [f"{TEST_CDI_KIND}={result['pool']}-{result['device']}"]
    name = claim["metadata"]["name"]
    target.wait(
        "resourceclaims",
        lambda claims: all(c["metadata"]["name"] != name for c in claims) or None,
        timeout=60,
    )


def unschedulable(name: str) -> Callable[[list[Obj]], str | None]:
    def check(pods: list[Obj]) -> str | None:
        for p in pods:
            if p["metadata"]["name"] != name or p["spec"].get("nodeName"):
                continue
            for c in (p.get("status") or {}).get("conditions") or []:
                if (c["type"], c["status"], c.get("reason")) == ("PodScheduled", "False", "Unschedulable"):
                    return str(c.get("message") or "")
        return None

    return check


def test_overcommitment_is_prevented(target: Target) -> None:
    """upstream: "must prevent overcommitment of extended resources": a first pod takes every device
    of the class (two here) and runs with them; a second asking as much stays Unschedulable; once the
    first is deleted the second is placed and runs with the devices."""
    if not target.native:
        target.require_controllers("claims from draxr's templates")
    ext = f"e2e-{target.run_id}.draxr.io/overcommit"
    mapped_class(target, "overcommit", ext)
    target.slice(target.nodes[0], 2)
    create_pod(target, "first", [container("c", {ext: "2"})])
    [first] = target.wait("pods", all_bound(1, {"first"}), timeout=60)
    assert len(container_devices(target, first)["c"]) == 2
    assert_kubelets_gave_the_devices(target, [first])
    create_pod(target, "second", [container("c", {ext: "2"})])
    target.wait("pods", unschedulable("second"), timeout=60)
    target.admin.delete(RESOURCES["pods"], "first", target.namespace)
    # On the 1.34 and 1.35 rows the second pod is placed 60-90 s after the delete (measured under
    # load), on 1.36 and 1.37 within seconds.
    [second] = target.wait("pods", all_bound(1, {"second"}), timeout=180)
    assert len(container_devices(target, second)["c"]) == 2
    assert_kubelets_gave_the_devices(target, [second])


def test_a_zero_request_gets_no_device(target: Target) -> None:
    """upstream: "must run a pod with extended resource requesting zero": the pod runs, with no claim
    made for it and no device handed to its container."""
    if target.cdi_log is None:
        pytest.skip("the emulator runs no kube-scheduler to place a pod needing no device (make e2e-local)")
    ext = f"e2e-{target.run_id}.draxr.io/zero"
    mapped_class(target, "zero", ext)
    target.slice(target.nodes[0], 1)
    create_pod(target, "zero", [container("c", {ext: "0"})])
    [pod] = target.wait("pods", all_bound(1), timeout=60)
    assert pod["status"].get("extendedResourceClaimStatus") is None
    assert container_devices(target, pod) == {"c": set()}
    assert target.objects("resourceclaims") == []
    assert_kubelets_gave_the_devices(target, [pod])  # cdi_devices: []


def test_implicit_and_explicit_names_in_one_container(target: Target) -> None:
    """upstream: "must run a pod with both implicit and explicit extended resource with one container
    two resources": one container asks for the class's implicit name and for the explicit name of
    another class; it gets one device of each, two distinct devices."""
    if not target.native:
        target.require_controllers("claims from draxr's templates")
    ext = f"e2e-{target.run_id}.draxr.io/explicit"
    implicit_class = mapped_class(target, "implicit", f"e2e-{target.run_id}.draxr.io/other")
    mapped_class(target, "explicit", ext)
    target.slice(target.nodes[0], 2)
    implicit = f"deviceclass.resource.kubernetes.io/{implicit_class}"
    create_pod(target, "both", [container("c", {implicit: "1", ext: "1"})])
    [pod] = target.wait("pods", all_bound(1), timeout=60)
    assert len(container_devices(target, pod)["c"]) == 2
    assert_kubelets_gave_the_devices(target, [pod])


def _needs_gate(target: Target, what: str) -> None:
    """Upstream runs ``what`` only where DRAExtendedResource is on: with it off the apiserver drops
    the fields and draxr decides each pod's path at admission instead (docs/modes.md, "Mixed clusters")."""
    if not target.native:
        pytest.skip(
            f"upstream's {what} needs DRAExtendedResource on; with it off draxr rewrites at admission"
        )


def device_plugin_node(target: Target) -> str:
    """The node whose device plugin advertises EXTENDED_RESOURCE (``e2e-node-b`` on the local rows)."""
    for node in target.admin.list(RESOURCES["nodes"]).get("items") or []:
        if EXTENDED_RESOURCE in ((node.get("status") or {}).get("allocatable") or {}):
            return str(node["metadata"]["name"])
    pytest.skip(f"needs a node whose device plugin advertises {EXTENDED_RESOURCE} (make e2e-local)")


def _gpu_records(target: Target, pod: str) -> dict[str, list[str]]:
    """Container -> the GPU CDI IDs it was created with (the row's DRA driver's or the device
    plugin's; the scenarios' own test devices left out)."""
    assert target.cdi_log is not None
    kinds = (f"{CDI_KIND}=", f"{DEVICE_PLUGIN_CDI_KIND}=")
    return {
        r["container"]: [d for d in r["cdi_devices"] if d.startswith(kinds)]
        for r in cdi_records(target.cdi_log, target.namespace, pod)
    }


def _assert_dra_gpus(target: Target, pod: Obj, container_name: str, n: int) -> None:
    """The container was created with the CDI IDs of exactly the ``n`` row-driver devices its
    special claim maps to it for EXTENDED_RESOURCE."""
    mapping = pod["status"]["extendedResourceClaimStatus"]
    claim = target.admin.get(RESOURCES["resourceclaims"], mapping["resourceClaimName"], target.namespace)
    requests = {
        m["requestName"]
        for m in mapping["requestMappings"]
        if (m["containerName"], m["resourceName"]) == (container_name, EXTENDED_RESOURCE)
    }
    results = [r for r in claim["status"]["allocation"]["devices"]["results"] if r["request"] in requests]
    assert len(results) == n, claim["status"]
    want = sorted(f"{CDI_KIND}={r['pool']}-{r['device']}" for r in results)
    assert sorted(_gpu_records(target, pod["metadata"]["name"])[container_name]) == want


def running(names: set[str]) -> Callable[[list[Obj]], list[Obj] | None]:
    def check(pods: list[Obj]) -> list[Obj] | None:
        mine = [
            p for p in pods if p["metadata"]["name"] in names and not p["metadata"].get("deletionTimestamp")
        ]
        ok = len(mine) == len(names) and all((p.get("status") or {}).get("phase") == "Running" for p in mine)
        return sorted(mine, key=lambda p: str(p["metadata"]["name"])) if ok else None

    return check


def test_extended_resource_after_the_device_class_is_created(target: Target) -> None:
    """upstream: "must process extended resource after Device Class creation": a pod asking for a
    name no DeviceClass maps yet is Unschedulable; once a class maps the name the pod is placed and
    runs with the class's device. draxr's webhook saw no DRA-backed name at admission, so the row's
    kube-scheduler places it, as upstream's test has it."""
    _needs_gate(target, "class created after the pod")
    if target.sandbox is not None:
        pytest.skip(
            "the emulator runs no kube-scheduler for a pod admitted before its class (make e2e-local)"
        )
    ext = f"e2e-{target.run_id}.draxr.io/after-device-class-creation"
    target.slice(target.nodes[0], 1)
    create_pod(target, "after", [container("c", {ext: "1"})])
    target.wait("pods", unschedulable("after"), timeout=60)
    mapped_class(target, "after", ext)
    [pod] = target.wait("pods", running({"after"}), timeout=120)
    assert len(container_devices(target, pod)["c"]) == 1
    assert_kubelets_gave_the_devices(target, [pod])


def test_the_device_plugin_is_preferred_on_its_node(target: Target) -> None:
    """upstream: "must prefer device plugin over DRA when both advertise the same resource on a
    node": on the node where both the DRA driver's class and a device plugin serve
    ``example.com/gpu`` (the KEP example's class maps it), a pod asking for one runs with a device
    plugin GPU and no special claim."""
    _needs_gate(target, "device plugin preferred on its node")
    node = device_plugin_node(target)
    res = {EXTENDED_RESOURCE: "1"}
    create_pod(target, "dp", [container("c", res)], nodeSelector={"kubernetes.io/hostname": node})
    [pod] = target.wait("pods", running({"dp"}), timeout=120)
    assert pod["spec"]["nodeName"] == node
    assert pod["status"].get("extendedResourceClaimStatus") is None
    [device] = _gpu_records(target, "dp")["c"]
    assert device.startswith(f"{DEVICE_PLUGIN_CDI_KIND}={node}-dp-gpu-"), device
    assert target.objects("resourceclaims") == []


def test_pods_on_dra_nodes_and_device_plugin_nodes(target: Target) -> None:
    """upstream: "must run pods with extended resource on dra nodes and device plugin nodes": two
    pods asking for two ``example.com/gpu`` each both run, one on the device plugin's node with its
    two GPUs and no special claim, the other on a DRA node with two DRA devices mapped to it.
    Upstream's DRA node has no device plugin and its plugin node no DRA devices; here both nodes
    have DRA GPUs, so the pods repel each other (required anti-affinity on the hostname) to land
    one per node."""
    _needs_gate(target, "DRA and device-plugin nodes together")
    dp_node = device_plugin_node(target)
    res = {EXTENDED_RESOURCE: "2"}
    apart = {
        "podAntiAffinity": {
            "requiredDuringSchedulingIgnoredDuringExecution": [
                {"labelSelector": {"matchLabels": {"app": "mixed"}}, "topologyKey": "kubernetes.io/hostname"}
            ]
        }
    }
    for name in ("pod1", "pod2"):
        body: Obj = {
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {"name": name, "labels": {"app": "mixed"}},
            "spec": {
                "containers": [container("c", res)],
                "terminationGracePeriodSeconds": 0,
                "affinity": apart,
            },
        }
        target.create("pods", body, as_user=True)
    pods = target.wait("pods", running({"pod1", "pod2"}), timeout=120)
    [dp_pod] = [p for p in pods if p["spec"]["nodeName"] == dp_node]
    [dra_pod] = [p for p in pods if p["spec"]["nodeName"] != dp_node]
    assert dp_pod["status"].get("extendedResourceClaimStatus") is None
    got = _gpu_records(target, dp_pod["metadata"]["name"])["c"]
    assert len(got) == 2, got
    assert all(d.startswith(f"{DEVICE_PLUGIN_CDI_KIND}={dp_node}-") for d in got), got
    _assert_dra_gpus(target, dra_pod, "c", 2)


def test_extended_resources_together_with_a_resource_claim(target: Target) -> None:
    """upstream: "supports extended resources together with ResourceClaim": a pod with a claim of
    its own (one test device, which only the device plugin's node has) and ``example.com/gpu: 1``
    runs there with the claim's device and one GPU. Where the gate is on the GPU is the device
    plugin's (no special claim); where it is off draxr rewrites the name at admission (docs/modes.md,
    "Mixed clusters") and the GPU is one of the node's DRA devices."""
    if target.cdi_log is None:
        pytest.skip("needs the local rows' kubelets and device plugin (make e2e-local)")
    if not target.native:
        target.require_controllers("claims from draxr's templates")
    node = device_plugin_node(target)
    mapped_class(target, "claim", f"e2e-{target.run_id}.draxr.io/claim")
    target.slice(node, 1)
    external_claim(target, target.class_name("claim"))
    c = container("c", {EXTENDED_RESOURCE: "1"})
    c["resources"]["claims"] = [{"name": "mine"}]
    create_pod(target, "both", [c], resourceClaims=[{"name": "mine", "resourceClaimName": "external"}])
    [pod] = target.wait("pods", running({"both"}), timeout=120)
    assert pod["spec"]["nodeName"] == node
    claim = target.admin.get(RESOURCES["resourceclaims"], "external", target.namespace)
    [result] = claim["status"]["allocation"]["devices"]["results"]
    [record] = cdi_records(target.cdi_log, target.namespace, "both")
    assert f"{TEST_CDI_KIND}={result['pool']}-{result['device']}" in record["cdi_devices"]
    [gpu] = _gpu_records(target, "both")["c"]
    if target.native:
        assert pod["status"].get("extendedResourceClaimStatus") is None
        assert gpu.startswith(f"{DEVICE_PLUGIN_CDI_KIND}={node}-dp-gpu-"), gpu
    else:
        assert gpu.startswith(f"{CDI_KIND}={node}-"), gpu


def external_claim(target: Target, class_name: str) -> Obj:
    """upstream's ``b.ExternalClaim()``: the claim ``external`` for one device of ``class_name``."""
    body: Obj = {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "ResourceClaim",
        "metadata": {"name": "external"},
        "spec": {"devices": {"requests": [{"name": "r", "exactly": {"deviceClassName": class_name}}]}},
    }
    return target.create("resourceclaims", body)


def _quota_status(used: dict[str, str]) -> Callable[[list[Obj]], Obj | None]:
    def check(quotas: list[Obj]) -> Obj | None:
        for q in quotas:
            if q["metadata"]["name"] == "test-quota" and (q.get("status") or {}).get("used") == used:
                return q
        return None

    return check


def test_extended_resource_with_resource_quota(target: Target) -> None:
    """upstream: "must run a pod with extended resource with resource quota": a quota on the
    explicit name, the implicit name, the class's devices and the count of claims; a pod whose init
    container, sidecar, second init container and container each ask for one of each name (four
    devices in its special claim), and a second pod with a claim of one device of the class. The
    quota's ``used`` is exactly upstream's: 2 claims, 5 of each of the three others (the special
    claim's devices beyond what the pod's containers already charge). Upstream runs it where the
    gate is on; where it is off quota charges rewritten pods differently (docs/modes.md, "ResourceQuota,
    release by release")."""
    _needs_gate(target, "quota case")
    target.require_controllers("the resourcequota controller")
    ext = f"e2e-{target.run_id}.draxr.io/quota"
    class_name = target.class_name("quota")
    implicit = f"deviceclass.resource.kubernetes.io/{class_name}"
    hard = {
        "count/resourceclaims.resource.k8s.io": "10",
        f"requests.{ext}": "10",
        f"requests.{implicit}": "10",
        f"{class_name}.deviceclass.resource.k8s.io/devices": "10",
    }
    target.create(
        "resourcequotas",
        {
            "apiVersion": "v1",
            "kind": "ResourceQuota",
            "metadata": {"name": "test-quota"},
            "spec": {"hard": hard},
        },
    )
    # As upstream: wait for the quota controller's zero usage, or pods meet "status unknown for quota".
    target.wait("resourcequotas", _quota_status(dict.fromkeys(hard, "0")), timeout=60)
    mapped_class(target, "quota", ext)
    target.slice(target.nodes[0], 6)
    res = {ext: "1", implicit: "1"}
    create_pod(
        target,
        "quota",
        [container("c", res)],
        initContainers=[
            container("c-init", res),
            container("c-sidecar", res, restartPolicy="Always"),
            container("c-init-1", res),
        ],
    )
    [pod] = target.wait("pods", running({"quota"}), timeout=120)
    got = container_devices(target, pod)
    assert len(got["c"]) == 2
    assert len(got["c-sidecar"]) == 2
    assert len(got["c"] | got["c-sidecar"]) == 4
    assert_kubelets_gave_the_devices(target, [pod])
    external_claim(target, class_name)
    c = container("c", {})
    c["resources"] = {"claims": [{"name": "mine"}]}
    create_pod(target, "external", [c], resourceClaims=[{"name": "mine", "resourceClaimName": "external"}])
    [pod2] = target.wait("pods", running({"external"}), timeout=120)
    assert_kubelets_gave_the_devices(target, [pod2])
    used = {
        "count/resourceclaims.resource.k8s.io": "2",
        f"requests.{ext}": "5",
        f"requests.{implicit}": "5",
        f"{class_name}.deviceclass.resource.k8s.io/devices": "5",
    }
    target.wait("resourcequotas", _quota_status(used), timeout=60)
