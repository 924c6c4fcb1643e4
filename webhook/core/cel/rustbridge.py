"""Where ``cel-rust`` keeps the reference's semantics: its library functions, and its verdict
wherever Rust errs.

* **Library functions** (quantity, semver, ``includes``, ``asList``, the strings subset) are the
  reference's own Python functions, called back from Rust (:func:`callback`). One that returns a
  CEL error marks this thread's evaluation as failed (:data:`callback_failed`) rather than raising.
* **Errors**: any error in the Rust evaluation (a missing key, no overload, a guard the
  translation emitted, a failed callback) is resolved by evaluating the same expression on the
  same device with the reference (:func:`reference_outcome`), whose result (an error with the
  reference's text, or a value where the reference absorbs the error) is returned. So error texts
  are the reference's by construction, and a selector runtime error stays an allocation error.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any

from celpy.evaluation import CELEvalError

from .environment import CompiledExpression
from .errors import CelRuntimeError
from .evaluator import ALL_FUNCTIONS as FUNCTIONS
from .evaluator import _call, evaluate
from .rustvalues import RustDevice, decode, encode

# Library functions called back from Rust (the reference's implementations).
CALLBACKS = frozenset(
    {
        *("quantity", "isQuantity", "isInteger", "asInteger", "asApproximateFloat", "sign", "add", "sub"),
        *("isLessThan", "isGreaterThan", "compareTo", "semver", "isSemver", "major", "minor", "patch"),
        *("includes", "asList", "lowerAscii", "upperAscii", "trim", "charAt", "indexOf", "lastIndexOf"),
        *("replace", "split", "substring", "join", "contains", "startsWith", "endsWith", "size"),
    }
)

#: Set by a library function that returned a CEL error during this thread's Rust evaluation: the
#: native result is then discarded and the reference decides. (Raising from the callback would do
#: too, but the binding prints every exception a Python function raises to stderr.)
callback_failed = threading.local()


def callback(name: str) -> Callable[..., Any]:
    """The reference's library function ``name`` as Rust calls it: encoded values in and out; a
    CEL error (or a value it cannot take) sets :data:`callback_failed` and returns None."""
    fn = FUNCTIONS[name]

    def call(*args: Any) -> Any:
        try:
            result = _call(fn, name, [decode(a) for a in args])
            if not isinstance(result, CELEvalError):
                return encode(result)
        except Exception:  # a value the reference's function cannot take, an unencodable result
            pass
        callback_failed.value = True
        return None

    call.__name__ = name
    return call


def reference_outcome(compiled: CompiledExpression, dev: RustDevice) -> bool | CelRuntimeError:
    """The reference's outcome for ``compiled`` on ``dev``: its verdict, or its error."""
    try:
        return evaluate(compiled, dev.activation())
    except CelRuntimeError as e:
        return e
