"""``bench/scale.py``'s resident pods (a benchmark, no module of the package: so here, not in a
mirror): they land on the nodes both parts build, count on them, and ask for no device."""

from __future__ import annotations

import pytest

from bench.allocate import build
from bench.scale import main, resident_pod
from webhook.core.paths.requested import requested_extended


def test_resident_pods_are_bound_to_the_built_nodes_and_counted_there() -> None:
    state = build(3, 2, 2, unique=False)
    for j in range(7):
        state.apply("Pod", resident_pod(j, 3))
    assert [len(state.nodes.by_name[f"node-{n:04d}"].pods) for n in range(3)] == [3, 2, 2]
    assert len({p["metadata"]["uid"] for p in state.allocated.pods.values()}) == 7
    assert all(requested_extended(resident_pod(j, 3)) == [] for j in range(7))


def test_a_negative_resident_count_is_a_usage_error(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exited:
        main(["--resident-pods", "-1"])
    assert exited.value.code == 2
    assert "--resident-pods must be >= 0, not -1" in capsys.readouterr().err
