"""Conformance of the selector environment's libraries with upstream, on both engines.

Each case names the upstream test it is transcribed from (``k8s.io/apiserver/pkg/cel/library``
``*_test.go``, cel-go ``ext/*_test.go``). Cases that rely on mixed-type list literals are left out:
Kubernetes compiles with ``HomogeneousAggregateLiterals``, which rejects them. An expected value
is True/False, or ``(kind, words)``: a compile or runtime error whose message contains ``words``.
The compiled engine hands every function it does not know to the reference; the last tests
check that it does.
"""

from __future__ import annotations

from typing import Any

import pytest

from tests.core.cel.conftest import require_engine
from webhook.core.cel import CelError, SelectorEngine, SimpleDevice
from webhook.core.cel.backend import make_backend

#: Each test compares the two engines itself: it runs once (conftest's ``both_engines``).
pytestmark = pytest.mark.both_engines

COMPILE, RUNTIME = "CelCompileError", "CelRuntimeError"
GPU = "gpu.example.com"
DEVICE = SimpleDevice(
    driver=GPU,
    attributes={
        f"{GPU}/model": ("string", "A100-SXM4-80GB"),
        f"{GPU}/cores": ("int", 108),
        f"{GPU}/address": ("string", "10.1.2.3"),
    },
)

Case = tuple[str, str, Any]

LISTS: list[Case] = [
    # k8s library/lists_test.go TestLists
    ("k8s TestLists isSorted", "[1, 2, 3].isSorted()", True),
    ("k8s TestLists isSorted", "[].isSorted()", True),
    ("k8s TestLists isSorted", "['a', 'b', 'b', 'c'].isSorted()", True),
    ("k8s TestLists isSorted", "[3, 2, 1].isSorted()", False),
    ("k8s TestLists isSorted", "[1.0, 2.0].isSorted()", True),
    ("k8s TestLists sum", "[1, 2, 3].sum() == 6", True),
    ("k8s TestLists sum", "[1.0, 2.5].sum() == 3.5", True),
    ("k8s TestLists sum", "[1u, 2u].sum() == 3u", True),
    ("k8s TestLists sum", "[].sum() == 0", True),
    ("k8s TestLists sum", "[duration('1s'), duration('2s')].sum() == duration('3s')", True),
    ("k8s TestLists min", "[1, 2, 3].min() == 1", True),
    ("k8s TestLists min", "['b', 'a'].min() == 'a'", True),
    ("k8s TestLists min", "[].min() == 1", (RUNTIME, "min called on empty list")),
    ("k8s TestLists max", "[1, 3, 2].max() == 3", True),
    ("k8s TestLists max", "[1.0, -1.0].max() == 1.0", True),
    ("k8s TestLists max", "[].max() == 1", (RUNTIME, "max called on empty list")),
    ("k8s TestLists indexOf", "[1, 2, 2, 3].indexOf(2) == 1", True),
    ("k8s TestLists indexOf", "['a', 'b'].indexOf('c') == -1", True),
    ("k8s TestLists indexOf", "[[1], [2]].indexOf([2]) == 1", True),
    ("k8s TestLists lastIndexOf", "[1, 2, 2, 3].lastIndexOf(2) == 2", True),
    ("k8s TestLists lastIndexOf", "[].lastIndexOf(1) == -1", True),
    ("k8s TestLists strings indexOf still works", "'abcabc'.indexOf('c') == 2", True),
    ("k8s TestLists no overload", "'abc'.sum() == 1", (COMPILE, "found no matching overload for 'sum'")),
    ("k8s TestLists no overload", "true.isSorted()", (COMPILE, "found no matching overload for 'isSorted'")),
    # cel-go ext/lists_test.go TestLists
    ("cel-go TestLists range", "lists.range(4) == [0,1,2,3]", True),
    ("cel-go TestLists range", "lists.range(0) == []", True),
    ("cel-go TestLists reverse", "[5,1,2,3].reverse() == [3,2,1,5]", True),
    ("cel-go TestLists reverse", "[].reverse() == []", True),
    ("cel-go TestLists reverse", "[false, true, true].reverse().reverse() == [false, true, true]", True),
    ("cel-go TestLists slice", "[1,2,3,4].slice(0, 4) == [1,2,3,4]", True),
    ("cel-go TestLists slice", "[1,2,3,4].slice(1, 1) == []", True),
    ("cel-go TestLists slice", "[1,2,3,4].slice(1, 3) == [2, 3]", True),
    (
        "cel-go TestLists slice",
        "[1,2,3,4].slice(3, 0) == []",
        (RUNTIME, "cannot slice(3, 0), start index must be less than or equal to end index"),
    ),
    (
        "cel-go TestLists slice",
        "[1,2,3,4].slice(0, 10) == []",
        (RUNTIME, "cannot slice(0, 10), list is length 4"),
    ),
    (
        "cel-go TestLists slice",
        "[1,2,3,4].slice(-5, 10) == []",
        (RUNTIME, "cannot slice(-5, 10), negative indexes not supported"),
    ),
    ("cel-go TestLists flatten", "dyn([]).flatten() == []", True),
    # cel-go's own flatten cases mix elements and lists in one literal, which Kubernetes'
    # HomogeneousAggregateLiterals rejects; dyn() makes the same lists.
    (
        "cel-go TestLists flatten (k8s env)",
        "[1,[2,[3,4]]].flatten() == [1,2,[3,4]]",
        (COMPILE, "expected type 'int'"),
    ),
    # cel-go's test runs without HomogeneousAggregateLiterals: [2, dyn([3, 4])] mixes int and dyn
    (
        "cel-go TestLists flatten (homogeneous literals)",
        "[dyn(1), dyn([2, dyn([3, 4])])].flatten() == [1, 2, dyn([3, 4])]",
        (COMPILE, "expected type 'int' but found 'dyn'"),
    ),
    (
        "cel-go TestLists flatten",
        "[dyn(1), dyn([dyn(2), dyn([3, 4])])].flatten() == [dyn(1), dyn(2), dyn([3, 4])]",
        True,
    ),
    ("cel-go TestLists flatten", "[[1, 2], [], [], [3, 4]].flatten() == [1, 2, 3, 4]", True),
    ("cel-go TestLists flatten", "[dyn(1), dyn([dyn(2), dyn([3, 4])])].flatten(2) == [1, 2, 3, 4]", True),
    (
        "cel-go TestLists flatten",
        "[[1], [2]].flatten(-1) == []",
        (RUNTIME, "level must be non-negative"),
    ),
    (
        "cel-go TestListsRuntimeErrors",
        "dyn({}).flatten() == []",
        (RUNTIME, "no such overload: map(dyn, dyn).flatten()"),
    ),
    ("cel-go TestLists sort", "[].sort() == []", True),
    ("cel-go TestLists sort", "[4, 3, 2, 1].sort() == [1, 2, 3, 4]", True),
    ("cel-go TestLists sort", "['d', 'a', 'b', 'c'].sort() == ['a', 'b', 'c', 'd']", True),
    ("cel-go TestLists sortBy", "[].sortBy(e, e) == []", True),
    ("cel-go TestLists sortBy", "[-3, 1, -5, -2, 4].sortBy(e, -(e * e)) == [-5, 4, -3, -2, 1]", True),
    (
        "cel-go TestLists sortBy",
        "[-3, 1, -5, -2, 4].map(e, e * 2).sortBy(e, -(e * e)) == [-10, 8, -6, -4, 2]",
        True,
    ),
    ("cel-go TestLists sortBy", "lists.range(3).sortBy(e, -e) == [2, 1, 0]", True),
    (
        "cel-go TestLists sortBy",
        "['a', 'c', 'b', 'first'].sortBy(e, e == 'first' ? '' : e) == ['first', 'a', 'b', 'c']",
        True,
    ),
    (
        "cel-go TestListsVersion sortBy",
        "[{'field': 'lo'}, {'field': 'hi'}].sortBy(m, m.field) == [{'field': 'hi'}, {'field': 'lo'}]",
        True,
    ),
    ("cel-go TestLists distinct", "[-2, 5, -2, 1, 1, 5, -2, 1].distinct() == [-2, 5, 1]", True),
    (
        "cel-go TestLists distinct",
        "['c', 'a', 'a', 'b', 'a', 'b', 'c', 'c'].distinct() == ['c', 'a', 'b']",
        True,
    ),
    ("cel-go TestLists distinct", "[[1], [1], [2]].distinct() == [[1], [2]]", True),
    # upstream's runtime cost limit, which the value-size and comparison caps stand in for
    ("cost limit: range", "lists.range(2000000).size() > 0", (RUNTIME, "actual cost limit exceeded")),
    (
        "cost limit: distinct",
        "lists.range(2000).distinct().size() > 0",
        (RUNTIME, "actual cost limit exceeded"),
    ),
    (
        "cost limit: sets",
        "sets.contains(lists.range(2000), lists.range(2000))",
        (RUNTIME, "actual cost limit exceeded"),
    ),
]

SETS: list[Case] = [
    # cel-go ext/sets_test.go TestSets
    ("cel-go TestSets contains", "sets.contains([], [])", True),
    ("cel-go TestSets contains", "sets.contains([1], [])", True),
    ("cel-go TestSets contains", "sets.contains([1], [1, 1])", True),
    ("cel-go TestSets contains", "sets.contains([2, 1], [1])", True),
    ("cel-go TestSets contains", "sets.contains([1, 2, 3, 4], [2, 3])", True),
    ("cel-go TestSets contains", "sets.contains([[1], [2, 3]], [[2, 3]])", True),
    ("cel-go TestSets contains", "sets.contains([1], [2])", False),
    ("cel-go TestSets contains", "sets.contains([1], [1, 2])", False),
    ("cel-go TestSets equivalent", "sets.equivalent([], [])", True),
    ("cel-go TestSets equivalent", "sets.equivalent([1], [1, 1])", True),
    ("cel-go TestSets equivalent", "sets.equivalent([1, 2, 3], [3, 2, 1])", True),
    ("cel-go TestSets equivalent", "sets.equivalent([2, 1], [1])", False),
    ("cel-go TestSets intersects", "sets.intersects([1], [1])", True),
    ("cel-go TestSets intersects", "sets.intersects([2, 1], [1])", True),
    ("cel-go TestSets intersects", "sets.intersects([], [])", False),
    ("cel-go TestSets intersects", "sets.intersects([1], [])", False),
    ("cel-go TestSets intersects", "sets.intersects([1], [2])", False),
    (
        "undeclared namespaced function",
        "sets.union([1], [2])",
        (COMPILE, "undeclared reference to 'sets.union'"),
    ),
]

