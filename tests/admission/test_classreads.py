"""Fresh DeviceClass reads at pod admission: shared, never older than the request, bounded."""

from __future__ import annotations

import threading
from collections.abc import Callable

import pytest

from tests.core.podfactory import device_class
from webhook.admission.blocking import MAY_BLOCK, WouldBlock
from webhook.admission.classreads import ClassReader, FreshClasses
from webhook.core.api.objects import Obj
from webhook.kube.cache import ClusterCache
from webhook.kube.client import ApiError

from .builders import GPU, GPU_CLASS

GPU_DC = device_class(GPU_CLASS, GPU, ['device.driver == "gpu.example.com"'])


class GatedLister:
    """The API server's side: each list waits for its gate; records how many lists started."""

    def __init__(self, answers: list[list[Obj]]) -> None:
        self.answers = answers
        self.started = 0
        self.entered = [threading.Event() for _ in answers]
        self.gates = [threading.Event() for _ in answers]
        self._lock = threading.Lock()

    def __call__(self, timeout: float) -> list[Obj]:
        with self._lock:
            n = self.started
            self.started += 1
        self.entered[n].set()
        assert self.gates[n].wait(30)
        return self.answers[n]


def _resolve_in_thread(reader: ClassReader, out: list[FreshClasses]) -> threading.Thread:
    def run() -> None:
        MAY_BLOCK.set(True)
        out.append(reader.resolve([GPU]))

    thread = threading.Thread(target=run)
    thread.start()
    return thread


def _blocking(fn: Callable[[], FreshClasses]) -> FreshClasses:
    token = MAY_BLOCK.set(True)
    try:
        return fn()
    finally:
        MAY_BLOCK.reset(token)


def test_a_list_that_started_before_the_request_cannot_answer_it() -> None:
    # The class is created while the first list is in flight: that list may predate it.
    lister = GatedLister([[], [GPU_DC]])
    reads: list[str] = []
    reader = ClassReader(ClusterCache(), 10, reads.append, lister)
    first: list[FreshClasses] = []
    second: list[FreshClasses] = []
    a = _resolve_in_thread(reader, first)
    assert lister.entered[0].wait(10)
    b = _resolve_in_thread(reader, second)
    b.join(0.2)
    assert b.is_alive()  # b waits for a list of its own
    lister.gates[0].set()
    a.join(10)
    assert first == [FreshClasses({})]
    assert lister.entered[1].wait(10)
    lister.gates[1].set()
    b.join(10)
    assert second == [FreshClasses({GPU: GPU_CLASS})]
    assert lister.started == 2
    assert sorted(reads) == ["found", "none"]


def test_concurrent_admissions_share_lists() -> None:
    lister = GatedLister([[GPU_DC], [GPU_DC], [GPU_DC]])
    reader = ClassReader(ClusterCache(), 10, None, lister)
    out: list[FreshClasses] = []
    first = _resolve_in_thread(reader, out)
    assert lister.entered[0].wait(10)
    others = [_resolve_in_thread(reader, out) for _ in range(8)]
    lister.gates[0].set()
    lister.gates[1].set()
    for t in [first, *others]:
        t.join(10)
    # One list for the first request, one shared by the eight that arrived while it ran.
    assert lister.started == 2
    assert out == [FreshClasses({GPU: GPU_CLASS})] * 9


def test_a_failed_list_reports_why_and_resolves_nothing() -> None:
    def failing(timeout: float) -> list[Obj]:
        raise ApiError(503, {"message": "etcd unavailable"}, "list", "/apis/resource.k8s.io/v1/deviceclasses")

    reads: list[str] = []
    got = _blocking(lambda: ClassReader(ClusterCache(), 1, reads.append, failing).resolve([GPU]))
    assert got.resolved == {}
    assert "etcd unavailable" in str(got.error)
    assert reads == ["error"]


def test_a_list_that_hangs_gives_up_at_the_timeout() -> None:
    lister = GatedLister([[GPU_DC], [GPU_DC]])
    reader = ClassReader(ClusterCache(), 0.3, None, lister)
    out: list[FreshClasses] = []
    hung = _resolve_in_thread(reader, out)
    assert lister.entered[0].wait(10)
    waiting = _resolve_in_thread(reader, out)
    waiting.join(10)
    assert not waiting.is_alive()
    assert out[0].resolved == {}
    assert "within 0.3s" in str(out[0].error)
    lister.gates[0].set()
    hung.join(10)


def test_the_event_loop_never_waits_for_a_list() -> None:
    reader = ClassReader(ClusterCache(), 10, None, GatedLister([[GPU_DC]]))
    with pytest.raises(WouldBlock):
        reader.resolve([GPU])


def test_a_snapshot_or_a_zero_timeout_never_lists() -> None:
    lister = GatedLister([[GPU_DC]])
    snapshot = ClusterCache.from_objects([])
    assert not ClassReader(snapshot, 10).live()
    assert _blocking(lambda: ClassReader(snapshot, 10).resolve([GPU])) == FreshClasses({})
    assert _blocking(lambda: ClassReader(snapshot, 0, None, lister).resolve([GPU])) == FreshClasses({})
    assert lister.started == 0
