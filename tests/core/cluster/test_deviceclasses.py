"""Class resolution (spec §3.1, scenarios 7 and 8)."""

from datetime import UTC, datetime, timedelta
from typing import Any

from webhook.core.cluster.deviceclasses import ClassResolver

T0 = datetime(2025, 6, 1, tzinfo=UTC)


def dc(name: str, when: datetime, ext: str | None = "example.com/gpu") -> dict[str, Any]:
    spec: dict[str, Any] = {}
    if ext is not None:
        spec["extendedResourceName"] = ext
    return {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "DeviceClass",
        "metadata": {"name": name, "creationTimestamp": when.strftime("%Y-%m-%dT%H:%M:%SZ")},
        "spec": spec,
    }


def test_scenario_7_tie_break_and_runner_up_promotion() -> None:
    r = ClassResolver([dc("gpu-class", T0), dc("gpu-class-3", T0 - timedelta(hours=24))])
    assert r.class_name("example.com/gpu") == "gpu-class"
    r.upsert(dc("gpu-class-4", T0 + timedelta(hours=1)))
    assert r.class_name("example.com/gpu") == "gpu-class-4"
    r.upsert(dc("gpu-class-0", T0 + timedelta(hours=1)))
    assert r.class_name("example.com/gpu") == "gpu-class-0"  # same time: smaller name wins
    r.upsert(dc("gpu-class-0", T0 + timedelta(hours=1), ext="test.com/gpu"))  # rename the winner
    assert r.class_name("example.com/gpu") == "gpu-class-4"
    assert r.class_name("test.com/gpu") == "gpu-class-0"
    for n in ("gpu-class-4", "gpu-class", "gpu-class-3"):
        r.remove(n)
    assert r.resolve("example.com/gpu") is None


def test_deleting_a_loser_keeps_the_winner() -> None:
    r = ClassResolver([dc("new", T0), dc("old", T0 - timedelta(days=1))])
    r.remove("old")
    assert r.class_name("example.com/gpu") == "new"


def test_update_keeping_the_name_refreshes_the_object() -> None:
    r = ClassResolver([dc("a", T0)])
    updated = dc("a", T0)
    updated["spec"]["selectors"] = [{"cel": {"expression": "true"}}]
    r.upsert(updated)
    assert r.resolve("example.com/gpu") is updated


def test_scenario_8_implicit_names_for_every_class() -> None:
    r = ClassResolver([dc("winner", T0), dc("loser", T0 - timedelta(days=1)), dc("plain", T0, ext=None)])
    for n in ("winner", "loser", "plain"):
        assert r.class_name(f"deviceclass.resource.kubernetes.io/{n}") == n
    assert r.resolve("deviceclass.resource.kubernetes.io/unknown") is None
    assert r.resolve("example.com/unknown") is None
    assert [c["metadata"]["name"] for c in r.contenders("example.com/gpu")] == ["winner", "loser"]