REGEX: list[Case] = [
    # k8s library/regex_test.go (TestRegex)
    ("k8s TestRegex find", "'abc 123'.find('[0-9]+') == '123'", True),
    ("k8s TestRegex find", "'abc 123'.find('xyz') == ''", True),
    ("k8s TestRegex findAll", "'123 abc 456'.findAll('[0-9]+') == ['123', '456']", True),
    ("k8s TestRegex findAll", "'123 abc 456'.findAll('[0-9]+', 0) == []", True),
    ("k8s TestRegex findAll", "'123 abc 456'.findAll('[0-9]+', 1) == ['123']", True),
    ("k8s TestRegex findAll", "'123 abc 456'.findAll('[0-9]+', 3) == ['123', '456']", True),
    ("k8s TestRegex findAll", "'123 abc 456'.findAll('[0-9]+', -1) == ['123', '456']", True),
    ("k8s TestRegex findAll", "'123 abc 456'.findAll('xyz') == []", True),
    ("Go FindAllString empty matches", "'abc'.findAll('b*') == ['', 'b', '', '']", False),
    ("Go FindAllString empty matches", "'abc'.findAll('b*') == ['', 'b', '']", True),
    (
        "k8s TestRegex invalid literal",
        "'abc'.find('[') == ''",
        (COMPILE, "error parsing regexp: missing closing ]"),
    ),
    (
        "k8s TestRegex invalid literal",
        "'abc'.findAll('(') == []",
        (COMPILE, "error parsing regexp: missing closing )"),
    ),
    ("cel-go ValidateRegexLiterals", "'abc'.matches('(')", (COMPILE, "invalid matches argument")),
    ("cel-go ValidateRegexLiterals", "matches('abc', '[')", (COMPILE, "invalid matches argument")),
    ("matches", "'A100-80GB'.matches('^A[0-9]+')", True),
    ("RE2 syntax: no backreferences", "'aa'.matches('(a)\\\\1')", (COMPILE, "invalid matches argument")),
    ("RE2 syntax: \\pL", "'é'.matches('^\\\\pL$')", True),
    ("computed pattern", "'abc'.matches(device.driver)", False),
    ("computed invalid pattern", "'abc'.find(device.driver + '(') == ''", (RUNTIME, "Illegal regex")),
]

STRINGS: list[Case] = [
    # cel-go ext/strings_test.go (format, quote) and strings v3 reverse
    ("cel-go TestStrings format %s", "'%s %s'.format(['hello', 'world']) == 'hello world'", True),
    ("cel-go TestStrings format %d", "'%d'.format([42]) == '42'", True),
    ("cel-go format: mixed argument list", "'%s is %d'.format(['x', 2]) == 'x is 2'", True),
    ("cel-go TestStrings format %d uint", "'%d'.format([42u]) == '42'", True),
    ("cel-go TestStrings format %f", "'%.3f'.format([1.2345]) == '1.234'", True),
    ("cel-go TestStrings format %f default", "'%f'.format([2.5]) == '2.500000'", True),
    # Kubernetes' strings library (version 2) formats with cel-go's version-1 formatter, whose
    # printer writes numbers for the default locale: a power of ten in superscript digits
    ("cel-go TestStrings format %e", "'%e'.format([2.71828]) == '2.718280\u00d710\u2070\u2070'", True),
    ("k8s format %f groups digits", "'%.2f'.format([1234567.5]) == '1,234,567.50'", True),
    ("cel-go TestStrings format %b", "'%b'.format([5]) == '101'", True),
    ("cel-go TestStrings format %b bool", "'%b'.format([true]) == '1'", True),
    ("cel-go TestStrings format %o", "'%o'.format([11]) == '13'", True),
    ("cel-go TestStrings format %x", "'%x'.format([30]) == '1e'", True),
    ("cel-go TestStrings format %X", "'%X'.format([30]) == '1E'", True),
    (
        "cel-go TestStrings format %x string",
        "'%x'.format(['Hello world!']) == '48656c6c6f20776f726c6421'",
        True,
    ),
    ("cel-go TestStrings format %s bool", "'%s'.format([true]) == 'true'", True),
    ("cel-go TestStrings format %s list", "'%s'.format([[1, 2]]) == '[1, 2]'", True),
    ("cel-go TestStrings format %s list of strings", "'%s'.format([['a']]) == '[\"a\"]'", True),
    ("cel-go TestStrings format %%", "'100%%'.format([]) == '100%'", True),
    (
        "cel-go TestStrings format %d double",
        "'%d'.format([1.5]) == ''",
        (COMPILE, "decimal clause can only be used on integers, was given double"),
    ),
    (
        "cost limit: format",
        "cel.bind(a, 'aaaaaaaaaaaaaaaa', cel.bind(b, a + a + a + a + a + a + a + a, cel.bind(c, b + b + b + b"
        " + b + b + b + b, cel.bind(d, c + c + c + c + c + c + c + c, cel.bind(e, d + d + d + d + d + d + d"
        " + d, cel.bind(f, e + e + e + e + e + e + e + e, '%s%s%s%s%s%s%s%s%s%s'.format([f, f, f, f, f, f, f,"
        " f, f, f]))))))).size() > 0",
        (RUNTIME, "actual cost limit exceeded"),
    ),
    (
        "cel-go TestStrings format missing argument",
        "'%s'.format([]) == ''",
        (COMPILE, "index 0 out of range"),
    ),
    ("cel-go TestStrings quote", "strings.quote('first\\nsecond') == '\"first\\\\nsecond\"'", True),
    ("cel-go TestStrings quote", "strings.quote('a\"b') == '\"a\\\\\"b\"'", True),
    # strings' reverse is version 3; Kubernetes enables version 2
    (
        "k8s base.go: ext.Strings(StringsVersion(2))",
        "'gums'.reverse() == 'smug'",
        (COMPILE, "found no matching overload for 'reverse' applied to 'string.()'"),
    ),
    (
        "strings v2, dyn receiver",
        "dyn('gums').reverse() == 'smug'",
        (RUNTIME, "no such overload: reverse(string)"),
    ),
]

