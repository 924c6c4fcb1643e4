"""UsualMemo: the verdicts remembered per pod shape (what they give is held to the unremembered
check in test_usual_properties.py)."""

from __future__ import annotations

from webhook.core.scheduling.usual import UsualMemo


def test_a_shape_keeps_its_verdicts_between_decisions() -> None:
    memo = UsualMemo()
    memo.verdicts("a", nodes=10)["n0"] = (1, None)
    assert memo.verdicts("a", nodes=10) == {"n0": (1, None)}
    assert memo.verdicts("b", nodes=10) == {}


def test_only_the_shapes_used_last_are_kept() -> None:
    memo = UsualMemo(shapes=2)
    for shape in ("a", "b"):
        memo.verdicts(shape, nodes=10)["n0"] = (1, shape)
    memo.verdicts("a", nodes=10)  # used last: "b" is the oldest now
    memo.verdicts("c", nodes=10)
    assert memo.verdicts("a", nodes=10) == {"n0": (1, "a")}
    assert memo.verdicts("b", nodes=10) == {}


def test_verdicts_of_far_more_nodes_than_the_cluster_has_start_afresh() -> None:
    memo = UsualMemo()
    verdicts = memo.verdicts("a", nodes=200)
    verdicts.update({f"n{i}": (1, None) for i in range(200)})
    assert len(memo.verdicts("a", nodes=200)) == 200
    assert memo.verdicts("a", nodes=50) == {}  # 150 nodes went away
