"""Read Kubernetes manifests from files (``draxr plan``, ``draxr validate``, ``draxr convert``,
``--snapshot``, the demo).

YAML (multi-document) and JSON files, directories recursively, standard input (``-``), and
``kind: List`` / ``*List`` documents as ``kubectl get -o yaml`` prints them. Every object that
comes out is plain JSON (string keys; timestamps as RFC 3339 strings) and has the field types
the engine reads, so the pure core never meets a wrong type. Problems are ``LoadError`` naming
the file, the document and the field (as the file wrote it); resource.k8s.io objects then come
out in the v1 shape, whatever version the file used (``core.versions``).
"""

from __future__ import annotations

import base64
import datetime as dt
import json
import math
import sys
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Final

import yaml

from ..core.api.fielderrors import FieldError
from ..core.api.fielderrors import Path as FieldPath
from ..core.api.objectcheck import check_object, check_top, type_error
from ..core.api.objects import Obj
from ..core.api.versions import to_v1

SUFFIXES: Final = (".yaml", ".yml", ".json")
MAX_DEPTH: Final = 200
MAX_VALUES: Final = 1_000_000

#: The path that names standard input, and how errors name it.
STDIN: Final = "-"
STDIN_SOURCE: Final = "<stdin>"

_YAML_LOADER: Final[Any] = getattr(yaml, "CSafeLoader", yaml.SafeLoader)


@dataclass(frozen=True, slots=True)
class Loaded:
    """One object and where it came from: ``index`` is the document, ``item`` the List item.

    ``raw`` is the object as the input wrote it (JSON types; a typed List's item with the
    apiVersion and kind the List gives it), before ``obj`` was put in the v1 shape.
    """

    obj: Obj
    source: str
    index: int
    item: int | None = None
    raw: Obj = field(default_factory=dict, compare=False, repr=False)


class LoadError(Exception):
    """Unusable input; ``str()`` reads ``<file>: document <n>: <field>: <message>``."""

    def __init__(self, source: str, index: int | None, field: str | None, message: str) -> None:
        self.source = source
        self.index = index
        self.field = field
        self.message = message
        super().__init__(str(self))

    def __str__(self) -> str:
        parts = [self.source]
        if self.index is not None:
            parts.append(f"document {self.index}")
        if self.field:
            parts.append(self.field)
        parts.append(self.message)
        return ": ".join(parts)


class _Invalid(Exception):
    """A problem inside one document, before the file and index are known."""


# --- files ---------------------------------------------------------------------------------------


def load_paths(paths: Sequence[str | Path], *, errors: list[LoadError] | None = None) -> list[Loaded]:
    """Every object of the given files and directories (``-``: standard input), in order.

    Raises the first ``LoadError``; with ``errors`` given, problems are appended there instead
    and loading goes on with the next document (or file, after a syntax error).
    """
    out: list[Loaded] = []
    seen_stdin = False
    for path in paths:
        try:
            files = _files(path, seen_stdin=seen_stdin)
        except LoadError as e:
            if errors is None:
                raise
            errors.append(e)
            continue
        seen_stdin = seen_stdin or STDIN in files
        for file in files:
            try:
                source, text, is_json = read_input(file)
            except LoadError as e:
                if errors is None:
                    raise
                errors.append(e)
                continue
            out += load_text(text, source, is_json=is_json, errors=errors)
    return out


def input_files(paths: Sequence[str | Path]) -> list[Path | str]:
    """The files the paths name, in order: a directory's YAML and JSON files recursively, sorted
    by path; ``-`` (standard input) as it is, at most once. Raises ``LoadError`` for a path that
    does not exist."""
    out: list[Path | str] = []
    for path in paths:
        out += _files(path, seen_stdin=STDIN in out)
    return out


