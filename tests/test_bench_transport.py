"""``bench/transport.py``: a short run measures every way of both kinds and prints them as JSON."""

from __future__ import annotations

import json

import pytest

from bench.transport import main


def test_a_short_run_prints_each_ways_cpu_and_wall_time(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["--requests", "30"]) == 0
    result = json.loads(capsys.readouterr().out)
    assert result["requests"] == 30
    for kind in ("get", "post"):
        assert set(result[kind]) == {"kubeclient", "urllib3", "socket"}
        for way in result[kind].values():
            assert way["cpu_us_per_request"] > 0
            assert way["wall_us_per_request"] >= way["cpu_us_per_request"] * 0.5
