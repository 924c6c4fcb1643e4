"""Differential CEL check: draxr's selector engines against upstream's own DRA CEL compiler.

The oracle is ``e2e/controlplane/go/celoracle`` (built by ``e2e/controlplane/build.sh``): the
DRA CEL compiler of ``k8s.io/dynamic-resource-allocation`` at the pinned 1.37 release, called as
kube-scheduler's allocator calls it. Every expression runs through the oracle and through
:class:`~webhook.core.cel.SelectorEngine` for each engine, on one device, and the outcomes are
compared: compiles or not, matches or not, runtime error or not, cost over the limit or not (at
run time, and the compile-time estimate the API server refuses a selector by), and the error's
words (exact and normalised, see :func:`normalise_error`); and whether the API server's validation
takes the selector as a new one (the environment for new expressions, ``core/cel/releases.py``).

Inputs: the curated expressions of ``bench/data/cel_curated.jsonl`` (transcribed from upstream's
CEL library, cel-go extension, apiextensions and DRA compile tests, plus issue 31's examples) and
``--count`` expressions from a seeded random generator over device fields and the libraries.

Run: ``.venv/bin/python bench/cel_differential.py [--seed N] [--count N] [--engine NAME]
[--out FILE] [--max-differences N] [--oracle PATH]``. Prints one JSON object; exits 0 (it is a
measurement) unless ``--max-differences`` is given and some engine differs on more expressions.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import re
import subprocess
import sys
from collections.abc import Callable, Iterable, Sequence
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import Any

if __name__ == "__main__":
    # Run as a script, bench/ comes first on sys.path and bench/webhook.py would shadow the package.
    _here = os.path.dirname(os.path.abspath(__file__))
    sys.path[:] = [p for p in sys.path if os.path.abspath(p or os.curdir) != _here]
    sys.path.insert(0, os.path.dirname(_here))

from e2e.controlplane.launcher import find_cel_oracle
from webhook.core.cel import SelectorEngine, SimpleDevice, available_engines
from webhook.core.cel.cost import CEL_SELECTOR_EXPRESSION_MAX_COST
from webhook.core.cel.errors import CelCompileError, CelRuntimeError
from webhook.core.cel.releases import NEWEST, CelEnvironment
from webhook.core.cel.selectorcheck import over_cost_limit

Obj = dict[str, Any]

CURATED_FILE = Path(__file__).parent / "data" / "cel_curated.jsonl"
#: Examples shown per difference category.
EXAMPLES = 5

#: The device a curated expression runs on unless its line names one: the DRA compile tests' driver
#: with one attribute of each type, an attribute of another domain and two capacities.
CURATED_DEVICE: Obj = {
    "driver": "dra.example.com",
    "attributes": {
        "name": {"string": "fish"},
        "model": {"string": "a100"},
        "count": {"int": 8},
        "ok": {"bool": True},
        "driverVersion": {"version": "1.2.3"},
        "other.example.com/name": {"string": "other"},
    },
    "capacity": {"memory": {"value": "40Gi"}, "cores": {"value": "8"}},
}


# ---------------------------------------------------------------------------------------------------
# Outcomes and their comparison


@dataclass(frozen=True)
class Outcome:
    """What one engine made of one expression on one device."""

    compiles: bool
    matches: bool | None = None
    compile_error: str | None = None
    runtime_error: str | None = None
    cost_exceeded: bool = False
    cost: int | None = None
    #: The compile-time estimate passes the limit: the API server refuses the selector.
    estimate_exceeded: bool = False
    #: The API server's validation compiles it as a new selector (the new-expressions environment);
    #: None: not asked.
    validates: bool | None = None

    @property
    def error(self) -> str | None:
        return self.compile_error if self.compile_error is not None else self.runtime_error


#: Words of the runtime error cel-go (and draxr, which copies it) gives when the cost limit stops.
COST_EXCEEDED = "actual cost limit exceeded"


def oracle_outcome(answer: Obj) -> Outcome:
    """The oracle's answer line as an :class:`Outcome`; ValueError for an input error."""
    if answer.get("inputError"):
        raise ValueError(f"oracle refused the request: {answer['inputError']}")
    asked = answer.get("validates")
    validates = None if asked is None else bool(asked)
    if not answer.get("compiles"):
        return Outcome(compiles=False, compile_error=str(answer.get("compileError", "")), validates=validates)
    runtime = answer.get("runtimeError") or None
    matches = answer.get("matches")
    estimate = answer.get("estimatedCost", 0)  # null: saturated at the maximum uint64
    return Outcome(
        compiles=True,
        matches=None if runtime is not None else bool(matches),
        runtime_error=runtime,
        cost_exceeded=bool(answer.get("costExceeded")),
        cost=answer.get("cost"),
        estimate_exceeded=estimate is None or int(estimate) > CEL_SELECTOR_EXPRESSION_MAX_COST,
        validates=validates,
    )


