"""The rewrite of extended resources into DRA claims (KEP-5004 "Option 1")."""

from __future__ import annotations

import copy
import json
from typing import Any

import jsonpatch
from hypothesis import given, settings
from hypothesis import strategies as st

from tests.core.podfactory import container, pod
from webhook.core.api.objects import Obj
from webhook.core.paths.rewrite import (
    REWRITTEN_ANNOTATION,
    TEMPLATE_REQUEST,
    TemplateRef,
    alignment,
    no_alignment,
    plan_rewrite,
    rewrite_ops,
    rewritten_annotation,
    rewritten_pod,
    template,
    template_name,
    template_ref,
    templates_of,
    templates_used,
)
from webhook.core.scheduling.plugins.dynamicresources.mappings import create_requests_and_mappings

ER, ERI = "example.com/gpu", "example.com/init-gpu"
IMPLICIT = "deviceclass.resource.kubernetes.io/gpu.example.com"


def devices_per_container(p: Obj, counts: dict[str, int]) -> dict[str, int]:
    """What each container of a rewritten pod gets: the counts of the pod claims it names."""
    by_claim = {
        pc["name"]: counts[pc["resourceClaimTemplateName"]] for pc in p["spec"].get("resourceClaims", [])
    }
    out: dict[str, int] = {}
    for section in ("initContainers", "containers"):
        for c in p["spec"].get(section, []):
            claims = (c.get("resources") or {}).get("claims") or []
            out[c["name"]] = sum(by_claim.get(e["name"], 0) for e in claims)
    return out


def upstream_devices_per_container(p: Obj, dra: dict[str, str]) -> dict[str, int]:
    """What upstream's request mapping gives each container of the original pod."""
    requests, mappings = create_requests_and_mappings(p, dra)
    counts = {r["name"]: r["exactly"]["count"] for r in requests}
    out: dict[str, int] = {}
    for section in ("initContainers", "containers"):
        for c in p["spec"].get(section, []):
            names = {m["requestName"] for m in mappings if m["containerName"] == c["name"]}
            out[c["name"]] = sum(counts[n] for n in names)
    return out


def test_the_kep_example_pod_asks_for_one_device_through_a_shared_template() -> None:
    """The KEP-5004 example: a container asking ``example.com/gpu: 1`` (plus cpu and memory)."""
    p = pod("demo-0", [container("app", {"cpu": "100m", ER: 1, "memory": "64Mi"})])
    rw = plan_rewrite(p, {ER: "gpu.example.com"})
    assert rw.templates == [TemplateRef("gpu.example.com", 1)]
    assert rw.pod_claims == [
        {"name": "draxr-container-0-request-1", "resourceClaimTemplateName": "draxr-gpu.example.com-1"}
    ]
    out = rewritten_pod(p, rw)
    c = out["spec"]["containers"][0]
    assert c["resources"]["requests"] == {"cpu": "100m", "memory": "64Mi"}
    assert c["resources"]["claims"] == [{"name": "draxr-container-0-request-1", "request": TEMPLATE_REQUEST}]
    assert ER not in c["resources"].get("limits", {})
    assert p["spec"]["containers"][0]["resources"]["requests"][ER] == 1  # the input is untouched


def test_limits_lose_the_name_too_and_other_resources_stay() -> None:
    c = {"name": "c", "resources": {"limits": {ER: "2", "cpu": "1"}, "requests": {"cpu": "1"}}}
    out = rewritten_pod(p := pod(containers=[c]), plan_rewrite(p, {ER: "gpu"}))
    assert out["spec"]["containers"][0]["resources"]["limits"] == {"cpu": "1"}
    # Limits default requests (API defaulting): cpu and the gpu are both request keys, index 1.
    assert out["spec"]["containers"][0]["resources"]["claims"] == [
        {"name": "draxr-container-0-request-1", "request": TEMPLATE_REQUEST}
    ]
    assert plan_rewrite(p, {ER: "gpu"}).templates == [TemplateRef("gpu", 2)]


