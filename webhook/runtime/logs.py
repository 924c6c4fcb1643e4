"""JSON-lines logging: one object per line with time, level, logger, message and any of the
context fields draxr passes in ``extra`` (pod, node, claim, ...)."""

from __future__ import annotations

import json
import logging
import sys
from datetime import UTC, datetime

CONTEXT_FIELDS = ("pod", "node", "claim", "reason", "attempt", "identity", "error", "duration_ms", "path")


class JsonFormatter(logging.Formatter):
    def format(self, record: logging.LogRecord) -> str:
        out: dict[str, object] = {
            "time": datetime.fromtimestamp(record.created, UTC).isoformat(timespec="milliseconds"),
            "level": record.levelname.lower(),
            "logger": record.name,
            "msg": record.getMessage(),
        }
        for key in CONTEXT_FIELDS:
            value = record.__dict__.get(key)
            if value is not None:
                out[key] = value
        if record.exc_info:
            out["exception"] = self.formatException(record.exc_info)
        return json.dumps(out, default=str)


def setup(level: str = "info", stream: object = None) -> None:
    handler = logging.StreamHandler(stream or sys.stderr)  # type: ignore[arg-type]
    handler.setFormatter(JsonFormatter())
    root = logging.getLogger("draxr")
    root.handlers[:] = [handler]
    root.setLevel(level.upper())
    root.propagate = False
