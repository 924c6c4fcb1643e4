"""CEL for DRA DeviceClass and request selectors (``selectors[].cel.expression``).

Two engines sit behind :class:`SelectorEngine` (see :mod:`.backend`): ``cel-python`` (the default
and the reference, described below) and ``cel-rust`` (optional extra ``cel-fast``, :mod:`.celrust`),
which gives the reference's answers and error texts, faster.

Semantics follow upstream ``dynamic-resource-allocation/cel/compile.go`` (newest: list-typed
attributes with ``includes``, ``allowMultipleAllocations``) on the cel-python engine (``celpy``
0.5), with the Kubernetes quantity and semver libraries, ``cel.bind`` and part of the strings
extension. What celpy cannot do is either added here (heterogeneous equality, unknown attribute
domains as empty maps, compile-time name and result-type checks, length/nesting/step limits) or
rejected at compile time. Not supported: optional syntax (``a[?'k']``, ``.?f``), the Kubernetes
lists/sets/regex/URL/IP/CIDR/format libraries, quantity ``mul``/``div``/``divInt``, strings
``format``/``quote``/``reverse``, 3-argument ``map``, and cost estimation (a step budget and
size caps stand in for the runtime cost limit).
"""

from .backend import DEFAULT_ENGINE, ENGINES, available_engines
from .engine import SelectorEngine
from .errors import CelCompileError, CelError, CelRuntimeError
from .gcpause import collector_paused
from .values import CelDevice, Fingerprint, SimpleDevice, parse_attribute

__all__ = [
    "DEFAULT_ENGINE",
    "ENGINES",
    "CelCompileError",
    "CelDevice",
    "CelError",
    "CelRuntimeError",
    "Fingerprint",
    "SelectorEngine",
    "SimpleDevice",
    "available_engines",
    "collector_paused",
    "parse_attribute",
]
