"""Consumable capacity (KEP-5075): what one share of a device consumes, and whether it still fits.

A device with ``allowMultipleAllocations: true`` can be allocated to several claims, each allocation a
*share* with its own ``shareID`` and ``consumedCapacity``. What a request consumes of each of the
device's capacities (upstream's ``calculateConsumedCapacity``): the amount it names in
``capacity.requests``, rounded up by the capacity's ``requestPolicy`` (``validValues``: the first
value not below it; ``validRange``: ``min``, or ``min + k*step``), or, when it names none, the
policy's ``default``, else the whole capacity. Upstream's ``CmpRequestOverCapacity`` then runs, for
every device, shared or not: a request naming a capacity the device lacks skips the device; every
capacity is resolved first (a request the range arithmetic cannot represent, or a negative result,
is an error that aborts the allocation, whatever the order); then a resolved amount the policy does
not allow, or one that with what is consumed already exceeds the capacity, skips the device.

``DRAFractionalCapacityRange`` (beta, on by default in 1.37) is on: a range whose bounds are exact in
milli-units is rounded in milli-units. Where upstream would read a bound through Go's wrapping
``int64`` (bounds above ``MaxInt64``, which validation rejects) or panic (a zero step, a range
without ``min``), draxr computes exactly: a zero or negative step cannot represent any request, a
missing ``min`` counts as zero.

Capacity names are the device's own keys as written in the slice (``memory``, or
``example.com/memory``), compared as strings with the request's keys, as upstream compares them.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from fractions import Fraction
from typing import Any

from ..api.objects import as_dict, as_list
from ..api.quantity import INT64_MAX, Quantity

#: ``DRAFractionalCapacityRange``: beta and on by default in 1.37.
FRACTIONAL_CAPACITY_RANGE = True

#: ``errCapacityRequestNotRepresentable``.
NOT_REPRESENTABLE = "capacity request cannot be represented in the device's range arithmetic"
#: ``errNegativeCapacity``.
NEGATIVE = "capacity value is negative"

Amounts = Mapping[str, Fraction]  # consumed so far, by capacity name


class CapacityError(ValueError):
    """A request (or a stored capacity) the rules cannot honour: upstream aborts the allocation."""


@dataclass(frozen=True, slots=True)
class CapacityRange:
    """``CapacityRequestPolicyRange``."""

    min: Quantity | None
    max: Quantity | None = None
    step: Quantity | None = None


@dataclass(frozen=True, slots=True)
class RequestPolicy:
    """``CapacityRequestPolicy``: ``valid_values`` is sorted ascending (validation); empty when unset."""

    default: Quantity | None = None
    valid_values: tuple[Quantity, ...] = ()
    valid_range: CapacityRange | None = None


@dataclass(frozen=True, slots=True)
class DeviceCapacity:
    """``DeviceCapacity``: the value and, on a multi-allocatable device, its request policy."""

    value: Quantity
    policy: RequestPolicy | None = None


Capacities = Mapping[str, DeviceCapacity]


# -- parsing ----------------------------------------------------------------------------------------


def parse_capacities(raw: Any) -> dict[str, DeviceCapacity]:
    """A device's ``capacity`` map; raises ``QuantityError`` (a ``ValueError``) for bad quantities."""
    out: dict[str, DeviceCapacity] = {}
    for name, body in as_dict(raw).items():
        b = as_dict(body)
        policy = b.get("requestPolicy")
        out[str(name)] = DeviceCapacity(
            Quantity.parse(b.get("value")),
            _parse_policy(as_dict(policy)) if isinstance(policy, dict) else None,
        )
    return out


def _parse_policy(raw: dict[str, Any]) -> RequestPolicy:
    rng = raw.get("validRange")
    return RequestPolicy(
        default=_optional(raw.get("default")),
        valid_values=tuple(Quantity.parse(v) for v in as_list(raw.get("validValues"))),
        valid_range=(
            CapacityRange(_optional(rng.get("min")), _optional(rng.get("max")), _optional(rng.get("step")))
            if isinstance(rng, dict)
            else None
        ),
    )


def _optional(raw: Any) -> Quantity | None:
    return None if raw is None else Quantity.parse(raw)


