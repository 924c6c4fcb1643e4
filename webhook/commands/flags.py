"""What every ``draxr`` command's flags share: a parser that fails in one line, and value types.

A bad flag or value ends the command with exit status 2 and one line on standard error, in
argparse's own form without its usage block: ``draxr serve: error: --qps: must be a positive
number, not -1``. The type functions below raise ``argparse.ArgumentTypeError`` with the reason;
argparse names the flag.
"""

from __future__ import annotations

import argparse
import datetime as dt
import ipaddress
import math
import re
import sys
from collections.abc import Callable
from typing import NoReturn
from urllib.parse import urlsplit

from ..core.allocation.policy import DEFAULT_POLICY, POLICIES
from ..core.api import names
from ..core.api.labels import LabelSelectorError, parse_label_selector
from ..core.cel import DEFAULT_ENGINE, ENGINES
from ..core.scheduling.sampling import ADAPTIVE

#: argparse puts this before the flag's name; the one-line form leaves it out.
_ARGUMENT_PREFIX = "argument "


def one_line(text: str) -> str:
    """``text`` on one line: line breaks (a YAML error, a nested exception) become spaces."""
    return " ".join(text.split())


class OneLineParser(argparse.ArgumentParser):
    """``ArgumentParser`` whose errors are one line, ``<prog>: error: <message>``, exit status 2.

    Sub-commands' parsers are of the same class (``add_subparsers`` uses the parent's class).
    """

    def error(self, message: str) -> NoReturn:
        if message.startswith(_ARGUMENT_PREFIX):
            message = message[len(_ARGUMENT_PREFIX) :]
        self.exit(2, f"{self.prog}: error: {one_line(message)}\n")


def fail(parser: argparse.ArgumentParser, message: str) -> NoReturn:
    """A value that is wrong only together with another flag's: the same one line, exit status 2."""
    parser.error(message)


def _number(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"must be a number, not {text!r}") from None
    if not math.isfinite(value):
        raise argparse.ArgumentTypeError(f"must be a finite number, not {text}")
    return value


def _integer(text: str) -> int:
    try:
        return int(text, 10)
    except ValueError:
        raise argparse.ArgumentTypeError(f"must be a whole number, not {text!r}") from None


def positive_number(text: str) -> float:
    value = _number(text)
    if not value > 0:
        raise argparse.ArgumentTypeError(f"must be a positive number, not {text}")
    return value


def non_negative_number(text: str) -> float:
    value = _number(text)
    if value < 0:
        raise argparse.ArgumentTypeError(f"must be zero or a positive number, not {text}")
    return value


def positive_integer(text: str) -> int:
    value = _integer(text)
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be a positive whole number, not {text}")
    return value


def non_negative_integer(text: str) -> int:
    value = _integer(text)
    if value < 0:
        raise argparse.ArgumentTypeError(f"must be zero or a positive whole number, not {text}")
    return value


def integer_between(low: int, high: int) -> Callable[[str], int]:
    def check(text: str) -> int:
        value = _integer(text)
        if not low <= value <= high:
            raise argparse.ArgumentTypeError(f"must be between {low} and {high}, not {text}")
        return value

    check.__name__ = f"integer between {low} and {high}"
    return check


port = integer_between(0, 65535)


def non_empty(text: str) -> str:
    if not text.strip():
        raise argparse.ArgumentTypeError("must not be empty")
    return text


def _name(check: Callable[[str], list[str]], what: str) -> Callable[[str], str]:
    def convert(text: str) -> str:
        problems = check(text)
        if problems:
            raise argparse.ArgumentTypeError(f"{text!r} is not a valid {what}: {problems[0]}")
        return text

    convert.__name__ = what
    return convert


#: A namespace or Service name (``IsDNS1123Label``).
dns_label = _name(names.is_dns1123_label, "DNS-1123 label")
#: A DNS name, a Lease name (``IsDNS1123Subdomain``).
dns_subdomain = _name(names.is_dns1123_subdomain, "DNS-1123 subdomain")
#: A label key (``IsQualifiedName``: an optional DNS subdomain prefix and '/').
label_key = _name(names.is_qualified_name, "label key")

_DURATION_PART = re.compile(r"(\d+(?:\.\d+)?)(d|h|m|s)")
_UNIT_SECONDS = {"d": 86400.0, "h": 3600.0, "m": 60.0, "s": 1.0}


def parse_duration(text: str) -> dt.timedelta:
    """``90d``, ``720h``, ``1h30m``, ``45s``, ``2.5s`` or a plain number of seconds; ``ValueError``."""
    value = text.strip()
    try:
        seconds = float(value)
    except ValueError:
        parts = list(_DURATION_PART.finditer(value))
        if not parts or "".join(p.group(0) for p in parts) != value:
            raise ValueError(f"{text!r} is not a duration (like 90d, 12h, 1h30m, 45s)") from None
        seconds = sum(float(p.group(1)) * _UNIT_SECONDS[p.group(2)] for p in parts)
    if not math.isfinite(seconds) or seconds <= 0:
        raise ValueError(f"must be a positive duration, not {text}")
    return dt.timedelta(seconds=seconds)


