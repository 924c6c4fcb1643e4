"""Pods nominated to nodes: pending pods with ``status.nominatedNodeName`` (upstream's nominator),
and what a decision must leave room for (``AllocatedState.nominated_for``: equal or higher priority,
not the pod itself, not assumed)."""

from __future__ import annotations

from tests.core.harness import state_of
from tests.core.podfactory import node, pod
from webhook.core.api.objects import Obj
from webhook.core.cluster.nominator import Nominator, nominated_node, priority


def nominated(name: str, node_name: str, prio: int | None = None, **status: str) -> Obj:
    p = pod(name)
    if prio is not None:
        p["spec"]["priority"] = prio
    p["status"] = {"nominatedNodeName": node_name, **status}
    return p


def test_a_nomination_follows_the_pod_until_it_is_bound_finished_or_gone() -> None:
    nom = Nominator()
    p = nominated("p", "n1")
    nom.update(p)
    assert nom.by_node() == {"n1": {"uid-p": p}}
    nom.update(nominated("p", "n2"))
    assert list(nom.by_node()) == ["n2"]
    bound = nominated("p", "n2")
    bound["spec"]["nodeName"] = "n2"
    nom.update(bound)
    assert nom.by_node() == {}
    assert len(nom) == 0
    nom.update(nominated("p", "n2"))
    nom.update(nominated("p", "n2", phase="Failed"))
    assert len(nom) == 0
    nom.update(nominated("p", "n2"))
    nom.remove("uid-p")
    assert nom.by_node() == {}


def test_priority_and_nominated_node_read_as_upstream() -> None:
    assert priority(pod("p")) == 0
    assert priority(nominated("p", "n", 7)) == 7
    assert nominated_node(pod("p")) == ""


def test_a_decision_leaves_room_for_equal_or_higher_priority_pods_but_its_own() -> None:
    st = state_of(node("n1"), node("n2"))
    low, same, high = nominated("low", "n1", 1), nominated("same", "n1", 5), nominated("high", "n2", 9)
    me = nominated("me", "n2", 5)
    for p in (low, same, high, me):
        st.apply("Pod", p)
    assert st.allocated.nominated_for(me) == {"n1": [same], "n2": [high]}
    st.reserve("t", [], same, "n1")  # assumed by this process: no longer nominated
    assert st.allocated.nominated_for(me) == {"n2": [high]}
    st.unreserve("t", same)
    assert st.allocated.nominated_for(me) == {"n1": [same], "n2": [high]}
    st.apply("Pod", high, deleted=True)
    assert st.allocated.nominated_for(me) == {"n1": [same]}
