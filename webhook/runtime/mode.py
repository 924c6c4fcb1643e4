"""The path draxr takes on this cluster, told to operators: ``/readyz`` details, the gauge
``draxr_mode{mode}``, a log line at start and on every change, and an Event on draxr's Deployment.

The path is decided per pod (core/paths/choice.py); the cluster's mode summarises it: ``native`` when
kube-apiserver keeps the KEP-5004 fields and some kubelet has the gate on, ``rewrite`` otherwise
(``--mode`` other than ``auto`` fixes it). It follows the apiserver gate detector
(kube/gates.py), which re-probes under a running webhook.
"""

from __future__ import annotations

import logging
import re
import threading

from prometheus_client import CollectorRegistry, Gauge

from ..core.paths.choice import MODES, Mode
from ..identity.names import DEFAULT_NAMESPACE, WEBHOOK
from ..kube.cache import ClusterCache
from ..kube.client import ApiError, KubeClient
from ..kube.gates import ApiserverGate
from ..worker.events import create_event, now_rfc3339

log = logging.getLogger("draxr.mode")

CLUSTER_MODES = ("native", "rewrite", "off")
#: The reasons of the Event on draxr's Deployment: the first mode, then each change.
MODE_REASON = "Mode"
MODE_CHANGED_REASON = "ModeChanged"
MODE_REASONS = (MODE_REASON, MODE_CHANGED_REASON)

_MESSAGE = re.compile(r"^draxr mode: ([a-z]+)(?: \(was [a-z]+\))?;? ?(.*)$")


def mode_message(mode: str, before: str | None, why: str) -> str:
    """The mode Event's message: ``draxr mode: M (was B); why``."""
    return f"draxr mode: {mode}" + (f" (was {before})" if before else "") + f"; {why}"


def parse_mode_message(message: str) -> tuple[str, str] | None:
    """The mode and the why of a mode Event's message (``kubectl draxr status`` reads them)."""
    found = _MESSAGE.match(message)
    return (found.group(1), found.group(2)) if found else None


class ModeReporter:
    def __init__(
        self,
        cache: ClusterCache,
        gate: ApiserverGate,
        mode: Mode,
        registry: CollectorRegistry,
        *,
        client: KubeClient | None = None,
        namespace: str = DEFAULT_NAMESPACE,
        deployment: str = WEBHOOK,
    ) -> None:
        self.cache = cache
        self.gate = gate
        self.mode = mode
        self.client = client
        self.namespace = namespace
        self.deployment = deployment
        self._lock = threading.Lock()
        self._last: str | None = None
        self.gauge = Gauge(
            "draxr_mode",
            "1 for the path draxr takes on this cluster (native, rewrite, off).",
            ["mode"],
            registry=registry,
        )
        assert set(MODES) >= {"auto", *CLUSTER_MODES}

    def current(self) -> str:
        if self.mode != "auto":
            return self.mode
        if not self.gate.enabled:
            return "rewrite"
        with self.cache.lock:
            nodes = self.cache.state.nodes
            kubelets_on = not nodes or any(info.kubelet_gate for info in nodes.values())
        return "native" if kubelets_on else "rewrite"

    def details(self) -> list[str]:
        """Lines for ``/readyz``: the mode and why."""
        return [
            f"mode: {self.current()} (--mode={self.mode})",
            f"apiserver DRAExtendedResource: {'on' if self.gate.enabled else 'off'} ({self.gate.source})",
        ]

    def refresh(self) -> str:
        """Recompute; on a change, update the gauge, log a line and record an Event."""
        mode = self.current()
        with self._lock:
            changed, before = mode != self._last, self._last
            self._last = mode
        if changed:
            for m in CLUSTER_MODES:
                self.gauge.labels(m).set(1 if m == mode else 0)
            why = "; ".join(self.details())
            log.info("draxr mode: %s (%s)", mode, why if before is None else f"was {before}; {why}")
            self._event(mode, before, why)
        return mode

    def _event(self, mode: str, before: str | None, why: str) -> None:
        if self.client is None:
            return
        involved = {
            "apiVersion": "apps/v1",
            "kind": "Deployment",
            "name": self.deployment,
            "namespace": self.namespace,
        }
        reason = MODE_CHANGED_REASON if before is not None else MODE_REASON
        try:
            create_event(
                self.client, involved, "Normal", reason, mode_message(mode, before, why), now=now_rfc3339()
            )
        except (ApiError, OSError) as e:
            log.info(
                "could not record the mode Event on Deployment %s/%s: %s", self.namespace, self.deployment, e
            )