def duration(text: str) -> dt.timedelta:
    """A positive duration: ``90d``, ``720h``, ``1h30m``, ``45s`` or seconds."""
    try:
        return parse_duration(text)
    except ValueError as e:
        raise argparse.ArgumentTypeError(str(e)) from None


def format_duration(value: dt.timedelta) -> str:
    """The shortest ``parse_duration`` text for ``value`` (whole days, hours, minutes or seconds)."""
    seconds = value.total_seconds()
    for unit in ("d", "h", "m"):
        size = _UNIT_SECONDS[unit]
        if seconds >= size and seconds % size == 0:
            return f"{int(seconds // size)}{unit}"
    return f"{seconds:g}s"


def ip_address(text: str) -> str:
    try:
        ipaddress.ip_address(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not an IPv4 or IPv6 address") from None
    return text


def label_selector(text: str) -> str:
    """A label selector in kubectl's ``-l`` form (``tier=gpu,team in (a,b)``); "" selects all."""
    try:
        parse_label_selector(text)
    except LabelSelectorError as e:
        raise argparse.ArgumentTypeError(f"{text!r} is not a label selector: {e}") from None
    return text


def optional_label_key(text: str) -> str:
    """A label key, or '' for none (``--opt-out-label``)."""
    return text if text == "" else label_key(text)


def url_problem(url: str) -> str | None:
    """Why kube-apiserver would reject ``url`` as a webhook's ``clientConfig.url`` base, or None."""
    try:
        parts = urlsplit(url)
        _ = parts.port  # raises on a malformed port
    except ValueError as e:
        return str(e)
    if parts.scheme != "https":
        return "the scheme must be https"
    if not parts.hostname:
        return "no host"
    if parts.username or parts.password:
        return "user information is not allowed"
    if parts.query or parts.fragment or url.endswith(("?", "#")):
        return "a query or fragment is not allowed"
    return None


def webhook_url(text: str) -> str:
    """A URL kube-apiserver accepts as a webhook's ``clientConfig.url`` (``--webhook-url``)."""
    problem = url_problem(text)
    if problem is not None:
        raise argparse.ArgumentTypeError(f"{text!r}: {problem}")
    return text


def report(command: str, exc: BaseException) -> str:
    """The one line for a failure no command handled itself (never a traceback)."""
    return f"draxr {command}: error: {type(exc).__name__}: {one_line(str(exc))}"


def print_error(line: str) -> None:
    print(one_line(line), file=sys.stderr)


__all__ = [
    "OneLineParser",
    "dns_label",
    "dns_subdomain",
    "duration",
    "fail",
    "format_duration",
    "integer_between",
    "ip_address",
    "label_key",
    "non_empty",
    "non_negative_integer",
    "non_negative_number",
    "one_line",
    "optional_label_key",
    "parse_duration",
    "port",
    "positive_integer",
    "positive_number",
    "print_error",
    "report",
    "url_problem",
    "webhook_url",
]


# -- flags several commands take, defined once ---------------------------------------------------------

FILENAME_HELP = "YAML/JSON file or directory, - for standard input (repeatable)"


def add_filename(p: argparse.ArgumentParser, *, required: bool = True, help: str = FILENAME_HELP) -> None:
    """``-f/--filename``, repeatable; an empty value is refused in one line."""
    p.add_argument(
        "-f",
        "--filename",
        action="append",
        required=required,
        default=None if required else [],
        metavar="PATH",
        type=non_empty,
        help=help,
    )


def add_placement(p: argparse.ArgumentParser, *, percentage_help: str) -> None:
    """``--policy`` and ``--percentage-of-nodes-to-score``: how the engine places pods."""
    p.add_argument(
        "--policy",
        choices=POLICIES,
        default=DEFAULT_POLICY,
        help="placement: binpack (fill used nodes and topology groups; the default), spread, or upstream "
        "(kube-scheduler's choice: first fit, no alignment, LeastAllocated node scores)",
    )
    p.add_argument(
        "--percentage-of-nodes-to-score",
        type=integer_between(0, 100),
        default=ADAPTIVE,
        metavar="PERCENT",
        help=percentage_help,
    )


def add_cel_engine(p: argparse.ArgumentParser) -> None:
    """``--cel-engine``: the selectors' CEL engine."""
    p.add_argument(
        "--cel-engine",
        choices=ENGINES,
        default=None,
        help="CEL engine of DeviceClass and request selectors; cel-rust needs the cel-fast extra "
        f"(default: {DEFAULT_ENGINE}, the reference)",
    )
