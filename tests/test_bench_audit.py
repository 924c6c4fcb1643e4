"""bench/audit.py: pods bound twice and a fenced leader's writes, read from audit events."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from bench.audit import bound_twice, fenced_writes, first_binding_after, leadership

Obj = dict[str, Any]
SA = "system:serviceaccount:draxr-system:draxr-worker"
A, B = "10.0.0.10", "10.0.0.11"


def ev(
    at: str, verb: str, resource: str, name: str, *, ip: str = A, user: str = SA, code: int = 201, **more: Any
) -> Obj:
    ref = {
        "resource": resource,
        "namespace": "draxr-system" if resource == "leases" else "default",
        "name": name,
    }
    if "subresource" in more:
        ref["subresource"] = more.pop("subresource")
    return {
        "verb": verb,
        "objectRef": ref,
        "user": {"username": user},
        "sourceIPs": [ip],
        "requestReceivedTimestamp": f"2026-11-28T06:00:{at}Z",
        "responseStatus": {"code": code},
        **more,
    }


def lease(at: str, holder: str, *, ip: str, code: int = 200, duration: int = 15) -> Obj:
    body = {"spec": {"holderIdentity": holder, "leaseDurationSeconds": duration}}
    return ev(at, "update", "leases", "draxr-worker", ip=ip, code=code, responseObject=body)


def test_a_pod_with_two_successful_bindings_is_bound_twice() -> None:
    events = [
        ev("01.000000", "create", "pods", "p", subresource="binding"),
        ev("02.000000", "create", "pods", "p", subresource="binding", code=409),  # refused: not a second
        ev("03.000000", "create", "pods", "q", subresource="binding"),
    ]
    assert bound_twice(events) == []
    assert bound_twice([*events, ev("04.000000", "create", "pods", "q", subresource="binding", ip=B)]) == [
        "default/q"
    ]


def test_writes_within_the_leaders_lease_are_not_fenced() -> None:
    events = [
        lease("00.000000", "worker-a", ip=A),
        ev("05.000000", "create", "pods", "p", subresource="binding"),
        lease("10.000000", "worker-a", ip=A),
        ev("24.000000", "update", "resourceclaims", "c"),  # 14 s after the renewal
    ]
    assert fenced_writes(events, "draxr-system", "draxr-worker", SA) == []


def test_a_write_after_the_lease_expired_is_fenced_even_once_it_leads_again() -> None:
    events = [
        lease("00.000000", "worker-a", ip=A),
        lease("16.000000", "worker-b", ip=B),  # the follower took over after expiry
        ev("20.000000", "update", "resourceclaims", "c", ip=A),  # the cut leader's late write
        ev("21.000000", "create", "pods", "p", subresource="binding", ip=B),
        lease("30.000000", "worker-a", ip=A),
        ev("31.000000", "update", "resourceclaims", "d", ip=A),
    ]
    assert fenced_writes(events, "draxr-system", "draxr-worker", SA) == [
        "2026-11-28T06:00:20.000000Z update resourceclaims/c from 10.0.0.10"
    ]


def test_a_failed_lease_write_gives_no_leadership_and_others_writes_are_not_counted() -> None:
    events = [
        lease("00.000000", "worker-a", ip=A, code=409),  # lost the race: not the leader
        ev("01.000000", "update", "resourceclaims", "c", ip=A),
        ev("02.000000", "update", "resourceclaims", "c", ip=B, user="system:kube-scheduler"),
        lease("03.000000", "", ip=A),  # a release names no holder
    ]
    assert leadership(events, "draxr-system", "draxr-worker", SA) == []
    assert len(fenced_writes(events, "draxr-system", "draxr-worker", SA)) == 1


def test_the_followers_first_binding_after_the_deletion_is_the_failover() -> None:
    """Bindings before the deletion, failed ones and the deleted leader's own do not count."""
    since = datetime(2026, 11, 28, 6, 0, 2, tzinfo=UTC)
    events = [
        ev("01.000000", "create", "pods", "p", subresource="binding", ip=B),  # before
        ev("03.000000", "create", "pods", "q", subresource="binding", ip=A),  # the deleted leader's
        ev("04.000000", "create", "pods", "r", subresource="binding", ip=B, code=409),  # refused
        ev("05.500000", "create", "pods", "s", subresource="binding", ip=B),
    ]
    assert first_binding_after(events, "default", since, A) == datetime(
        2026, 11, 28, 6, 0, 5, 500000, tzinfo=UTC
    )
    assert first_binding_after(events, "other", since, A) is None