def draxr_outcome(
    engine: SelectorEngine, expression: str, device: SimpleDevice, validator: SelectorEngine | None = None
) -> Outcome:
    """The outcome through draxr's public entry: ``compile``, then ``matches``; ``validator`` (an
    engine in the environment for new expressions) says whether the API server would take it."""
    validates = None if validator is None else _compiles(validator, expression)
    try:
        engine.compile(expression)
    except CelCompileError as e:
        return Outcome(compiles=False, compile_error=e.message, validates=validates)
    return replace(_evaluated(engine, expression, device), validates=validates)


def _compiles(engine: SelectorEngine, expression: str) -> bool:
    try:
        engine.compile(expression)
    except CelCompileError:
        return False
    return True


def _evaluated(engine: SelectorEngine, expression: str, device: SimpleDevice) -> Outcome:
    estimate = over_cost_limit(expression)
    try:
        matched = engine.matches(expression, device)
    except CelRuntimeError as e:
        return Outcome(
            compiles=True,
            runtime_error=e.message,
            cost_exceeded=COST_EXCEEDED in e.message,
            estimate_exceeded=estimate,
        )
    except Exception as e:  # the engine promises no other exception: record it
        return Outcome(
            compiles=True, runtime_error=f"unexpected {type(e).__name__}: {e}", estimate_exceeded=estimate
        )
    return Outcome(compiles=True, matches=matched, estimate_exceeded=estimate)


_HINT = re.compile(r"\. consider using cel optional chaining.*$", re.S)
_LOCATION = re.compile(r"error: <input>:\d+:\d+:\s*")
_PREFIXES = ("compilation failed:", "operation cancelled:")


def normalise_error(text: str) -> str:
    """Error words without what legitimately differs between implementations: case, the
    ``compilation failed: ERROR: <input>:L:C:`` framing, source snippets, every error after the
    first (cel-go lists them all), the allocator's hint after ``no such key``, and a syntax
    error's parser-specific details (only "syntax error" stays)."""
    lines = [ln for ln in text.splitlines() if not ln.lstrip().startswith("|")]
    s = " ".join(lines).lower()
    s = _HINT.sub("", s)
    for prefix in _PREFIXES:
        s = s.strip()
        if s.startswith(prefix):
            s = s[len(prefix) :]
    parts = _LOCATION.split(s)
    s = (parts[1] if len(parts) > 1 else parts[0]).strip()
    if s.startswith("syntax error"):
        return "syntax error"
    return " ".join(s.replace('"', "'").split()).rstrip(".")


def compare(upstream: Outcome, draxr: Outcome) -> list[str]:
    """The difference categories between two outcomes (empty: they agree)."""
    if upstream.compiles != draxr.compiles:
        return ["compile:upstream-only" if upstream.compiles else "compile:draxr-only"]
    out: list[str] = []
    if None not in (upstream.validates, draxr.validates) and upstream.validates != draxr.validates:
        out.append("validation:upstream-only" if upstream.validates else "validation:draxr-only")
    if upstream.compiles:
        up_failed, dx_failed = upstream.runtime_error is not None, draxr.runtime_error is not None
        if upstream.cost_exceeded != draxr.cost_exceeded:
            out.append("cost-limit:upstream-only" if upstream.cost_exceeded else "cost-limit:draxr-only")
        elif up_failed != dx_failed:
            out.append("runtime-error:upstream-only" if up_failed else "runtime-error:draxr-only")
        elif not up_failed and upstream.matches != draxr.matches:
            out.append("matches")
    up_words, dx_words = upstream.error, draxr.error
    if (
        not out
        and up_words is not None
        and dx_words is not None
        and normalise_error(up_words) != normalise_error(dx_words)
    ):
        out.append("error-words:" + ("compile" if not upstream.compiles else "runtime"))
    if upstream.compiles and upstream.estimate_exceeded != draxr.estimate_exceeded:
        out.append(
            "estimate-limit:upstream-only" if upstream.estimate_exceeded else "estimate-limit:draxr-only"
        )
    return out


