"""Devices as CEL sees them: the ``device`` variable of a DRA selector.

Upstream (``dynamic-resource-allocation/cel/compile.go``) builds
``{driver, allowMultipleAllocations, attributes, capacity}`` where ``attributes`` and ``capacity``
map a domain to a map from ID to value. Looking up an unknown *domain* yields an empty map (the
``mapper`` wrapper whose ``Find`` never fails), while ``in`` still reports only domains that exist;
a missing ID inside a domain is a "no such key" runtime error.

Values are converted once per device (the engine caches the result by fingerprint): ints, bools
and strings become ``celpy.celtypes`` values, versions stay :class:`~webhook.core.api.semver.Semver`
objects and capacities stay :class:`~webhook.core.api.quantity.Quantity` objects (celpy passes opaque
objects through, and the library functions know them).
"""

from __future__ import annotations

from collections.abc import Callable, Hashable, Mapping
from dataclasses import dataclass, field
from typing import Any, Final, Protocol

from celpy import celtypes

from ..api.constants import MAX_ATTRIBUTE_VALUES_PER_DEVICE
from ..api.quantity import Quantity
from ..api.semver import Semver, SemverError
from .errors import CelRuntimeError

INT64_MIN = -(2**63)
INT64_MAX = 2**63 - 1

#: Scalar attribute kinds and the KEP-5491 list kinds, as JSON field names of ``DeviceAttribute``.
SCALAR_KINDS = ("int", "bool", "string", "version")
LIST_KINDS = ("ints", "bools", "strings", "versions")
#: List kind -> its elements' scalar kind.
ELEMENT_KIND: Final = dict(zip(LIST_KINDS, SCALAR_KINDS, strict=True))


class CelDevice(Protocol):
    """What the engine reads from a device; names are fully qualified ("domain/id")."""

    @property
    def driver(self) -> str: ...

    @property
    def attributes(self) -> Mapping[str, tuple[str, Any]]: ...

    @property
    def capacity(self) -> Mapping[str, Quantity]: ...

    @property
    def allow_multiple_allocations(self) -> bool: ...

    @property
    def fingerprint(self) -> Hashable: ...


def _scalar(kind: str, raw: Any, where: str) -> Any:
    if kind == "int":
        if isinstance(raw, bool) or not isinstance(raw, int):
            raise ValueError(f"{where}: must be an integer, not {_json_type(raw)}")
        if not INT64_MIN <= raw <= INT64_MAX:
            raise ValueError(f"{where}: {raw} is out of the int64 range")
        return raw
    if kind == "bool":
        if not isinstance(raw, bool):
            raise ValueError(f"{where}: must be a boolean, not {_json_type(raw)}")
        return raw
    if kind == "string":
        if not isinstance(raw, str):
            raise ValueError(f"{where}: must be a string, not {_json_type(raw)}")
        return raw
    if not isinstance(raw, str):
        raise ValueError(f"{where}: must be a string, not {_json_type(raw)}")
    try:
        return Semver.parse(raw)
    except SemverError as e:
        raise ValueError(f"{where}: must be a semantic version: {e}") from None


def _json_type(value: Any) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, int | float):
        return "number"
    if isinstance(value, str):
        return "string"
    if isinstance(value, list):
        return "array"
    if isinstance(value, dict):
        return "object"
    return type(value).__name__


def parse_attribute(raw: dict[str, Any]) -> tuple[str, Any]:
    """One ResourceSlice ``DeviceAttribute`` (JSON) -> ``(kind, value)``.

    Exactly one value field must be set (a JSON ``null`` counts as unset, as for Go pointers);
    unknown fields are ignored as the API server's decoder drops them. Lists must be non-empty
    and hold at most ``MAX_ATTRIBUTE_VALUES_PER_DEVICE`` values.
    """
    if not isinstance(raw, dict):
        raise ValueError(f"attribute value must be an object, not {_json_type(raw)}")
    present = [k for k in (*SCALAR_KINDS, *LIST_KINDS) if raw.get(k) is not None]
    if len(present) != 1:
        fields = ", ".join(present) if present else "none"
        raise ValueError(f"exactly one value must be specified (found: {fields})")
    kind = present[0]
    value = raw[kind]
    if kind in SCALAR_KINDS:
        return kind, _scalar(kind, value, kind)
    if not isinstance(value, list):
        raise ValueError(f"{kind}: must be a list, not {_json_type(value)}")
    if not value:
        raise ValueError(f"{kind}: must not be empty")
    if len(value) > MAX_ATTRIBUTE_VALUES_PER_DEVICE:
        raise ValueError(
            f"{kind}: must have at most {MAX_ATTRIBUTE_VALUES_PER_DEVICE} values, not {len(value)}"
        )
    element = ELEMENT_KIND[kind]
    return kind, tuple(_scalar(element, v, f"{kind}[{i}]") for i, v in enumerate(value))


