"""The store's reverse indexes (owner uid -> dependents, pod uid -> reserving claims)."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from e2e.emulator.store import move_in_index

KEYS = st.frozensets(st.sampled_from("abcd"))


@given(st.lists(st.tuples(st.integers(0, 3), KEYS), max_size=30))
def test_the_index_is_the_inverse_of_each_items_current_keys(moves: list[tuple[int, frozenset[str]]]) -> None:
    index: dict[str, set[int]] = {}
    current: dict[int, set[str]] = {}
    for item, keys in moves:
        move_in_index(index, item, current.get(item, set()), set(keys))
        current[item] = set(keys)
    expected: dict[str, set[int]] = {}
    for item, now in current.items():
        for k in now:
            expected.setdefault(k, set()).add(item)
    assert index == expected  # no key is left holding an empty set
