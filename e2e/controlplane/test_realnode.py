"""A real node on containerd (realnode.py): a control plane advertising the row bridge's address and
one containerd node in its own network namespace. Pods run the workload image (busybox), get pod IPs
the host reaches, see exactly their claim's devices as ``DRA_DEVICE_`` variables applied by the
runtime from the driver's CDI specs; the host is as before afterwards.

Binaries: build.sh's cache (make controlplane), busybox-static and runc from Debian.
Skips with the reason when any is missing, unless CI=true. Tests run in file order on one
module-scoped cluster; the last one stops it.
"""

from __future__ import annotations

import contextlib
import hashlib
import http.client
import io
import json
import os
import re
import subprocess
import tarfile
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from . import realnode
from .host import HostState
from .launcher import DEFAULT_CONTROLLERS, Client, ControlPlane, find_binaries
from .nodes import DRIVER, NODE_CONTROLLERS, Nodes, NodeSpec
from .oci import Image, write_archive
from .realnode import (
    WORKLOAD_IMAGE,
    HostNetState,
    NodeBinaries,
    RealNodeConfig,
    RowNetwork,
    find_node_binaries,
)
from .test_nodes import require_built

Obj = dict[str, Any]
NS = "realnode-e2e"
RESOURCE = "/apis/resource.k8s.io/v1"


def test_oci_archive_is_a_layout_whose_digests_match(tmp_path: Path) -> None:
    """No binaries needed: the archive ctr imports names its image, and every blob is what its
    descriptor says (digest and size), the layer holding the file and the link."""
    src = tmp_path / "prog"
    src.write_bytes(b"#!/bin/sh\n")
    src.chmod(0o755)
    archive = write_archive(
        Image(
            name="draxr.invalid/t/x:1", files={"/bin/prog": src}, links={"/bin/alias": "prog"}, cmd=["prog"]
        ),
        tmp_path / "x.tar",
    )
    with tarfile.open(archive) as tar:
        blobs = {
            m.name: tar.extractfile(m).read()  # type: ignore[union-attr]
            for m in tar.getmembers()
            if m.isfile()
        }
    index = json.loads(blobs["index.json"])
    [desc] = index["manifests"]
    assert desc["annotations"]["io.containerd.image.name"] == "draxr.invalid/t/x:1"

    def blob(d: Obj) -> bytes:
        data = blobs[f"blobs/sha256/{d['digest'].removeprefix('sha256:')}"]
        assert hashlib.sha256(data).hexdigest() == d["digest"].removeprefix("sha256:")
        assert len(data) == d["size"]
        return data

    manifest = json.loads(blob(desc))
    config = json.loads(blob(manifest["config"]))
    [layer_desc] = manifest["layers"]
    layer = blob(layer_desc)
    assert config["rootfs"]["diff_ids"] == [layer_desc["digest"]]
    assert config["config"]["Cmd"] == ["prog"]
    with tarfile.open(fileobj=io.BytesIO(layer)) as tar:
        members = {m.name: m for m in tar.getmembers()}
    assert members["bin/prog"].mode == 0o755
    assert members["bin/alias"].issym()
    assert members["bin/alias"].linkname == "prog"
    assert members["bin"].isdir()


def test_host_net_state_reports_new_lines_naming_the_row() -> None:
    """The check can fail: against an empty snapshot, the loopback link is a leftover of a row whose
    marker it names, and nothing is for a marker nothing names."""
    empty = HostNetState(())
    assert any(line.startswith("link ") for line in empty.leftovers(["lo:"]))
    assert empty.leftovers(["no-such-row-marker"]) == []


@dataclass
class Row:
    cp: ControlPlane
    nodes: Nodes
    net: RowNetwork
    bins: NodeBinaries
    host: HostState
    host_net: HostNetState
    started: float  # seconds from nothing to a Ready node with its devices
    nodes_started: float  # of which: containerd, images, kubelet, drivers, kube-proxy

    @property
    def admin(self) -> Client:
        return self.cp.client()

    def wait(self, what: str, check: Callable[[], Any], timeout: float = 90.0) -> None:
        self.cp.wait_for(what, lambda: bool(check()), timeout)

    def pod(self, name: str) -> Obj:
        status, body = self.admin.get(f"/api/v1/namespaces/{NS}/pods/{name}")
        assert status == 200, body
        return body

    def create_pod(self, name: str, spec: Obj) -> None:
        body = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name}, "spec": spec}
        status, answer = self.admin.post(f"/api/v1/namespaces/{NS}/pods", body)
        assert status == 201, answer

    def running(self, name: str) -> Obj:
        """Waits until the pod is Running and returns it."""
        last: list[Obj] = [{}]

        def check() -> bool:
            last[0] = self.pod(name)
            return (last[0].get("status") or {}).get("phase") == "Running"

        try:
            self.wait(f"pod {name} is not Running", check, 120)
        except Exception as e:
            raise AssertionError(f"{e}\nstatus: {last[0].get('status')}") from e
        return last[0]

    def log(self, name: str, container: str) -> str:
        status, body = self.admin.get(f"/api/v1/namespaces/{NS}/pods/{name}/log", container=container)
        assert status == 200, body
        return str(body.get("raw", ""))


