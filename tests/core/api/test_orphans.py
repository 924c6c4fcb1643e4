"""``orphaned``: when a special claim has outlived its pod, from the claim and the pod as found."""

from __future__ import annotations

import pytest

from webhook.core.api.objects import Obj
from webhook.core.api.orphans import (
    orphaned,
    owner_pod_uid,
    pod_is_done,
    special_claim_name,
    superseded,
    unmapped,
)


def pod(
    name: str = "p", uid: str = "u", *, node_name: str = "", phase: str = "Running", uses: str | None = None
) -> Obj:
    """A pod as the cache or the API shows it (also the cleanup tests' pods)."""
    p: Obj = {
        "metadata": {"name": name, "namespace": "default", "uid": uid},
        "spec": {},
        "status": {"phase": phase},
    }
    if node_name:
        p["spec"]["nodeName"] = node_name
    if uses:
        p["status"]["extendedResourceClaimStatus"] = {"resourceClaimName": uses, "requestMappings": []}
    return p


def claim(
    claim_name: str = "c", *, owner_uid: str | None = "u", kind: str = "Pod", controller: bool = True
) -> Obj:
    meta: Obj = {"name": claim_name, "namespace": "default"}
    if owner_uid is not None:
        meta["ownerReferences"] = [{"kind": kind, "name": "p", "uid": owner_uid, "controller": controller}]
    return {"metadata": meta}


@pytest.mark.parametrize(
    ("found", "orphan"),
    [
        (None, True),  # the owner pod is gone
        (pod(uid="newer", node_name="n", uses="c"), True),  # a new pod of the same name (the API, by name)
        (pod(node_name="n", phase="Succeeded", uses="c"), True),
        (pod(node_name="n", phase="Failed", uses="c"), True),
        (pod(node_name="n", uses="another"), True),  # bound with the claim it uses, not this one
        (pod(node_name="n"), False),  # bound, its status names no claim: an anomaly, not a licence
        (pod(node_name="n", uses="c"), False),  # in use
        (pod(), False),  # pending: a binding cycle may be using it
        (pod(uses="another"), False),  # pending, even when its status names another
    ],
)
def test_orphaned(found: Obj | None, orphan: bool) -> None:
    assert orphaned(claim(), found) is orphan


@pytest.mark.parametrize(
    ("c", "owner"),
    [
        (claim(), "u"),
        (claim(kind="Job"), None),
        (claim(owner_uid=None), None),
        (claim(controller=False), None),  # an owner, but not the controller
    ],
)
def test_owner_pod_uid(c: Obj, owner: str | None) -> None:
    assert owner_pod_uid(c) == owner


def test_pod_state_helpers() -> None:
    assert pod_is_done(pod(phase="Succeeded"))
    assert not pod_is_done(pod(phase="Running"))
    assert special_claim_name(pod(uses="c")) == "c"
    assert special_claim_name(pod()) is None
    assert superseded(pod(node_name="n", uses="another"), claim())
    assert not superseded(
        pod(node_name="n"), claim()
    )  # bound, names no claim: which one it runs with is unknown
    assert not superseded(pod(uses="another"), claim())  # not bound yet


@pytest.mark.parametrize(
    ("found", "anomaly"),
    [
        (pod(node_name="n"), True),  # bound, running, and its status names no claim
        (pod(node_name="n", uses="c"), False),
        (pod(), False),  # pending: PreBind writes the mapping before the binding
        (pod(node_name="n", phase="Succeeded"), False),  # done: its claims are freed anyway
    ],
)
def test_unmapped(found: Obj, anomaly: bool) -> None:
    assert unmapped(found) is anomaly