# ---------------------------------------------------------------------------------------------------
# The random generator


@dataclass
class Case:
    """One expression and the device it runs on."""

    expression: str
    device: Obj
    source: str


DRIVERS = ("gpu.example.com", "dra.example.com")
OTHER_DOMAIN = "other.example.com"
INT_EDGES = (0, 1, -1, 2, 7, 10, 255, 1024, 2**31, 2**53, 2**62, 2**63 - 1, -(2**63))
STRINGS = ("", "a", "gpu", "a100", "A100-SXM", "h100", "fish", "x-y_z", "10.0.0.1", "é©", "1.2.3")
QUANTITIES = ("0", "1", "8", "500m", "1k", "1Ki", "16Gi", "40Gi", "1.5", "2e3", "1M", "100Mi")
VERSIONS = ("0.0.1", "1.0.0", "1.2.3", "1.2.3-rc.1", "2.0.0+build.5", "10.20.30")
REGEXES = ("^a", "[0-9]+", "a.*0$", "(?i)GPU", "^$", "x|y", "\\\\d{3}", "[[:alpha:]]+")
IPS = ('"10.0.0.1"', '"::1"', '"192.168.0.1"', '"fe80::1"', '"1.2.3"', '"10.0.0.256"')
CIDRS = ('"10.0.0.0/8"', '"192.168.0.0/16"', '"::1/128"', '"10.0.0.1/33"', '"2001:db8::/32"')
URLS = ('"https://example.com/a?b=c"', '"http://1.2.3.4:80/x"', '"/relative"', '"not a url"')


def random_device(rng: random.Random) -> Obj:
    """A device with a random driver and a random subset of typed attributes and capacities."""
    attributes: Obj = {}
    if rng.random() < 0.9:
        attributes["model"] = {"string": rng.choice(STRINGS)}
    if rng.random() < 0.9:
        attributes["count"] = {"int": rng.choice((*INT_EDGES, 3, 4, 16))}
    if rng.random() < 0.8:
        attributes["ok"] = {"bool": rng.random() < 0.5}
    if rng.random() < 0.8:
        attributes["driverVersion"] = {"version": rng.choice(VERSIONS)}
    if rng.random() < 0.5:
        attributes[f"{OTHER_DOMAIN}/name"] = {"string": rng.choice(STRINGS)}
    if rng.random() < 0.4:
        attributes[f"{OTHER_DOMAIN}/index"] = {"int": rng.randrange(-4, 100)}
    capacity: Obj = {}
    if rng.random() < 0.9:
        capacity["memory"] = {"value": rng.choice(QUANTITIES)}
    if rng.random() < 0.5:
        capacity["cores"] = {"value": rng.choice(QUANTITIES)}
    device: Obj = {"driver": rng.choice(DRIVERS), "attributes": attributes, "capacity": capacity}
    if rng.random() < 0.3:
        device["allowMultipleAllocations"] = rng.random() < 0.5
    return device


def _q(text: str) -> str:
    return json.dumps(text, ensure_ascii=False)


Thunk = Callable[[], str]


