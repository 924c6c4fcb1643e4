"""``runtime.logs``: text lines by default, JSON lines with ``--log-format json``, the context draxr
passes in ``extra`` on both."""

from __future__ import annotations

import io
import json
import logging
from collections.abc import Iterator

import pytest

from webhook.runtime import logs


@pytest.fixture(autouse=True)
def _restore_loggers() -> Iterator[None]:
    """``setup`` reconfigures process-wide loggers: put them back for the tests that follow."""
    saved = [
        (lg, list(lg.handlers), lg.level, lg.propagate) for lg in (logging.getLogger(n) for n in logs.ROOTS)
    ]
    yield
    for lg, handlers, level, propagate in saved:
        lg.handlers[:] = handlers
        lg.setLevel(level)
        lg.propagate = propagate


def _emit(fmt: str) -> list[str]:
    out = io.StringIO()
    logs.setup("info", out, fmt=fmt)
    log = logging.getLogger("draxr.worker")
    log.info(
        "bound",
        extra={
            "pod": "default/p",
            "node": "n",
            "devices": ["gpu.example.com/n/gpu-0", "gpu.example.com/n/gpu-1"],
            "claim": "default/p-extended-resources-x",
            "latency_ms": 12.5,
            "unset": None,
        },
    )
    log.debug("hidden")
    try:
        raise ValueError("boom")
    except ValueError:
        log.exception("failed", extra={"pod": "default/q", "reason": "the API said no"})
    logging.getLogger("webhook.runtime.tls").warning("rejected", extra={"reason": "key does not match"})
    return out.getvalue().splitlines()


def test_json_lines_carry_the_context_in_the_order_given() -> None:
    lines = [json.loads(line) for line in _emit("json") if line.startswith("{")]
    assert [line["msg"] for line in lines] == ["bound", "failed", "rejected"]
    bound = lines[0]
    assert list(bound) == [
        "time",
        "level",
        "logger",
        "msg",
        "pod",
        "node",
        "devices",
        "claim",
        "latency_ms",
    ]
    assert bound["devices"] == ["gpu.example.com/n/gpu-0", "gpu.example.com/n/gpu-1"]
    assert bound["latency_ms"] == 12.5
    assert bound["level"] == "info"
    assert bound["time"].endswith("Z")
    assert lines[1]["reason"] == "the API said no"
    assert "ValueError: boom" in lines[1]["exception"]
    assert lines[2]["logger"] == "webhook.runtime.tls"  # module-named loggers are draxr's too


def test_text_is_the_default_and_reads_as_key_value_pairs() -> None:
    out = io.StringIO()
    logs.setup("info", out)
    logging.getLogger("draxr.worker").info("bound", extra={"pod": "default/p"})
    assert out.getvalue().rstrip().endswith("info    draxr.worker: bound pod=default/p")

    lines = _emit("text")
    assert lines[0].split(" ", 1)[1] == (
        "info    draxr.worker: bound pod=default/p node=n "
        "devices=gpu.example.com/n/gpu-0,gpu.example.com/n/gpu-1 "
        "claim=default/p-extended-resources-x latency_ms=12.5"
    )
    failed = next(line for line in lines if "failed" in line)
    assert failed.endswith('failed pod=default/q reason="the API said no"')  # quoted: it has spaces
    assert "Traceback" in lines[lines.index(failed) + 1]  # the traceback follows on its own lines
    assert lines[-1].endswith('webhook.runtime.tls: rejected reason="key does not match"')


def test_values_are_quoted_only_when_they_must_be() -> None:
    record = logging.LogRecord("draxr.x", logging.INFO, "", 0, "m", None, None)
    record.__dict__.update({"a": "", "b": 'say "hi"', "c": "k=v", "d": {"x": "y"}, "e": 0.25})
    line = logs.TextFormatter().format(record)
    assert line.endswith('m a="" b="say \\"hi\\"" c="k=v" d=x:y e=0.25')


def test_an_unknown_format_is_refused() -> None:
    with pytest.raises(ValueError, match="text, json"):
        logs.formatter("xml")