def test_init_containers_reuse_long_lived_requests_as_upstream_maps_them() -> None:
    """spec §3.4: init [ERinit:1], sidecar [ERinit:1], init [ERinit:2], regular [ER:1]."""
    p = pod(
        init=[
            container("init0", {ERI: 1}),
            container("side", {ERI: 1}, sidecar=True),
            container("init2", {ERI: 2}),
        ],
        containers=[container("con0", {ER: 1})],
    )
    dra = {ERI: "classInit", ER: "class"}
    rw = plan_rewrite(p, dra)
    out = rewritten_pod(p, rw)
    claims = {
        c["name"]: c["resources"]["claims"]
        for c in [*out["spec"]["initContainers"], *out["spec"]["containers"]]
    }
    assert claims["init0"] == [{"name": "draxr-container-1-request-0", "request": TEMPLATE_REQUEST}]
    assert claims["side"] == [{"name": "draxr-container-1-request-0", "request": TEMPLATE_REQUEST}]
    assert claims["init2"] == [{"name": "draxr-container-2-request-0", "request": TEMPLATE_REQUEST}]
    assert claims["con0"] == [{"name": "draxr-container-3-request-0", "request": TEMPLATE_REQUEST}]
    assert rw.templates == [TemplateRef("class", 1), TemplateRef("classInit", 1), TemplateRef("classInit", 2)]
    counts = {t.name: t.count for t in rw.templates}
    assert devices_per_container(out, counts) == upstream_devices_per_container(p, dra)


def test_a_pod_keeps_its_own_claims() -> None:
    p = pod(containers=[container("c", {ER: 1})])
    p["spec"]["resourceClaims"] = [{"name": "mine", "resourceClaimName": "my-claim"}]
    p["spec"]["containers"][0]["resources"]["claims"] = [{"name": "mine"}]
    out = rewritten_pod(p, plan_rewrite(p, {ER: "gpu"}))
    assert [pc["name"] for pc in out["spec"]["resourceClaims"]] == ["mine", "draxr-container-0-request-0"]
    assert out["spec"]["containers"][0]["resources"]["claims"][0] == {"name": "mine"}


def test_nothing_to_rewrite() -> None:
    p = pod(containers=[container("c", {"cpu": "1"})])
    assert plan_rewrite(p, {}).empty
    assert plan_rewrite(p, {ER: "gpu"}).empty  # the name is not requested
    assert rewritten_pod(p, plan_rewrite(p, {})) == p


def test_template_names_are_deterministic_and_always_valid_object_names() -> None:
    assert template_name("gpu.example.com", 2) == "draxr-gpu.example.com-2"
    long = "a" * 63 + "." + "b" * 63 + "." + "c" * 63 + "." + "d" * 60
    name = template_name(long, 1)
    assert len(name) <= 253
    assert name.startswith("draxr-")
    assert name == template_name(long, 1)
    assert name != template_name(long + "e", 1)


def test_template_round_trip_and_foreign_templates() -> None:
    ref = TemplateRef("gpu.example.com", 4)
    t = template(ref, "ns")
    assert t["metadata"]["name"] == ref.name
    assert t["metadata"]["namespace"] == "ns"
    assert template_ref(t) == ref
    t["metadata"]["labels"] = {}
    assert template_ref(t) is None  # not draxr's
    renamed = template(ref, "ns")
    renamed["metadata"]["name"] = "other"
    assert template_ref(renamed) is None


def test_templates_used_names_only_draxrs() -> None:
    p = pod(containers=[container("c", {ER: 1})])
    p["spec"]["resourceClaims"] = [{"name": "x", "resourceClaimTemplateName": "users-own"}]
    out = rewritten_pod(p, plan_rewrite(p, {ER: "gpu"}))
    assert templates_used(out) == ["draxr-gpu-1"]


names = st.sampled_from([ER, ERI, IMPLICIT, "cpu"])
amounts = st.integers(0, 4)


@st.composite
def pods(draw: Any) -> Obj:
    def one(name: str, sidecar: bool = False) -> Obj:
        reqs = draw(st.dictionaries(names, amounts, max_size=3))
        return container(name, reqs, sidecar=sidecar)

    init = [one(f"i{i}", sidecar=draw(st.booleans())) for i in range(draw(st.integers(0, 3)))]
    regular = [one(f"c{i}") for i in range(draw(st.integers(1, 3)))]
    return pod("p", regular, init=init or None)


@settings(max_examples=200, deadline=None)
@given(p=pods())
def test_every_container_gets_the_devices_upstreams_mapping_gives_it(p: Obj) -> None:
    dra = {ER: "gpu.example.com", ERI: "init.example.com", IMPLICIT: "gpu.example.com"}
    rw = plan_rewrite(p, dra)
    out = rewritten_pod(p, rw)
    counts = {t.name: t.count for t in rw.templates}
    assert devices_per_container(out, counts) == upstream_devices_per_container(p, dra)
    for section in ("initContainers", "containers"):
        for c in out["spec"].get(section, []):
            for values in (
                (c.get("resources") or {}).get("requests", {}),
                (c.get("resources") or {}).get("limits", {}),
            ):
                assert not set(values) & set(dra)


