"""Kubernetes' IP, CIDR and URL libraries (``k8s.io/apiserver/pkg/cel/library/{ip,cidr,urls}.go``).

Values are small immutable objects (:class:`IPValue`, :class:`CIDRValue`, :class:`URLValue`),
equal by value to their own type only. Parsing follows Go's ``net/netip`` and
``url.ParseRequestURI`` as upstream calls them: no IPv6 zones, no IPv4-mapped IPv6 addresses, no
leading zeros, prefix lengths in decimal; error texts start with upstream's words (the detail after
them is Go's where it is cheap to reproduce, a short description otherwise).
"""

from __future__ import annotations

import ipaddress
import urllib.parse
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from celpy import celtypes
from celpy.evaluation import CELEvalError

from .gowords import OpaqueValue, go_quote, no_overload

Fn = Callable[..., Any]
Address = ipaddress.IPv4Address | ipaddress.IPv6Address


@dataclass(frozen=True, slots=True)
class IPValue(OpaqueValue):
    addr: Address
    type_name = "net.IP"

    def cel_string(self) -> str:
        return str(self.addr)


@dataclass(frozen=True, slots=True)
class CIDRValue(OpaqueValue):
    addr: Address
    bits: int
    type_name = "net.CIDR"

    def cel_string(self) -> str:
        return f"{self.addr}/{self.bits}"

    def masked_addr(self) -> Address:
        return ipaddress.ip_network(f"{self.addr}/{self.bits}", strict=False).network_address


@dataclass(frozen=True, slots=True)
class URLValue(OpaqueValue):
    scheme: str
    host: str
    path: str
    raw_query: str
    type_name = "kubernetes.URL"


# --- IP --------------------------------------------------------------------------------------


def _parse_addr(text: str) -> Address | str:
    """The address, or why it is not one (upstream's words, with Go's ``ParseAddr`` detail)."""
    try:
        if "%" in text:
            if _first_separator(text) == ":" and _ipv6_error(text) is None:
                return f"IP address {go_quote(text)} with zone value is not allowed"
            raise ValueError("not an address")
        addr = ipaddress.ip_address(text)
    except ValueError:
        detail = _go_parse_addr_error(text)
        return f"IP Address {go_quote(text)} parse error during conversion from string: {detail}"
    if isinstance(addr, ipaddress.IPv6Address) and addr.ipv4_mapped is not None:
        return f"IPv4-mapped IPv6 address {go_quote(text)} is not allowed"
    return addr


def _first_separator(text: str) -> str | None:
    """The first '.', ':' or '%' of ``text``: which parser Go's ``ParseAddr`` picks."""
    for c in text:
        if c in ".:%":
            return c
    return None


def _go_parse_addr_error(text: str) -> str:
    """Go ``netip.ParseAddr``'s error for text that is not an address (its ``parseIPv4Fields``
    and ``parseIPv6``)."""
    head = f"ParseAddr({go_quote(text)})"
    separator = _first_separator(text)
    if separator == "%":
        return f"{head}: missing IPv6 address"
    if separator == ":":
        return f"{head}: {_ipv6_error(text) or 'unable to parse IPv6 address'}"
    if separator == ".":
        return f"{head}: {_ipv4_error(text)}"
    return f"{head}: unable to parse IP"


_HEX_DIGITS = frozenset("0123456789abcdefABCDEF")


def _ipv6_error(text: str) -> str | None:
    """Go ``netip``'s ``parseIPv6`` error for ``text`` (None where it parses): its message, and
    the rest of the input it stopped at."""
    s, _, zone = text.partition("%")
    if "%" in text and not zone:
        return "zone must be a non-empty string"
    ellipsis = -1
    if s.startswith("::"):
        ellipsis, s = 0, s[2:]
        if not s:
            return None
    i = 0
    while i < 16:
        off = 0
        acc = 0
        while off < len(s) and s[off] in _HEX_DIGITS:
            acc = acc * 16 + int(s[off], 16)
            if off > 3:
                return f"each group must have 4 or less digits (at {go_quote(s)})"
            if acc > 0xFFFF:
                return f"IPv6 field has value >=2^16 (at {go_quote(s)})"
            off += 1
        if off == 0:
            return f"each colon-separated field must have at least one digit (at {go_quote(s)})"
        if off < len(s) and s[off] == ".":
            if ellipsis < 0 and i != 12:
                return (
                    f"embedded IPv4 address must replace the final 2 fields of the address (at {go_quote(s)})"
                )
            if i + 4 > 16:
                words = "too many hex fields to fit an embedded IPv4 at the end of the address"
                return f"{words} (at {go_quote(s)})"
            error = _ipv4_error(s)
            if error != "unable to parse IP":
                return error
            s = ""
            i += 4
            break
        i += 2
        s = s[off:]
        if not s:
            break
        if s[0] != ":":
            return f"unexpected character, want colon (at {go_quote(s)})"
        if len(s) == 1:
            return f"colon must be followed by more characters (at {go_quote(s)})"
        s = s[1:]
        if s[0] == ":":
            if ellipsis >= 0:
                return f"multiple :: in address (at {go_quote(s)})"
            ellipsis = i
            s = s[1:]
            if not s:
                break
    if s:
        return f"trailing garbage after address (at {go_quote(s)})"
    if i < 16 and ellipsis < 0:
        return "address string too short"
    if i >= 16 and ellipsis >= 0:
        return "the :: must expand to at least one field of zeros"
    return None


