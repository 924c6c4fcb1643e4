"""The one lifecycle of the test infrastructure's parts (a control plane's nodes, a row's network, a
whole local cluster): ``with part:`` starts it and stops it, and a start that fails halfway stops
what it made before the error goes up, so nothing half-started stays on the host."""

from __future__ import annotations

from types import TracebackType
from typing import Self


class Lifecycle:
    """Subclasses give ``start`` and ``stop``; ``stop`` must undo a partial ``start``."""

    def start(self) -> None:
        raise NotImplementedError

    def stop(self) -> None:
        raise NotImplementedError

    def __enter__(self) -> Self:
        try:
            self.start()
        except BaseException:
            self.stop()
            raise
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.stop()
