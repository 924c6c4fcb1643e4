"""The emulator's resourceclaim controller: claims from templates, named, owned and recorded as
kube-controller-manager does (observed on a real 1.35/1.36 control plane), and their cleanup."""

from __future__ import annotations

import pytest

from e2e.emulator import Emulator
from e2e.emulator.claimcontroller import FINALIZER, POD_CLAIM_NAME_ANNOTATION, generate_name
from webhook.core.api.objects import Obj


def template(name: str = "gpu-1", labels: dict[str, str] | None = None) -> Obj:
    return {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "ResourceClaimTemplate",
        "metadata": {"name": name, "namespace": "default"},
        "spec": {
            "metadata": {"labels": labels or {"from": "template"}},
            "spec": {"devices": {"requests": [{"name": "devices", "exactly": {"deviceClassName": "gpu"}}]}},
        },
    }


def pod(name: str = "p", template_name: str = "gpu-1") -> Obj:
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "namespace": "default"},
        "spec": {
            "containers": [{"name": "c", "image": "x", "resources": {"claims": [{"name": "gpu"}]}}],
            "resourceClaims": [{"name": "gpu", "resourceClaimTemplateName": template_name}],
        },
    }


def claims(em: Emulator) -> list[Obj]:
    return em.list("resourceclaims", "default")


def test_a_claim_is_made_from_the_template_owned_by_the_pod_and_recorded() -> None:
    with Emulator() as em:
        em.create("resourceclaimtemplates", template())
        created = em.create("pods", pod())
        (claim,) = em.wait_for(lambda: claims(em), 5)
        meta = claim["metadata"]
        assert meta["generateName"] == "p-gpu-"
        assert meta["name"].startswith("p-gpu-")
        assert len(meta["name"]) == len("p-gpu-") + 5
        assert meta["annotations"] == {POD_CLAIM_NAME_ANNOTATION: "gpu"}
        assert meta["labels"] == {"from": "template"}
        assert meta["ownerReferences"] == [
            {
                "apiVersion": "v1",
                "kind": "Pod",
                "name": "p",
                "uid": created["metadata"]["uid"],
                "controller": True,
            }
        ]
        assert claim["spec"]["devices"]["requests"][0]["exactly"]["deviceClassName"] == "gpu"
        statuses = em.wait_for(
            lambda: (em.get("pods", "p", "default").get("status") or {}).get("resourceClaimStatuses"), 5
        )
        assert statuses == [{"name": "gpu", "resourceClaimName": meta["name"]}]
        em.settle()
        assert len(claims(em)) == 1  # recorded: never a second one


def test_a_missing_template_is_waited_for() -> None:
    with Emulator() as em:
        em.create("pods", pod())
        em.settle()
        assert claims(em) == []
        em.create("resourceclaimtemplates", template())
        em.wait_for(lambda: claims(em), 5)


def test_a_deleted_pods_allocated_claim_is_released_and_collected() -> None:
    with Emulator() as em:
        em.create("resourceclaimtemplates", template())
        p = em.create("pods", pod())
        em.wait_for(lambda: claims(em), 5)
        em.settle()  # the claim is recorded in the pod's status: nobody else writes now
        (claim,) = claims(em)
        # As a scheduler's PreBind leaves it: allocated, reserved for the pod, finalizer on.
        claim["status"] = {
            "allocation": {
                "devices": {"results": [{"request": "devices", "driver": "d", "pool": "n", "device": "g"}]}
            },
            "reservedFor": [{"resource": "pods", "name": "p", "uid": p["metadata"]["uid"]}],
        }
        claim = em.update_status("resourceclaims", claim)
        claim["metadata"]["finalizers"] = [FINALIZER]
        em.update("resourceclaims", claim)
        em.settle()
        assert claims(em)[0]["metadata"]["finalizers"] == [FINALIZER]  # in use: kept
        em.delete("pods", "p", "default")
        em.wait_for(lambda: not claims(em), 5, "released, unfinalized and collected")


def test_a_finished_pods_claim_is_deleted() -> None:
    with Emulator() as em:
        em.create("resourceclaimtemplates", template())
        em.create("pods", pod())
        em.wait_for(lambda: claims(em), 5)
        em.settle()
        done = em.get("pods", "p", "default")
        done["status"]["phase"] = "Succeeded"
        em.update_status("pods", done)
        em.wait_for(lambda: not claims(em), 5)


def test_the_controller_can_be_left_out() -> None:
    with Emulator(claim_controller=False) as em:
        em.create("resourceclaimtemplates", template())
        em.create("pods", pod())
        em.settle()
        assert claims(em) == []


