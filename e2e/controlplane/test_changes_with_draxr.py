"""draxr installed through the two changes a cluster goes through under it (issues 22 and 23): a
node-by-node kubelet upgrade 1.35 -> 1.36, then the DRAExtendedResource gate cycle on -> off -> on.

One 1.36.3 control plane (``LocalCluster`` of the 1.36 row: kube-scheduler, kube-controller-manager,
draxr's webhook as two replicas and two leader-elected workers) and two nodes of 3 GPUs whose
kubelets start as 1.35.4, the gate off there by default. Pods ask for ``example.com/gpu: 1`` (the KEP
example's class).

- Upgrade (issue 23, "upgrades without a cliff"): with no gated kubelet every replica reports
  ``rewrite`` and pods are rewritten into claims. Once ``n1`` runs 1.36, every replica reports
  ``native`` within one gate-probe interval of the first; a new pod takes the native path while ``n1``
  has room, and is rewritten onto the old node once ``n1`` is full: no pod stays pending while a free
  device that can serve it exists (before, every pod went native and the old node's devices sat idle).
  Survivors keep running, their containers created once.
- Gate cycle (issue 22): the control plane and both kubelets restarted with the gate off, the nodes
  labelled as the admin who turned their kubelets' gate off labels them; every replica reports
  ``rewrite``, survivors keep running with their claims, a new pod is rewritten and runs with its
  device, the deleted pods' claims are collected. Then on again: ``native``, a new pod gets a special
  claim and runs; nothing was prepared twice.

Tests run in file order on one module-scoped cluster; the last one stops it and checks the host.
"""

from __future__ import annotations

import re
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from webhook.core.cluster.gates import GATE_LABEL
from webhook.core.paths.rewrite import REWRITTEN_ANNOTATION

from ..kubelet_logs import cdi_records, prepared_twice
from ..local import DRAXR_FLAGS, ROWS, LocalCluster
from .host import HostState
from .launcher import find_binaries, find_node_tools, wait_until
from .nodes import CDI_KIND, EXTENDED_RESOURCE, NodeSpec
from .test_nodes import IMAGE, RESOURCE, require_built

Obj = dict[str, Any]
NS = "draxr-changes"
GATE = "DRAExtendedResource"
NODES = ("n1", "n2")
#: ``--gate-probe-interval`` of the rows (DRAXR_FLAGS): the replicas' answers may differ this long.
PROBE_INTERVAL = float(DRAXR_FLAGS[DRAXR_FLAGS.index("--gate-probe-interval") + 1])
_MODE_METRIC = re.compile(r'^draxr_mode\{mode="([a-z]+)"\} 1\.0$', re.MULTILINE)


@pytest.fixture(scope="module")
def host_before() -> HostState:
    return HostState.now()


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory, host_before: HostState) -> Iterator[LocalCluster]:
    require_built(find_binaries("1.35"), find_binaries("1.36"), find_node_tools())
    old = find_binaries("1.35")
    assert not isinstance(old, str)
    with LocalCluster(
        ROWS["1.36-default"],
        tmp_path_factory.mktemp("changes"),
        webhooks=2,
        nodes=[NodeSpec(n, gpus=3) for n in NODES],
        kubelet=old.kubelet,
    ) as c:
        status, body = c.cp.client().post("/api/v1/namespaces", {"metadata": {"name": NS}})
        assert status == 201, body
        yield c


# -- what the cluster and draxr say ----------------------------------------------------------------


def _pod(c: LocalCluster, name: str) -> Obj:
    status, body = c.cp.client().get(f"/api/v1/namespaces/{NS}/pods/{name}")
    assert status == 200, body
    return body


def _create(c: LocalCluster, name: str) -> None:
    gpu = {EXTENDED_RESOURCE: "1"}
    spec = {
        "terminationGracePeriodSeconds": 0,
        "containers": [{"name": "app", "image": IMAGE, "resources": {"requests": gpu, "limits": gpu}}],
    }
    status, body = c.cp.client().post(
        f"/api/v1/namespaces/{NS}/pods", {"metadata": {"name": name}, "spec": spec}
    )
    assert status == 201, body


def _delete(c: LocalCluster, name: str) -> None:
    status, body = c.cp.client().delete(f"/api/v1/namespaces/{NS}/pods/{name}")
    assert status == 200, body
    wait_until(
        f"pod {name} is not gone",
        lambda: c.cp.client().get(f"/api/v1/namespaces/{NS}/pods/{name}")[0] == 404,
        60,
        detail=lambda: c.logs(),
    )


