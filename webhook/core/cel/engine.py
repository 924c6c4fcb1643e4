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
from collections.abc import Hashable, Iterable, Sequence
from typing import Generic, TypeVar

from .backend import Backend, default_engine, make_backend
from .errors import CelCompileError, CelError, CelRuntimeError
from .gcpause import collector_paused
from .releases import SCHEDULER, CelEnvironment, Release, served
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

    def get_many(self, keys: Sequence[K | None]) -> list[V | object]:
        """``get`` for each key, in one pass under the lock; a None key (nothing to look up, as
        for a device without a usable fingerprint) gives ``_MISSING`` and is not counted."""
        out: list[V | object] = []
        append = out.append
        hits = misses = 0
        with self._lock:
            data = self._data
            get, refresh = data.get, data.move_to_end
            for key in keys:
                if key is None:
                    append(_MISSING)
                    continue
                value = get(key, _MISSING)
                if value is _MISSING:
                    misses += 1
                else:
                    hits += 1
                    refresh(key)
                append(value)
            self.hits += hits
            self.misses += misses
        return out

    def put_many(self, items: Iterable[tuple[K, V]]) -> None:
        """``put`` for each (key, value), in one pass under the lock."""
        with self._lock:
            data = self._data
            refresh = data.move_to_end
            for key, value in items:
                data[key] = value
                refresh(key)
            while len(data) > self.maxsize:
                data.popitem(last=False)

    def clear(self) -> None:
        with self._lock:
            self._data.clear()

    def __len__(self) -> int:
        return len(self._data)


