"""``kube/codec.py``: orjson where it can, the standard library where it declines; every value the
same as the standard library's, integers exact at any size."""

from __future__ import annotations

import json
from typing import Any

import pytest
from hypothesis import example, given
from hypothesis import strategies as st

from webhook.kube import codec

#: JSON values as Kubernetes objects hold them (finite floats: the API server takes no NaN).
VALUES = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False, allow_infinity=False) | st.text(),
    lambda inner: st.lists(inner, max_size=5) | st.dictionaries(st.text(), inner, max_size=5),
    max_leaves=30,
)


@given(VALUES)
def test_a_value_round_trips_as_the_standard_librarys(value: Any) -> None:
    encoded = codec.dumps(value)
    assert codec.loads(encoded) == json.loads(encoded) == value
    assert codec.loads(encoded.decode()) == value  # a watch line arrives as text


@pytest.mark.parametrize("n", [2**63 - 1, -(2**63), 2**64, 2**64 + 1, -(2**80), 10**40])
def test_integers_beyond_64_bits_stay_exact(n: int) -> None:
    assert codec.loads(codec.dumps({"n": n})) == {"n": n}
    assert codec.loads(f'{{"n": {n}}}'.encode()) == {"n": n}


def test_digits_in_a_string_are_only_slower() -> None:
    wide = '{"id": "123456789012345678901234", "n": 7}'
    assert codec.loads(wide.encode()) == codec.loads(wide) == {"id": "123456789012345678901234", "n": 7}
    assert codec.loads('["\\ud800", 1]') == ["\ud800", 1]  # an escaped lone surrogate, as json reads it


def test_what_orjson_refuses_to_encode_is_the_standard_librarys() -> None:
    assert codec.loads(codec.dumps({1: "a"})) == {"1": "a"}  # json.dumps turns the key into a string
    with pytest.raises(TypeError):
        codec.dumps({"x": object()})


@pytest.mark.parametrize("data", [b"", b"{", b"not json", b'{"a": 1} trailing', "\ud800"])
def test_what_is_not_json_is_a_value_error(data: bytes | str) -> None:
    with pytest.raises(ValueError, match=r"."):  # json.JSONDecodeError is a ValueError
        codec.loads(data)


@example("NaN")
@example(b"[NaN, -Infinity]")
@given(st.binary(max_size=64) | st.text(max_size=64))
def test_any_input_decodes_as_the_standard_library_decodes_it(data: bytes | str) -> None:
    try:
        expected = json.loads(data)
    except ValueError:
        with pytest.raises(ValueError, match=r"."):
            codec.loads(data)
        return
    got = codec.loads(data)
    # NaN (json reads the bare word; orjson refuses it, so json decodes it here too) equals nothing,
    # itself included: compare the two values as json writes them back.
    # It also tells 1 from 1.0 and True, which == does not.
    assert json.dumps(got, sort_keys=True) == json.dumps(expected, sort_keys=True)