IP_CIDR: list[Case] = [
    # k8s library/ip_test.go TestIP
    ("k8s TestIP parse ipv4", "ip('192.168.0.1') == ip('192.168.0.1')", True),
    (
        "k8s TestIP parse invalid ipv4",
        "ip('192.168.0.1.0') == ip('192.168.0.1')",
        (
            RUNTIME,
            'IP Address "192.168.0.1.0" parse error during conversion from string: '
            'ParseAddr("192.168.0.1.0"): IPv4 address too long',
        ),
    ),
    ("k8s TestIP isIP valid ipv4", "isIP('192.168.0.1')", True),
    ("k8s TestIP isIP invalid ipv4", "isIP('192.168.0.1.0')", False),
    ("k8s TestIP ip.isCanonical valid ipv4", "ip.isCanonical('127.0.0.1')", True),
    ("k8s TestIP ip.isCanonical invalid ipv4", "ip.isCanonical('127.0.0.1.0')", (RUNTIME, "parse error")),
    ("k8s TestIP ipv4 family", "ip('192.168.0.1').family() == 4", True),
    ("k8s TestIP ipv4 isUnspecified true", "ip('0.0.0.0').isUnspecified()", True),
    ("k8s TestIP ipv4 isUnspecified false", "ip('127.0.0.1').isUnspecified()", False),
    ("k8s TestIP ipv4 isLoopback true", "ip('127.0.0.1').isLoopback()", True),
    ("k8s TestIP ipv4 isLoopback false", "ip('1.2.3.4').isLoopback()", False),
    ("k8s TestIP ipv4 isLinkLocalMulticast true", "ip('224.0.0.1').isLinkLocalMulticast()", True),
    ("k8s TestIP ipv4 isLinkLocalMulticast false", "ip('224.0.1.1').isLinkLocalMulticast()", False),
    ("k8s TestIP ipv4 isLinkLocalUnicast true", "ip('169.254.169.254').isLinkLocalUnicast()", True),
    ("k8s TestIP ipv4 isLinkLocalUnicast false", "ip('192.168.0.1').isLinkLocalUnicast()", False),
    ("k8s TestIP ipv4 isGlobalUnicast true", "ip('192.168.0.1').isGlobalUnicast()", True),
    ("k8s TestIP ipv4 isGlobalUnicast false", "ip('255.255.255.255').isGlobalUnicast()", False),
    ("k8s TestIP isIP invalid ipv6", "isIP('2001:db8:::68')", False),
    ("k8s TestIP ip.isCanonical valid ipv6", "ip.isCanonical('2001:db8::68')", True),
    ("k8s TestIP ip.isCanonical non-canonical ipv6", "ip.isCanonical('2001:DB8::68')", False),
    ("k8s TestIP ipv6 family", "ip('2001:db8::68').family() == 6", True),
    ("k8s TestIP ipv6 isUnspecified true", "ip('::').isUnspecified()", True),
    ("k8s TestIP ipv6 isLoopback true", "ip('::1').isLoopback()", True),
    ("k8s TestIP ipv6 isLoopback false", "ip('2001:db8::abcd').isLoopback()", False),
    ("k8s TestIP ipv6 isLinkLocalMulticast true", "ip('ff02::1').isLinkLocalMulticast()", True),
    ("k8s TestIP ipv6 isLinkLocalMulticast false", "ip('fd00::1').isLinkLocalMulticast()", False),
    ("k8s TestIP ipv6 isLinkLocalUnicast true", "ip('fe80::1').isLinkLocalUnicast()", True),
    ("k8s TestIP ipv6 isLinkLocalUnicast false", "ip('fd80::1').isLinkLocalUnicast()", False),
    ("k8s TestIP ipv6 isGlobalUnicast true", "ip('2001:db8::abcd').isGlobalUnicast()", True),
    ("k8s TestIP ipv6 isGlobalUnicast false", "ip('ff00::1').isGlobalUnicast()", False),
    (
        "k8s TestIP passing cidr into isIP returns compile error",
        "isIP(cidr('192.168.0.0/24'))",
        (COMPILE, "found no matching overload for 'isIP' applied to '(net.CIDR)'"),
    ),
    ("k8s TestIP converting an IP address to a string", "string(ip('192.168.0.1')) == '192.168.0.1'", True),
    ("k8s parseIPAddr: no zones", "isIP('fe80::1%eth0')", False),
    (
        "k8s parseIPAddr: no IPv4-mapped IPv6",
        "ip('::ffff:1.2.3.4').family() == 6",
        (RUNTIME, "is not allowed"),
    ),
    ("netip: no leading zeros", "isIP('010.0.0.1')", False),
    (
        "netip: leading zero words",
        "ip('010.0.0.1') == ip('10.0.0.1')",
        (RUNTIME, "IPv4 field has octet with leading zero"),
    ),
    ("netip: >255 words", "ip('1.2.3.256') == ip('10.0.0.1')", (RUNTIME, "IPv4 field has value >255")),
    ("netip: short words", "ip('1.2.3') == ip('10.0.0.1')", (RUNTIME, "IPv4 address too short")),
    (
        "netip: empty field words",
        "ip('1..2.3') == ip('1.2.3.4')",
        (RUNTIME, 'must have at least one digit (at ".2.3")'),
    ),
    # k8s library/cidr_test.go TestCIDR
    (
        "k8s TestCIDR compilation error for cidr(int)",
        "cidr(192168) == cidr('1.0.0.0/8')",
        (COMPILE, "'cidr'"),
    ),
    (
        "k8s TestCIDR parse invalid ipv4",
        "cidr('192.168.0.0/') == cidr('192.168.0.0/24')",
        (
            RUNTIME,
            "network address parse error during conversion from string: network address parse error during "
            'conversion from string: netip.ParsePrefix("192.168.0.0/"): bad bits after slash: ""',
        ),
    ),
    ("k8s TestCIDR contains IP ipv4 (IP)", "cidr('192.168.0.0/24').containsIP(ip('192.168.0.1'))", True),
    (
        "k8s TestCIDR does not contain IP ipv4 (IP)",
        "cidr('192.168.0.0/24').containsIP(ip('192.168.1.1'))",
        False,
    ),
    ("k8s TestCIDR contains IP ipv4 (string)", "cidr('192.168.0.0/24').containsIP('192.168.0.1')", True),
    (
        "k8s TestCIDR contains CIDR ipv4 (CIDR)",
        "cidr('192.168.0.0/24').containsCIDR(cidr('192.168.0.0/25'))",
        True,
    ),
    (
        "k8s TestCIDR does not contain ipv4 (CIDR)",
        "cidr('192.168.0.0/24').containsCIDR(cidr('192.168.0.0/23'))",
        False,
    ),
    (
        "k8s TestCIDR contains CIDR ipv4 (string)",
        "cidr('192.168.0.0/24').containsCIDR('192.168.0.0/25')",
        True,
    ),
    ("k8s TestCIDR returns IP ipv4", "cidr('192.168.0.0/24').ip() == ip('192.168.0.0')", True),
    ("k8s TestCIDR masks unmasked ipv4", "cidr('192.168.0.1/24').masked() == cidr('192.168.0.0/24')", True),
    ("k8s TestCIDR returns prefix length ipv4", "cidr('192.168.0.0/24').prefixLength() == 24", True),
    ("k8s TestCIDR contains IP ipv6 (IP)", "cidr('2001:db8::/32').containsIP(ip('2001:db8::1'))", True),
    (
        "k8s TestCIDR does not contain IP ipv6 (IP)",
        "cidr('2001:db8::/32').containsIP(ip('2001:dc8::1'))",
        False,
    ),
    ("k8s TestCIDR contains CIDR ipv6 (string)", "cidr('2001:db8::/32').containsCIDR('2001:db8::/33')", True),
    (
        "k8s TestCIDR does not contain ipv6 (string)",
        "cidr('2001:db8::/32').containsCIDR('2001:db8::/31')",
        False,
    ),
    ("k8s TestCIDR masks unmasked ipv6", "cidr('2001:db8:1::/32').masked() == cidr('2001:db8::/32')", True),
    (
        "k8s TestCIDR converting a CIDR to a string",
        "string(cidr('192.168.0.0/24')) == '192.168.0.0/24'",
        True,
    ),
    ("netip.ParsePrefix: decimal bits only", "isCIDR('10.0.0.0/08')", False),
    ("netip.ParsePrefix: bits in range", "isCIDR('10.0.0.0/33')", False),
    ("cross-family containsIP", "cidr('2001:db8::/32').containsIP(ip('192.168.1.1'))", False),
    ("equality by type", "ip('10.0.0.1') == cidr('10.0.0.1/32').ip()", True),
    ("k8s TestIP type", "type(ip('192.168.0.1')) == net.IP", True),
    ("k8s TestCIDR type", "type(cidr('192.168.0.0/24')) == net.CIDR", True),
    ("k8s net types differ", "type(ip('192.168.0.1')) == net.CIDR", False),
]

URLS: list[Case] = [
    # k8s library/urls.go examples (and url.ParseRequestURI)
    ("k8s urls url", "url('https://example.com/path').getScheme() == 'https'", True),
    ("k8s urls getHost", "url('https://example.com:80/').getHost() == 'example.com:80'", True),
    ("k8s urls getHost ipv6", "url('https://[::1]:80/').getHost() == '[::1]:80'", True),
    ("k8s urls getHostname", "url('https://example.com:80/').getHostname() == 'example.com'", True),
    ("k8s urls getHostname ipv6", "url('https://[::1]:80/').getHostname() == '::1'", True),
    ("k8s urls getPort", "url('https://example.com:80/').getPort() == '80'", True),
    ("k8s urls getPort none", "url('https://example.com/').getPort() == ''", True),
    (
        "k8s urls getEscapedPath",
        "url('https://example.com/path%20with%20spaces/').getEscapedPath() == '/path%20with%20spaces/'",
        True,
    ),
    ("k8s urls getEscapedPath empty", "url('https://example.com').getEscapedPath() == ''", True),
    (
        "k8s urls getQuery",
        "url('https://example.com/path?k1=a&k2=b&k2=c').getQuery() == {'k1': ['a'], 'k2': ['b', 'c']}",
        True,
    ),
    ("k8s urls getQuery empty", "url('https://example.com/path').getQuery() == {}", True),
    ("k8s urls isURL", "isURL('https://user:pass@example.com:80/path?query=val#fragment')", True),
    ("k8s urls isURL relative", "isURL('/absolute-path')", True),
    (
        "k8s urls: fragment cut by url.Parse",
        "url('https://a.example/p?x=1#frag').getQuery() == {'x': ['1']}",
        True,
    ),
    ("k8s urls: fragment before a query", "url('https://a.example/p#f?x=1').getEscapedPath() == '/p'", True),
    ("k8s urls: scheme lowercased", "url('HTTPS://a.example/').getScheme() == 'https'", True),
    ("k8s urls isURL not a request URI", "isURL('../relative-path')", False),
    ("k8s urls isURL bad escape", "isURL('https://example.com/%zz')", False),
    (
        "k8s urls url() error",
        "url('../relative-path').getScheme() == ''",
        (
            RUNTIME,
            "URL parse error during conversion from string: "
            'parse "../relative-path": invalid URI for request',
        ),
    ),
]

FORMAT_OPTIONAL: list[Case] = [
    # k8s library/format.go examples (format_test.go)
    (
        "k8s TestFormat dns1123Label valid",
        "!format.dns1123Label().validate('my-label-name').hasValue()",
        True,
    ),
    ("k8s TestFormat dns1123Label invalid", "format.dns1123Label().validate('MY_LABEL').hasValue()", True),
    (
        "k8s TestFormat dns1123Label message",
        "format.dns1123Label().validate('MY_LABEL').value()[0].startsWith("
        "'a lowercase RFC 1123 label must consist of lower case alphanumeric characters')",
        True,
    ),
    (
        "k8s TestFormat dns1123Subdomain",
        "!format.dns1123Subdomain().validate('apiextensions.k8s.io').hasValue()",
        True,
    ),
    ("k8s TestFormat dns1035Label", "!format.dns1035Label().validate('my-label-name').hasValue()", True),
    ("k8s TestFormat dns1035Label invalid", "format.dns1035Label().validate('1abc').hasValue()", True),
    (
        "k8s TestFormat qualifiedName",
        "!format.qualifiedName().validate('apiextensions.k8s.io/v1beta1').hasValue()",
        True,
    ),
    (
        "k8s TestFormat dns1123LabelPrefix",
        "!format.dns1123LabelPrefix().validate('my-label-prefix-').hasValue()",
        True,
    ),
    ("k8s TestFormat labelValue", "!format.labelValue().validate('my-cool-label-Value').hasValue()", True),
    ("k8s TestFormat uri", "!format.uri().validate('http://example.com').hasValue()", True),
    (
        "k8s TestFormat uuid",
        "!format.uuid().validate('123e4567-e89b-12d3-a456-426614174000').hasValue()",
        True,
    ),
    (
        "k8s TestFormat uuid invalid",
        "format.uuid().validate('x').value() == ['does not match the UUID format']",
        True,
    ),
    ("k8s TestFormat byte", "!format.byte().validate('aGVsbG8=').hasValue()", True),
    ("k8s TestFormat byte invalid", "format.byte().validate('aGVsbG8').value() == ['invalid base64']", True),
    ("k8s TestFormat date", "!format.date().validate('2021-01-01').hasValue()", True),
    ("k8s TestFormat date invalid", "format.date().validate('2021-13-01').value() == ['invalid date']", True),
    ("k8s TestFormat datetime", "!format.datetime().validate('2021-01-01T00:00:00Z').hasValue()", True),
    (
        "k8s TestFormat datetime invalid",
        "format.datetime().validate('2021-01-01').value() == ['invalid datetime']",
        True,
    ),
    (
        "k8s TestFormat named",
        "format.named('dns1123Label').value().validate('my-name') == optional.none()",
        True,
    ),
    ("k8s TestFormat named unknown", "format.named('unknown').hasValue()", False),
    (
        "k8s TestFormat undeclared",
        "format.unknown().validate('x').hasValue()",
        (COMPILE, "undeclared reference"),
    ),
    # cel-go optional functions (optional syntax is not supported)
    ("cel-go optionals of/value", "optional.of(1).value() == 1", True),
    ("cel-go optionals none/orValue", "optional.none().orValue(2) == 2", True),
    ("cel-go optionals or", "optional.none().or(optional.of(3)).value() == 3", True),
    ("cel-go optionals ofNonZeroValue", "!optional.ofNonZeroValue('').hasValue()", True),
    ("cel-go optionals ofNonZeroValue", "optional.ofNonZeroValue([1]).hasValue()", True),
    (
        "cel-go optionals none dereference",
        "optional.none().value() == 1",
        (RUNTIME, "optional.none() dereference"),
    ),
]

