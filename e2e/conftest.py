from __future__ import annotations

import shutil
from collections.abc import Iterator

import pytest

from .target import Target, cluster_target, emulator_target


@pytest.fixture(params=["emulator", "cluster"])
def target(request: pytest.FixtureRequest) -> Iterator[Target]:
    if request.param == "emulator":
        t = emulator_target()
    else:
        got = cluster_target()
        if isinstance(got, str):
            pytest.skip(got)
        t = got
    try:
        yield t
    finally:
        t.teardown()
        if t.sandbox is not None:
            t.sandbox.stop()


@pytest.fixture
def kubectl() -> str:
    exe = shutil.which("kubectl")
    if exe is None:
        pytest.skip("no kubectl on PATH: `.ci/kubectl.sh` fetches Debian's kubectl 1.36 into .ci/bin")
    return exe
