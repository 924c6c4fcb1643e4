"""The node filters before DRA, in kube-scheduler's order and words: NodeUnschedulable,
TaintToleration, NodeAffinity, NodePorts (``basic_filters``), then NodeResourcesFit."""

from __future__ import annotations

from typing import Any

import pytest

from tests.core.podfactory import container, node, pod
from webhook.core.api.objects import Obj
from webhook.core.cluster.nodeinfo import HostPort, NodeInfo, host_ports
from webhook.core.scheduling.nodefilters import PodFilter, basic_filters
from webhook.core.scheduling.plugins.nodeaffinity import REASON as AFFINITY
from webhook.core.scheduling.plugins.nodeports import REASON as PORTS
from webhook.core.scheduling.plugins.nodeunschedulable import REASON as UNSCHEDULABLE

TOLERATE_UNSCHEDULABLE = {
    "key": "node.kubernetes.io/unschedulable",
    "operator": "Exists",
    "effect": "NoSchedule",
}
TAINT = {"key": "dedicated", "value": "gpu", "effect": "NoSchedule"}
TOLERATE_TAINT = {"key": "dedicated", "operator": "Equal", "value": "gpu"}


def port_pod(*ports: HostPort, **spec: Any) -> Obj:
    c = container("c")
    c["ports"] = [
        {"containerPort": p, "hostPort": p, "protocol": proto, "hostIP": ip} for proto, ip, p in ports
    ]
    return pod("p", [c], **spec)


def filters(p: Obj, info: NodeInfo) -> list[str]:
    return basic_filters(PodFilter.of(p, host_ports(p)), info)


def busy_node(*ports: HostPort, **spec: Any) -> NodeInfo:
    info = NodeInfo.of(node("n", labels={"zone": "a"}, **spec))
    if ports:
        info.add_pod("other", {}, list(ports))
    return info


# -- basic_filters ------------------------------------------------------------------------------


def test_a_plain_pod_fits_a_plain_node() -> None:
    assert filters(pod("p"), busy_node()) == []


def test_filters_stop_at_the_first_failing_plugin_in_upstream_order() -> None:
    info = busy_node(("TCP", "0.0.0.0", 80), unschedulable=True, taints=[TAINT])
    tolerations: list[Obj] = []
    spec: dict[str, Any] = {"nodeSelector": {"zone": "b"}}
    assert filters(port_pod(("TCP", "0.0.0.0", 80), tolerations=tolerations, **spec), info) == [UNSCHEDULABLE]
    tolerations.append(TOLERATE_UNSCHEDULABLE)
    assert filters(port_pod(("TCP", "0.0.0.0", 80), tolerations=tolerations, **spec), info) == [UNTOLERATED]
    tolerations.append(TOLERATE_TAINT)
    assert filters(port_pod(("TCP", "0.0.0.0", 80), tolerations=tolerations, **spec), info) == [AFFINITY]
    spec["nodeSelector"] = {"zone": "a"}
    assert filters(port_pod(("TCP", "0.0.0.0", 80), tolerations=tolerations, **spec), info) == [PORTS]
    assert filters(port_pod(("TCP", "0.0.0.0", 81), tolerations=tolerations, **spec), info) == []


#: upstream's TaintToleration Filter reason in every release draxr serves (1.34.4 to 1.37.2,
#: ``taint_toleration.go``): the taint is logged, not named. draxr named it, as releases before 1.34
#: did, until the parity harness (bench/parity.py) put the two messages side by side.
UNTOLERATED = "node(s) had untolerated taint(s)"


def test_an_untolerated_taint_gets_kube_schedulers_reason() -> None:
    assert filters(pod("p"), busy_node(taints=[TAINT])) == [UNTOLERATED]
    no_value = {"key": "maintenance", "effect": "NoExecute"}
    assert filters(pod("p"), busy_node(taints=[no_value])) == [UNTOLERATED]


def test_a_node_that_is_not_ready_carries_its_lifecycle_taint() -> None:
    n = node("n")
    n["status"]["conditions"] = [{"type": "Ready", "status": "False"}]
    assert filters(pod("p"), NodeInfo.of(n)) == [UNTOLERATED]
    tolerant = pod("p", tolerations=[{"key": "node.kubernetes.io/not-ready", "operator": "Exists"}])
    assert filters(tolerant, NodeInfo.of(n)) == []


def test_soft_taints_do_not_filter() -> None:
    assert filters(pod("p"), busy_node(taints=[{"key": "k", "effect": "PreferNoSchedule"}])) == []


@pytest.mark.parametrize(
    "spec",
    [
        {"nodeSelector": {"zone": "b"}},
        {"nodeSelector": {"zone": "a", "disk": "ssd"}},
        {
            "affinity": {
                "nodeAffinity": {
                    "requiredDuringSchedulingIgnoredDuringExecution": {
                        "nodeSelectorTerms": [
                            {"matchExpressions": [{"key": "zone", "operator": "NotIn", "values": ["a"]}]}
                        ]
                    }
                }
            }
        },
    ],
)
def test_node_affinity_and_selector_mismatches(spec: Obj) -> None:
    assert filters(pod("p", **spec), busy_node()) == [AFFINITY]


def test_preferred_affinity_alone_does_not_constrain() -> None:
    preferred = {
        "nodeAffinity": {"preferredDuringSchedulingIgnoredDuringExecution": [{"weight": 1, "preference": {}}]}
    }
    pf = PodFilter.of(pod("p", affinity=preferred), [])
    assert pf.constrained is False
    assert basic_filters(pf, busy_node()) == []


@pytest.mark.parametrize(
    ("used", "wanted", "conflict"),
    [
        (("TCP", "0.0.0.0", 80), ("TCP", "0.0.0.0", 80), True),
        (("TCP", "0.0.0.0", 80), ("TCP", "10.0.0.1", 80), True),  # the wildcard overlaps every IP
        (("TCP", "10.0.0.1", 80), ("TCP", "0.0.0.0", 80), True),
        (("TCP", "10.0.0.1", 80), ("TCP", "10.0.0.1", 80), True),
        (("TCP", "10.0.0.1", 80), ("TCP", "10.0.0.2", 80), False),
        (("TCP", "0.0.0.0", 80), ("UDP", "0.0.0.0", 80), False),
        (("TCP", "0.0.0.0", 80), ("TCP", "0.0.0.0", 8080), False),
    ],
)
def test_host_port_conflicts(used: HostPort, wanted: HostPort, conflict: bool) -> None:
    assert filters(port_pod(wanted), busy_node(used)) == ([PORTS] if conflict else [])


def test_pod_filter_reads_tolerations_and_constraints_once() -> None:
    p = pod("p", tolerations=[TOLERATE_UNSCHEDULABLE, "junk"], nodeSelector={"zone": "a"})
    pf = PodFilter.of(p, [("TCP", "0.0.0.0", 80)])
    assert pf.tolerations == [TOLERATE_UNSCHEDULABLE]
    assert pf.tolerates_unschedulable is True
    assert pf.constrained is True
    assert pf.ports == [("TCP", "0.0.0.0", 80)]
    assert PodFilter.of(pod("q"), []).tolerates_unschedulable is False