TWO_VARIABLE: list[Case] = [
    # cel-go ext/comprehensions_test.go (TestTwoVarComprehensions and its cost cases)
    ("cel-go all list", "[10, 20, 30].all(i, v, v > i)", True),
    ("cel-go all map", "{'hello': 'world', 'taco': 'bell'}.all(k, v, k != v)", True),
    ("cel-go exists map", "{'x': 1, 'y': 2}.exists(k, v, k == 'x' && v == 1)", True),
    ("cel-go existsOne list", "[1, 2, 1].existsOne(i, v, v == 1)", False),
    ("cel-go existsOne list", "[1, 2, 3].existsOne(i, v, i == 1 && v == 2)", True),
    ("cel-go transformList list", "[1, 2, 3].transformList(i, v, i + v) == [1, 3, 5]", True),
    ("cel-go transformList filter", "[1, 2, 3].transformList(i, v, i % 2 == 0, i + v) == [1, 5]", True),
    ("cel-go transformList map", "{'a': 1, 'b': 2}.transformList(k, v, k).sort() == ['a', 'b']", True),
    ("cel-go transformMap map", "{'a': 1, 'b': 2}.transformMap(k, v, v + 1) == {'a': 2, 'b': 3}", True),
    (
        "cel-go tranformMap filter map",
        "{1: 2, 3: 4, 5: 6}.transformMap(k, v, k % 3 == 0, v + 1) == {3: 5}",
        True,
    ),
    ("cel-go transformMap list", "[5, 6].transformMap(i, v, v * 2) == {0: 10, 1: 12}", True),
    ("cel-go transformMapEntry literal input", "{1: 2}.transformMapEntry(k, v, {v: k}) == {2: 1}", True),
    (
        "cel-go transformMapEntry swap",
        "{'hello': 'world', 'greetings': 'tacocat'}.transformMapEntry(k, v, {v: k}) "
        "== {'world': 'hello', 'tacocat': 'greetings'}",
        True,
    ),
    ("cel-go transformMapEntry empty", "{'hello': 'world'}.transformMapEntry(k, v, {}) == {}", True),
    (
        "cel-go transformMapEntry duplicate key",
        "{'a': 'same', 'c': 'same'}.transformMapEntry(k, v, {v: k}) == {}",
        (RUNTIME, "insert failed: key same already exists"),
    ),
    ("cel-go two-var nested all", "[1, 2].all(i, v, [1, 2].all(j, w, i + j < v + w))", True),
    ("cel-go bind with two-var comprehension", "cel.bind(l, [1, 2, 3], l.all(i, v, i < v))", True),
    ("cel-go duplicate variable", "[1].all(e, e, true)", (COMPILE, "duplicate variable name: e")),
    (
        "cel-go first variable not an identifier",
        "[1].all(a.b, e, true)",
        (COMPILE, "argument must be a simple name"),
    ),
    ("cel-go predicate must be bool", "[1].all(i, v, 1)", (COMPILE, "expected type 'bool' but found 'int'")),
    (
        "cel-go TestTwoVarComprehensions exists_one",
        "{'hello': 'world', 'hello!': 'worlds'}"
        ".exists_one(k, v, k.startsWith('hello') && v.endsWith('world'))",
        True,
    ),
    ("cel-go two-variable exists_one: none", "[1, 2].exists_one(i, v, v == 3)", False),
    ("cel-go two-variable exists_one: two", "[1, 2].exists_one(i, v, i >= 0)", False),
]

SEMANTICS: list[Case] = [
    # cel-go's runtime semantics the issue lists (cel-spec conformance: basic, conversions, integer_math)
    ("cel-spec logic: double negation", "!!true", True),
    ("cel-spec integer_math: double minus", "--1 == 1", True),
    # IEEE division by zero (celpy made every such quotient +Inf)
    ("cel-spec fp_math: 0.0 / 0.0 is NaN", "0.0 / 0.0 != 0.0 / 0.0", True),
    ("cel-spec fp_math: negative / 0.0", "dyn(-1.0) / dyn(0.0) < 0.0", True),
    ("cel-spec fp_math: positive / -0.0", "1.0 / -0.0 < 0.0", True),
    ("cel-spec fp_math: positive / 0.0", "1.0 / 0.0 > 1.0e308", True),
    ("cel-spec conversions: string(bool)", "string(true) == 'true' && string(false) == 'false'", True),
    ("cel-spec types: type(1) == int", "type(1) == int", True),
    ("cel-spec types: type('a') == string", "type('a') == string && type(1) != string", True),
    ("cel-spec types: type of a list and a map", "type([]) == list && type({}) == map", True),
    ("cel-spec types: type of a type", "type(int) == type", True),
    ("cel-spec comparisons: NaN", "double('NaN') != double('NaN')", True),
    ("cel-spec integer_math: int64 overflow", "9223372036854775807 + 1 == 0", (RUNTIME, "integer overflow")),
    ("cel-spec integer_math: uint64 overflow", "0u - 1u == 0u", (RUNTIME, "unsigned integer overflow")),
    ("cel-spec integer_math: division by zero", "1 / 0 == 1", (RUNTIME, "division by zero")),
    ("cel-spec integer_math: modulus by zero", "1 % 0 == 1", (RUNTIME, "modulus by zero")),
    ("cel-spec integer_math: MinInt64 % -1", "-9223372036854775808 % -1 == 0", True),
    (
        "cel-go checker: == needs one type",
        "1 == 1.0",
        (COMPILE, "no matching overload for '_==_' applied to '(int, double)'"),
    ),
    ("cel-go CrossTypeNumericComparisons: ordering", "1 < 1.5 && 2u > 1", True),
    (
        "cel-go HomogeneousAggregateLiterals: list",
        "[1, 'a'].size() == 2",
        (COMPILE, "expected type 'int' but found 'string'"),
    ),
    (
        "cel-go HomogeneousAggregateLiterals: map",
        "{'a': 1, 2: 1}.size() == 2",
        (COMPILE, "expected type 'string' but found 'int'"),
    ),
    # differential: element types must be equal, dyn included (an attribute value is dyn)
    (
        "cel-go HomogeneousAggregateLiterals: dyn is its own type",
        "[dyn(1), 'a'].size() == 2",
        (COMPILE, "expected type 'dyn' but found 'string'"),
    ),
    (
        "cel-go HomogeneousAggregateLiterals: an attribute and an int",
        f"[1, device.attributes['{GPU}'].cores].size() == 2",
        (COMPILE, "expected type 'int' but found 'dyn'"),
    ),
    (
        "cel-go HomogeneousAggregateLiterals: attribute map values",
        f"{{'a': device.attributes['{GPU}']['cores'], 'b': 1}}.size() == 2",
        (COMPILE, "expected type 'dyn' but found 'int'"),
    ),
    (
        "cel-go HomogeneousAggregateLiterals: dyn with dyn",
        f"[device.attributes['{GPU}'].cores, dyn(1)].size() == 2",
        True,
    ),
    ("cel-go HomogeneousAggregateLiterals: macro variables", "[1, 2].map(x, [x, 1]).size() == 2", True),
    (
        "cel-go checker: in on a map of other keys",
        "1 in {'a': 1}",
        (COMPILE, "no matching overload for '@in'"),
    ),
    ("cel-go checker: in on a map", "'a' in {'a': 1}", True),
    ("cel-spec macros: map with a filter", "[1, 2, 3].map(x, x > 1, x * 2) == [4, 6]", True),
    (
        "cel-spec macros: map filter must be bool",
        "[1].map(x, 1, x).size() == 1",
        (COMPILE, "found no matching overload for '_?_:_' applied to '(int, list(int), list(int))'"),
    ),
    ("cel-spec parse: triple-quoted strings", "'''a'b''' == \"a'b\"", True),
    # differential: upstream masks the other prefix's address to the container's length
    ("k8s cidr containsCIDR (differential)", "cidr('10.0.0.0/8').containsCIDR('10.1.0.0/16')", True),
    (
        "k8s cidr containsCIDR (differential)",
        "cidr('192.168.0.0/24').containsCIDR(cidr('192.168.0.1/32'))",
        True,
    ),
    ("k8s cidr containsCIDR (differential)", "cidr('10.1.0.0/8').containsCIDR('10.2.0.0/16')", True),
    ("k8s cidr containsCIDR (differential)", "cidr('10.0.0.0/8').containsCIDR('11.0.0.0/16')", False),
    ("k8s cidr containsCIDR (differential)", "cidr('::/0').containsCIDR('10.0.0.0/8')", False),
    # differential: resource.ParseQuantity reads a missing integer part as 0
    ("k8s quantity without digits (differential)", "quantity('Gi') == quantity('0')", True),
    ("k8s quantity without digits (differential)", "quantity('Gi').isInteger()", True),
    ("k8s quantity without digits (differential)", "quantity('-Gi') == quantity('0')", True),
    (
        "k8s quantity without digits (differential)",
        "isQuantity('+') && isQuantity('.') && isQuantity('E')",
        True,
    ),
    (
        "k8s quantity without digits (differential)",
        "isQuantity('.e') || isQuantity('..Gi') || isQuantity('')",
        False,
    ),
    # blang/semver Parse, as upstream's semver() reports it (differential)
    (
        "k8s semver: leading zero",
        "semver('01.0.0') == semver('1.0.0')",
        (RUNTIME, 'Major number must not contain leading zeroes "01"'),
    ),
    (
        "k8s semver: two parts",
        "semver('v1.0') == semver('1.0.0')",
        (RUNTIME, "No Major.Minor.Patch elements found"),
    ),
    (
        "k8s semver: a v prefix",
        "semver('v1.0.0') == semver('1.0.0')",
        (RUNTIME, 'Invalid character(s) found in major number "v1"'),
    ),
    (
        "k8s semver: prerelease",
        "semver('1.0.0-a_b') == semver('1.0.0')",
        (RUNTIME, 'Invalid character(s) found in prerelease "a_b"'),
    ),
    (
        "k8s semver: empty build",
        "semver('1.0.0+a.') == semver('1.0.0')",
        (RUNTIME, "Build meta data is empty"),
    ),
    (
        "k8s semver: empty field",
        "semver('1..0') == semver('1.0.0')",
        (RUNTIME, 'strconv.ParseUint: parsing "": invalid syntax'),
    ),
    (
        "k8s semver: past uint64",
        "semver('99999999999999999999.0.0') == semver('1.0.0')",
        (RUNTIME, 'parsing "99999999999999999999": value out of range'),
    ),
    ("k8s semver: normalize keeps its words", "isSemver('v1.0', true)", True),
    # cel-go parser macros / ext comprehensions_test.go: a variable that is not a name (differential)
    ("cel-go macros: all(i.j, ...)", "[].all(i.j, k, i.j < k)", (COMPILE, "argument must be a simple name")),
    (
        "cel-go macros: transformList(j, i.k, ...)",
        "[].transformList(j, i.k, j + i.k) == []",
        (COMPILE, "argument must be a simple name"),
    ),
    ("cel-go macros: all(x.y, ...)", "[1].all(x.y, true)", (COMPILE, "argument must be a simple name")),
    # cel-go checker: the null type is named null in messages (differential)
    ("cel-go checker: null in a message", "int('12') > null", (COMPILE, "applied to '(int, null)'")),
    (
        "cel-go checker: null in a literal",
        "[null, 'a'].size() == 2",
        (COMPILE, "expected type 'null' but found 'string'"),
    ),
    ("cel-go checker: null_type stays an identifier", "type(null) == null_type", True),
    # cel-go ext/strings_test.go TestStringsVersions/checker errors (differential)
    (
        "cel-go strings: charAt(bool)",
        "'hello'.charAt(true) == ''",
        (COMPILE, "'charAt' applied to 'string.(bool)'"),
    ),
    (
        "cel-go strings: indexOf(int, int)",
        "'42'.indexOf(4, 0) == 0",
        (COMPILE, "'indexOf' applied to 'string.(int, int)'"),
    ),
    (
        "cel-go strings: replace, 4 arguments",
        "'42'.replace('2', '1', 1, false) == '41'",
        (COMPILE, "'replace' applied to 'string.(string, string, int, bool)'"),
    ),
    (
        "cel-go strings: reverse is version 3",
        "'x'.reverse() == 'x'",
        (COMPILE, "'reverse' applied to 'string.()'"),
    ),
    ("cel-go lists: reverse on a list", "[1, 2].reverse() == [2, 1]", True),
    ("cel-go strings: a dyn argument", f"'A100'.indexOf(device.attributes['{GPU}'].model) == -1", True),
    # cel-go ext/strings_test.go (differential): an offset at or past the end finds nothing, an
    # empty substring is found at the offset capped at the length, a negative offset is an error
    ("cel-go strings indexOf past the end", "'tacocat'.indexOf('a', 30) == -1", True),
    ("cel-go strings indexOf empty past the end", "'tacocat'.indexOf('', 30) == 7", True),
    ("cel-go strings lastIndexOf past the end", "'tacocat'.lastIndexOf('a', 30) == -1", True),
    ("cel-go strings lastIndexOf empty past the end", "'tacocat'.lastIndexOf('', 30) == 7", True),
    ("cel-go strings lastIndexOf at the end", "'tacocat'.lastIndexOf('t', 7) == -1", True),
    ("cel-go strings lastIndexOf before the end", "'tacocat'.lastIndexOf('at', 6) == 5", True),
    ("cel-go strings lastIndexOf empty", "'tacocat'.lastIndexOf('', 3) == 3", True),
    (
        "cel-go strings indexOf negative",
        "'tacocat'.indexOf('', -1) == 0",
        (RUNTIME, "index out of range: -1"),
    ),
    # cel-go interpreter evalMap: the first error among keys and values, a repeated key's last value
    ("cel-go evalMap: an error key", "{1 / 0: 1}.size() == 1", (RUNTIME, "division by zero")),
    ("cel-go evalMap: an error value", "{'a': 1 / 0}.size() == 1", (RUNTIME, "division by zero")),
    ("cel-go evalMap: a repeated key", "{'a': 1, 'a': 2}['a'] == 2", True),
]

