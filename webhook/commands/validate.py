"""``draxr validate -f PATH...``: the webhook's checks, offline, for CI pipelines.

Everything in the files forms the cluster the checks see (DeviceClasses decide which names are
DRA-backed; claims are compared with each other). Checked: every DeviceClass against the others
(a name declared twice is a finding on both), every Pod and workload pod template (DRA-backed
quantities; the extended resource mapping when the pod carries one), every ResourceClaim
carrying the extended-resource-claim annotation (a pod has one: the one quota verifies as its own),
and every ResourceQuota: one that limits a DRA-backed name (``requests.<name>``) while no quota of
its namespace limits the class's devices gets the webhook's warning where the release charges a
rewritten pod's claims as devices only. ``--kubernetes-version`` (1.34-1.37) is the release whose
quota rules apply (core/paths/quota.py), with the gate as it ships. Checks that need the live
request (who writes, whether the named claim exists in the cluster) are left to the webhook.

``--strict`` adds, for every object: the OpenAPI schema of ``--kubernetes-version`` (1.34-1.37,
from kubernetes-validate, the ``strict`` extra), unknown fields included; a compile of every CEL
expression of DeviceClasses, ResourceClaims and ResourceClaimTemplates with draxr's CEL engine;
and an input without objects is an error rather than a warning. ``-f -`` reads standard input.

Exit status: 0 nothing denied (warnings allowed), 1 something would be denied, 2 unusable input.
"""

from __future__ import annotations

import argparse
import functools
import re
import sys
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Final, TextIO

from ..admission.claims import sibling_errors
from ..admission.deviceclasses import device_class_findings
from ..admission.pods import mapping_errors, mapping_status
from ..core.api.constants import DEVICE_CLASS_PREFIX
from ..core.api.fielderrors import FieldError, forbidden, invalid, not_supported, required
from ..core.api.fielderrors import Path as FieldPath
from ..core.api.objects import Obj, as_dict, name, namespace, uid
from ..core.api.specialclaims import pod_owner
from ..core.api.validation import carries_special_annotation, validate_special_claim
from ..core.cel import SelectorEngine
from ..core.cel.releases import served
from ..core.cel.selectorcheck import selector_errors
from ..core.cluster.deviceclasses import ClassResolver, explicit_name
from ..core.cluster.gates import parse_version
from ..core.paths.explain import contention_warning, quota_warning
from ..core.paths.quota import QuotaRules, limits_by_name, release_rules, unguarded
from ..core.paths.requested import quantity_errors, requested_extended
from ..kube.cache import ClusterCache
from ..loader import (
    Loaded,
    LoadError,
    expand_workloads,
    load_paths,
    template_pod,
    with_identity,
)
from .flags import add_filename, one_line
from .text import plural

KUBERNETES_VERSIONS: Final = ("1.34", "1.35", "1.36", "1.37")
DEFAULT_KUBERNETES_VERSION: Final = "1.36"


@dataclass
class Finding:
    where: str
    message: str
    warning: bool = False

    def line(self) -> str:
        return f"{self.where}: warning: {self.message}" if self.warning else f"{self.where}: {self.message}"


@dataclass
class Report:
    findings: list[Finding] = field(default_factory=list)
    checked: int = 0
    denied: int = 0

    def add(self, where: str, errors: Sequence[FieldError], warnings: Sequence[str] = ()) -> None:
        self.add_parts([(where, errors, warnings)])

    def add_parts(self, parts: Sequence[tuple[str, Sequence[FieldError], Sequence[str]]]) -> None:
        """One object's findings, told in parts that name it differently (the object itself,
        its pod template)."""
        self.checked += 1
        if any(errors for _, errors, _ in parts):
            self.denied += 1
        for where, errors, warnings in parts:
            self.findings.extend(Finding(where, str(e)) for e in errors)
            self.findings.extend(Finding(where, w, warning=True) for w in warnings)

    @property
    def warnings(self) -> int:
        return sum(1 for f in self.findings if f.warning)


def _where(item: Loaded, obj: Obj, suffix: str = "") -> str:
    doc = f"document {item.index}" + (f": item {item.item}" if item.item is not None else "")
    ident = f"{namespace(obj)}/{name(obj)}" if namespace(obj) else name(obj)
    return f"{item.source}: {doc}: {obj.get('kind')} {ident}{suffix}"


