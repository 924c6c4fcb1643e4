"""``draxr convert -f PATH``: KEP-5004's "Option 2", manifests rewritten offline into DRA claims.

Each Pod, and the pod template of each Deployment, ReplicaSet, StatefulSet, DaemonSet, Job and
CronJob (alone, or in a ``kind: List`` as ``kubectl get -o yaml`` prints it), that asks for a
DRA-backed extended resource becomes exactly what the webhook's rewrite mode makes of it at
admission: the webhook's own patch (``core.paths.patch.plan_patch``) is applied to the
manifest, so a converted pod passes through the webhook unchanged. Which names are DRA-backed
comes from the DeviceClasses in the input and in ``--classes`` (``spec.extendedResourceName``,
the ``draxr.io/extended-resource-name`` annotation, and every class's implicit
``deviceclass.resource.kubernetes.io/<class>``), resolved as the webhook resolves them.

The ResourceClaimTemplates the converted pods need (one per namespace, class and count, with the
names the webhook gives them) follow the converted documents, each once, unless the input has
one of that name in that namespace already; a workload without a namespace gets templates
without one. YAML keeps its comments and key order, and documents without a change stay byte
for byte as they were (``loader.roundtrip``).

``--in-place`` rewrites the files instead, as ``kubectl convert`` can: each template goes to the
end of the file of the first converted workload that needs it (a JSON file then holds a
``kind: List``). Standard input cannot be rewritten in place.

Exit status: 0 done, 2 unusable input (one line: file, document, object, field).
"""

from __future__ import annotations

import argparse
import copy
import json
import os
import sys
import tempfile
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TextIO

from ..core.api.capacityrequests import capacity_by_class
from ..core.api.fielderrors import duplicate
from ..core.api.objects import Obj, as_dict, as_list, name, spec
from ..core.cluster.deviceclasses import ClassResolver
from ..core.paths.explain import contention_warning
from ..core.paths.patch import plan_patch
from ..core.paths.requested import backing_classes, quantity_errors, requested_extended
from ..core.paths.rewrite import TemplateRef, alignment, plan_rewrite, template
from ..loader import (
    STDIN,
    Loaded,
    LoadError,
    input_files,
    load_text,
    read_input,
    template_path,
    template_pod,
)
from ..loader.roundtrip import DEFAULT_INDENT, RoundTripError, YamlFile, apply_patch, dump, parse, render
from .flags import add_filename, fail, non_empty, one_line

OUTPUTS = ("yaml", "json")


class ConvertError(Exception):
    """Unusable input: the one line after ``draxr convert: error:``."""


@dataclass
class InputFile:
    """One file (or standard input) of ``-f``: its objects, and the trees the patches go into."""

    file: Path | str
    source: str
    text: str
    is_json: bool
    loaded: list[Loaded]
    yaml: YamlFile | None = None  # YAML: the round-trip trees
    json_doc: Any = None  # JSON: the document
    converted: int = 0
    templates: list[Obj] = field(default_factory=list)  # appended with --in-place


@dataclass
class Result:
    files: list[InputFile]
    objects: list[Obj]  # every object of the input, converted, in order (Lists flattened)
    templates: list[Obj]  # the templates to add, in order of first need
    template_files: list[int]  # for each template, the file of the first workload needing it
    warnings: list[str]


def _where(item: Loaded) -> str:
    obj = item.raw or item.obj
    doc = f"document {item.index}" + (f": item {item.item}" if item.item is not None else "")
    ns = as_dict(obj.get("metadata")).get("namespace")
    ident = (
        f"{ns}/{name(obj)}" if ns else name(obj) or str(as_dict(obj.get("metadata")).get("generateName", ""))
    )
    return f"{item.source}: {doc}: {obj.get('kind')} {ident}"


def _field_prefix(path: Sequence[str]) -> str:
    return "".join(f"{p}." for p in path)


def _any_group(_class: str, _attribute: str) -> int:
    """Offline, every topology group is taken to be large enough for any request."""
    return 1 << 30


