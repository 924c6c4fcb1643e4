"""A rewritten pod is charged as DRA devices: quotas that limit only the name stop applying."""

from webhook.core.paths.quota import class_quota_key, limits_by_name, unguarded


def quota(ns: str, **hard: str) -> dict[str, object]:
    return {"kind": "ResourceQuota", "metadata": {"name": "q", "namespace": ns}, "spec": {"hard": hard}}


def test_a_quota_on_the_name_without_one_on_the_class_is_reported() -> None:
    classes = {"example.com/gpu": "gpu.example.com"}
    on_name = quota("team", **{"requests.example.com/gpu": "4"})
    assert unguarded([on_name], "team", classes) == [("example.com/gpu", "gpu.example.com")]
    both = quota("team", **{"requests.example.com/gpu": "4", class_quota_key("gpu.example.com"): "4"})
    assert unguarded([both], "team", classes) == []
    assert unguarded([on_name], "other", classes) == []  # another namespace's quota
    assert unguarded([quota("team", cpu="4")], "team", classes) == []
    assert class_quota_key("gpu.example.com") == "gpu.example.com.deviceclass.resource.k8s.io/devices"


def test_a_quota_limits_a_name_by_its_request_key_or_the_bare_name() -> None:
    assert limits_by_name(quota("team", **{"requests.example.com/gpu": "4"}), "example.com/gpu")
    assert limits_by_name(quota("team", **{"example.com/gpu": "4"}), "example.com/gpu")
    assert not limits_by_name(quota("team", **{"limits.example.com/gpu": "4"}), "example.com/gpu")
    assert not limits_by_name(quota("team", **{"requests.example.com/nic": "4"}), "example.com/gpu")
    assert not limits_by_name({"kind": "ResourceQuota", "spec": {"hard": "broken"}}, "example.com/gpu")
    # the quotas of a namespace add up: the name limited by one, the class by another
    classes = {"example.com/gpu": "gpu.example.com"}
    split = [
        quota("team", **{"example.com/gpu": "4"}),
        quota("team", **{class_quota_key("gpu.example.com"): "4"}),
    ]
    assert unguarded(split, "team", classes) == []
