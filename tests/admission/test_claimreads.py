"""The claims and templates a new pod names, for routing (``admission/claimreads.py``): from the
cache, else read from the API server; a missing one reported, an unreadable one reported, never
raised; a snapshot cache is not read behind."""

from __future__ import annotations

from webhook.admission.blocking import MAY_BLOCK
from webhook.admission.claimreads import PodClaims
from webhook.core.api.objects import Obj
from webhook.core.paths.consumed import CLAIM, TEMPLATE, ClaimSource
from webhook.kube.cache import ClusterCache

from .builders import GPU_CLASS

DEVICES: Obj = {"requests": [{"name": "gpu", "exactly": {"deviceClassName": GPU_CLASS}}]}


def user_claim(name: str = "mine", cls: str = GPU_CLASS) -> Obj:
    devices = {"requests": [{"name": "gpu", "exactly": {"deviceClassName": cls}}]}
    return {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "ResourceClaim",
        "metadata": {"name": name, "namespace": "default", "uid": f"uid-{name}"},
        "spec": {"devices": devices},
    }


def user_template(name: str = "tpl") -> Obj:
    return {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "ResourceClaimTemplate",
        "metadata": {"name": name, "namespace": "default"},
        "spec": {"spec": {"devices": DEVICES}},
    }


class Apiserver:
    """The API server's side of a read: the objects it has, or an error for every read."""

    def __init__(self, objects: dict[ClaimSource, Obj], error: Exception | None = None) -> None:
        self.objects = objects
        self.error = error
        self.reads: list[ClaimSource] = []

    def __call__(self, source: ClaimSource, namespace: str, timeout: float) -> Obj | None:
        self.reads.append(source)
        if self.error is not None:
            raise self.error
        return self.objects.get(source)


def classes_of(claims: PodClaims, sources: list[ClaimSource]) -> tuple[list[str], list[ClaimSource], int]:
    token = MAY_BLOCK.set(True)
    try:
        out = claims.classes("default", sources)
    finally:
        MAY_BLOCK.reset(token)
    return out.classes, out.missing, len(out.unreadable)


def test_a_claim_the_cache_has_not_seen_is_read_from_the_apiserver() -> None:
    cache = ClusterCache.from_objects([user_claim("cached", "cached.example.com")])
    api = Apiserver({ClaimSource(TEMPLATE, "tpl"): user_template()})
    reads: list[str] = []
    claims = PodClaims(cache, 2.0, reads.append, api)
    sources = [ClaimSource(CLAIM, "cached"), ClaimSource(TEMPLATE, "tpl"), ClaimSource(CLAIM, "later")]
    assert classes_of(claims, sources) == (
        ["cached.example.com", GPU_CLASS],
        [ClaimSource(CLAIM, "later")],
        0,
    )
    assert api.reads == [ClaimSource(TEMPLATE, "tpl"), ClaimSource(CLAIM, "later")]
    assert reads == ["found", "missing"]


def test_an_unreadable_claim_is_reported_not_raised() -> None:
    api = Apiserver({}, ConnectionError("refused"))
    reads: list[str] = []
    claims = PodClaims(ClusterCache(), 2.0, reads.append, api)
    assert classes_of(claims, [ClaimSource(CLAIM, "x")]) == ([], [], 1)
    assert reads == ["error"]


def test_a_snapshot_cache_is_not_read_behind() -> None:
    api = Apiserver({ClaimSource(CLAIM, "x"): user_claim("x")})
    claims = PodClaims(ClusterCache(), 0.0, None, api)  # no time to read: the cache is the truth
    assert classes_of(claims, [ClaimSource(CLAIM, "x")]) == ([], [ClaimSource(CLAIM, "x")], 0)
    assert api.reads == []
