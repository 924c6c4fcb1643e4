"""KEP-5004's "Option 1": a pod's DRA-backed extended resources rewritten into ordinary DRA claims.

Where the apiserver drops the KEP-5004 fields (the ``DRAExtendedResource`` gate is off), a pod that
asks for ``example.com/gpu: 1`` can still run on DRA devices if its spec asks for them as claims.
The rewrite gives each container exactly the devices upstream's request mapping would give it
(``createRequestsAndMappings``, init-container and sidecar reuse included):

* every device request upstream would put in the special claim (``container-<i>-request-<j>``,
  class, count) becomes one pod claim, ``spec.resourceClaims[]`` named ``draxr-<request>``, made
  from a ResourceClaimTemplate that holds one request of that class and count;
* every request mapping (container, resource, request) becomes a ``resources.claims[]`` entry of
  that container naming the pod claim and the template's request;
* the rewritten names leave ``requests`` and ``limits`` of every container and init container.

Templates are shared: one per (namespace, class, count, alignment), with a deterministic name, so
the webhook can name them without writing anything (dry runs stay exact) and the worker creates the
ones that are missing. The pod's own claims are kept; nothing else changes.

Tolerations (``draxr.io/extended-resource-tolerations`` on the class, issue 23): each template's
request carries them, as the special claim's requests do in native mode, and its name says so
(``-tolerating-<hash>``): a template never changes, so other tolerations make another one.

Alignment (``draxr.io/align-by`` on the class, issue 13): a request of two or more devices whose
class aligns by attributes gets a template whose claim carries a ``matchAttribute`` constraint per
attribute, so its devices share a PCIe root or NUMA node as in native mode. A template claim holds
one request, so what native mode adds beyond that cannot be said here: GPU and NIC requests of one
container land in two claims and are aligned each on its own, not with each other, and a
``preferred`` pod gets no constraint (a claim cannot fall back to a split set; the pod would wait as
a ``required`` one does).

Capacity requests (``draxr.io/capacity-requests`` or KEP-6406's field on the class): the template's
request carries them (``exactly.capacity``), so each device of the request is one share of that size;
the template name then ends in ``-cap-<hash of the requests>`` (after ``-aligned-`` and
``-tolerating-``, when those apply too).
"""

from __future__ import annotations

import copy
import hashlib
import json
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Final

from ..api.alignment import REQUIRED, align_by, pod_alignment
from ..api.names import is_dns1123_subdomain
from ..api.objects import Obj, as_dict, as_list, spec
from ..api.podresources import containers
from ..api.tolerations import tolerations_key
from ..scheduling.plugins.dynamicresources.mappings import create_requests_and_mappings

#: Labels and annotations draxr puts on what it writes for the rewrite.
MANAGED_BY_LABEL: Final = "app.kubernetes.io/managed-by"
MANAGED_BY: Final = "draxr"
TEMPLATE_CLASS_LABEL: Final = "draxr.io/device-class"
#: On a rewritten pod: JSON of what was rewritten (resource -> class), so the worker and people see it.
REWRITTEN_ANNOTATION: Final = "draxr.io/rewritten"
#: The one request of a draxr template; containers name it in ``resources.claims[].request``.
TEMPLATE_REQUEST: Final = "devices"
POD_CLAIM_PREFIX: Final = "draxr-"
TEMPLATE_PREFIX: Final = "draxr-"


@dataclass(frozen=True, slots=True, order=True)
class TemplateRef:
    """A shared template: (class, count, the attributes its devices share, the tolerations of its
    request as canonical JSON (``tolerations.tolerations_key``), the capacity requests of each
    device as sorted (name, quantity) pairs) in a namespace."""

    device_class: str
    count: int
    align: tuple[str, ...] = ()
    tolerations: str = ""
    capacity: tuple[tuple[str, str], ...] = ()

    @property
    def name(self) -> str:
        return template_name(self.device_class, self.count, self.align, self.tolerations, self.capacity)

    def toleration_list(self) -> list[Obj]:
        return list(json.loads(self.tolerations)) if self.tolerations else []


def _capacity_key(wanted: Mapping[Any, Any]) -> tuple[tuple[str, str], ...]:
    """Capacity requests as ``TemplateRef.capacity``: sorted (name, quantity) pairs."""
    return tuple(sorted((str(k), str(v)) for k, v in wanted.items()))


#: (class, count) -> the attributes a request's devices must share; () for none.
Alignment = Callable[[str, int], tuple[str, ...]]


def no_alignment(_cls: str, _count: int) -> tuple[str, ...]:
    return ()


