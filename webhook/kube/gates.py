"""Whether kube-apiserver keeps the KEP-5004 fields (``DRAExtendedResource``), asked of the server.

A server-side dry-run create of a probe DeviceClass with ``spec.extendedResourceName``: the field
kept in the answer means the gate is on; a gate-off apiserver drops it (``dropDisabledFields``).
Nothing is ever stored, and draxr's own DeviceClass hook never sees it (its ``matchConditions`` skip
classes named ``draxr-gate-probe-...``), so the probe works before draxr's webhook is ready. Each
probe also reads the server's version (``/version``): its release's quota rules apply.

One answer for the whole cluster (kube/sharedgate.py): the worker's leader probes every ``interval``
seconds and publishes what it found; every other replica reads that answer and probes on its own
only while it is missing, unreadable or stale. Until the first probe answers, the server's version
stands in (1.36 and later: on by default). A probe that fails after one answered keeps that answer
(a 1.35 apiserver with the gate on, briefly unreachable, is not taken for one with the gate off);
the next try comes after ``RETRY_INTERVAL``. ``setting`` "on"/"off" skips probing and sharing.
"""

from __future__ import annotations

import logging
import threading
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Final, Literal

from ..core.api.constants import GATE_PROBE_PREFIX
from ..core.api.objects import format_time
from ..core.cluster.gates import version_gate
from .client import ApiError, KubeClient
from .resources import DEVICE_CLASSES
from .sharedgate import READ_INTERVAL, SharedAnswer, SharedGateRecord

log = logging.getLogger("draxr.gates")

Setting = Literal["on", "off", "auto"]
PROBE_NAME: Final = "draxr.io/gate-probe"
DEFAULT_INTERVAL: Final = 300.0
#: After a failed probe, the next comes this soon (seconds).
RETRY_INTERVAL: Final = 5.0
LAST_PROBE: Final = "last probe"
PROBE: Final = "probe"


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


def _never() -> bool:
    return False


def _wall() -> datetime:
    return datetime.now(UTC)


