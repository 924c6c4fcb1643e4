"""VolumeBinding's Score (``scorer.go``), on by default since ``StorageCapacityScoring`` went beta
(1.37): per StorageClass, how full the pod's volumes would be on the node, through the default shape
(utilization 0 scores 100, utilization 100 scores 0: the emptiest wins), averaged over the classes.

With static bindings on the node, the classes are those of the chosen volumes (requested: the
claims' requests, capacity: the volumes' capacities); otherwise those of the claims to provision
whose driver reported a CSIStorageCapacity (capacity: that object's ``capacity``). A node with
neither scores 0. Weight 1 (the default profile gives none), no normalization."""

from __future__ import annotations

import math
from typing import Final

from ....api.objects import as_str, spec
from ....api.pvhelpers import storage_request, volume_capacity
from ....api.quantity import try_parse
from ....cluster.volumes import PodVolumes

WEIGHT: Final = 1
#: ``maxUtilization``.
MAX_UTILIZATION: Final = 100
#: The default ``VolumeBindingArgs.shape`` (utilization, score), scores scaled to 0..100.
DEFAULT_SHAPE: Final = ((0, 100), (100, 0))


def broken_linear(shape: tuple[tuple[int, int], ...], p: int) -> int:
    """``helper.BuildBrokenLinearFunction``: linear between the shape's points, flat outside them
    (Go's integer division, which truncates toward zero)."""
    for i, (utilization, score) in enumerate(shape):
        if p <= utilization:
            if i == 0:
                return score
            u0, s0 = shape[i - 1]
            return s0 + _go_div((score - s0) * (p - u0), utilization - u0)
    return shape[-1][1]


def _go_div(a: int, b: int) -> int:
    q = abs(a) // abs(b)
    return q if (a >= 0) == (b > 0) else -q


def class_score(requested: int, capacity: int, shape: tuple[tuple[int, int], ...] = DEFAULT_SHAPE) -> int:
    if capacity == 0 or requested > capacity:
        return broken_linear(shape, MAX_UTILIZATION)
    return broken_linear(shape, requested * MAX_UTILIZATION // capacity)


def score(volumes: PodVolumes | None, shape: tuple[tuple[int, int], ...] = DEFAULT_SHAPE) -> int:
    """The node's score from what Filter found there."""
    if volumes is None:
        return 0
    classes: dict[str, list[int]] = {}  # class -> [requested, capacity]
    if volumes.static:
        for b in volumes.static:
            r = classes.setdefault(as_str(spec(b.pv).get("storageClassName")), [0, 0])
            r[0] += math.ceil(storage_request(b.pvc))
            r[1] += math.ceil(volume_capacity(b.pv))
    else:
        for p in volumes.dynamic:
            if p.capacity is None:
                continue
            r = classes.setdefault(as_str(spec(p.pvc).get("storageClassName")), [0, 0])
            q = try_parse(p.capacity.get("capacity"))
            r[1] = q.ceil() if q is not None else 0  # the node's capacity, not a sum
            r[0] += math.ceil(storage_request(p.pvc))
    if not classes:
        return 0
    total = sum(class_score(req, cap, shape) for req, cap in classes.values())
    return _round_half_away(total / len(classes))


def _round_half_away(x: float) -> int:
    """Go's ``math.Round``: halves away from zero."""
    return math.floor(x + 0.5) if x >= 0 else -math.floor(-x + 0.5)
