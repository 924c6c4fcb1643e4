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
from collections.abc import Hashable, Sequence
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
        outcome = self._evaluate(program, device, key is not None)
        with self._lock:
            self._evaluations += 1
        if key is not None:
            self._results.put(key, outcome)
        if isinstance(outcome, CelRuntimeError):
            raise outcome.fresh()
        return outcome

    def matches_many(self, expression: str, devices: Sequence[CelDevice]) -> list[bool | CelRuntimeError]:
        """``matches`` for many devices at once: each device's verdict, or its runtime error (a
        fresh instance, returned rather than raised); raises CelCompileError for the expression.

        The same caches and the same backend evaluation as ``matches``, so the same answers; what
        it saves is per-call overhead: the program is looked up once, devices with equal
        fingerprints are evaluated once per call, and each cache's lock is taken once per call
        rather than once per device. The cold start of a class selector over a cluster's devices
        is this shape."""
        return self._matches_many(expression, devices, {})

    def matches_all(
        self, expressions: Sequence[str], devices: Sequence[CelDevice]
    ) -> list[list[bool | CelRuntimeError]]:
        """``matches_many`` for each expression, in order, the devices prepared once for all of
        them (a class's selectors, or a class's and a request's, over the same devices); raises
        CelCompileError for the first expression that does not compile."""
        for expression in expressions:
            self._program(expression)
        prepared: dict[Hashable, object] = {}
        return [self._matches_many(expression, devices, prepared) for expression in expressions]

    def _matches_many(
        self, expression: str, devices: Sequence[CelDevice], prepared: dict[Hashable, object]
    ) -> list[bool | CelRuntimeError]:
        program = self._program(expression)
        out: list[object] = []
        seen: dict[Hashable, object] = {}  # fingerprint -> outcome, within this call
        fresh: dict[tuple[str, Hashable], bool | CelRuntimeError] = {}
        pending: list[tuple[int, CelDevice, Hashable | None]] = []
        results = self._results
        with results._lock:  # one pass over the result cache: hits now, misses below
            data = results._data
            for i, device in enumerate(devices):
                fingerprint: Hashable | None = device.fingerprint
                hit: object = _MISSING
                if fingerprint is not None:
                    try:
                        hit = seen.get(fingerprint, _MISSING)
                        if hit is _MISSING:
                            key = (expression, fingerprint)
                            hit = data.get(key, _MISSING)
                            if hit is _MISSING:
                                results.misses += 1
                            else:
                                results.hits += 1
                                data.move_to_end(key)
                                seen[fingerprint] = hit
                    except TypeError:  # unhashable fingerprint: evaluate without caching
                        fingerprint = None
                out.append(hit)
                if hit is _MISSING:
                    pending.append((i, device, fingerprint))
        evaluated_count = 0
        for i, device, fingerprint in pending:
            outcome = seen.get(fingerprint, _MISSING) if fingerprint is not None else _MISSING
            if outcome is _MISSING:
                # Prepared here, not through the bounded activation cache: a cold start's devices
                # outnumber it, and every lookup would take its lock and miss.
                values = prepared.get(fingerprint, _MISSING) if fingerprint is not None else _MISSING
                if values is _MISSING:
                    values = self._prepare(device)
                    if fingerprint is not None:
                        prepared[fingerprint] = values
                evaluated = self._evaluate(program, device, False, values)
                evaluated_count += 1
                if fingerprint is not None:
                    seen[fingerprint] = evaluated
                    fresh[(expression, fingerprint)] = evaluated
                outcome = evaluated
            out[i] = outcome
        with self._lock:
            self._evaluations += evaluated_count
        if fresh:
            with results._lock:
                data = results._data
                for key, value in fresh.items():
                    if key in data:  # another thread put it meanwhile: a new key goes last anyway
                        data.move_to_end(key)
                    data[key] = value
                while len(data) > results.maxsize:
                    data.popitem(last=False)
        return [o.fresh() if isinstance(o, CelRuntimeError) else bool(o) for o in out]  # type: ignore[misc]

    def _evaluate(
        self, program: object, device: CelDevice, cacheable: bool, prepared: object = _MISSING
    ) -> bool | CelRuntimeError:
        """One uncached evaluation as ``matches`` makes it (RecursionError and MemoryError raise);
        ``prepared``: the device's values when the caller has them (else the activation cache)."""
        try:
            if prepared is _MISSING:
                prepared = self._activation(device, cacheable)
            elif isinstance(prepared, CelRuntimeError):
                raise prepared.fresh()
            outcome: bool | CelRuntimeError = self._backend.evaluate(program, prepared)
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
        prepared = self._prepare(device)
        if cacheable:
            self._activations.put(fingerprint, prepared)
        if isinstance(prepared, CelRuntimeError):
            raise prepared.fresh()
        return prepared

    def _prepare(self, device: CelDevice) -> object:
        """The backend's per-device values, or the CelRuntimeError that preparing them gave."""
        try:
            return self._backend.prepare(device)
        except CelRuntimeError as e:
            return e
        except Exception as e:  # a malformed device object from the caller
            return CelRuntimeError(f"unusable device: {type(e).__name__}: {e}"[:300])