@st.composite
def shaped_pods(draw: Any) -> Obj:
    """``pods()`` in every shape the operations must handle: limits beside requests, containers
    without resources or with claims of their own, names needing JSON Pointer escapes, a pod with
    claims of its own."""
    p: Obj = draw(pods())
    for c in [*p["spec"].get("initContainers", []), *p["spec"]["containers"]]:
        res = c.get("resources")
        if res is None:
            continue
        shape = draw(st.sampled_from(["requests", "limits", "both", "none", "own-claims", "tilde"]))
        if shape in ("limits", "both"):
            res["limits"] = dict(res["requests"])
        if shape == "limits":
            del res["requests"]
        if shape == "none":
            del c["resources"]
        if shape == "own-claims":
            res["claims"] = [{"name": "mine"}]
        if shape == "tilde":
            res["requests"]["example.com/odd~name"] = 1
    if draw(st.booleans()):
        p["spec"]["resourceClaims"] = [{"name": "mine", "resourceClaimName": "my-claim"}]
    return p


@settings(max_examples=300, deadline=None)
@given(p=shaped_pods())
def test_the_operations_make_exactly_the_rewritten_pod(p: Obj) -> None:
    dra = {
        ER: "gpu.example.com",
        ERI: "init.example.com",
        IMPLICIT: "gpu.example.com",
        "example.com/odd~name": "x",
    }
    rw = plan_rewrite(p, dra)
    before = copy.deepcopy(p)
    patched = jsonpatch.apply_patch(p, rewrite_ops(p, rw))
    assert p == before  # the pod itself is not touched
    assert patched == rewritten_pod(p, rw)


# --- alignment (draxr.io/align-by on the class) ----------------------------------------------------

ROOT = "resource.kubernetes.io/pcieRoot"
NUMA = "gpu.example.com/numaNode"


def aligned_class(name: str = "gpu.example.com", by: str = ROOT) -> Obj:
    return {"metadata": {"name": name, "annotations": {"draxr.io/align-by": by}}, "spec": {}}


def test_a_multi_device_request_of_an_aligning_class_gets_an_aligned_template() -> None:
    classes = {"gpu.example.com": aligned_class(by=f"{ROOT},{NUMA}")}
    align = alignment(pod("p", [container("c", {ER: "4"})]), classes.get, lambda _c, _a: 4)
    rw = plan_rewrite(
        pod("p", [container("c", {ER: "4"}), container("d", {ER: "1"})]), {ER: "gpu.example.com"}, align
    )
    aligned, single = sorted(rw.templates, key=lambda r: r.count, reverse=True)
    assert aligned == TemplateRef("gpu.example.com", 4, (ROOT, NUMA))
    assert single == TemplateRef("gpu.example.com", 1)  # one device: nothing to align
    assert aligned.name.startswith("draxr-gpu.example.com-4-aligned-")
    assert (
        aligned.name
        != TemplateRef("gpu.example.com", 4, (ROOT,)).name
        != TemplateRef("gpu.example.com", 4).name
    )
    body = template(aligned, "ns")
    assert body["spec"]["spec"]["devices"]["constraints"] == [
        {"requests": [TEMPLATE_REQUEST], "matchAttribute": ROOT},
        {"requests": [TEMPLATE_REQUEST], "matchAttribute": NUMA},
    ]
    assert "constraints" not in template(single, "ns")["spec"]["spec"]["devices"]
    assert template_ref(body) == aligned  # the worker reads back what it wrote
    annotated = pod("p")
    annotated["metadata"]["annotations"] = {REWRITTEN_ANNOTATION: rewritten_annotation(rw)}
    assert templates_of(annotated) == sorted(rw.templates)


def test_alignment_follows_the_pod_and_the_largest_group() -> None:
    classes = {"gpu.example.com": aligned_class()}
    p = pod("p", [container("c", {ER: "4"})])
    assert alignment(p, classes.get, lambda _c, _a: 4)("gpu.example.com", 4) == (ROOT,)
    # no root anywhere holds 8: requiring it would make the pod wait forever
    assert alignment(p, classes.get, lambda _c, _a: 4)("gpu.example.com", 8) == ()
    assert alignment(p, classes.get, lambda _c, _a: 4)("other.example.com", 4) == ()  # class does not align
    for opt_out in ("none", "preferred"):  # a template claim cannot fall back to a split set
        p["metadata"]["annotations"] = {"draxr.io/align": opt_out}
        assert alignment(p, classes.get, lambda _c, _a: 4)("gpu.example.com", 4) == ()
    p["metadata"]["annotations"] = {"draxr.io/align": "requird"}  # a typo never loosens it
    assert alignment(p, classes.get, lambda _c, _a: 4)("gpu.example.com", 4) == (ROOT,)


