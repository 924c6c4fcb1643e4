"""draxr beside kube-scheduler on the real control plane (issue 20): one allocator per device pool.

The 1.36 row with kube-scheduler 1.36 running (``Row(scheduler=True)``), one draxr worker at
``--qps 5``, two nodes of 4 devices. Each round creates at once 4 pods with ordinary ResourceClaims
(no schedulerName: kube-scheduler's, before draxr routed them) and 4 pods asking for the class's
extended resource (draxr's). With routing, every claim pod goes to draxr: 0 devices in two claims
over every round. With the claim pods in an opted-out namespace (they reach kube-scheduler anyway),
two allocators share the pool: when a device ends up in two claims, the worker reports it.

Runs only where the ``1.36-default`` row is selected (``make e2e-local``); its own cluster, since
kube-scheduler must run beside draxr. ``DRAXR_COEXISTENCE_ROUNDS`` (default 20) sets the rounds.
"""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Iterator

import pytest

from webhook.core.api.objects import Obj
from webhook.kube.client import ApiError
from webhook.kube.resources import EVENTS, NAMESPACES, PODS, RESOURCE_CLAIMS

from .conftest import selected_targets
from .local import DraxrProcess, LocalCluster, LocalError, Row, unavailable
from .target import Target, cluster_target

ROW = Row("1.36-kube-scheduler", "1.36", scheduler=True, draxr_flags=("--qps", "5", "--burst", "5"))
ROUNDS = int(os.environ.get("DRAXR_COEXISTENCE_ROUNDS", "20"))
DEVICES_PER_NODE = 4
PER_SIDE = 4
OPT_OUT = "draxr.io/opt-out"


@pytest.fixture(scope="module")
def coexisting(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[LocalCluster]:
    if "1.36-default" not in selected_targets(request.config):
        pytest.skip("the 1.36 row is not selected: --e2e-targets=1.36-default or make e2e-local")
    if (reason := unavailable(ROW)) is not None:
        pytest.skip(reason)
    cluster = LocalCluster(ROW, tmp_path_factory.mktemp("coexistence"), workers=1)
    try:
        cluster.start()
    except LocalError as e:
        cluster.stop()
        pytest.skip(str(e))
    try:
        yield cluster
    finally:
        cluster.stop()


@pytest.fixture
def target(coexisting: LocalCluster) -> Iterator[Target]:
    got = cluster_target(str(coexisting.kubeconfig), name=ROW.name)
    if isinstance(got, str):
        pytest.fail(f"the local control plane is not usable: {got}")
    got.processes = coexisting.processes
    got.local = True
    try:
        yield got
    finally:
        got.teardown()


def _pool(target: Target) -> None:
    target.device_class()
    for node in target.nodes:
        target.slice(node, DEVICES_PER_NODE)


def _namespace(target: Target, name: str, labels: dict[str, str]) -> str:
    target.admin.create(
        NAMESPACES, {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name, "labels": labels}}
    )
    target.created.append((NAMESPACES, name, None))
    target.wait(
        "serviceaccounts", lambda sas: any(s["metadata"]["name"] == "default" for s in sas), namespace=name
    )
    return name


def _claim(target: Target, claim_name: str) -> Obj:
    return {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "ResourceClaim",
        "metadata": {"name": claim_name},
        "spec": {
            "devices": {"requests": [{"name": "gpu", "exactly": {"deviceClassName": target.class_name()}}]}
        },
    }


def _pod(pod_name: str, requests: Obj, **spec: object) -> Obj:
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": pod_name},
        "spec": {
            "containers": [
                {
                    "name": "c",
                    "image": "registry.k8s.io/pause:3.10",
                    "resources": {"requests": requests, "limits": requests},
                }
            ],
            "terminationGracePeriodSeconds": 0,
            **spec,
        },
    }


def _create_at_once(target: Target, pods: list[tuple[str, Obj]]) -> None:
    """Every pod created from its own thread, released together (kube-scheduler and draxr race)."""
    start = threading.Barrier(len(pods))
    errors: list[BaseException] = []

    def create(ns: str, body: Obj) -> None:
        start.wait(30)
        try:
            target.admin.create(PODS, body, ns)
        except BaseException as e:  # reported below
            errors.append(e)

    threads = [threading.Thread(target=create, args=p) for p in pods]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    assert not errors, errors


def _round(target: Target, r: int, claims_ns: str) -> None:
    for i in range(PER_SIDE):
        target.admin.create(RESOURCE_CLAIMS, _claim(target, f"c{r}-{i}"), claims_ns)
    pods = [
        (
            claims_ns,
            _pod(
                f"k{r}-{i}",
                {"cpu": "100m"},
                resourceClaims=[{"name": "gpu", "resourceClaimName": f"c{r}-{i}"}],
            ),
        )
        for i in range(PER_SIDE)
    ]
    pods += [(target.namespace, _pod(f"x{r}-{i}", {target.ext: "1"})) for i in range(PER_SIDE)]
    _create_at_once(target, pods)


def _all_pods(target: Target, namespaces: list[str]) -> list[Obj]:
    return [p for ns in dict.fromkeys(namespaces) for p in target.admin.list(PODS, ns).get("items") or []]


def _all_claims(target: Target, namespaces: list[str]) -> list[Obj]:
    return [
        c
        for ns in dict.fromkeys(namespaces)
        for c in target.admin.list(RESOURCE_CLAIMS, ns).get("items") or []
    ]


