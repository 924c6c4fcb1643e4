"""A pytest plugin: ``DRAXR_CEL_ENGINE=cel-rust pytest -p tests.core.cel.engine_plugin ...`` runs
tests with that engine as the default of ``SelectorEngine()`` (the parity suite uses it for the
CEL-dependent tests outside tests/core/cel)."""

from __future__ import annotations

import os

import pytest

from webhook.core.cel import backend


def pytest_configure(config: pytest.Config) -> None:
    name = os.environ.get("DRAXR_CEL_ENGINE")
    if name:
        backend.set_default_engine(name)
