"""An in-process Kubernetes API server for draxr's integration tests, demo and benchmarks.

It speaks enough of the REST protocol for the official ``kubernetes`` client and ``kubectl``:
discovery, CRUD with resourceVersions and optimistic concurrency, watches with history and 410,
status and binding subresources, three patch types, finalizers, garbage collection, dry runs,
admission webhooks, and failure injection. Start with :class:`Emulator`.
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
