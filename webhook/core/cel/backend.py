"""The one small interface between :class:`~.engine.SelectorEngine` and a CEL engine.

``SelectorEngine`` owns the caches (programs by expression text, prepared devices by fingerprint,
outcomes by both) and the error contract; a :class:`Backend` only compiles, prepares and evaluates.
Two backends exist:

* ``cel-python`` (the default and the reference): celpy with this package's environment
  (:mod:`.environment`, :mod:`.evaluator`, :mod:`.library`);
* ``cel-rust``: the Rust engine of PyPI ``common-expression-language`` (import name ``cel``), an
  optional extra (``pip install 'draxr[cel-fast]'``); see :mod:`.celrust`. It compiles through the
  reference front end, so compile errors and limits are the reference's, and hands every case it
  cannot prove equal to the reference back to the reference.

Every backend raises only :class:`~.errors.CelCompileError` from ``compile`` and
:class:`~.errors.CelRuntimeError` from ``prepare``/``evaluate`` (RecursionError and MemoryError
propagate: the engine reports them without caching).
"""

from __future__ import annotations

import importlib.util
from collections.abc import Sequence
from typing import Protocol

from .errors import CelRuntimeError
from .releases import SCHEDULER, CelEnvironment
from .values import CelDevice

#: The reference engine: the default of ``--cel-engine``.
REFERENCE_ENGINE = "cel-python"
#: The compiled engine (Rust, PyPI ``common-expression-language``), an optional extra.
RUST_ENGINE = "cel-rust"
#: Every engine name ``--cel-engine`` accepts, the default first.
ENGINES = (REFERENCE_ENGINE, RUST_ENGINE)
#: ``--cel-engine``'s default. It stays the reference: the compiled engine's parity suite is green,
#: but it is an optional extra (not in the image by default) and hands unproven cases back to the
#: reference anyway; see the package docs of :mod:`.celrust`.
DEFAULT_ENGINE = REFERENCE_ENGINE


class Backend(Protocol):
    """Compile, prepare, evaluate; no caching (the engine caches) and no other exception types."""

    #: The engine's name, one of :data:`ENGINES`.
    name: str
    #: Whether prepared devices are worth the engine's activation cache (preparing is dear).
    cache_prepared: bool

    def compile(self, expression: str, env: CelEnvironment = SCHEDULER) -> object:
        """A program for ``expression`` in ``env``, shareable between threads; raises
        CelCompileError."""
        ...

    def prepare(self, device: CelDevice) -> object:
        """Per-device values, shareable between threads and expressions; raises CelRuntimeError."""
        ...

    def evaluate(self, program: object, prepared: object) -> bool:
        """The selector's verdict for one device; raises CelRuntimeError."""
        ...

    def evaluate_many(self, program: object, prepared: Sequence[object]) -> list[bool | CelRuntimeError]:
        """``evaluate`` for each device: its verdict, or the CelRuntimeError it raised (returned).
        The engine's batch calls use it; any other exception aborts the batch, and the engine then
        evaluates its devices one by one."""
        ...

    def stats(self) -> dict[str, int]:
        """Backend-specific counters (may be empty)."""
        ...


_default = [DEFAULT_ENGINE]


def default_engine() -> str:
    """The engine of a ``SelectorEngine()`` built without ``engine=`` (tests switch it)."""
    return _default[0]


def set_default_engine(name: str) -> None:
    """Make ``name`` the engine of ``SelectorEngine()``; ValueError if unknown or not installed."""
    make_backend(name)
    _default[0] = name


def available_engines() -> list[str]:
    """Engine names usable in this process (``cel-rust`` needs its extra installed)."""
    names = [REFERENCE_ENGINE]
    if importlib.util.find_spec("cel") is not None:
        names.append(RUST_ENGINE)
    return names


def make_backend(name: str) -> Backend:
    """The backend called ``name``; ValueError for an unknown or uninstalled engine."""
    if name == REFERENCE_ENGINE:
        from .reference import ReferenceBackend

        return ReferenceBackend()
    if name == RUST_ENGINE:
        if importlib.util.find_spec("cel") is None:
            raise ValueError(
                "CEL engine 'cel-rust' needs the optional extra: pip install 'draxr[cel-fast]' "
                "(PyPI common-expression-language)"
            )
        from .celrust import RustBackend

        return RustBackend()
    raise ValueError(f"unknown CEL engine {name!r}: choose one of {', '.join(ENGINES)}")
