"""A failing test that used a control plane or nodes (directly, or as a fixture's ``cp``/``nodes``) gets
the tail of each of their process logs in its report."""

from __future__ import annotations

from collections.abc import Generator

import pytest

from .launcher import ControlPlane
from .nodes import Nodes


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(
    item: pytest.Item, call: pytest.CallInfo[None]
) -> Generator[None, pytest.TestReport, pytest.TestReport]:
    report = yield
    if report.failed:
        for value in getattr(item, "funcargs", {}).values():
            for part in (value, getattr(value, "cp", None), getattr(value, "nodes", None)):
                if isinstance(part, ControlPlane):
                    report.sections.append(
                        (f"control plane v{part.version} logs ({part.workdir})", part.logs())
                    )
                elif isinstance(part, Nodes):
                    report.sections.append((f"node logs ({part.workdir})", part.logs()))
    return report