def _pod_findings(pod: Obj, classes: ClassResolver) -> tuple[list[FieldError], list[str]]:
    errors = quantity_errors(pod, classes)
    if mapping_status(pod) is not None:
        errors += mapping_errors(pod)
    warnings = [
        w for r in requested_extended(pod) if (w := contention_warning(r, classes.contenders(r))) is not None
    ]
    return errors, warnings


# --- ResourceQuota -------------------------------------------------------------------------------


def _quota_warnings(
    loaded: Sequence[Loaded], classes: ClassResolver, rules: QuotaRules
) -> dict[int, list[str]]:
    """Position in ``loaded`` of a ResourceQuota -> the webhook's quota warnings it gets.

    Per namespace (the quotas of a namespace add up), each DRA-backed name limited by name but not
    by its class's devices, whose claims ``rules`` do not charge the name, is reported once, on the
    first quota that limits the name."""
    backed: dict[str, str] = {}
    for dc in classes.classes():
        backed[DEVICE_CLASS_PREFIX + name(dc)] = name(dc)
        declared = explicit_name(dc)
        winner = classes.class_name(declared) if declared is not None else None
        if declared is not None and winner is not None:
            backed[declared] = winner
    quotas = [
        (position, with_identity(item.obj))
        for position, item in enumerate(loaded)
        if item.obj.get("kind") == "ResourceQuota"
    ]
    out: dict[int, list[str]] = {}
    for ns in dict.fromkeys(namespace(q) for _, q in quotas):
        for resource, cls in unguarded([q for _, q in quotas], ns, backed, rules, classes.field_name):
            for position, q in quotas:
                if namespace(q) == ns and limits_by_name(q, resource):
                    out.setdefault(position, []).append(quota_warning(resource, cls))
                    break
    return out


# --- --strict: schemas and CEL -------------------------------------------------------------------


class StrictUnavailable(Exception):
    """``--strict`` cannot run here (the schemas are not installed)."""


#: Groups Kubernetes itself serves: the core group, dotless ones (apps, batch, ...) and *.k8s.io.
_BUILT_IN_GROUP: Final = re.compile(r"^(?:[a-z0-9-]*|.*\.k8s\.io)$")


class Schemas:
    """The OpenAPI schemas of one Kubernetes version (kubernetes-validate's strict variant: no
    unknown fields), one validator per kind, built on first use."""

    def __init__(self, version: str) -> None:
        try:
            from kubernetes_validate import utils
        except ImportError:
            raise StrictUnavailable(
                "--strict needs the Kubernetes schemas of kubernetes-validate: pip install 'draxr[strict]'"
            ) from None
        self.version = version
        self._utils: Any = utils
        full = [v for v in utils.all_versions() if utils.major_minor(v) == version]
        if not full:
            raise StrictUnavailable(
                f"--kubernetes-version {version}: kubernetes-validate has no schemas for it"
            )
        self._dir = f"kubernetes-json-schema/v{full[-1]}-local-strict"
        self._validators: dict[tuple[str, str], Any] = {}

    @functools.cached_property
    def _registry(self) -> Any:
        from referencing import Registry, Resource

        definitions = self._utils.schema_contents(f"{self._dir}/_definitions.json", self.version)
        return Resource.from_contents(definitions) @ Registry()

    def _validator(self, api_version: str, kind: str) -> Any:
        key = (api_version, kind)
        if key not in self._validators:
            self._validators[key] = self._build(api_version, kind)
        return self._validators[key]

    def _build(self, api_version: str, kind: str) -> Any:
        import jsonschema
        from referencing import Resource

        group_version = re.sub(r"^([^./]*)(?:\.[^/]*)?/", r"\1-", api_version)
        try:
            schema = self._utils.schema_contents(
                f"{self._dir}/{kind.lower()}-{group_version}.json", self.version
            )
        except FileNotFoundError:
            return None
        registry = Resource.from_contents(schema) @ self._registry
        return jsonschema.validators.Draft202012Validator(schema, registry=registry)

    def errors(self, obj: Obj) -> tuple[list[FieldError], list[str]]:
        """(schema errors, warnings) of one object as the input wrote it."""
        api_version, kind = str(obj.get("apiVersion")), str(obj.get("kind"))
        validator = self._validator(api_version, kind)
        if validator is None:
            group = api_version.rpartition("/")[0]
            if _BUILT_IN_GROUP.match(group):
                detail = f"Kubernetes {self.version} serves no {kind} in {api_version}"
                return [invalid(FieldPath("apiVersion"), api_version, detail)], []
            return [], [
                f"{api_version} {kind} is not a Kubernetes {self.version} type: its schema is not checked"
            ]
        out: list[FieldError] = []
        for e in validator.iter_errors(obj):
            out += _schema_errors(e, self.version)
        return sorted(out, key=lambda e: (e.field, str(e))), []


