"""KEP-5004 validation rules, on plain JSON dicts.

Upstream rules (spec §1 and §2) keep upstream's paths, messages and order of checks:

* ``validate_extended_resource_name``: ``DeviceClass.spec.extendedResourceName`` syntax;
* ``validate_extended_resource_claim_status``: ``validatePodExtendedResourceClaimStatus``.

draxr's own rules go beyond upstream where the upstream behaviour is silent or exploitable:

* ``validate_device_class``: an explicit name declared by only one class (upstream resolves clashes
  at runtime, silently, by creation time), draxr's ``draxr.io/align-by`` annotation (fully
  qualified attribute names, ``topology.align_by_problems``), its
  ``draxr.io/extended-resource-tolerations`` (``tolerations.validate_class_tolerations``) and
  ``draxr.io/capacity-requests`` (KEP-6406's ``CapacityRequirements`` as JSON,
  ``capacityrequests.annotation_problems``);
* ``validate_mapped_requests``: a mapped request the kubelet would ignore;
* ``validate_dra_quantities``: upstream's ``ValidateResourceQuantityValue`` for every DRA-backed name
  (implicit ones too, which upstream treats as native), with ``AsInt64`` as the integer test, so
  that no value the scheduler would silently ignore (``0.5``, ``1e400``, ``9223372036854775808``)
  is admitted;
* ``validate_special_claim``: a hand-made "extended resource claim" that dodges quota
  (kubernetes/kubernetes#135404).

Every function accepts arbitrary JSON-like input and only ever returns ``FieldError`` lists.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any, Final

from . import names
from .alignment import ALIGN_BY_ANNOTATION, align_by_problems
from .capacityrequests import CAPACITY_REQUESTS_ANNOTATION, annotation_problems
from .constants import (
    DEVICE_CLASS_PREFIX,
    EXTENDED_RESOURCE_CLAIM_ANNOTATION,
    EXTENDED_RESOURCE_NAME_ANNOTATION,
    EXTENDED_RESOURCE_TOLERATIONS_ANNOTATION,
)
from .fielderrors import (
    OMITTED,
    FieldError,
    GoStringer,
    Path,
    PathLike,
    duplicate,
    forbidden,
    go_quote,
    invalid,
    not_supported,
    required,
    type_invalid,
)
from .messages import clip
from .objects import Obj, as_dict, as_list, as_str, meta
from .quantity import INT64_MAX, QuantityError, parse_quantity
from .tolerations import validate_class_tolerations

EXTENDED_RESOURCE_NAME_PATH: Final = Path("spec", "extendedResourceName")
ANNOTATED_NAME_PATH: Final = Path("metadata", "annotations").key(EXTENDED_RESOURCE_NAME_ANNOTATION)
ALIGN_BY_PATH: Final = Path("metadata", "annotations").key(ALIGN_BY_ANNOTATION)
CAPACITY_REQUESTS_PATH: Final = Path("metadata", "annotations").key(CAPACITY_REQUESTS_ANNOTATION)
_ERCS_PATH: Final = Path("status", "extendedResourceClaimStatus")

MSG_EXTENDED_RESOURCE_NAME: Final = "must be a valid extended resource name"
MSG_NAME_DISAGREES: Final = "must equal spec.extendedResourceName when both are set"
MSG_AT_LEAST_ONE_MAPPING: Final = "at least one request mapping is required"
MSG_CONTAINER_NAME: Final = (
    "must match the name of an entry in spec.initContainers.name or spec.containers.name"
)
MSG_RESOURCE_NAME: Final = (
    "must match the extended resource name of an entry in spec.initContainers.resources.requests "
    "or spec.containers.resources.requests"
)
#: ``isNotIntegerErrorMsg`` (``pkg/apis/core/validation/validation.go``).
MSG_NOT_INTEGER: Final = "must be an integer"
#: ``IsNegativeErrorMsg`` (``apimachinery/pkg/api/validation``), as ``ValidateNonnegativeQuantity`` says it.
MSG_NEGATIVE: Final = "must be greater than or equal to 0"
#: Why an integer beyond int64 is not one (upstream's ``MilliValue()`` wraps around and lets it through).
MSG_INT64_RANGE: Final = f"the largest device count is {INT64_MAX} (int64)"
MSG_MAPPED_REQUEST: Final = (
    "must be a positive integer: the kubelet only hands devices to a container whose request for a "
    "mapped extended resource is a non-zero integer"
)

_REQUEST_SECTIONS: Final = ("requests", "limits")
_CONTAINER_LISTS: Final = ("initContainers", "containers")


# --- DeviceClass ---------------------------------------------------------------------------------


def validate_extended_resource_name(
    value: Any, path: PathLike = EXTENDED_RESOURCE_NAME_PATH
) -> list[FieldError]:
    """The ``k8s-extended-resource-name`` format, worded byte for byte as the apiserver words it
    (``validateDeviceClassSpec``: one ``Invalid`` error, "must be a valid extended resource
    name"). ``extended_resource_name_reasons`` says precisely why, for a warning."""
    if not isinstance(value, str):
        return [type_invalid(path, value, f"{MSG_EXTENDED_RESOURCE_NAME}: must be a string")]
    if names.is_extended_resource_name(value):
        return []
    return [invalid(path, value, MSG_EXTENDED_RESOURCE_NAME)]


def extended_resource_name_reasons(value: Any) -> list[str]:
    """Why a name is not a valid extended resource name, in the words of the declarative
    validator (``strfmt.go`` ``ExtendedResourceName``); empty for a valid name."""
    if not isinstance(value, str) or names.is_extended_resource_name(value):
        return []
    return names.extended_resource_name_errors(value)


def declared_name(device_class: Any) -> str | None:
    """The explicit ``spec.extendedResourceName`` when it is a string (``""`` counts as set), else
    draxr's annotation ``draxr.io/extended-resource-name`` (where the apiserver drops the field)."""
    value = as_dict(as_dict(device_class).get("spec")).get("extendedResourceName")
    if isinstance(value, str):
        return value
    noted = as_dict(meta(device_class).get("annotations")).get(EXTENDED_RESOURCE_NAME_ANNOTATION)
    return noted if isinstance(noted, str) else None


def _declared_path(device_class: Any) -> Path:
    """Where a class declares its name: the field when set, else the annotation."""
    if isinstance(as_dict(as_dict(device_class).get("spec")).get("extendedResourceName"), str):
        return EXTENDED_RESOURCE_NAME_PATH
    return ANNOTATED_NAME_PATH


def _classes_declaring(wanted: str, others: Iterable[Any], besides: str) -> list[str]:
    """Sorted names of live classes (not ``besides``) whose explicit name is ``wanted``."""
    found = {
        as_str(meta(o).get("name"))
        for o in others
        if isinstance(o, dict) and not meta(o).get("deletionTimestamp") and declared_name(o) == wanted
    }
    found.discard(besides)
    return sorted(found)


def validate_device_class(
    new: Any, old: Any = None, others: Iterable[Any] = ()
) -> tuple[list[FieldError], list[str]]:
    """Syntax and uniqueness of ``spec.extendedResourceName``, plus a warning for unusable implicit names.

    ``others`` are the DeviceClasses already stored (the new object itself may be among them).
    Classes being deleted do not count. An UPDATE that keeps the old name is allowed even when
    duplicates exist, so a clash made before draxr was installed never blocks unrelated edits.
    """
    errors: list[FieldError] = []
    warnings: list[str] = []
    class_name = as_str(meta(new).get("name"))
    spec_value = as_dict(as_dict(new).get("spec")).get("extendedResourceName")
    noted = as_dict(meta(new).get("annotations")).get(EXTENDED_RESOURCE_NAME_ANNOTATION)
    for path, value in ((EXTENDED_RESOURCE_NAME_PATH, spec_value), (ANNOTATED_NAME_PATH, noted)):
        if value is None:
            continue
        errors.extend(validate_extended_resource_name(value, path))
        reasons = extended_resource_name_reasons(value)
        if reasons:
            warnings.append(clip(f"{path}: {'; '.join(reasons)}"))
    if isinstance(spec_value, str) and isinstance(noted, str) and spec_value != noted and not errors:
        errors.append(invalid(ANNOTATED_NAME_PATH, noted, MSG_NAME_DISAGREES))
    wanted = declared_name(new)
    if wanted is not None and not errors and wanted != declared_name(old):
        clashes = _classes_declaring(wanted, others, besides=class_name)
        if clashes:
            quoted = ", ".join(go_quote(c) for c in clashes)
            noun = "DeviceClass" if len(clashes) == 1 else "DeviceClasses"
            errors.append(duplicate(_declared_path(new), wanted, f"already declared by {noun} {quoted}"))
    problems = names.implicit_name_problems(class_name) if class_name else []
    if problems:
        warnings.append(clip(f"implicit name {DEVICE_CLASS_PREFIX}<name> unusable in pods: {problems[0]}"))
    # draxr's own annotations: one stored before draxr checked it does not block an unrelated
    # edit; the engine ignores it, and the warning says so.
    checked: list[tuple[list[FieldError], str, Callable[[FieldError], str]]] = [
        (validate_align_by(new), ALIGN_BY_ANNOTATION, lambda e: f"{ALIGN_BY_PATH}: {e.detail}"),
        (
            validate_capacity_requests(new),
            CAPACITY_REQUESTS_ANNOTATION,
            lambda e: f"{CAPACITY_REQUESTS_PATH}: {e.detail}",
        ),
        (
            validate_class_tolerations(new),
            EXTENDED_RESOURCE_TOLERATIONS_ANNOTATION,
            lambda e: f"{e.field}: {e.error_body()}",
        ),
    ]
    for found, key, said in checked:
        if found and _annotation_of(old, key) == _annotation_of(new, key):
            warnings.extend(clip(f"draxr ignores {said(e)}") for e in found)
        else:
            errors.extend(found)
    return errors, warnings


def _annotation_of(device_class: Any, key: str) -> Any:
    annotations = meta(device_class).get("annotations") if isinstance(device_class, dict) else None
    return annotations.get(key, OMITTED) if isinstance(annotations, dict) else OMITTED


def _align_by_of(device_class: Any) -> Any:
    return _annotation_of(device_class, ALIGN_BY_ANNOTATION)


def validate_capacity_requests(device_class: Any) -> list[FieldError]:
    """``metadata.annotations[draxr.io/capacity-requests]``: JSON of KEP-6406's
    ``CapacityRequirements`` (``{"requests": {"memory": "10Gi"}}``), capacity names as upstream's
    ``validateQualifiedName`` and non-negative quantities. One ``Invalid`` error per problem."""
    value = _annotation_of(device_class, CAPACITY_REQUESTS_ANNOTATION)
    if value is OMITTED:
        return []
    return [invalid(CAPACITY_REQUESTS_PATH, value, p) for p in annotation_problems(value)]


def validate_align_by(device_class: Any) -> list[FieldError]:
    """``metadata.annotations[draxr.io/align-by]``: comma-separated fully qualified device attribute
    names (``resource.kubernetes.io/pcieRoot``), each once. One ``Invalid`` error per problem."""
    value = _align_by_of(device_class)
    if value is OMITTED:
        return []
    return [invalid(ALIGN_BY_PATH, value, p) for p in align_by_problems(value)]


# --- Pod status ----------------------------------------------------------------------------------


def _container_requests(container: Obj) -> dict[str, Any]:
    """``resources.requests`` after API defaulting (limits fill missing requests).

    Objects read from the API server are already defaulted; manifests read offline are not,
    and must validate the same way.
    """
    res = as_dict(container.get("resources"))
    merged = dict(as_dict(res.get("limits")))
    merged.update(as_dict(res.get("requests")))
    return merged


def _containers_by_name(pod: Any) -> dict[str, tuple[str, int, Obj]]:
    """Name -> (list field, index, container) over initContainers then containers (later wins)."""
    spec = as_dict(as_dict(pod).get("spec"))
    out: dict[str, tuple[str, int, Obj]] = {}
    for section in _CONTAINER_LISTS:
        for i, c in enumerate(as_list(spec.get(section))):
            if isinstance(c, dict) and isinstance(c.get("name"), str):
                out[c["name"]] = (section, i, c)
    return out


def _mapping_field(mapping: Obj, key: str, path: Path, errors: list[FieldError]) -> str | None:
    """A string field of a mapping: missing or null reads as ``""`` (Go's zero value)."""
    value = mapping.get(key)
    if value is None:
        return ""
    if isinstance(value, str):
        return value
    errors.append(type_invalid(path.child(key), value, "must be a string"))
    return None


def validate_extended_resource_claim_status(pod: Any) -> list[FieldError]:
    """``validatePodExtendedResourceClaimStatus``, checked against the pod's own spec.

    Order of errors (upstream's order of checks): the empty-mappings error; then per mapping
    the container (or, when the container exists, the resource name), the request name (at the
    un-indexed path ``status.extendedResourceClaimStatus.requestName``, an upstream quirk), the
    three ``Duplicate`` errors of a repeated triple; finally ``resourceClaimName``.
    """
    status = as_dict(as_dict(pod).get("status"))
    ercs = status.get("extendedResourceClaimStatus")
    if ercs is None:
        return []
    if not isinstance(ercs, dict):
        return [type_invalid(_ERCS_PATH, ercs, "must be an object")]
    errors: list[FieldError] = []
    containers = _containers_by_name(pod)
    mappings_path = _ERCS_PATH.child("requestMappings")
    mappings = ercs.get("requestMappings")
    if mappings is not None and not isinstance(mappings, list):
        errors.append(type_invalid(mappings_path, mappings, "must be a list"))
        mappings = []
    if not mappings:
        errors.append(required(mappings_path, MSG_AT_LEAST_ONE_MAPPING))
    seen: set[tuple[str, str, str]] = set()
    for i, mapping in enumerate(as_list(mappings)):
        path = mappings_path.index(i)
        if not isinstance(mapping, dict):
            errors.append(type_invalid(path, mapping, "must be an object"))
            continue
        container = _mapping_field(mapping, "containerName", path, errors)
        resource = _mapping_field(mapping, "resourceName", path, errors)
        request = _mapping_field(mapping, "requestName", path, errors)
        if container is not None:
            found = containers.get(container)
            if found is None:
                errors.append(invalid(path.child("containerName"), container, MSG_CONTAINER_NAME))
            elif resource is not None and resource not in _container_requests(found[2]):
                errors.append(invalid(path.child("resourceName"), resource, MSG_RESOURCE_NAME))
        if request is not None:
            errors.extend(
                invalid(_ERCS_PATH.child("requestName"), request, d) for d in names.is_dns1123_label(request)
            )
        if container is None or resource is None or request is None:
            continue
        triple = (container, resource, request)
        if triple in seen:
            errors.append(duplicate(path.child("containerName"), container))
            errors.append(duplicate(path.child("resourceName"), resource))
            errors.append(duplicate(path.child("requestName"), request))
        seen.add(triple)
    errors.extend(_validate_claim_name(ercs.get("resourceClaimName")))
    return errors


def _validate_claim_name(value: Any) -> list[FieldError]:
    path = _ERCS_PATH.child("resourceClaimName")
    if value is None or value == "":
        return [required(path, "")]
    if not isinstance(value, str):
        return [type_invalid(path, value, "must be a string")]
    return [invalid(path, value, d) for d in names.is_dns1123_subdomain(value)]


def _quantity_problem(value: Any, *, positive: bool) -> str | None:
    """Why ``value`` is not an acceptable device count (an ``AsInt64`` integer), or None when it is."""
    try:
        q = parse_quantity(value)
    except QuantityError as e:
        return str(e)
    if q.as_int64() is None:
        return "integer"
    if q.value < 0 or (positive and q.value == 0):
        return "sign"
    return None


def validate_quantity_value(value: Any, path: PathLike) -> list[FieldError]:
    """``ValidateResourceQuantityValue`` for an integer resource (``IsIntegerResourceName``).

    Upstream checks ``MilliValue() % 1000``, which rounds up and wraps around: ``1.9995``, ``1e400``
    and ``9223372036854775808`` pass it, and the scheduler's ``AsInt64`` then ignores them. Here
    the integer test is ``AsInt64`` itself, with upstream's message. Errors print the quantity as
    upstream does: ``value.String()`` for a negative one (quoted), the quantity itself (unquoted)
    for one that is not an integer. A value that is no quantity at all gets the parser's message
    (upstream's decoder would refuse the whole object with it).
    """
    try:
        q = parse_quantity(value)
    except QuantityError as e:
        return [invalid(path, value, str(e))]
    errors: list[FieldError] = []
    if q.sign() < 0:
        errors.append(invalid(path, q.canonical(), MSG_NEGATIVE))
    if q.as_int64() is None:
        detail = MSG_NOT_INTEGER
        if q.is_integer():
            detail += f": {MSG_INT64_RANGE}"
        errors.append(invalid(path, GoStringer(q.canonical()), detail))
    return errors


def validate_mapped_requests(pod: Any) -> list[FieldError]:
    """Each mapped (container, resource) must have a positive integer request (the kubelet contract).

    The kubelet passes a mapping's devices to a container only for a non-zero request it can
    read as an integer; anything else would leave the allocated devices unused. Mappings whose
    container or resource does not exist are left to ``validate_extended_resource_claim_status``.
    """
    ercs = as_dict(as_dict(as_dict(pod).get("status")).get("extendedResourceClaimStatus"))
    containers = _containers_by_name(pod)
    errors: list[FieldError] = []
    done: set[tuple[str, str]] = set()
    for mapping in as_list(ercs.get("requestMappings")):
        container, resource = as_dict(mapping).get("containerName"), as_dict(mapping).get("resourceName")
        if not isinstance(container, str) or not isinstance(resource, str) or (container, resource) in done:
            continue
        done.add((container, resource))
        found = containers.get(container)
        if found is None:
            continue
        section, index, c = found
        res = as_dict(c.get("resources"))
        where = "requests" if resource in as_dict(res.get("requests")) else "limits"
        if resource not in as_dict(res.get(where)):
            continue
        value = as_dict(res.get(where))[resource]
        if _quantity_problem(value, positive=True) is not None:
            path = Path("spec", section).index(index).child("resources", where).key(resource)
            errors.append(invalid(path, value, MSG_MAPPED_REQUEST))
    return errors


def validate_dra_quantities(pod: Any, is_dra_backed: Callable[[str], bool]) -> list[FieldError]:
    """Every request and limit of a DRA-backed name must be an int64 integer, not negative.

    Upstream validates explicit names with ``ValidateResourceQuantityValue``, treats implicit names
    as native resources (no integer rule), and the scheduler silently skips values ``AsInt64``
    cannot read; draxr denies all of them, at the exact path, with upstream's messages.
    """
    spec = as_dict(as_dict(pod).get("spec"))
    errors: list[FieldError] = []
    backed: dict[str, bool] = {}  # thousands of containers name the same few resources
    for section in _CONTAINER_LISTS:
        for i, c in enumerate(as_list(spec.get(section))):
            res = as_dict(as_dict(c).get("resources"))
            for where in _REQUEST_SECTIONS:
                for name, value in as_dict(res.get(where)).items():  # JSON keys: always strings
                    dra = backed.get(name)
                    if dra is None:
                        dra = backed[name] = is_dra_backed(name)
                    if not dra:
                        continue
                    path = Path("spec", section).index(i).child("resources", where).key(name)
                    errors.extend(validate_quantity_value(value, path))
    return errors


# --- the special ResourceClaim -------------------------------------------------------------------


def carries_special_annotation(claim: Any) -> bool:
    """A ResourceClaim carrying the extended-resource-claim annotation, whatever its value (a
    forged value is still checked; ``specialclaims.is_special_claim`` is the scheduler's reading)."""
    annotations = meta(claim).get("annotations")
    return isinstance(annotations, dict) and EXTENDED_RESOURCE_CLAIM_ANNOTATION in annotations


_ANNOTATION_PATH: Final = Path("metadata", "annotations").key(EXTENDED_RESOURCE_CLAIM_ANNOTATION)
_OWNERS_PATH: Final = Path("metadata", "ownerReferences")
_REQUESTS_PATH: Final = Path("spec", "devices", "requests")
_MSG_NOT_IN_SPECIAL: Final = "is not allowed in an extended resource claim"


def validate_special_claim(claim: Any) -> list[FieldError]:
    """Narrow the quota loophole of kubernetes/kubernetes#135404 for extended resource claims.

    Quota does not count a claim that carries the annotation and names a Pod as controller: it
    charges the Pod's extended resource requests instead. So such a claim must look exactly like
    the one the scheduler writes: the Pod as its only controller, plain ``ExactCount`` requests,
    no admin access. Claims without the annotation pass. That at most one such claim exists per
    Pod needs the cluster's state and is left to the caller.
    """
    if not carries_special_annotation(claim):
        return []
    errors: list[FieldError] = []
    value = meta(claim)["annotations"][EXTENDED_RESOURCE_CLAIM_ANNOTATION]
    if value != "true":
        errors.append(invalid(_ANNOTATION_PATH, value, 'the only valid value is "true"'))
    errors.extend(_validate_special_owner(claim))
    errors.extend(_validate_special_requests(claim))
    return errors


def _validate_special_owner(claim: Any) -> list[FieldError]:
    refs = as_list(meta(claim).get("ownerReferences"))
    controllers = [(i, r) for i, r in enumerate(refs) if isinstance(r, dict) and r.get("controller") is True]
    if not controllers:
        return [required(_OWNERS_PATH, "an extended resource claim must have its Pod as controller owner")]
    if len(controllers) > 1:
        return [
            invalid(
                _OWNERS_PATH,
                OMITTED,
                f"must have exactly one controller owner (its Pod), found {len(controllers)}",
            )
        ]
    errors: list[FieldError] = []
    i, ref = controllers[0]
    if ref.get("kind") != "Pod":
        errors.append(invalid(_OWNERS_PATH.index(i).child("kind"), ref.get("kind"), 'must be "Pod"'))
    if ref.get("apiVersion") != "v1":
        errors.append(
            invalid(_OWNERS_PATH.index(i).child("apiVersion"), ref.get("apiVersion"), 'must be "v1"')
        )
    return errors


def _validate_special_requests(claim: Any) -> list[FieldError]:
    errors: list[FieldError] = []
    requests = as_dict(as_dict(as_dict(claim).get("spec")).get("devices")).get("requests")
    for i, request in enumerate(as_list(requests)):
        path = _REQUESTS_PATH.index(i)
        if not isinstance(request, dict):
            errors.append(type_invalid(path, request, "must be an object"))
            continue
        if request.get("firstAvailable") is not None:
            errors.append(forbidden(path.child("firstAvailable"), f"{_MSG_NOT_IN_SPECIAL}; use exactly"))
        # Every version reaches here in the v1 shape (core/versions converts at the boundary).
        exact, epath = request.get("exactly"), path.child("exactly")
        if exact is None:
            if request.get("firstAvailable") is None:
                errors.append(required(epath, "an extended resource claim request must use exactly"))
            continue
        if not isinstance(exact, dict):
            errors.append(type_invalid(epath, exact, "must be an object"))
            continue
        mode = exact.get("allocationMode")
        if mode not in (None, "ExactCount"):
            errors.append(not_supported(epath.child("allocationMode"), mode, ["ExactCount"]))
        count = exact.get("count")
        if count is not None and (isinstance(count, bool) or not isinstance(count, int) or count <= 0):
            errors.append(invalid(epath.child("count"), count, "must be greater than zero"))
        if exact.get("adminAccess") is True:
            errors.append(forbidden(epath.child("adminAccess"), f"admin access {_MSG_NOT_IN_SPECIAL}"))
    return errors