def alignment(
    pod: Obj,
    class_of: Callable[[str], Obj | None],
    largest_group: Callable[[str, str], int],
    classes: Iterable[str] | None = None,
) -> Alignment:
    """What the pod's templates align, as native mode would: the class's ``draxr.io/align-by``
    attributes unless the pod says ``draxr.io/align: none`` or ``preferred`` (see the module's
    docstring), leaving out an attribute no group anywhere is large enough for (the pod would wait
    forever, as ``topology.alignment_constraints`` argues).

    With ``classes`` (every class the plan can name), ``class_of`` and ``largest_group`` are read
    now and never again: the answer outlives a lock held around this call (the webhook plans the
    rewrite after releasing the cache's lock); other classes then align nothing."""
    if pod_alignment(pod) != REQUIRED:
        return no_alignment
    if classes is None:

        def align(cls: str, count: int) -> tuple[str, ...]:
            return tuple(a for a in align_by(class_of(cls)) if count <= largest_group(cls, a))

        return align
    groups = {cls: [(a, largest_group(cls, a)) for a in align_by(class_of(cls))] for cls in set(classes)}

    def settled(cls: str, count: int) -> tuple[str, ...]:
        return tuple(a for a, size in groups.get(cls, ()) if count <= size)

    return settled


@dataclass(slots=True)
class Rewrite:
    """What the rewrite does to one pod."""

    pod_claims: list[Obj] = field(default_factory=list)  # new spec.resourceClaims entries
    container_claims: dict[int, list[Obj]] = field(default_factory=dict)  # container index -> entries
    resources: dict[str, str] = field(default_factory=dict)  # rewritten name -> class
    templates: list[TemplateRef] = field(default_factory=list)  # sorted, unique

    @property
    def empty(self) -> bool:
        return not self.pod_claims


def template_name(
    device_class: str,
    count: int,
    align: tuple[str, ...] = (),
    tolerations: str = "",
    capacity: tuple[tuple[str, str], ...] = (),
) -> str:
    """``draxr-<class>-<count>``, with ``-aligned-<hash of the attributes>`` when the devices must
    share attributes, ``-tolerating-<hash of the tolerations>`` when its request tolerates taints
    (a template cannot change: other tolerations, another template) and ``-cap-<hash of the
    capacity requests>`` when each device is a share; a name that would not be a valid object name
    is shortened and made unique by a hash of the class."""
    suffix = f"-aligned-{_digest(','.join(align))[:8]}" if align else ""
    suffix += f"-tolerating-{_digest(tolerations)[:8]}" if tolerations else ""
    if capacity:
        suffix += f"-cap-{_digest(','.join(f'{k}={v}' for k, v in capacity))[:8]}"
    plain = f"{TEMPLATE_PREFIX}{device_class}-{count}{suffix}"
    if not is_dns1123_subdomain(plain):  # no errors: a valid object name
        return plain
    return f"{TEMPLATE_PREFIX}{_digest(device_class)[:10]}-{count}{suffix}"


