"""The checker's vocabulary: the names it knows (functions, namespaces, operators, macros, the
device's fields) and CEL types spelled as strings (``list(int)``, ``map(string, dyn)``): their
parameters and joins, the overloads and result types of the libraries' functions."""

from __future__ import annotations

from . import extlib, formatlib, netlib
from .library import KNOWN_FUNCTIONS as _LIBRARY_FUNCTIONS

#: Every function or method name the compile-time check accepts (namespaced ones as ``ns.f``).
KNOWN_FUNCTIONS = (
    _LIBRARY_FUNCTIONS
    | frozenset(extlib.FUNCTIONS)
    | frozenset(netlib.FUNCTIONS)
    | frozenset(formatlib.FUNCTIONS)
)
#: Identifiers that, when not a variable, qualify a function name (``sets.contains(...)``).
NAMESPACES = frozenset(name.split(".", 1)[0] for name in KNOWN_FUNCTIONS if "." in name)
#: Functions whose receiver must be a list (or, for ``indexOf``/``lastIndexOf``, a string).
_LIST_RECEIVER = frozenset(
    {"isSorted", "sum", "min", "max", "slice", "flatten", "distinct", "sort", "sortBy", "reverse"}
)
_LIST_OR_STRING_RECEIVER = frozenset({"indexOf", "lastIndexOf"})

#: Grammar rule of an operator -> the CEL function that implements it (checker and evaluator).
OPERATORS = {
    "relation_eq": "_==_",
    "relation_ne": "_!=_",
    "relation_lt": "_<_",
    "relation_le": "_<=_",
    "relation_gt": "_>_",
    "relation_ge": "_>=_",
    "relation_in": "_in_",
    "addition_add": "_+_",
    "addition_sub": "_-_",
    "multiplication_mul": "_*_",
    "multiplication_div": "_/_",
    "multiplication_mod": "_%_",
    "unary_not": "!_",
    "unary_neg": "-_",
}

_MACROS = frozenset({"all", "exists", "exists_one", "map", "filter", "sortBy"})
_UNSUPPORTED_METHODS = frozenset({"reduce"})
#: The accumulator cel-go's macros expand to; an iteration variable may not take its name.
_ACCUMULATOR = "__result__"
#: cel-go's two-variable comprehensions (``ext.TwoVarComprehensions``) by name: argument counts.
TWO_VARIABLE_MACROS = {
    "all": (3,),
    "exists": (3,),
    "existsOne": (3,),
    "exists_one": (3,),  # cel-go registers both spellings for two variables
    "transformList": (3, 4),
    "transformMap": (3, 4),
    "transformMapEntry": (3, 4),
}  # celpy extensions that are not CEL
_TYPE_IDENTS = frozenset(
    {"int", "uint", "double", "bool", "string", "bytes", "null_type", "type", "list", "map"}
)
_DEVICE_FIELDS = {
    "driver": "string",
    "allowMultipleAllocations": "bool",
    "attributes": "map(string, map(string, dyn))",
    "capacity": "map(string, map(string, kubernetes.Quantity))",
}
_DEVICE = "kubernetes.DRADevice"
_QUANTITY = "kubernetes.Quantity"  # no conversion takes one (``ip``/``cidr`` have ``string``)
_STRING_ARG = frozenset({"quantity", "isQuantity", "semver", "isSemver"}) | netlib.STRING_ARGUMENT
_PRIMITIVES = frozenset({"bool", "int", "uint", "double", "string", "bytes", "null_type"})
_NUMERIC = frozenset({"int", "uint", "double"})


#: The overloads of the strings extension (version 2, as Kubernetes' base environment declares it)
#: on a string receiver; ``reverse`` is version 3 only (lists have their own).
_STRING_METHODS: dict[str, tuple[tuple[str, ...], ...]] = {
    "charAt": (("int",),),
    "indexOf": (("string",), ("string", "int")),
    "lastIndexOf": (("string",), ("string", "int")),
    "replace": (("string", "string"), ("string", "string", "int")),
    "split": (("string",), ("string", "int")),
    "substring": (("int",), ("int", "int")),
    "reverse": (),
}


def _conditional_mismatch(condition: str, accumulator: str) -> str:
    """cel-go's error for a macro whose step is ``condition ? step : accumulator``."""
    return f"found no matching overload for '_?_:_' applied to '({condition}, {accumulator}, {accumulator})'"


def _predicate_mismatch(macro: str, predicate: str, element: str | None) -> str:
    """cel-go's error for a non-bool predicate, as the macro's expansion reports it: ``all`` and
    ``exists`` join it with a bool accumulator, ``exists_one`` counts under ``p ? n + 1 : n``,
    ``filter`` appends under ``p ? l + [x] : l``."""
    if macro in ("all", "exists"):
        return f"expected type 'bool' but found '{predicate}'"
    if macro == "filter":
        return _conditional_mismatch(predicate, f"list({element or 'dyn'})")
    return _conditional_mismatch(predicate, "int")


#: The argument kinds each format clause takes (cel-go's static format check).
_FORMAT_KINDS = {
    "s": frozenset({"list", "map", "int", "uint", "double", "bool", "string", "bytes", "type", "null_type"}),
    "d": frozenset({"int", "uint"}),
    "f": frozenset({"double", "string"}),
    "e": frozenset({"double", "string"}),
    "b": frozenset({"int", "uint", "bool"}),
    "x": frozenset({"int", "uint", "string", "bytes"}),
    "X": frozenset({"int", "uint", "string", "bytes"}),
    "o": frozenset({"int", "uint"}),
}
_FORMAT_ERRORS = {
    "s": "string clause can only be used on strings, bools, bytes, ints, doubles, maps, lists, types, "
    "durations, and timestamps",
    "d": "decimal clause can only be used on integers",
    "f": "fixed-point clause can only be used on doubles",
    "e": "scientific clause can only be used on doubles",
    "b": "only integers and bools can be formatted as binary",
    "x": "only integers, byte buffers, and strings can be formatted as hex",
    "X": "only integers, byte buffers, and strings can be formatted as hex",
    "o": "octal clause can only be used on integers",
}