def _files(path: str | Path, *, seen_stdin: bool) -> list[Path | str]:
    if str(path) == STDIN:
        if seen_stdin:
            raise LoadError(STDIN_SOURCE, None, None, "standard input (-) can be read only once")
        return [STDIN]
    where = Path(path)
    if where.is_dir():
        found = sorted(
            (p for p in where.rglob("*") if p.suffix.lower() in SUFFIXES and p.is_file()),
            key=lambda p: p.as_posix(),
        )
        return list[Path | str](found)
    if not where.exists():
        raise LoadError(str(where), None, None, "no such file or directory")
    return [where]


def read_input(file: Path | str) -> tuple[str, str, bool]:
    """(source name, text, is JSON) of a file, or of standard input for ``-``.

    A file is JSON by its suffix; standard input when its first non-blank character is ``{``.
    """
    if str(file) == STDIN:
        text = _decode(_read_stdin(), STDIN_SOURCE)
        return STDIN_SOURCE, text, text.lstrip().startswith("{")
    path = Path(file)
    source = str(path)
    try:
        data = path.read_bytes()
    except OSError as e:
        raise LoadError(source, None, None, f"cannot read: {e.strerror or e}") from None
    return source, _decode(data, source), path.suffix.lower() == ".json"


def _read_stdin() -> bytes:
    stream = sys.stdin
    if stream is None:
        raise LoadError(STDIN_SOURCE, None, None, "cannot read: there is no standard input")
    try:
        buffer = getattr(stream, "buffer", None)
        if buffer is not None:
            data: bytes = buffer.read()
            return data
        return stream.read().encode("utf-8")
    except (OSError, ValueError) as e:  # ValueError: a closed stream
        raise LoadError(
            STDIN_SOURCE, None, None, f"cannot read: {getattr(e, 'strerror', None) or e}"
        ) from None
    except UnicodeError as e:
        raise LoadError(STDIN_SOURCE, None, None, f"not UTF-8 text ({e})") from None


def _decode(data: bytes, source: str) -> str:
    try:
        return data.decode("utf-8-sig")
    except UnicodeDecodeError as e:
        raise LoadError(source, None, None, f"not UTF-8 text (byte {e.start})") from None


def load_text(
    text: str, source: str, *, is_json: bool = False, errors: list[LoadError] | None = None
) -> list[Loaded]:
    """Every object of one file's ``text`` (``source`` names it in errors); see ``load_paths``."""
    out: list[Loaded] = []
    try:
        for index, doc in _documents(text, source, is_json):
            try:
                for item in _objects(doc, source, index):
                    out.append(item)
            except LoadError as e:
                if errors is None:
                    raise
                errors.append(e)
    except LoadError as e:
        if errors is None:
            raise
        errors.append(e)
    return out


def _documents(text: str, source: str, is_json: bool) -> Iterator[tuple[int, Any]]:
    """(document index, parsed document); empty YAML documents keep their index but are skipped."""
    if is_json:
        doc = _parse_json(text, source) if text.strip() else None
        if doc is not None:
            yield 0, doc
        return
    docs = yaml.load_all(text, Loader=_YAML_LOADER)
    index = 0
    while True:
        try:
            doc = next(docs)
        except StopIteration:
            return
        except yaml.MarkedYAMLError as e:
            raise LoadError(source, index, None, _yaml_message(e)) from None
        except yaml.YAMLError as e:
            raise LoadError(source, index, None, str(e).splitlines()[0]) from None
        except RecursionError:
            raise LoadError(source, index, None, "document nests too deeply") from None
        except ValueError as e:  # e.g. an integer with more digits than Python converts
            raise LoadError(source, index, None, f"unreadable value: {e}") from None
        if doc is not None:
            yield index, doc
        index += 1


def _yaml_message(e: yaml.MarkedYAMLError) -> str:
    mark = e.problem_mark or e.context_mark
    where = f"line {mark.line + 1}, column {mark.column + 1}: " if mark is not None else ""
    problem = e.problem or e.context or "invalid YAML"
    context = f" ({e.context})" if e.problem and e.context else ""
    return f"{where}{problem}{context}"


def _no_constant(name: str) -> Any:
    raise ValueError(f"{name} is not valid JSON")


