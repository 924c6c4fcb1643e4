"""A rewritten pod is charged as DRA devices: quotas that limit only the name stop applying."""

from webhook.core.quota import class_quota_key, unguarded


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
