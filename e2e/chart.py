"""draxr installed as a platform team installs it (``LocalCluster(..., draxr="chart")``): draxr's
image from ``./Dockerfile`` (e2e/images) imported into every containerd node, then
``helm install draxr manifests/helm/draxr --namespace draxr-system --create-namespace --set
image.repository=<repo> --set image.tag=<tag>`` exactly as docs/install.md says, defaults otherwise
(2 + 2 replicas, ``certs.mode=self``, PodDisruptionBudgets).

The control plane serves the row bridge's address (the nodes' pods reach it through the
``kubernetes`` Service and kube-proxy) and runs with ``--enable-aggregator-routing=true``: the
apiserver calls the hooks at the webhook Service's endpoints, pod IPs the host routes to, since the
host has no kube-proxy to make the Service's cluster IP work.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from .controlplane.launcher import ControlPlaneError, wait_until
from .controlplane.realnode import NodeBinaries, RealNodeConfig, RowNetwork, find_node_binaries
from .images.build import Builder, Built, ImageError, missing_tools

ROOT = Path(__file__).resolve().parents[1]
CHART = ROOT / "manifests" / "helm" / "draxr"
NAMESPACE = "draxr-system"
#: The worker's user as the API server (and its audit log) knows it.
WORKER_SA = f"system:serviceaccount:{NAMESPACE}:draxr-worker"
RELEASE = "draxr"
DEPLOYMENTS = ("draxr-webhook", "draxr-worker")
DRAXR_MODES = ("processes", "chart")
#: What the chart's objects need from kube-controller-manager besides the rows' controllers: the
#: webhook Service's endpoints (the apiserver routes hook calls to them), the PDBs' status.
#: Besides the rows' controllers: Services' endpoints, the PDBs, and what a lost node needs (the taint
#: eviction controller deletes the pods of an unreachable node once their toleration ends; pod garbage
#: collection removes the pods of a deleted Node).
CHART_CONTROLLERS = (
    "endpoints-controller",
    "endpointslice-controller",
    "disruption-controller",
    "taint-eviction-controller",
    "pod-garbage-collector-controller",
)
APISERVER_ARGS = ("--enable-aggregator-routing=true",)
#: From ``helm install`` to both Deployments Available: image already on the nodes, so this is the
#: pods' start, the chart's certificates and the workers' leader election.
INSTALL_TIMEOUT = 180.0


def find_helm() -> Path | None:
    """helm on PATH, else the one .ci fetches into the checkout's .ci/bin."""
    found = shutil.which("helm")
    if found:
        return Path(found)
    local = ROOT / ".ci" / "bin" / "helm"
    return local if local.is_file() else None


def chart_unavailable(version: str) -> str | None:
    """Why the chart row cannot run here (runtime binaries, image tools, helm), or None."""
    bins = find_node_binaries(version)
    if isinstance(bins, str):
        return bins
    if missing := missing_tools():
        return f"{', '.join(missing)} not on PATH: .ci/image-tools.sh installs them"
    if find_helm() is None:
        return "no helm on PATH nor in .ci/bin: .ci/helm.sh fetches it"
    return None


def split_ref(ref: str) -> tuple[str, str]:
    """``localhost/draxr:abc`` -> (``localhost/draxr``, ``abc``): the chart's image.repository/tag."""
    repo, sep, tag = ref.rpartition(":")
    if not sep or "/" in tag:
        raise ValueError(f"image reference {ref!r} has no tag")
    return repo, tag


