"""The worker's settings (``draxr serve`` flags)."""

from __future__ import annotations

import socket
from dataclasses import dataclass

from .queue import INITIAL_BACKOFF, MAX_BACKOFF


@dataclass
class WorkerConfig:
    scheduler_name: str = "draxr"
    policy: str = "binpack"
    bind_workers: int = 8
    orphan_interval: float = 60.0
    identity: str = socket.gethostname()
    #: kube-scheduler's podInitialBackoffSeconds and podMaxBackoffSeconds.
    initial_backoff: float = INITIAL_BACKOFF
    max_backoff: float = MAX_BACKOFF
    #: An unused ResourceClaimTemplate of the rewrite is deleted after this many seconds.
    template_grace: float = 60.0
    #: ``--percentage-of-nodes-to-score`` (``core.scheduling.sampling``): 0 adaptive, 100 every node.
    percentage_of_nodes_to_score: int = 0