def parse_capacity_requests(raw: Any) -> dict[str, Quantity] | None:
    """A request's ``capacity.requests`` (None when it names none)."""
    requests = as_dict(as_dict(raw).get("requests"))
    return {str(k): Quantity.parse(v) for k, v in requests.items()} or None


# -- one share --------------------------------------------------------------------------------------


def consumed_capacity(
    requested: Quantity | None, capacity: DeviceCapacity, fractional: bool = FRACTIONAL_CAPACITY_RANGE
) -> Quantity:
    """``calculateConsumedCapacity``: what one share consumes of ``capacity``. Raises
    ``CapacityError`` (without the capacity's name) when the range cannot represent the request."""
    policy = capacity.policy
    if requested is None:
        if policy is not None and policy.default is not None:
            return policy.default
        return capacity.value
    if policy is None:
        return requested
    rng = policy.valid_range
    if rng is not None and rng.min is not None:
        return _round_up_range(requested, rng, fractional)
    for valid in policy.valid_values:
        if requested.value <= valid.value:
            return valid
    return requested


def _round_up_range(requested: Quantity, rng: CapacityRange, fractional: bool) -> Quantity:
    """``roundUpRange``: ``min`` below it, else ``min + k*step`` for the smallest such k that is not
    below it (the request itself without a step), in the step's format."""
    assert rng.min is not None
    if requested.value < rng.min.value:
        return rng.min
    step = rng.step
    if step is None:
        return requested
    if use_milli(rng, fractional):
        milli = safe_milli(requested)
        if milli is None:
            raise CapacityError(
                f"{NOT_REPRESENTABLE}: request {requested.canonical()} is not a representable milli value"
            )
        value = _steps_up(milli, rng.min.milli(), step.milli(), always_guard=True)
        if value is None:
            raise CapacityError(
                f"{NOT_REPRESENTABLE}: rounding request {requested.canonical()} up to the next step passes "
                "the milli-value range"
            )
        return Quantity(Fraction(value, 1000), format=step.format)
    if requested.value > INT64_MAX:
        raise CapacityError(f"{NOT_REPRESENTABLE}: request {requested.canonical()} exceeds MaxInt64")
    value = _steps_up(requested.ceil(), rng.min.ceil(), step.ceil(), always_guard=False)
    if value is None:
        raise CapacityError(
            f"{NOT_REPRESENTABLE}: rounding request {requested.canonical()} up to the next step "
            "passes MaxInt64"
        )
    return Quantity(Fraction(value), format=step.format)