class ApiserverGate:
    def __init__(
        self,
        client: KubeClient | None,
        setting: Setting = GateSettings.setting,
        *,
        interval: float = GateSettings.interval,
        on_change: Callable[[bool, str], None] | None = None,
        shared: SharedGateRecord | None = None,
        publishes: Callable[[], bool] = _never,
        identity: str = "",
        reads: bool = True,
        read_interval: float = READ_INTERVAL,
        clock: Callable[[], float] = time.monotonic,
        wall: Callable[[], datetime] = _wall,
    ) -> None:
        """``client`` None (a snapshot, offline): "auto" counts as on. ``shared``: the cluster-wide
        answer; ``publishes``: whether this replica probes and writes it (the worker's leader), the
        others read it every ``read_interval`` seconds, if they use it (``reads``: a worker without
        the webhook only publishes); ``identity`` names the writer."""
        self._client = client
        self.setting = setting
        self.interval = interval
        self._on_change = on_change
        self._shared = shared if setting == "auto" else None
        self._publishes = publishes
        self.identity = identity
        self._reads = reads
        self.read_interval = min(read_interval, interval)
        self._clock = clock
        self._wall = wall
        self._lock = threading.Lock()
        self._enabled = setting != "off"
        self.source = f"--apiserver-gate={setting}" if setting != "auto" else "not probed yet"
        self._answered = False  # some probe has answered: its answer outlives a failed one
        self._failed = False  # the last own probe failed: retry soon
        self._probed: float | None = None  # when this replica last probed (its clock)
        self._version = ""  # the server's gitVersion, read with each probe ("" unknown)
        self._stop = threading.Event()
        self._wake = threading.Event()
        self._thread: threading.Thread | None = None

    @property
    def enabled(self) -> bool:
        with self._lock:
            return self._enabled

    def __call__(self) -> bool:
        return self.enabled

    @property
    def version(self) -> str:
        """kube-apiserver's ``gitVersion`` as last read ("" unknown): its release's quota rules apply."""
        with self._lock:
            return self._version

    def start(self) -> ApiserverGate:
        if self._client is not None and self.setting != "auto":
            self._read_version(self._client)  # a fixed gate still has a release
        if self.setting == "auto" and self._client is not None:
            self.refresh()
            self._thread = threading.Thread(target=self._loop, name="apiserver-gate", daemon=True)
            self._thread.start()
        return self

    def stop(self) -> None:
        self._stop.set()
        self._wake.set()
        if self._thread is not None:
            self._thread.join(timeout=5)

    def wake(self) -> None:
        """Refresh now (this replica just became the worker's leader: publish at once)."""
        self._wake.set()

    def next_wait(self) -> float:
        """Seconds until the next refresh: the read interval while another replica publishes, the
        probe interval while this one does, sooner after a failed probe."""
        if self._shared is not None and not self._publishes():
            return self.read_interval if self._reads else self.interval
        return min(self.interval, RETRY_INTERVAL) if self._failed else self.interval

    def _loop(self) -> None:
        while not self._stop.is_set():
            self._wake.wait(self.next_wait())
            self._wake.clear()
            if self._stop.is_set():
                return
            self.refresh()

    def refresh(self) -> bool:
        """Read the shared answer or probe, as this replica's part says; returns the answer."""
        if self._client is None:
            return self.enabled
        if self.setting != "auto":
            self._read_version(self._client)
            return self.enabled
        if self._shared is not None and not self._publishes():
            if not self._reads:
                return self.enabled  # nothing here uses the answer; the leader publishes it
            why = self._adopt_shared(self._shared)
            if why is None:
                return self.enabled
            if self._probed is not None and not self._failed and self._clock() - self._probed < self.interval:
                return self.enabled  # our own probe is recent enough
            return self._probe_now(self._client, f" ({why})")
        return self._probe_now(self._client, "")

    def _adopt_shared(self, shared: SharedGateRecord) -> str | None:
        """Take the published answer; None when taken, else why not (for the source)."""
        try:
            found = shared.read()
        except (ApiError, OSError) as e:
            return f"shared answer unreadable: {e}"
        if found is None:
            return "no shared answer"
        if found.stale(self._wall(), self.interval):
            return f"shared answer stale since {format_time(found.probed_at)}"
        with self._lock:
            self._version = found.version or self._version
        self._set(
            found.enabled, f"shared by {found.holder or 'the worker'}, probed {format_time(found.probed_at)}"
        )
        return None

    def _probe_now(self, client: KubeClient, note: str) -> bool:
        self._read_version(client)
        try:
            enabled, source = self._probe(client), PROBE + note
            self._answered, self._failed = True, False
            self._probed = self._clock()
        except (ApiError, OSError) as e:
            self._failed = True
            if self._answered:
                enabled, source = self.enabled, f"{LAST_PROBE} (probe failed: {e})"
            else:
                enabled, source = self._from_version(client), f"server version (probe failed: {e})"
        self._set(enabled, source)
        if not self._failed and self._shared is not None and self._publishes():
            self._publish(self._shared, enabled)
        return enabled

    def _publish(self, shared: SharedGateRecord, enabled: bool) -> None:
        answer = SharedAnswer(enabled, self.version, self._wall(), self.identity)
        try:
            shared.write(answer)
        except (ApiError, OSError) as e:
            log.warning(
                "could not publish the apiserver gate in ConfigMap %s/%s: %s",
                shared.namespace,
                shared.name,
                e,
            )

    def _set(self, enabled: bool, source: str) -> None:
        with self._lock:
            changed = enabled != self._enabled or self.source == "not probed yet"
            self._enabled, self.source = enabled, source
        if changed:
            log.info("apiserver DRAExtendedResource: %s (%s)", "on" if enabled else "off", source)
            if self._on_change is not None:
                self._on_change(enabled, source)

    def _read_version(self, client: KubeClient) -> None:
        try:
            found = client.server_version()
        except (ApiError, OSError) as e:
            log.info("reading the apiserver's version failed: %s", e)
            return
        with self._lock:
            self._version = found or self._version

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