class DomainMap(celtypes.MapType):
    """``device.attributes`` / ``device.capacity``: an unknown domain reads as an empty map.

    Only ``__getitem__`` (used by ``m[k]`` and ``m.k``) defaults; ``in``, ``size`` and the
    macros see the real domains, as upstream's wrapper only overrides ``Find``.
    """

    def __getitem__(self, key: Any) -> Any:
        if isinstance(key, str) and not dict.__contains__(self, key):
            return celtypes.MapType()
        return super().__getitem__(key)


def _cel_scalar(kind: str, value: Any) -> Any:
    # Direct construction: celpy's constructors wrap a fresh range-checking closure per call.
    if kind == "int" and isinstance(value, int) and not isinstance(value, bool):
        if not INT64_MIN <= value <= INT64_MAX:
            raise ValueError("int64 overflow")
        return int.__new__(celtypes.IntType, value)
    if kind == "bool" and isinstance(value, bool):
        return celtypes.BoolType(value)
    if kind == "string" and isinstance(value, str):
        return str.__new__(celtypes.StringType, value)
    if kind == "version" and isinstance(value, Semver):
        return value
    raise TypeError(kind)


def _cel_attribute(kind: str, value: Any) -> Any:
    if kind in ELEMENT_KIND:
        return celtypes.ListType([_cel_scalar(ELEMENT_KIND[kind], v) for v in value])
    return _cel_scalar(kind, value)


def _cel_map(items: Mapping[Any, Any]) -> celtypes.MapType:
    m = celtypes.MapType()
    dict.update(m, items)
    return m


class Fingerprint:
    """A device content key that hashes once: cache lookups then cost one dict probe instead of
    re-hashing nested tuples (and dataclass versions) on every ``matches`` call."""

    __slots__ = ("_hash", "content")

    def __init__(self, content: Hashable) -> None:
        self.content = content
        self._hash = hash(content)

    def __hash__(self) -> int:
        return self._hash

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Fingerprint) and self._hash == other._hash and self.content == other.content

    def __repr__(self) -> str:
        return f"Fingerprint({self.content!r})"


@dataclass(frozen=True, slots=True)
class SimpleDevice:
    """A stand-alone :class:`CelDevice` (tools, tests, benchmarks); the allocator has its own."""

    driver: str
    attributes: Mapping[str, tuple[str, Any]] = field(default_factory=dict)
    capacity: Mapping[str, Quantity] = field(default_factory=dict)
    allow_multiple_allocations: bool = False
    _fingerprint: Fingerprint = field(init=False, repr=False, compare=False)
    #: Its values are usable (:func:`unusable_value` found nothing): engines need not check again.
    checked: bool = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        content = (
            self.driver,
            tuple(sorted(self.attributes.items(), key=lambda kv: kv[0])),
            tuple(sorted(self.capacity.items(), key=lambda kv: kv[0])),
            self.allow_multiple_allocations,
        )
        object.__setattr__(self, "_fingerprint", Fingerprint(content))
        object.__setattr__(self, "checked", unusable_value(self) is None)

    @property
    def fingerprint(self) -> Hashable:
        return self._fingerprint

    @classmethod
    def from_json(cls, driver: str, raw: Mapping[str, Any]) -> SimpleDevice:
        """From a ResourceSlice ``spec.devices[]`` entry; raises ValueError for bad content."""
        raw_attributes, raw_capacity = raw.get("attributes") or {}, raw.get("capacity") or {}
        if not isinstance(raw_attributes, dict) or not isinstance(raw_capacity, dict):
            raise ValueError("attributes and capacity must be objects")
        attributes: dict[str, tuple[str, Any]] = {}
        for k, v in raw_attributes.items():
            try:
                attributes[_qualify(driver, str(k))] = parse_attribute(v)
            except ValueError as e:
                raise ValueError(f"attribute {k}: {e}") from None
        capacity: dict[str, Quantity] = {}
        for k, v in raw_capacity.items():
            value = v.get("value") if isinstance(v, dict) else None
            try:
                if not isinstance(value, str):
                    raise ValueError("value must be a quantity string")
                capacity[_qualify(driver, str(k))] = Quantity.parse(value)
            except ValueError as e:
                raise ValueError(f"capacity {k}: {e}") from None
        return cls(driver, attributes, capacity, raw.get("allowMultipleAllocations") is True)