class SelectorEngine:
    """Compiles and evaluates DRA selectors with upstream semantics (see the package docs)."""

    def __init__(
        self,
        *,
        max_programs: int = 4096,
        max_results: int = 1_000_000,
        engine: str | None = None,
        env: CelEnvironment = SCHEDULER,
    ) -> None:
        """``engine`` names the backend (see :mod:`.backend`; None: the default engine); ValueError
        if it is unknown or not installed. ``env``: the environment selectors compile in (the
        newest release's scheduler by default; :meth:`set_release` follows the served one)."""
        self._backend: Backend = make_backend(engine if engine is not None else default_engine())
        self._env = env
        self._programs: LRU[str, object] = LRU(max_programs)
        self._activations: LRU[Hashable, object] = LRU(min(MAX_ACTIVATIONS, max(1, max_results)))
        self._results: LRU[tuple[str, Hashable], bool | CelRuntimeError] = LRU(max_results)
        self._lock = threading.Lock()
        self._compiles = 0
        self._evaluations = 0
        self._uncached = 0

    @property
    def env(self) -> CelEnvironment:
        """The environment selectors compile in."""
        return self._env

    def set_release(self, release: Release | None) -> bool:
        """Compile as the scheduler of ``release`` does (None: the newest known); True when that
        changed the environment, and every cached program and outcome was dropped with it. The
        caller holds off evaluations meanwhile (the cluster state's lock)."""
        env = served(release, stored=self._env.stored)
        if env == self._env:
            return False
        self._env = env
        self.clear()
        return True

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

    def select(self, expressions: Sequence[str], devices: Sequence[CelDevice]) -> list[bool | CelError]:
        """Each device's verdict on a list of selectors applied as a DeviceClass's are: True when
        all match; False at the first that does not; else the error (compile or runtime) of the
        first that failed, with ``selector_index`` set. Once a selector has decided a device, the
        later ones are not evaluated for it, as with ``matches`` in a loop; the same caches and
        backend, so the same answers. What differs is the cost: the program is looked up once per
        selector, devices with equal fingerprints are evaluated once, the backend gets all misses
        in one call, each cache's lock is taken once per selector rather than once per device, and
        the cyclic collector is paused (:mod:`.gcpause`). A cluster's cold start of a class is this
        call."""
        with collector_paused():
            batch = _Batch(devices)
            verdicts: list[bool | CelError] = [True] * len(batch.distinct)
            active: Sequence[int] = range(len(batch.distinct))
            for index, expression in enumerate(expressions):
                if not active:
                    break
                outcomes: Sequence[object]
                try:
                    outcomes = self._outcomes(expression, batch, active)
                except CelCompileError as e:
                    outcomes = [e] * len(active)
                except CelRuntimeError:  # an aborted evaluation: device by device, as matches
                    outcomes = [self._verdict(expression, batch.distinct[slot]) for slot in active]
                still: list[int] = []
                for slot, outcome in zip(active, outcomes, strict=True):
                    if outcome is True:
                        still.append(slot)
                    elif outcome is False:
                        verdicts[slot] = False
                    else:
                        error = outcome.fresh()  # type: ignore[attr-defined]
                        error.selector_index = index
                        verdicts[slot] = error
                active = still
            return [_copy(verdicts[slot]) for slot in batch.slot_of]

    def _verdict(self, expression: str, device: CelDevice) -> bool | CelError:
        try:
            return self.matches(expression, device)
        except CelError as e:
            return e

    def _outcomes(self, expression: str, batch: _Batch, active: Sequence[int]) -> list[object]:
        """The outcome (True, False or the CelRuntimeError) for each of ``active`` (slots of
        ``batch.distinct``): hits from the result cache, misses from one backend call; raises
        CelCompileError, or CelRuntimeError for an aborted evaluation (as ``matches``)."""
        program = self._program(expression)
        fingerprints = batch.keys
        keys = [None if (f := fingerprints[slot]) is None else (expression, f) for slot in active]
        out = self._results.get_many(keys)  # hits now, misses below
        misses = [j for j, outcome in enumerate(out) if outcome is _MISSING]
        if not misses:
            return out
        prepared, distinct = batch.prepared, batch.distinct
        slots = [active[j] for j in misses]
        unprepared = [slot for slot in slots if prepared[slot] is _MISSING]
        if unprepared:
            self._prepare_slots(batch, unprepared)
        devices = [distinct[slot] for slot in slots]
        values = [prepared[slot] for slot in slots]
        outcomes = self._evaluate_many(program, devices, values)
        with self._lock:
            self._evaluations += len(outcomes)
        for j, outcome in zip(misses, outcomes, strict=True):
            out[j] = outcome
        self._results.put_many(
            (key, outcome)
            for j, outcome in zip(misses, outcomes, strict=True)
            if (key := keys[j]) is not None
        )
        return out

    def _prepare_slots(self, batch: _Batch, slots: list[int]) -> None:
        """Prepare the devices of ``slots``. Where preparing is dear (the reference builds celpy
        values) the activation cache is read and filled, one lock pass each, so a cluster's devices
        are prepared once for all classes; where it is cheap (cel-rust) the cache is skipped: a
        lookup would cost more than preparing again."""
        prepared, distinct, keys = batch.prepared, batch.distinct, batch.keys
        if not self._backend.cache_prepared:
            for slot in slots:
                prepared[slot] = self._prepare(distinct[slot])
            return
        found = self._activations.get_many([keys[slot] for slot in slots])
        made: list[int] = []
        for slot, value in zip(slots, found, strict=True):
            if value is _MISSING:
                made.append(slot)
            else:
                prepared[slot] = value
        for slot in made:
            prepared[slot] = self._prepare(distinct[slot])
        self._activations.put_many((key, prepared[slot]) for slot in made if (key := keys[slot]) is not None)

    def _evaluate_many(
        self, program: object, devices: list[CelDevice], values: list[object]
    ) -> list[bool | CelRuntimeError]:
        """Outcomes for devices whose values are prepared (or whose preparing failed): one backend
        call for all that prepared; if it fails as a whole, one ``_evaluate`` each."""
        ready = [i for i, v in enumerate(values) if not isinstance(v, CelRuntimeError)]
        outcomes: list[bool | CelRuntimeError] = list(values)  # type: ignore[arg-type]
        if ready:
            try:
                batch = self._backend.evaluate_many(program, [values[i] for i in ready])
            except Exception:  # RecursionError, MemoryError, an engine defect: device by device
                batch = [self._evaluate(program, devices[i], False, values[i]) for i in ready]
            for i, outcome in zip(ready, batch, strict=True):
                outcomes[i] = outcome
        return outcomes

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
                cached = self._backend.compile(expression, self._env)
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


class _Batch:
    """The devices of one batch call, each distinct fingerprint once (``distinct``, with its
    ``keys``: the fingerprint, or None if it has none or cannot be hashed), ``slot_of`` each
    device, and per slot the prepared values once made (shared by the call's expressions)."""

    __slots__ = ("distinct", "keys", "prepared", "slot_of")

    def __init__(self, devices: Sequence[CelDevice]) -> None:
        index: dict[Hashable, int] = {}
        self.distinct: list[CelDevice] = []
        self.keys: list[Hashable | None] = []
        self.slot_of: list[int] = []
        for device in devices:
            fingerprint: Hashable | None = device.fingerprint
            slot: int | None = None
            if fingerprint is not None:
                try:
                    slot = index.get(fingerprint)
                    if slot is None:
                        index[fingerprint] = len(self.distinct)
                except TypeError:  # unhashable: evaluated without caching
                    fingerprint = None
            if slot is None:
                slot = len(self.distinct)
                self.distinct.append(device)
                self.keys.append(fingerprint)
            self.slot_of.append(slot)
        self.prepared: list[object] = [_MISSING] * len(self.distinct)


def _copy(verdict: bool | CelError) -> bool | CelError:
    if isinstance(verdict, CelError):
        error = verdict.fresh()
        error.selector_index = verdict.selector_index
        return error
    return verdict
