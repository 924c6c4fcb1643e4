"""CEL for DRA DeviceClass and request selectors (``selectors[].cel.expression``).

Two engines sit behind :class:`SelectorEngine` (see :mod:`.backend`): ``cel-python`` (the default
and the reference, described below) and ``cel-rust`` (optional extra ``cel-fast``, :mod:`.celrust`),
which gives the reference's answers and error texts, faster.

Semantics follow upstream ``dynamic-resource-allocation/cel/compile.go`` (newest: list-typed
attributes with ``includes``, ``allowMultipleAllocations``) on the cel-python engine (``celpy``
0.5), in the libraries of upstream's base environment: quantity, semver, ``cel.bind``, the strings
extension (version 2), Kubernetes lists and cel-go ``ext.Lists`` (version 3), sets, regex
(RE2), URL, IP, CIDR and format (:mod:`.extlib`, :mod:`.netlib`, :mod:`.formatlib`), optional
values and syntax (:mod:`.grammar`, optional entries and ``optMap`` included), and two-variable
comprehensions, type-checked as cel-go's checker and Kubernetes' validators do (:mod:`.checker`,
:mod:`.folding`), with upstream's error words (:mod:`.gowords`). What celpy cannot do is either added
here (heterogeneous equality, unknown attribute domains as empty maps, length/nesting limits) or
rejected at compile time. Each release has its environments (:mod:`.releases`): the scheduler's
(stored expressions) by default and on the worker (the served release's, once known), the API
server's for new selectors in ``draxr validate --strict``. The runtime cost limit is upstream's
(:mod:`.cost`), and so is the estimated cost the API server refuses a selector by at compile time
(:mod:`.estimate`, applied by :mod:`.selectorcheck`).
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