def _ipv4_error(s: str) -> str:
    """Go ``netip``'s ``parseIPv4Fields`` error for ``s`` ("unable to parse IP" where it parses)."""
    val = digits = fields = 0
    for i, c in enumerate(s):
        if "0" <= c <= "9":
            if digits == 1 and val == 0:
                return "IPv4 field has octet with leading zero"
            val = val * 10 + ord(c) - ord("0")
            digits += 1
            if val > 255:
                return "IPv4 field has value >255"
        elif c == ".":
            if i == 0 or i == len(s) - 1 or s[i - 1] == ".":
                return f"IPv4 field must have at least one digit (at {go_quote(s[i:])})"
            if fields == 3:
                return "IPv4 address too long"
            fields += 1
            val = digits = 0
        else:
            return f"unexpected character (at {go_quote(s[i:])})"
    return "IPv4 address too short" if fields < 3 else "unable to parse IP"


def fn_ip(value: Any) -> Any:
    if isinstance(value, CIDRValue):  # <cidr>.ip()
        return IPValue(value.addr)
    if not isinstance(value, str):
        return no_overload("ip", value)
    addr = _parse_addr(str(value))
    return CELEvalError(addr) if isinstance(addr, str) else IPValue(addr)


def fn_is_ip(value: Any) -> Any:
    if not isinstance(value, str):
        return no_overload("isIP", value)
    return celtypes.BoolType(not isinstance(_parse_addr(str(value)), str))


def fn_ip_is_canonical(value: Any) -> Any:
    if not isinstance(value, str):
        return no_overload("ip.isCanonical", value)
    addr = _parse_addr(str(value))
    if isinstance(addr, str):
        return CELEvalError(addr)
    return celtypes.BoolType(str(addr) == str(value))


def _ip_test(name: str, test: Callable[[Address], bool]) -> Fn:
    def apply(value: Any) -> Any:
        if not isinstance(value, IPValue):
            return no_overload(name, value)
        return celtypes.BoolType(test(value.addr))

    apply.__name__ = name
    return apply


def _link_local_multicast(a: Address) -> bool:
    if isinstance(a, ipaddress.IPv4Address):
        return a in ipaddress.IPv4Network("224.0.0.0/24")
    return a.packed[0] == 0xFF and a.packed[1] & 0x0F == 0x02


def _global_unicast(a: Address) -> bool:
    """Go's ``Addr.IsGlobalUnicast``: not unspecified, loopback, multicast, link-local or broadcast."""
    if isinstance(a, ipaddress.IPv4Address) and a == ipaddress.IPv4Address("255.255.255.255"):
        return False
    return not (a.is_unspecified or a.is_loopback or a.is_multicast or a.is_link_local)


def fn_family(value: Any) -> Any:
    if not isinstance(value, IPValue):
        return no_overload("family", value)
    return celtypes.IntType(value.addr.version)


# --- CIDR ------------------------------------------------------------------------------------


def _parse_cidr(text: str) -> CIDRValue | str:
    prefix = "network address parse error during conversion from string"
    address, slash, bits = text.partition("/")
    if not slash:
        return f"{prefix}: netip.ParsePrefix({go_quote(text)}): no '/'"
    if not bits.isdigit() or not bits.isascii() or (len(bits) > 1 and bits[0] == "0"):
        return f"{prefix}: netip.ParsePrefix({go_quote(text)}): bad bits after slash: {go_quote(bits)}"
    if "%" in address:
        return f"{prefix}: netip.ParsePrefix({go_quote(text)}): IPv6 zones cannot be present in a prefix"
    try:
        addr = ipaddress.ip_address(address)
    except ValueError:
        return f"{prefix}: netip.ParsePrefix({go_quote(text)}): {_go_parse_addr_error(address)}"
    if int(bits) > addr.max_prefixlen:
        return f"{prefix}: netip.ParsePrefix({go_quote(text)}): prefix length out of range"
    if isinstance(addr, ipaddress.IPv6Address) and addr.ipv4_mapped is not None:
        return f"IPv4-mapped IPv6 address {go_quote(text)} is not allowed"
    return CIDRValue(addr, int(bits))