class ChartInstall:
    """The chart row's pieces: its network, its images, the helm release and what it measured."""

    def __init__(self, workdir: Path, nodes: int) -> None:
        self.workdir = workdir
        self.net = RowNetwork(nodes=nodes)
        self.bins: NodeBinaries | None = None
        self.draxr_image: Built | None = None
        self.workload_image: Built | None = None
        #: Seconds from ``helm install`` to both Deployments Available.
        self.install_seconds = 0.0

    def control_plane_args(self) -> dict[str, Any]:
        # The audit log: the fault runs prove from the API server's own record that no pod was bound
        # twice and no fenced leader wrote (bench/audit.py).
        return {"advertise_address": self.net.host_ip, "extra_apiserver_args": APISERVER_ARGS, "audit": True}

    @property
    def image(self) -> str:
        assert self.draxr_image is not None
        return self.draxr_image.ref

    @property
    def workload(self) -> str:
        assert self.workload_image is not None
        return self.workload_image.ref

    def prepare(self, progress: Callable[[str], None]) -> None:
        """The node binaries and the images (built once, cached by their inputs)."""
        bins = find_node_binaries("1.37")
        if isinstance(bins, str):
            raise ControlPlaneError(bins)
        self.bins = bins
        try:
            built = {b.name: b for b in Builder(log=progress).all()}
        except ImageError as e:
            raise ControlPlaneError(f"draxr's images: {e}") from e
        self.draxr_image = built["draxr"]
        self.workload_image = built["draxr-workload"]

    def node_config(self) -> RealNodeConfig:
        assert self.bins is not None
        assert self.draxr_image is not None
        assert self.workload_image is not None
        images = (Path(self.draxr_image.tarball), Path(self.workload_image.tarball))
        return RealNodeConfig(self.bins, self.net, images=images)

    def install(self, kubeconfig: Path, kubectl: str, progress: Callable[[str], None]) -> None:
        """helm install as docs/install.md says; waits until both Deployments are Available."""
        helm = find_helm()
        if helm is None:
            raise ControlPlaneError("no helm on PATH nor in .ci/bin")
        argv = [*helm_release(helm, "install", self.image, kubeconfig), "--create-namespace"]
        t0 = time.monotonic()
        done = subprocess.run(argv, capture_output=True, text=True, check=False, timeout=120)
        if done.returncode != 0:
            raise ControlPlaneError(f"helm install failed ({done.returncode}): {done.stderr.strip()}")
        last: list[str] = ["nothing yet"]

        def available() -> bool:
            got = subprocess.run(
                [kubectl, "--kubeconfig", str(kubeconfig), "-n", NAMESPACE, "get", "deploy", "-o", "json"],
                capture_output=True,
                text=True,
                check=False,
            )
            if got.returncode != 0:
                last[0] = got.stderr.strip()
                return False
            items = json.loads(got.stdout)["items"]
            last[0] = json.dumps({d["metadata"]["name"]: d.get("status") for d in items})
            return draxr_available(items)

        progress("waiting for draxr-webhook and draxr-worker to be Available")
        wait_until(
            "draxr's Deployments are not Available",
            available,
            INSTALL_TIMEOUT,
            detail=lambda: f"last status: {last[0]}",
        )
        self.install_seconds = round(time.monotonic() - t0, 1)

    def summary(self) -> dict[str, Any]:
        """The keys ``python -m e2e.local --draxr chart`` adds to its JSON line."""
        assert self.draxr_image is not None
        return {
            "draxr": "chart",
            "namespace": NAMESPACE,
            "runtime": "containerd",
            "image": self.image,
            "workload_image": self.workload,
            "image_bytes": self.draxr_image.unpacked_bytes,
            "install_seconds": self.install_seconds,
        }


def helm_release(helm: Path, verb: str, image: str, kubeconfig: Path, *sets: str) -> list[str]:
    """``helm install`` or ``helm upgrade`` of draxr's release as docs/install.md says: the chart's
    defaults but the image (and ``sets``, ``key=value``)."""
    repo, tag = split_ref(image)
    values = [f"image.repository={repo}", f"image.tag={tag}", *sets]
    return [
        str(helm),
        verb,
        RELEASE,
        str(CHART),
        "--namespace",
        NAMESPACE,
        *[arg for value in values for arg in ("--set", value)],
        "--kubeconfig",
        str(kubeconfig),
    ]


def draxr_available(deployments: list[dict[str, Any]]) -> bool:
    """Both of draxr's Deployments among ``deployments``, each available (``deployment_available``)."""
    by_name = {d["metadata"]["name"]: d for d in deployments}
    return all(n in by_name and deployment_available(by_name[n]) for n in DEPLOYMENTS)


def deployment_available(d: dict[str, Any]) -> bool:
    """Available and every wanted replica ready, of the current generation."""
    spec, status = d.get("spec") or {}, d.get("status") or {}
    want = spec.get("replicas", 1)
    conditions = {c.get("type"): c.get("status") for c in status.get("conditions") or []}
    return (
        status.get("observedGeneration", 0) >= d["metadata"].get("generation", 0)
        and status.get("readyReplicas", 0) == want
        and status.get("updatedReplicas", 0) == want
        and conditions.get("Available") == "True"
    )