class Generator:
    """Typed random CEL over one device: ``int_``, ``string``, ... return an expression of that type
    (or, now and then, one that is not, so type errors are drawn too); ``boolean`` is the selector.
    ``d`` bounds the nesting depth."""

    def __init__(self, rng: random.Random, driver: str) -> None:
        self.rng = rng
        self.driver = driver

    def one(self, *options: Sequence[str] | tuple[str, ...]) -> str:
        """A random element of the concatenated ``options``."""
        return self.rng.choice([o for group in options for o in group])

    def draw(self, leaves: list[Thunk], ops: list[Thunk], d: int) -> str:
        return self.rng.choice(leaves if d <= 0 else leaves + ops)()

    def attr(self, name: str) -> str:
        r = self.rng.random()
        domain = _q(OTHER_DOMAIN if name in ("name", "index") else self.driver)
        if r < 0.7:
            return f"device.attributes[{domain}].{name}"
        if r < 0.93:
            return f"device.attributes[{domain}][{_q(name)}]"
        default = {"model": '""', "name": '""', "count": "0", "index": "0", "ok": "false"}
        fallback = default.get(name, 'semver("0.0.0")')
        return f"device.attributes[{domain}].?{name}.orValue({fallback})"

    def cap(self, name: str) -> str:
        return f"device.capacity[{_q(self.driver)}].{name}"

    def int_(self, d: int) -> str:
        one, sub = self.one, d - 1
        conversions = ("2.5", "-1.5", "1e19", _q("12"), _q("x"), "true", "9223372036854775807u")
        leaves: list[Thunk] = [
            lambda: (
                str(self.rng.choice(INT_EDGES))
                if self.rng.random() < 0.5
                else str(self.rng.randrange(-20, 100))
            ),
            lambda: self.attr(one(("count", "count", "index"))),
        ]
        ops: list[Thunk] = [
            lambda: f"size({self.string(sub)})",
            lambda: f"{self.quantity(sub)}.asInteger()",
            lambda: f"{self.semver(sub)}.{one(('major', 'minor', 'patch'))}()",
            lambda: f"int({one(conversions)})",
            lambda: f"{self.int_list(sub)}.size()",
            lambda: f"{self.string(sub)}.indexOf({self.string(sub)})",
            lambda: f"{self.int_list(sub)}.{one(('sum', 'min', 'max'))}()",
            lambda: f"({self.int_(sub)} {one('+-*/%')} {self.int_(sub)})",
            lambda: f"-{self.int_(sub)}",
            lambda: f"({self.boolean(sub)} ? {self.int_(sub)} : {self.int_(sub)})",
            lambda: f"math.{one(('greatest', 'least'))}({self.int_(sub)}, {self.int_(sub)})",
        ]
        return self.draw(leaves, ops, d)

    def string(self, d: int) -> str:
        one, sub = self.one, d - 1
        formats = ("%s", "%d", "%s-%d", "%x", "%.2f", "%b", "%o", "%e")
        url_parts = ("getScheme", "getHost", "getHostname", "getPort", "getEscapedPath")
        leaves: list[Thunk] = [
            lambda: _q(one(STRINGS)),
            lambda: self.attr(one(("model", "name"))),
            lambda: "device.driver",
        ]
        ops: list[Thunk] = [
            lambda: f"({self.string(sub)} + {self.string(sub)})",
            lambda: f"{self.string(sub)}.{one(('lowerAscii', 'upperAscii', 'trim', 'reverse'))}()",
            lambda: f"{self.string(sub)}.substring({self.rng.randrange(0, 4)})",
            lambda: f"{self.string(sub)}.charAt({self.int_(0)})",
            lambda: f"{self.string(sub)}.replace({_q(one(STRINGS))}, {_q(one(STRINGS))})",
            lambda: f"string({self.int_(sub)})",
            lambda: f"string({one(('true', '1.5', '2u', _q('x')))})",
            lambda: f"{self.string_list(sub)}.join({_q(one(('', ',', '-')))})",
            lambda: f"{_q(one(formats))}.format([{one((self.int_(0), self.string(0)))}])",
            lambda: f"strings.quote({self.string(sub)})",
            lambda: f"{self.string(sub)}.find({_q(one(REGEXES))})",
            lambda: f"string({self.semver(sub)}.major())",
            lambda: f"url({one(URLS)}).{one(url_parts)}()",
            lambda: f"string(ip({one(IPS)}))",
            lambda: f"string(cidr({one(CIDRS)}).ip())",
            lambda: f"({self.boolean(sub)} ? {self.string(sub)} : {self.string(sub)})",
        ]
        return self.draw(leaves, ops, d)

    def int_list(self, d: int) -> str:
        one, sub, rng = self.one, d - 1, self.rng
        leaves: list[Thunk] = [
            lambda: "[" + ", ".join(self.int_(0) for _ in range(rng.randrange(0, 5))) + "]",
        ]
        ops: list[Thunk] = [
            lambda: f"lists.range({rng.randrange(0, 6)})",
            lambda: f"{self.int_list(sub)}.map(x, x {one('+*-')} {rng.randrange(0, 4)})",
            lambda: f"{self.int_list(sub)}.filter(x, x > {rng.randrange(-2, 5)})",
            lambda: f"{self.int_list(sub)}.{one(('distinct', 'reverse', 'sort'))}()",
            lambda: f"{self.int_list(sub)}.slice(0, {rng.randrange(0, 3)})",
            lambda: f"[{self.int_list(sub)}, {self.int_list(sub)}].flatten()",
            lambda: f"({self.int_list(sub)} + {self.int_list(sub)})",
        ]
        return self.draw(leaves, ops, d)

    def string_list(self, d: int) -> str:
        one, sub = self.one, d - 1
        leaves: list[Thunk] = [
            lambda: "[" + ", ".join(self.string(0) for _ in range(self.rng.randrange(0, 4))) + "]",
        ]
        ops: list[Thunk] = [
            lambda: f"{self.string(sub)}.split({_q(one(('', '-', ',', '0')))})",
            lambda: f"{self.string(sub)}.findAll({_q(one(REGEXES))})",
            lambda: f"{self.string_list(sub)}.map(s, s.upperAscii())",
        ]
        return self.draw(leaves, ops, d)

    def quantity(self, d: int) -> str:
        one, sub = self.one, d - 1
        leaves: list[Thunk] = [
            lambda: self.cap(one(("memory", "memory", "cores"))),
            lambda: f"quantity({_q(one(QUANTITIES, ('1.5.5', 'Gi', '9223372036854775807')))})",
        ]
        ops: list[Thunk] = [
            lambda: f"{self.quantity(sub)}.{one(('add', 'sub'))}({one((self.quantity(0), self.int_(0)))})",
        ]
        return self.draw(leaves, ops, d)

    def semver(self, d: int) -> str:
        one = self.one
        leaves: list[Thunk] = [
            lambda: self.attr("driverVersion"),
            lambda: f"semver({_q(one(VERSIONS, ('v1.0.0', '1.0', '01.0.0')))}{one(('', '', '', ', true'))})",
        ]
        return self.draw(leaves, [], d)

    def boolean(self, d: int) -> str:
        one, sub = self.one, d - 1
        cmp = ("==", "!=", "<", "<=", ">", ">=")
        quantity_cmp = ("isLessThan", "isGreaterThan")
        string_tests = ("startsWith", "endsWith", "contains", "matches")
        set_tests = ("contains", "intersects", "equivalent")
        formats = ("dns1123Label", "dns1123Subdomain", "labelValue", "qualifiedName")
        leaves: list[Thunk] = [
            lambda: one(("true", "false")),
            lambda: self.attr("ok"),
            lambda: f"device.allowMultipleAllocations{one(('', ' == false'))}",
            lambda: f"device.driver == {_q(one(DRIVERS))}",
        ]
        ops: list[Thunk] = [
            lambda: f"{self.int_(sub)} {one(cmp)} {self.int_(sub)}",
            lambda: f"{self.string(sub)} {one(cmp)} {self.string(sub)}",
            lambda: f"{self.string(sub)}.{one(string_tests)}({_q(one(STRINGS, REGEXES))})",
            lambda: f"({self.boolean(sub)} {one(('&&', '||'))} {self.boolean(sub)})",
            lambda: f"!{self.boolean(sub)}",
            lambda: f"{self.quantity(sub)}.{one(quantity_cmp)}({self.quantity(sub)})",
            lambda: f"{self.quantity(sub)}.compareTo({self.quantity(sub)}) {one(cmp)} 0",
            lambda: f"{self.quantity(sub)}.isInteger()",
            lambda: f"{self.semver(sub)}.{one(quantity_cmp)}({self.semver(sub)})",
            lambda: f"{self.semver(sub)}.compareTo({self.semver(sub)}) {one(cmp)} 0",
            lambda: f"isSemver({_q(one(VERSIONS, ('v1', '1.0')))})",
            lambda: f"isQuantity({_q(one(QUANTITIES, ('x', '1..0')))})",
            lambda: (
                f"{self.int_list(sub)}.{one(('all', 'exists', 'exists_one'))}(x, x {one(cmp)} {self.int_(0)})"
            ),
            lambda: f"{self.int_list(sub)}.all(i, v, v >= i)",
            lambda: f"{self.int_(sub)} in {self.int_list(sub)}",
            lambda: f"{self.string(sub)} in {self.string_list(sub)}",
            lambda: f"{_q(one(DRIVERS, (OTHER_DOMAIN, 'x')))} in device.{one(('attributes', 'capacity'))}",
            lambda: f"has(device.attributes[{_q(one((self.driver, OTHER_DOMAIN)))}].{one(('model', 'x'))})",
            lambda: f"sets.{one(set_tests)}({self.int_list(sub)}, {self.int_list(sub)})",
            lambda: f"{self.int_list(sub)}.isSorted()",
            lambda: f"ip({one(IPS)}).{one(('isLoopback', 'isGlobalUnicast', 'isUnspecified'))}()",
            lambda: f"isIP({one(IPS)}) && ip({one(IPS)}).family() == {one(('4', '6'))}",
            lambda: f"cidr({one(CIDRS)}).containsIP({one(IPS)})",
            lambda: f"isCIDR({one(CIDRS)})",
            lambda: f"isURL({one(URLS)})",
            lambda: f"!format.{one(formats)}().validate({self.string(sub)}).hasValue()",
            lambda: f"cel.bind(v, {self.int_(sub)}, v {one(cmp)} {self.int_(0)})",
            lambda: f"{{{_q('a')}: {self.int_(0)}}}.exists(k, k == {_q('a')})",
            lambda: f"type({self.int_(sub)}) == {one(('int', 'uint', 'string'))}",
            lambda: f"{self.int_(sub)} {one(cmp)} {one(('1.0', '1u', _q('1'), 'null'))}",
            lambda: f"optional.of({self.int_(sub)}).orValue(0) {one(cmp)} {self.int_(0)}",
            lambda: f"{self.int_list(sub)}.transformList(i, v, v * 2).size() == {self.rng.randrange(0, 4)}",
            self.costly,
        ]
        return self.draw(leaves, ops, d)

    def costly(self) -> str:
        """Nested comprehensions whose runtime cost lands on either side of the limit."""
        outer, inner = self.rng.choice((10, 100, 300, 1000)), self.rng.choice((100, 500, 1000, 3000))
        return f"lists.range({outer}).all(i, lists.range({inner}).all(j, i + j >= 0))"