def _running(c: LocalCluster, name: str, timeout: float = 90.0) -> Obj:
    def runs() -> bool:
        return (_pod(c, name).get("status") or {}).get("phase") == "Running"

    wait_until(f"pod {name} is not Running", runs, timeout, detail=lambda: f"{_pod(c, name)}\n{c.logs()}")
    return _pod(c, name)


def _claim(c: LocalCluster, claim_name: str) -> Obj:
    status, claim = c.cp.client().get(f"{RESOURCE}/namespaces/{NS}/resourceclaims/{claim_name}")
    assert status == 200, claim
    return claim


def _path_and_claim(pod: Obj) -> tuple[str, str]:
    """Which path the pod took and the claim holding its GPU: native (the special claim its
    mapping names) or rewrite (the one claim made from draxr's template)."""
    status = pod.get("status") or {}
    if status.get("extendedResourceClaimStatus"):
        assert REWRITTEN_ANNOTATION not in (pod["metadata"].get("annotations") or {})
        return "native", str(status["extendedResourceClaimStatus"]["resourceClaimName"])
    assert REWRITTEN_ANNOTATION in (pod["metadata"].get("annotations") or {}), pod["metadata"]
    [ref] = status["resourceClaimStatuses"]
    return "rewrite", str(ref["resourceClaimName"])


def _runs_with_its_device(c: LocalCluster, name: str) -> tuple[str, str, str]:
    """Running, its container created once with the CDI ID of its claim's device on its node: the
    path, the node and the claim's uid."""
    pod = _pod(c, name)
    assert (pod.get("status") or {}).get("phase") == "Running", (name, pod.get("status"))
    path, claim_name = _path_and_claim(pod)
    claim = _claim(c, claim_name)
    [result] = claim["status"]["allocation"]["devices"]["results"]
    assert result["pool"] == pod["spec"]["nodeName"], (name, result)
    assert c.nodes is not None
    [record] = cdi_records(c.nodes.cdi_log, NS, name)
    assert record["cdi_devices"] == [f"{CDI_KIND}={result['pool']}-{result['device']}"]
    return path, str(pod["spec"]["nodeName"]), str(claim["metadata"]["uid"])


def _replica_modes(c: LocalCluster) -> dict[str, str]:
    """``draxr_mode`` as each webhook replica exports it."""
    assert c.processes is not None
    out: dict[str, str] = {}
    for name, proc in c.processes.procs.items():
        if name.startswith("webhook"):
            status, text = proc.get("/metrics")
            found = _MODE_METRIC.findall(text) if status == 200 else []
            out[name] = found[0] if len(found) == 1 else "?"
    return out


def _all_replicas_report(c: LocalCluster, mode: str, timeout: float = 60.0) -> None:
    """Every replica reports ``mode``, the last within one probe interval of the first."""
    first: dict[str, float] = {}

    def agree() -> bool:
        now = time.monotonic()
        modes = _replica_modes(c)
        for name, seen in modes.items():
            if seen == mode:
                first.setdefault(name, now)
        return len(first) == len(modes)

    wait_until(f"not every replica reports {mode}", agree, timeout, detail=lambda: str(_replica_modes(c)))
    spread = max(first.values()) - min(first.values())
    # One probe interval, plus one poll of the loop (at most 0.5 s) for where we look.
    assert spread <= PROBE_INTERVAL + 0.5, (mode, first)


def _free(c: LocalCluster, node: str) -> int:
    """GPUs of ``node`` no claim holds."""
    status, body = c.cp.client().get(f"{RESOURCE}/resourceclaims")
    assert status == 200, body
    held = sum(
        1
        for claim in body["items"]
        for r in ((claim.get("status") or {}).get("allocation") or {}).get("devices", {}).get("results", [])
        if r["pool"] == node
    )
    return 3 - held


def _restart_kubelet(c: LocalCluster, node: str, kubelet: Path, version: str) -> None:
    assert c.nodes is not None
    c.nodes.stop_kubelet(node)
    c.nodes.start_kubelet(node, kubelet, version)


def _label_gate(c: LocalCluster, on: bool) -> None:
    """As the admin who sets the kubelets' gate by hand labels the Nodes (docs/modes.md, Mixed clusters)."""
    for node in NODES:
        status, body = c.cp.client().merge_patch(
            f"/api/v1/nodes/{node}", {"metadata": {"labels": {GATE_LABEL: "on" if on else "off"}}}
        )
        assert status == 200, body


