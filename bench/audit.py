"""What kube-apiserver's audit log proves, and only it can: pods bound twice, and writes a worker
made after its Lease had expired (fencing). The fault runs read the log with
``ControlPlane.audit_events()`` (Lease writes at RequestResponse level, every other write at Metadata:
``e2e/controlplane/launcher.py``'s ``AUDIT_POLICY``).

A worker is told apart by the source IP of its requests: every replica runs as the same
ServiceAccount. Its leadership is read from its own successful Lease writes: held from the moment
the API server received a write naming it holder until ``leaseDurationSeconds`` later, extended by
each renewal. Any other write the API server received from that IP outside such a span is a write by
a fenced leader: the follower may have taken over by then. Lease writes themselves are never
counted (a campaign for the Lease is allowed at any time).
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from e2e.controlplane import launcher

Obj = dict[str, Any]
WRITES = frozenset(launcher.WRITES)  # the verbs the launcher's audit policy logs


def _when(event: Obj) -> datetime:
    return datetime.fromisoformat(str(event["requestReceivedTimestamp"]).replace("Z", "+00:00"))


def _succeeded(event: Obj) -> bool:
    return 200 <= int((event.get("responseStatus") or {}).get("code", 0)) < 300


def _source(event: Obj) -> str:
    ips = event.get("sourceIPs") or [""]
    return str(ips[0])


def bound_twice(events: list[Obj]) -> list[str]:
    """Pods (namespace/name) with more than one successful Binding: bound twice, by anyone."""
    seen: dict[str, int] = {}
    for e in events:
        ref = e.get("objectRef") or {}
        if (
            e.get("verb") == "create"
            and ref.get("resource") == "pods"
            and ref.get("subresource") == "binding"
            and _succeeded(e)
        ):
            key = f"{ref.get('namespace')}/{ref.get('name')}"
            seen[key] = seen.get(key, 0) + 1
    return sorted(k for k, n in seen.items() if n > 1)


def first_binding_after(events: list[Obj], namespace: str, since: datetime, not_from: str) -> datetime | None:
    """When the API server received the first successful Binding in ``namespace`` after ``since``
    from an address other than ``not_from`` (a worker that was deleted: its follower took over)."""
    for e in events:
        ref = e.get("objectRef") or {}
        if (
            e.get("verb") == "create"
            and ref.get("subresource") == "binding"
            and ref.get("namespace") == namespace
            and _succeeded(e)
            and _source(e) != not_from
            and _when(e) > since
        ):
            return _when(e)
    return None


@dataclass(frozen=True)
class Span:
    """One replica's leadership: from a successful Lease write naming it holder to its expiry."""

    source: str
    start: datetime
    end: datetime


def leadership(events: list[Obj], namespace: str, lease: str, username: str) -> list[Span]:
    """Each replica's spans of holding ``lease``, from its own successful writes of it. A write that
    names another holder (a release, or a takeover written from that IP) ends nothing early: the
    span still runs to its expiry, the most the replica itself may assume."""
    spans: list[Span] = []
    for e in events:
        ref = e.get("objectRef") or {}
        if ref.get("resource") != "leases" or ref.get("namespace") != namespace or ref.get("name") != lease:
            continue
        if e.get("verb") not in ("create", "update", "patch") or not _succeeded(e):
            continue
        if (e.get("user") or {}).get("username") != username:
            continue
        spec = (e.get("responseObject") or {}).get("spec") or {}
        if not spec.get("holderIdentity"):
            continue  # a release
        start = _when(e)
        spans.append(
            Span(_source(e), start, start + timedelta(seconds=int(spec.get("leaseDurationSeconds", 0))))
        )
    return spans


def fenced_writes(events: list[Obj], namespace: str, lease: str, username: str) -> list[str]:
    """Writes by ``username`` the API server received from a source that held ``lease`` at no time
    within the Lease's duration before (each as "time verb resource/name from ip")."""
    spans = leadership(events, namespace, lease, username)
    found: list[str] = []
    for e in events:
        if (e.get("user") or {}).get("username") != username or e.get("verb") not in WRITES:
            continue
        ref = e.get("objectRef") or {}
        if ref.get("resource") == "leases":
            continue
        at, source = _when(e), _source(e)
        if not any(s.source == source and s.start <= at <= s.end for s in spans):
            what = f"{ref.get('resource')}/{ref.get('name')}"
            found.append(f"{e['requestReceivedTimestamp']} {e['verb']} {what} from {source}")
    return found