def fn_cidr(value: Any) -> Any:
    if not isinstance(value, str):
        return no_overload("cidr", value)
    parsed = _parse_cidr(str(value))
    return (
        CELEvalError(f"network address parse error during conversion from string: {parsed}")
        if isinstance(parsed, str)
        else parsed
    )


def fn_is_cidr(value: Any) -> Any:
    if not isinstance(value, str):
        return no_overload("isCIDR", value)
    return celtypes.BoolType(isinstance(_parse_cidr(str(value)), CIDRValue))


def fn_contains_ip(cidr: Any, other: Any) -> Any:
    """Upstream's ``cidrContainsIPString`` hands the string's parse error to ``cidrContainsIP``,
    which answers any argument that is no IP with "no such overload": an unparsable string is
    that, not its parse error (unlike ``containsCIDR``'s)."""
    if not isinstance(cidr, CIDRValue):
        return no_overload("containsIP", cidr, other)
    ip = fn_ip(other) if isinstance(other, str) else other
    if isinstance(ip, CELEvalError):
        return CELEvalError("no such overload")
    if not isinstance(ip, IPValue):
        return no_overload("containsIP", cidr, other)
    if ip.addr.version != cidr.addr.version:
        return celtypes.BoolType(False)
    network = ipaddress.ip_network(f"{cidr.addr}/{cidr.bits}", strict=False)
    return celtypes.BoolType(ip.addr in network)


def fn_contains_cidr(cidr: Any, other: Any) -> Any:
    """Whether ``other``'s address, masked to ``cidr``'s length, is ``cidr``'s masked address and
    ``other`` is no wider: ``10.0.0.0/8`` contains ``10.1.0.0/16`` as upstream's compiler says (the
    differential), though its library test reads ``PrefixFrom`` as if it did not mask."""
    if not isinstance(cidr, CIDRValue):
        return no_overload("containsCIDR", cidr, other)
    inner = fn_cidr(other) if isinstance(other, str) else other
    if isinstance(inner, CELEvalError):
        return inner
    if not isinstance(inner, CIDRValue):
        return no_overload("containsCIDR", cidr, other)
    same = (
        inner.addr.version == cidr.addr.version
        and CIDRValue(inner.addr, cidr.bits).masked_addr() == cidr.masked_addr()
    )
    return celtypes.BoolType(same and cidr.bits <= inner.bits)


def fn_masked(cidr: Any) -> Any:
    if not isinstance(cidr, CIDRValue):
        return no_overload("masked", cidr)
    return CIDRValue(cidr.masked_addr(), cidr.bits)


def fn_prefix_length(cidr: Any) -> Any:
    if not isinstance(cidr, CIDRValue):
        return no_overload("prefixLength", cidr)
    return celtypes.IntType(cidr.bits)


# --- URL -------------------------------------------------------------------------------------

_SCHEME_FIRST = frozenset("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ")
_SCHEME_REST = _SCHEME_FIRST | frozenset("0123456789+-.")
_HEX = frozenset("0123456789abcdefABCDEF")


def _bad_escape(text: str) -> str | None:
    i = text.find("%")
    while i >= 0:
        if len(text) < i + 3 or text[i + 1] not in _HEX or text[i + 2] not in _HEX:
            return text[i : i + 3]
        i = text.find("%", i + 3)
    return None


def _parse_url(text: str) -> URLValue | str:
    """Go's ``url.ParseRequestURI`` as the check (the fragment is part of the path or query
    there), then the parts ``url.Parse`` gives once the fragment is cut, as upstream does."""
    checked = _split(text, text)
    if isinstance(checked, str):
        return checked
    if "#" not in text:
        return checked
    parts = _split(text.partition("#")[0], text)
    return checked if isinstance(parts, str) else parts


def _split(text: str, original: str) -> URLValue | str:
    """Scheme, host, path and raw query of ``text``; an error names ``original``."""

    def fail(why: str) -> str:
        return f'URL parse error during conversion from string: parse "{original}": {why}'

    if not text:
        return fail("empty url")
    if any(ord(c) < 0x20 or ord(c) == 0x7F for c in text):
        return fail("net/url: invalid control character in URL")
    scheme, rest = "", text
    for i, c in enumerate(text):
        if c == ":":
            if i == 0:
                return fail("missing protocol scheme")
            scheme, rest = text[:i], text[i + 1 :]
            break
        if c not in (_SCHEME_FIRST if i == 0 else _SCHEME_REST):
            break
    rest, _, query = rest.partition("?")
    if not rest.startswith("/"):
        if scheme:  # an opaque URL (``mailto:x``): no host, no path
            return URLValue(scheme.lower(), "", "", query)
        return fail("invalid URI for request")
    host = ""
    if scheme and rest.startswith("//"):
        authority, slash, path = rest[2:].partition("/")
        rest = slash + path
        host = authority.rpartition("@")[2]
        if host.startswith("["):
            close = host.find("]")
            if close < 0:
                return fail("missing ']' in host")
            port = host[close + 1 :]
            if port and (not port.startswith(":") or (not port[1:].isdigit() and port != ":")):
                return fail(f'invalid port "{port}" after host')
        elif ":" in host:
            port = host[host.rfind(":") :]
            if port != ":" and not port[1:].isdigit():
                return fail(f'invalid port "{port}" after host')
    bad = _bad_escape(rest)
    if bad is not None:
        return fail(f'invalid URL escape "{bad}"')
    return URLValue(scheme.lower(), host, rest, query)


