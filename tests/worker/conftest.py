from collections.abc import Iterator
from pathlib import Path

import pytest

from webhook.kube.cache import ClusterCache
from webhook.kube.client import KubeClient
from webhook.worker.worker import Worker

from .harness import Cluster, cluster
from .workers import make_worker


@pytest.fixture
def kube(tmp_path: Path) -> Iterator[Cluster]:
    with cluster(tmp_path) as c:
        yield c


@pytest.fixture
def offline() -> Iterator[Worker]:
    """A worker over an empty static cache and a client that is never used."""
    w = make_worker(KubeClient(None), ClusterCache.from_objects([]))
    yield w
    w.stop()
