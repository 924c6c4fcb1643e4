"""The PV/PVC helpers, from upstream's ``component-helpers/storage/volume`` tests:
TestFindMatchVolumeWithNode (pv_helpers_test.go; volume attributes classes on, as in 1.37),
TestCheckVolumeNodeAffinity (helpers_test.go), the claim's class; and the binding the PV controller
makes (``GetBindVolumeToClaim``)."""

from __future__ import annotations

from typing import Any

import pytest

from webhook.core.api.objects import Obj, annotations_of, meta, spec
from webhook.core.api.pvhelpers import (
    ANN_BOUND_BY_CONTROLLER,
    NO_MATCHING_TERMS,
    MatchError,
    bind_volume_to_claim,
    claim_class,
    default_class_name,
    ephemeral_owner_error,
    find_matching_volume,
    match_topology_selector_terms,
    node_affinity_error,
    with_default_class,
    with_selected_node,
)


def affinity(key: str, value: str) -> Obj:
    return {
        "required": {
            "nodeSelectorTerms": [{"matchExpressions": [{"key": key, "operator": "In", "values": [value]}]}]
        }
    }


def volume(uid: str, name: str, size: str, available: bool, **spec_: Any) -> Obj:
    """``makeTestVolume(uid, name, capacity, available)``: a local volume, RWO and ROX."""
    out: Obj = {
        "metadata": {"uid": uid, "name": name},
        "spec": {
            "capacity": {"storage": size},
            "local": {},
            "accessModes": ["ReadWriteOnce", "ReadOnlyMany"],
            "volumeMode": "Filesystem",
            **spec_,
        },
    }
    if available:
        out["status"] = {"phase": "Available"}
    return out


VOLUMES = [
    volume("local-small", "local001", "5G", True),
    volume("local-pd-very-large", "local002", "200E", True, storageClassName="large"),
    volume(
        "affinity-pv",
        "affinity001",
        "100G",
        True,
        storageClassName="wait",
        nodeAffinity=affinity("key1", "value1"),
    ),
    volume(
        "affinity-pv2",
        "affinity002",
        "150G",
        True,
        storageClassName="wait",
        nodeAffinity=affinity("key1", "value1"),
    ),
    volume(
        "affinity-prebound",
        "affinity003",
        "100G",
        True,
        storageClassName="wait",
        claimRef={"name": "claim02", "namespace": "myns"},
        nodeAffinity=affinity("key1", "value1"),
    ),
    volume(
        "affinity-pv3",
        "affinity003",
        "200G",
        True,
        storageClassName="wait",
        nodeAffinity=affinity("key1", "value3"),
    ),
    volume(
        "affinity-pv4",
        "affinity004",
        "200G",
        False,
        storageClassName="wait",
        nodeAffinity=affinity("key1", "value4"),
    ),
]


def with_vac(vac: str, volumes: list[Obj]) -> list[Obj]:
    return [{**v, "spec": {**v["spec"], "volumeAttributesClassName": vac}} for v in volumes]


def claim(name: str, size: str, modes: list[str], **spec_: Any) -> Obj:
    """``makeTestPersistentVolumeClaim``: class ``wait``, namespace ``myns``."""
    return {
        "metadata": {"name": name, "namespace": "myns"},
        "spec": {
            "accessModes": modes,
            "resources": {"requests": {"storage": size}},
            "storageClassName": "wait",
            "volumeMode": "Filesystem",
            **spec_,
        },
    }


RWO = ["ReadWriteOnce"]


# TestFindMatchVolumeWithNode
@pytest.mark.parametrize(
    ("scenario", "want", "pvc", "node_labels", "volumes", "excluded"),
    [
        ("success-match", "affinity-pv", claim("claim01", "100G", RWO), {"key1": "value1"}, VOLUMES, []),
        (
            "success-prebound",
            "affinity-prebound",
            claim("claim02", "100G", RWO),
            {"key1": "value1"},
            VOLUMES,
            [],
        ),
        (
            "success-exclusion",
            "affinity-pv2",
            claim("claim01", "100G", RWO),
            {"key1": "value1"},
            VOLUMES,
            ["affinity001"],
        ),
        (
            "fail-exclusion",
            None,
            claim("claim01", "100G", RWO),
            {"key1": "value1"},
            VOLUMES,
            ["affinity001", "affinity002", "affinity002-vac"],
        ),
        (
            "fail-accessmode",
            None,
            claim("claim01", "100G", ["ReadWriteMany"]),
            {"key1": "value1"},
            VOLUMES,
            [],
        ),
        ("fail-nodeaffinity", None, claim("claim01", "100G", RWO), {"key1": "value2"}, VOLUMES, []),
        ("fail-prebound-node-affinity", None, claim("claim02", "100G", RWO), {"key1": "value3"}, VOLUMES, []),
        ("fail-nonavaliable", None, claim("claim04", "100G", RWO), {"key1": "value4"}, VOLUMES, []),
        (
            "success-bad-and-good-node-affinity",
            "affinity-pv3",
            claim("claim03", "100G", RWO),
            {"key1": "value3"},
            VOLUMES,
            [],
        ),
        (
            "success-match-with-vac",
            "affinity-pv",
            claim("claim01", "100G", RWO, volumeAttributesClassName="gold"),
            {"key1": "value1"},
            with_vac("gold", VOLUMES),
            [],
        ),
        (
            "fail-vac",
            None,
            claim("claim01", "100G", RWO, volumeAttributesClassName="silver"),
            {"key1": "value1"},
            VOLUMES,
            [],
        ),
        (
            "fail-prebound-vac",
            None,
            claim("claim02", "100G", RWO, volumeAttributesClassName="silver"),
            {"key1": "value1"},
            with_vac("gold", VOLUMES),
            [],
        ),
    ],
)
def test_find_match_volume_with_node(
    scenario: str,
    want: str | None,
    pvc: Obj,
    node_labels: dict[str, str],
    volumes: list[Obj],
    excluded: list[str],
) -> None:
    found = find_matching_volume(pvc, volumes, node_labels, excluded)
    assert (meta(found).get("uid") if found is not None else None) == want, scenario


