"""PodDisruptionBudgets as preemption reads them (upstream's ``FilterVictimsWithPDBViolation``).

Each PDB's ``status.disruptionsAllowed`` is a budget spent by the victims it selects, in the order
given; a victim that overspends any budget violates. A PDB in another namespace, with an empty or
invalid selector, or listing the pod in ``status.disruptedPods`` (already counted by the API
server) is not spent. A pod without labels violates nothing."""

from __future__ import annotations

from typing import Any

from ....api.objects import Obj, as_dict, as_list, labels, name, namespace, spec, status
from .victims import Victim

_OPERATORS = ("In", "NotIn", "Exists", "DoesNotExist")


def selector_matches(selector: Any, pod_labels: dict[str, str]) -> bool:
    """``metav1.LabelSelectorAsSelector(...).Matches``, with a nil, empty or invalid selector
    matching nothing (as preemption treats them)."""
    sel = as_dict(selector)
    match_labels = as_dict(sel.get("matchLabels"))
    exprs = as_list(sel.get("matchExpressions"))
    if not match_labels and not exprs:
        return False
    for k, v in match_labels.items():
        if pod_labels.get(str(k)) != v:
            return False
    for e in exprs:
        expr = as_dict(e)
        key, op, values = expr.get("key"), expr.get("operator"), as_list(expr.get("values"))
        if not isinstance(key, str) or op not in _OPERATORS:
            return False
        if op in ("In", "NotIn") and not values:
            return False  # invalid: In and NotIn need values
        present = key in pod_labels
        if op == "In" and not (present and pod_labels[key] in values):
            return False
        if op == "NotIn" and present and pod_labels[key] in values:
            return False
        if op == "Exists" and not present:
            return False
        if op == "DoesNotExist" and present:
            return False
    return True


def split_by_pdb_violation(
    victims: list[Victim], pdbs: list[Obj]
) -> tuple[list[tuple[Victim, int]], list[Victim]]:
    """(violating victims with how many pods violate, non-violating victims), each in the given
    order."""
    allowed = [int(status(p).get("disruptionsAllowed") or 0) for p in pdbs]
    violating: list[tuple[Victim, int]] = []
    non_violating: list[Victim] = []
    for v in victims:
        if _violates(v.pod, pdbs, allowed):
            violating.append((v, 1))
        else:
            non_violating.append(v)
    return violating, non_violating


def _violates(pod: Obj, pdbs: list[Obj], allowed: list[int]) -> bool:
    pod_labels = labels(pod)
    if not pod_labels:
        return False
    for i, pdb in enumerate(pdbs):
        if namespace(pdb) != namespace(pod):
            continue
        if not selector_matches(spec(pdb).get("selector"), pod_labels):
            continue
        if name(pod) in as_dict(status(pdb).get("disruptedPods")):
            continue
        allowed[i] -= 1
        if allowed[i] < 0:
            return True
    return False