def fn_url(value: Any) -> Any:
    if not isinstance(value, str):
        return no_overload("url", value)
    parsed = _parse_url(str(value))
    return CELEvalError(parsed) if isinstance(parsed, str) else parsed


def fn_is_url(value: Any) -> Any:
    if not isinstance(value, str):
        return no_overload("isURL", value)
    return celtypes.BoolType(isinstance(_parse_url(str(value)), URLValue))


def _url_part(name: str, part: Callable[[URLValue], str]) -> Fn:
    def apply(value: Any) -> Any:
        if not isinstance(value, URLValue):
            return no_overload(name, value)
        return celtypes.StringType(part(value))

    apply.__name__ = name
    return apply


def _hostname(u: URLValue) -> str:
    host = u.host
    if host.startswith("["):
        return host[1 : host.find("]")]
    return host.partition(":")[0]


def _port(u: URLValue) -> str:
    host = u.host
    if host.startswith("["):
        host = host[host.find("]") + 1 :]
    _, colon, port = host.rpartition(":")
    return port if colon else ""


def fn_get_query(value: Any) -> Any:
    """Go's ``URL.Query()``: pairs split at ``&``; pairs with ``;`` or a bad escape are dropped."""
    if not isinstance(value, URLValue):
        return no_overload("getQuery", value)
    result: dict[str, list[str]] = {}
    for pair in value.raw_query.split("&"):
        if not pair or ";" in pair:
            continue
        key, _, val = pair.partition("=")
        if _bad_escape(key) is not None or _bad_escape(val) is not None:
            continue
        result.setdefault(urllib.parse.unquote_plus(key), []).append(urllib.parse.unquote_plus(val))
    return celtypes.MapType(
        {
            celtypes.StringType(k): celtypes.ListType([celtypes.StringType(v) for v in vs])
            for k, vs in result.items()
        }
    )


FUNCTIONS: dict[str, Fn] = {
    "ip": fn_ip,
    "isIP": fn_is_ip,
    "ip.isCanonical": fn_ip_is_canonical,
    "family": fn_family,
    "isUnspecified": _ip_test("isUnspecified", lambda a: a.is_unspecified),
    "isLoopback": _ip_test("isLoopback", lambda a: a.is_loopback),
    "isLinkLocalMulticast": _ip_test("isLinkLocalMulticast", _link_local_multicast),
    "isLinkLocalUnicast": _ip_test("isLinkLocalUnicast", lambda a: a.is_link_local),
    "isGlobalUnicast": _ip_test("isGlobalUnicast", _global_unicast),
    "cidr": fn_cidr,
    "isCIDR": fn_is_cidr,
    "containsIP": fn_contains_ip,
    "containsCIDR": fn_contains_cidr,
    "masked": fn_masked,
    "prefixLength": fn_prefix_length,
    "url": fn_url,
    "isURL": fn_is_url,
    "getScheme": _url_part("getScheme", lambda u: u.scheme),
    "getHost": _url_part("getHost", lambda u: u.host),
    "getHostname": _url_part("getHostname", _hostname),
    "getPort": _url_part("getPort", _port),
    "getEscapedPath": _url_part("getEscapedPath", lambda u: u.path),
    "getQuery": fn_get_query,
}

RESULT_TYPES: dict[str, str] = {
    "ip": "net.IP",
    "cidr": "net.CIDR",
    "masked": "net.CIDR",
    "url": "kubernetes.URL",
    "family": "int",
    "prefixLength": "int",
    **dict.fromkeys(("getScheme", "getHost", "getHostname", "getPort", "getEscapedPath"), "string"),
    **dict.fromkeys(
        (
            *("isIP", "ip.isCanonical", "isUnspecified", "isLoopback", "isLinkLocalMulticast"),
            *("isLinkLocalUnicast", "isGlobalUnicast", "isCIDR", "containsIP", "containsCIDR", "isURL"),
        ),
        "bool",
    ),
}

#: Functions whose only argument must be a string (a literal of another type fails to compile).
STRING_ARGUMENT = frozenset({"isIP", "ip.isCanonical", "cidr", "isCIDR", "url", "isURL"})