def _field_path(parts: Sequence[Any]) -> FieldPath:
    path = FieldPath()
    for part in parts:
        path = path.index(part) if isinstance(part, int) else path.child(str(part))
    return path


def _scalar(value: Any) -> bool:
    return value is None or isinstance(value, str | int | float | bool)


def _schema_errors(e: Any, version: str) -> list[FieldError]:
    """A jsonschema error as Kubernetes field errors."""
    path = _field_path(list(e.absolute_path))
    if e.validator == "additionalProperties" and isinstance(e.instance, dict):
        known = set(as_dict(e.schema.get("properties")))
        return [
            forbidden(path.child(str(k)), f"unknown field (not in the Kubernetes {version} schema)")
            for k in e.instance
            if k not in known
        ]
    if e.validator == "required":
        missing = re.match(r"^'([^']*)' is a required property", str(e.message))
        return [required(path.child(missing.group(1)) if missing else path)]
    if e.validator == "type":
        wanted = e.validator_value if isinstance(e.validator_value, list) else [e.validator_value]
        kinds = " or ".join(str(w) for w in wanted if w != "null")
        if _scalar(e.instance):
            return [invalid(path, e.instance, f"must be of type {kinds}")]
        return [FieldError(invalid(path, None, "").type, str(path), detail=f"must be of type {kinds}")]
    if e.validator == "enum" and _scalar(e.instance):
        return [not_supported(path, e.instance, [str(v) for v in e.validator_value])]
    if _scalar(e.instance):
        return [invalid(path, e.instance, str(e.message))]
    return [FieldError(invalid(path, None, "").type, str(path), detail=str(e.message))]


def cel_errors(obj: Obj, engine: SelectorEngine) -> list[FieldError]:
    """The API server's findings on the selectors: compile errors and the estimated cost limit."""
    return selector_errors(obj, engine)


# --- the checks ----------------------------------------------------------------------------------

StrictCheck = Callable[[Loaded], tuple[list[FieldError], list[str]]]


def strict_check(version: str) -> StrictCheck:
    """Schema (unknown fields included) and CEL findings for one loaded object."""
    schemas = Schemas(version)
    engine = SelectorEngine(env=served(parse_version(version), stored=False))  # as its API server validates

    def run(item: Loaded) -> tuple[list[FieldError], list[str]]:
        errors, warnings = schemas.errors(item.raw)
        return errors + cel_errors(item.raw, engine), warnings

    return run


