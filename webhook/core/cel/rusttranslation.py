"""Translation of a checked CEL expression into the source of a Rust program, or its refusal.

The reference front end has already parsed and checked the expression (compile errors are the
reference's, word for word); its shaped tree is *translated* to the Rust engine's CEL, or
*declined* (:class:`Declined`: the expression is then evaluated by the reference, always).
Declined: arithmetic and unary minus (int64 overflow and division rules differ), map literals, uint
literals, ``matches`` (RE2 vs Python regex), conversions (``int()``, ``string()``, ``type()``,
timestamps), ``device``/``device.attributes`` used as whole values, macro nests whose worst-case
node count could bring their cost near upstream's runtime cost limit (the Rust engine tracks no
cost; the reference does, :mod:`.cost`), and every function,
macro or syntax without a callback here (the lists, sets, regex, URL, IP, CIDR and format
libraries, optional syntax, two-variable comprehensions, ``sortBy``, three-argument ``map``).

Device paths become flat input variables (:class:`.rustvalues.Input`). Where the reference raises
"no matching overload" (a quantity on the left of ``==`` with another type, ``size()``/``in``/macros
on one) the translation guards natively and fails, so the reference decides (:mod:`.rustbridge`);
library functions become calls back to the reference's (``<prefix>f_<name>``), constant ones
(``quantity("1Gi")``) are folded here.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import lark
from celpy import celtypes
from celpy.evaluation import CELEvalError

from ..api.constants import MAX_ATTRIBUTE_VALUES_PER_DEVICE
from ..api.quantity import Quantity
from ..api.semver import Semver
from .cost import CEL_SELECTOR_EXPRESSION_MAX_COST
from .environment import CompiledExpression
from .evaluator import _call
from .library import FUNCTIONS, MAX_VALUE_SIZE
from .rustbridge import CALLBACKS
from .rustvalues import TAG_QUANTITY, TAG_SEMVER, Input, quantity_text, semver_text
from .treenodes import _ident_name

#: Node visits a translated expression may need at worst: a node costs a few units at most, so
#: such an expression stays well under the cost limit and needs no cost tracking.
_MAX_STEPS = CEL_SELECTOR_EXPRESSION_MAX_COST // 20
#: Assumed element counts for macro targets of unknown size, for the step bound.
_LIST_BOUND = MAX_ATTRIBUTE_VALUES_PER_DEVICE
_MAP_BOUND = 64
_UNKNOWN_BOUND = MAX_VALUE_SIZE

# Static types of translated nodes.
BOOL, INT, UINT, DOUBLE, STRING, BYTES, NULL = "bool", "int", "uint", "double", "string", "bytes", "null"
LIST, QUANTITY, SEMVER, DYN = "list", "quantity", "semver", "dyn"
ATTRS, CAPS = "attributes-domain", "capacity-domain"  # one domain's map: map(string, dyn|Quantity)
#: Types whose values are never quantity/semver encodings at the top level.
_PLAIN = frozenset({BOOL, INT, UINT, DOUBLE, STRING, BYTES, NULL, LIST, ATTRS, CAPS})

_FOLDABLE = frozenset({"quantity", "isQuantity", "semver", "isSemver"})
_NATIVE_STRING_TESTS = frozenset({"startsWith", "endsWith", "contains"})
_RESULT_TYPES = {
    "quantity": QUANTITY,
    "add": QUANTITY,
    "sub": QUANTITY,
    "semver": SEMVER,
    "asList": LIST,
    "split": LIST,
    "size": INT,
    "compareTo": INT,
    "sign": INT,
    "asInteger": INT,
    "indexOf": INT,
    "lastIndexOf": INT,
    "major": INT,
    "minor": INT,
    "patch": INT,
    "asApproximateFloat": DOUBLE,
    **dict.fromkeys(("lowerAscii", "upperAscii", "trim", "charAt", "replace", "substring", "join"), STRING),
    **dict.fromkeys(("isQuantity", "isInteger", "isLessThan", "isGreaterThan", "isSemver"), BOOL),
    **dict.fromkeys(("includes", "contains", "startsWith", "endsWith"), BOOL),
}
_MACROS = frozenset({"all", "exists", "exists_one", "map", "filter"})
_RELATIONS = {
    "relation_eq": "==",
    "relation_ne": "!=",
    "relation_lt": "<",
    "relation_le": "<=",
    "relation_gt": ">",
    "relation_ge": ">=",
}


class Declined(Exception):
    """The translation cannot promise the reference's answer: the reference evaluates."""