OPTIONAL_SYNTAX: list[Case] = [
    # cel-go optional entries and macros (cel.OptionalTypes: cel-go TestOptionals)
    ("cel-go optionals: list entry present", "[?optional.of(1), 2] == [1, 2]", True),
    ("cel-go optionals: list entry absent", "[?optional.none()] == []", True),
    (
        "cel-go optionals: list entry needs an optional",
        "[?1] == [1]",
        (COMPILE, "expected type 'optional_type(int)' but found 'int'"),
    ),
    ("cel-go optionals: map entry present", "{?'a': optional.of(1)} == {'a': 1}", True),
    ("cel-go optionals: map entry absent", "{?'a': optional.none(), 'b': 2} == {'b': 2}", True),
    (
        "cel-go optionals: map entry needs an optional",
        "{?'a': 1}",
        (COMPILE, "expected type 'optional_type(int)' but found 'int'"),
    ),
    ("cel-go optionals: no ? in calls", "size(?[1]) == 1", (COMPILE, "Syntax error")),
    (
        "cel-go optionals: attribute entry",
        f"[?device.attributes['{GPU}'].?model] == ['A100-SXM4-80GB']",
        True,
    ),
    ("cel-go optionals: optMap", "optional.of(1).optMap(x, x + 1) == optional.of(2)", True),
    ("cel-go optionals: optMap on none", "optional.none().optMap(x, x / 0) == optional.none()", True),
    (
        "cel-go optionals: optMap error",
        "optional.of(1).optMap(x, x / 0) == optional.none()",
        (RUNTIME, "division by zero"),
    ),
    ("cel-go optionals: optFlatMap", "optional.of(1).optFlatMap(x, optional.of(x + 1)).value() == 2", True),
    (
        "cel-go optionals: optFlatMap on none",
        "optional.none().optFlatMap(x, optional.of(x)) == optional.none()",
        True,
    ),
    (
        "cel-go optionals: optMap variable",
        "optional.of(1).optMap(x.y, x) == optional.of(1)",
        (COMPILE, "optMap() variable name must be a simple identifier"),
    ),
    (
        "cel-go optionals: optMap on an int",
        "1.optMap(x, x) == 1",
        (COMPILE, "found no matching overload for 'hasValue' applied to 'int.()'"),
    ),
    (
        "cel-go optionals: optMap arity",
        "optional.of(1).optMap(x) == optional.of(1)",
        (COMPILE, "undeclared reference to 'optMap'"),
    ),
    (
        "cel-go TestTwoVarComprehensions exists with optMap",
        "cel.bind(l, ['hello', 'world', 'hello!', 'worlds'], l.exists(i, v, v.startsWith('hello')"
        " && l[?(i+1)].optMap(next, next.endsWith('world')).orValue(false)))",
        True,
    ),
    (
        "cel-go TestTwoVarComprehensions transformMapEntry with an optional entry",
        "'key1:value1:extra key2:value2 key3'.split(' ').transformMapEntry(i, v,"
        " cel.bind(entry, v.split(':'), {?entry[0]: entry[?1]})) == {'key1': 'value1', 'key2': 'value2'}",
        True,
    ),
    # cel-go optional syntax (cel-spec optionals conformance, cel-go TestOptionals)
    ("cel-go optionals: select present", "{'key': 'test'}.?key.orValue('') == 'test'", True),
    ("cel-go optionals: select absent", "{'key': 'test'}.?other.hasValue()", False),
    ("cel-go optionals: select on none chains", "optional.none().?key.hasValue()", False),
    ("cel-go optionals: select on of", "optional.of({'a': 1}).?a == optional.of(1)", True),
    ("cel-go optionals: chained field", "{'a': {'b': 1}}.?a.b.value() == 1", True),
    (
        "cel-go optionals: chained field, missing",
        "{'a': {'b': 1}}.?a.c.value() == 1",
        (RUNTIME, "no such key: c"),
    ),
    ("cel-go optionals: index list", "[1, 2, 3][?2] == optional.of(3)", True),
    ("cel-go optionals: index list out of range", "[1, 2, 3][?3].hasValue()", False),
    ("cel-go optionals: index map", "{'k': 'v'}[?'k'].value() == 'v'", True),
    ("cel-go optionals: index map absent", "{'k': 'v'}[?'x'].orValue('d') == 'd'", True),
    (
        "DRA: an optional attribute",
        f"device.attributes['{GPU}'].?model.orValue('') == 'A100-SXM4-80GB'",
        True,
    ),
    ("DRA: a missing attribute", f"device.attributes['{GPU}'].?memory.orValue(0) == 0", True),
    ("DRA: an unknown domain", "device.attributes['other.example.com'].?model.hasValue()", False),
    ("DRA: optional on a device field", "device.?driver.value() == 'gpu.example.com'", True),
    ("checker: unknown device field", "device.?nope.hasValue()", (COMPILE, "undefined field 'nope'")),
]

COST: list[Case] = [
    # cel-go interpreter/runtimecost.go with DRA's CELSelectorExpressionMaxCost (1,000,000); the
    # costs in the names are upstream's (the oracle's EvalDetails.ActualCost)
    (
        "DRA cost limit: 816,012 passes",
        "lists.range(1000).all(i, lists.range(100).all(j, i + j >= 0))",
        True,
    ),
    (
        "DRA cost limit: 240,172 passes",
        "lists.range(10).all(i, lists.range(3000).all(j, i + j >= 0))",
        True,
    ),
    (
        "DRA cost limit: over 1,000,000 stops",
        "lists.range(1000).all(i, lists.range(1000).all(j, i + j >= 0))",
        (RUNTIME, "operation cancelled: actual cost limit exceeded"),
    ),
    (
        "DRA cost limit: a filter's appends count",
        "lists.range(100000).filter(i, i >= 0).size() == 100000",
        (RUNTIME, "operation cancelled: actual cost limit exceeded"),
    ),
    (
        "DRA cost limit: exists stops at the first match",
        "lists.range(100000).exists(i, i == 1)",
        True,
    ),
    (
        "DRA cost limit: building a list of a million costs more than the limit",
        "lists.range(1000000).exists(i, i == 1)",
        (RUNTIME, "operation cancelled: actual cost limit exceeded"),
    ),
]

RUNTIME_WORDS: list[Case] = [
    # the allocator's words (cel-go interpreter, dynamic-resource-allocation DeviceMatches)
    (
        "cel-go: a macro over a non-iterable",
        "dyn(1).exists(x, x == 1)",
        (RUNTIME, "got 'types.Int', expected iterable type"),
    ),
    (
        "cel-go: a macro over a quantity",
        "dyn(quantity('1')).all(x, x == 1)",
        (RUNTIME, "got 'cel.Quantity', expected iterable type"),
    ),
    (
        "cel-go: a two-variable macro over a non-iterable",
        "dyn(1).all(i, v, v == 1)",
        (RUNTIME, "unsupported comprehension range type: types.Int"),
    ),
    (
        "DRA DeviceMatches: a list result",
        "dyn([1])",
        (
            RUNTIME,
            "CEL result of type list could not be converted to bool:"
            " type conversion error from list to 'bool'",
        ),
    ),
    (
        "DRA DeviceMatches: a string result",
        "dyn('a')",
        (RUNTIME, "CEL result of type string could not be converted to bool: unsupported native conversion"),
    ),
    (
        "DRA DeviceMatches: a quantity result",
        "dyn(quantity('1'))",
        (
            RUNTIME,
            "type kubernetes.Quantity could not be converted to bool: type conversion error from 'Quantity'",
        ),
    ),
]

