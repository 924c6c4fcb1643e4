"""Device requests and request mappings (spec §3.4, scenarios 21-25)."""

from tests.core.podfactory import container, pod
from webhook.core.api.objects import Obj
from webhook.core.scheduling.plugins.dynamicresources.mappings import (
    class_demand,
    create_requests_and_mappings,
)


def req(name: str, cls: str, count: int) -> Obj:
    return {"name": name, "exactly": {"deviceClassName": cls, "allocationMode": "ExactCount", "count": count}}


def m(container_name: str, resource: str, request: str) -> Obj:
    return {"containerName": container_name, "resourceName": resource, "requestName": request}


ER, ERI = "example.com/gpu", "example.com/init-gpu"


def test_single_container() -> None:
    p = pod(containers=[container("c", {ER: 1})])
    reqs, maps = create_requests_and_mappings(p, {ER: "class"})
    assert reqs == [req("container-0-request-0", "class", 1)]
    assert maps == [m("c", ER, "container-0-request-0")]


def test_scenario_23_request_index_counts_every_key() -> None:
    p = pod(containers=[container("c", {"cpu": "1", ER: 2, "memory": "1Gi"})])
    reqs, _ = create_requests_and_mappings(p, {ER: "class"})
    assert reqs == [req("container-0-request-1", "class", 2)]


def test_scenario_21_only_dra_names_get_requests() -> None:
    p = pod(containers=[container("c", {"example.com/a": 1, "example.com/b": 1})])
    reqs, maps = create_requests_and_mappings(p, {"example.com/b": "class-b"})
    assert reqs == [req("container-0-request-1", "class-b", 1)]
    assert maps == [m("c", "example.com/b", "container-0-request-1")]


def test_scenario_22_implicit_and_explicit_names_for_one_class() -> None:
    implicit = "deviceclass.resource.kubernetes.io/gpu"
    p = pod(containers=[container("c", {implicit: 1, ER: 2})])
    reqs, _ = create_requests_and_mappings(p, {implicit: "gpu", ER: "gpu"})
    assert reqs == [req("container-0-request-0", "gpu", 1), req("container-0-request-1", "gpu", 2)]
    two = pod(containers=[container("a", {implicit: 1}), container("b", {ER: 2})])
    reqs, _ = create_requests_and_mappings(two, {implicit: "gpu", ER: "gpu"})
    assert [r["name"] for r in reqs] == ["container-0-request-0", "container-1-request-0"]


def test_scenario_25_zero_missing_and_fractional_are_ignored() -> None:
    p = pod(containers=[container("a", {ER: 0}), container("b", {ER: "500m"}), container("c", {"cpu": 1})])
    assert create_requests_and_mappings(p, {ER: "class"}) == ([], [])


def test_limits_default_requests() -> None:
    p = pod(containers=[{"name": "c", "resources": {"limits": {ER: 2}}}])
    reqs, _ = create_requests_and_mappings(p, {ER: "class"})
    assert reqs == [req("container-0-request-0", "class", 2)]


def test_init_larger_than_regular() -> None:
    # init [ERinit:2], regular [ER:1]
    p = pod(init=[container("init-con0", {ERI: 2})], containers=[container("con0", {ER: 1})])
    reqs, maps = create_requests_and_mappings(p, {ERI: "classInit", ER: "class"})
    assert reqs == [req("container-0-request-0", "classInit", 2), req("container-1-request-0", "class", 1)]
    # Resources in sorted order: example.com/gpu before example.com/init-gpu.
    assert maps == [m("con0", ER, "container-1-request-0"), m("init-con0", ERI, "container-0-request-0")]


def test_largest_short_lived_request_is_kept() -> None:
    # init [ERinit:1], init [ERinit:2], regular [ER:1]
    p = pod(
        init=[container("init-con0", {ERI: 1}), container("init-con1", {ERI: 2})],
        containers=[container("con0", {ER: 1})],
    )
    reqs, maps = create_requests_and_mappings(p, {ERI: "classInit", ER: "class"})
    assert reqs == [req("container-1-request-0", "classInit", 2), req("container-2-request-0", "class", 1)]
    assert maps == [
        m("con0", ER, "container-2-request-0"),
        m("init-con0", ERI, "container-1-request-0"),
        m("init-con1", ERI, "container-1-request-0"),
    ]


def test_sidecar_is_reused_only_by_earlier_init_containers() -> None:
    # init [ERinit:1], sidecar [ERinit:1], init [ERinit:2], regular [ER:1]
    p = pod(
        init=[
            container("init0", {ERI: 1}),
            container("side", {ERI: 1}, sidecar=True),
            container("init2", {ERI: 2}),
        ],
        containers=[container("con0", {ER: 1})],
    )
    reqs, maps = create_requests_and_mappings(p, {ERI: "classInit", ER: "class"})
    assert reqs == [
        req("container-1-request-0", "classInit", 1),
        req("container-2-request-0", "classInit", 2),
        req("container-3-request-0", "class", 1),
    ]
    assert m("init0", ERI, "container-1-request-0") in maps  # reuses the sidecar's request
    assert m("init2", ERI, "container-2-request-0") in maps  # the sidecar is already running
    assert len(maps) == 4


def test_short_lived_reuses_several_long_lived_requests() -> None:
    # One init container needing 3 devices reuses two regular containers' requests (1 + 1), and asks
    # for the remaining 1 itself: one container, one resource, three requests.
    p = pod(init=[container("init", {ER: 3})], containers=[container("a", {ER: 1}), container("b", {ER: 1})])
    reqs, maps = create_requests_and_mappings(p, {ER: "class"})
    assert reqs == [
        req("container-0-request-0", "class", 1),
        req("container-1-request-0", "class", 1),
        req("container-2-request-0", "class", 1),
    ]
    assert [x["requestName"] for x in maps if x["containerName"] == "init"] == [
        "container-1-request-0",
        "container-2-request-0",
        "container-0-request-0",
    ]


def test_fully_covered_init_container_asks_for_nothing() -> None:
    p = pod(init=[container("init", {ER: 1})], containers=[container("a", {ER: 2})])
    reqs, maps = create_requests_and_mappings(p, {ER: "class"})
    assert reqs == [req("container-1-request-0", "class", 2)]
    assert maps == [m("a", ER, "container-1-request-0"), m("init", ER, "container-1-request-0")]


def test_one_init_container_with_implicit_and_explicit_names() -> None:
    implicit = "deviceclass.resource.kubernetes.io/classInit"
    p = pod(init=[container("init", {implicit: 2, ERI: 1})], containers=[container("c")])
    reqs, _ = create_requests_and_mappings(p, {implicit: "classInit", ERI: "classInit"})
    assert reqs == [
        req("container-0-request-0", "classInit", 2),
        req("container-0-request-1", "classInit", 1),
    ]


def test_class_demand_adds_up_the_names_of_each_class() -> None:
    names = {"example.com/gpu": "gpu", "example.com/gpu-big": "gpu", "example.com/nic": "nic"}
    demand = {"example.com/gpu": 2, "example.com/gpu-big": 1, "other.com/x": 5}
    assert class_demand(names, demand) == {"gpu": 3, "nic": 0}  # a name without demand asks none
    assert class_demand({}, demand) == {}