def _digest(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()


def pod_claim_name(request_name: str) -> str:
    return POD_CLAIM_PREFIX + request_name


def plan_rewrite(
    pod: Obj,
    dra: Mapping[str, str],
    align: Alignment = no_alignment,
    tolerations: Callable[[str], Sequence[Obj]] | None = None,
    capacity: Mapping[str, Mapping[str, str]] | None = None,
) -> Rewrite:
    """The rewrite of ``pod`` for the DRA-backed names in ``dra`` (resource name -> class);
    ``align`` says which attributes a request's devices must share, ``tolerations`` which taints a
    class's requests tolerate (its ``draxr.io/extended-resource-tolerations``), ``capacity`` (class
    name -> capacity requests) what each device of a class's request consumes."""
    out = Rewrite(resources=dict(dra))
    if not dra:
        return out
    requests, mappings = create_requests_and_mappings(pod, dra, tolerations=tolerations, capacity=capacity)
    taken = {as_dict(pc).get("name") for pc in as_list(spec(pod).get("resourceClaims"))}
    templates: set[TemplateRef] = set()
    for request in requests:
        exactly = request["exactly"]
        cls, count = str(exactly["deviceClassName"]), int(exactly["count"])
        tolerated = tolerations_key(as_list(exactly.get("tolerations")))
        wanted = as_dict(as_dict(exactly.get("capacity")).get("requests"))
        ref = TemplateRef(
            cls, count, align(cls, count) if count > 1 else (), tolerated, _capacity_key(wanted)
        )
        templates.add(ref)
        claim_name = pod_claim_name(str(request["name"]))
        if claim_name in taken:
            raise ValueError(f"the pod already has a resource claim named {claim_name!r}")
        out.pod_claims.append({"name": claim_name, "resourceClaimTemplateName": ref.name})
    index_of = {ref.name: ref.index for ref in containers(pod)}
    for m in mappings:
        entry = {"name": pod_claim_name(m["requestName"]), "request": TEMPLATE_REQUEST}
        entries = out.container_claims.setdefault(index_of[m["containerName"]], [])
        if entry not in entries:
            entries.append(entry)
    out.templates = sorted(templates)
    return out


def rewritten_pod(pod: Obj, rewrite: Rewrite) -> Obj:
    """A copy of ``pod`` with the rewrite applied (the input is not changed)."""
    out = copy.deepcopy(pod)
    if rewrite.empty and not rewrite.resources:
        return out
    s = out.setdefault("spec", {})
    refs = containers(out)
    for ref in refs:
        res = ref.container.get("resources")
        if isinstance(res, dict):
            for section in ("requests", "limits"):
                values = res.get(section)
                if isinstance(values, dict):
                    for name in rewrite.resources:
                        values.pop(name, None)
        entries = rewrite.container_claims.get(ref.index)
        if entries:
            res = ref.container.setdefault("resources", {})
            res["claims"] = [*as_list(res.get("claims")), *entries]
    if rewrite.pod_claims:
        s["resourceClaims"] = [*as_list(s.get("resourceClaims")), *rewrite.pod_claims]
    return out


def rewrite_ops(pod: Obj, rewrite: Rewrite) -> list[Obj]:
    """The JSONPatch operations that make ``pod`` into ``rewritten_pod(pod, rewrite)``, built
    directly (no copy of the pod, no diff: the webhook's hot path). The pod is as the apiserver
    decoded it, so every field has its schema's type."""
    ops: list[Obj] = []
    if rewrite.empty and not rewrite.resources:
        return ops
    inits = len(as_list(spec(pod).get("initContainers")))
    for ref in containers(pod):
        base = f"/spec/initContainers/{ref.index}" if ref.init else f"/spec/containers/{ref.index - inits}"
        res = ref.container.get("resources")
        if isinstance(res, dict):
            for section in ("requests", "limits"):
                values = res.get(section)
                if isinstance(values, dict):
                    ops.extend(
                        {"op": "remove", "path": f"{base}/resources/{section}/{pointer_token(name)}"}
                        for name in rewrite.resources
                        if name in values
                    )
        entries = rewrite.container_claims.get(ref.index)
        if not entries:
            continue
        if not isinstance(res, dict):
            ops.append({"op": "add", "path": f"{base}/resources", "value": {"claims": list(entries)}})
        elif isinstance(res.get("claims"), list):
            ops.extend({"op": "add", "path": f"{base}/resources/claims/-", "value": e} for e in entries)
        else:
            ops.append({"op": "add", "path": f"{base}/resources/claims", "value": list(entries)})
    if rewrite.pod_claims:
        if isinstance(spec(pod).get("resourceClaims"), list):
            ops.extend(
                {"op": "add", "path": "/spec/resourceClaims/-", "value": pc} for pc in rewrite.pod_claims
            )
        else:
            ops.append({"op": "add", "path": "/spec/resourceClaims", "value": list(rewrite.pod_claims)})
    return ops


def pointer_token(key: str) -> str:
    """A JSON Pointer reference token (RFC 6901): ``~`` and ``/`` escaped."""
    return key.replace("~", "~0").replace("/", "~1")


def rewritten_annotation(rewrite: Rewrite) -> str:
    """The value of ``draxr.io/rewritten``: template name -> [class, count] (then the aligned
    attributes, the tolerations and the capacity requests, as apply), all the worker needs to
    create the templates the pod's claims come from."""
    body = {ref.name: _annotated(ref) for ref in rewrite.templates}
    return json.dumps(body, sort_keys=True, separators=(",", ":"))


def _annotated(ref: TemplateRef) -> list[Any]:
    """[class, count], then the aligned attributes if any of the three applies, then the
    tolerations if they or capacity requests do (``[]`` for none), then the capacity requests."""
    out: list[Any] = [ref.device_class, ref.count]
    if ref.align or ref.tolerations or ref.capacity:
        out.append(list(ref.align))
    if ref.tolerations or ref.capacity:
        out.append(ref.toleration_list())
    if ref.capacity:
        out.append(dict(ref.capacity))
    return out


def _annotated_rest(rest: list[Any]) -> tuple[Any, Any]:
    """The (tolerations, capacity requests) after the attributes of an entry: ``[tolerations]``,
    ``[tolerations, {capacity}]``, or the older ``[{capacity}]`` (a dict in the 4th place is
    capacity requests)."""
    if rest and isinstance(rest[0], dict):
        return [], rest[0]
    return (rest[0] if rest else []), (rest[1] if len(rest) > 1 else {})


def templates_of(pod: Obj) -> list[TemplateRef]:
    """The templates a rewritten pod needs, read back from its annotation (broken text: none)."""
    raw = as_dict(as_dict(pod.get("metadata")).get("annotations")).get(REWRITTEN_ANNOTATION)
    try:
        body = json.loads(raw) if isinstance(raw, str) else {}
    except ValueError:
        return []
    out: list[TemplateRef] = []
    for name, value in as_dict(body).items():
        if not isinstance(value, list) or len(value) not in (2, 3, 4, 5):
            continue
        cls, count, *rest = value
        attrs = rest[0] if rest else []
        tols, wanted = _annotated_rest(rest[1:])
        if (
            isinstance(cls, str)
            and isinstance(count, int)
            and not isinstance(count, bool)
            and isinstance(attrs, list)
            and all(isinstance(a, str) for a in attrs)
            and isinstance(tols, list)
            and all(isinstance(t, dict) for t in tols)
            and isinstance(wanted, dict)
            and all(isinstance(v, str) for v in wanted.values())
        ):
            ref = TemplateRef(cls, count, tuple(attrs), tolerations_key(tols), _capacity_key(wanted))
            if ref.name == name and ref.count > 0:
                out.append(ref)
    return sorted(out)


def template(ref: TemplateRef, namespace: str) -> Obj:
    """The ResourceClaimTemplate a rewritten pod's claims come from."""
    return {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "ResourceClaimTemplate",
        "metadata": {
            "name": ref.name,
            "namespace": namespace,
            "labels": {MANAGED_BY_LABEL: MANAGED_BY, TEMPLATE_CLASS_LABEL: _label_value(ref.device_class)},
        },
        "spec": {
            "spec": {
                "devices": {
                    "requests": [
                        {
                            "name": TEMPLATE_REQUEST,
                            "exactly": {
                                "deviceClassName": ref.device_class,
                                "allocationMode": "ExactCount",
                                "count": ref.count,
                                **({"tolerations": ref.toleration_list()} if ref.tolerations else {}),
                                **({"capacity": {"requests": dict(ref.capacity)}} if ref.capacity else {}),
                            },
                        }
                    ],
                    **(
                        {
                            "constraints": [
                                {"requests": [TEMPLATE_REQUEST], "matchAttribute": attr} for attr in ref.align
                            ]
                        }
                        if ref.align
                        else {}
                    ),
                }
            }
        },
    }


def template_ref(obj: Obj) -> TemplateRef | None:
    """The (class, count) of a template draxr wrote, or None for any other template."""
    meta = as_dict(obj.get("metadata"))
    if as_dict(meta.get("labels")).get(MANAGED_BY_LABEL) != MANAGED_BY:
        return None
    devices = as_dict(as_dict(as_dict(obj.get("spec")).get("spec")).get("devices"))
    requests = as_list(devices.get("requests"))
    if len(requests) != 1:
        return None
    exactly = as_dict(as_dict(requests[0]).get("exactly"))
    cls, count = exactly.get("deviceClassName"), exactly.get("count")
    if not isinstance(cls, str) or not isinstance(count, int) or isinstance(count, bool):
        return None
    attrs = tuple(str(as_dict(c).get("matchAttribute")) for c in as_list(devices.get("constraints")))
    ref = TemplateRef(
        cls,
        count,
        attrs,
        tolerations_key(as_list(exactly.get("tolerations"))),
        _capacity_key(as_dict(as_dict(exactly.get("capacity")).get("requests"))),
    )
    return ref if ref.name == meta.get("name") else None


def templates_used(pod: Obj) -> list[str]:
    """The draxr template names a pod's claims come from."""
    return sorted(
        {
            str(as_dict(pc).get("resourceClaimTemplateName"))
            for pc in as_list(spec(pod).get("resourceClaims"))
            if str(as_dict(pc).get("name", "")).startswith(POD_CLAIM_PREFIX)
            and str(as_dict(pc).get("resourceClaimTemplateName", "")).startswith(TEMPLATE_PREFIX)
        }
    )


def _label_value(text: str) -> str:
    """A label value (63 characters at most) naming the class."""
    if len(text) <= 63:
        return text
    return text[:52] + "-" + hashlib.sha256(text.encode()).hexdigest()[:10]
