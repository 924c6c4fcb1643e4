"""Paged lists against the API emulator: pages, namespaces, the transform, and what an expired
continue token does (start over; after MAX_EXPIRED_PAGES restarts, one unpaged list)."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from e2e.emulator import Emulator
from webhook.core.api.objects import Obj
from webhook.kube.client import ApiError, KubeClient
from webhook.kube.pager import MAX_EXPIRED_PAGES, list_all
from webhook.kube.resources import NODES, PODS


@pytest.fixture
def em() -> Iterator[Emulator]:
    with Emulator() as e:
        for i in range(5):
            e.create("nodes", {"metadata": {"name": f"n{i}"}})
        yield e


def names(items: list[Obj]) -> list[str]:
    return sorted(str(i["metadata"]["name"]) for i in items)


def node_lists(em: Emulator) -> int:
    return len([r for r in em.requests() if r.verb == "list" and r.resource == "nodes"])


def test_a_list_in_pages_with_its_resource_version_and_each_item_transformed(em: Emulator) -> None:
    em.reset_requests()
    listing = list_all(
        KubeClient(em.api_client()), NODES, page_size=2, transform=lambda o: {**o, "seen": True}
    )
    assert names(listing.items) == [f"n{i}" for i in range(5)]
    assert all(item["seen"] for item in listing.items)
    assert (listing.pages, listing.restarts) == (3, 0)  # 2 + 2 + 1
    assert node_lists(em) == 3
    assert int(listing.resource_version) >= 5
    assert list_all(KubeClient(em.api_client()), NODES, page_size=0).pages == 1  # 0: unpaged


def test_a_namespace_lists_only_its_objects(em: Emulator) -> None:
    for ns in ("a", "b"):
        em.create("namespaces", {"metadata": {"name": ns}})
        em.create("pods", {"metadata": {"name": f"p-{ns}"}, "spec": {"containers": [{"name": "c"}]}}, ns)
    client = KubeClient(em.api_client())
    assert names(list_all(client, PODS, page_size=1, namespace="a").items) == ["p-a"]
    assert names(list_all(client, PODS, page_size=1).items) == ["p-a", "p-b"]


def test_an_expired_continue_token_starts_the_list_over(em: Emulator) -> None:
    def after_each_request(verb: str, resource: str, code: int) -> None:
        if verb == "list" and resource == "nodes" and code == 200 and not armed:
            armed.append(True)  # after the first page the server forgets the list
            em.inject(verbs="list", resource="nodes", error=410, message="too old resource version", times=1)

    armed: list[bool] = []
    listing = list_all(KubeClient(em.api_client(), hook=after_each_request), NODES, page_size=2)
    assert names(listing.items) == [f"n{i}" for i in range(5)]  # each once
    assert (listing.pages, listing.restarts) == (1 + 3, 1)


def test_lists_that_keep_expiring_end_in_one_unpaged_list(em: Emulator) -> None:
    def after_each_request(verb: str, resource: str, code: int) -> None:
        if verb == "list" and resource == "nodes" and code == 200:
            em.inject(verbs="list", resource="nodes", error=410, times=1)  # every next page expires

    listing = list_all(KubeClient(em.api_client(), hook=after_each_request), NODES, page_size=2)
    assert names(listing.items) == [f"n{i}" for i in range(5)]
    assert (listing.pages, listing.restarts) == (MAX_EXPIRED_PAGES + 1, MAX_EXPIRED_PAGES)


def test_a_410_on_the_first_page_is_the_servers_answer(em: Emulator) -> None:
    em.inject(verbs="list", resource="nodes", error=410, times=1)
    with pytest.raises(ApiError) as info:
        list_all(KubeClient(em.api_client(), retries=0), NODES, page_size=2)
    assert info.value.gone
