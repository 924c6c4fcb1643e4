"""The emulator's deployment and replicaset controllers: a Deployment's pods come from a ReplicaSet
named after the pod template's hash, pass admission, follow ``spec.replicas``, and go with it."""

from __future__ import annotations

import re
from typing import Any

from hypothesis import given
from hypothesis import strategies as st

from e2e.emulator import Emulator
from e2e.emulator.workloads import HASH_LABEL, template_hash
from webhook.core.api.objects import Obj

from .test_admission import _hook, _install
from .webhook_server import WebhookServer


def deployment(replicas: int = 2, image: str = "x") -> Obj:
    return {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": "web", "namespace": "default"},
        "spec": {
            "replicas": replicas,
            "selector": {"matchLabels": {"app": "web"}},
            "template": {
                "metadata": {"labels": {"app": "web"}, "annotations": {"note": "kept"}},
                "spec": {"containers": [{"name": "c", "image": image}]},
            },
        },
    }


def owned_by(em: Emulator, resource: str, owner: Obj) -> list[Obj]:
    uid = owner["metadata"]["uid"]
    return [
        o
        for o in em.list(resource, "default")
        if any(r["uid"] == uid and r.get("controller") for r in o["metadata"].get("ownerReferences") or [])
    ]


def live_pods(em: Emulator, n: int) -> Any:
    def check() -> list[Obj] | None:
        pods = [p for p in em.list("pods", "default") if not p["metadata"].get("deletionTimestamp")]
        return pods if len(pods) == n else None

    return check


def test_a_deployment_makes_a_replicaset_named_by_the_template_hash_and_its_pods() -> None:
    with Emulator() as em:
        d = em.create("deployments", deployment())
        pods = em.wait_for(live_pods(em, 2), 5)
        em.settle()
        [rs] = em.list("replicasets", "default")
        digest = rs["metadata"]["labels"][HASH_LABEL]
        assert rs["metadata"]["name"] == f"web-{digest}"
        assert rs["metadata"]["ownerReferences"] == [
            {
                "apiVersion": "apps/v1",
                "kind": "Deployment",
                "name": "web",
                "uid": d["metadata"]["uid"],
                "controller": True,
                "blockOwnerDeletion": True,
            }
        ]
        assert rs["spec"]["selector"]["matchLabels"] == {"app": "web", HASH_LABEL: digest}
        assert rs["status"]["replicas"] == 2
        for p in pods:
            assert p["metadata"]["name"].startswith(f"web-{digest}-")
            assert p["metadata"]["labels"] == {"app": "web", HASH_LABEL: digest}
            assert p["metadata"]["annotations"] == {"note": "kept"}
            assert [r["uid"] for r in p["metadata"]["ownerReferences"]] == [rs["metadata"]["uid"]]
        status = em.get("deployments", "web", "default")["status"]
        assert status == {"observedGeneration": 1, "replicas": 2, "updatedReplicas": 2}


def test_the_same_template_again_changes_nothing_and_scaling_keeps_the_replicaset() -> None:
    with Emulator() as em:
        em.create("deployments", deployment())
        before = {p["metadata"]["name"] for p in em.wait_for(live_pods(em, 2), 5)}
        em.settle()
        d = em.get("deployments", "web", "default")
        same = em.update("deployments", {**d, "spec": deployment()["spec"]})
        assert same["metadata"]["generation"] == 1
        em.settle()
        assert {p["metadata"]["name"] for p in em.list("pods", "default")} == before
        em.patch("deployments", "web", {"spec": {"replicas": 3}}, "default")
        after = {p["metadata"]["name"] for p in em.wait_for(live_pods(em, 3), 5)}
        assert before < after
        em.settle()
        assert len(em.list("replicasets", "default")) == 1
        em.patch("deployments", "web", {"spec": {"replicas": 1}}, "default")
        em.wait_for(live_pods(em, 1), 5)


def test_a_new_template_scales_the_old_replicaset_to_zero() -> None:
    with Emulator() as em:
        em.create("deployments", deployment())
        old = {p["metadata"]["name"] for p in em.wait_for(live_pods(em, 2), 5)}
        em.patch("deployments", "web", {"spec": deployment(image="y")["spec"]}, "default")

        def replaced() -> list[Obj]:
            pods: list[Obj] = live_pods(em, 2)() or []
            return pods if not {p["metadata"]["name"] for p in pods} & old else []

        new = em.wait_for(replaced, 5)
        assert {p["spec"]["containers"][0]["image"] for p in new} == {"y"}
        em.settle()
        replicas = sorted(rs["spec"]["replicas"] for rs in em.list("replicasets", "default"))
        assert replicas == [0, 2]


def test_a_deleted_pod_is_replaced_and_the_deployment_takes_everything_with_it() -> None:
    with Emulator() as em:
        d = em.create("deployments", deployment())
        [first, _] = em.wait_for(live_pods(em, 2), 5)
        em.delete("pods", first["metadata"]["name"], "default")
        pods = em.wait_for(live_pods(em, 2), 5)
        assert first["metadata"]["name"] not in {p["metadata"]["name"] for p in pods}
        em.settle()
        [rs] = owned_by(em, "replicasets", d)
        assert len(owned_by(em, "pods", rs)) == 2
        em.delete("deployments", "web", "default")
        em.wait_for(lambda: not em.list("replicasets", "default") and not em.list("pods", "default"), 5)


def test_the_pods_pass_admission(webhook_server: WebhookServer) -> None:
    webhook_server.clear()
    with Emulator() as em:
        _install(em, "mutating", "m", _hook(webhook_server, "/mutate-label", "label.test.io"))
        em.create("deployments", deployment(replicas=1))
        [pod] = em.wait_for(live_pods(em, 1), 5)
        assert pod["metadata"]["labels"]["mutated-by"] == "hook"
        [review] = webhook_server.log("/mutate-label")
        assert review["userInfo"]["username"] == "system:serviceaccount:kube-system:replicaset-controller"


@given(st.dictionaries(st.text(max_size=8), st.text(max_size=8), max_size=4), st.integers(0, 3))
def test_the_template_hash_is_stable_and_fits_a_name(labels: dict[str, str], collisions: int) -> None:
    t = {"metadata": {"labels": labels}, "spec": {"containers": [{"name": "c"}]}}
    digest = template_hash(t, collisions)
    assert digest == template_hash({"spec": t["spec"], "metadata": t["metadata"]}, collisions)
    assert re.fullmatch(r"[bcdfghjklmnpqrstvwxz2456789]{1,10}", digest)
