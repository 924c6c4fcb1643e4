"""YAML files edited in place: comments, key order and untouched documents kept (``draxr convert``).

A file is parsed twice: by the loader (PyYAML, the values every draxr command sees) and here by
ruamel.yaml's round-trip parser, whose trees keep comments, key order, quoting and flow style.
Changes are JSON patches (RFC 6902, as the webhook answers) applied to a document's tree;
``render`` then writes documents nobody changed byte for byte as they were, and dumps only the
changed ones again, in the indentation the document used.

Comments on a removed entry's own line go with it. Full-line comments that followed it stay where
they were: after the entry before it, or before the entry after it. A mapping emptied by removals
is written ``{}`` on its key's line, so comments on that line move below it.
"""

from __future__ import annotations

import io
import itertools
import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, Final

from ruamel.yaml import YAML
from ruamel.yaml.comments import CommentedMap, CommentedSeq
from ruamel.yaml.error import CommentMark, MarkedYAMLError, YAMLError
from ruamel.yaml.tokens import CommentToken

from ..core.api.objects import Obj

#: Indentation for documents without a nested block to learn it from: ``kubectl get -o yaml``'s.
DEFAULT_INDENT: Final = (2, 2, 0)
_SEPARATOR: Final = re.compile(r"^---(?:[ \t]|$)")
_UNSPLITTABLE: Final = re.compile(r"^(?:\.\.\.(?:[ \t]|$)|%)", re.MULTILINE)
_OPENS_BLOCK: Final = re.compile(r":[ \t]*(?:#.*)?$")
_DASHES: Final = re.compile(r"^(?:-[ \t]+)+")


class RoundTripError(Exception):
    """The file cannot be edited keeping its comments: ``index`` names the document, if known."""

    def __init__(self, index: int | None, message: str) -> None:
        super().__init__(message)
        self.index = index
        self.message = message


def _yaml(indent: tuple[int, int, int] = DEFAULT_INDENT) -> YAML:
    y = YAML(typ="rt")
    y.preserve_quotes = True
    y.width = 4096  # never fold a long line
    mapping, sequence, offset = indent
    y.indent(mapping=mapping, sequence=sequence, offset=offset)
    return y


@dataclass
class YamlFile:
    """One YAML file: ``docs[i]`` is document ``i``'s tree (None when empty), ``segments[i]`` its
    text (the separator line that opens it included); ``segments`` is None when the text could
    not be split safely, and then every document is dumped again."""

    text: str
    docs: list[Any]
    segments: list[str] | None
    changed: set[int] = field(default_factory=set)


def parse(text: str) -> YamlFile:
    """The round-trip trees of every document of ``text``; ``RoundTripError`` if unreadable."""
    index = 0
    docs: list[Any] = []
    stream = _yaml().load_all(text)
    while True:
        try:
            doc = next(stream)
        except StopIteration:
            break
        except MarkedYAMLError as e:
            raise RoundTripError(index, _message(e)) from None
        except (YAMLError, ValueError, RecursionError) as e:
            raise RoundTripError(index, " ".join(str(e).split())) from None
        docs.append(doc)
        index += 1
    segments = split_documents(text)
    if segments is not None and len(segments) != len(docs):
        segments = None
    return YamlFile(text, docs, segments)


def _message(e: MarkedYAMLError) -> str:
    """``line L, column C: problem``, as the loader words PyYAML's errors."""
    mark = e.problem_mark or e.context_mark
    where = f"line {mark.line + 1}, column {mark.column + 1}: " if mark is not None else ""
    problem = " ".join(str(e.problem or e.context or "invalid YAML").split())
    return f"{where}{problem}"


def split_documents(text: str) -> list[str] | None:
    """``text`` cut into its documents (their concatenation is ``text``); None when the stream has
    directives or ``...`` document end markers, which this split does not follow."""
    if _UNSPLITTABLE.search(text):
        return None
    parts: list[list[str]] = [[]]
    for line in text.splitlines(keepends=True):
        if _SEPARATOR.match(line):
            parts.append([line])
        else:
            parts[-1].append(line)
    segments = ["".join(p) for p in parts]
    if _only_comments(segments[0]):
        # Comments before the first separator: not a document, kept with the first one (if any).
        if len(segments) == 1:
            return []
        segments = [segments[0] + segments[1], *segments[2:]]
    return segments


def _only_comments(text: str) -> bool:
    return all(not line.strip() or line.lstrip().startswith("#") for line in text.splitlines())