def test_a_claim_selector_filters_volumes_by_label_and_an_unreadable_one_is_an_error() -> None:
    labelled = [{**v, "metadata": {**v["metadata"], "labels": {"tier": "fast"}}} for v in VOLUMES[3:4]]
    pvc = claim("claim01", "100G", RWO, selector={"matchLabels": {"tier": "fast"}})
    found = find_matching_volume(pvc, [*VOLUMES[2:3], *labelled], {"key1": "value1"})
    assert meta(found).get("uid") == "affinity-pv2"
    bad = claim("claim01", "100G", RWO, selector={"matchExpressions": [{"key": "k", "operator": "Near"}]})
    with pytest.raises(
        MatchError, match=r'^error creating internal label selector for claim: myns/claim01: "Near"'
    ):
        find_matching_volume(bad, VOLUMES, {"key1": "value1"})


NODE_LABELS = {"test-key1": "test-value1", "test-key2": "test-value2"}


def term(*exprs: tuple[str, list[str]]) -> Obj:
    return {"matchExpressions": [{"key": k, "operator": "In", "values": v} for k, v in exprs]}


# TestCheckVolumeNodeAffinity
@pytest.mark.parametrize(
    ("case", "node_affinity", "ok"),
    [
        ("valid-nil", None, True),
        ("valid-no-constraints", {}, True),
        ("select-nothing", {"required": {}}, False),
        (
            "select-nothing-empty-terms",
            {"required": {"nodeSelectorTerms": [{"matchExpressions": []}]}},
            False,
        ),
        (
            "valid-multiple-terms",
            {
                "required": {
                    "nodeSelectorTerms": [
                        term(("test-key3", ["test-value1", "test-value3"])),
                        term(("test-key2", ["test-value0", "test-value2"])),
                    ]
                }
            },
            True,
        ),
        (
            "valid-multiple-match-expressions",
            {
                "required": {
                    "nodeSelectorTerms": [
                        term(
                            ("test-key1", ["test-value1", "test-value3"]),
                            ("test-key2", ["test-value0", "test-value2"]),
                        )
                    ]
                }
            },
            True,
        ),
        (
            "invalid-multiple-match-expressions-key",
            {
                "required": {
                    "nodeSelectorTerms": [
                        term(
                            ("test-key1", ["test-value1", "test-value3"]),
                            ("test-key3", ["test-value0", "test-value2"]),
                        )
                    ]
                }
            },
            False,
        ),
        (
            "invalid-multiple-match-expressions-values",
            {
                "required": {
                    "nodeSelectorTerms": [
                        term(
                            ("test-key1", ["test-value3", "test-value4"]),
                            ("test-key2", ["test-value0", "test-value2"]),
                        )
                    ]
                }
            },
            False,
        ),
        (
            "invalid-multiple-terms",
            {
                "required": {
                    "nodeSelectorTerms": [
                        term(("test-key3", ["test-value1", "test-value3"])),
                        term(("test-key2", ["test-value0", "test-value1"])),
                    ]
                }
            },
            False,
        ),
    ],
)
def test_check_volume_node_affinity(case: str, node_affinity: Obj | None, ok: bool) -> None:
    pv: Obj = {"metadata": {"name": "test-constraints"}, "spec": {}}
    if node_affinity is not None:
        pv["spec"]["nodeAffinity"] = node_affinity
    error = node_affinity_error(pv, NODE_LABELS)
    assert (error is None) == ok, case
    if not ok:
        assert error == NO_MATCHING_TERMS


