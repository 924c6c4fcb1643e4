"""Properties of the native path's JSONPatch, on generated pods (no server needed)."""

from __future__ import annotations

import copy
import json
from typing import Any

import jsonpatch
from hypothesis import given, settings
from hypothesis import strategies as st

from webhook.core.api.constants import DRAXR_RESOURCES_ANNOTATION
from webhook.core.api.objects import Obj
from webhook.core.paths.patch import annotation_value, native_patch
from webhook.core.paths.routing import Routing, wants_route

keys = st.text(st.sampled_from("ab/~0.-"), min_size=1, max_size=6)
annotation_maps = st.dictionaries(
    st.one_of(keys, st.just(DRAXR_RESOURCES_ANNOTATION)), st.text(max_size=5), max_size=3
)
scheduler_names = st.one_of(st.none(), st.sampled_from(["", "default-scheduler", "draxr", "volcano"]))
resolved = st.dictionaries(
    st.sampled_from(["example.com/gpu", "example.com/fpga", "deviceclass.resource.kubernetes.io/x"]),
    st.sampled_from(["gpu", "fpga", "x"]),
    max_size=3,
)
routes = st.sampled_from(["default-only", "always", "never"])


@st.composite
def pods(draw: st.DrawFn) -> Obj:
    p: Obj = {"apiVersion": "v1", "kind": "Pod"}
    if draw(st.booleans()):
        meta: Obj = {"name": "p", "labels": {"a": "b"}}
        choice = draw(st.sampled_from(["absent", "null", "map"]))
        if choice == "null":
            meta["annotations"] = None
        elif choice == "map":
            meta["annotations"] = draw(annotation_maps)
        p["metadata"] = meta
    if draw(st.booleans()):
        spec: Obj = {"containers": [{"name": "c", "image": "x"}]}
        name = draw(scheduler_names)
        if name is not None:
            spec["schedulerName"] = name
        p["spec"] = spec
    return p


def _full_mutation(p: Obj, res: dict[str, str], routing: Routing) -> Obj:
    """The mutated pod, built the straightforward way."""
    if not res:
        return p
    out = copy.deepcopy(p)
    meta = out.setdefault("metadata", {})
    if meta.get("annotations") is None:
        meta["annotations"] = {}
    meta["annotations"][DRAXR_RESOURCES_ANNOTATION] = annotation_value(res)
    if wants_route(p, routing):
        out.setdefault("spec", {})["schedulerName"] = routing.scheduler_name
    return out


@settings(max_examples=300, deadline=None)
@given(p=pods(), res=resolved, route=routes)
def test_the_patch_is_the_full_diff_and_a_fixed_point(p: Obj, res: dict[str, str], route: Any) -> None:
    routing = Routing(route=route)
    scheduler = routing.scheduler_name if res and wants_route(p, routing) else None
    before = copy.deepcopy(p)
    patch = native_patch(p, res, scheduler)
    assert p == before  # the input is never changed
    expected = _full_mutation(p, res, routing)
    # the very operations of the full diff, in any order (they touch different fields)
    canonical = sorted(json.dumps(op, sort_keys=True) for op in patch)
    assert canonical == sorted(
        json.dumps(op, sort_keys=True) for op in jsonpatch.make_patch(p, expected).patch
    )
    mutated = jsonpatch.apply_patch(p, patch)
    assert mutated == expected
    assert native_patch(mutated, res, scheduler) == []
    # The patch survives the JSON round trip the response goes through.
    assert jsonpatch.apply_patch(p, json.loads(json.dumps(patch))) == expected
