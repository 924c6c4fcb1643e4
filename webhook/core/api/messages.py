"""Texts shown to people through narrow channels: admission warnings (kubectl prints them verbatim;
Kubernetes recommends at most 120 characters) and error bodies."""

from __future__ import annotations

from typing import Final

MAX_WARNING_LENGTH: Final = 120


def clip(text: str, limit: int = MAX_WARNING_LENGTH) -> str:
    """``text`` cut to ``limit`` characters, ending in ``...`` when cut."""
    return text if len(text) <= limit else text[: limit - 3] + "..."