def random_cases(seed: int, count: int) -> list[Case]:
    """``count`` random selectors, each with its own random device; equal seeds give equal cases."""
    rng = random.Random(seed)
    cases: list[Case] = []
    for _ in range(count):
        device = random_device(rng)
        gen = Generator(rng, device["driver"])
        expression = gen.boolean(rng.choice((1, 2, 2, 3, 3, 4)))
        cases.append(Case(expression, device, "random"))
    return cases


def curated_cases(path: Path) -> list[Case]:
    """The curated expressions (one JSON object a line: expression, source, optional device)."""
    cases = []
    for n, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
        if not line.strip():
            continue
        try:
            row = json.loads(line)
            cases.append(
                Case(
                    str(row["expression"]),
                    row.get("device") or CURATED_DEVICE,
                    str(row.get("source", "curated")),
                )
            )
        except (ValueError, KeyError, TypeError) as e:
            raise ValueError(f"{path}:{n}: not a curated expression: {e}") from None
    return cases


# ---------------------------------------------------------------------------------------------------
# Running and reporting


def run_oracle(oracle: Path, cases: Sequence[Case]) -> list[Obj]:
    """The oracle's answer to each case, in order (one process for all)."""
    request = "".join(json.dumps({"expression": c.expression, "device": c.device}) + "\n" for c in cases)
    done = subprocess.run([str(oracle)], input=request, capture_output=True, text=True, check=False)
    if done.returncode != 0:
        raise RuntimeError(f"the CEL oracle failed (exit {done.returncode}): {done.stderr.strip()[-500:]}")
    answers = [json.loads(line) for line in done.stdout.splitlines() if line.strip()]
    if len(answers) != len(cases):
        raise RuntimeError(f"the CEL oracle answered {len(answers)} of {len(cases)} requests")
    return answers


