"""API Priority and Fairness for draxr: its own priority level, and the FlowSchema that puts its two
ServiceAccounts there.

Without these, every request of draxr's worker and webhook falls into the apiserver's catch-all
``service-accounts`` FlowSchema (priority level ``workload-low``), where any other tenant's
controllers compete with it: under load, binds and claim writes queue behind them or get 429s.
kube-scheduler has its own FlowSchema at precedence 800 on ``workload-high`` (40 shares, half
lendable, 128 queues of 50); draxr, which does the same job for the pods it takes, gets the same
shape in a level of its own, so an operator can give it more than ``workload-high`` without
touching upstream's levels. The suggested objects upstream keeps (``apf_configuration.go``) are
not changed.
"""

from __future__ import annotations

from ..core.api.objects import Obj
from ..identity.names import FLOW_CONTROL, WEBHOOK, WORKER, metadata

API_VERSION = "flowcontrol.apiserver.k8s.io/v1"
#: Between kube-scheduler's and kube-controller-manager's (800) and the catch-all
#: ``service-accounts`` (9000): lower wins, and draxr's ServiceAccounts must not fall through.
MATCHING_PRECEDENCE = 850
#: ``workload-high``'s nominal concurrency shares, lendable share and queues.
DEFAULT_SHARES = 40
LENDABLE_PERCENT = 50
QUEUES, HAND_SIZE, QUEUE_LENGTH_LIMIT = 128, 6, 50
#: The apiserver accepts nominalConcurrencyShares from 0 (1.30+) up to what fits in an int32; a
#: level above 1,000 would starve the suggested ones, so the option stops there.
MIN_SHARES, MAX_SHARES = 1, 1000


def flow_control(namespace: str, shares: int = DEFAULT_SHARES) -> list[Obj]:
    """The PriorityLevelConfiguration and the FlowSchema, in that order."""
    level: Obj = {
        "apiVersion": API_VERSION,
        "kind": "PriorityLevelConfiguration",
        "metadata": metadata(FLOW_CONTROL, None, "flowcontrol"),
        "spec": {
            "type": "Limited",
            "limited": {
                "nominalConcurrencyShares": shares,
                "lendablePercent": LENDABLE_PERCENT,
                "limitResponse": {
                    "type": "Queue",
                    "queuing": {
                        "queues": QUEUES,
                        "handSize": HAND_SIZE,
                        "queueLengthLimit": QUEUE_LENGTH_LIMIT,
                    },
                },
            },
        },
    }
    schema: Obj = {
        "apiVersion": API_VERSION,
        "kind": "FlowSchema",
        "metadata": metadata(FLOW_CONTROL, None, "flowcontrol"),
        "spec": {
            "priorityLevelConfiguration": {"name": FLOW_CONTROL},
            "matchingPrecedence": MATCHING_PRECEDENCE,
            # One flow per ServiceAccount: the webhook's reads never queue behind the worker's writes.
            "distinguisherMethod": {"type": "ByUser"},
            "rules": [
                {
                    "subjects": [
                        {"kind": "ServiceAccount", "serviceAccount": {"name": sa, "namespace": namespace}}
                        for sa in (WORKER, WEBHOOK)
                    ],
                    "resourceRules": [
                        {
                            "verbs": ["*"],
                            "apiGroups": ["*"],
                            "resources": ["*"],
                            "clusterScope": True,
                            "namespaces": ["*"],
                        }
                    ],
                    "nonResourceRules": [{"verbs": ["*"], "nonResourceURLs": ["*"]}],
                }
            ],
        },
    }
    return [level, schema]