# --- translation ------------------------------------------------------------------------------


@dataclass(slots=True)
class _Node:
    """A translated subexpression: CEL text and static type, or a pending device path."""

    text: str
    type: str
    #: "device", "domains" (device.attributes / device.capacity) or "domain" (one of its domains)
    pending: str = ""
    which: str = ""
    domain: str = ""


@dataclass(frozen=True, slots=True)
class Translation:
    source: str
    inputs: tuple[tuple[str, Input], ...]
    callbacks: tuple[str, ...]
    #: Generated names (inputs, callbacks) start with this; no identifier of the expression does.
    prefix: str


def translate(compiled: CompiledExpression) -> Translation:
    """The Rust source of a checked expression; raises :class:`Declined`."""
    idents = _identifiers(compiled.ast)
    prefix = "_x"
    while any(i.startswith(prefix) for i in idents):
        prefix += "x"
    translator = _Translator(compiled.literals, prefix)
    if _steps(compiled.ast, {}) > _MAX_STEPS:
        raise Declined("macro nest too costly")
    node = translator.value(translator.t(compiled.ast, {}))
    return Translation(
        node.text,
        tuple((name, spec) for spec, name in translator.inputs.items()),
        tuple(sorted(translator.callbacks)),
        prefix,
    )


def _identifiers(root: lark.Tree[Any]) -> set[str]:
    names: set[str] = set()
    pending = [root]
    while pending:
        node = pending.pop()
        for c in node.children:
            if isinstance(c, lark.Tree):
                pending.append(c)
            elif isinstance(c, lark.Token) and c.type == "IDENT":
                names.add(str(c))
    return names


def _steps(node: lark.Tree[Any], sizes: dict[int, int]) -> int:
    """An upper bound of the reference's node visits (macro bodies times their target's size)."""
    if node.data == "member_dot_arg" and len(node.children) == 3 and str(node.children[1]) in _MACROS:
        target, _, args = node.children
        body = args.children[1]
        return 1 + _steps(target, sizes) + _size_bound(target) * (_steps(body, sizes) + 2)
    return 1 + sum(_steps(c, sizes) for c in node.children if isinstance(c, lark.Tree))


def _size_bound(target: lark.Tree[Any]) -> int:
    """Elements a macro target can have: exact for a list literal, the API's limits for a device's
    list attribute or domain map (also through ``asList()``), the value size cap otherwise."""
    if target.data == "primary" and isinstance(target.children[0], lark.Tree):
        child = target.children[0]
        if child.data == "list_lit":
            return sum(len(c.children) for c in child.children)
    if target.data == "member_dot_arg" and str(target.children[1]) == "asList" and len(target.children) == 2:
        target = target.children[0]
    if target.data in ("member_dot", "member_index"):
        inner = target.children[0]
        if inner.data in ("member_dot", "member_index"):
            return max(_LIST_BOUND, _MAP_BOUND)  # an attribute's list or a domain's map
    return _UNKNOWN_BOUND


