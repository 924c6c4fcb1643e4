"""The admission webhook's settings (``draxr serve`` flags): each default is written here once.

``help`` in a field's metadata is its flag's help (``commands/serve.py`` reads it).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from functools import cached_property

from ..core.api.constants import DEFAULT_SCHEDULER_NAME
from ..core.api.labels import parse_label_selector
from ..core.paths.choice import Mode
from ..core.paths.consumed import ManagedClasses
from ..core.paths.routing import Route, Routing, UnsupportedPods

#: The worker's service account and kube-scheduler: the only writers of pod mappings and
#: extended resource claims (``--allowed-writers``).
DEFAULT_ALLOWED_WRITERS: frozenset[str] = frozenset(
    {"system:serviceaccount:draxr-system:draxr-worker", "system:kube-scheduler"}
)
#: The apiserver's own request body limit, ``MaxRequestBodyBytes: int64(3 * 1024 * 1024)`` in
#: ``NewConfig`` (``staging/src/k8s.io/apiserver/pkg/server/config.go``): no object it stores is larger.
MAX_BODY_BYTES = 3 * 1024 * 1024
#: Bodies up to this size are answered on the event loop (a realistic pod review is 5-20 KB and
#: takes well under a millisecond); larger ones go to the review threads.
INLINE_REVIEW_BYTES = 64 * 1024
#: Threads answering large reviews. Python runs one thread at a time (the GIL): more threads add
#: no throughput, they only take more of the loop's turns (bench/webhook.py --large-pods: with 2,
#: the small reviews' p99 doubled).
REVIEW_THREADS = 1
#: Large reviews in flight (being read, waiting or answered) beyond which more are refused at
#: once with HTTP 429, as the apiserver refuses requests past --max-requests-inflight.
MAX_LARGE_REVIEWS = 4


@dataclass(frozen=True)
class AdmissionConfig:
    """What the hooks need to know beyond the cluster state.

    ``claim_wait_seconds``: how long a pod status write by an allowed writer may wait for the
    ResourceClaim it names to reach an informer-fed cache (the worker creates the claim a moment
    before it writes the pod's mapping; the watch may lag behind). 0 disables waiting.

    ``class_read_seconds``: how long a pod admission may wait for a fresh DeviceClass list when
    the cache knows no class for a name the pod asks for (a class created a moment before the pod
    may not have reached the informer; routing is decided only once). 0 trusts the cache.

    ``inline_review_bytes``, ``review_threads``, ``max_large_reviews``: a body larger than
    ``inline_review_bytes`` is answered on one of ``review_threads`` threads, so the event loop
    (small reviews, health probes) stays free; at most ``max_large_reviews`` such bodies are in
    flight, and more are answered HTTP 429 without being read.
    """

    allowed_writers: frozenset[str] = field(
        default=DEFAULT_ALLOWED_WRITERS,
        metadata={"help": "identities allowed to write special claims and pod mappings (repeatable)"},
    )
    route: Route = "default-only"
    scheduler_name: str = DEFAULT_SCHEDULER_NAME
    #: ``--managed-classes``: a label selector on DeviceClasses (core/paths/consumed.py).
    managed_classes: str = field(
        default="",
        metadata={
            "help": "label selector of the DeviceClasses whose devices draxr's worker allocates: pods that "
            "consume them (by extended resource or by their own claims) are routed to it "
            "(default: every class)"
        },
    )
    #: ``--unsupported-pods``: a routed pod using a feature the worker does not implement.
    unsupported_pods: UnsupportedPods = field(
        default="deny",
        metadata={
            "help": "a pod that consumes devices draxr manages and uses a feature its worker does not "
            "implement: deny it, or leave it to its scheduler (default-scheduler) with a warning"
        },
    )
    max_body_bytes: int = MAX_BODY_BYTES
    claim_wait_seconds: float = 2.0
    class_read_seconds: float = field(
        default=2.0,
        metadata={
            "help": "when the cache knows no DeviceClass for a name a new pod asks for, wait this long for a "
            "fresh list from the API server before routing (0: trust the cache)"
        },
    )
    fit_cache_size: int = 256
    #: ``--mode``: the path of pods asking for DRA-backed names (core/paths/choice.py); ``auto`` picks it
    #: per pod from the gates. ``force_rewrite``: rewrite even where a device plugin serves the name.
    mode: Mode = field(
        default="auto",
        metadata={
            "help": "the path of pods asking for DRA-backed names: native (KEP-5004), rewrite (into DRA "
            "claims), off; auto picks per pod from DRAExtendedResource on the apiserver and the kubelets"
        },
    )
    force_rewrite: bool = field(
        default=False,
        metadata={"help": "rewrite even pods whose names a Ready node's device plugin advertises"},
    )
    inline_review_bytes: int = INLINE_REVIEW_BYTES
    review_threads: int = field(
        default=REVIEW_THREADS,
        metadata={"help": "threads answering admission reviews over 64 KiB, off the event loop (0: on it)"},
    )
    max_large_reviews: int = field(
        default=MAX_LARGE_REVIEWS,
        metadata={"help": "admission reviews over 64 KiB in flight at once; more are refused with HTTP 429"},
    )

    @cached_property
    def routing(self) -> Routing:
        """The routing settings as the pod patches take them (core/paths/routing.py); raises
        ``LabelSelectorError`` for a managed-classes selector that does not parse."""
        managed = ManagedClasses(parse_label_selector(self.managed_classes))
        return Routing(self.route, self.scheduler_name, managed, self.unsupported_pods)
