"""The ResourceClaimTemplates of the rewrite (worker/templates.py) against the API emulator with the
real client and informers: made on first sight of a rewritten pod, deleted after ``grace`` unused,
made again when deleted under a pod that needs it."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from webhook.core.objects import Obj
from webhook.core.rewrite import (
    MANAGED_BY,
    MANAGED_BY_LABEL,
    REWRITTEN_ANNOTATION,
    TemplateRef,
    plan_rewrite,
    rewritten_annotation,
    rewritten_pod,
    template,
    template_name,
)
from webhook.core.state import ClusterState
from webhook.kube.cache import ClusterCache
from webhook.worker.templates import TemplateKeeper

from .harness import GPU, Cluster, cluster

CLASS = "gpu.example.com"
KINDS = ("Pod", "ResourceClaimTemplate")


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


@pytest.fixture
def kube(tmp_path: Path) -> Iterator[Cluster]:
    with cluster(tmp_path) as c:
        yield c


@pytest.fixture
def cache(kube: Cluster) -> Iterator[CacheWatch]:
    c = ClusterCache(ClusterState())
    watch = CacheWatch(c)
    c.start(kube.client(), KINDS)
    assert c.wait_synced(KINDS, timeout=10)
    yield watch
    c.stop()


def rewritten(name: str, count: int = 1) -> Obj:
    """A pod as draxr's webhook rewrites it: claims from ``draxr-<class>-<count>``."""
    pod: Obj = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "namespace": "default"},
        "spec": {
            "containers": [
                {"name": "c", "image": "x", "resources": {"requests": {GPU: count}, "limits": {GPU: count}}}
            ]
        },
    }
    plan = plan_rewrite(pod, {GPU: CLASS})
    out = rewritten_pod(pod, plan)
    out["metadata"]["annotations"] = {REWRITTEN_ANNOTATION: rewritten_annotation(plan)}
    return out


def templates(kube: Cluster) -> list[str]:
    return sorted(t["metadata"]["name"] for t in kube.em.list("resourceclaimtemplates", "default"))


class CacheWatch:
    """Waits on the cache's own events (the store changes before the informers see it)."""

    def __init__(self, cache: ClusterCache) -> None:
        self.cache = cache
        self._cond = threading.Condition()
        cache.subscribe(self._on_event)

    def _on_event(self, *_: object) -> None:
        with self._cond:
            self._cond.notify_all()

    def wait(self, predicate: Callable[[], bool], what: str, timeout: float = 5.0) -> None:
        deadline = time.monotonic() + timeout
        with self._cond:
            while not predicate():
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    raise TimeoutError(what)
                self._cond.wait(remaining)


def in_cache(watch: CacheWatch, *names: str) -> None:
    watch.wait(
        lambda: {n for _, n in watch.cache.templates()} == set(names), f"the cache holds templates {names}"
    )


def pod_in_cache(watch: CacheWatch, name: str) -> None:
    watch.wait(
        lambda: any(p["metadata"]["name"] == name for p in watch.cache.all_pods().values()),
        f"pod {name} cached",
    )


def test_a_rewritten_pods_templates_are_made_once(kube: Cluster, cache: CacheWatch) -> None:
    keeper = TemplateKeeper(kube.client(), cache.cache, lambda: True)
    pod = kube.em.create("pods", rewritten("p", 2))
    assert keeper.want(pod) is True
    assert keeper.ensure() == 1
    [made] = kube.em.list("resourceclaimtemplates", "default")
    assert made["metadata"]["name"] == template_name(CLASS, 2)
    assert made["metadata"]["labels"][MANAGED_BY_LABEL] == MANAGED_BY
    assert made["spec"]["spec"]["devices"]["requests"][0]["exactly"]["count"] == 2
    in_cache(cache, template_name(CLASS, 2))
    assert keeper.want(pod) is False  # there already
    assert keeper.ensure() == 0


def test_an_unused_template_goes_after_the_grace_and_a_foreign_one_stays(
    kube: Cluster, cache: CacheWatch
) -> None:
    clock = Clock()
    keeper = TemplateKeeper(kube.client(), cache.cache, lambda: True, grace=60.0, clock=clock)
    used, unused = template_name(CLASS, 1), template_name(CLASS, 2)
    for count in (1, 2):
        kube.em.create("resourceclaimtemplates", template(TemplateRef(CLASS, count), "default"))
    foreign = template(TemplateRef(CLASS, 3), "default")
    foreign["metadata"]["labels"] = {}
    kube.em.create("resourceclaimtemplates", foreign)
    kube.em.create("pods", rewritten("p", 1))
    pod_in_cache(cache, "p")
    in_cache(cache, used, unused, template_name(CLASS, 3))
    assert keeper.collect() == 0  # unused since now
    clock.now += 59
    assert keeper.collect() == 0
    clock.now += 1
    assert keeper.collect() == 1
    assert templates(kube) == sorted([used, template_name(CLASS, 3)])


def test_a_template_deleted_under_a_pod_that_needs_it_is_made_again(kube: Cluster, cache: CacheWatch) -> None:
    """Found reading the keeper for the e2e suite: the collection computes what is in use from the
    cache, so a new pod still on its way there loses its template; the keeper saw the template in
    its cache and did not want it, and nothing looked again after the deletion. The pod's claim was
    never made."""
    keeper = TemplateKeeper(kube.client(), cache.cache, lambda: True)
    needed = template_name(CLASS, 1)
    kube.em.create("resourceclaimtemplates", template(TemplateRef(CLASS, 1), "default"))
    in_cache(cache, needed)
    pod = kube.em.create("pods", rewritten("p", 1))
    pod_in_cache(cache, "p")
    assert keeper.want(pod) is False  # the template is there
    kube.em.delete("resourceclaimtemplates", needed, "default")  # a collection that raced the pod
    in_cache(cache)
    assert keeper.wanted() is True
    assert keeper.ensure() == 1
    assert templates(kube) == [needed]