@dataclass
class Tally:
    """One engine's figures."""

    expressions: int = 0
    differing: int = 0
    categories: dict[str, list[Obj]] = field(default_factory=dict)
    both_failed: int = 0
    error_words_exact: int = 0
    error_words_normalised: int = 0

    def add(self, case: Case, upstream: Outcome, draxr: Outcome, diffs: list[str]) -> None:
        self.expressions += 1
        if upstream.error is not None and draxr.error is not None:
            self.both_failed += 1
            self.error_words_exact += upstream.error == draxr.error
            self.error_words_normalised += normalise_error(upstream.error) == normalise_error(draxr.error)
        if diffs:
            self.differing += 1
        for category in diffs:
            self.categories.setdefault(category, []).append(
                {
                    "expression": case.expression,
                    "source": case.source,
                    "upstream": _brief(upstream),
                    "draxr": _brief(draxr),
                }
            )

    def report(self) -> Obj:
        return {
            "expressions": self.expressions,
            "differing": self.differing,
            "agreeing": self.expressions - self.differing,
            "by_category": {
                name: {"count": len(rows), "examples": rows[:EXAMPLES]}
                for name, rows in sorted(self.categories.items(), key=lambda kv: -len(kv[1]))
            },
            "error_words": {
                "both_failed": self.both_failed,
                "exact_equal": self.error_words_exact,
                "normalised_equal": self.error_words_normalised,
            },
        }


