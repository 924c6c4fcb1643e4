"""Consumable capacity's rules: what a share consumes and whether it fits. The tables are upstream's
``TestConsumableCapacity`` (``structured/internal/incubating/consumable_capacity_test.go``, v0.37.2),
each subtest under its upstream name; then draxr's share slots and parsing."""

from __future__ import annotations

from fractions import Fraction

import pytest

from webhook.core.api.quantity import Quantity, QuantityError
from webhook.core.cluster.consumable import (
    CapacityError,
    CapacityRange,
    DeviceCapacity,
    RequestPolicy,
    consumed_capacity,
    fits,
    parse_capacities,
    parse_capacity_requests,
    resolve,
    safe_milli,
    share_slots,
    use_milli,
    violates_policy,
)

C0, C1 = "capacity-0", "capacity-1"


def q(text: str) -> Quantity:
    return Quantity.parse(text)


ONE, TWO, THREE, ZERO = q("1"), q("2"), q("3"), q("0")
MAX_INT64, MAX_INT64_P1 = q("9223372036854775807"), q("9223372036854775808")
TWO_POW64_P3, MAX_INT64_M1 = q("18446744073709551619"), q("9223372036854775806")
P1, P2, P25, P3, P4 = q("100m"), q("200m"), q("250m"), q("300m"), q("400m")
TOO_BIG_FOR_MILLI = q("9224372036854776E3")
FRACTIONAL_RANGE = RequestPolicy(P2, valid_range=CapacityRange(P2, ONE, P1))


def test_get_consumed_capacity_from_request() -> None:
    """``get-consumed-capacity-from-request``: the request where it names one, else the default,
    else the whole capacity."""
    capacities = {
        C0: DeviceCapacity(TWO, RequestPolicy(TWO, valid_range=CapacityRange(ONE))),
        C1: DeviceCapacity(TWO, RequestPolicy(ONE, valid_range=CapacityRange(ONE))),
        "dummy": DeviceCapacity(ONE),
    }
    consumed = resolve({C0: ONE, "dummy": ONE}, capacities)
    assert consumed == {C0: ONE, C1: ONE, "dummy": ONE}


@pytest.mark.parametrize(
    ("requested", "policy", "fractional", "violates"),
    [
        pytest.param(ONE, None, False, False, id="no constraint"),
        pytest.param(
            ONE, RequestPolicy(ONE, valid_range=CapacityRange(ONE, TWO)), False, False, id="less than maximum"
        ),
        pytest.param(
            TWO, RequestPolicy(ONE, valid_range=CapacityRange(ONE, ONE)), False, True, id="more than maximum"
        ),
        pytest.param(ONE, RequestPolicy(ONE, (ONE,)), False, False, id="in set"),
        pytest.param(TWO, RequestPolicy(ONE, (ONE,)), False, True, id="not in set"),
        pytest.param(P3, FRACTIONAL_RANGE, True, False, id="fractional step aligned (0.3 = min+1*step)"),
        pytest.param(
            P25,
            FRACTIONAL_RANGE,
            True,
            True,
            id="fractional step not aligned (0.25 is not a multiple of 0.1 from 0.2)",
        ),
        pytest.param(
            TOO_BIG_FOR_MILLI,
            RequestPolicy(ONE, valid_range=CapacityRange(ONE, step=ONE)),
            True,
            True,
            id="requested value overflows milli representation",
        ),
    ],
)
def test_violate_capacity_sharing(
    requested: Quantity, policy: RequestPolicy | None, fractional: bool, violates: bool
) -> None:
    """``violate-capacity-sharing``."""
    assert violates_policy(requested, policy, fractional) is violates