def check(
    loaded: Sequence[Loaded], strict: StrictCheck | None = None, *, release: str = DEFAULT_KUBERNETES_VERSION
) -> Report:
    """Every finding for the loaded objects, in input order, under the quota rules of ``release``
    (with the gate as it ships: off in 1.34 and 1.35, on from 1.36)."""
    rules = release_rules(release)
    objects: list[Obj] = expand_workloads([item.obj for item in loaded])
    cache = ClusterCache.from_objects(objects)
    classes = cache.state.classes
    all_classes = [item.obj for item in loaded if item.obj.get("kind") == "DeviceClass"]
    quota_findings = _quota_warnings(loaded, classes, rules)
    # (namespace, owner pod uid) -> the extended resource claims of the files so far, in input order
    # (a claim without creationTimestamp counts as made after those before it).
    owned: dict[tuple[str, str], list[Obj]] = {}
    pods = {(namespace(p), name(p)): p for p in objects if p.get("kind") == "Pod"}

    def find(ns: str, owner_name: str, owner_uid: str) -> tuple[Obj | None, list[Obj]]:
        pod = pods.get((ns, owner_name))
        return (pod if pod is not None and uid(pod) == owner_uid else None), owned.get((ns, owner_uid), [])

    report = Report()
    for position, item in enumerate(loaded):
        obj, kind = item.obj, item.obj.get("kind")
        extra_errors, extra_warnings = strict(item) if strict is not None else ([], [])
        where, errors, warnings = _where(item, obj), list[FieldError](), list[str]()
        plain_where = where
        if kind == "DeviceClass":
            errors, warnings = device_class_findings(obj, None, all_classes)
        elif kind == "Pod":
            pod = with_identity(obj)
            plain_where = where = _where(item, pod)
            errors, warnings = _pod_findings(pod, classes)
        elif kind == "ResourceClaim" and carries_special_annotation(obj):
            claim = with_identity(obj)
            plain_where = where = _where(item, claim)
            errors = validate_special_claim(claim) or sibling_errors(claim, namespace(claim), find, rules)
            owner = pod_owner(claim)
            if not errors and owner is not None and isinstance(owner.get("uid"), str):
                owned.setdefault((namespace(claim), owner["uid"]), []).append(claim)
        elif kind == "ResourceQuota":
            plain_where = where = _where(item, with_identity(obj))
            warnings = quota_findings.get(position, [])
        else:
            # Every workload's pod template, as ``draxr convert`` reads it (a DaemonSet's and a
            # CronJob's too, and one that scales to zero).
            template = template_pod(obj)
            if template is not None:
                errors, warnings = _pod_findings(template, classes)
                where = _where(item, with_identity(obj), " (pod template)")
            elif strict is None:
                continue
        if where == plain_where:
            report.add(where, [*extra_errors, *errors], [*extra_warnings, *warnings])
        else:
            report.add_parts([(plain_where, extra_errors, extra_warnings), (where, errors, warnings)])
    return report


def run(
    paths: Sequence[str | Path],
    out: TextIO,
    err: TextIO,
    *,
    strict: bool = False,
    kubernetes_version: str = DEFAULT_KUBERNETES_VERSION,
) -> int:
    try:
        loaded = load_paths(paths)
        if strict and not loaded:
            raise LoadError(", ".join(str(p) for p in paths), None, None, "no objects to validate")
        report = check(
            loaded, strict_check(kubernetes_version) if strict else None, release=kubernetes_version
        )
    except LoadError as e:
        print(f"draxr validate: error: {one_line(str(e))}", file=err)
        return 2
    except StrictUnavailable as e:
        print(f"draxr validate: error: {one_line(str(e))}", file=err)
        return 2
    if not loaded:
        report.findings.append(
            Finding(
                ", ".join(str(p) for p in paths),
                "no objects to validate (--strict makes this an error)",
                True,
            )
        )
    for finding in report.findings:
        print(finding.line(), file=out)
    verdict = "denied" if report.denied else "ok"
    print(
        f"{verdict}: {plural(report.checked, 'object')} checked, {report.denied} denied, "
        f"{plural(report.warnings, 'warning')}",
        file=out,
    )
    return 1 if report.denied else 0


__all__ = ["Finding", "Report", "Schemas", "cel_errors", "check", "run", "strict_check"]


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    v = sub.add_parser("validate", help="run the webhook's checks offline on manifest files")
    add_filename(v)
    v.add_argument(
        "--strict",
        action="store_true",
        help="also check every object against the Kubernetes OpenAPI schema (unknown fields too), compile "
        "every CEL expression, and fail on an input without objects",
    )
    v.add_argument(
        "--kubernetes-version",
        choices=KUBERNETES_VERSIONS,
        default=None,
        help="the release whose ResourceQuota rules the quota and claim checks follow, and whose schemas "
        f"and CEL environment --strict checks against (default {DEFAULT_KUBERNETES_VERSION})",
    )
    v.set_defaults(func=main, parser=v)


def main(args: argparse.Namespace) -> int:
    return run(
        args.filename,
        sys.stdout,
        sys.stderr,
        strict=args.strict,
        kubernetes_version=args.kubernetes_version or DEFAULT_KUBERNETES_VERSION,
    )
