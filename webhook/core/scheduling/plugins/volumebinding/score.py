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
#: A ``VolumeBindingArgs.shape``: (utilization, score) points, scores scaled to 0..100.
Shape = tuple[tuple[int, int], ...]
#: The default shape.
DEFAULT_SHAPE: Final[Shape] = ((0, 100), (100, 0))


def broken_linear(shape: Shape, p: int) -> int:
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


def class_score(requested: int, capacity: int, shape: Shape = DEFAULT_SHAPE) -> int:
    if capacity == 0 or requested > capacity:
        return broken_linear(shape, MAX_UTILIZATION)
    return broken_linear(shape, requested * MAX_UTILIZATION // capacity)


def score(volumes: PodVolumes | None, shape: Shape = DEFAULT_SHAPE) -> int:
    """The node's score from what Filter found there."""
    return node_score(class_resources(volumes), shape)


def class_resources(volumes: PodVolumes | None) -> dict[str, tuple[int, int]]:
    """``classResourceMap``: per StorageClass, (requested, capacity) in bytes."""
    classes: dict[str, tuple[int, int]] = {}
    if volumes is None:
        return classes
    if volumes.static:
        for b in volumes.static:
            cls = as_str(spec(b.pv).get("storageClassName"))
            req, cap = classes.get(cls, (0, 0))
            classes[cls] = (req + math.ceil(storage_request(b.pvc)), cap + math.ceil(volume_capacity(b.pv)))
        return classes
    for p in volumes.dynamic:
        if p.capacity is None:
            continue
        cls = as_str(spec(p.pvc).get("storageClassName"))
        q = try_parse(p.capacity.get("capacity"))
        req, _ = classes.get(cls, (0, 0))
        # The node's capacity for the class, not a sum over the claims.
        classes[cls] = (req + math.ceil(storage_request(p.pvc)), q.ceil() if q is not None else 0)
    return classes


def node_score(classes: dict[str, tuple[int, int]], shape: Shape = DEFAULT_SHAPE) -> int:
    """``buildScorerFunction``'s scorer: the classes' scores averaged (every class weighs the same),
    rounded half away from zero; 0 without classes."""
    if not classes:
        return 0
    total = sum(class_score(req, cap, shape) for req, cap in classes.values())
    return _round_half_away(total / len(classes))


def _round_half_away(x: float) -> int:
    """Go's ``math.Round``: halves away from zero."""
    return math.floor(x + 0.5) if x >= 0 else -math.floor(-x + 0.5)