@contextlib.contextmanager
def _timed(start: list[float]) -> Iterator[None]:
    """Records when the next context manager of a ``with`` starts entering."""
    start[0] = time.monotonic()
    yield


@pytest.fixture(scope="module")
def row(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Row]:
    bins = find_node_binaries("1.37")
    require_built(find_binaries("1.37"), bins)
    assert isinstance(bins, NodeBinaries)
    work = tmp_path_factory.mktemp("realnode")
    host, host_net = HostState.now(), HostNetState.now()
    t0 = time.monotonic()
    t_nodes = [0.0]
    with (
        RowNetwork(nodes=1) as net,
        ControlPlane(
            "1.37",
            controllers=(*DEFAULT_CONTROLLERS, *NODE_CONTROLLERS),
            scheduler=True,
            workdir=work / "cp",
            advertise_address=net.host_ip,
        ) as cp,
        _timed(t_nodes) as _,
        Nodes(
            cp,
            [NodeSpec("r1", gpus=4)],
            workdir=work / "nodes",
            runtime="containerd",
            real=RealNodeConfig(bins, net),
        ) as nodes,
    ):
        r = Row(cp, nodes, net, bins, host, host_net, time.monotonic() - t0, time.monotonic() - t_nodes[0])
        _setup(r)
        yield r


def _setup(r: Row) -> None:
    admin = r.admin
    status, body = admin.post("/api/v1/namespaces", {"metadata": {"name": NS}})
    assert status == 201, body
    r.wait(
        "no default ServiceAccount",
        lambda: admin.get(f"/api/v1/namespaces/{NS}/serviceaccounts/default")[0] == 200,
    )
    expression = f'device.driver == "{DRIVER}"'
    status, body = admin.post(
        f"{RESOURCE}/deviceclasses",
        {"metadata": {"name": DRIVER}, "spec": {"selectors": [{"cel": {"expression": expression}}]}},
    )
    assert status == 201, body
    template = {
        "metadata": {"name": "two-gpus"},
        "spec": {
            "spec": {
                "devices": {
                    "requests": [
                        {"name": "gpu", "exactly": {"deviceClassName": DRIVER, "count": 2}},
                    ]
                }
            }
        },
    }
    status, body = admin.post(f"{RESOURCE}/namespaces/{NS}/resourceclaimtemplates", template)
    assert status == 201, body


def _container(name: str, command: str, claims: list[str] | None = None) -> Obj:
    out: Obj = {
        "name": name,
        "image": WORKLOAD_IMAGE,
        "imagePullPolicy": "Never",
        "command": ["sh", "-c", command],
    }
    if claims is not None:
        out["resources"] = {"claims": [{"name": c} for c in claims]}
    return out


def test_the_node_runs_on_containerd(row: Row) -> None:
    status, body = row.admin.get("/api/v1/nodes/r1")
    assert status == 200
    assert body["status"]["nodeInfo"]["containerRuntimeVersion"].startswith("containerd://")
    addresses = {a["type"]: a["address"] for a in body["status"]["addresses"]}
    assert addresses["InternalIP"] == row.net.node_ip(0)
    print(
        f"row start: {row.started:.1f}s, of which the node (containerd, images, kubelet, drivers): "
        f"{row.nodes_started:.1f}s"
    )


def test_a_pod_gets_an_ip_the_host_reaches(row: Row) -> None:
    row.create_pod(
        "web",
        {
            "containers": [
                _container(
                    "web",
                    "mkdir -p /www && echo hello-from-pod > /www/index.html && exec httpd -f -p 8080 -h /www",
                )
            ]
        },
    )
    pod = row.running("web")
    ip = pod["status"]["podIP"]
    assert ip.startswith(row.net.pod_cidr(0).rsplit(".", 2)[0]), ip

    def answers() -> bool:
        conn = http.client.HTTPConnection(ip, 8080, timeout=2)
        try:
            conn.request("GET", "/")
            return conn.getresponse().read() == b"hello-from-pod\n"
        except OSError:
            return False
        finally:
            conn.close()

    try:
        row.wait(f"the host cannot reach pod IP {ip}:8080", answers, 30)
    except Exception as e:
        raise AssertionError(f"{e}\npod: {row.pod('web').get('status')}\nlog: {row.log('web', 'web')}") from e


