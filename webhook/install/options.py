"""What an operator may choose when installing draxr, checked before anything is rendered.

``InstallOptions`` is what ``draxr manifests``' flags and the Helm chart's values set; a choice
kube-apiserver would refuse (a failure policy, a timeout out of its range) is a ``ManifestError``
here, in words for the user, rather than a failed ``kubectl apply`` later.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from ..core.api.objects import Obj
from ..identity.names import DEFAULT_NAMESPACE, OPT_OUT_LABEL
from .flowcontrol import DEFAULT_SHARES, MAX_SHARES, MIN_SHARES

DEFAULT_IMAGE = "ghcr.io/draxr/draxr:0.1.0"
FAILURE_POLICIES = ("Fail", "Ignore")
ROUTES = ("default-only", "always", "never")
#: kube-apiserver accepts a webhook timeoutSeconds between 1 and 30.
MIN_TIMEOUT_SECONDS, MAX_TIMEOUT_SECONDS = 1, 30


class ManifestError(ValueError):
    """What was asked cannot be rendered safely; the message is for the user."""


def _default_resources() -> Obj:
    return {"requests": {"cpu": "100m", "memory": "128Mi"}, "limits": {"cpu": "1", "memory": "512Mi"}}


@dataclass(frozen=True)
class InstallOptions:
    """What an operator may choose (``draxr manifests`` flags, the Helm chart's values)."""

    namespace: str = DEFAULT_NAMESPACE
    image: str = DEFAULT_IMAGE
    image_pull_policy: str = "IfNotPresent"
    webhook_replicas: int = 2
    worker_replicas: int = 2
    webhook_resources: Obj = field(default_factory=_default_resources)
    worker_resources: Obj = field(default_factory=_default_resources)
    priority_class_name: str = ""
    tolerations: Sequence[Obj] = ()
    node_selector: Mapping[str, str] = field(default_factory=dict)
    failure_policy: str = "Fail"
    timeout_seconds: int = 3
    #: ``draxr serve --route`` of the webhook.
    route: str = "default-only"
    #: Namespaces the hooks never see, besides kube-system and draxr's own.
    opt_out_namespaces: Sequence[str] = ()
    #: Namespaces labelled ``<label>=true`` are never sent to the hooks; "" turns that off.
    opt_out_label: str = OPT_OUT_LABEL
    #: Call the hooks at this URL (``https://host:port``, the hook's path appended) instead of the
    #: Service, where kube-apiserver cannot reach Services (envtest, no kube-proxy).
    webhook_url: str | None = None
    #: NetworkPolicies: only the served ports of draxr's pods accept connections.
    network_policy: bool = False
    #: ``draxr serve --cert-validity`` / ``--cert-renew-before`` of the leader that renews certificates
    #: (None: serve's defaults).
    cert_validity: str | None = None
    cert_renew_before: str | None = None
    #: draxr's own FlowSchema and priority level (flowcontrol.py), with this many nominal
    #: concurrency shares; off: its requests fall into the catch-all ``service-accounts`` schema.
    flow_control: bool = True
    flow_control_shares: int = DEFAULT_SHARES

    def __post_init__(self) -> None:
        if self.failure_policy not in FAILURE_POLICIES:
            raise ManifestError(f"failurePolicy must be one of {', '.join(FAILURE_POLICIES)}")
        if not MIN_TIMEOUT_SECONDS <= self.timeout_seconds <= MAX_TIMEOUT_SECONDS:
            raise ManifestError(
                f"timeoutSeconds must be between {MIN_TIMEOUT_SECONDS} and {MAX_TIMEOUT_SECONDS}"
            )
        if self.route not in ROUTES:
            raise ManifestError(f"route must be one of {', '.join(ROUTES)}")
        if self.webhook_replicas < 1 or self.worker_replicas < 1:
            raise ManifestError("replicas must be at least 1")
        if not MIN_SHARES <= self.flow_control_shares <= MAX_SHARES:
            raise ManifestError(
                f"flow control shares must be between {MIN_SHARES} and {MAX_SHARES}, "
                f"not {self.flow_control_shares}"
            )
