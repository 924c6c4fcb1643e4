from tests.worker.conftest import kube

__all__ = ["kube"]
