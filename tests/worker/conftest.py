from collections.abc import Iterator
from pathlib import Path

import pytest

from .harness import Cluster, cluster


@pytest.fixture
def kube(tmp_path: Path) -> Iterator[Cluster]:
    with cluster(tmp_path) as c:
        yield c