@pytest.mark.parametrize(
    ("requested", "value", "policy", "fractional", "expected"),
    [
        pytest.param(None, ONE, RequestPolicy(), False, ONE, id="empty"),
        pytest.param(
            MAX_INT64_M1,
            MAX_INT64,
            RequestPolicy(ONE, valid_range=CapacityRange(ONE, step=TWO)),
            False,
            MAX_INT64,
            id="max-safe-boundary-rounds-to-maxint64",
        ),
        pytest.param(
            None, TWO, RequestPolicy(ONE, valid_range=CapacityRange(ONE)), False, ONE, id="min in range"
        ),
        pytest.param(None, TWO, RequestPolicy(ONE, (ONE,)), False, ONE, id="default in set"),
        pytest.param(
            TWO,
            TWO,
            RequestPolicy(ONE, valid_range=CapacityRange(ONE)),
            False,
            TWO,
            id="more than min in range",
        ),
        pytest.param(
            ONE,
            TWO,
            RequestPolicy(ONE, valid_range=CapacityRange(TWO)),
            False,
            TWO,
            id="less than min in range",
        ),
        pytest.param(
            TWO,
            THREE,
            RequestPolicy(ONE, valid_range=CapacityRange(ONE, step=TWO)),
            False,
            THREE,
            id="with step (round up)",
        ),
        pytest.param(
            TWO,
            TWO,
            RequestPolicy(ONE, valid_range=CapacityRange(ONE, step=ONE)),
            False,
            TWO,
            id="with step (no remaining)",
        ),
        pytest.param(P25, ONE, FRACTIONAL_RANGE, True, P3, id="fractional step round up (0.25 to 0.3)"),
        pytest.param(
            P4, ONE, FRACTIONAL_RANGE, True, P4, id="fractional step already aligned (0.4 = min+2*step)"
        ),
        pytest.param(TWO, THREE, RequestPolicy(ONE, (ONE, TWO, THREE)), False, TWO, id="valid value in set"),
        pytest.param(TWO, THREE, RequestPolicy(ONE, (ONE, THREE)), False, THREE, id="set (round up)"),
        pytest.param(THREE, THREE, RequestPolicy(ONE, (ONE, TWO)), False, THREE, id="larger than set"),
        # allocator_testing.go's "consumable-capacity-fractional-range-gate-disabled": 200m on
        # min 200m, step 100m reads both as 1 through Value(), so the share is min + 0 steps = 1.
        pytest.param(
            P2, ONE, FRACTIONAL_RANGE, False, ONE, id="consumable-capacity-fractional-range-gate-disabled"
        ),
    ],
)
def test_calculate_consumed_capacity(
    requested: Quantity | None, value: Quantity, policy: RequestPolicy, fractional: bool, expected: Quantity
) -> None:
    """``calculate-consumed-capacity``."""
    assert consumed_capacity(requested, DeviceCapacity(value, policy), fractional).value == expected.value


@pytest.mark.parametrize(
    ("requested", "value", "policy", "fractional"),
    [
        pytest.param(
            TWO_POW64_P3,
            TWO_POW64_P3,
            RequestPolicy(ZERO, valid_range=CapacityRange(ZERO, step=THREE)),
            False,
            id="request-above-maxint64-is-rejected",
        ),
        pytest.param(
            MAX_INT64,
            MAX_INT64_P1,
            RequestPolicy(ZERO, valid_range=CapacityRange(ZERO, step=TWO)),
            False,
            id="rounded-value-above-maxint64-is-rejected",
        ),
        pytest.param(
            TOO_BIG_FOR_MILLI,
            TOO_BIG_FOR_MILLI,
            RequestPolicy(ONE, valid_range=CapacityRange(P1, step=P1)),
            True,
            id="fractional-step-request-not-milli-representable-is-rejected",
        ),
        pytest.param(
            Quantity(Fraction(2**63 - 2, 1000)),
            Quantity(Fraction(2**63 - 1, 1000)),
            RequestPolicy(P1, valid_range=CapacityRange(P1, step=P1)),
            True,
            id="fractional-step-rounded-value-passes-milli-range-is-rejected",
        ),
    ],
)
def test_calculate_consumed_capacity_not_representable(
    requested: Quantity, value: Quantity, policy: RequestPolicy, fractional: bool
) -> None:
    """``calculate-consumed-capacity``'s ``expectErr`` rows: ``errCapacityRequestNotRepresentable``."""
    with pytest.raises(CapacityError, match="cannot be represented in the device's range arithmetic"):
        consumed_capacity(requested, DeviceCapacity(value, policy), fractional)