# --- patches -------------------------------------------------------------------------------------


def apply_patch(tree: Any, ops: Sequence[Obj], prefix: Sequence[str | int] = ()) -> None:
    """Apply JSON patch ``ops`` (add, remove, replace, move, copy) to the part of ``tree`` at
    ``prefix``, keeping comments (see the module docs). ``KeyError``/``IndexError`` for a path the
    tree does not have."""
    orphans: list[tuple[list[tuple[Any, Any]], list[str]]] = []
    trailing = _detach_trailing(tree)
    for op in ops:
        path = [*prefix, *_pointer(str(op["path"]))]
        kind = op["op"]
        if kind in ("add", "replace"):
            _add(tree, path, _commented(op["value"]), replace=kind == "replace")
        elif kind == "remove":
            _remove(tree, path, orphans)
        elif kind in ("move", "copy"):
            source = [*prefix, *_pointer(str(op["from"]))]
            value = _get(tree, source)
            if kind == "move":
                _remove(tree, source, orphans)
            else:
                value = _commented(_plain(value))
            _add(tree, path, value, replace=False)
        else:
            raise ValueError(f"unsupported JSON patch operation {kind!r}")
    for chain, lines in orphans:
        _place_before_next(tree, chain, lines)
    if trailing:
        _place_before_next(tree, [], trailing)


def _pointer(text: str) -> list[str]:
    if text == "":
        return []
    if not text.startswith("/"):
        raise ValueError(f"not a JSON pointer: {text!r}")
    return [part.replace("~1", "/").replace("~0", "~") for part in text[1:].split("/")]


def _step(node: Any, key: str | int) -> Any:
    if isinstance(node, list):
        return node[int(key)]
    if isinstance(node, dict):
        return node[key]
    raise KeyError(key)


def _get(tree: Any, path: Sequence[str | int]) -> Any:
    node = tree
    for key in path:
        node = _step(node, key)
    return node


def _add(tree: Any, path: list[str | int], value: Any, *, replace: bool) -> None:
    if not path:
        raise ValueError("cannot replace a whole document")
    parent = _get(tree, path[:-1])
    key = path[-1]
    if isinstance(parent, list):
        if key == "-":
            parent.append(value)
        elif replace:
            parent[int(key)] = value
        else:
            parent.insert(int(key), value)
    elif isinstance(parent, dict):
        if replace and key not in parent:
            raise KeyError(key)
        parent[key] = value
    else:
        raise KeyError(key)


def _commented(value: Any) -> Any:
    """A plain value as round-trip nodes (block style, like the rest of a block document)."""
    if isinstance(value, dict):
        out = CommentedMap()
        for k, v in value.items():
            out[k] = _commented(v)
        return out
    if isinstance(value, list):
        return CommentedSeq([_commented(v) for v in value])
    return value


