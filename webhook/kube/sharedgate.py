"""One cluster-wide answer to "does kube-apiserver keep the KEP-5004 fields", shared by every replica.

Each replica probing on its own clock (kube/gates.py) could route one ReplicaSet's pods differently
for up to a probe interval after the gate changed. So the worker's leader probes and writes its
answer, with the server's version, in the ConfigMap ``draxr-apiserver-gate`` of draxr's namespace;
every other replica (the webhook's, the worker's followers) reads it every ``READ_INTERVAL`` seconds
(or the probe interval, if shorter) and probes on its own only while that answer is missing,
unreadable, or stale: probed longer ago than two probe intervals and ``STALE_GRACE`` (the leader is
gone, or cannot write). Every replica then reports the same mode within one probe interval of the
leader's probe.

A ConfigMap rather than an annotation on the leader's Lease: leader election rewrites the Lease every
retry period and only the worker may touch it; a ConfigMap any replica may read by name (``get``),
only the worker writes (``create``, and ``get`` and ``update`` by name), and a change of leader
cannot lose it. Without those permissions every replica keeps probing on its own, as before.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Final

from ..core.api.objects import Obj, as_dict, format_time, parse_time
from .client import ApiError, KubeClient
from .resources import CONFIG_MAPS

CONFIGMAP: Final = "draxr-apiserver-gate"
#: How often a replica that does not probe reads the shared answer (seconds).
READ_INTERVAL: Final = 10.0
#: An answer is stale this long after two probe intervals (seconds).
STALE_GRACE: Final = 60.0


@dataclass(frozen=True, slots=True)
class SharedAnswer:
    """What the worker's leader found: the gate, the server's ``gitVersion``, when, who."""

    enabled: bool
    version: str
    probed_at: datetime
    holder: str

    def stale(self, now: datetime, interval: float) -> bool:
        return now - self.probed_at > timedelta(seconds=2 * interval + STALE_GRACE)

    def data(self) -> dict[str, str]:
        return {
            "apiserver": "on" if self.enabled else "off",
            "gitVersion": self.version,
            "probedAt": format_time(self.probed_at),
            "holder": self.holder,
        }


def parse_answer(configmap: Obj) -> SharedAnswer | None:
    """The answer a ConfigMap holds; None when it holds none that can be read."""
    data = as_dict(configmap.get("data"))
    gate, probed = data.get("apiserver"), data.get("probedAt")
    if gate not in ("on", "off") or not isinstance(probed, str) or not probed:
        return None
    version, holder = data.get("gitVersion"), data.get("holder")
    return SharedAnswer(
        gate == "on",
        version if isinstance(version, str) else "",
        parse_time(probed),
        holder if isinstance(holder, str) else "",
    )


class SharedGateRecord:
    """The ConfigMap, read and written through the real client; API errors propagate."""

    def __init__(self, client: KubeClient, namespace: str, name: str = CONFIGMAP) -> None:
        self.client = client
        self.namespace = namespace
        self.name = name

    def read(self) -> SharedAnswer | None:
        try:
            found = self.client.get(CONFIG_MAPS, self.name, self.namespace, retries=0)
        except ApiError as e:
            if e.not_found:
                return None
            raise
        return parse_answer(found)

    def write(self, answer: SharedAnswer) -> None:
        """Create the ConfigMap, or update it (its other keys and labels kept)."""
        try:
            current = self.client.get(CONFIG_MAPS, self.name, self.namespace, retries=0)
        except ApiError as e:
            if not e.not_found:
                raise
            body = {
                "apiVersion": "v1",
                "kind": "ConfigMap",
                "metadata": {
                    "name": self.name,
                    "namespace": self.namespace,
                    "labels": {"app.kubernetes.io/name": "draxr", "app.kubernetes.io/component": "worker"},
                },
                "data": answer.data(),
            }
            self.client.create(CONFIG_MAPS, body, self.namespace)
            return
        current["data"] = {**as_dict(current.get("data")), **answer.data()}
        self.client.update(CONFIG_MAPS, current)
