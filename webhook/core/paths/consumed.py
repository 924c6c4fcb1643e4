"""Which DeviceClasses a pod consumes devices of, and which of them draxr manages.

One allocator per device pool: where draxr's worker takes pods, every pod that consumes devices of a
class draxr manages goes to it, whoever else could place it. A pod consumes a class through a
DRA-backed extended resource (the class backing the name) or through ``spec.resourceClaims``: the
classes its ResourceClaim (``resourceClaimName``) or ResourceClaimTemplate
(``resourceClaimTemplateName``) names in any request (``exactly.deviceClassName``, each of
``firstAvailable[].deviceClassName``).

"Managed" is ``draxr serve --managed-classes``, a label selector on DeviceClasses; empty (the
default) manages every class: every class has an implicit extended resource name,
``deviceclass.resource.kubernetes.io/<class>``, so draxr can be asked for any class's devices.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Final, Literal

from ..api.labels import EVERYTHING, LabelSelector
from ..api.objects import Obj, as_dict, as_list, meta, spec

SourceKind = Literal["ResourceClaim", "ResourceClaimTemplate"]
CLAIM: Final = "ResourceClaim"
TEMPLATE: Final = "ResourceClaimTemplate"


@dataclass(frozen=True, slots=True)
class ClaimSource:
    """One entry of ``spec.resourceClaims``: the claim, or the template its claim is made from."""

    kind: SourceKind
    name: str

    def __str__(self) -> str:
        return f"{self.kind} {self.name}"


def claim_sources(pod: Obj) -> list[ClaimSource]:
    """The claims and templates a pod's ``spec.resourceClaims`` names, in order."""
    out: list[ClaimSource] = []
    for entry in as_list(spec(pod).get("resourceClaims")):
        e = as_dict(entry)
        claim, template = e.get("resourceClaimName"), e.get("resourceClaimTemplateName")
        if isinstance(claim, str) and claim:
            out.append(ClaimSource(CLAIM, claim))
        elif isinstance(template, str) and template:
            out.append(ClaimSource(TEMPLATE, template))
    return out


def request_classes(devices: Obj) -> list[str]:
    """Every class a claim spec's ``devices.requests`` names, in order, each once."""
    out: dict[str, None] = {}
    for raw in as_list(devices.get("requests")):
        r = as_dict(raw)
        for sub in [as_dict(r.get("exactly")), *map(as_dict, as_list(r.get("firstAvailable")))]:
            cls = sub.get("deviceClassName")
            if isinstance(cls, str) and cls:
                out[cls] = None
    return list(out)


def source_classes(kind: SourceKind, obj: Obj) -> list[str]:
    """The classes a ResourceClaim, or the claims made from a ResourceClaimTemplate, use."""
    claim_spec = spec(obj) if kind == CLAIM else as_dict(spec(obj).get("spec"))
    return request_classes(as_dict(claim_spec.get("devices")))


@dataclass(slots=True)
class ClaimClasses:
    """What a pod's ``spec.resourceClaims`` consume, as far as it could be read."""

    classes: list[str] = field(default_factory=list)  # the classes named, in order, each once
    missing: list[ClaimSource] = field(default_factory=list)  # not there (yet): the pod waits
    unreadable: list[tuple[ClaimSource, str]] = field(default_factory=list)  # and why

    @property
    def unknown(self) -> bool:
        """Some claim's classes are not known: it is routed as if draxr managed them."""
        return bool(self.missing or self.unreadable)


def gather(found: Iterable[tuple[ClaimSource, Obj | None]]) -> ClaimClasses:
    """``ClaimClasses`` from each source and its object (None: it does not exist)."""
    out = ClaimClasses()
    seen: dict[str, None] = {}
    for source, obj in found:
        if obj is None:
            out.missing.append(source)
            continue
        for cls in source_classes(source.kind, obj):
            seen[cls] = None
    out.classes = list(seen)
    return out


@dataclass(frozen=True, slots=True)
class ManagedClasses:
    """``--managed-classes``: the DeviceClasses whose devices draxr's worker allocates."""

    selector: LabelSelector = EVERYTHING

    def manages(self, class_name: str, get_class: Callable[[str], Obj | None]) -> bool:
        """A class the cluster does not have (yet) is judged by its labels being none."""
        if self.selector.empty:
            return True
        labels = as_dict(meta(get_class(class_name) or {}).get("labels"))
        return self.selector.matches({str(k): str(v) for k, v in labels.items()})

    def of(self, classes: Iterable[str], get_class: Callable[[str], Obj | None]) -> list[str]:
        """The managed ones of ``classes``, in order."""
        return [c for c in classes if self.manages(c, get_class)]


EVERY_CLASS: Final = ManagedClasses()
