"""``worker.templates.TemplateKeeper``: the rewrite's ResourceClaimTemplates made on first sight of a
rewritten pod and deleted when no pod uses them for the grace period or their class is gone, through
the emulator with the real client and a real informer cache; a fake clock stands for the grace."""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator

import pytest

from e2e.emulator import Emulator
from tests.core.podfactory import container, device_class, pod
from webhook.core.api.objects import Obj
from webhook.core.paths.rewrite import (
    MANAGED_BY_LABEL,
    REWRITTEN_ANNOTATION,
    TemplateRef,
    plan_rewrite,
    rewritten_annotation,
    rewritten_pod,
    template,
)
from webhook.kube.cache import ClusterCache
from webhook.kube.client import KubeClient
from webhook.kube.resources import BY_PLURAL
from webhook.worker.templates import TemplateKeeper

GPU = "example.com/gpu"
KINDS = ("DeviceClass", "Pod", "ResourceClaimTemplate")


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


class Keeper:
    def __init__(self, em: Emulator) -> None:
        self.em = em
        self.client = KubeClient(em.api_client())
        self.cache = ClusterCache()
        self.changed = threading.Condition()
        self.cache.start(self.client, KINDS)
        assert self.cache.wait_synced(KINDS, 10)
        self.clock = Clock()
        self.leader = True
        self.keeper = TemplateKeeper(self.client, self.cache, lambda: self.leader, grace=60, clock=self.clock)
        # After the keeper's: when ``until`` wakes up, the keeper has seen the same event.
        self.cache.subscribe(self._notify)

    def _notify(self, _kind: str, _etype: str, _obj: Obj) -> None:
        with self.changed:
            self.changed.notify_all()

    def until(self, predicate: Callable[[], bool], what: str) -> None:
        """Wait for the cache (its events, not the emulator's store) to make ``predicate`` true."""
        with self.changed:
            assert self.changed.wait_for(predicate, timeout=5), what

    def names(self) -> list[str]:
        return sorted(t["metadata"]["name"] for t in self.em.list("resourceclaimtemplates", "default"))

    def seen(self, names: list[str]) -> None:
        """Wait until the cache holds exactly these templates."""
        self.until(lambda: sorted(n for _, n in self.cache.templates()) == names, f"cache != {names}")

    def rewritten(self, name: str, count: int) -> Obj:
        p = pod(name, [container("c", {GPU: str(count)})])
        rw = plan_rewrite(p, {GPU: "gpu.example.com"})
        out = rewritten_pod(p, rw)
        out["metadata"]["annotations"] = {REWRITTEN_ANNOTATION: rewritten_annotation(rw)}
        del out["metadata"]["uid"]
        return self.em.create("pods", out)


@pytest.fixture
def k() -> Iterator[Keeper]:
    with Emulator() as em:
        em.create("deviceclasses", device_class("gpu.example.com", ext=GPU))
        keeper = Keeper(em)
        try:
            yield keeper
        finally:
            keeper.cache.stop()


def test_a_rewritten_pods_templates_are_made_once(k: Keeper) -> None:
    p = k.rewritten("a", 2)
    assert k.keeper.want(p) is True
    assert k.keeper.ensure() == 1
    assert k.names() == ["draxr-gpu.example.com-2"]
    made = k.em.get("resourceclaimtemplates", "draxr-gpu.example.com-2", "default")
    assert made["metadata"]["labels"][MANAGED_BY_LABEL] == "draxr"
    assert made["spec"] == template(TemplateRef("gpu.example.com", 2), "default")["spec"]
    k.seen(["draxr-gpu.example.com-2"])
    assert k.keeper.want(k.rewritten("b", 2)) is False  # the same template: nothing missing
    assert k.keeper.ensure() == 0


def test_a_template_made_meanwhile_is_no_error_and_a_follower_writes_nothing(k: Keeper) -> None:
    p = k.rewritten("a", 1)
    k.keeper.want(p)
    k.client.create(
        BY_PLURAL["resourceclaimtemplates"], template(TemplateRef("gpu.example.com", 1), "default"), "default"
    )
    assert k.keeper.ensure() == 0  # 409: made by someone else, not retried
    assert not k.keeper.wanted()
    k.leader = False
    k.keeper.want(k.rewritten("b", 3))
    assert k.keeper.ensure() == 0
    assert k.names() == ["draxr-gpu.example.com-1"]


def test_unused_templates_go_after_the_grace_and_used_ones_stay(k: Keeper) -> None:
    for name, count in (("a", 1), ("b", 2)):
        k.keeper.want(k.rewritten(name, count))
    k.keeper.ensure()
    k.seen(["draxr-gpu.example.com-1", "draxr-gpu.example.com-2"])
    k.em.delete("pods", "b", "default")
    k.until(lambda: len(k.cache.all_pods()) == 1, "one pod")
    assert k.keeper.collect() == 0  # unused from now on
    k.clock.now += 59
    assert k.keeper.collect() == 0
    k.clock.now += 2
    k.leader = False
    assert k.keeper.collect() == 0  # only the leader deletes
    k.leader = True
    assert k.keeper.collect() == 1
    assert k.names() == ["draxr-gpu.example.com-1"]  # pod a still uses its template
    k.clock.now += 3600
    assert k.keeper.collect() == 0


