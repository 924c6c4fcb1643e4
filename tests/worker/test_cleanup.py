"""Cleanup after finished pods and repair of orphaned special claims (spec §8 scenario 33),
against the API emulator: what gets released, what must never be touched, and that the API,
not the cache, has the last word."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from tests.core.api.test_orphans import pod as _pod
from tests.worker.harness import Cluster, device_class, gpu_slice, node
from tests.worker.workers import make_worker
from webhook.core.api.constants import DELETE_PROTECTION_FINALIZER, EXTENDED_RESOURCE_CLAIM_ANNOTATION
from webhook.core.api.objects import Obj
from webhook.kube.cache import ClusterCache
from webhook.kube.client import KubeClient
from webhook.worker.claimwriter import ClaimWriter
from webhook.worker.cleanup import Cleaner
from webhook.worker.maintenance import Cleanup
from webhook.worker.worker import Worker

RESULT = {"request": "container-0-request-0", "driver": "gpu.example.com", "pool": "n-gpu", "device": "gpu-0"}


def claim_body(name: str, owner: Obj | None, *, special: bool = True, kind: str = "Pod") -> Obj:
    meta: Obj = {"name": name, "namespace": "default", "finalizers": [DELETE_PROTECTION_FINALIZER]}
    if special:
        meta["annotations"] = {EXTENDED_RESOURCE_CLAIM_ANNOTATION: "true"}
    if owner is not None:
        meta["ownerReferences"] = [
            {
                "apiVersion": "v1",
                "kind": kind,
                "name": owner["metadata"]["name"],
                "uid": owner["metadata"]["uid"],
                "controller": True,
            }
        ]
    request = {"name": "container-0-request-0", "exactly": {"deviceClassName": "gpu.example.com", "count": 1}}
    return {"metadata": meta, "spec": {"devices": {"requests": [request]}}}


def held_claim(kube: Cluster, name: str, owner: Obj, *holders: Obj, special: bool = True) -> Obj:
    """A claim in the API, allocated and reserved for ``holders``."""
    created = kube.em.create("resourceclaims", claim_body(name, owner, special=special))
    created["status"] = {
        "allocation": {"devices": {"results": [RESULT]}},
        "reservedFor": [
            {"resource": "pods", "name": h["metadata"]["name"], "uid": h["metadata"]["uid"]} for h in holders
        ],
    }
    return kube.em.update_status("resourceclaims", created)


def writes(kube: Cluster) -> list[tuple[str, str]]:
    return [(r.verb, r.resource) for r in kube.em.requests() if r.verb not in ("get", "list", "watch")]


def finish(kube: Cluster, pod_name: str, phase: str = "Succeeded") -> Obj:
    pod = kube.em.get("pods", pod_name, "default")
    pod["status"]["phase"] = phase
    return kube.em.update_status("pods", pod)


def with_claim_status(kube: Cluster, pod_name: str, claim_name: str) -> Obj:
    mapping = {"containerName": "c", "resourceName": "example.com/gpu", "requestName": "r"}
    erc: Obj = {"requestMappings": [mapping], "resourceClaimName": claim_name}
    return kube.em.patch(
        "pods", pod_name, {"status": {"extendedResourceClaimStatus": erc}}, "default", subresource="status"
    )


def offline() -> Cleaner:
    """For decisions made from objects alone (no API call)."""
    client = KubeClient(None)
    return Cleaner(client, ClaimWriter(client))


@pytest.fixture
def cleaner(kube: Cluster) -> Cleaner:
    kube.apply(node("n"), device_class(), gpu_slice("n", 2))
    client = kube.client()
    return Cleaner(client, ClaimWriter(client))


# -- release ------------------------------------------------------------------------------------------


def test_release_unreserves_deallocates_unprotects_and_deletes_in_that_order(
    kube: Cluster, cleaner: Cleaner
) -> None:
    pod = kube.pod("p")
    held_claim(kube, "p-extended-resources-abcde", pod, pod)
    kube.em.reset_requests()
    assert (
        cleaner.unreserve_and_delete("default", "p-extended-resources-abcde", pod["metadata"]["uid"]) is True
    )
    assert writes(kube) == [
        ("update", "resourceclaims/status"),  # out of reservedFor, allocation cleared
        ("update", "resourceclaims"),  # the finalizer
        ("delete", "resourceclaims"),
    ]
    # One read: each step goes on from what the previous one read or wrote.
    reads = [(r.verb, r.resource) for r in kube.em.requests() if r.verb == "get"]
    assert reads == [("get", "resourceclaims")]
    assert kube.claims() == []


def test_release_reads_again_when_its_first_update_conflicts(kube: Cluster, cleaner: Cleaner) -> None:
    pod, other = kube.pod("p"), kube.pod("q")
    held_claim(kube, "p-extended-resources-abcde", pod, pod, other)
    stale = kube.em.find("resourceclaims", "p-extended-resources-abcde", "default")
    assert stale is not None
    labels: Obj = {"metadata": {"labels": {"x": "y"}}}
    kube.em.patch("resourceclaims", "p-extended-resources-abcde", labels, "default")  # a newer version
    released = cleaner.claims.unreserve(
        "default", "p-extended-resources-abcde", pod["metadata"]["uid"], deallocate=True, known=stale
    )
    assert released is not None
    assert [r["name"] for r in released["status"]["reservedFor"]] == ["q"]
    assert released["metadata"]["labels"] == {"x": "y"}  # the second attempt started from a fresh read


def test_release_of_a_claim_another_pod_still_uses_stops_at_unreserving(
    kube: Cluster, cleaner: Cleaner
) -> None:
    pod, other = kube.pod("p"), kube.pod("q")
    held_claim(kube, "p-extended-resources-abcde", pod, pod, other)
    assert (
        cleaner.unreserve_and_delete("default", "p-extended-resources-abcde", pod["metadata"]["uid"]) is False
    )
    (claim,) = kube.claims()
    assert [r["name"] for r in claim["status"]["reservedFor"]] == ["q"]
    assert claim["status"]["allocation"]["devices"]["results"] == [RESULT]


def test_release_of_a_claim_already_gone_is_done(kube: Cluster, cleaner: Cleaner) -> None:
    kube.em.reset_requests()
    assert cleaner.unreserve_and_delete("default", "nothing", "some-uid") is True
    assert writes(kube) == []


def test_release_never_touches_the_claim_of_a_newer_pod_of_the_same_name(
    kube: Cluster, cleaner: Cleaner
) -> None:
    old_uid = kube.pod("p")["metadata"]["uid"]
    kube.em.delete("pods", "p", "default")
    newer = kube.pod("p")
    before = held_claim(kube, "p-extended-resources-newer", newer, newer)
    kube.em.reset_requests()
    assert cleaner.unreserve_and_delete("default", "p-extended-resources-newer", old_uid) is True
    assert writes(kube) == []
    assert kube.em.get("resourceclaims", "p-extended-resources-newer", "default") == before


def test_release_never_touches_a_claim_that_is_not_a_special_claim(kube: Cluster, cleaner: Cleaner) -> None:
    pod = kube.pod("p")
    before = held_claim(kube, "users-own", pod, pod, special=False)
    kube.em.reset_requests()
    assert cleaner.unreserve_and_delete("default", "users-own", pod["metadata"]["uid"]) is True
    assert writes(kube) == []
    assert kube.em.get("resourceclaims", "users-own", "default") == before


def test_release_reports_an_api_error_as_not_done(kube: Cluster, cleaner: Cleaner) -> None:
    pod = kube.pod("p")
    held_claim(kube, "p-extended-resources-abcde", pod, pod)
    kube.em.inject(verbs="update", resource="resourceclaims/status", error=403)
    assert (
        cleaner.unreserve_and_delete("default", "p-extended-resources-abcde", pod["metadata"]["uid"]) is False
    )
    assert len(kube.claims()) == 1


# -- orphans ------------------------------------------------------------------------------------------


def _lookup(*pods: Obj) -> Callable[[str], Obj | None]:
    by_uid = {p["metadata"]["uid"]: p for p in pods}
    return by_uid.get


def _names(claims: list[Obj]) -> list[str]:
    return [c["metadata"]["name"] for c in claims]


@pytest.mark.parametrize(
    ("owner", "orphan"),
    [
        (None, True),  # the owner pod is gone
        (_pod("p", "u", node_name="n", phase="Succeeded", uses="c"), True),
        (_pod("p", "u", node_name="n", phase="Failed", uses="c"), True),
        (_pod("p", "u", node_name="n", uses="another"), True),  # superseded by the claim it uses
        (_pod("p", "u", node_name="n", uses="c"), False),  # in use
        (_pod("p", "u"), False),  # pending: a binding cycle may still use it
        (_pod("p", "u", uses="another"), False),  # pending, even when its status names another
    ],
)
def test_orphans(owner: Obj | None, orphan: bool) -> None:
    claim = claim_body("c", _pod("p", "u"))
    pods = (owner,) if owner is not None else ()
    assert _names(offline().orphans([claim], _lookup(*pods))) == (["c"] if orphan else [])


def test_orphans_only_considers_special_claims_controlled_by_a_pod() -> None:
    gone = _pod("p", "u")
    claims = [
        claim_body("plain", gone, special=False),
        claim_body("job-owned", gone, kind="Job"),
        claim_body("ownerless", None),
        claim_body("orphan", gone),
    ]
    assert _names(offline().orphans(claims, _lookup())) == ["orphan"]


# -- confirm_gone and repair --------------------------------------------------------------------------


def test_confirm_gone_asks_the_api(kube: Cluster, cleaner: Cleaner) -> None:
    alive = kube.pod("alive")
    claim = claim_body("c", alive)
    assert cleaner.confirm_gone(claim) is False
    kube.em.delete("pods", "alive", "default")
    assert cleaner.confirm_gone(claim) is True
    kube.pod("alive")  # a new pod of the same name
    assert cleaner.confirm_gone(claim) is True


def test_confirm_gone_for_a_finished_or_superseded_owner(kube: Cluster, cleaner: Cleaner) -> None:
    p = kube.pod("p")
    claim = claim_body("c", p)
    kube.em.bind("p", "n", "default")
    with_claim_status(kube, "p", "c")
    assert cleaner.confirm_gone(claim) is False
    with_claim_status(kube, "p", "another")
    assert cleaner.confirm_gone(claim) is True
    with_claim_status(kube, "p", "c")
    finish(kube, "p", "Failed")
    assert cleaner.confirm_gone(claim) is True


def test_confirm_gone_answers_no_when_the_api_cannot_tell(kube: Cluster, cleaner: Cleaner) -> None:
    p = kube.pod("p")
    kube.em.delete("pods", "p", "default")
    kube.em.inject(verbs="get", resource="pods", error=403)
    assert cleaner.confirm_gone(claim_body("c", p)) is False


def test_repair_releases_confirmed_orphans_only(kube: Cluster, cleaner: Cleaner) -> None:
    gone = kube.pod("gone")
    held_claim(kube, "gone-extended-resources-aaaaa", gone, gone)
    kube.em.delete("pods", "gone", "default")
    alive = kube.pod("alive")
    held_claim(kube, "alive-extended-resources-bbbbb", alive, alive)
    claims = kube.claims()
    assert len(claims) == 2

    def cache_knows_nothing(_: str) -> Any:
        return None  # a cache that has not seen either pod: the API decides

    assert cleaner.repair(claims, cache_knows_nothing) == 1
    assert _names(kube.claims()) == ["alive-extended-resources-bbbbb"]


def test_repair_counts_the_orphans_it_could_not_release(kube: Cluster, cleaner: Cleaner) -> None:
    # What draxr_orphaned_claims reports: confirmed orphans still there after the pass.
    for name in ("a", "b"):
        pod = kube.pod(name)
        held_claim(kube, f"{name}-extended-resources-xxxxx", pod, pod)
        kube.em.delete("pods", name, "default")
    rule = kube.em.inject(verbs="update", resource="resourceclaims/status", error=403)
    assert cleaner.repair(kube.claims(), lambda _: None) == 0
    assert cleaner.unrepaired == 2
    kube.em.faults.remove(rule)
    assert cleaner.repair(kube.claims(), lambda _: None) == 2
    assert cleaner.unrepaired == 0


def test_a_bound_pod_whose_status_names_no_claim_keeps_every_claim_it_owns(
    kube: Cluster, cleaner: Cleaner
) -> None:
    """Which claim it runs with, the API no longer says: freeing any could take a device from under
    a running container (issue 20: an older Unreserve cleared a bound pod's mapping, and the claim
    it ran with was then found 'superseded' and deleted)."""
    p = kube.pod("p")
    held_claim(kube, "p-extended-resources-aaaaa", p, p)
    kube.em.bind("p", "n", "default")
    claims = kube.claims()
    assert cleaner.confirm_gone(claims[0]) is False
    assert cleaner.repair(claims, lambda _: kube.em.get("pods", "p", "default")) == 0
    assert [c["metadata"]["name"] for c in kube.claims()] == ["p-extended-resources-aaaaa"]


# -- a worker with a stale cache never frees a running pod's claim ------------------------------------


def _drain(w: Worker) -> list[Cleanup]:
    items: list[Cleanup] = []
    while not w.maintenance.cleanups.empty():
        items.append(w.maintenance.cleanups.get_nowait())
    return items


@pytest.mark.parametrize("api_names", ["p-extended-resources-aaaaa", None])
def test_a_stale_cache_never_frees_the_claim_a_running_bound_pod_uses(
    kube: Cluster, api_names: str | None
) -> None:
    """Issue 20: a worker with a lagging view (a new leader) saw the bound pod name another claim
    (an older cycle's), or none, and freed the one it runs with. The cache proposes, the API
    decides: the claim the API's pod names, or every claim of a pod that names none, stays."""
    kube.apply(node("n"), device_class(), gpu_slice("n", 2))
    p = kube.pod("p")
    used = held_claim(kube, "p-extended-resources-aaaaa", p, p)
    held_claim(kube, "p-extended-resources-bbbbb", p, p)  # an older cycle's
    with_claim_status(kube, "p", "p-extended-resources-bbbbb")
    kube.em.bind("p", "n", "default")
    stale = ClusterCache.from_objects(kube.snapshot())  # the pod naming the older cycle's claim
    if api_names is None:
        kube.em.patch(
            "pods", "p", {"status": {"extendedResourceClaimStatus": None}}, "default", subresource="status"
        )
    else:
        with_claim_status(kube, "p", api_names)
    w = make_worker(kube.client(), stale)
    try:
        w.resync()  # as on leading
        (cached,) = stale.all_pods().values()
        stale.handle("Pod", "MODIFIED", cached)  # a late event, naming the older cycle's claim
        for item in _drain(w):
            w.maintenance._clean(item)
        w.maintenance.repair_orphans()
        # The same with the pod missing from the cache altogether.
        w.cleaner.repair(kube.claims(), lambda _: None)
    finally:
        w.stop()
    kept = kube.em.get("resourceclaims", "p-extended-resources-aaaaa", "default")
    assert kept["metadata"]["uid"] == used["metadata"]["uid"]
    assert kept["status"]["allocation"] == used["status"]["allocation"]
    assert [r["uid"] for r in kept["status"]["reservedFor"]] == [p["metadata"]["uid"]]
    names = sorted(c["metadata"]["name"] for c in kube.claims())
    # The older cycle's claim goes where the API names the used one, stays where it names none.
    assert names == (
        ["p-extended-resources-aaaaa"]
        if api_names
        else ["p-extended-resources-aaaaa", "p-extended-resources-bbbbb"]
    )
