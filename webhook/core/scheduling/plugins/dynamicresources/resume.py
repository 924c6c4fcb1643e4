"""Resuming a binding cycle that stopped after PreBind wrote the special claim (draxr's own: upstream
treats any special claim from an earlier cycle as stale, deletes it in PostFilter and starts over).

The claim is continued only while its allocation is still one the allocator could make now: pinned
to one node, every device still published there in a usable (complete, valid, newest) pool, untainted
(the special claim tolerates nothing), with no binding conditions, reachable from the node, and
selected by its request's class without a CEL error. Otherwise it is stale, and the pod starts over
as upstream's would."""

from __future__ import annotations

from ....api.objects import Obj, as_dict, as_list, spec, status
from ....cluster.state import ClusterState


def allocation_node(claim: Obj) -> str | None:
    """The single node an allocation is pinned to (``matchFields metadata.name In [node]``)."""
    selector = as_dict(as_dict(status(claim).get("allocation")).get("nodeSelector"))
    terms = as_list(selector.get("nodeSelectorTerms"))
    if len(terms) != 1:
        return None
    for req in as_list(as_dict(terms[0]).get("matchFields")):
        r = as_dict(req)
        values = as_list(r.get("values"))
        if r.get("key") == "metadata.name" and r.get("operator") == "In" and len(values) == 1:
            return str(values[0])
    return None


def still_allocatable(state: ClusterState, claim: Obj, node: str) -> bool:
    """Every device of the claim's allocation is one its request could be given on ``node`` now."""
    nd = state.node_devices(node)
    if nd is None:
        return False
    classes: dict[str, str] = {}
    for r in as_list(as_dict(spec(claim).get("devices")).get("requests")):
        req = as_dict(r)
        cls = as_dict(req.get("exactly")).get("deviceClassName")
        if isinstance(cls, str):
            classes[str(req.get("name"))] = cls
    results = as_list(as_dict(as_dict(status(claim).get("allocation")).get("devices")).get("results"))
    if not results:
        return False
    usable: dict[str, set[tuple[str, str, str]]] = {}
    for res in results:
        r = as_dict(res)
        cls = classes.get(str(r.get("request")))
        if cls is None:
            return False
        if cls not in usable:
            errors = {d.key for d, err in nd.class_candidates(cls) if err is not None}
            usable[cls] = {d.key for d in nd.special_candidates(cls)} - errors
        if (str(r.get("driver")), str(r.get("pool")), str(r.get("device"))) not in usable[cls]:
            return False
    return True
