"""draxr's API Priority and Fairness objects: its own priority level, and a FlowSchema that takes
exactly its two ServiceAccounts ahead of the apiserver's catch-all ``service-accounts`` schema.
(e2e/controlplane/test_controlplane.py proves the classification on real kube-apiservers.)"""

from __future__ import annotations

import pytest

from webhook.cli import main
from webhook.core.api.objects import Obj
from webhook.identity.names import WEBHOOK, WORKER
from webhook.install.flowcontrol import DEFAULT_SHARES, MATCHING_PRECEDENCE, flow_control
from webhook.install.manifests import render
from webhook.install.options import InstallOptions

from .builders import certificates

#: The apiserver's suggested FlowSchemas that could otherwise take draxr's requests
#: (k8s.io/apiserver/pkg/apis/flowcontrol/bootstrap): kube-scheduler's and kube-controller-manager's
#: (800), and the catch-all for every ServiceAccount (9000).
KUBE_SCHEDULER_PRECEDENCE, SERVICE_ACCOUNTS_PRECEDENCE = 800, 9000


def kinds(objects: list[Obj]) -> list[str]:
    return [o["kind"] for o in objects]


def test_the_schema_takes_exactly_draxrs_service_accounts_into_its_own_level() -> None:
    level, schema = flow_control("ml-infra", 77)
    assert level["spec"]["limited"]["nominalConcurrencyShares"] == 77
    assert schema["spec"]["priorityLevelConfiguration"]["name"] == level["metadata"]["name"]
    [rule] = schema["spec"]["rules"]
    assert rule["subjects"] == [
        {"kind": "ServiceAccount", "serviceAccount": {"name": WORKER, "namespace": "ml-infra"}},
        {"kind": "ServiceAccount", "serviceAccount": {"name": WEBHOOK, "namespace": "ml-infra"}},
    ]
    assert KUBE_SCHEDULER_PRECEDENCE <= MATCHING_PRECEDENCE < SERVICE_ACCOUNTS_PRECEDENCE
    assert schema["spec"]["distinguisherMethod"] == {"type": "ByUser"}


def test_rendered_by_default_and_left_out_when_turned_off() -> None:
    on = render(certificates=certificates())
    assert kinds(on).count("PriorityLevelConfiguration") == kinds(on).count("FlowSchema") == 1
    [level] = [o for o in on if o["kind"] == "PriorityLevelConfiguration"]
    assert level["spec"]["limited"]["nominalConcurrencyShares"] == DEFAULT_SHARES
    off = render(InstallOptions(flow_control=False), certificates=certificates())
    assert "FlowSchema" not in kinds(off)
    assert "PriorityLevelConfiguration" not in kinds(off)
    assert len(off) == len(on) - 2


def test_draxr_manifests_flags(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["manifests", "--cert-manager", "--flow-control-shares", "200"]) == 0
    out = capsys.readouterr().out
    assert "nominalConcurrencyShares: 200" in out
    assert main(["manifests", "--cert-manager", "--no-flow-control"]) == 0
    assert "FlowSchema" not in capsys.readouterr().out
