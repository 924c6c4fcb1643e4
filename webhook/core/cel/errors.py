"""Errors of the selector engine.

Upstream distinguishes a compile error (the expression can never work) from a runtime error
(this device made it fail); both abort an allocation, so callers only need the class and a
clear ``message``. No other exception type may leave the engine.
"""

from __future__ import annotations


class CelError(Exception):
    """Base class: ``message`` is meant for the allocator's error text; ``selector_index``, which
    of a list of selectors failed (set by whoever applies the list)."""

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message
        self.selector_index = 0

    def fresh(self) -> CelError:
        """A new instance with the same class and message.

        Cached failures are re-raised as copies so that callers may annotate the instance they
        catch (the cluster state sets ``selector_index``) without touching the cached one.
        """
        return type(self)(self.message)


class CelCompileError(CelError):
    """Parse error, expression too long or too deeply nested, undeclared name, bad result type."""


class CelRuntimeError(CelError):
    """Evaluation failed for one device: no such key, no such overload, overflow, cost limit, ..."""