def _wait(what: str, check: object, timeout: float) -> None:
    deadline = time.monotonic() + timeout
    while not check():  # type: ignore[operator]
        if time.monotonic() > deadline:
            raise TimeoutError(f"{what} within {timeout}s")
        time.sleep(0.2)  # polling the API server, bounded by the deadline


def _doubles(claims: list[Obj]) -> dict[str, list[str]]:
    held: dict[str, list[str]] = {}
    for c in claims:
        for res in ((c.get("status") or {}).get("allocation") or {}).get("devices", {}).get("results", []):
            if res.get("adminAccess") or res.get("shareID"):
                continue
            held.setdefault(f"{res['pool']}/{res['device']}", []).append(
                f"{c['metadata']['namespace']}/{c['metadata']['name']}"
            )
    return {d: cs for d, cs in held.items() if len(cs) > 1}


def _clean(target: Target, namespaces: list[str]) -> None:
    for p in _all_pods(target, namespaces):
        try:
            target.admin.request(
                "delete",
                PODS.path(p["metadata"]["namespace"], p["metadata"]["name"]),
                body={"apiVersion": "v1", "kind": "DeleteOptions", "gracePeriodSeconds": 0},
                resource="pods",
            )
        except ApiError as e:
            if not e.not_found:
                raise
    for c in _all_claims(target, namespaces):
        try:
            target.admin.delete(RESOURCE_CLAIMS, c["metadata"]["name"], c["metadata"]["namespace"])
        except ApiError as e:
            if not e.not_found:
                raise
    _wait(
        "pods and claims gone",
        lambda: not _all_pods(target, namespaces) and not _all_claims(target, namespaces),
        90,
    )


def _devices_valid(target: Target, pods: list[Obj], claims: list[Obj]) -> None:
    """Every bound pod's devices are on its node (the slices are named after their nodes)."""
    by_name = {(c["metadata"]["namespace"], c["metadata"]["name"]): c for c in claims}
    for p in pods:
        ns, node = p["metadata"]["namespace"], p["spec"]["nodeName"]
        names = [e.get("resourceClaimName") for e in p["spec"].get("resourceClaims") or []]
        names.append(
            ((p.get("status") or {}).get("extendedResourceClaimStatus") or {}).get("resourceClaimName")
        )
        held = [by_name[(ns, n)] for n in names if n and (ns, n) in by_name]
        assert held, f"{ns}/{p['metadata']['name']} is bound without a claim"
        for c in held:
            results = c["status"]["allocation"]["devices"]["results"]
            assert results
            assert {r["pool"] for r in results} == {f"{node}-e2e-{target.run_id}"}


def test_with_routing_kube_scheduler_and_draxr_never_share_a_device(target: Target) -> None:
    _pool(target)
    namespaces = [target.namespace]
    for r in range(ROUNDS):
        _round(target, r, target.namespace)
        _wait(
            f"round {r}: {2 * PER_SIDE} pods bound",
            lambda: (
                sum(1 for p in _all_pods(target, namespaces) if p["spec"].get("nodeName")) == 2 * PER_SIDE
            ),
            120,
        )
        pods = _all_pods(target, namespaces)
        claims = _all_claims(target, namespaces)
        assert {p["spec"].get("schedulerName") for p in pods} == {"draxr"}, (
            "a claim pod stayed with kube-scheduler"
        )
        assert _doubles(claims) == {}, f"round {r}"
        _devices_valid(target, pods, claims)
        _clean(target, namespaces)


def _assert_reported(
    target: Target, namespaces: list[str], worker: DraxrProcess, doubles: dict[str, list[str]]
) -> None:
    """A DeviceAllocatedTwice Event on every claim holding a doubled device, and the gauge."""
    claims = {c for cs in doubles.values() for c in cs}

    def reported() -> bool:
        told = {
            f"{e['involvedObject']['namespace']}/{e['involvedObject']['name']}"
            for ns in namespaces
            for e in target.admin.list(EVENTS, ns).get("items") or []
            if e.get("reason") == "DeviceAllocatedTwice" and e["involvedObject"]["kind"] == "ResourceClaim"
        }
        return claims <= told

    _wait("DeviceAllocatedTwice events on both claims", reported, 30)
    _wait("the gauge", lambda: _gauge(worker.get("/metrics")[1]) >= 1, 30)


def _gauge(metrics: str) -> float:
    """draxr_double_allocated_devices in a /metrics text (more pods bind meanwhile: not exact)."""
    for line in metrics.splitlines():
        if line.startswith("draxr_double_allocated_devices "):
            return float(line.split()[1])
    return 0.0


def test_without_routing_the_double_allocation_is_reported(target: Target, coexisting: LocalCluster) -> None:
    _pool(target)
    opted_out = _namespace(target, f"draxr-e2e-{target.run_id}-out", {OPT_OUT: "true"})
    namespaces = [target.namespace, opted_out]
    assert coexisting.processes is not None
    worker = coexisting.processes.procs["worker-0"]
    for r in range(ROUNDS):
        _round(target, r, opted_out)
        _wait(
            f"round {r}: all bound or stuck",
            lambda: (
                sum(1 for p in _all_pods(target, namespaces) if p["spec"].get("nodeName")) == 2 * PER_SIDE
                or _doubles(_all_claims(target, namespaces))
            ),
            120,
        )
        doubles = _doubles(_all_claims(target, namespaces))
        if doubles:
            _assert_reported(target, namespaces, worker, doubles)
            return
        _clean(target, namespaces)
    pytest.skip(f"no device was allocated twice in {ROUNDS} rounds: the detector was not exercised")