def read_classes(paths: Sequence[str]) -> list[Obj]:
    """The DeviceClasses of ``--classes``; a file with none is a mistake worth a clear error."""
    out: list[Obj] = []
    for file in input_files(paths):
        source, text, is_json = read_input(file)
        found = [
            i.obj for i in load_text(text, source, is_json=is_json) if i.obj.get("kind") == "DeviceClass"
        ]
        if not found:
            raise ConvertError(f"--classes {source}: no DeviceClass in it")
        out += found
    return out


def _read(file: Path | str) -> InputFile:
    source, text, is_json = read_input(file)
    loaded = load_text(text, source, is_json=is_json)
    entry = InputFile(file, source, text, is_json, loaded)
    if is_json:
        entry.json_doc = json.loads(text) if text.strip() else None
        return entry
    try:
        entry.yaml = parse(text)
    except RoundTripError as e:
        doc = f": document {e.index}" if e.index is not None else ""
        raise ConvertError(f"{source}{doc}: cannot keep comments and key order: {e.message}") from None
    for item in loaded:
        if item.index >= len(entry.yaml.docs) or entry.yaml.docs[item.index] is None:
            raise ConvertError(f"{source}: document {item.index}: read differently by the YAML parsers")
    return entry


def _claim_clash(pod: Obj, dra: dict[str, str], where: str, prefix: str) -> ConvertError:
    """The error for a pod claim whose name the rewrite needs (``plan_rewrite``'s ValueError)."""
    own = {**pod, "spec": {k: v for k, v in spec(pod).items() if k != "resourceClaims"}}
    wanted = {str(pc["name"]) for pc in plan_rewrite(own, dra).pod_claims}
    for i, pc in enumerate(as_list(spec(pod).get("resourceClaims"))):
        claim = as_dict(pc).get("name")
        if claim in wanted:
            err = duplicate(
                f"{prefix}spec.resourceClaims[{i}].name",
                claim,
                "draxr's rewrite gives this name to the claim of a converted request; rename this claim",
            )
            return ConvertError(f"{where}: {err}")
    return ConvertError(f"{where}: {prefix}spec.resourceClaims: the rewrite's claim names are taken")


def convert(paths: Sequence[str | Path], class_paths: Sequence[str] = ()) -> Result:
    """Every input file with its conversions applied (nothing is written); raises
    ``ConvertError``/``LoadError`` for unusable input."""
    unique: dict[Path | str, Path | str] = {}  # a file named twice (or by its directory too) once
    for f in input_files(paths):
        unique.setdefault(f if f == STDIN else Path(f).resolve(), f)
    files = [_read(f) for f in unique.values()]
    classes = ClassResolver()
    for dc in read_classes(class_paths) if class_paths else []:
        classes.upsert(dc)
    for entry in files:
        for item in entry.loaded:
            if item.obj.get("kind") == "DeviceClass":
                classes.upsert(item.obj)
    existing = {
        (as_dict(i.raw.get("metadata")).get("namespace") or None, name(i.raw))
        for entry in files
        for i in entry.loaded
        if i.raw.get("kind") == "ResourceClaimTemplate"
    }
    needed: dict[tuple[str | None, TemplateRef], int] = {}
    objects: list[Obj] = []
    warnings: list[str] = []
    for position, entry in enumerate(files):
        for item in entry.loaded:
            converted = _convert_item(entry, item, classes, warnings)
            objects.append(converted[0])
            ns = as_dict(item.raw.get("metadata")).get("namespace") or None
            for ref in converted[1]:
                if (ns, ref.name) not in existing:
                    needed.setdefault((ns, ref), position)
    templates: list[Obj] = []
    template_files: list[int] = []
    for (ns, ref), position in needed.items():
        t = template(ref, ns or "")
        if ns is None:
            del t["metadata"]["namespace"]
        templates.append(t)
        template_files.append(position)
    return Result(files, objects, templates, template_files, warnings)


