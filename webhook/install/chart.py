"""What the Helm chart (``manifests/helm/draxr``) takes from the code rather than restating it.

The chart templates the objects themselves; the hooks' CEL ``matchConditions`` are too long and too
subtle to keep twice, so ``make manifests`` writes them into the chart's ``files/`` and its templates
include them from there.
"""

from __future__ import annotations

from pathlib import Path

import yaml

from .matchconditions import MATCH_CONDITIONS, MUTATE_NEVER_ROUTES, MUTATE_NEVER_ROUTES_KEY

#: Where the Helm chart reads the hooks' CEL matchConditions from (written by ``make manifests``).
CHART = Path("helm") / "draxr"
CHART_MATCH_CONDITIONS = CHART / "files" / "match-conditions.yaml"


def chart_match_conditions() -> str:
    """The CEL ``matchConditions`` of each hook, as the Helm chart includes them (and the mutating
    hook's with ``route: never``)."""
    body = {
        hook: [{"name": n, "expression": e} for n, e in conditions]
        for hook, conditions in [*MATCH_CONDITIONS.items(), (MUTATE_NEVER_ROUTES_KEY, MUTATE_NEVER_ROUTES)]
    }
    # The header names the module MATCH_CONDITIONS was written in when the chart took this file;
    # it is kept as it is, so that the chart's file stays byte for byte what it was.
    header = (
        "# Written by `make manifests` from webhook/install/manifests.py (MATCH_CONDITIONS): do not edit.\n"
    )
    return header + yaml.safe_dump(body, sort_keys=False, default_flow_style=False, width=120)
