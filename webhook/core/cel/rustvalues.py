"""Values as the Rust engine takes them: quantity and semver encodings, and a device's flat variables.

* **Quantity and semver** values cannot cross into Rust as objects; they travel as one-key maps
  (``{"\\x00q": "<num>/<den>"}``, ``{"\\x00v": "1.2.3-rc.1"}``) whose text is canonical, so
  native ``==`` compares by value (:func:`encode`, :func:`decode`).
* **Device values** are not converted wholesale (the binding converts about 1 us per value):
  each program reads flat variables (``device.driver``, one attribute, "has this key", ...; an
  :class:`Input` each, named by the translation) that are looked up per device (:func:`reader`),
  so a program's memo (:mod:`.celrust`) can key on exactly what it read.

Kept apart from the backend: the translation names inputs and emits encoded literals with these
very encodings, and the bridge to the reference's library functions decodes and encodes with them.
"""

from __future__ import annotations

from collections.abc import Callable, Hashable, Mapping
from dataclasses import dataclass
from fractions import Fraction
from functools import lru_cache
from typing import Any

from celpy import celtypes
from celpy.evaluation import Activation

from ..api.quantity import Quantity
from ..api.semver import Semver
from .errors import CelRuntimeError
from .evaluator import prepare_activation
from .values import ELEMENT_KIND, device_value, split_qualified, unusable_value

TAG_QUANTITY = "\x00q"
TAG_SEMVER = "\x00v"


# --- quantity and semver encodings ------------------------------------------------------------


def encode(value: Any) -> Any:
    """A reference value (celtypes, Quantity, Semver) as a value the Rust binding accepts."""
    if isinstance(value, bool | celtypes.BoolType):
        return bool(value)
    if isinstance(value, int):
        return int(value)
    if isinstance(value, float):
        return float(value)
    if isinstance(value, str):
        return str(value)
    if isinstance(value, bytes):
        return bytes(value)
    if isinstance(value, Quantity):
        return {TAG_QUANTITY: quantity_text(value.value)}
    if isinstance(value, Semver):
        return {TAG_SEMVER: semver_text(value)}
    if isinstance(value, list | tuple):
        return [encode(v) for v in value]
    if isinstance(value, dict):
        return {encode(k): encode(v) for k, v in value.items()}
    if value is None:
        return None
    raise TypeError(f"cannot pass {type(value).__name__} to the Rust engine")


def quantity_text(value: Fraction) -> str:
    return f"{value.numerator}/{value.denominator}"


def semver_text(v: Semver) -> str:
    text = f"{v.major}.{v.minor}.{v.patch}"
    return text + "-" + ".".join(str(p) for p in v.pre) if v.pre else text


@lru_cache(maxsize=4096)
def _decode_quantity(text: str) -> Quantity:
    n, _, d = text.partition("/")
    return Quantity(Fraction(int(n), int(d)))


@lru_cache(maxsize=4096)
def _decode_semver(text: str) -> Semver:
    return Semver.parse(text)


def decode(value: Any) -> Any:
    """A value from the Rust binding as the reference's library functions expect it."""
    if isinstance(value, bool):
        return celtypes.BoolType(value)
    if isinstance(value, int):
        return celtypes.IntType(value)
    if isinstance(value, float):
        return celtypes.DoubleType(value)
    if isinstance(value, str):
        return celtypes.StringType(value)
    if isinstance(value, bytes):
        return celtypes.BytesType(value)
    if isinstance(value, list):
        return celtypes.ListType([decode(v) for v in value])
    if isinstance(value, dict):
        if len(value) == 1:
            if TAG_QUANTITY in value:
                return _decode_quantity(value[TAG_QUANTITY])
            if TAG_SEMVER in value:
                return _decode_semver(value[TAG_SEMVER])
        m = celtypes.MapType()
        dict.update(m, {decode(k): decode(v) for k, v in value.items()})
        return m
    return value


# --- the device's flat variables --------------------------------------------------------------

MISSING: Any = type("_Missing", (), {"__repr__": lambda self: "<missing>"})()


@dataclass(frozen=True, slots=True)
class Input:
    """One value a program reads from the device.

    ``kind``: ``driver``, ``multi`` (allowMultipleAllocations), ``value`` (one attribute or
    capacity), ``has`` (whether it exists), ``domain`` (one domain's whole map), ``has_domain``.
    """

    kind: str
    which: str = ""  # "attributes" or "capacity"
    domain: str = ""
    key: str = ""


