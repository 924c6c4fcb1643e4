"""Everything an operator applies to install draxr, in order (what ``draxr manifests`` renders).

The namespace, RBAC (rbac.py), API Priority and Fairness (flowcontrol.py), the Deployments and
Service (workloads.py), the certificates or cert-manager's objects (trust.py: exactly one of them,
or nothing is rendered) and the webhook configurations (webhooks.py). ``manifests/`` holds the
cert-manager rendering with the defaults (files.py; no key in the repository); a test keeps it equal
to this code, and the Helm chart under ``manifests/helm/draxr`` equal to it.
"""

from __future__ import annotations

from ..core.api.objects import Obj
from ..identity.names import metadata
from .flowcontrol import flow_control
from .options import InstallOptions, ManifestError
from .rbac import certificate_rbac, rbac
from .trust import Certificates, b64, cert_manager_objects, certificate_secrets
from .webhooks import configurations
from .workloads import network_policies, workloads


def render(
    options: InstallOptions | None = None,
    *,
    certificates: Certificates | None = None,
    cert_manager: bool = False,
) -> list[Obj]:
    """Every object to apply, in order. Exactly one of ``certificates`` and ``cert_manager``
    (``ManifestError`` otherwise: nothing is rendered that kube-apiserver could not call)."""
    opts = options if options is not None else InstallOptions()
    if cert_manager and certificates is not None:
        raise ManifestError(
            "cert-manager injects the CA bundle itself: give certificates or cert_manager, not both"
        )
    if not cert_manager and certificates is None:
        raise ManifestError("no certificates and no cert-manager: the webhook could not be trusted")
    rotate = certificates is not None and certificates.renewable
    ns = {"apiVersion": "v1", "kind": "Namespace", "metadata": metadata(opts.namespace, None, "namespace")}
    objects = [ns, *rbac(opts.namespace)]
    if rotate:
        objects += certificate_rbac(opts.namespace)
    if opts.flow_control:
        objects += flow_control(opts.namespace, opts.flow_control_shares)
    objects += workloads(opts, rotate_certificates=rotate)
    if opts.network_policy:
        objects += network_policies(opts.namespace)
    if certificates is not None:
        objects += certificate_secrets(opts.namespace, certificates)
        objects += configurations(opts, b64(certificates.ca_bundle), False)
    else:
        objects += cert_manager_objects(opts.namespace)
        objects += configurations(opts, None, True)
    return objects
