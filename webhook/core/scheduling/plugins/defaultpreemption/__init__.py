"""DefaultPreemption (PostFilter), device-aware: ``postfilter`` (the plugin and its per-cycle
state), ``victims`` (who may be preempted, and their order), ``pdb`` (PodDisruptionBudgets),
``simulation`` (victims out of the state and back, their devices freed), ``unresolvable`` (the
Filter reasons removing pods cannot resolve)."""

from .postfilter import NAME, Candidate, DefaultPreemption, PostFilterResult, PreemptionCycle

__all__ = ["NAME", "Candidate", "DefaultPreemption", "PostFilterResult", "PreemptionCycle"]
