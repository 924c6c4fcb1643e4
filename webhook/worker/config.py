"""The worker's settings (``draxr serve`` flags): each default is written here once.

``help`` in a field's metadata is its flag's help (``commands/serve.py`` reads it).
"""

from __future__ import annotations

import socket
from dataclasses import dataclass, field

from ..core.allocation.policy import DEFAULT_POLICY
from ..core.api.constants import DEFAULT_SCHEDULER_NAME
from ..core.scheduling.plugins.volumebinding.prebind import BIND_TIMEOUT_SECONDS
from ..core.scheduling.podgroupsearch import DEFAULT_STEPS
from ..core.scheduling.sampling import ADAPTIVE
from .bindingconditions import BINDING_TIMEOUT_SECONDS
from .queue import INITIAL_BACKOFF, MAX_BACKOFF


@dataclass(frozen=True)
class WorkerConfig:
    #: The pods whose ``spec.schedulerName`` this is are the worker's; also its Events' reporter.
    scheduler_name: str = DEFAULT_SCHEDULER_NAME
    #: ``core.allocation.policy``: binpack, spread or upstream.
    policy: str = DEFAULT_POLICY
    #: Binding cycles run at once (kube-scheduler runs each in a goroutine of its own, unbounded).
    #: A cycle is five round trips, mostly waiting on the API server: on the upstream shape
    #: (bench/versus_scheduler.py, one 2-core machine) 8 bound 62 pods/s, 16 bound 75, 32 bound 86.
    bind_workers: int = 32
    #: Seconds between passes that repair orphaned special claims.
    orphan_interval: float = 60.0
    #: The Events' ``reportingInstance``; ``draxr serve`` sets its leader election identity.
    identity: str = socket.gethostname()
    #: kube-scheduler's podInitialBackoffSeconds and podMaxBackoffSeconds.
    initial_backoff: float = field(
        default=INITIAL_BACKOFF,
        metadata={"help": "backoff after a pod's first failed attempt; doubles per attempt"},
    )
    max_backoff: float = MAX_BACKOFF
    #: An unused ResourceClaimTemplate of the rewrite is deleted after this many seconds.
    template_grace: float = field(
        default=60.0,
        metadata={"help": "delete a rewrite ResourceClaimTemplate no pod has used for this long"},
    )
    #: ``core.scheduling.sampling``: 0 adaptive, 100 every node.
    percentage_of_nodes_to_score: int = field(
        default=ADAPTIVE,
        metadata={
            "help": "stop filtering once this share of the nodes fit and score only those, as "
            "kube-scheduler's percentageOfNodesToScore (0: adaptive, 50%% minus 1 per 125 nodes, at least "
            "5%% and 100 nodes; 100: every node)"
        },
    )
    #: VolumeBindingArgs.bindTimeoutSeconds: how long PreBind waits for the claims it selected a
    #: node for (or bound to a volume) to be bound, before the pod is retried.
    bind_timeout: float = BIND_TIMEOUT_SECONDS
    #: kube-scheduler's TopologyAwareWorkloadScheduling gate (alpha, off by default in 1.37).
    topology_aware: bool = field(
        default=True,
        metadata={
            "help": "place a PodGroup's members in one domain of its topology key, the domains "
            "scored, as kube-scheduler with TopologyAwareWorkloadScheduling on; "
            "--no-topology-aware-workload-scheduling ignores the key, as kube-scheduler with the gate off"
        },
    )
    #: Beyond upstream: a gang's bounded search (``core/scheduling/podgroupsearch.py``).
    gang_search_steps: int = field(
        default=DEFAULT_STEPS,
        metadata={
            "help": "decisions a gang's search for a placement may take where kube-scheduler's one "
            "pass finds none (backtracking over members' nodes); 0: the one pass alone, as kube-scheduler"
        },
    )
    #: Beyond upstream: every member's PreBind before any Bind (``worker/groupbinding.py``).
    gang_two_phase_commit: bool = field(
        default=True,
        metadata={
            "help": "write every member's claims before binding any, and release a gang bound below "
            "its minCount; --no-gang-two-phase-commit binds each member as it comes, as kube-scheduler"
        },
    )
    #: DynamicResourcesArgs.bindingTimeout (KEP-5007): how long PreBind waits for devices' binding
    #: conditions before it releases them and the pod is retried.
    binding_timeout: float = field(
        default=BINDING_TIMEOUT_SECONDS,
        metadata={
            "help": "how long a pod waits for its devices' binding conditions before they are released "
            "and it is placed again (kube-scheduler's bindingTimeout)"
        },
    )