def test_a_template_is_used_again_within_the_grace_and_kept(k: Keeper) -> None:
    k.keeper.want(k.rewritten("a", 1))
    k.keeper.ensure()
    k.seen(["draxr-gpu.example.com-1"])
    k.em.delete("pods", "a", "default")
    k.until(lambda: not k.cache.all_pods(), "no pod")
    assert k.keeper.collect() == 0
    k.clock.now += 30
    k.rewritten("again", 1)
    k.until(lambda: len(k.cache.all_pods()) == 1, "one pod")
    assert k.keeper.collect() == 0
    k.clock.now += 61
    assert k.keeper.collect() == 0  # the clock restarted when it was used again
    assert k.names() == ["draxr-gpu.example.com-1"]


def test_templates_of_a_deleted_class_go_at_once_foreign_ones_never(k: Keeper) -> None:
    k.keeper.want(k.rewritten("a", 1))
    k.keeper.ensure()
    foreign = template(TemplateRef("gpu.example.com", 4), "default")
    foreign["metadata"]["name"] = "mine"
    foreign["metadata"]["labels"] = {}
    k.client.create(BY_PLURAL["resourceclaimtemplates"], foreign, "default")
    k.seen(["draxr-gpu.example.com-1", "mine"])
    k.em.delete("deviceclasses", "gpu.example.com")
    k.until(lambda: k.cache.state.classes.get("gpu.example.com") is None, "class gone")
    assert k.keeper.collect() == 1  # in use by pod a, but its class is gone
    assert k.names() == ["mine"]
    k.clock.now += 3600
    assert k.keeper.collect() == 0


def test_a_template_deleted_under_a_pod_that_needs_it_is_made_again(k: Keeper) -> None:
    """The collection computes what is in use from the cache, so a new pod still on its way there
    could lose its template; the keeper, having seen the template, did not want it, and nothing
    looked again after the deletion: the pod's claim was never made."""
    needed = "draxr-gpu.example.com-1"
    k.client.create(
        BY_PLURAL["resourceclaimtemplates"], template(TemplateRef("gpu.example.com", 1), "default"), "default"
    )
    k.seen([needed])
    p = k.rewritten("p", 1)
    k.until(lambda: len(k.cache.all_pods()) == 1, "one pod")
    assert k.keeper.want(p) is False  # the template is there
    k.em.delete("resourceclaimtemplates", needed, "default")  # a collection that raced the pod
    k.seen([])
    assert k.keeper.wanted() is True
    assert k.keeper.ensure() == 1
    assert k.names() == [needed]


def test_a_create_the_api_refuses_for_good_is_given_up_not_retried_on_every_turn(k: Keeper) -> None:
    """Reproduced: a rewritten pod in a namespace being deleted (403: "unable to create new content
    in namespace ... because it is being terminated") or gone (404) was wanted again after every
    failure, and the maintenance loop retried about 10 times a second, forever."""
    for error in (403, 404, 422):
        k.em.clear_faults()
        k.em.inject(verbs="create", resource="resourceclaimtemplates", error=error)
        k.keeper.want(k.rewritten(f"p{error}", error))
        before = k.em.counts().get(("create", "resourceclaimtemplates"), 0)
        for _ in range(5):  # five turns of the maintenance loop at the same moment
            k.keeper.ensure()
        assert k.em.counts().get(("create", "resourceclaimtemplates"), 0) - before == 1, error
        assert not k.keeper.wanted()


def test_a_create_that_failed_for_now_is_retried_with_a_growing_backoff(k: Keeper) -> None:
    k.keeper.client = KubeClient(k.em.api_client(), retries=0)  # the client's own retries aside
    k.em.inject(verbs="create", resource="resourceclaimtemplates", error=500, times=3)
    k.keeper.want(k.rewritten("a", 1))
    attempts: list[float] = []
    start = k.clock.now
    while not k.names():
        if k.keeper.wanted():
            attempts.append(k.clock.now - start)
            k.keeper.ensure()
        k.clock.now += 0.5
        assert k.clock.now - start < 60
    assert attempts == [0.0, 1.0, 3.0, 7.0]  # 1 s, then doubling


def test_terminating_pods_want_no_template(k: Keeper) -> None:
    p = k.rewritten("a", 1)
    p["metadata"]["deletionTimestamp"] = "2026-10-01T00:00:00Z"
    assert k.keeper.want(p) is False
    assert not k.keeper.wanted()


def test_a_template_whose_class_is_gone_is_never_wanted_again(k: Keeper) -> None:
    """Reproduced: the collection deleted the template of a deleted class, the deletion made the
    pods that still name it want it again, and the next turn created it: a create and a delete
    every 5 s for as long as those pods lived."""
    p = k.rewritten("a", 1)
    k.keeper.want(p)
    k.keeper.ensure()
    k.seen(["draxr-gpu.example.com-1"])
    k.until(lambda: len(k.cache.all_pods()) == 1, "the pod")
    k.em.delete("deviceclasses", "gpu.example.com")
    k.until(lambda: k.cache.state.classes.get("gpu.example.com") is None, "class gone")
    assert k.keeper.collect() == 1
    k.seen([])
    assert not k.keeper.wanted()
    assert k.keeper.want(p) is False  # the pod's next event
    assert k.keeper.ensure() == 0


def test_a_fence_that_falls_during_a_write_leaves_the_template_wanted(k: Keeper) -> None:
    """The worker's client is fenced: a write refused by it (NotLeader) must not end the
    maintenance thread; the template stays wanted for when this worker leads again."""
    fence = [True]
    keeper = TemplateKeeper(k.client.fenced(lambda: fence[0]), k.cache, lambda: True, grace=60, clock=k.clock)
    keeper.want(k.rewritten("a", 2))
    fence[0] = False
    assert keeper.ensure() == 0
    assert keeper.wanted()
    assert k.names() == []
