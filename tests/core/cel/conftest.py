"""Every CEL test here runs once per engine (``cel-python``, the reference, and ``cel-rust``).

The ``cel_engine`` fixture makes its engine the default of ``SelectorEngine()`` for the test, so
the same assertions (results and error texts) hold for both: that is the parity suite. The
compiled engine is an optional extra; without it its runs skip, except under ``CI=true`` (``make
test`` installs the dev extra, which includes it), where a missing engine fails.
"""

from __future__ import annotations

import os
from collections.abc import Iterator

import pytest

from webhook.core.cel import ENGINES, available_engines, backend


def require_engine(name: str) -> None:
    """Skip (fail under CI) when ``name`` is not installed."""
    if name in available_engines():
        return
    if os.environ.get("CI") == "true":
        pytest.fail(f"CEL engine {name} is not installed: CI installs the dev extra, which includes cel-fast")
    pytest.skip(f"CEL engine {name} needs the cel-fast extra: pip install 'draxr[cel-fast]'")


@pytest.fixture(params=ENGINES, autouse=True)
def cel_engine(request: pytest.FixtureRequest) -> Iterator[str]:
    name: str = request.param
    require_engine(name)
    before = backend.default_engine()
    backend.set_default_engine(name)
    try:
        yield name
    finally:
        backend.set_default_engine(before)


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Tests marked ``both_engines`` compare the engines themselves: they run once, in the cel-rust
    pass, and their cel-python copies are deselected rather than skipped."""
    dropped = [
        item
        for item in items
        if item.get_closest_marker("both_engines") is not None
        and getattr(item, "callspec", None) is not None
        and item.callspec.params.get("cel_engine") != "cel-rust"  # type: ignore[attr-defined]
    ]
    if dropped:
        ids = {id(item) for item in dropped}
        items[:] = [item for item in items if id(item) not in ids]
        config.hook.pytest_deselected(items=dropped)
