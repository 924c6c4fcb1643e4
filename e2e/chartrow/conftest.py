"""The 1.37 chart row (``LocalCluster(ROWS["1.37"], draxr="chart")``): one cluster for the whole
package, started on the first test that asks. The package's modules run in file order (the
install's checks first, then the operators' scenarios), each test's namespace deleted after it;
once the package is done the row stops and
the host is checked (links, routes, mounts, rules, cgroups, sysctls). Runs only with the 1.37 row
selected (``make e2e-local``), never under ``make test``."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from .row import ChartRow, chart_row


@pytest.fixture(scope="package")
def row(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Iterator[ChartRow]:
    yield from chart_row(request, tmp_path_factory, "1.37")


@pytest.fixture(autouse=True)
def scratch(request: pytest.FixtureRequest) -> Iterator[None]:
    """A row test's namespace (its module's ``NS``) goes after it, passed or failed: pods a failed
    test left would hold the devices the next test needs."""
    namespace = getattr(request.module, "NS", None)
    row = request.getfixturevalue("row") if namespace and "row" in request.fixturenames else None
    yield
    if row is not None:
        row.kubectl("delete", "namespace", namespace, "--ignore-not-found", "--wait=true", timeout=300)