class RustDevice:
    """A validated device; its domain index and reference activation are built when needed."""

    __slots__ = ("_activation", "_index", "device", "driver")

    def __init__(self, device: Any) -> None:
        self.device = device
        self.driver: str = device.driver
        self._index: dict[str, dict[str, dict[str, Any]]] | None = None
        self._activation: Activation | None = None

    def activation(self) -> Activation:
        if self._activation is None:
            self._activation = prepare_activation(device_value(self.device))
        return self._activation

    def index(self) -> dict[str, dict[str, dict[str, Any]]]:
        """``{"attributes"|"capacity": {domain: {id: raw value}}}``, later names win as in
        :func:`.values.device_value`."""
        if self._index is None:
            index: dict[str, dict[str, dict[str, Any]]] = {"attributes": {}, "capacity": {}}
            for which, values in (("attributes", self.device.attributes), ("capacity", self.device.capacity)):
                for name, raw in values.items():
                    domain, ident = split_qualified(name, self.driver)
                    index[which].setdefault(domain, {})[ident] = raw
            self._index = index
        return self._index

    def raw(self, which: str, domain: str, key: str) -> Any:
        """The raw value of ``domain``/``key`` (attribute ``(kind, value)`` or Quantity), or MISSING."""
        values: Mapping[str, Any] = self.device.attributes if which == "attributes" else self.device.capacity
        qualified = values.get(f"{domain}/{key}", MISSING)
        if domain == self.driver and "/" not in key and key in values:
            return self.index()[which].get(domain, {}).get(key, MISSING)  # bare and maybe both
        return qualified


def validate(device: Any) -> RustDevice:
    """What :func:`.values.device_value` checks, with its messages, without building values;
    a device whose maker checked its values (``checked``: parsed slices, ``SimpleDevice``) is
    not checked again."""
    if not getattr(device, "checked", False):
        message = unusable_value(device)
        if message is not None:
            raise CelRuntimeError(message)
    return RustDevice(device)


def _encode_attribute(raw: Any) -> Any:
    kind, value = raw
    if kind == "version":
        return {TAG_SEMVER: semver_text(value)}
    if kind == "versions":
        return [{TAG_SEMVER: semver_text(v)} for v in value]
    if kind in ELEMENT_KIND:
        return list(value)
    return value


def _encode_raw(which: str, raw: Any) -> Any:
    if which == "attributes":
        return _encode_attribute(raw)
    return {TAG_QUANTITY: quantity_text(raw.value)}


def read_input(spec: Input, dev: RustDevice) -> tuple[Hashable, Any]:
    """(memo key part, Rust value or MISSING) of one input for one device."""
    kind = spec.kind
    if kind == "value":
        raw = dev.raw(spec.which, spec.domain, spec.key)
        return raw, (raw if raw is MISSING else _encode_raw(spec.which, raw))
    if kind == "driver":
        return dev.driver, dev.driver
    if kind == "has":
        found = dev.raw(spec.which, spec.domain, spec.key) is not MISSING
        return found, found
    if kind == "multi":
        flag = bool(dev.device.allow_multiple_allocations)
        return flag, flag
    if kind == "has_domain":
        found = spec.domain in dev.index()[spec.which]
        return found, found
    values = dev.index()[spec.which].get(spec.domain, {})
    key = tuple(sorted(values.items(), key=lambda kv: kv[0]))
    return key, {k: _encode_raw(spec.which, v) for k, v in values.items()}


Reader = Callable[[RustDevice], tuple[Hashable, Any]]
#: Attribute kinds whose value crosses into Rust as it is.
_AS_IS = frozenset({"string", "int", "bool"})


def reader(spec: Input) -> Reader:
    """:func:`read_input` for one input, specialised: the common inputs (an attribute's value,
    the driver) are read without dispatching on the input's kind for every device."""
    if spec.kind == "driver":
        return _read_driver
    if spec.kind == "value" and spec.which == "attributes":
        qualified, domain, key = f"{spec.domain}/{spec.key}", spec.domain, spec.key
        bare = "/" not in key

        def read_attribute(dev: RustDevice) -> tuple[Hashable, Any]:
            values = dev.device.attributes
            if bare and key in values and domain == dev.driver:
                raw = dev.raw("attributes", domain, key)  # bare and maybe both: RustDevice decides
            else:
                raw = values.get(qualified, MISSING)
            if raw is MISSING:
                return raw, raw
            return raw, (raw[1] if raw[0] in _AS_IS else _encode_attribute(raw))

        return read_attribute

    def read(dev: RustDevice) -> tuple[Hashable, Any]:
        return read_input(spec, dev)

    return read


def _read_driver(dev: RustDevice) -> tuple[Hashable, Any]:
    return dev.driver, dev.driver
