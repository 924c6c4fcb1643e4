"""The chaos sequence once (``chaos.py``) on the package's row, after every other test (the file
name sorts last): every fault of ``faults.py`` one after another, then the worker leader cut while
kube-apiserver restarts twice, under a stream of pods coming and going. Nothing wrong by any count,
no fault finding anything, every pod bound. Its namespace (``NS``) goes at the end
(``conftest.scratch``)."""

from __future__ import annotations

import json

import pytest

from .chaos import NS, run  # noqa: F401  (NS: conftest.scratch deletes it)
from .faults import COUNTS
from .row import ChartRow


@pytest.mark.timeout(1200)  # six faults, two quiet spells and the stream's last pods
def test_the_fault_sequence_under_a_stream_leaves_nothing_wrong(row: ChartRow) -> None:
    result = run(row, short=True, minutes=0)
    print(json.dumps({k: v for k, v in result.items() if k != "faults"}))
    seen = {k: result[k] for k in ("fenced_writes_seen", "failed_admissions_seen")}
    assert {k: result[k] for k in COUNTS} == dict.fromkeys(COUNTS, 0), seen
    assert [f for fault in result["faults"] for f in fault["findings"]] == []
    assert result["unbound"] == []
    assert result["pods_bound"] >= 20