def _convert_item(
    entry: InputFile, item: Loaded, classes: ClassResolver, warnings: list[str]
) -> tuple[Obj, list[TemplateRef]]:
    """(the object converted, the templates it needs); the patch also goes into the file's tree."""
    raw = item.raw
    path = template_path(raw)
    pod = template_pod(raw)
    if path is None or pod is None:
        return raw, []
    where = _where(item)
    prefix = _field_prefix(path)
    names = requested_extended(pod)
    dra = backing_classes(names, classes)
    for resource in names:
        if resource not in dra:
            warnings.append(f"{where}: {resource}: no DeviceClass maps this name; left as it is")
        elif (contended := contention_warning(resource, classes.contenders(resource))) is not None:
            warnings.append(f"{where}: {contended}")
    if not dra:
        return raw, []
    errors = quantity_errors(pod, classes)
    if errors:
        raise ConvertError(f"{where}: {prefix}{errors[0]}")
    # Aligned as the class asks (``draxr.io/align-by``, unless the pod opts out), as the webhook
    # would on a cluster whose topology groups are large enough: offline, there are no slices to
    # say otherwise.
    align = alignment(pod, classes.get, _any_group)
    try:
        plan = plan_rewrite(
            pod,
            dra,
            align,
            tolerations=classes.tolerations,
            capacity=capacity_by_class(dra.values(), classes.get),
        )
    except ValueError:
        raise _claim_clash(pod, dra, where, prefix) from None
    ops = plan_patch(pod, plan)  # routing is the cluster's: a manifest keeps its schedulerName
    refs = plan.templates
    if not ops:
        return raw, []
    converted = copy.deepcopy(raw)
    apply_patch(converted, ops, path)
    tree_prefix: list[str | int] = [] if item.item is None else ["items", item.item]
    if entry.yaml is not None:
        apply_patch(entry.yaml.docs[item.index], ops, [*tree_prefix, *path])
        entry.yaml.changed.add(item.index)
    else:
        apply_patch(entry.json_doc, ops, [*tree_prefix, *path])
    entry.converted += 1
    return converted, refs


# --- output --------------------------------------------------------------------------------------


def _file_text(entry: InputFile, templates: Sequence[Obj] = ()) -> str:
    """The file's new text: YAML keeps its comments; JSON stays JSON."""
    if entry.yaml is not None:
        text = render(entry.yaml)
        for t in templates:
            if text and not text.endswith("\n"):
                text += "\n"
            text += "---\n" + dump(t, DEFAULT_INDENT)
        return text
    doc = entry.json_doc
    if templates:
        if isinstance(doc, dict) and doc.get("kind") == "List" and isinstance(doc.get("items"), list):
            doc["items"] += list(templates)
        else:
            doc = {"apiVersion": "v1", "kind": "List", "items": [doc, *templates]}
    return json.dumps(doc, indent=2, ensure_ascii=False) + "\n"


def _checked(entry: InputFile, text: str, expected: Sequence[Obj]) -> str:
    """``text`` if it reads back as ``expected`` (the converted objects); the round trip is
    checked rather than trusted."""
    try:
        back = load_text(text, entry.source, is_json=entry.is_json)
    except LoadError as e:
        raise ConvertError(f"{entry.source}: the converted text does not read back: {e.message}") from None
    for got, want in zip(back, expected, strict=False):
        if got.raw != want:
            raise ConvertError(
                f"{entry.source}: document {got.index}: the converted text reads back differently"
            )
    if len(back) != len(expected):
        raise ConvertError(
            f"{entry.source}: the converted text holds {len(back)} objects, not {len(expected)}"
        )
    return text


def yaml_stream(result: Result) -> str:
    """Every input document (JSON ones as YAML), then the templates, as one YAML stream."""
    parts: list[str] = []
    position = 0
    for entry in result.files:
        count = len(entry.loaded)
        expected = result.objects[position : position + count]
        position += count
        if entry.yaml is not None:
            text = _checked(entry, render(entry.yaml), expected)
            if not entry.yaml.docs:
                continue
        else:
            if entry.json_doc is None:
                continue
            text = dump(entry.json_doc, DEFAULT_INDENT)
        if parts:
            if not parts[-1].endswith("\n"):
                parts[-1] += "\n"
            if not _opens_with_separator(text):
                text = "---\n" + text
        parts.append(text)
    for t in result.templates:
        if parts and not parts[-1].endswith("\n"):
            parts[-1] += "\n"
        parts.append(("---\n" if parts else "") + dump(t, DEFAULT_INDENT))
    return "".join(parts)


