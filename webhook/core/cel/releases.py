"""Which CEL environment a selector meets: the served release, and stored or new expressions.

Upstream builds the DRA environment from versioned options (``apiserver/pkg/cel/environment``'s
``baseOpts`` and the device declarations of ``dynamic-resource-allocation/cel/compile.go``), and keeps
two environments of each release:

* **stored expressions**, what kube-scheduler's allocator compiles with: every option of the
  release's code that is not removed, whatever the feature gates say;
* **new expressions**, what the API server validates a new or changed selector with: only options
  introduced at or before the release's compatibility version (the release before it) whose
  feature gate is on by default.

Between 1.34 and 1.37 they differ in three places, each listed here from upstream's code:

* ``ext.Lists`` version 3 (``slice``, ``flatten``, ``distinct``, ``reverse``, ``sort``,
  ``sortBy``, ``lists.range``) is introduced in 1.34: new expressions of a 1.34 API server lack it;
* ``includes`` comes with list-typed attributes in 1.36 (``dra_includes_dyn_dyn``, refusing
  lists longer than ``ResourceSliceMaxAttributeValuesPerDevice``) and with Kubernetes' lists
  library version 1 in 1.37 (``list_includes_dyn_dyn``, no limit); new expressions have neither
  through 1.37 (the first is behind ``DRAListTypeAttributes``, alpha and off; the second is newer
  than 1.37's compatibility version);
* ``device.allowMultipleAllocations`` is declared with ``DRAConsumableCapacity`` (1.34, alpha until
  1.36): new expressions of 1.34 and 1.35 API servers lack it.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Final

import lark

Release = tuple[int, int]

#: The name 1.36's ``includes`` runs by in a compiled tree (:func:`bind_overloads`).
INCLUDES_1_36: Final = "includes@1.36"

OLDEST: Final[Release] = (1, 34)
NEWEST: Final[Release] = (1, 37)

#: cel-go's ``ext.Lists`` (version 3), in Kubernetes' base environment from 1.34.
EXT_LISTS: Final = frozenset({"slice", "flatten", "distinct", "reverse", "sort", "sortBy", "lists.range"})


@dataclass(frozen=True, slots=True)
class CelEnvironment:
    """One release's environment, stored (the scheduler's) or new (the API server's validation)."""

    release: Release = NEWEST
    stored: bool = True

    @property
    def undeclared(self) -> frozenset[str]:
        """Functions and macros this environment does not declare."""
        out: set[str] = set()
        if not self.stored and self.release < (1, 35):
            out |= EXT_LISTS
        if self.release < (1, 36) or not self.stored:
            out.add("includes")
        return frozenset(out)

    @property
    def multiple_allocations(self) -> bool:
        """Whether ``device.allowMultipleAllocations`` is declared."""
        return self.stored or self.release >= (1, 36)

    @property
    def includes_limit(self) -> bool:
        """Whether ``includes`` refuses lists longer than the per-device value limit (1.36's)."""
        return self.release == (1, 36)


#: kube-scheduler's environment of the newest release draxr knows: the default.
SCHEDULER: Final = CelEnvironment()


def served(release: Release | None, *, stored: bool = True) -> CelEnvironment:
    """The environment of ``release`` (None: unknown, the newest), clamped to the releases draxr
    knows: an older one is taken for the oldest, a newer one for the newest."""
    if release is None:
        return CelEnvironment(NEWEST, stored)
    return CelEnvironment(min(max(release, OLDEST), NEWEST), stored)


def bind_overloads(root: lark.Tree[Any], env: CelEnvironment) -> None:
    """Calls whose overload differs by release are renamed to the one ``env`` runs: 1.36's
    ``includes`` (:data:`INCLUDES_1_36`) refuses long lists, 1.37's does not."""
    if not env.includes_limit:
        return
    for node in root.iter_subtrees():
        token = node.children[1] if node.data == "member_dot_arg" else None
        if isinstance(token, lark.Token) and token == "includes":
            node.children[1] = lark.Token.new_borrow_pos(token.type, INCLUDES_1_36, token)