def test_an_alignment_settled_for_its_classes_reads_nothing_later() -> None:
    classes = {"gpu.example.com": aligned_class(), "nic.example.com": aligned_class("nic.example.com", NUMA)}
    sizes = {("gpu.example.com", ROOT): 4, ("nic.example.com", NUMA): 2}
    p = pod("p", [container("c", {ER: "4"})])
    settled = alignment(p, classes.get, lambda c, a: sizes[(c, a)], ["gpu.example.com", "nic.example.com"])
    classes.clear()  # what was read under a lock stays the answer after the lock is released
    sizes.clear()
    assert settled("gpu.example.com", 4) == (ROOT,)
    assert settled("gpu.example.com", 8) == ()
    assert settled("nic.example.com", 2) == (NUMA,)
    assert settled("nic.example.com", 3) == ()
    assert settled("other.example.com", 2) == ()  # a class not named: nothing to align
    p["metadata"]["annotations"] = {"draxr.io/align": "none"}
    assert alignment(p, classes.get, lambda c, a: sizes[(c, a)], ["gpu.example.com"]) is no_alignment


def test_a_tampered_rewritten_annotation_names_no_template() -> None:
    ref = TemplateRef("gpu.example.com", 4, (ROOT,))
    for body in (
        {ref.name: ["gpu.example.com", 4, [NUMA]]},  # attributes that do not give the name
        {ref.name: ["gpu.example.com", 4, ROOT]},  # not a list
        {ref.name: ["gpu.example.com", True, [ROOT]]},
    ):
        p = pod("p")
        p["metadata"]["annotations"] = {REWRITTEN_ANNOTATION: json.dumps(body)}
        assert templates_of(p) == []


def test_a_class_with_capacity_requests_gets_templates_whose_devices_are_shares() -> None:
    """``draxr.io/capacity-requests``: each device of the template's request is a 10Gi share; the
    template's name says so, and the worker reads it all back from the pod's annotation."""
    p = pod("p", [container("a", {"example.com/gpu": 1}), container("b", {"example.com/gpu": 2})])
    capacity = {"gpu": {"memory": "10Gi"}}
    rw = plan_rewrite(p, {"example.com/gpu": "gpu"}, capacity=capacity)
    assert [(r.device_class, r.count, r.capacity) for r in rw.templates] == [
        ("gpu", 1, (("memory", "10Gi"),)),
        ("gpu", 2, (("memory", "10Gi"),)),
    ]
    plain = plan_rewrite(p, {"example.com/gpu": "gpu"})
    assert {r.name for r in rw.templates}.isdisjoint(r.name for r in plain.templates)
    assert all(r.name.startswith("draxr-gpu-") and "-cap-" in r.name for r in rw.templates)
    body = template(rw.templates[0], "ns")
    (request,) = body["spec"]["spec"]["devices"]["requests"]
    assert request["exactly"]["capacity"] == {"requests": {"memory": "10Gi"}}
    assert template_ref(body) == rw.templates[0]
    out = rewritten_pod(p, rw)
    out["metadata"].setdefault("annotations", {})[REWRITTEN_ANNOTATION] = rewritten_annotation(rw)
    assert templates_of(out) == rw.templates
    # Unchanged for classes without capacity requests: old annotations still read the same.
    assert json.loads(rewritten_annotation(plain)) == {r.name: ["gpu", r.count] for r in plain.templates}


TOLERATION = {"key": "example.com/maintenance", "operator": "Exists", "effect": "NoSchedule"}


