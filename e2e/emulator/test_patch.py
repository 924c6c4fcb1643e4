"""Properties of the emulator's patch functions (merge patch, strategic merge patch). The patch kinds
over HTTP are e2e/contract/test_patch.py's, against a real apiserver too."""

from __future__ import annotations

import json
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from .mergepatch import merge_patch
from .strategicpatch import PatchError, strategic_merge

POD = "/api/v1/namespaces/default/pods/p"


json_scalars = st.none() | st.booleans() | st.integers() | st.text(max_size=5)
json_values = st.recursive(
    json_scalars,
    lambda children: (
        st.lists(children, max_size=3) | st.dictionaries(st.text(max_size=4), children, max_size=3)
    ),
    max_leaves=12,
)
json_objects = st.dictionaries(st.text(max_size=4), json_values, max_size=4)


@given(json_objects)
def test_empty_patches_change_nothing(doc: dict[str, Any]) -> None:
    assert merge_patch(doc, {}) == doc
    assert strategic_merge(doc, {}) == doc


@given(json_objects, json_objects)
def test_merge_patch_is_idempotent_and_pure(doc: dict[str, Any], patch: dict[str, Any]) -> None:
    before = json.dumps(doc, sort_keys=True)
    once = merge_patch(doc, patch)
    assert merge_patch(once, patch) == once
    assert json.dumps(doc, sort_keys=True) == before


@given(
    st.dictionaries(st.sampled_from(["a", "b", "c"]), json_scalars, max_size=3),
    st.dictionaries(st.sampled_from(["a", "b", "c"]), json_scalars, max_size=3),
)
def test_strategic_equals_merge_for_flat_maps(doc: dict[str, Any], patch: dict[str, Any]) -> None:
    assert strategic_merge(doc, patch) == merge_patch(doc, patch)


@given(
    st.lists(st.sampled_from(["a", "b", "c", "d"]), unique=True),
    st.lists(st.sampled_from(["a", "b", "c", "d"]), unique=True),
)
def test_finalizers_merge_as_a_union_in_both_orders(old: list[str], new: list[str]) -> None:
    """Upstream's order: each finalizer once; the patch's in the patch's order, the others in the
    object's (the contract suite checks one case against a real apiserver)."""
    out = strategic_merge({"metadata": {"finalizers": old}}, {"metadata": {"finalizers": new}})
    merged = out["metadata"]["finalizers"]
    assert sorted(merged) == sorted(set(old) | set(new))
    assert [f for f in merged if f in new] == new
    assert [f for f in merged if f not in new] == [f for f in old if f not in new]


def test_strategic_directives() -> None:
    doc = {
        "metadata": {"labels": {"a": "1", "b": "2"}},
        "status": {"conditions": [{"type": "A", "status": "x"}]},
    }
    assert strategic_merge(doc, {"metadata": {"labels": {"$patch": "replace", "c": "3"}}})["metadata"][
        "labels"
    ] == {"c": "3"}
    assert "labels" not in strategic_merge(doc, {"metadata": {"labels": {"$patch": "delete"}}})["metadata"]
    replaced = strategic_merge(
        doc, {"status": {"conditions": [{"$patch": "replace"}, {"type": "B", "status": "y"}]}}
    )
    assert replaced["status"]["conditions"] == [{"type": "B", "status": "y"}]
    refs = {"metadata": {"ownerReferences": [{"uid": "1", "name": "a"}, {"uid": "2", "name": "b"}]}}
    merged = strategic_merge(refs, {"metadata": {"ownerReferences": [{"uid": "2", "name": "B"}]}})
    assert merged["metadata"]["ownerReferences"] == [{"uid": "1", "name": "a"}, {"uid": "2", "name": "B"}]
    ordered = strategic_merge(
        refs, {"metadata": {"$setElementOrder/ownerReferences": [{"uid": "2"}, {"uid": "1"}]}}
    )
    assert [r["uid"] for r in ordered["metadata"]["ownerReferences"]] == ["2", "1"]
    with pytest.raises(PatchError):
        strategic_merge(refs, {"metadata": {"ownerReferences": [{"name": "no-uid"}]}})
