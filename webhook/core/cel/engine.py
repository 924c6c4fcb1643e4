"""``SelectorEngine``: the one object the allocator talks to, with its three caches.

The CEL engine itself is a :class:`~.backend.Backend` chosen by name (``engine=``, the
``--cel-engine`` flag): ``cel-python`` (the default and the reference) or ``cel-rust``. Caching,
error handling and statistics are the same for every backend.

A selector's outcome depends only on the expression text and the device's driver, attributes,
capacity and ``allowMultipleAllocations`` flag, which the device's ``fingerprint`` stands for. So:

1. compiled programs (or the compile error) are cached by expression text;
2. prepared activations by fingerprint (devices with equal content share one);
3. outcomes - True, False or the runtime error - by (expression, fingerprint).

Fingerprints change when content changes, so nothing needs invalidating; stale entries age out
of the bounded LRUs. Every cache has its own lock: the webhook and the worker call ``matches``
from different threads, and an evaluation itself runs outside any lock.

Failures that depend on the caller rather than on the input (RecursionError from a deep caller
stack, MemoryError) become a :class:`CelRuntimeError` but are never cached.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Hashable
from typing import Generic, TypeVar

from .backend import Backend, default_engine, make_backend
from .errors import CelCompileError, CelError, CelRuntimeError
from .values import CelDevice

K = TypeVar("K", bound=Hashable)
V = TypeVar("V")

#: Prepared activations kept; a device's ``device`` value costs a few KiB.
MAX_ACTIVATIONS = 65_536

_MISSING = object()


class LRU(Generic[K, V]):
    """A bounded, thread-safe least-recently-used map that counts its hits and misses."""

    def __init__(self, maxsize: int) -> None:
        if maxsize < 1:
            raise ValueError("cache size must be at least 1")
        self.maxsize = maxsize
        self.hits = 0
        self.misses = 0
        self._data: OrderedDict[K, V] = OrderedDict()
        self._lock = threading.Lock()

    def get(self, key: K) -> V | object:
        """The value, or ``_MISSING``."""
        with self._lock:
            value = self._data.get(key, _MISSING)
            if value is _MISSING:
                self.misses += 1
            else:
                self.hits += 1
                self._data.move_to_end(key)
            return value

    def put(self, key: K, value: V) -> None:
        with self._lock:
            self._data[key] = value
            self._data.move_to_end(key)
            while len(self._data) > self.maxsize:
                self._data.popitem(last=False)

    def clear(self) -> None:
        with self._lock:
            self._data.clear()

    def __len__(self) -> int:
        return len(self._data)


class SelectorEngine:
    """Compiles and evaluates DRA selectors with upstream semantics (see the package docs)."""

    def __init__(
        self, *, max_programs: int = 4096, max_results: int = 1_000_000, engine: str | None = None
    ) -> None:
        """``engine`` names the backend (see :mod:`.backend`; None: the default engine); ValueError
        if it is unknown or not installed."""
        self._backend: Backend = make_backend(engine if engine is not None else default_engine())
        self._programs: LRU[str, object] = LRU(max_programs)
        self._activations: LRU[Hashable, object] = LRU(min(MAX_ACTIVATIONS, max(1, max_results)))
        self._results: LRU[tuple[str, Hashable], bool | CelRuntimeError] = LRU(max_results)
        self._lock = threading.Lock()
        self._compiles = 0
        self._evaluations = 0
        self._uncached = 0

    @property
    def engine(self) -> str:
        """The backend's name (``cel-python`` or ``cel-rust``)."""
        return self._backend.name

    def compile(self, expression: str) -> None:
        """Validate ``expression``; raises :class:`CelCompileError`. The program is cached."""
        self._program(expression)

    def matches(self, expression: str, device: CelDevice) -> bool:
        """Whether ``device`` satisfies ``expression``; raises CelCompileError / CelRuntimeError.

        Outcomes, errors included, are cached by (expression, ``device.fingerprint``); a device
        whose fingerprint is None or unhashable is evaluated every time.
        """
        program = self._program(expression)
        fingerprint = device.fingerprint
        key: tuple[str, Hashable] | None = None if fingerprint is None else (expression, fingerprint)
        if key is not None:
            try:
                hit = self._results.get(key)
            except TypeError:  # unhashable fingerprint: evaluate without caching
                key, hit = None, _MISSING
            if hit is not _MISSING:
                if isinstance(hit, CelError):
                    raise hit.fresh()
                return bool(hit)
        try:
            outcome: bool | CelRuntimeError = self._backend.evaluate(
                program, self._activation(device, key is not None)
            )
        except CelRuntimeError as e:
            outcome = e
        except (RecursionError, MemoryError) as e:
            with self._lock:
                self._uncached += 1
            raise CelRuntimeError(
                f"evaluation aborted ({type(e).__name__}): expression too complex for this call"
            ) from None
        except Exception as e:  # an engine defect must not escape as a traceback
            outcome = CelRuntimeError(f"internal evaluation error: {type(e).__name__}: {e}"[:300])
        with self._lock:
            self._evaluations += 1
        if key is not None:
            self._results.put(key, outcome)
        if isinstance(outcome, CelRuntimeError):
            raise outcome.fresh()
        return outcome

    def stats(self) -> dict[str, int]:
        """Counters since creation (``clear`` keeps them) and current cache sizes."""
        with self._lock:
            compiles, evaluations, uncached = self._compiles, self._evaluations, self._uncached
        return {
            **self._backend.stats(),
            "compiles": compiles,
            "evaluations": evaluations,
            "uncached_failures": uncached,
            "program_hits": self._programs.hits,
            "program_misses": self._programs.misses,
            "activation_hits": self._activations.hits,
            "activation_misses": self._activations.misses,
            "result_hits": self._results.hits,
            "result_misses": self._results.misses,
            "programs": len(self._programs),
            "activations": len(self._activations),
            "results": len(self._results),
        }

    def clear(self) -> None:
        """Drop every cached program, activation and outcome."""
        self._programs.clear()
        self._activations.clear()
        self._results.clear()

    def _program(self, expression: str) -> object:
        if not isinstance(expression, str):
            raise CelCompileError(f"expression must be a string, not {type(expression).__name__}")
        cached = self._programs.get(expression)
        if cached is _MISSING:
            try:
                cached = self._backend.compile(expression)
            except CelCompileError as e:
                cached = e
            except RecursionError:
                raise CelCompileError("compilation failed: expression nested too deeply") from None
            with self._lock:
                self._compiles += 1
            self._programs.put(expression, cached)
        if isinstance(cached, CelCompileError):
            raise cached.fresh()
        return cached

    def _activation(self, device: CelDevice, cacheable: bool) -> object:
        fingerprint = device.fingerprint
        if cacheable:
            cached = self._activations.get(fingerprint)
            if cached is not _MISSING:
                if isinstance(cached, CelRuntimeError):
                    raise cached.fresh()
                return cached
        prepared: object
        try:
            prepared = self._backend.prepare(device)
        except CelRuntimeError as e:
            prepared = e
        except Exception as e:  # a malformed device object from the caller
            prepared = CelRuntimeError(f"unusable device: {type(e).__name__}: {e}"[:300])
        if cacheable:
            self._activations.put(fingerprint, prepared)
        if isinstance(prepared, CelRuntimeError):
            raise prepared.fresh()
        return prepared
