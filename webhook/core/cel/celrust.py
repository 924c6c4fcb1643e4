"""The ``cel-rust`` backend: the Rust CEL engine of PyPI ``common-expression-language``.

The reference (``cel-python``) defines the semantics; this backend is a faster way to get the
same answers, and hands back to the reference whatever it cannot prove equal:

* **Compiling** runs the reference front end first (:func:`.environment.compile_expression`:
  length and nesting limits, parse, checks), so compile errors are the reference's, word for
  word. The shaped tree is then translated to a Rust program, or declined: then the reference
  evaluates it, always (:mod:`.rusttranslation`).
* **Device values** are not converted wholesale: each program reads flat variables looked up per
  device (:mod:`.rustvalues`, with the quantity and semver encodings). Results are memoised per
  program by those inputs (here), so devices that agree on what a selector reads cost one Rust
  call between them.
* **Library functions and errors** keep the reference's semantics (:mod:`.rustbridge`): library
  functions are the reference's own, called back from Rust, and any error in the Rust evaluation
  is resolved by the reference on the same device.

Neither engine has a runtime cost limit of its own: the reference's length, nesting and tree depth
limits apply to both, and the translation's step bound keeps runaway macros on the reference's
budget.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Hashable, Sequence
from typing import Any

import cel

from .environment import CompiledExpression, compile_expression
from .errors import CelRuntimeError
from .releases import SCHEDULER, CelEnvironment
from .rustbridge import callback, callback_failed, reference_outcome
from .rusttranslation import Declined, translate
from .rustvalues import MISSING, Input, Reader, RustDevice, reader, validate

#: Results memoised per program (by the values it reads); the memo is dropped when full.
MAX_MEMO = 8192
#: Evaluations a program makes without its memo after a full memo had fewer than 1/16 hits.
UNMEMOISED = 8 * MAX_MEMO


class RustProgram:
    """A compiled selector: the reference's tree, and the Rust program unless declined."""

    __slots__ = (
        "compiled",
        "declined",
        "functions",
        "inputs",
        "memo",
        "memo_hits",
        "program",
        "readers",
        "unmemoised",
    )

    def __init__(self, compiled: CompiledExpression) -> None:
        self.compiled = compiled
        self.memo: dict[Hashable, bool | CelRuntimeError] = {}
        self.memo_hits = 0  # since the memo was last dropped
        self.unmemoised = 0  # evaluations left to make without the memo
        self.inputs: tuple[tuple[str, Input], ...] = ()
        self.readers: tuple[tuple[str, Reader], ...] = ()
        self.functions: dict[str, Callable[..., Any]] = {}
        self.program: Any = None
        self.declined = ""
        try:
            translation = translate(compiled)
            program = cel.compile(translation.source)
        except Declined as e:
            self.declined = str(e) or "declined"
            return
        except Exception as e:  # the Rust parser refused the translation: the reference evaluates
            self.declined = f"rust compile: {type(e).__name__}"
            return
        self.program = program
        self.inputs = translation.inputs
        self.readers = tuple((name, reader(spec)) for name, spec in translation.inputs)
        self.functions = {f"{translation.prefix}f_{n}": callback(n) for n in translation.callbacks}


class RustBackend:
    """``cel-rust``: see the module docs."""

    name = "cel-rust"
    cache_prepared = False  # a RustDevice wraps the device: cheaper than a cache lookup

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._native = 0
        self._reference = 0
        self._memo_hits = 0
        self._declined = 0

    def compile(self, expression: str, env: CelEnvironment = SCHEDULER) -> RustProgram:
        program = RustProgram(compile_expression(expression, env))
        if program.program is None:
            with self._lock:
                self._declined += 1
        return program

    def prepare(self, device: Any) -> RustDevice:
        return validate(device)

    def evaluate(self, program: object, prepared: object) -> bool:
        assert isinstance(prepared, RustDevice)
        outcome = self.evaluate_many(program, (prepared,))[0]
        if isinstance(outcome, CelRuntimeError):
            raise outcome.fresh()
        return outcome

    def evaluate_many(self, program: object, prepared: Sequence[object]) -> list[bool | CelRuntimeError]:
        """One pass over the devices: each device's inputs are read, and the Rust program runs
        once per distinct inputs (the memo); Rust's errors go to the reference (module docs)."""
        assert isinstance(program, RustProgram)
        devices: Sequence[RustDevice] = prepared  # type: ignore[assignment]
        if program.program is None:
            return [self._reference_outcome(program, dev) for dev in devices]
        out: list[bool | CelRuntimeError] = []
        readers = program.readers
        single = readers[0] if len(readers) == 1 else None
        memo = program.memo
        hits = 0
        for dev in devices:
            variables: dict[str, Any] = {}
            memo_key: Hashable
            if single is not None:  # one input: its key is the memo key
                memo_key, value = single[1](dev)
                if value is not MISSING:
                    variables[single[0]] = value
            else:
                keys: list[Hashable] = []
                for name, read in readers:
                    key, value = read(dev)
                    keys.append(key)
                    if value is not MISSING:
                        variables[name] = value
                memo_key = tuple(keys)
            if program.unmemoised > 0:  # the memo was not paying off: run without it a while
                program.unmemoised -= 1
                out.append(self._run(program, dev, variables))
                continue
            try:
                hit = memo.get(memo_key)
            except TypeError:  # a device value that cannot be hashed (a list where a tuple belongs)
                out.append(self._run(program, dev, variables))
                continue
            if hit is not None:
                hits += 1
                program.memo_hits += 1
                out.append(hit)
                continue
            outcome = self._run(program, dev, variables)
            if len(memo) >= MAX_MEMO:
                if program.memo_hits < MAX_MEMO // 16:  # inputs unique per device (an ID, a UUID)
                    program.unmemoised = UNMEMOISED
                memo.clear()
                program.memo_hits = 0
            memo[memo_key] = outcome
            out.append(outcome)
        self._memo_hits += hits  # counters are statistics: no lock on the hot path
        return out

    def _run(
        self, program: RustProgram, dev: RustDevice, variables: dict[str, Any]
    ) -> bool | CelRuntimeError:
        """The Rust program's verdict on ``variables``, or the reference's outcome where Rust has
        none (an error, a non-boolean, a library callback that failed)."""
        try:
            if program.functions:
                callback_failed.value = False
                result = program.program.execute(cel.Context(variables, program.functions))
                if callback_failed.value:
                    result = None
            else:
                result = program.program.execute(variables)
        except (RecursionError, MemoryError):
            raise
        except Exception:
            result = None
        if result is True or result is False:
            self._native += 1
            return result
        return self._reference_outcome(program, dev)

    def _reference_outcome(self, program: RustProgram, dev: RustDevice) -> bool | CelRuntimeError:
        self._reference += 1
        return reference_outcome(program.compiled, dev)

    def stats(self) -> dict[str, int]:
        return {
            "native_evaluations": self._native,
            "reference_evaluations": self._reference,
            "memo_hits": self._memo_hits,
            "declined_programs": self._declined,
        }