def _steps_up(requested: int, minimum: int, step: int, *, always_guard: bool) -> int | None:
    """``minimum + step*n``, n the steps from ``minimum`` to ``requested`` rounded up; None when the
    result passes ``MaxInt64`` (or the step is not positive: no request is representable then).
    Upstream's guard is ``n > (MaxInt64-minimum)/step`` in ``int64``: on the integer path only for a
    minimum of at least zero, on the milli path always (a negative minimum wraps it negative)."""
    if step <= 0:
        return None
    n = -((minimum - requested) // step)  # requested >= minimum: a ceiling division
    if (minimum >= 0 or always_guard) and n > _go_div(_wrap64(INT64_MAX - minimum), step):
        return None
    return minimum + step * n


def _wrap64(a: int) -> int:
    """Go's ``int64`` overflow."""
    return (a + 2**63) % 2**64 - 2**63


def _go_div(a: int, b: int) -> int:
    """Go's integer division (truncates toward zero)."""
    q = abs(a) // abs(b)
    return q if (a >= 0) == (b >= 0) else -q


def safe_milli(q: Quantity) -> int | None:
    """``safeMilliValue``: the value in milli-units when exact and within ``int64``."""
    milli = q.value * 1000
    if milli.denominator != 1 or not -INT64_MAX - 1 <= milli.numerator <= INT64_MAX:
        return None
    return milli.numerator


def use_milli(rng: CapacityRange, fractional: bool = FRACTIONAL_CAPACITY_RANGE) -> bool:
    """``useMilli``: with the gate on, every bound exact in milli-units and a step of at least 1m."""
    if not fractional:
        return False
    for q in (rng.min, rng.max, rng.step):
        if q is not None and safe_milli(q) is None:
            return False
    step = safe_milli(rng.step) if rng.step is not None else None
    return step is None or step >= 1


def violates_policy(
    consumed: Quantity, policy: RequestPolicy | None, fractional: bool = FRACTIONAL_CAPACITY_RANGE
) -> bool:
    """``violatesPolicy``: the resolved amount is not one the policy allows. Upstream first lets the
    default through by Go struct equality; draxr compares values (validation keeps the default valid,
    so the two differ only for a policy validation would reject)."""
    if policy is None:
        return False
    if policy.default is not None and consumed.value == policy.default.value:
        return False
    rng = policy.valid_range
    if rng is not None:
        if rng.max is not None and consumed.value > rng.max.value:
            return True
        if rng.step is None:
            return False
        minimum = rng.min if rng.min is not None else Quantity(Fraction(0))
        if use_milli(rng, fractional):
            milli = safe_milli(consumed)
            if milli is None:
                return True
            requested, step, base = milli, rng.step.milli(), minimum.milli()
        else:
            requested, step, base = consumed.ceil(), rng.step.ceil(), minimum.ceil()
        return step == 0 or (requested - base) % step != 0
    if policy.valid_values:
        return all(consumed.value != v.value for v in policy.valid_values)
    return False


# -- a device ---------------------------------------------------------------------------------------


def resolve(
    requests: Mapping[str, Quantity] | None,
    capacities: Capacities,
    fractional: bool = FRACTIONAL_CAPACITY_RANGE,
) -> dict[str, Quantity] | None:
    """What one share of a request consumes of every capacity of the device
    (``GetConsumedCapacityFromRequest``), by name; None when the request names a capacity the device
    lacks. Raises ``CapacityError`` naming the capacity for an amount that cannot be represented or
    is negative: upstream resolves every capacity before any other check, so the error wins whatever
    the order (draxr's: by name)."""
    if requests and any(name not in capacities for name in requests):
        return None
    out: dict[str, Quantity] = {}
    for name in sorted(capacities):
        try:
            q = consumed_capacity(requests.get(name) if requests else None, capacities[name], fractional)
        except CapacityError as e:
            raise CapacityError(f"capacity {_quote(name)}: {e}") from None
        if q.value < 0:
            raise CapacityError(f"capacity {_quote(name)}: {NEGATIVE}")
        out[name] = q
    return out


def fits(
    requests: Mapping[str, Quantity] | None,
    capacities: Capacities,
    already: Amounts | None = None,
    allocating: Amounts | None = None,
    fractional: bool = FRACTIONAL_CAPACITY_RANGE,
) -> bool:
    """``CmpRequestOverCapacity``: one more share of the request fits the device, given what
    allocated claims and in-flight reservations consume (``already``) and what this allocation's
    earlier picks consume (``allocating``). Raises ``CapacityError`` as ``resolve``."""
    share = resolve(requests, capacities, fractional)
    if share is None:
        return False
    for name, q in share.items():
        capacity = capacities[name]
        if violates_policy(q, capacity.policy, fractional):
            return False
        total = q.value
        if already:
            total += already.get(name, 0)
        if allocating:
            total += allocating.get(name, 0)
        if total > capacity.value.value:
            return False
    return True


def share_slots(
    requests: Mapping[str, Quantity] | None,
    capacities: Capacities,
    already: Amounts | None,
    limit: int,
    fractional: bool = FRACTIONAL_CAPACITY_RANGE,
) -> int:
    """How many more shares of the request fit the device one after the other (at most ``limit``):
    the largest k for which ``fits`` holds for each of the k shares. A request the rules reject
    with an error counts ``limit``: the allocator reports that error, counting must not hide it."""
    try:
        share = resolve(requests, capacities, fractional)
    except CapacityError:
        return limit
    if share is None:
        return 0
    slots = limit
    for name, q in share.items():
        capacity = capacities[name]
        if violates_policy(q, capacity.policy, fractional):
            return 0
        room = capacity.value.value - (already.get(name, 0) if already else 0)
        if q.value > 0:
            slots = min(slots, max(0, int(room // q.value)))
        elif room < 0:
            return 0
    return slots


def _quote(name: str) -> str:
    """Go's ``%q`` for the (ASCII) names capacities have."""
    return json.dumps(name, ensure_ascii=False)
