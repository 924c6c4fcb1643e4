"""draxr's logs: one line per event, as text (the default, for people) or JSON (``--log-format
json``, for log pipelines).

Every line carries the time, the level, the logger and the message, then the context draxr passes
in ``extra`` (``pod``, ``node``, ``devices``, ``claim``, ``latency_ms``, ``reason``, ...), in the order
given. Text lines are ``key=value`` pairs after the message, values quoted when they hold spaces,
quotes or ``=``; lists are joined with commas. JSON lines are one object each.

What draxr logs at info level: one line at start (``draxr started``: version, mode, the extended
resource names mapped to DeviceClasses, the webhook's and the worker's addresses), one line per pod
decision in the worker (``bound`` or ``unschedulable``), and one line per failure with its
``reason``.
"""

from __future__ import annotations

import json
import logging
import sys
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any, Final, TextIO

FORMATS: Final = ("text", "json")
LEVELS: Final = ("debug", "info", "warning", "error")


@dataclass(frozen=True)
class LogSettings:
    """``level``: one of ``LEVELS``; ``format``: one of ``FORMATS``."""

    level: str = "info"
    format: str = field(
        default="text",
        metadata={
            "help": "text: one line per event with key=value context, for people (the default); "
            "json: one JSON object per line, for log pipelines"
        },
    )


#: What every LogRecord has: anything else on a record came from ``extra``.
_STANDARD: Final = frozenset(logging.LogRecord("", 0, "", 0, "", None, None).__dict__) | {
    "message",
    "asctime",
    "taskName",
}


def context(record: logging.LogRecord) -> dict[str, Any]:
    """The ``extra`` fields of a record, in the order they were given; None values left out."""
    return {k: v for k, v in record.__dict__.items() if k not in _STANDARD and v is not None}


def _time(record: logging.LogRecord) -> str:
    moment = datetime.fromtimestamp(record.created, UTC)
    return moment.isoformat(timespec="milliseconds").replace("+00:00", "Z")


class JsonFormatter(logging.Formatter):
    """One JSON object per line: ``time``, ``level``, ``logger``, ``msg``, then the context."""

    def format(self, record: logging.LogRecord) -> str:
        out: dict[str, object] = {
            "time": _time(record),
            "level": record.levelname.lower(),
            "logger": record.name,
            "msg": record.getMessage(),
        }
        for key, value in context(record).items():
            out.setdefault(key, value)
        if record.exc_info:
            out["exception"] = self.formatException(record.exc_info)
        return json.dumps(out, default=str)


def _text_value(value: object) -> str:
    if isinstance(value, list | tuple | set | frozenset):
        text = ",".join(str(v) for v in value)
    elif isinstance(value, dict):
        text = ",".join(f"{k}:{v}" for k, v in value.items())
    elif isinstance(value, float):
        text = f"{value:g}"
    else:
        text = str(value)
    if text == "" or any(c in text for c in ' "=\n\t'):
        return json.dumps(text)
    return text


class TextFormatter(logging.Formatter):
    """``2025-01-02T03:04:05.678Z info  draxr.worker: bound pod=default/p node=n1 ...``; a traceback,
    if any, on the lines after."""

    def format(self, record: logging.LogRecord) -> str:
        head = f"{_time(record)} {record.levelname.lower():<7} {record.name}: {record.getMessage()}"
        pairs = " ".join(f"{k}={_text_value(v)}" for k, v in context(record).items())
        line = f"{head} {pairs}" if pairs else head
        if record.exc_info:
            line += "\n" + self.formatException(record.exc_info)
        return line


def formatter(fmt: str) -> logging.Formatter:
    if fmt not in FORMATS:
        raise ValueError(f"log format must be one of {', '.join(FORMATS)}, not {fmt!r}")
    return JsonFormatter() if fmt == "json" else TextFormatter()


#: draxr's loggers: ``draxr.<part>``, and ``webhook.<module>`` for the few named after their module.
ROOTS: Final = ("draxr", "webhook")


def setup(
    level: str = LogSettings.level, stream: TextIO | None = None, fmt: str = LogSettings.format
) -> logging.Handler:
    """Send draxr's logs (``ROOTS`` and below) to ``stream`` (standard error by default)."""
    handler = logging.StreamHandler(stream or sys.stderr)
    handler.setFormatter(formatter(fmt))
    for name in ROOTS:
        root = logging.getLogger(name)
        root.handlers[:] = [handler]
        root.setLevel(level.upper())
        root.propagate = False
    return handler
