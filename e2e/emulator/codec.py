"""JSON on the wire: compact encoding, and decoding that tolerates what Go's decoder tolerates.

Go replaces lone UTF-16 surrogates (``"\\ud800"``) with U+FFFD while Python keeps them and then
cannot encode the string as UTF-8; decoding scrubs them so every stored object can be served.
"""

from __future__ import annotations

import base64
import datetime
import json
from typing import Any

import yaml

_encode = json.JSONEncoder(separators=(",", ":"), ensure_ascii=False).encode


def encode(value: Any) -> bytes:
    return _encode(value).encode()


def _has_surrogate(text: str) -> bool:
    return any("\ud800" <= ch <= "\udfff" for ch in text)


def scrub(value: Any) -> Any:
    """Replace lone surrogates in every string of a decoded document."""
    if isinstance(value, str):
        if _has_surrogate(value):
            return value.encode("utf-16", "surrogatepass").decode("utf-16", "replace")
        return value
    if isinstance(value, dict):
        return {scrub(k): scrub(v) for k, v in value.items()}
    if isinstance(value, list):
        return [scrub(v) for v in value]
    return value


def _plain(value: Any) -> Any:
    """YAML-only scalars (timestamps, binary, sets) as the JSON the apiserver would have seen."""
    if isinstance(value, datetime.datetime):
        if value.tzinfo is None:
            value = value.replace(tzinfo=datetime.UTC)
        return value.astimezone(datetime.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
    if isinstance(value, datetime.date):
        return value.isoformat()
    if isinstance(value, bytes):
        return base64.b64encode(value).decode()
    if isinstance(value, set | frozenset):
        return sorted(value, key=str)
    raise TypeError(f"{type(value).__name__} is not a JSON value")


def decode_yaml(raw: bytes) -> Any:
    """A YAML document as JSON; ValueError for anything JSON cannot carry (complex keys...)."""
    try:
        value = yaml.safe_load(raw.decode("utf-8"))
        return decode(json.dumps(value, default=_plain, allow_nan=False))
    except (TypeError, yaml.YAMLError) as exc:
        raise ValueError(str(exc)) from None


def decode(raw: bytes | str) -> Any:
    """``json.loads`` plus surrogate scrubbing; raises ValueError (or RecursionError) on bad input."""
    value = json.loads(raw)
    escaped = b"\\u" in raw if isinstance(raw, bytes) else "\\u" in raw
    return scrub(value) if escaped else value