def _parse_json(text: str, source: str) -> Any:
    try:
        return json.loads(text, parse_constant=_no_constant)
    except json.JSONDecodeError as e:
        raise LoadError(source, 0, None, f"line {e.lineno}, column {e.colno}: {e.msg}") from None
    except RecursionError:
        raise LoadError(source, 0, None, "document nests too deeply") from None
    except ValueError as e:
        raise LoadError(source, 0, None, f"unreadable value: {e}") from None


# --- documents -----------------------------------------------------------------------------------


def _objects(doc: Any, source: str, index: int) -> Iterator[Loaded]:
    try:
        obj = _jsonify(doc)
    except _Invalid as e:
        raise LoadError(source, index, None, str(e)) from None
    _fail_first(check_top(obj), source, index)
    kind: str = obj["kind"]
    if not _is_list_kind(kind):
        _fail_first(check_object(obj), source, index)
        yield Loaded(to_v1(obj), source, index, raw=obj)
        return
    items = obj.get("items")
    if items is not None and not isinstance(items, list):
        _fail_first([type_error(FieldPath("items"), items, "a list")], source, index)
    for i, item in enumerate(items or []):
        path = FieldPath("items").index(i)
        if not isinstance(item, dict):
            _fail_first([type_error(path, item, "a mapping")], source, index)
            continue
        if kind != "List":
            # Typed lists (``PodList``) omit apiVersion and kind on their items.
            item = {"apiVersion": obj["apiVersion"], "kind": kind[: -len("List")], **item}
        _fail_first(check_top(item, path) or check_object(item, path), source, index)
        yield Loaded(to_v1(item), source, index, i, raw=item)


def _fail_first(errors: list[FieldError], source: str, index: int) -> None:
    if errors:
        raise LoadError(source, index, errors[0].field, errors[0].error_body())


def _is_list_kind(kind: str) -> bool:
    return kind == "List" or (kind.endswith("List") and len(kind) > len("List"))


def _json_key(key: Any) -> str:
    """Map keys as sigs.k8s.io/yaml writes them into JSON."""
    if isinstance(key, str):
        return key
    if isinstance(key, bool):
        return "true" if key else "false"
    if key is None:
        return "null"
    if isinstance(key, int | float):
        return str(key)
    if isinstance(key, dt.date):
        return _timestamp(key)
    raise _Invalid(f"unsupported mapping key {key!r}")


def _timestamp(value: dt.date) -> str:
    if not isinstance(value, dt.datetime):
        return value.isoformat()
    if value.tzinfo is not None:
        value = value.astimezone(dt.UTC).replace(tzinfo=None)
    return value.isoformat() + "Z"


def _jsonify(doc: Any) -> Any:
    """A JSON-compatible copy: string keys, timestamps as strings, bounded depth and size.

    Bounds stop YAML alias bombs and self-referencing aliases.
    """
    budget = [MAX_VALUES]

    def walk(value: Any, depth: int) -> Any:
        budget[0] -= 1
        if budget[0] < 0:
            raise _Invalid(f"document holds more than {MAX_VALUES} values")
        if depth > MAX_DEPTH:
            raise _Invalid(f"document nests deeper than {MAX_DEPTH} levels")
        if value is None or isinstance(value, str | bool | int):
            return value
        if isinstance(value, float):
            if not math.isfinite(value):
                raise _Invalid(f"{value} is not a JSON number")
            return value
        if isinstance(value, dict):
            return {_json_key(k): walk(v, depth + 1) for k, v in value.items()}
        if isinstance(value, list | tuple):
            return [walk(v, depth + 1) for v in value]
        if isinstance(value, set):
            return {_json_key(k): None for k in value}
        if isinstance(value, dt.date):
            return _timestamp(value)
        if isinstance(value, bytes):
            return base64.b64encode(value).decode("ascii")
        raise _Invalid(f"unsupported value of type {type(value).__name__}")

    return walk(doc, 0)