def test_rounded_amounts_take_the_step_s_format() -> None:
    """``NewQuantity``/``NewMilliQuantity`` in the step's format: what ``consumedCapacity`` prints."""
    binary = RequestPolicy(valid_range=CapacityRange(q("1Gi"), step=q("1Gi")))
    assert consumed_capacity(q("1500Mi"), DeviceCapacity(q("8Gi"), binary)).canonical() == "2Gi"
    assert consumed_capacity(P25, DeviceCapacity(ONE, FRACTIONAL_RANGE)).canonical() == "300m"
    assert consumed_capacity(q("950m"), DeviceCapacity(ONE, FRACTIONAL_RANGE)).canonical() == "1"


@pytest.mark.parametrize(
    ("value", "milli"),
    [
        pytest.param(ONE, 1000, id="whole number"),
        pytest.param(P1, 100, id="fractional milli"),
        pytest.param(TOO_BIG_FOR_MILLI, None, id="too large for milli (overflows int64)"),
        pytest.param(q("1u"), None, id="finer than a milli"),
    ],
)
def test_safe_milli_value(value: Quantity, milli: int | None) -> None:
    """``safe-milli-value``."""
    assert safe_milli(value) == milli


@pytest.mark.parametrize(
    ("rng", "fractional", "expected"),
    [
        pytest.param(CapacityRange(P2, ONE, P1), False, False, id="fractional disabled"),
        pytest.param(CapacityRange(P2, ONE, P1), True, True, id="all fractional, fits in milli"),
        pytest.param(
            CapacityRange(ONE, THREE, ONE),
            True,
            True,
            id="all integer, fits in milli (no hasFractional gate any more)",
        ),
        pytest.param(
            CapacityRange(TOO_BIG_FOR_MILLI, step=ONE),
            True,
            False,
            id="min overflows milli, falls back to integer",
        ),
        pytest.param(CapacityRange(ONE, step=ZERO), True, False, id="step too small (sub-milli)"),
    ],
)
def test_use_milli(rng: CapacityRange, fractional: bool, expected: bool) -> None:
    """``use-milli``."""
    assert use_milli(rng, fractional) is expected


def test_cmp_request_over_capacity_fatal_beats_soft() -> None:
    """``cmp-request-over-capacity-fatal-beats-soft``: an amount the range cannot represent is an
    error even when another capacity would only skip the device (upstream repeats it 64 times
    over Go's random map order; draxr's order is the names')."""
    capacities = {
        C0: DeviceCapacity(ONE),  # the request of 2 over-fills it: a soft mismatch
        C1: DeviceCapacity(MAX_INT64_P1, RequestPolicy(valid_range=CapacityRange(ZERO, step=TWO))),
    }
    for names in ((C0, C1), (C1, C0)):
        requests = {n: (TWO if n == C0 else MAX_INT64) for n in names}
        with pytest.raises(
            CapacityError, match=r'^capacity "capacity-1": capacity request cannot be represented'
        ):
            fits(requests, dict(sorted(capacities.items(), reverse=names[0] == C1)), fractional=False)


# -- fits, beyond upstream's unit tables (the allocator tables cover it too) --------------------------


def test_fits_counts_what_is_consumed_already_and_in_this_allocation() -> None:
    caps = {C0: DeviceCapacity(q("4"))}
    assert fits({C0: TWO}, caps, {C0: Fraction(1)}, {C0: Fraction(1)})
    assert not fits({C0: TWO}, caps, {C0: Fraction(2)}, {C0: Fraction(1)})
    assert not fits({C1: ONE}, caps)  # a capacity the device lacks: skip it
    assert fits(None, {})  # nothing asked, nothing published
    assert not fits({C0: ONE}, {})


def test_a_negative_amount_is_an_error_wherever_it_comes_from() -> None:
    with pytest.raises(CapacityError, match=r'^capacity "capacity-0": capacity value is negative$'):
        fits({C0: q("-5")}, {C0: DeviceCapacity(q("10"))})
    with pytest.raises(CapacityError, match="negative"):
        fits(None, {C0: DeviceCapacity(q("-1"))})  # the whole capacity, published negative
    # validRange rounds a negative request up to its min: nothing negative is left.
    assert fits(
        {C0: q("-5")}, {C0: DeviceCapacity(q("4"), RequestPolicy(TWO, valid_range=CapacityRange(TWO)))}
    )