COMPILE_WORDS: list[Case] = [
    # cel-go parser/macro.go: the accumulator's name is reserved
    (
        "cel-go macros: iteration variable named __result__",
        "[].all(__result__, __result__ > 0)",
        (COMPILE, "<input>:1:8: iteration variable overwrites accumulator variable"),
    ),
    (
        "cel-go ext comprehensions: second variable named __result__",
        "[].all(j, __result__, __result__ < j)",
        (COMPILE, "<input>:1:11: iteration variable overwrites accumulator variable"),
    ),
]

#: cel-go's checker and compile-time validators, as the differential against the oracle found them.
CHECKER: list[Case] = [
    # validators (homogeneous literals, string format) run only on a cleanly checked expression
    (
        "cel-go validators after the check: an overload error first",
        f"[device.attributes['{GPU}'].cores, 1].size() == 2 && int(true) == 1",
        (COMPILE, "found no matching overload for 'int' applied to '(bool)'"),
    ),
    (
        "cel-go validators after the check: an undeclared reference first",
        f"[device.attributes['{GPU}'].cores, 1].size() == math.least(0, 1)",
        (COMPILE, "undeclared reference to 'math'"),
    ),
    (
        "cel-go validators after the check: '!_' on an int first",
        f"![device.attributes['{GPU}'].cores, 1].size() == 1",
        (COMPILE, "found no matching overload for '!_' applied to '(int)'"),
    ),
    # each literal is validated, errors sorted by position; a mixed literal is a list(dyn)
    (
        "cel-go HomogeneousAggregateLiterals: the outer literal's error comes first",
        "sets.intersects([[1], [2, 3]], [[1, 2], [2, 3.0]])",
        (COMPILE, "expected type 'list(int)' but found 'list(dyn)'"),
    ),
    (
        "cel-go ext lists_test.go flatten: a nested mixed literal",
        "[1,[2,[3,4]]].flatten() == [1,2,[3,4]]",
        (COMPILE, "expected type 'int' but found 'list(dyn)'"),
    ),
    (
        "cel-go ext lists_test.go flatten: an empty literal is a list(dyn) next to an int",
        "[1,2,[],[],[3,4]].flatten() == [1,2,3,4]",
        (COMPILE, "expected type 'int' but found 'list(dyn)'"),
    ),
    ("cel-go checker: an empty literal binds to its neighbours", "[[1], []] == [[1]]", False),
    (
        "cel-go checker: an empty literal binds to its neighbours",
        "[[], [1], [1.0]] == []",
        (COMPILE, "expected type 'list(int)' but found 'list(double)'"),
    ),
    (
        "cel-go checker: l + [] is l",
        "[[dyn(1)] + [], [1]] == []",
        (COMPILE, "expected type 'list(dyn)' but found 'list(int)'"),
    ),
    # orValue's type parameter binds to the optional's element first
    (
        "cel-go optional orValue: an optional attribute's value is dyn",
        f"[device.attributes['{GPU}'].?cores.orValue(0), 1].size() == 2",
        (COMPILE, "expected type 'dyn' but found 'int'"),
    ),
    (
        "cel-go optional orValue: optional.of(1) gives an int",
        "[optional.of(1).orValue(0), 1.0] == []",
        (COMPILE, "expected type 'int' but found 'double'"),
    ),
    (
        "cel-go optional orValue: optional.none() takes the argument's type",
        "[optional.none().orValue(0), 1.0] == []",
        (COMPILE, "expected type 'int' but found 'double'"),
    ),
    # results of type-parameterised list functions
    (
        "cel-go ext lists sort: several overloads match a list(dyn), the result is dyn",
        "[[dyn(1)].sort(), [1]] == []",
        (COMPILE, "expected type 'dyn' but found 'list(int)'"),
    ),
    ("cel-go ext lists sort: a list(int) sorts to a list(int)", "[[1].sort(), [1]] == []", False),
    (
        "cel-go ext lists reverse keeps the element type",
        "[[1].reverse(), [1.0]] == []",
        (COMPILE, "expected type 'list(int)' but found 'list(double)'"),
    ),
    (
        "k8s lists max is the element type",
        "[[dyn(1)].max(), 1.0] == []",
        (COMPILE, "expected type 'dyn' but found 'double'"),
    ),
    (
        "cel-go macros: filter keeps the element type",
        "[[1].filter(x, true), [1.0]] == []",
        (COMPILE, "expected type 'list(int)' but found 'list(double)'"),
    ),
    (
        "cel-go checker: a conditional's branches must join",
        "[(1 == 1 ? [1] : [2.0]), [1]] == []",
        (COMPILE, "found no matching overload for '_?_:_' applied to '(bool, list(int), list(double))'"),
    ),
    (
        "cel-go checker: == on aggregates of other types",
        "{1: 2} == {1: 2.0}",
        (COMPILE, "found no matching overload for '_==_' applied to '(map(int, int), map(int, double))'"),
    ),
    (
        "cel-go checker: conversions' overloads",
        "bool(1) == true",
        (COMPILE, "found no matching overload for 'bool' applied to '(int)'"),
    ),
    ("cel-go checker: ip has a string conversion", "string(ip('10.0.0.1')) == '10.0.0.1'", True),
    # format() exempts every literal inside it; its validator checks literal arguments' types
    (
        "cel-go ext formatting_test.go: nested mixed literals inside format",
        '["list: %s".format([[[1, 2, [3.0, 4]]]])].size() == 1',
        True,
    ),
    (
        "cel-go ext formatting_test.go: a literal's size inside format",
        '["list size: %d".format([[[1, 2, [3.0, 4]]].size()])].size() == 1',
        True,
    ),
    (
        "cel-go format validator: binary of a string",
        '"%b".format(["fish"]) == ""',
        (
            COMPILE,
            "error during formatting: only integers and bools can be formatted as binary, was given string",
        ),
    ),
    (
        "cel-go format validator: fixed-point of an int",
        '"%.2f".format([1]) == ""',
        (COMPILE, "error during formatting: fixed-point clause can only be used on doubles, was given int"),
    ),
    (
        "cel-go format validator: decimal of a list",
        '"%d".format([[1]]) == ""',
        (COMPILE, "decimal clause can only be used on integers, was given list"),
    ),
    (
        "cel-go format validator: too few arguments",
        '"%s %s".format([1]) == ""',
        (COMPILE, "index 1 out of range"),
    ),
    (
        "cel-go format validator: too many arguments",
        '"%s".format([1, 2]) == ""',
        (COMPILE, "too many arguments supplied to string.format (expected 1, got 2)"),
    ),
    (
        "cel-go format validator: a dyn argument waits for the value",
        '"%b".format([dyn("x")]) == ""',
        (RUNTIME, "binary"),
    ),
    (
        "cel-go format validator: scientific takes a string",
        '"%e".format(["x"]) == ""',
        (RUNTIME, "scientific"),
    ),
    # the two-variable transforms are checked as their expansions
    (
        "cel-go ext comprehensions_test.go: strings v2 has no reverse",
        "{'hello': 'world'}.transformMapEntry(k, v, {k.reverse(): v.reverse()}) == {}",
        (COMPILE, "found no matching overload for 'reverse' applied to 'string.()'"),
    ),
    (
        "cel-go ext comprehensions_test.go: a filter that is not a bool",
        "{}.transformMapEntry(j, k, 'bad filter', {k: j})",
        (
            COMPILE,
            "found no matching overload for '_?_:_' applied to '(string, map(dyn, dyn), map(dyn, dyn))'",
        ),
    ),
    (
        "cel-go ext comprehensions_test.go: a transform's own error",
        "[1, 2].transformList(i, v, v % 2 == 0 ? [v] : v)",
        (COMPILE, "found no matching overload for '_?_:_' applied to '(bool, list(int), int)'"),
    ),
    (
        "cel-go ext comprehensions_test.go: a transformMapEntry that is no map",
        "{'hello': 'world'}.transformMapEntry(k, v, []) == {}",
        (COMPILE, "found no matching overload for 'cel.@mapInsert' applied to '(map(dyn, dyn), list(dyn))'"),
    ),
    (
        "cel-go ext comprehensions_test.go: the index is an int",
        "[1.0, 2.0, 2.0].transformList(i, v, i / 2.0 == 1.0)",
        (COMPILE, "found no matching overload for '_/_' applied to '(int, double)'"),
    ),
    (
        "cel-go ext comprehensions: transformMap's filter",
        "{'a': 1}.transformMap(k, v, 'x', v) == {}",
        (
            COMPILE,
            "no matching overload for '_?_:_' applied to '(string, map(string, int), map(string, int))'",
        ),
    ),
    (
        "cel-go macros: exists_one counts under a conditional",
        "[1, 2].exists_one(x, x)",
        (COMPILE, "found no matching overload for '_?_:_' applied to '(int, int, int)'"),
    ),
    (
        "cel-go macros: all joins a bool",
        "[1, 2].all(x, x)",
        (COMPILE, "expected type 'bool' but found 'int'"),
    ),
    (
        "cel-go macros: the variable has the element type",
        "[1].map(x, x + 1.0) == []",
        (COMPILE, "found no matching overload for '_+_' applied to '(int, double)'"),
    ),
    # cel-go's planner folds a conversion of a constant: a failure stops the program's creation
    (
        "cel-go planner: int of a literal string",
        "int('x') == int('x')",
        (COMPILE, "program instantiation failed: type conversion error from 'string' to 'int'"),
    ),
    ("cel-go planner: int of a number string", "int('-12') == -12", True),
    (
        "cel-go planner: uint takes no sign",
        "uint('-1') == 1u",
        (COMPILE, "program instantiation failed: type conversion error from 'string' to 'uint'"),
    ),
    (
        "cel-go planner: folded through dyn",
        "int(dyn('x')) == 1",
        (COMPILE, "program instantiation failed: type conversion error from 'string' to 'int'"),
    ),
    (
        "cel-go planner: a double out of range",
        "int(1.5e30) == 1",
        (COMPILE, "program instantiation failed: integer overflow"),
    ),
    (
        "cel-go planner: a negative uint",
        "uint(-1) == 1u",
        (COMPILE, "program instantiation failed: unsigned integer overflow"),
    ),
    ("cel-go planner: a truncated double", "int(-1.5) == -1", True),
    ("cel-go planner: Go's float syntax has underscores", "double('1_000') == 1000.0", True),
    (
        "cel-go planner: a double out of Go's range",
        "double('1e400') > 1.0",
        (COMPILE, "program instantiation failed: type conversion error from 'string' to 'double'"),
    ),
    ("cel-go planner: Go's bool spellings", "bool('true') && !bool('false')", True),
    (
        "cel-go planner: other bool spellings",
        "bool('yes')",
        (COMPILE, "program instantiation failed: type conversion error from 'string' to 'bool'"),
    ),
    (
        "cel-go planner: an attribute is no constant",
        f"int(device.attributes['{GPU}'].model) == 1",
        (RUNTIME, "int"),
    ),
]