def test_node_affinity_ignores_match_fields_as_upstream_does() -> None:
    """``CheckNodeAffinity`` builds a node from labels only: a term's ``matchFields`` never narrows."""
    fields = {"matchFields": [{"key": "metadata.name", "operator": "In", "values": ["elsewhere"]}]}
    pv = {"spec": {"nodeAffinity": {"required": {"nodeSelectorTerms": [fields]}}}}
    assert node_affinity_error(pv, {}) is None


@pytest.mark.parametrize(
    ("terms", "node_labels", "ok"),
    [
        (None, {}, True),
        ([], {"a": "b"}, True),
        ([{"matchLabelExpressions": [{"key": "zone", "values": ["a", "b"]}]}], {"zone": "b"}, True),
        ([{"matchLabelExpressions": [{"key": "zone", "values": ["a"]}]}], {"zone": "b"}, False),
        ([{}, {"matchLabelExpressions": [{"key": "zone", "values": ["b"]}]}], {"zone": "b"}, True),
        ([{}], {"zone": "b"}, False),
    ],
)
def test_match_topology_selector_terms(terms: Any, node_labels: dict[str, str], ok: bool) -> None:
    """``MatchTopologySelectorTerms``: no terms admit every node, an empty term none."""
    assert match_topology_selector_terms(terms, node_labels) is ok


def test_the_beta_annotation_names_the_class_first() -> None:
    """``GetPersistentVolumeClaimClass`` (helpers_test.go, TestPersistentVolumeClaimHasClass's
    objects)."""
    assert claim_class({"spec": {"storageClassName": "sc"}}) == "sc"
    assert (
        claim_class(
            {
                "metadata": {"annotations": {"volume.beta.kubernetes.io/storage-class": "beta"}},
                "spec": {"storageClassName": "sc"},
            }
        )
        == "beta"
    )
    assert claim_class({"spec": {}}) == ""


def test_binding_a_volume_to_a_claim() -> None:
    """``GetBindVolumeToClaim``: the claimRef (kind, namespace, name, uid, apiVersion,
    resourceVersion) and bound-by-controller on a copy; a pre-bound volume keeps its annotations."""
    pvc = {"metadata": {"name": "c", "namespace": "ns", "uid": "u", "resourceVersion": "7"}}
    pv: Obj = {"metadata": {"name": "v"}, "spec": {}}
    bound, dirty = bind_volume_to_claim(pv, pvc)
    assert dirty
    assert spec(bound)["claimRef"] == {
        "kind": "PersistentVolumeClaim",
        "namespace": "ns",
        "name": "c",
        "uid": "u",
        "apiVersion": "v1",
        "resourceVersion": "7",
    }
    assert annotations_of(bound) == {ANN_BOUND_BY_CONTROLLER: "yes"}
    assert pv == {"metadata": {"name": "v"}, "spec": {}}
    prebound: Obj = {"metadata": {"name": "v"}, "spec": {"claimRef": {"name": "c", "namespace": "ns"}}}
    bound, dirty = bind_volume_to_claim(prebound, pvc)
    assert dirty  # the uid is filled in
    assert annotations_of(bound) == {}
    again, dirty = bind_volume_to_claim(bound, pvc)
    assert not dirty
    assert again == bound


def test_selected_node_and_ephemeral_ownership() -> None:
    pvc = {"metadata": {"name": "p-v", "namespace": "ns"}}
    assert annotations_of(with_selected_node(pvc, "n1")) == {"volume.kubernetes.io/selected-node": "n1"}
    assert pvc == {"metadata": {"name": "p-v", "namespace": "ns"}}
    pod = {"metadata": {"name": "p", "namespace": "ns", "uid": "u"}}
    assert ephemeral_owner_error(pod, pvc) == "PVC ns/p-v was not created for pod ns/p (pod is not owner)"
    owned = {"metadata": {**pvc["metadata"], "ownerReferences": [{"uid": "u", "controller": True}]}}
    assert ephemeral_owner_error(pod, owned) is None


def test_the_default_storage_class_and_claims_naming_none() -> None:
    """``GetDefaultClass``: the newest default class, then by name; a claim naming no class gets it,
    one naming ``""`` (no class, on purpose) or another class keeps its own."""

    def sc(name: str, created: str, default: bool = True) -> Obj:
        ann = {"storageclass.kubernetes.io/is-default-class": "true"} if default else {}
        return {"metadata": {"name": name, "creationTimestamp": created, "annotations": ann}}

    assert default_class_name([sc("a", "2024-01-01T00:00:00Z", default=False)]) is None
    assert default_class_name([sc("b", "2024-01-01T00:00:00Z"), sc("a", "2024-01-01T00:00:00Z")]) == "a"
    assert default_class_name([sc("a", "2024-01-01T00:00:00Z"), sc("z", "2025-01-01T00:00:00Z")]) == "z"
    assert spec(with_default_class({"spec": {}}, "z")) == {"storageClassName": "z"}
    assert spec(with_default_class({"spec": {"storageClassName": ""}}, "z")) == {"storageClassName": ""}
    assert with_default_class({"spec": {}}, None) == {"spec": {}}