# -- share slots --------------------------------------------------------------------------------


def test_share_slots_count_the_shares_that_fit_one_after_the_other() -> None:
    ranged = {C0: DeviceCapacity(q("10"), RequestPolicy(TWO, valid_range=CapacityRange(TWO, step=TWO)))}
    assert share_slots(None, ranged, None, 32) == 5  # the default, 2, five times
    assert share_slots(None, ranged, {C0: Fraction(5)}, 32) == 2
    assert share_slots({C0: THREE}, ranged, None, 32) == 2  # 3 rounds up to 4
    assert share_slots(None, ranged, None, 3) == 3  # never beyond the limit
    whole = {C0: DeviceCapacity(q("10"))}
    assert share_slots(None, whole, None, 32) == 1  # no default: each share takes it all
    assert share_slots(None, whole, {C0: Fraction(1)}, 32) == 0
    assert share_slots(None, {}, None, 32) == 32  # nothing to consume: as many as a claim holds
    assert share_slots({C1: ONE}, whole, None, 32) == 0
    assert (
        share_slots(None, {C0: DeviceCapacity(ONE, RequestPolicy(ZERO, (ZERO,)))}, {C0: Fraction(1)}, 32)
        == 32
    )
    assert (
        share_slots(None, {C0: DeviceCapacity(ONE, RequestPolicy(ZERO, (ZERO,)))}, {C0: Fraction(2)}, 32) == 0
    )
    # An amount the allocator rejects with an error is counted generously: counting never hides it.
    assert share_slots(None, {C0: DeviceCapacity(q("-1"))}, None, 32) == 32


def test_share_slots_agree_with_fits() -> None:
    """k slots: the k-th share fits after k-1, the next does not."""
    caps = {
        C0: DeviceCapacity(q("10"), RequestPolicy(TWO, valid_range=CapacityRange(ONE, q("4"), ONE))),
        C1: DeviceCapacity(q("7"), RequestPolicy(ONE, (ONE, THREE))),
    }
    for request in (None, {C0: THREE}, {C1: TWO}, {C0: q("4"), C1: THREE}):
        for used in range(4):
            already = {C0: Fraction(used), C1: Fraction(used)}
            slots = share_slots(request, caps, already, 32)
            share = resolve(request, caps)
            assert share is not None
            for k in range(slots + 1):
                consumed = {n: already[n] + k * share[n].value for n in caps}
                assert fits(request, caps, consumed) is (k < slots)


# -- parsing ------------------------------------------------------------------------------------


def test_parse_capacities_keeps_names_as_written_and_reads_policies() -> None:
    caps = parse_capacities(
        {
            "memory": {
                "value": "40Gi",
                "requestPolicy": {
                    "default": "10Gi",
                    "validRange": {"min": "1Gi", "step": "1Gi", "max": "20Gi"},
                },
            },
            "example.com/slots": {"value": "4", "requestPolicy": {"default": "1", "validValues": ["1", "2"]}},
            "plain": {"value": "1"},
        }
    )
    assert caps["memory"] == DeviceCapacity(
        q("40Gi"), RequestPolicy(q("10Gi"), (), CapacityRange(q("1Gi"), q("20Gi"), q("1Gi")))
    )
    assert caps["example.com/slots"] == DeviceCapacity(q("4"), RequestPolicy(ONE, (ONE, TWO)))
    assert caps["plain"] == DeviceCapacity(ONE)
    with pytest.raises(QuantityError):
        parse_capacities({"memory": {"value": "lots"}})
    with pytest.raises(QuantityError):
        parse_capacities({"memory": {"value": "1", "requestPolicy": {"default": "x"}}})


def test_parse_capacity_requests() -> None:
    assert parse_capacity_requests({"requests": {"memory": "1Gi"}}) == {"memory": q("1Gi")}
    assert parse_capacity_requests({"requests": {}}) is None
    assert parse_capacity_requests(None) is None
