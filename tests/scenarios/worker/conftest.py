"""The worker scenarios use tests/worker's fixtures: a cluster on the API emulator, an offline worker."""

from tests.worker.conftest import kube, offline

__all__ = ["kube", "offline"]
