"""The admission webhook's settings (``draxr serve`` flags)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from ..core.constants import DEFAULT_SCHEDULER_NAME
from ..core.paths import Mode

Route = Literal["default-only", "always", "never"]

#: The worker's service account and kube-scheduler: the only writers of pod mappings and
#: extended resource claims (``--allowed-writers``).
DEFAULT_ALLOWED_WRITERS: frozenset[str] = frozenset(
    {"system:serviceaccount:draxr-system:draxr-worker", "system:kube-scheduler"}
)
MAX_BODY_BYTES = 3 * 1024 * 1024


@dataclass(frozen=True)
class AdmissionConfig:
    """What the hooks need to know beyond the cluster state.

    ``claim_wait_seconds``: how long a pod status write by an allowed writer may wait for the
    ResourceClaim it names to reach an informer-fed cache (the worker creates the claim a moment
    before it writes the pod's mapping; the watch may lag behind). 0 disables waiting.

    ``class_read_seconds``: how long a pod admission may wait for a fresh DeviceClass list when
    the cache knows no class for a name the pod asks for (a class created a moment before the pod
    may not have reached the informer; routing is decided only once). 0 trusts the cache.
    """

    allowed_writers: frozenset[str] = DEFAULT_ALLOWED_WRITERS
    route: Route = "default-only"
    scheduler_name: str = DEFAULT_SCHEDULER_NAME
    max_body_bytes: int = MAX_BODY_BYTES
    claim_wait_seconds: float = 2.0
    class_read_seconds: float = 2.0
    fit_cache_size: int = 256
    #: ``--mode``: the path of pods asking for DRA-backed names (core/paths.py); ``auto`` picks it
    #: per pod from the gates. ``force_rewrite``: rewrite even where a device plugin serves the name.
    mode: Mode = "auto"
    force_rewrite: bool = False