def test_containers_see_exactly_their_devices(row: Row) -> None:
    """The claim's two devices are in the env of the container that names the claim, none in the
    one that does not; the values name driver, pool and device."""
    row.create_pod(
        "dra",
        {
            "resourceClaims": [{"name": "gpus", "resourceClaimTemplateName": "two-gpus"}],
            "containers": [
                _container("app", "env; exec sleep 3600", ["gpus"]),
                _container("plain", "env; exec sleep 3600"),
            ],
        },
    )
    pod = row.running("dra")
    [status] = [s for s in pod["status"]["resourceClaimStatuses"] if s["name"] == "gpus"]
    status_code, claim = row.admin.get(
        f"{RESOURCE}/namespaces/{NS}/resourceclaims/{status['resourceClaimName']}"
    )
    assert status_code == 200, claim
    results = claim["status"]["allocation"]["devices"]["results"]
    want = sorted(
        f"DRA_DEVICE_{r['device'].upper().replace('-', '_')}={r['driver']}/{r['pool']}/{r['device']}"
        for r in results
    )
    assert len(want) == 2
    app = sorted(line for line in row.log("dra", "app").splitlines() if line.startswith("DRA_DEVICE_"))
    plain = [line for line in row.log("dra", "plain").splitlines() if line.startswith("DRA_DEVICE_")]
    assert app == want
    assert plain == []


def test_a_pod_reaches_the_api_through_the_kubernetes_service(row: Row) -> None:
    """The kubelet's KUBERNETES_SERVICE_HOST is the Service's ClusterIP; kube-proxy's rules in the
    node's namespace send it to the API server on the row bridge. busybox's wget crashes on TLS, so
    the pod sends plain HTTP: the reply only Go's HTTPS server gives proves the API server answered."""
    request = 'printf "GET /version HTTP/1.0\\r\\n\\r\\n"'
    row.create_pod(
        "api",
        {
            "restartPolicy": "Never",
            "containers": [
                _container(
                    "api",
                    "echo host=$KUBERNETES_SERVICE_HOST; "
                    f"{request} | nc -w 10 $KUBERNETES_SERVICE_HOST $KUBERNETES_SERVICE_PORT",
                )
            ],
        },
    )
    row.wait(
        "pod api did not finish",
        lambda: (row.pod("api").get("status") or {}).get("phase") in ("Succeeded", "Failed"),
        120,
    )
    log = row.log("api", "api")
    assert row.pod("api")["status"]["phase"] == "Succeeded", log
    assert "host=10.0.0.1" in log
    assert "Client sent an HTTP request to an HTTPS server." in log, log


def test_the_host_is_as_before(row: Row) -> None:
    """Teardown removes the row's links, routes, mounts and rules and puts back no sysctl."""
    for name in ("web", "dra", "api"):
        row.admin.delete(f"/api/v1/namespaces/{NS}/pods/{name}", gracePeriodSeconds="0")
    row.wait(
        "pods not gone",
        lambda: not (row.admin.get(f"/api/v1/namespaces/{NS}/pods")[1].get("items")),
        60,
    )
    run_dir = str(row.nodes._run)
    t0 = time.monotonic()
    row.nodes.stop()
    stopped = time.monotonic() - t0
    row.net.stop()
    markers = [row.net.prefix, run_dir, f".{row.net.base}.", "draxr-e2e-run", "cgroup "]
    assert row.host_net.leftovers(markers) == []
    assert row.nodes.host_repairs == []
    assert row.host.differences(HostState.now()) == []
    assert re.fullmatch(r"dx[0-9a-f]{6}", row.net.prefix)
    print(f"node stop: {stopped:.1f}s")


def test_two_rows_never_reserve_the_same_subnet(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Rows of two runs at once pick subnets before either adds its bridge: a reservation keeps them
    apart, one left by a process that is gone is taken over, and releasing the last removes the
    directory."""
    monkeypatch.setattr(realnode, "RESERVATIONS", tmp_path / "rows")
    assert realnode._reserve(10)
    assert not realnode._reserve(10)  # held by this (live) process
    gone = subprocess.run(["sh", "-c", "echo $$"], capture_output=True, text=True, check=True)
    (tmp_path / "rows" / "11").write_text(gone.stdout.strip())
    assert realnode._reserve(11)  # its holder exited
    assert (tmp_path / "rows" / "11").read_text() == str(os.getpid())
    realnode._release(10)
    assert realnode._reserve(10)
    realnode._release(10)
    realnode._release(11)
    assert not (tmp_path / "rows").exists()