# -- the scenarios --------------------------------------------------------------------------------


def test_pods_keep_being_placed_through_a_node_by_node_upgrade(cluster: LocalCluster) -> None:
    c = cluster
    new = find_binaries("1.36")
    assert not isinstance(new, str)
    _all_replicas_report(c, "rewrite")
    for name in ("old-0", "old-1"):
        _create(c, name)
        _running(c, name)
        assert _runs_with_its_device(c, name)[0] == "rewrite"
    survivors = {name: _runs_with_its_device(c, name) for name in ("old-0", "old-1")}

    _restart_kubelet(c, "n1", new.kubelet, f"v{new.version}")
    _all_replicas_report(c, "native")
    # Four free GPUs, some on the upgraded node, some on the old one: each new pod runs, natively
    # where n1 has room, rewritten onto n2 once it has none.
    for i in range(_free(c, "n1") + _free(c, "n2")):
        name = f"mixed-{i}"
        room_on_n1 = _free(c, "n1") > 0
        _create(c, name)
        _running(c, name)
        survivors[name] = _runs_with_its_device(c, name)
        assert survivors[name][:2] == (("native", "n1") if room_on_n1 else ("rewrite", "n2")), name
    assert _free(c, "n1") == _free(c, "n2") == 0

    _restart_kubelet(c, "n2", new.kubelet, f"v{new.version}")
    _all_replicas_report(c, "native")
    for name, seen in survivors.items():  # still running, the same claim, containers created once
        assert _runs_with_its_device(c, name) == seen, name
    rewritten_on_n2 = next(n for n, (path, node, _) in survivors.items() if (path, node) == ("rewrite", "n2"))
    _delete(c, rewritten_on_n2)
    _create(c, "upgraded")
    _running(c, "upgraded")
    assert _runs_with_its_device(c, "upgraded")[:2] == ("native", "n2")


def _flip(c: LocalCluster, on: bool) -> None:
    """The gate flipped as an admin flips it: kube-apiserver, kube-controller-manager and
    kube-scheduler restarted with it, then each kubelet (etcd, the runtimes and drivers running
    throughout), and the Nodes labelled."""
    assert c.nodes is not None
    kubelet = find_binaries(c.cp.version)
    assert not isinstance(kubelet, str)
    c.cp.restart({GATE: on})
    c.nodes.set_gates({GATE: on})
    _label_gate(c, on)
    for node in NODES:
        _restart_kubelet(c, node, kubelet.kubelet, f"v{kubelet.version}")


def test_pods_survive_the_gate_cycle_and_new_ones_take_the_mode(cluster: LocalCluster) -> None:
    c = cluster
    status, body = c.cp.client().get(f"/api/v1/namespaces/{NS}/pods")
    assert status == 200, body
    before = {p["metadata"]["name"]: _runs_with_its_device(c, p["metadata"]["name"]) for p in body["items"]}
    assert {path for path, _, _ in before.values()} == {"native", "rewrite"}

    # off
    _flip(c, False)
    _all_replicas_report(c, "rewrite")
    native = next(n for n, (path, _, _) in before.items() if path == "native")
    doomed = _path_and_claim(_pod(c, native))[1]
    _delete(c, native)
    survivors = {n: seen for n, seen in before.items() if n != native}
    _create(c, "off")
    _running(c, "off")
    assert _runs_with_its_device(c, "off")[0] == "rewrite"
    wait_until(
        "the deleted pod's special claim was not collected",
        lambda: c.cp.client().get(f"{RESOURCE}/namespaces/{NS}/resourceclaims/{doomed}")[0] == 404,
        60,
    )
    for name, seen in survivors.items():
        assert _runs_with_its_device(c, name) == seen, name

    # on again
    _flip(c, True)
    _all_replicas_report(c, "native")
    _delete(c, "off")
    _create(c, "on-again")
    _running(c, "on-again", timeout=120)
    assert _runs_with_its_device(c, "on-again")[0] == "native"
    for name, seen in survivors.items():
        assert _runs_with_its_device(c, name) == seen, name
    assert c.nodes is not None
    assert prepared_twice(c.nodes.prepare_log) == []


def test_the_host_is_as_found_once_the_cluster_stops(cluster: LocalCluster, host_before: HostState) -> None:
    cluster.stop()
    assert cluster.host_repairs == []
    assert HostState.now() == host_before
