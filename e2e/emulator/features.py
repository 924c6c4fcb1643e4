"""Feature gates the emulated apiserver honours (thread-safe to flip while serving)."""

from __future__ import annotations

import threading
from collections.abc import Mapping

DRA_EXTENDED_RESOURCE = "DRAExtendedResource"

#: Defaults of the gates the emulator knows: DRAExtendedResource on, as in 1.36 (beta). In 1.35 it is
#: alpha and off by default (observed on the real control plane, e2e/controlplane/README.md).
DEFAULTS: dict[str, bool] = {DRA_EXTENDED_RESOURCE: True}


class FeatureGates:
    def __init__(self, overrides: Mapping[str, bool] | None = None) -> None:
        self._lock = threading.Lock()
        self._gates = dict(DEFAULTS)
        for name, value in (overrides or {}).items():
            self.set(name, value)

    def set(self, name: str, enabled: bool) -> None:
        if name not in DEFAULTS:
            raise KeyError(f"unknown feature gate {name!r}; known: {', '.join(sorted(DEFAULTS))}")
        with self._lock:
            self._gates[name] = bool(enabled)

    def enabled(self, name: str) -> bool:
        with self._lock:
            return self._gates[name]