def _brief(o: Outcome) -> Obj:
    return {
        k: v
        for k, v in asdict(o).items()
        if v is not None and (k not in ("cost_exceeded", "estimate_exceeded") or v)
    }


def measure(oracle: Path, cases: Sequence[Case], engines: Iterable[str], out: Path | None = None) -> Obj:
    """Runs every case through the oracle and each engine; the report (and the full list in ``out``)."""
    answers = run_oracle(oracle, cases)
    upstream = [oracle_outcome(a) for a in answers]
    devices = [SimpleDevice.from_json(str(c.device["driver"]), c.device) for c in cases]
    tallies: dict[str, Tally] = {}
    rows: list[Obj] = [
        {"expression": c.expression, "source": c.source, "device": c.device, "upstream": _brief(u)}
        for c, u in zip(cases, upstream, strict=True)
    ]
    for name in engines:
        engine, tally = SelectorEngine(engine=name), Tally()
        validator = SelectorEngine(engine=name, env=CelEnvironment(NEWEST, stored=False))
        for case, device, up, row in zip(cases, devices, upstream, rows, strict=True):
            mine = draxr_outcome(engine, case.expression, device, validator)
            diffs = compare(up, mine)
            tally.add(case, up, mine, diffs)
            row[name] = {**_brief(mine), "differences": diffs}
        tallies[name] = tally
    if out is not None:
        out.write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in rows), encoding="utf-8")
    upstream_compiles = sum(u.compiles for u in upstream)
    return {
        "oracle": str(oracle),
        "expressions": len(cases),
        "curated": sum(c.source != "random" for c in cases),
        "random": sum(c.source == "random" for c in cases),
        "upstream": {
            "compiles": upstream_compiles,
            "matches": sum(u.matches is True for u in upstream),
            "runtime_errors": sum(u.runtime_error is not None for u in upstream),
            "cost_exceeded": sum(u.cost_exceeded for u in upstream),
            "estimate_exceeded": sum(u.estimate_exceeded for u in upstream),
            "validates": sum(bool(u.validates) for u in upstream),
        },
        "engines": {name: t.report() for name, t in tallies.items()},
    }


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--seed", type=int, default=31, help="the random generator's seed (default 31)")
    parser.add_argument("--count", type=int, default=700, help="random expressions (default 700)")
    parser.add_argument(
        "--engine", choices=available_engines(), help="one engine (default: every installed one)"
    )
    parser.add_argument("--curated", type=Path, default=CURATED_FILE, help="curated expressions (JSON lines)")
    parser.add_argument("--oracle", type=Path, help="the celoracle binary (default: the one build.sh cached)")
    parser.add_argument("--out", type=Path, help="write every expression's outcomes here (JSON lines)")
    parser.add_argument("--max-differences", type=int, help="exit 1 if an engine differs on more expressions")
    args = parser.parse_args(argv)
    if args.count < 0:
        parser.error("--count must not be negative")
    oracle = args.oracle or find_cel_oracle()
    if isinstance(oracle, str):
        parser.error(f"{oracle} (or pass --oracle)")
    if not os.access(oracle, os.X_OK):
        parser.error(f"--oracle {oracle}: not an executable file")
    try:
        cases = curated_cases(args.curated) + random_cases(args.seed, args.count)
    except (OSError, ValueError) as e:
        parser.error(str(e))
    engines = [args.engine] if args.engine else available_engines()
    try:
        report = measure(oracle, cases, engines, args.out)
    except (OSError, RuntimeError, ValueError) as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    report["seed"] = args.seed
    print(json.dumps(report, indent=1, ensure_ascii=False))
    if args.max_differences is not None:
        worst = max((e["differing"] for e in report["engines"].values()), default=0)
        return 1 if worst > args.max_differences else 0
    return 0


if __name__ == "__main__":
    sys.exit(main())