def _opens_with_separator(text: str) -> bool:
    for line in text.splitlines():
        if line.startswith("---") and (len(line) == 3 or line[3] in " \t"):
            return True
        if line.strip() and not line.lstrip().startswith("#"):
            return False
    return False


def json_document(result: Result) -> str:
    """One object as it is, more as a ``kind: List`` (as ``kubectl convert -o json``)."""
    objects = [*result.objects, *result.templates]
    doc: Obj = objects[0] if len(objects) == 1 else {"apiVersion": "v1", "kind": "List", "items": objects}
    return json.dumps(doc, indent=2, ensure_ascii=False) + "\n"


def write_in_place(result: Result, out: TextIO) -> None:
    """Rewrite every file that changed (its converted objects, its templates), atomically."""
    position = 0
    plans: list[tuple[InputFile, str, int]] = []
    for index, entry in enumerate(result.files):
        count = len(entry.loaded)
        expected = result.objects[position : position + count]
        position += count
        templates = [t for t, f in zip(result.templates, result.template_files, strict=True) if f == index]
        if not entry.converted and not templates:
            continue
        text = _file_text(entry, templates)
        if entry.yaml is not None:
            _checked(entry, render(entry.yaml), expected)
        plans.append((entry, text, len(templates)))
    for entry, text, added in plans:
        _replace(Path(entry.file), text)
        note = f", {added} ResourceClaimTemplate{'s' if added != 1 else ''} added" if added else ""
        out.write(f"{entry.source}: {entry.converted} converted{note}\n")


def _replace(path: Path, text: str) -> None:
    """Write ``text`` over ``path`` at once (a temporary file renamed), keeping its mode."""
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", dir=path.parent)
    try:
        with os.fdopen(fd, "w", encoding="utf-8", newline="") as f:
            f.write(text)
        os.chmod(tmp, path.stat().st_mode & 0o7777)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def run(
    paths: Sequence[str | Path],
    out: TextIO,
    err: TextIO,
    *,
    classes: Sequence[str] = (),
    in_place: bool = False,
    output: str = "yaml",
) -> int:
    try:
        result = convert(paths, classes)
        text = "" if in_place else json_document(result) if output == "json" else yaml_stream(result)
        if in_place:
            write_in_place(result, out)
    except (LoadError, ConvertError) as e:
        print(f"draxr convert: error: {one_line(str(e))}", file=err)
        return 2
    except OSError as e:
        print(f"draxr convert: error: {one_line(f'{e.filename}: {e.strerror or e}')}", file=err)
        return 2
    for warning in result.warnings:
        print(f"draxr convert: warning: {one_line(warning)}", file=err)
    out.write(text)
    return 0


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    c = sub.add_parser(
        "convert",
        help="rewrite manifests offline into DRA claims, as the webhook's rewrite mode does",
        description="Rewrite Pods and workloads that ask for DRA-backed extended resources into DRA "
        "ResourceClaims from ResourceClaimTemplates (KEP-5004 Option 2), the templates included.",
    )
    add_filename(c)
    c.add_argument(
        "--classes",
        action="append",
        default=[],
        metavar="PATH",
        type=non_empty,
        help="DeviceClasses to resolve names with, besides those in the input (repeatable)",
    )
    c.add_argument("--in-place", action="store_true", help="rewrite the files instead of printing")
    c.add_argument("-o", "--output", choices=OUTPUTS, default=None, help="yaml (default) or json")
    c.set_defaults(func=main, parser=c)


def main(args: argparse.Namespace) -> int:
    parser: argparse.ArgumentParser = args.parser
    if args.in_place and any(str(p) == STDIN for p in args.filename):
        fail(parser, "--in-place: standard input (-f -) cannot be rewritten in place")
    if args.in_place and args.output is not None:
        fail(parser, "--in-place writes each file in its own format; -o/--output does not apply")
    if STDIN in args.filename and STDIN in args.classes:
        fail(parser, "--classes: standard input is read by -f -")
    return run(
        args.filename,
        sys.stdout,
        sys.stderr,
        classes=args.classes,
        in_place=args.in_place,
        output=args.output or "yaml",
    )