def _format_clauses(text: str, arguments: int) -> list[tuple[int, str]] | str:
    """The (argument index, verb) of each clause of a format string, or the error that parsing
    it gives (as the strings extension's ``format`` reports it)."""
    clauses: list[tuple[int, str]] = []
    i = 0
    while i < len(text):
        if text[i] != "%":
            i += 1
            continue
        i += 1
        if i < len(text) and text[i] == "%":
            i += 1
            continue
        if i < len(text) and text[i] == ".":
            j = i + 1
            while j < len(text) and text[j].isdigit():
                j += 1
            if j == i + 1:
                return 'could not parse formatting clause: unable to convert "" to int'
            i = j
        if i >= len(text):
            return "could not parse formatting clause: unexpected end of string"
        verb = text[i]
        i += 1
        if len(clauses) >= arguments:
            return f"index {len(clauses)} out of range"
        if verb not in _FORMAT_KINDS:
            return f'could not parse formatting clause: unrecognized formatting clause "{verb}"'
        clauses.append((len(clauses), verb))
    return clauses


#: The type conversions' overloads (argument types) in cel-go's standard library.
_CONVERSIONS: dict[str, frozenset[str]] = {
    "int": frozenset(
        {"int", "uint", "double", "string", "google.protobuf.Timestamp", "google.protobuf.Duration"}
    ),
    "uint": frozenset({"int", "uint", "double", "string"}),
    "double": frozenset({"int", "uint", "double", "string"}),
    "string": frozenset(
        {
            "int",
            "uint",
            "double",
            "bool",
            "string",
            "bytes",
            "google.protobuf.Timestamp",
            "google.protobuf.Duration",
        }
    ),
    "bool": frozenset({"bool", "string"}),
    "bytes": frozenset({"bytes", "string"}),
}


def _fits(types: list[str], overloads: tuple[tuple[str, ...], ...]) -> bool:
    """Whether some overload takes these argument types (a ``dyn`` argument takes any)."""
    return any(
        len(params) == len(types) and all(t in ("dyn", p) for t, p in zip(types, params, strict=True))
        for params in overloads
    )


def _type_args(t: str) -> list[str]:
    """The parameters of ``list(T)`` or ``map(K, V)`` (top-level commas only)."""
    inner = t[t.index("(") + 1 : -1]
    args, depth, start = [], 0, 0
    for i, c in enumerate(inner):
        if c == "(":
            depth += 1
        elif c == ")":
            depth -= 1
        elif c == "," and depth == 0:
            args.append(inner[start:i].strip())
            start = i + 1
    args.append(inner[start:].strip())
    return args


def _kind(t: str) -> str:
    """``list``, ``map``, ``optional_type`` or the type itself."""
    return t.split("(", 1)[0]


def _most_general(a: str, b: str) -> str | None:
    """cel-go's join of two assignable types (``dyn`` wins, parameter by parameter); None when
    neither is assignable to the other (the checker then joins them to ``dyn``)."""
    if a == b:
        return a
    if a == "dyn" or b == "dyn":
        return "dyn"
    if _kind(a) != _kind(b) or "(" not in a or "(" not in b:
        return None
    params = [_most_general(x, y) for x, y in zip(_type_args(a), _type_args(b), strict=False)]
    if len(_type_args(a)) != len(_type_args(b)) or None in params:
        return None
    return f"{_kind(a)}({', '.join(str(p) for p in params)})"


def _optional(t: str) -> str:
    return t if t.startswith("optional_type(") else f"optional_type({t})"


def _known_not(t: str, wanted: str) -> bool:
    return t != "dyn" and t != wanted


_LITERAL_TYPES = {
    "INT_LIT": "int",
    "UINT_LIT": "uint",
    "FLOAT_LIT": "double",
    "STRING_LIT": "string",
    "MLSTRING_LIT": "string",
    "BYTES_LIT": "bytes",
    "BOOL_LIT": "bool",
    "NULL_LIT": "null_type",
}

_RESULT_TYPES = {
    "size": "int",
    "int": "int",
    "uint": "uint",
    "double": "double",
    "string": "string",
    "bool": "bool",
    "bytes": "bytes",
    "type": "type",
    "matches": "bool",
    "contains": "bool",
    "startsWith": "bool",
    "endsWith": "bool",
    "quantity": "kubernetes.Quantity",
    "isQuantity": "bool",
    "isInteger": "bool",
    "asInteger": "int",
    "asApproximateFloat": "double",
    "sign": "int",
    "add": "kubernetes.Quantity",
    "sub": "kubernetes.Quantity",
    "isLessThan": "bool",
    "isGreaterThan": "bool",
    "compareTo": "int",
    "semver": "kubernetes.Semver",
    "isSemver": "bool",
    "major": "int",
    "minor": "int",
    "patch": "int",
    "includes": "bool",
    "asList": "list(dyn)",
    "lowerAscii": "string",
    "upperAscii": "string",
    "trim": "string",
    "charAt": "string",
    "indexOf": "int",
    "lastIndexOf": "int",
    "replace": "string",
    "split": "list(string)",
    "substring": "string",
    "join": "string",
    **extlib.RESULT_TYPES,
    **netlib.RESULT_TYPES,
    **formatlib.RESULT_TYPES,
}