def _qualify(driver: str, name: str) -> str:
    return name if "/" in name else f"{driver}/{name}"


def split_qualified(name: str, driver: str) -> tuple[str, str]:
    """Split at the first ``/``; a bare ID belongs to the driver's domain (``parseQualifiedName``)."""
    domain, sep, ident = name.partition("/")
    return (domain, ident) if sep else (driver, name)


def unusable_value(device: CelDevice) -> str | None:
    """The CelRuntimeError message :func:`device_value` would raise for ``device``, or None; the
    same checks, without building values (the compiled engine's devices, and ``checked``)."""
    for name, kv in device.attributes.items():
        try:
            kind, value = kv
            # The usual kinds inline (this runs once per device of a cold start); the rest below.
            if kind == "string" and type(value) is str:
                continue
            if kind == "int" and type(value) is int and INT64_MIN <= value <= INT64_MAX:
                continue
            _check_attribute(kind, value)
        except (TypeError, ValueError):
            return f"attribute {name}: unsupported attribute value"
    capacity: Mapping[str, object] = device.capacity  # typed, but the caller's objects may lie
    for name, quantity in capacity.items():
        if not isinstance(quantity, Quantity):
            return f"capacity {name}: not a quantity"
    return None


_SCALAR_OK: dict[str, Callable[[Any], bool]] = {
    "int": lambda v: isinstance(v, int) and not isinstance(v, bool) and INT64_MIN <= v <= INT64_MAX,
    "bool": lambda v: isinstance(v, bool),
    "string": lambda v: isinstance(v, str),
    "version": lambda v: isinstance(v, Semver),
}


def _check_attribute(kind: Any, value: Any) -> None:
    element = ELEMENT_KIND.get(kind)
    if element is not None:
        if not all(_SCALAR_OK[element](v) for v in value):
            raise TypeError(kind)
        return
    check = _SCALAR_OK.get(kind)
    if check is None or not check(value):
        raise TypeError(kind)


def device_value(device: CelDevice) -> celtypes.MapType:
    """The ``device`` variable for one device. Raises CelRuntimeError for an unusable attribute."""
    driver = device.driver
    attributes: dict[str, dict[Any, Any]] = {}
    for name, kv in device.attributes.items():
        domain, ident = split_qualified(name, driver)
        try:
            kind, value = kv
            converted = _cel_attribute(kind, value)
        except (TypeError, ValueError):
            raise CelRuntimeError(f"attribute {name}: unsupported attribute value") from None
        attributes.setdefault(domain, {})[_cel_string(ident)] = converted
    capacity: dict[str, dict[Any, Any]] = {}
    for name, quantity in device.capacity.items():
        domain, ident = split_qualified(name, driver)
        if not isinstance(quantity, Quantity):
            raise CelRuntimeError(f"capacity {name}: not a quantity")
        capacity.setdefault(domain, {})[_cel_string(ident)] = quantity
    outer_attributes = DomainMap()
    dict.update(outer_attributes, {_cel_string(k): _cel_map(v) for k, v in attributes.items()})
    outer_capacity = DomainMap()
    dict.update(outer_capacity, {_cel_string(k): _cel_map(v) for k, v in capacity.items()})
    return _cel_map(
        {
            _cel_string("driver"): _cel_string(driver),
            _cel_string("allowMultipleAllocations"): celtypes.BoolType(
                bool(device.allow_multiple_allocations)
            ),
            _cel_string("attributes"): outer_attributes,
            _cel_string("capacity"): outer_capacity,
        }
    )


def _cel_string(text: str) -> celtypes.StringType:
    return str.__new__(celtypes.StringType, text)
