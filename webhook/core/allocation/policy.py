"""draxr's placement policies (``--policy``), one word for two decisions.

Each policy orders both a node's devices (``allocator``, ``cluster/topology.order_candidates``) and
the nodes themselves (``scheduling/scoring``): ``binpack`` fills what is in use and keeps whole
topology groups whole, ``spread`` prefers the emptiest, ``upstream`` is kube-scheduler's first fit
with its default scores."""

from __future__ import annotations

BINPACK = "binpack"
SPREAD = "spread"
UPSTREAM = "upstream"
POLICIES = (BINPACK, SPREAD, UPSTREAM)
#: What the worker and every command place by unless told otherwise.
DEFAULT_POLICY = BINPACK