class _Translator:
    def __init__(self, literals: dict[int, Any], prefix: str) -> None:
        self.literals = literals
        self.prefix = prefix
        self.inputs: dict[Input, str] = {}
        self.callbacks: set[str] = set()
        self.fail = f"{prefix}fail"  # an undefined variable: reading it is an error

    def var(self, spec: Input) -> str:
        name = self.inputs.get(spec)
        if name is None:
            name = self.inputs[spec] = f"{self.prefix}{len(self.inputs)}"
        return name

    def call(self, name: str, args: list[_Node]) -> _Node:
        self.callbacks.add(name)
        text = ", ".join(a.text for a in args)
        return _Node(f"{self.prefix}f_{name}({text})", _RESULT_TYPES.get(name, DYN))

    def value(self, node: _Node) -> _Node:
        """A pending device path as a value."""
        if node.pending == "domain":
            kind = ATTRS if node.which == "attributes" else CAPS
            return _Node(self.var(Input("domain", node.which, node.domain)), kind)
        if node.pending:
            raise Declined(f"{node.pending} used as a value")
        return node

    def t(self, node: lark.Tree[Any], scope: dict[str, str]) -> _Node:
        method = getattr(self, f"_{node.data}", None)
        if method is None:
            raise Declined(node.data)
        result: _Node = method(node, scope)
        return result

    # operators

    def _expr(self, node: lark.Tree[Any], scope: dict[str, str]) -> _Node:
        c, a, b = (self.value(self.t(x, scope)) for x in node.children)
        return _Node(f"({c.text} ? {a.text} : {b.text})", a.type if a.type == b.type else DYN)

    def _conditionalor(self, node: lark.Tree[Any], scope: dict[str, str]) -> _Node:
        a, b = (self.value(self.t(x, scope)) for x in node.children)
        return _Node(f"({a.text} || {b.text})", BOOL)

    def _conditionaland(self, node: lark.Tree[Any], scope: dict[str, str]) -> _Node:
        a, b = (self.value(self.t(x, scope)) for x in node.children)
        return _Node(f"({a.text} && {b.text})", BOOL)

    def _unary(self, node: lark.Tree[Any], scope: dict[str, str]) -> _Node:
        op, operand = node.children
        if op.data != "unary_not":
            raise Declined("unary minus")
        x = self.value(self.t(operand, scope))
        return _Node(f"(!{x.text})", BOOL)

    def _in_empty(self, node: lark.Tree[Any], scope: dict[str, str]) -> _Node:
        """``x in []``, folded at compile time (``folding.IN_EMPTY``)."""
        return _Node("false", BOOL)

    def _relation(self, node: lark.Tree[Any], scope: dict[str, str]) -> _Node:
        op_node, right_tree = node.children
        op = op_node.data
        left = self.t(op_node.children[0], scope)
        right = self.t(right_tree, scope)
        if op == "relation_in":
            return self._in(self.value(left), right)
        a, b = self.value(left), self.value(right)
        symbol = _RELATIONS[op]
        if op in ("relation_eq", "relation_ne"):
            return _Node(self._equality(a, b, symbol), BOOL)
        return _Node(f"({a.text} {symbol} {b.text})", BOOL)

    def _equality(self, a: _Node, b: _Node, symbol: str) -> str:
        """``==``/``!=`` where the reference raises for a quantity/semver left of another type."""
        native = f"({a.text} {symbol} {b.text})"
        if a.type in _PLAIN:
            return native
        tags = {QUANTITY: TAG_QUANTITY, SEMVER: TAG_SEMVER}
        if a.type in tags:
            if b.type == a.type:
                return native
            if b.type == DYN:
                tag = _str(tags[a.type])
                return f"((type({b.text}) == map && {tag} in {b.text}) ? {native} : {self.fail})"
            return self.fail
        # a is dyn: it may be an encoding at run time
        if b.type in tags:
            tag = _str(tags[b.type])
            return f"((type({a.text}) == map && !({tag} in {a.text})) ? {self.fail} : {native})"
        if b.type != DYN:
            return f"(type({a.text}) == map ? {self.fail} : {native})"
        q, v = _str(TAG_QUANTITY), _str(TAG_SEMVER)
        same = (
            f"(type({b.text}) == map && (({q} in {a.text} && {q} in {b.text}) || "
            f"({v} in {a.text} && {v} in {b.text})))"
        )
        return f"(type({a.text}) == map ? ({same} ? {native} : {self.fail}) : {native})"

    def _in(self, item: _Node, container: _Node) -> _Node:
        if container.pending == "domains":
            if item.type == STRING and item.text.startswith('"') and item.pending == "":
                literal = _literal_text(item.text)
                if literal is not None:
                    return _Node(self.var(Input("has_domain", container.which, literal)), BOOL)
            raise Declined("'in' on device.attributes with a computed key")
        c = self.value(container)
        if c.type in (LIST, ATTRS, CAPS):
            return _Node(f"({item.text} in {c.text})", BOOL)
        if c.type == DYN:
            return _Node(f"(type({c.text}) == map ? {self.fail} : ({item.text} in {c.text}))", BOOL)
        return _Node(self.fail, BOOL)

    # members

    def _member_dot(self, node: lark.Tree[Any], scope: dict[str, str]) -> _Node:
        target_tree, field = node.children
        return self._select(self.t(target_tree, scope), str(field), _str(str(field)), literal=True)

    def _member_index(self, node: lark.Tree[Any], scope: dict[str, str]) -> _Node:
        target_tree, index_tree = node.children
        target = self.t(target_tree, scope)
        index = self.value(self.t(index_tree, scope))
        literal = _literal_text(index.text) if index.type == STRING else None
        if target.pending and literal is not None:
            return self._select(target, literal, index.text, literal=True)
        t = self.value(target)
        return _Node(f"{t.text}[{index.text}]", CAPS_VALUE.get(t.type, DYN))

    def _select(self, target: _Node, name: str, key_text: str, *, literal: bool) -> _Node:
        if target.pending == "device":
            if name == "driver":
                return _Node(self.var(Input("driver")), STRING)
            if name == "allowMultipleAllocations":
                return _Node(self.var(Input("multi")), BOOL)
            if name in ("attributes", "capacity"):
                return _Node("", DYN, pending="domains", which=name)
            raise Declined(f"device.{name}")
        if target.pending == "domains":
            return _Node("", DYN, pending="domain", which=target.which, domain=name)
        if target.pending == "domain":
            return _Node(
                self.var(Input("value", target.which, target.domain, name)),
                QUANTITY if target.which == "capacity" else DYN,
            )
        t = self.value(target)
        return _Node(f"{t.text}[{key_text}]", CAPS_VALUE.get(t.type, DYN))

    def _member_dot_arg(self, node: lark.Tree[Any], scope: dict[str, str]) -> _Node:
        target_tree, name_token = node.children[0], node.children[1]
        name = str(name_token)
        args: list[lark.Tree[Any]] = list(node.children[2].children) if len(node.children) == 3 else []
        if name == "bind" and _ident_name(target_tree) == "cel" and "cel" not in scope:
            var = str(_ident_name(args[0]))
            init = self.value(self.t(args[1], scope))
            body = self.value(self.t(args[2], {**scope, var: init.type}))
            return _Node(f"[{init.text}].map({var}, {body.text})[0]", body.type)
        if name in _MACROS and len(args) != 2:
            raise Declined("two-variable comprehension")
        if name in _MACROS:
            target = self.value(self.t(target_tree, scope))
            var = str(_ident_name(args[0]))
            element = STRING if target.type in (ATTRS, CAPS) else DYN
            body = self.value(self.t(args[1], {**scope, var: element}))
            native = f"{target.text}.{name}({var}, {body.text})"
            result = LIST if name in ("map", "filter") else BOOL
            if target.type in (LIST, ATTRS, CAPS):
                return _Node(native, result)
            if target.type == DYN:
                return _Node(f"(type({target.text}) == map ? {self.fail} : {native})", result)
            return _Node(self.fail, result)
        target = self.value(self.t(target_tree, scope))
        return self._function(name, [target, *(self.value(self.t(a, scope)) for a in args)])

    def _function(self, name: str, args: list[_Node]) -> _Node:
        if name == "size" and len(args) == 1 and args[0].type in (LIST, ATTRS, CAPS):
            return _Node(f"size({args[0].text})", INT)
        if (
            name in _NATIVE_STRING_TESTS
            and len(args) == 2
            and args[0].type in (STRING, DYN)
            and args[1].type == STRING
        ):
            # A dyn receiver (an attribute) that is not a string has no such method in Rust either:
            # the error hands the device to the reference, which gives its own error text.
            return _Node(f"{args[0].text}.{name}({args[1].text})", BOOL)
        if name in _FOLDABLE and all(a.type in (STRING, BOOL) and a.text[:1] in '"tf' for a in args):
            folded = self._fold(name, args)
            if folded is not None:
                return folded
        if name not in CALLBACKS:
            raise Declined(f"function {name}")
        return self.call(name, args)

    def _fold(self, name: str, args: list[_Node]) -> _Node | None:
        values: list[Any] = []
        for a in args:
            if a.type == BOOL:
                values.append(celtypes.BoolType(a.text == "true"))
            else:
                text = _literal_text(a.text)
                if text is None:
                    return None
                values.append(celtypes.StringType(text))
        result = _call(FUNCTIONS[name], name, values)
        if isinstance(result, CELEvalError):
            return None
        if isinstance(result, Quantity):
            return _Node(f"{{{_str(TAG_QUANTITY)}: {_str(quantity_text(result.value))}}}", QUANTITY)
        if isinstance(result, Semver):
            return _Node(f"{{{_str(TAG_SEMVER)}: {_str(semver_text(result))}}}", SEMVER)
        return _Node("true" if result else "false", BOOL)

    # primaries

    def _primary(self, node: lark.Tree[Any], scope: dict[str, str]) -> _Node:
        (child,) = node.children
        kind = child.data
        if kind == "literal":
            return self._literal(child)
        if kind == "ident":
            name = str(child.children[0])
            if name in scope:
                return _Node(name, scope[name])
            if name == "device":
                return _Node("", DYN, pending="device")
            raise Declined(f"identifier {name}")
        if kind == "paren_expr":
            inner = self.t(child.children[0], scope)
            return inner if inner.pending else _Node(f"({inner.text})", inner.type)
        if kind == "ident_arg":
            name = str(child.children[0])
            args: list[lark.Tree[Any]] = list(child.children[1].children) if len(child.children) > 1 else []
            if name == "has":
                return self._has(args[0], scope)
            values = [self.value(self.t(a, scope)) for a in args]
            if name == "dyn":
                return _Node(values[0].text, DYN)
            return self._function(name, values)
        if kind == "list_lit":
            items = [self.value(self.t(i, scope)) for c in child.children for i in c.children]
            return _Node("[" + ", ".join(i.text for i in items) + "]", LIST)
        raise Declined(kind)

    def _has(self, arg: lark.Tree[Any], scope: dict[str, str]) -> _Node:
        target_tree, field = arg.children
        target = self.t(target_tree, scope)
        if target.pending == "domain":
            return _Node(self.var(Input("has", target.which, target.domain, str(field))), BOOL)
        t = self.value(target)
        if t.type in (ATTRS, CAPS):
            return _Node(f"has({t.text}.{field})", BOOL)
        raise Declined("has() on a computed value")

    def _literal(self, node: lark.Tree[Any]) -> _Node:
        if id(node) not in self.literals:
            raise Declined("literal")
        value = self.literals[id(node)]
        if isinstance(value, celtypes.BoolType | bool):
            return _Node("true" if value else "false", BOOL)
        if isinstance(value, celtypes.UintType):
            raise Declined("uint")
        if isinstance(value, int):
            return _Node(str(int(value)), INT)
        if isinstance(value, float):
            if not math.isfinite(value):
                raise Declined("double")
            text = repr(float(value))
            return _Node(text if ("." in text or "e" in text) else text + ".0", DOUBLE)
        if isinstance(value, str):
            return _Node(_str(str(value)), STRING)
        if isinstance(value, bytes):
            if b"\x00" in value:
                raise Declined("NUL byte")
            return _Node('b"' + "".join(f"\\x{b:02x}" for b in value) + '"', BYTES)
        if value is None:
            return _Node("null", NULL)
        raise Declined("literal")


#: What indexing a map of a static type gives.
CAPS_VALUE = {CAPS: QUANTITY}


def _str(text: str) -> str:
    """A CEL string literal for ``text``."""
    out = ['"']
    for ch in text:
        code = ord(ch)
        if ch in '"\\':
            out.append("\\" + ch)
        elif code < 0x20 or code == 0x7F:
            out.append(f"\\x{code:02x}")
        elif 0xD800 <= code <= 0xDFFF:
            raise Declined("lone surrogate")
        else:
            out.append(ch)
    out.append('"')
    return "".join(out)


def _literal_text(text: str) -> str | None:
    """The value of a literal emitted by :func:`_str`, or None for any other expression."""
    if len(text) < 2 or text[0] != '"' or text[-1] != '"':
        return None
    out: list[str] = []
    i = 1
    while i < len(text) - 1:
        ch = text[i]
        if ch == '"':
            return None  # not one literal
        if ch == "\\":
            nxt = text[i + 1]
            if nxt == "x":
                out.append(chr(int(text[i + 2 : i + 4], 16)))
                i += 4
                continue
            out.append(nxt)
            i += 2
            continue
        out.append(ch)
        i += 1
    return "".join(out)
