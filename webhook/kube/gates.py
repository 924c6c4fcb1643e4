"""Whether kube-apiserver keeps the KEP-5004 fields (``DRAExtendedResource``), asked of the server.

A server-side dry-run create of a probe DeviceClass with ``spec.extendedResourceName``: the field
kept in the answer means the gate is on; a gate-off apiserver drops it (``dropDisabledFields``).
Nothing is ever stored. The probe repeats every ``interval`` seconds (an upgrade can turn the gate
on under a running webhook); until the first probe answers, the server's version stands in (1.36 and
later: on by default). A probe that fails after one answered keeps that answer (a 1.35 apiserver with
the gate on, briefly unreachable, is not taken for one with the gate off); the next try comes after
``RETRY_INTERVAL``. ``setting`` "on"/"off" skips probing.
"""

from __future__ import annotations

import logging
import threading
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Final, Literal

from ..core.api.constants import GATE_PROBE_PREFIX
from ..core.cluster.gates import version_gate
from .client import ApiError, KubeClient
from .resources import DEVICE_CLASSES

log = logging.getLogger("draxr.gates")

Setting = Literal["on", "off", "auto"]
PROBE_NAME: Final = "draxr.io/gate-probe"
DEFAULT_INTERVAL: Final = 300.0
#: After a failed probe, the next comes this soon (seconds).
RETRY_INTERVAL: Final = 5.0
LAST_PROBE: Final = "last probe"


@dataclass(frozen=True)
class GateSettings:
    """How the webhook learns whether kube-apiserver keeps the KEP-5004 fields."""

    setting: Setting = field(
        default="auto",
        metadata={
            "help": "whether kube-apiserver keeps the KEP-5004 fields; auto probes with a dry-run create"
        },
    )
    interval: float = field(default=DEFAULT_INTERVAL, metadata={"help": "how often auto re-probes"})


class ApiserverGate:
    def __init__(
        self,
        client: KubeClient | None,
        setting: Setting = GateSettings.setting,
        *,
        interval: float = GateSettings.interval,
        on_change: Callable[[bool, str], None] | None = None,
    ) -> None:
        """``client`` None (a snapshot, offline): "auto" counts as on."""
        self._client = client
        self.setting = setting
        self.interval = interval
        self._on_change = on_change
        self._lock = threading.Lock()
        self._enabled = setting != "off"
        self.source = f"--apiserver-gate={setting}" if setting != "auto" else "not probed yet"
        self._answered = False  # some probe has answered: its answer outlives a failed one
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    @property
    def enabled(self) -> bool:
        with self._lock:
            return self._enabled

    def __call__(self) -> bool:
        return self.enabled

    def start(self) -> ApiserverGate:
        if self.setting == "auto" and self._client is not None:
            self.refresh()
            self._thread = threading.Thread(target=self._loop, name="apiserver-gate", daemon=True)
            self._thread.start()
        return self

    def stop(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=5)

    def _loop(self) -> None:
        while not self._stop.wait(
            self.interval if self.source == "probe" else min(self.interval, RETRY_INTERVAL)
        ):
            self.refresh()

    def refresh(self) -> bool:
        """Probe now; returns the (possibly new) answer."""
        if self.setting != "auto" or self._client is None:
            return self.enabled
        try:
            enabled, source = self._probe(self._client), "probe"
            self._answered = True
        except (ApiError, OSError) as e:
            if self._answered:
                enabled, source = self.enabled, f"{LAST_PROBE} (probe failed: {e})"
            else:
                enabled, source = self._from_version(self._client), f"server version (probe failed: {e})"
        self._set(enabled, source)
        return enabled

    def _set(self, enabled: bool, source: str) -> None:
        with self._lock:
            changed = enabled != self._enabled or self.source == "not probed yet"
            self._enabled, self.source = enabled, source
        if changed:
            log.info("apiserver DRAExtendedResource: %s (%s)", "on" if enabled else "off", source)
            if self._on_change is not None:
                self._on_change(enabled, source)

    @staticmethod
    def _probe(client: KubeClient) -> bool:
        body = {
            "apiVersion": "resource.k8s.io/v1",
            "kind": "DeviceClass",
            "metadata": {"name": f"{GATE_PROBE_PREFIX}{uuid.uuid4().hex[:10]}"},
            "spec": {"extendedResourceName": PROBE_NAME},
        }
        answer = client.create(DEVICE_CLASSES, body, dry_run=True)
        return (answer.get("spec") or {}).get("extendedResourceName") == PROBE_NAME

    @staticmethod
    def _from_version(client: KubeClient) -> bool:
        try:
            return version_gate(client.server_version())
        except (ApiError, OSError):
            return False