def test_a_class_that_tolerates_taints_gets_tolerating_templates() -> None:
    """``draxr.io/extended-resource-tolerations`` (issue 23): the templates' requests carry the
    class's tolerations, as the special claim's do natively; other tolerations, another template."""
    tolerations = {"gpu.example.com": [TOLERATION]}
    p = pod("p", [container("c", {ER: "2"}), container("d", {"example.com/nic": "1"})])
    rw = plan_rewrite(
        p, {ER: "gpu.example.com", "example.com/nic": "nic"}, tolerations=lambda c: tolerations.get(c, [])
    )
    gpu, nic = sorted(rw.templates, key=lambda r: r.device_class)
    assert gpu.name.startswith("draxr-gpu.example.com-2-tolerating-")
    assert nic == TemplateRef("nic", 1)
    body = template(gpu, "ns")
    assert body["spec"]["spec"]["devices"]["requests"][0]["exactly"]["tolerations"] == [TOLERATION]
    assert "tolerations" not in template(nic, "ns")["spec"]["spec"]["devices"]["requests"][0]["exactly"]
    assert template_ref(body) == gpu  # the worker reads back what it wrote
    annotated = pod("p")
    annotated["metadata"]["annotations"] = {REWRITTEN_ANNOTATION: rewritten_annotation(rw)}
    assert templates_of(annotated) == sorted(rw.templates)
    other = TemplateRef("gpu.example.com", 2, (), json.dumps([{**TOLERATION, "effect": "NoExecute"}]))
    assert len({gpu.name, other.name, TemplateRef("gpu.example.com", 2).name}) == 3
    # aligned and tolerating: both in the name, both in the annotation, read back alike
    both = TemplateRef("gpu.example.com", 4, (ROOT,), gpu.tolerations)
    assert both.name.startswith("draxr-gpu.example.com-4-aligned-")
    assert "-tolerating-" in both.name
    assert template_ref(template(both, "ns")) == both
    annotated["metadata"]["annotations"] = {
        REWRITTEN_ANNOTATION: json.dumps({both.name: ["gpu.example.com", 4, [ROOT], [TOLERATION]]})
    }
    assert templates_of(annotated) == [both]


def test_a_class_with_tolerations_and_capacity_requests_gets_templates_with_both() -> None:
    """Both of issue 23's class annotations at once: the template's request carries the tolerations
    and the capacity requests, its name says ``-tolerating-`` then ``-cap-``, and the pod's
    ``draxr.io/rewritten`` entry is ``[class, count, align, tolerations, {capacity}]``."""
    p = pod("p", [container("c", {ER: "2"})])
    tolerations = {"gpu.example.com": [TOLERATION]}
    rw = plan_rewrite(
        p,
        {ER: "gpu.example.com"},
        tolerations=lambda c: tolerations.get(c, []),
        capacity={"gpu.example.com": {"memory": "10Gi"}},
    )
    (ref,) = rw.templates
    assert ref.toleration_list() == [TOLERATION]
    assert ref.capacity == (("memory", "10Gi"),)
    tolerating_only = TemplateRef("gpu.example.com", 2, (), ref.tolerations)
    shares_only = TemplateRef("gpu.example.com", 2, capacity=ref.capacity)
    assert ref.name.startswith(tolerating_only.name + "-cap-")
    assert ref.name.endswith(shares_only.name.removeprefix("draxr-gpu.example.com-2"))
    assert len({ref.name, tolerating_only.name, shares_only.name}) == 3
    body = template(ref, "ns")
    (request,) = body["spec"]["spec"]["devices"]["requests"]
    assert request["exactly"]["tolerations"] == [TOLERATION]
    assert request["exactly"]["capacity"] == {"requests": {"memory": "10Gi"}}
    assert template_ref(body) == ref
    assert json.loads(rewritten_annotation(rw)) == {
        ref.name: ["gpu.example.com", 2, [], [TOLERATION], {"memory": "10Gi"}]
    }
    annotated = pod("p")
    annotated["metadata"]["annotations"] = {REWRITTEN_ANNOTATION: rewritten_annotation(rw)}
    assert templates_of(annotated) == [ref]
    # tolerations without capacity requests: no capacity dict, as main's annotations are
    assert json.loads(
        rewritten_annotation(
            plan_rewrite(p, {ER: "gpu.example.com"}, tolerations=lambda c: tolerations.get(c, []))
        )
    )[tolerating_only.name] == ["gpu.example.com", 2, [], [TOLERATION]]


def test_the_consumable_branchs_older_annotation_entry_is_still_read() -> None:
    """``[class, count, align, {capacity}]``, written before tolerations had a place: a dict in the
    fourth place is capacity requests; the same entry with ``[]`` tolerations reads the same."""
    shares = TemplateRef("gpu.example.com", 4, (ROOT,), capacity=(("memory", "10Gi"),))
    for entry in (
        ["gpu.example.com", 4, [ROOT], {"memory": "10Gi"}],
        ["gpu.example.com", 4, [ROOT], [], {"memory": "10Gi"}],
    ):
        annotated = pod("p")
        annotated["metadata"]["annotations"] = {REWRITTEN_ANNOTATION: json.dumps({shares.name: entry})}
        assert templates_of(annotated) == [shares]
    unaligned = TemplateRef("gpu.example.com", 1, capacity=(("memory", "10Gi"),))
    annotated = pod("p")
    annotated["metadata"]["annotations"] = {
        REWRITTEN_ANNOTATION: json.dumps({unaligned.name: ["gpu.example.com", 1, [], {"memory": "10Gi"}]})
    }
    assert templates_of(annotated) == [unaligned]
