"""The garbage collector's settings for ``draxr serve``.

Nearly every object the worker makes is decoded JSON: watch events, API answers, the claims and
mappings it writes. They die by reference counting, yet each one counts towards the collector's
young generation, which by default (700 objects) is collected hundreds of times a second under load,
and every tenth time its survivors again. A young generation of ``YOUNG`` objects keeps the
collector for the cycles it exists for at a small share of the CPU: at 5,000 nodes x 8 devices
(``bench/scale.py --skip-engine``) the worker spent about 9 % of its CPU in collections with the
defaults and about 3 % with these. The older generations keep their default ratios, so cyclic
garbage that survives is still collected, only later.
"""

from __future__ import annotations

import gc

#: Net allocations between two collections of the young generation (the default is 700).
YOUNG = 20_000


def settle() -> None:
    """At the process's start: freeze what start-up built (modules, the configuration), so full
    collections walk only what comes after, and collect the young generation every ``YOUNG``
    allocations."""
    gc.freeze()
    _, middle, old = gc.get_threshold()
    gc.set_threshold(YOUNG, middle, old)


def synced() -> None:
    """Once the initial lists have synced, before the worker starts: freeze the cluster state they
    built (150 MiB at 5,000 nodes; the freeze at start came before it), so full collections walk
    only what changed since, 5-15 % of the worker's CPU per pod at 5,000 nodes x 8 devices
    (``bench/scale.py``, noisy)."""
    gc.freeze()
