"""Hooks run on the event loop; one that would have to wait raises ``WouldBlock`` there and is
run again in a worker thread, where ``MAY_BLOCK`` is True."""

from __future__ import annotations

import contextvars

MAY_BLOCK: contextvars.ContextVar[bool] = contextvars.ContextVar("draxr_admission_may_block", default=False)


class WouldBlock(Exception):
    """The answer needs a wait that must not happen on the event loop."""