def test_named_claims_and_recorded_entries_are_left_alone() -> None:
    with Emulator() as em:
        em.create("resourceclaimtemplates", template())
        p = pod()
        p["spec"]["resourceClaims"].insert(0, {"name": "mine", "resourceClaimName": "existing"})
        em.create("pods", p)
        em.wait_for(lambda: em.get("pods", "p", "default").get("status", {}).get("resourceClaimStatuses"), 5)
        [made] = claims(em)
        statuses = em.get("pods", "p", "default")["status"]["resourceClaimStatuses"]
        assert statuses == [{"name": "gpu", "resourceClaimName": made["metadata"]["name"]}]
        again = em.get("pods", "p", "default")
        again["metadata"]["labels"] = {"touched": "yes"}
        em.update("pods", again)  # later pod updates make no second claim
        em.settle()
        assert len(claims(em)) == 1


@pytest.mark.parametrize(
    ("pod_name", "claim", "expected"),
    [
        ("consumer", "gpu", "consumer-gpu-"),
        ("p" * 39, "c" * 16, "p" * 39 + "-" + "c" * 16 + "-"),  # 57 characters: kept
        ("p" * 40, "c" * 16, "p" * 39 + "-" + "c" * 15),  # 58: 40*57//58 = 39, 16*57//58 = 15
        ("p" * 100, "claim", "p" * 53 + "-" + "cl"),  # 107: 100*57//107 = 53, 5*57//107 = 2
    ],
)
def test_generate_name_cuts_both_parts_in_proportion(pod_name: str, claim: str, expected: str) -> None:
    assert generate_name(pod_name, claim) == expected


def named_claim(name: str, namespace: str = "default") -> Obj:
    return {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "ResourceClaim",
        "metadata": {"name": name, "namespace": namespace},
        "spec": {"devices": {"requests": [{"name": "devices", "exactly": {"deviceClassName": "gpu"}}]}},
    }


def reserve(em: Emulator, name: str, pods: list[Obj], namespace: str = "default") -> None:
    claim = em.get("resourceclaims", name, namespace)
    claim["status"] = {
        "allocation": {
            "devices": {"results": [{"request": "devices", "driver": "d", "pool": "n", "device": "g"}]}
        },
        "reservedFor": [
            {"resource": "pods", "name": p["metadata"]["name"], "uid": p["metadata"]["uid"]} for p in pods
        ],
    }
    em.update_status("resourceclaims", claim)


def reservations(em: Emulator, name: str) -> list[Obj]:
    """The claim's reservations (empty once released)."""
    return (em.get("resourceclaims", name, "default").get("status") or {}).get("reservedFor") or []


def plain_pod(name: str, namespace: str = "default") -> Obj:
    return {
        "metadata": {"name": name, "namespace": namespace},
        "spec": {"containers": [{"name": "c", "image": "x"}]},
    }


def test_a_named_claim_leaves_the_reservation_of_a_departed_pod_only() -> None:
    """Found from the index of reservations (no owner): reserved for two pods, it keeps the
    one still running and its allocation; once nobody reserves it, it loses the allocation."""
    with Emulator() as em:
        a, b = em.create("pods", plain_pod("a")), em.create("pods", plain_pod("b"))
        em.create("resourceclaims", named_claim("shared"))
        reserve(em, "shared", [a, b])
        em.delete("pods", "a", "default")
        em.wait_for(
            lambda: (
                [r["name"] for r in em.get("resourceclaims", "shared", "default")["status"]["reservedFor"]]
                == ["b"]
            ),
            5,
        )
        assert em.get("resourceclaims", "shared", "default")["status"].get("allocation")
        em.delete("pods", "b", "default")
        em.wait_for(lambda: not reservations(em, "shared"), 5)
        assert not em.get("resourceclaims", "shared", "default")["status"].get("allocation")
        assert em.find("resourceclaims", "shared", "default") is not None  # not owned: never deleted


def test_a_reservation_moved_to_another_pod_is_not_released_by_the_first_pods_departure() -> None:
    """The index follows updates: after the claim is re-reserved for ``b``, deleting ``a`` leaves it
    alone; a claim of the same name in another namespace is not touched by ``b``'s departure."""
    with Emulator() as em:
        em.create("namespaces", {"metadata": {"name": "other"}})
        a, b = em.create("pods", plain_pod("a")), em.create("pods", plain_pod("b"))
        elsewhere = em.create("pods", plain_pod("b", "other"))
        em.create("resourceclaims", named_claim("c"))
        em.create("resourceclaims", named_claim("c", "other"))
        reserve(em, "c", [a])
        reserve(em, "c", [b])
        reserve(em, "c", [elsewhere], "other")
        em.delete("pods", "a", "default")
        em.settle()
        assert [r["name"] for r in em.get("resourceclaims", "c", "default")["status"]["reservedFor"]] == ["b"]
        em.delete("pods", "b", "default")
        em.wait_for(lambda: not reservations(em, "c"), 5)
        assert (
            em.get("resourceclaims", "c", "other")["status"]["reservedFor"][0]["uid"]
            == (elsewhere["metadata"]["uid"])
        )
