"""``admission.review``: what a response may carry, however hostile the request."""

from __future__ import annotations

from webhook.admission.review import TRUNCATE_AT_TOTAL_RUNES, TRUNCATE_ITEM_RUNES, truncate_warnings
from webhook.core.objects import Obj

from .builders import container, gpu_cluster, pod, review
from .conftest import Webhook


def test_truncation_follows_the_apiservers_warning_recorder() -> None:
    # k8s.io/apiserver/pkg/endpoints/filters/warning.go TestTruncation, with its limits of 25 and 5.
    def run(*texts: str) -> list[str]:
        return truncate_warnings(list(texts), total=25, item=5)

    assert run("aaaaaaaaaa", "aaaaaaaaaa", "bb", "ccc", "Iñtërnâtiô") == [
        "aaaaaaaaaa",
        "bb",
        "ccc",
        "Iñtërnâtiô",
    ]
    # one more long item passes the total: everything is replayed truncated to 5 runes
    assert run("aaaaaaaaaa", "bb", "ccc", "Iñtërnâtiô", "dddddd") == ["aaaaa", "bb", "ccc", "Iñtër", "ddddd"]
    # once truncating, later items are cut too, and dropped after the total is reached
    assert run("aaaaaaaaaa", "bb", "ccc", "Iñtërnâtiô", "dddddd", "eeeeeee", "ff", "gg") == [
        "aaaaa",
        "bb",
        "ccc",
        "Iñtër",
        "ddddd",
        "eeeee",
    ]


def test_the_defaults_are_upstreams() -> None:
    assert (TRUNCATE_AT_TOTAL_RUNES, TRUNCATE_ITEM_RUNES) == (4096, 256)
    few = ["x" * 300, "y" * 300]
    assert truncate_warnings(few) == few
    many = [f"warning {i}: " + "z" * 300 for i in range(1000)]
    kept = truncate_warnings(many)
    assert all(len(w) == TRUNCATE_ITEM_RUNES for w in kept)
    assert sum(map(len, kept)) < TRUNCATE_AT_TOTAL_RUNES + TRUNCATE_ITEM_RUNES
    assert kept == [w[:TRUNCATE_ITEM_RUNES] for w in many[: len(kept)]]


def test_a_pod_provoking_thousands_of_warnings_gets_4_kib_of_them(webhook: Webhook) -> None:
    names = 3000  # extended resources no class and no node serves: one warning each
    webhook.install(gpu_cluster())
    p: Obj = pod("p", [container("c", {f"example.com/r{i}": "1" for i in range(names)})])
    response = webhook.respond("/mutate/pods", review(p))
    assert response["allowed"] is True
    warnings = response["warnings"]
    assert warnings[0].startswith("example.com/r0")
    assert 1 < len(warnings) < names
    assert sum(map(len, warnings)) <= TRUNCATE_AT_TOTAL_RUNES + TRUNCATE_ITEM_RUNES