RANGE = "cannot be range of a comprehension (must be list, map, or dynamic)"

PARSER: list[Case] = [
    # cel-go's NUM_FLOAT needs digits after the dot: ``42.`` is the int 42 and a member call
    (
        "cel-go TestStrings charAt on an int",
        "42.charAt(2) == ''",
        (COMPILE, "found no matching overload for 'charAt' applied to 'int.(int)'"),
    ),
    (
        "cel-go TestStrings indexOf on an int",
        "24.indexOf('2') == 0",
        (COMPILE, "found no matching overload for 'indexOf' applied to 'int.(string)'"),
    ),
    (
        "cel-go TestStrings substring on an int",
        "30.substring(true, 3) == ''",
        (COMPILE, "found no matching overload for 'substring' applied to 'int.(bool, int)'"),
    ),
    (
        "cel-go strings on a bool",
        "true.split('2') == ['4']",
        (COMPILE, "found no matching overload for 'split' applied to 'bool.(string)'"),
    ),
    (
        "cel-go lexer: 1.e5 selects e5 on an int",
        "1.e5 == 1",
        (COMPILE, "type 'int' does not support field selection"),
    ),
    ("cel-go lexer: floats", "1.5 == 1.5 && .5 == 0.5 && 1e3 == 1000.0 && -2.5 < 0.0", True),
    # cel-go's lexer: ``in`` is a keyword, never a field, function or variable name
    ("cel-go parser: ExampleType{}.in", "ExampleType{}.in", (COMPILE, "Syntax error")),
    ("cel-go parser: device.in", "device.in", (COMPILE, "Syntax error")),
    ("cel-go parser: x.in()", "x.in()", (COMPILE, "Syntax error")),
    ("cel-go parser: a variable named in", "[1].map(in, in) == [1]", (COMPILE, "Syntax error")),
    ("cel-go parser: 'in' as a key", "device.attributes['in'].size() == 0 && 1 in [1]", True),
    # cel-go checker: a comprehension's range must be a list, a map or dyn (before the body)
    ("cel-go TestTwoVarComprehensions range int", "1.all(j, k, j < k)", (COMPILE, f"type 'int' {RANGE}")),
    (
        "cel-go TestTwoVarComprehensions range string",
        "''.exists(j, k, j < k)",
        (COMPILE, f"type 'string' {RANGE}"),
    ),
    (
        "cel-go TestTwoVarComprehensions existsOne",
        "''.existsOne(j, k, j < k)",
        (COMPILE, f"type 'string' {RANGE}"),
    ),
    ("cel-go macro range int", "1.all(x, 1)", (COMPILE, f"type 'int' {RANGE}")),
    ("cel-go macro range null", "null.exists(x, true)", (COMPILE, f"type 'null' {RANGE}")),
    ("cel-go macro range device", "device.all(x, true)", (COMPILE, f"type 'kubernetes.DRADevice' {RANGE}")),
    (
        "cel-go macro range quantity",
        "quantity('1').all(x, true)",
        (COMPILE, f"type 'kubernetes.Quantity' {RANGE}"),
    ),
    ("cel-go map range string", "''.map(x, x) == []", (COMPILE, f"type 'string' {RANGE}")),
    ("cel-go transformList range int", "1.transformList(i, v, v) == []", (COMPILE, f"type 'int' {RANGE}")),
    # cel-go's parser drops pairs of ``!`` and ``-`` in a run (not through parentheses)
    ("cel-go parser: !! on an int", "!!1 == 1", True),
    (
        "cel-go parser: !!! on an int",
        "!!!1",
        (COMPILE, "found no matching overload for '!_' applied to '(int)'"),
    ),
    (
        "cel-go parser: !(!x) keeps both",
        "!(!1)",
        (COMPILE, "found no matching overload for '!_' applied to '(int)'"),
    ),
    ("cel-go parser: -- on a string", f"--device.attributes['{GPU}'].model == 'a'", False),
    ("cel-go parser: --- keeps one", "---1 == -1", True),
    ("cel-go parser: -! is not a run", "-!true", (COMPILE, "Syntax error")),
    ("cel-go parser: !-x is not a run", f"!-device.attributes['{GPU}'].cores", (COMPILE, "Syntax error")),
    ("cel-go parser: !-- is not a run", "!--1 == 1", (COMPILE, "Syntax error")),
    (
        "cel-go parser: !-1 negates a literal",
        "!-1",
        (COMPILE, "found no matching overload for '!_' applied to '(int)'"),
    ),
    (
        "cel-go parser: -(!x) is",
        "-(!true)",
        (COMPILE, "found no matching overload for '-_' applied to '(bool)'"),
    ),
    ("cel-go parser: 1 - -1", "1 - -1 == 2", True),
    ("cel-go parser: 257 !", "!" * 257 + "true", False),
    # cel-go's planner (OptOptimize) folds ``x in []`` to false: ``x`` is not evaluated
    ("differential: !string in []", f"!(device.attributes['{GPU}'].model) in []", False),
    ("cel-go OptOptimize: in ([]) in a macro", "[1, 2].exists(x, x / 0 in ([]))", False),
    ("cel-go OptOptimize: in [] || true", f"device.attributes['{GPU}'].model / 2 in [] || true", True),
    ("cel-go OptOptimize: in [] is still checked", "nope in []", (COMPILE, "undeclared reference to 'nope'")),
    (
        "cel-go OptOptimize: in [1] is not folded",
        "[1, 2].exists(x, x / 0 in [1])",
        (RUNTIME, "division by zero"),
    ),
    (
        "differential: !! on a quantity comparison",
        "!!quantity('40Gi').compareTo(quantity('16Gi')) != 0",
        True,
    ),
]

CASES = (
    COST
    + COMPILE_WORDS
    + RUNTIME_WORDS
    + LISTS
    + SETS
    + REGEX
    + STRINGS
    + IP_CIDR
    + URLS
    + FORMAT_OPTIONAL
    + TWO_VARIABLE
    + SEMANTICS
    + OPTIONAL_SYNTAX
    + CHECKER
    + PARSER
)


def outcome(engine: SelectorEngine, expression: str) -> Any:
    try:
        return engine.matches(expression, DEVICE)
    except CelError as e:
        return (type(e).__name__, e.message)


def _check(got: Any, expected: Any) -> None:
    if isinstance(expected, tuple):
        assert isinstance(got, tuple), f"expected {expected}, got {got!r}"
        assert got[0] == expected[0], f"expected {expected}, got {got!r}"
        assert expected[1] in got[1], f"expected {expected}, got {got!r}"
    else:
        assert got is expected


@pytest.mark.parametrize(("upstream", "expression", "expected"), CASES, ids=[c[1] for c in CASES])
def test_conformance(upstream: str, expression: str, expected: Any) -> None:
    """``upstream`` names the transcribed test; both engines must give its answer."""
    require_engine("cel-rust")
    for name in ("cel-python", "cel-rust"):
        _check(outcome(SelectorEngine(engine=name), expression), expected)


_QUANTITY_REGEX = (
    "quantities must match the regular expression '^([+-]?[0-9.]+)([eEinumkKMGTP]*[-+]?[0-9]*)$'"
)

