"""A failing test that used a control plane gets the tail of each of its process logs in its report."""

from __future__ import annotations

from collections.abc import Generator

import pytest

from .launcher import ControlPlane


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(
    item: pytest.Item, call: pytest.CallInfo[None]
) -> Generator[None, pytest.TestReport, pytest.TestReport]:
    report = yield
    if report.failed:
        for value in getattr(item, "funcargs", {}).values():
            if isinstance(value, ControlPlane):
                report.sections.append(
                    (f"control plane v{value.version} logs ({value.workdir})", value.logs())
                )
    return report
