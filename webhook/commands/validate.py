"""``draxr validate -f PATH...``: the webhook's checks, offline, for CI pipelines.

Everything in the files forms the cluster the checks see (DeviceClasses decide which names are
DRA-backed; claims are compared with each other). Checked: every DeviceClass against the others
(a name declared twice is a finding on both), every Pod and workload pod template (DRA-backed
quantities; the extended resource mapping when the pod carries one) and every ResourceClaim
carrying the extended-resource-claim annotation. Checks that need the live request (who writes,
whether the named claim exists in the cluster) are left to the webhook.

Exit status: 0 nothing denied (warnings allowed), 1 something would be denied, 2 unusable input.
"""

from __future__ import annotations

import argparse
import copy
import sys
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TextIO

from ..admission.advice import contention_warning
from ..admission.claims import sibling_errors
from ..admission.deviceclasses import device_class_findings
from ..admission.extended import requested_extended
from ..admission.pods import mapping_errors, mapping_status, quantity_errors
from ..core.deviceclasses import ClassResolver
from ..core.fielderrors import FieldError
from ..core.objects import Obj, as_dict, controller_ref, meta, name, namespace
from ..core.validation import carries_special_annotation, validate_special_claim
from ..kube.cache import ClusterCache
from ..loader import WORKLOADS, Loaded, LoadError, expand_workloads, load_paths
from .flags import one_line
from .text import plural


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
        self.checked += 1
        if errors:
            self.denied += 1
        self.findings.extend(Finding(where, str(e)) for e in errors)
        self.findings.extend(Finding(where, w, warning=True) for w in warnings)

    @property
    def warnings(self) -> int:
        return sum(1 for f in self.findings if f.warning)


def _where(item: Loaded, obj: Obj, suffix: str = "") -> str:
    doc = f"document {item.index}" + (f": item {item.item}" if item.item is not None else "")
    ident = f"{namespace(obj)}/{name(obj)}" if namespace(obj) else name(obj)
    return f"{item.source}: {doc}: {obj.get('kind')} {ident}{suffix}"


def _template_pod(item: Loaded) -> Obj | None:
    """One pod of a workload (all replicas are alike), even when it scales to zero."""
    count_field = WORKLOADS.get((str(item.obj.get("apiVersion")), str(item.obj.get("kind"))))
    if count_field is None:
        return None
    one = copy.deepcopy(item.obj)
    one["spec"] = {**as_dict(one.get("spec")), count_field: 1}
    pods = expand_workloads([one])
    return pods[0] if pods else None


def _pod_findings(pod: Obj, classes: ClassResolver) -> tuple[list[FieldError], list[str]]:
    errors = quantity_errors(pod, classes)
    if mapping_status(pod) is not None:
        errors += mapping_errors(pod)
    warnings = [
        w for r in requested_extended(pod) if (w := contention_warning(r, classes.contenders(r))) is not None
    ]
    return errors, warnings


def check(loaded: Sequence[Loaded]) -> Report:
    """Every finding for the loaded objects, in input order."""
    objects: list[Obj] = expand_workloads([item.obj for item in loaded])
    cache = ClusterCache.from_objects(objects)
    classes = cache.state.classes
    all_classes = [item.obj for item in loaded if item.obj.get("kind") == "DeviceClass"]
    first_claim: dict[str, Obj] = {}  # owner pod uid -> first extended resource claim in the files

    def find(_owner_name: str, owner_uid: str) -> Obj | None:
        return first_claim.get(owner_uid)

    report = Report()
    for item in loaded:
        obj, kind = item.obj, item.obj.get("kind")
        if kind == "DeviceClass":
            report.add(_where(item, obj), *device_class_findings(obj, None, all_classes))
        elif kind == "Pod":
            pod = expand_workloads([obj])[0]
            report.add(_where(item, pod), *_pod_findings(pod, classes))
        elif kind == "ResourceClaim" and carries_special_annotation(obj):
            claim = expand_workloads([obj])[0]
            errors = validate_special_claim(claim) or sibling_errors(claim, namespace(claim), find)
            owner = controller_ref(claim)
            if not errors and owner is not None and isinstance(owner.get("uid"), str):
                first_claim.setdefault(owner["uid"], claim)
            report.add(_where(item, claim), errors)
        else:
            template = _template_pod(item)
            if template is not None:
                errors, warnings = _pod_findings(template, classes)
                target = {**obj, "metadata": {**meta(obj), "namespace": namespace(template)}}
                report.add(_where(item, target, " (pod template)"), errors, warnings)
    return report


def run(paths: Sequence[str | Path], out: TextIO, err: TextIO) -> int:
    try:
        loaded = load_paths(paths)
        report = check(loaded)
    except LoadError as e:
        print(f"draxr validate: error: {one_line(str(e))}", file=err)
        return 2
    for finding in report.findings:
        print(finding.line(), file=out)
    verdict = "denied" if report.denied else "ok"
    print(
        f"{verdict}: {plural(report.checked, 'object')} checked, {report.denied} denied, "
        f"{plural(report.warnings, 'warning')}",
        file=out,
    )
    return 1 if report.denied else 0


__all__ = ["Finding", "Report", "check", "run"]


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    v = sub.add_parser("validate", help="run the webhook's checks offline on manifest files")
    v.add_argument("-f", "--filename", action="append", required=True, metavar="PATH")
    v.set_defaults(func=main)


def main(args: argparse.Namespace) -> int:
    return run(args.filename, sys.stdout, sys.stderr)
