"""The chaos sequence once (``chaos.py``) on the package's row: every fault of ``faults.py`` one after
another, then the worker leader cut while kube-apiserver restarts twice, under a stream of pods
coming and going. Nothing wrong by any count, no fault finding anything, every pod bound. Its
namespace goes at the end: the stream's last pods hold devices the package's later tests need."""

from __future__ import annotations

import json

import pytest

from .chaos import NS, run
from .faults import COUNTS
from .row import ChartRow


@pytest.mark.timeout(1200)  # six faults, two quiet spells and the stream's last pods
def test_the_fault_sequence_under_a_stream_leaves_nothing_wrong(row: ChartRow) -> None:
    try:
        result = run(row, short=True, minutes=0)
    finally:
        row.kubectl("delete", "namespace", NS, "--wait=true", timeout=300)
    print(json.dumps({k: v for k, v in result.items() if k != "faults"}))
    assert {k: result[k] for k in COUNTS} == dict.fromkeys(COUNTS, 0), result["fenced_writes_seen"]
    assert [f for fault in result["faults"] for f in fault["findings"]] == []
    assert result["unbound"] == []
    assert result["pods_bound"] >= 20