def _plain(value: Any) -> Any:
    if isinstance(value, dict):
        return {k: _plain(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_plain(v) for v in value]
    return value


# --- comments of removed entries -----------------------------------------------------------------


def _slot(node: Any, key: Any) -> list[Any]:
    """The comment slot list of an entry (created empty when missing)."""
    if isinstance(node, CommentedSeq):
        return node.ca.items.setdefault(key, [None, None])  # type: ignore[no-any-return]
    return node.ca.items.setdefault(key, [None, None, None, None])  # type: ignore[no-any-return]


def _after_index(node: Any) -> int:
    """Where a node's slot holds the comment after the entry's value."""
    return 0 if isinstance(node, CommentedSeq) else 2


def _lines_after(token: Any) -> list[str]:
    """The full-line comments of a comment token after its entry (its end-of-line part left out)."""
    if token is None or not isinstance(getattr(token, "value", None), str):
        return []
    rest: str = token.value.partition("\n")[2]
    return rest.splitlines(keepends=True)


def _token_lines(token: Any, column: int) -> list[str]:
    """A whole comment token as full lines (its end-of-line part at ``column``)."""
    if token is None or not isinstance(getattr(token, "value", None), str):
        return []
    text: str = token.value
    eol, _, rest = text.partition("\n")
    head = [" " * column + eol.strip() + "\n"] if eol.strip() else []
    return head + rest.splitlines(keepends=True)


def _token_line(token: Any) -> str:
    """A comment token that stands on its own line, as that line."""
    value = str(getattr(token, "value", ""))
    if not value.strip():
        return "\n"
    column = getattr(getattr(token, "start_mark", None), "column", 0) or 0
    return " " * column + value.strip() + "\n"


def _detach_trailing(tree: Any) -> list[str]:
    """Take the comment lines after a document's last entry off it (they stay last)."""
    node, key = tree, None
    while isinstance(node, CommentedMap | CommentedSeq) and len(node):
        key = list(node)[-1] if isinstance(node, CommentedMap) else len(node) - 1
        value = node[key]
        if not isinstance(value, CommentedMap | CommentedSeq) or not len(value):
            break
        node = value
    if key is None or not isinstance(node, CommentedMap | CommentedSeq):
        return []
    slot = node.ca.items.get(key)
    if not slot:
        return []
    at = _after_index(node)
    token = slot[at]
    lines = _lines_after(token)
    if lines:
        eol = token.value.partition("\n")[0]
        if eol.strip():
            token.value = eol + "\n"
        else:
            slot[at] = None
    return lines


def _remove(tree: Any, path: list[str | int], orphans: list[tuple[list[tuple[Any, Any]], list[str]]]) -> None:
    chain: list[tuple[Any, Any]] = []
    node = tree
    for step in path[:-1]:
        chain.append((node, int(step) if isinstance(node, list) else step))
        node = _step(node, step)
    key: Any = path[-1]
    if isinstance(node, list):
        index = int(key)
        lines = _lines_after(node.ca.items.get(index, [None])[0]) if isinstance(node, CommentedSeq) else []
        del node[index]
        siblings = list(range(len(node)))
        before = index - 1 if index > 0 else None
        after = index if index < len(node) else None
    elif isinstance(node, dict):
        if key not in node:
            raise KeyError(key)
        keys = list(node)
        position = keys.index(key)
        lines = []
        if isinstance(node, CommentedMap):
            lines = _lines_after(node.ca.items.get(key, [None, None, None, None])[2])
            node.ca.items.pop(key, None)
        del node[key]
        siblings = [k for k in keys if k != key]
        before = keys[position - 1] if position > 0 else None
        after = keys[position + 1] if position + 1 < len(keys) else None
    else:
        raise KeyError(key)
    if not isinstance(node, CommentedMap | CommentedSeq):
        return
    if siblings:
        if before is not None and _place_after(node, before, lines):
            return
        if after is not None and lines:
            _place_before(node, after, lines)
        return
    # The collection is empty now and is written ``{}``/``[]`` on its key's line: a comment on
    # that line, those above its first entry and those that followed the removed entry go below.
    node.ca.comment = None
    if chain:
        parent, parent_key = chain[-1]
        if isinstance(parent, CommentedMap | CommentedSeq):
            slot = parent.ca.items.get(parent_key)
            if slot is not None:
                at = _after_index(parent)
                column = _key_column(parent, parent_key)
                above: list[str] = []
                if isinstance(parent, CommentedMap) and isinstance(slot[3], list):
                    above = [_token_line(t) for t in slot[3]]
                    slot[3] = None
                lines = _token_lines(slot[at], column) + above + lines
                slot[at] = None
    if lines:
        orphans.append((chain, lines))


def _key_column(node: Any, key: Any) -> int:
    try:
        return int(node.lc.key(key)[1]) if isinstance(node, CommentedMap) else int(node.lc.item(key)[1])
    except (AttributeError, KeyError, TypeError, IndexError):
        return 0


def _place_after(node: Any, key: Any, lines: list[str]) -> bool:
    """Put ``lines`` right after the entry ``key`` of ``node`` (under its last nested value);
    False when that entry ends in an empty collection, which has no room for them."""
    if not lines:
        return True
    while True:
        value = node[key]
        if isinstance(value, CommentedMap | CommentedSeq) and len(value):
            node, key = value, (list(value)[-1] if isinstance(value, CommentedMap) else len(value) - 1)
            continue
        if isinstance(value, dict | list) or not isinstance(node, CommentedMap | CommentedSeq):
            return False
        break
    slot = _slot(node, key)
    at = _after_index(node)
    token = slot[at]
    text = "".join(lines)
    if token is not None and isinstance(getattr(token, "value", None), str):
        token.value = token.value if token.value.endswith("\n") else token.value + "\n"
        token.value += text
    else:
        slot[at] = CommentToken("\n" + text, CommentMark(0), None)
    return True


def _place_before(node: Any, key: Any, lines: list[str]) -> None:
    """Put ``lines`` before the entry ``key`` of ``node``."""
    if isinstance(node, CommentedSeq):
        if key > 0 and _place_after(node, key - 1, lines):
            return
        return  # the first item of a list: nowhere to put them without changing its meaning
    slot = _slot(node, key)
    tokens = slot[1] if isinstance(slot[1], list) else []
    for line in lines:
        column = len(line) - len(line.lstrip(" "))
        tokens.append(CommentToken(line[column:] if line.strip() else "\n", CommentMark(column), None))
    slot[1] = tokens


def _place_before_next(tree: Any, chain: list[tuple[Any, Any]], lines: list[str]) -> None:
    """Put ``lines`` before whatever follows the entry at the end of ``chain`` (in a mapping up
    the chain), else at the end of the document."""
    for node, key in reversed(chain):
        if isinstance(node, CommentedMap):
            keys = list(node)
            if key in keys and keys.index(key) + 1 < len(keys):
                _place_before(node, keys[keys.index(key) + 1], lines)
                return
    if isinstance(tree, CommentedMap | CommentedSeq) and len(tree):
        last = list(tree)[-1] if isinstance(tree, CommentedMap) else len(tree) - 1
        _place_after(tree, last, lines)


# --- writing -------------------------------------------------------------------------------------


def guess_indent(text: str) -> tuple[int, int, int]:
    """(mapping, sequence, offset) indentation of a YAML text, as ``YAML.indent`` takes them:
    the first nested mapping and the first block sequence under a key decide."""
    mapping: int | None = None
    sequence: int | None = None
    offset: int | None = None
    lines = [
        line
        for line in text.splitlines()
        if line.strip() and not line.lstrip().startswith("#") and not _SEPARATOR.match(line)
    ]
    for prev, line in itertools.pairwise(lines):
        body = prev.strip()
        if not _OPENS_BLOCK.search(body) or ("'" in body or '"' in body):
            continue
        key_column = len(prev) - len(prev.lstrip(" "))
        dashes = _DASHES.match(body)
        if dashes:
            key_column += len(dashes.group(0))
        column = len(line) - len(line.lstrip(" "))
        stripped = line.strip()
        if stripped == "-" or stripped.startswith(("- ", "-\t")):
            if offset is None and column >= key_column:
                offset = column - key_column
                gap = _DASHES.match(stripped)
                sequence = offset + (len(gap.group(0)) if gap else 2)
        elif mapping is None and column > key_column:
            mapping = column - key_column
        if mapping is not None and offset is not None:
            break
    m = mapping if mapping is not None else DEFAULT_INDENT[0]
    o = offset if offset is not None else DEFAULT_INDENT[2]
    s = sequence if sequence is not None else max(m, o + 2)
    return m, max(s, o + 2), o


def dump(tree: Any, indent: tuple[int, int, int] = DEFAULT_INDENT) -> str:
    out = io.StringIO()
    _yaml(indent).dump(tree, out)
    return out.getvalue()


def render(file: YamlFile) -> str:
    """The file's text with the changed documents dumped again and the others as they were."""
    if not file.changed:
        return file.text
    if file.segments is None:
        return "---\n".join(dump(doc) if doc is not None else "" for doc in file.docs)
    parts: list[str] = []
    for index, segment in enumerate(file.segments):
        if index not in file.changed:
            parts.append(segment)
            continue
        head, body = _head(segment)
        text = dump(file.docs[index], guess_indent(body))
        separator = head.splitlines()[-1] if head else ""
        comment = separator.partition("#")[2].strip() if _SEPARATOR.match(separator) else ""
        if comment:  # ruamel writes ``--- # note`` as the document's first comment line
            first, _, rest = text.partition("\n")
            if first.strip().lstrip("#").strip() == comment:
                text = rest
        if parts and not parts[-1].endswith("\n"):
            parts[-1] += "\n"
        parts.append(head + text)
    return "".join(parts)


def _head(segment: str) -> tuple[str, str]:
    """A segment's lines up to its separator (comments before a first document included), and
    the rest."""
    lines = segment.splitlines(keepends=True)
    for i, line in enumerate(lines):
        if _SEPARATOR.match(line):
            return "".join(lines[: i + 1]), "".join(lines[i + 1 :])
    return "", segment


__all__ = [
    "DEFAULT_INDENT",
    "RoundTripError",
    "YamlFile",
    "apply_patch",
    "dump",
    "guess_indent",
    "parse",
    "render",
    "split_documents",
]
