"""The launcher's faults of the real components (what the fault runs build on): etcd killed and
started again with its data, etcd paused past a client's timeout, kube-apiserver restarted alone
while kube-scheduler keeps running, and the audit log as the API server's own record of every
write (who, from where, when, the answer)."""

from __future__ import annotations

import uuid
from collections.abc import Iterator

import pytest

from bench.audit import leadership

from .launcher import USERS, ControlPlane, ControlPlaneError, find_binaries
from .test_nodes import require_built

NS = "default"
CONFIGMAPS = f"/api/v1/namespaces/{NS}/configmaps"


@pytest.fixture(scope="module")
def cp() -> Iterator[ControlPlane]:
    require_built(find_binaries("1.37"))
    with ControlPlane("1.37", scheduler=True, audit=True) as plane:
        yield plane


def _configmap(name: str) -> dict[str, object]:
    return {"metadata": {"name": name}, "data": {"k": "v"}}


def _writes_again(cp: ControlPlane) -> None:
    """Waits until kube-apiserver accepts a write again (etcd back, watch cache resynced)."""
    name = f"probe-{uuid.uuid4().hex[:8]}"

    def created() -> bool:
        try:
            status, _ = cp.client().post(CONFIGMAPS, _configmap(name))
        except OSError:
            return False
        return status in (201, 409)

    cp.wait_for("kube-apiserver accepts no write", created, 90)


def test_every_write_is_in_the_audit_log_with_who_where_and_when(cp: ControlPlane) -> None:
    name = f"audited-{uuid.uuid4().hex[:8]}"
    status, _ = cp.client().post(CONFIGMAPS, _configmap(name))
    assert status == 201
    assert cp.client().get(f"{CONFIGMAPS}/{name}")[0] == 200
    events = [e for e in cp.audit_events() if (e.get("objectRef") or {}).get("name") == name]
    assert [e["verb"] for e in events] == ["create"], events  # the read is not logged
    [event] = events
    assert event["user"]["username"] == USERS["admin"].name
    assert "127.0.0.1" in event["sourceIPs"]
    assert event["responseStatus"]["code"] == 201
    assert event["stage"] == "ResponseComplete"
    assert event["stageTimestamp"] >= event["requestReceivedTimestamp"]


def test_kube_apiserver_restarted_alone_keeps_its_port_and_data(cp: ControlPlane) -> None:
    name = f"kept-{uuid.uuid4().hex[:8]}"
    assert cp.client().post(CONFIGMAPS, _configmap(name))[0] == 201
    apiserver, scheduler = cp.process("kube-apiserver").popen.pid, cp.process("kube-scheduler").popen.pid
    port = cp.port
    cp.restart_process("kube-apiserver")
    assert cp.process("kube-apiserver").popen.pid != apiserver
    assert cp.process("kube-scheduler").popen.pid == scheduler  # it rides the restart out itself
    assert cp.process("kube-scheduler").popen.poll() is None
    assert cp.port == port
    assert cp.client().get(f"{CONFIGMAPS}/{name}")[0] == 200


def test_etcd_killed_and_started_again_keeps_what_was_written(cp: ControlPlane) -> None:
    name = f"survives-{uuid.uuid4().hex[:8]}"
    assert cp.client().post(CONFIGMAPS, _configmap(name))[0] == 201
    cp.kill("etcd")
    assert cp.process("etcd").popen.poll() is not None
    # A wait on another thread meanwhile (a stream of pods) does not take the killed etcd for one
    # that died: it was stopped on purpose, to be started again.
    cp.wait_for("nothing", lambda: True)
    with pytest.raises(ControlPlaneError, match="still running"):
        cp.start_again("kube-apiserver")
    cp.start_again("etcd")
    _writes_again(cp)
    status, body = cp.client().get(f"{CONFIGMAPS}/{name}")
    assert status == 200
    assert body["data"] == {"k": "v"}


def test_etcd_paused_holds_a_write_past_the_clients_timeout(cp: ControlPlane) -> None:
    """A stalled etcd: the write neither succeeds nor fails within the client's deadline (whether it
    happened is known only later), and once etcd runs again writes flow."""
    cp.pause("etcd")
    try:
        client = cp.client()
        client.timeout = 3.0
        with pytest.raises(TimeoutError):
            client.post(CONFIGMAPS, _configmap(f"stalled-{uuid.uuid4().hex[:8]}"))
    finally:
        cp.resume("etcd")
    _writes_again(cp)


def test_a_lease_write_is_logged_with_its_body(cp: ControlPlane) -> None:
    """bench/audit.py reads a Lease's holders from the log itself: the body must be there."""
    name = f"lease-{uuid.uuid4().hex[:8]}"
    body = {"metadata": {"name": name}, "spec": {"holderIdentity": "worker-a", "leaseDurationSeconds": 15}}
    status, _ = cp.client().post(f"/apis/coordination.k8s.io/v1/namespaces/{NS}/leases", body)
    assert status == 201
    [event] = [e for e in cp.audit_events() if (e.get("objectRef") or {}).get("name") == name]
    assert event["responseObject"]["spec"]["holderIdentity"] == "worker-a"
    assert leadership([event], NS, name, USERS["admin"].name)[0].source == "127.0.0.1"
