"""An in-process Kubernetes API server for draxr's tests, benchmarks and ``make demo``.

It speaks enough of the REST protocol for the official ``kubernetes`` client and ``kubectl``:
discovery, CRUD with resourceVersions and optimistic concurrency, watches with history and 410,
status and binding subresources, four patch types, finalizers, dry runs, admission webhooks, and
what a real apiserver cannot do on demand: failure injection, dropped watches, compaction, a request
log. It plays kube-apiserver alone (no kube-controller-manager). Start with :class:`Emulator`.
"""

from .auth import UserInfo, authenticated
from .emulator import ADMIN, DEFAULT_NAMESPACES, Emulator
from .errors import ApiError
from .faults import FaultRule, RequestRecord

__all__ = [
    "ADMIN",
    "DEFAULT_NAMESPACES",
    "ApiError",
    "Emulator",
    "FaultRule",
    "RequestRecord",
    "UserInfo",
    "authenticated",
]