#: Runtime errors whose whole message is upstream's (the oracle's answer, bench/cel_differential.py):
#: (expression, message) on :data:`DEVICE`.
EXACT_RUNTIME_WORDS: list[tuple[str, str]] = [
    # cel-go evalBinary/evalUnary: an operand with the operator's trait (or a string, timestamp or
    # duration, which receive any call) gets "no such overload", any other the operator's name
    (f"device.attributes['{GPU}'].cores < null", "no such overload"),
    (f"device.attributes['{GPU}'].model < 5", "no such overload"),
    ("dyn(null) < dyn(1)", "no such overload: _<_"),
    ("dyn([]) < dyn([])", "no such overload: _<_"),
    ("dyn(1) + dyn('a') == 1", "no such overload"),
    ("dyn([]) + dyn(1) == 1", "no such overload"),
    ("dyn(null) + dyn(1) == 1", "no such overload: _+_"),
    ("dyn('a') - dyn('a') == 1", "no such overload"),
    ("dyn([]) - dyn([]) == 1", "no such overload: _-_"),
    ("-dyn(true) == 1", "no such overload"),
    ("-dyn(null) == 1", "no such overload: -_"),
    ("size(dyn(1)) == 1", "no such overload: size"),
    ("!dyn('a')", "no such overload"),
    ("dyn(1) in dyn(2)", "no such overload"),
    ("dyn(1) ? true : false", "no such overload"),
    ("[1, 2].exists_one(x, dyn(x))", "no such overload"),
    ("[1, 2].all(i, v, dyn(v))", "no such overload"),
    ("[1, 2].transformMapEntry(i, v, dyn(v)).size() == 1", "no such overload: cel.@mapInsert(map, int)"),
    ("dyn(1).startsWith('a')", "no such overload"),
    ("'a'.findAll('a', dyn('x')).size() == 1", "no such overload"),
    # cel-go attribute qualifiers: indices of a list or of what is no container
    ("dyn([1])['a'] == 1", "unsupported index type 'string' in list"),
    ("dyn([1])[1234567.5] == 1", "unsupported index value 1.2345675e+06 in list"),
    ("dyn([1])[1000000.0] == 1", "index out of bounds: 1e+06"),
    ("dyn('a')[0] == 1", "no such key: 0"),
    # resource.ParseQuantity: letters that are no suffix, a character out of place, a number
    *(
        (f"[quantity('{text}')].size() == 1", message)
        for text, message in [
            ("10Mm", "unable to parse quantity's suffix"),
            ("200K", "unable to parse quantity's suffix"),
            ("1e", "unable to parse quantity's suffix"),
            ("1e+", "unable to parse quantity's suffix"),
            ("1e99999999999999999999", "unable to parse quantity's suffix"),
            ("1x", _QUANTITY_REGEX),
            ("1e3x", _QUANTITY_REGEX),
            ("1.2.3", _QUANTITY_REGEX),
            ("\u0661", _QUANTITY_REGEX),
        ]
    ),
    # k8s ip.go and netip quote the text as Go's %q does
    (
        "ip('a\"b').family() == 4",
        'IP Address "a\\"b" parse error during conversion from string: '
        'ParseAddr("a\\"b"): unable to parse IP',
    ),
    (
        "ip('1.2.3.\\x01').family() == 4",
        'IP Address "1.2.3.\\x01" parse error during conversion from string: ParseAddr("1.2.3.\\x01"): '
        'unexpected character (at "\\x01")',
    ),
    # Go netip.ParseAddr's IPv6 errors (parseIPv6), after k8s ip.go's words
    *(
        (
            f"ip('{text}') == ip('::1')",
            f'IP Address "{text}" parse error during conversion from string: ParseAddr("{text}"): {detail}',
        )
        for text, detail in [
            ("2001:db8:::68", 'each colon-separated field must have at least one digit (at ":68")'),
            ("2001:db8::68::1", 'multiple :: in address (at ":1")'),
            ("12345::1", 'each group must have 4 or less digits (at "12345::1")'),
            ("1:2:3:4:5:6:7", "address string too short"),
            ("1:2:3:4:5:6:7:8::", "the :: must expand to at least one field of zeros"),
            ("1:2:3:4:5:6:7:8:9", 'trailing garbage after address (at "9")'),
            ("1:", 'colon must be followed by more characters (at ":")'),
            ("::1x", 'unexpected character, want colon (at "x")'),
            (
                "1:2:3:1.2.3.4",
                'embedded IPv4 address must replace the final 2 fields of the address (at "1.2.3.4")',
            ),
            ("::1.2.3.256", "IPv4 field has value >255"),
            ("fe80::1%", "zone must be a non-empty string"),
        ]
    ),
    ("ip('fe80::1%eth0') == ip('::1')", 'IP address "fe80::1%eth0" with zone value is not allowed'),
    (
        'ip.isCanonical("2001:db8:::68")',
        'IP Address "2001:db8:::68" parse error during conversion from string: ParseAddr("2001:db8:::68"): '
        'each colon-separated field must have at least one digit (at ":68")',
    ),
    # cel-go ext/formatting.go (version 1): fixed-point and scientific clauses take doubles only
    # (and the strings NaN, Infinity, -Infinity), decimal clauses integers only, whatever the
    # checker could see
    (
        f"!format.dns1123Label().validate('%.2f'.format([device.attributes['{GPU}'].cores])).hasValue()",
        "error during formatting: fixed-point clause can only be used on doubles, was given int",
    ),
    (
        "'%f'.format([dyn(1u)]) == ''",
        "error during formatting: fixed-point clause can only be used on doubles, was given uint",
    ),
    (
        "'%e'.format([dyn(1)]) == ''",
        "error during formatting: scientific clause can only be used on doubles, was given int",
    ),
    (
        "'%d'.format([dyn(0.0/0.0)]) == ''",
        "error during formatting: decimal clause can only be used on integers, was given double",
    ),
    (
        "'%s'.format([dyn(quantity('1'))]) == ''",
        "error during formatting: string clause can only be used on strings, bools, bytes, ints, doubles,"
        " maps, lists, types, durations, and timestamps, was given kubernetes.Quantity",
    ),
    (
        "'%s'.format([dyn([ip('1.2.3.4')])]) == ''",
        "error during formatting: no formatting function for net.IP",
    ),
    # the formatted text, read back through ip()'s error (Go quotes it)
    *(
        (
            f"ip({template}.format([{arg}])).family() == 0",
            f"IP Address {text} parse error during conversion from string: ParseAddr({text}): {detail}",
        )
        for template, arg, text, detail in [
            ("'%.2f'", "dyn('Infinity')", '"\u221e"', "unable to parse IP"),
            ("'%e'", "dyn(-1.0/0.0)", '"    -\u221e"', "unable to parse IP"),
            (
                "'%.20e'",
                "dyn(12345.678)",
                '"       1.234568\u00d710\u2070\u2074"',
                'unexpected character (at "       1.234568\u00d710\u2070\u2074")',
            ),
            (
                "'%e'",
                "dyn(-0.000123)",
                '"-1.230000\u00d710\u207b\u2070\u2074"',
                'unexpected character (at "-1.230000\u00d710\u207b\u2070\u2074")',
            ),
            ("'%f'", "dyn(-0.0)", '"0.000000"', "IPv4 field has octet with leading zero"),
            ("'%s'", "dyn(1234567.5)", '"1.2345675e+06"', "IPv4 field has value >255"),
            ("'%s'", "dyn(type(1))", '"int"', "unable to parse IP"),
            (
                "'%s'",
                "dyn([0.0/0.0, 1.0/0.0])",
                '"[\\"NaN\\", \\"+Inf\\"]"',
                "unable to parse IP",
            ),
            ("'%s'", "dyn(['a\\x01'])", '"[\\"a\\\\x01\\"]"', "unable to parse IP"),
        ]
    ),
    # k8s cidr.go: containsIP's string that is no IP is "no such overload"; containsCIDR's
    # string that is no CIDR is its parse error
    ("cidr('10.0.0.0/8').containsIP('not-an-ip')", "no such overload"),
    ("cidr('10.0.0.0/8').containsIP('10.0.0.256')", "no such overload"),
    ("cidr('::1/128').containsIP('1.2.3')", "no such overload"),
    ("cidr('10.0.0.0/8').containsIP('::ffff:10.0.0.1')", "no such overload"),
    ("cidr('10.0.0.0/8').containsIP('fe80::1%eth0')", "no such overload"),
    (
        "cidr('10.0.0.0/8').containsIP(ip('10.0.0.256'))",
        'IP Address "10.0.0.256" parse error during conversion from string: '
        'ParseAddr("10.0.0.256"): IPv4 field has value >255',
    ),
    (
        "cidr('10.0.0.0/8').containsCIDR('10.0.0.0')",
        "network address parse error during conversion from string: network address parse error"
        " during conversion from string: netip.ParsePrefix(\"10.0.0.0\"): no '/'",
    ),
    # decls.MaybeNoSuchOverload: a library function's runtime dispatch names the arguments given
    ("cidr('10.0.0.0/8').containsIP(dyn(1))", "no such overload: containsIP(net.CIDR, int)"),
    ("'abc'.indexOf(dyn(1)) == 1", "no such overload: indexOf(string, int)"),
    ("semver(dyn(1)).major() == 1", "no such overload: semver(int)"),
    ("[dyn(1)].join() == ''", "no such overload: join(list)"),
    # ext.Lists flatten: a target that is no list by its type; a depth that is no int fails the
    # runtime cost tracker's conversion first
    ("[dyn({}).flatten()].size() == 1", "no such overload: map(dyn, dyn).flatten()"),
    ("[dyn({}).flatten(0)].size() == 1", "no such overload: map(dyn, dyn).flatten(int)"),
    ("dyn(null).flatten().size() == 0", "no such overload: null_type.flatten()"),
    (
        "[[].flatten(dyn('1'))].size() == 1",
        "internal error: interface conversion: ref.Val is types.String, not types.Int",
    ),
    (
        "dyn({}).flatten(dyn([])).size() == 0",
        "internal error: interface conversion: ref.Val is *types.baseList, not types.Int",
    ),
]


@pytest.mark.parametrize(
    ("expression", "message"), EXACT_RUNTIME_WORDS, ids=[c[0] for c in EXACT_RUNTIME_WORDS]
)
def test_runtime_error_words_are_upstreams(expression: str, message: str) -> None:
    require_engine("cel-rust")
    for name in ("cel-python", "cel-rust"):
        got = outcome(SelectorEngine(engine=name), expression)
        assert got == (RUNTIME, message), name


NEW_FUNCTIONS = [
    f"device.attributes['{GPU}'].model.find('[0-9]+') == '100'",
    f"device.attributes['{GPU}'].model.findAll('[0-9]+').size() == 3",
    f"device.attributes['{GPU}'].model.matches('^A1')",
    f"sets.contains(['A100-SXM4-80GB'], [device.attributes['{GPU}'].model])",
    f"[device.attributes['{GPU}'].cores, dyn(1)].max() == 108",
    f"[device.attributes['{GPU}'].cores].sum() == 108",
    f"'%s'.format([device.attributes['{GPU}'].model]) == 'A100-SXM4-80GB'",
    f"device.attributes['{GPU}'].model.split('-').sortBy(p, p).size() == 3",
    f"ip(device.attributes['{GPU}'].address).family() == 4",
    f"cidr('10.0.0.0/8').containsIP(device.attributes['{GPU}'].address)",
    f"!format.dns1123Label().validate(device.attributes['{GPU}'].model).hasValue() == false",
    f"device.attributes['{GPU}'].model.split('-').all(i, v, v.size() > i)",
    f"device.attributes['{GPU}'].model.split('-').transformList(i, v, v.size()).sum() == 12",
    f"device.attributes['{GPU}'].?model.orValue('') == 'A100-SXM4-80GB'",
    f"device.attributes['{GPU}'][?'cores'].value() == 108",
    f"device.attributes['{GPU}'].model.split('-').map(p, p != '', p.size()).sum() == 12",
    f"[?device.attributes['{GPU}'].?model] == ['A100-SXM4-80GB']",
    f"{{?'m': device.attributes['{GPU}'].?model}}.size() == 1",
    f"device.attributes['{GPU}'].?model.optMap(m, m.size()).orValue(0) == 14",
]


@pytest.mark.parametrize("expression", NEW_FUNCTIONS)
def test_compiled_engine_hands_new_functions_to_the_reference(expression: str) -> None:
    require_engine("cel-rust")
    backend = make_backend("cel-rust")
    program = backend.compile(expression)
    assert backend.evaluate(program, backend.prepare(DEVICE)) is True
    stats = backend.stats()
    assert stats["declined_programs"] == 1
    assert stats["reference_evaluations"] == 1
    assert SelectorEngine(engine="cel-python").matches(expression, DEVICE) is True
