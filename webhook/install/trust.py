"""How kube-apiserver comes to trust the webhook: draxr's own certificates, or cert-manager's.

A webhook is never rendered without a way for kube-apiserver to trust it, and a Secret is never
rendered empty (applying it would wipe a good one). Either:

* ``Certificates``: the CA bundle goes into every hook's ``caBundle`` and the serving pair into the
  Secret ``draxr-webhook-tls``. With the CA's key too (``draxr manifests`` makes the CA itself by
  default), the CA goes into the Secret ``draxr-webhook-ca`` and the worker's leader renews the
  serving certificate and the CA in the cluster (``--rotate-certificates``, runtime/rotation.py);
* cert-manager: a self-signed Issuer and a Certificate, and cert-manager's CA injection
  (``cert-manager.io/inject-ca-from``) fills ``caBundle``; no Secret is rendered at all.
"""

from __future__ import annotations

import base64
from dataclasses import dataclass
from pathlib import Path

from ..core.api.objects import Obj
from ..identity.names import CA_SECRET, TLS_SECRET, WEBHOOK, metadata
from .options import ManifestError


@dataclass(frozen=True)
class Certificates:
    """The webhook's TLS material (PEM), rendered into Secrets and ``caBundle``.

    ``ca_bundle``: the CAs kube-apiserver trusts (every hook's ``caBundle``, the TLS Secret's
    ``ca.crt``); ``tls_crt``/``tls_key``: the serving pair; ``ca_crt``/``ca_key``: the CA that signs
    it, when draxr is to renew it in the cluster (else None: the certificates are the operator's).
    """

    ca_bundle: bytes
    tls_crt: bytes
    tls_key: bytes
    ca_crt: bytes | None = None
    ca_key: bytes | None = None

    def __post_init__(self) -> None:
        for what, value in (
            ("CA bundle", self.ca_bundle),
            ("tls.crt", self.tls_crt),
            ("tls.key", self.tls_key),
        ):
            if not value.strip():
                raise ManifestError(f"{what} is empty: a webhook nobody can trust would refuse every call")
        if (self.ca_crt is None) != (self.ca_key is None):
            raise ManifestError("the CA certificate and its key go together")

    @property
    def renewable(self) -> bool:
        """draxr holds the CA, so its leader can renew the serving certificate in the cluster."""
        return self.ca_key is not None

    @classmethod
    def from_dir(cls, directory: Path, ca_bundle: bytes) -> Certificates:
        """``tls.crt``/``tls.key`` of ``directory`` (``OSError`` when missing), with its ``ca.crt`` and
        ``ca.key`` when it holds the key (``draxr certs`` output)."""
        tls_crt = (directory / "tls.crt").read_bytes()
        tls_key = (directory / "tls.key").read_bytes()
        ca_key_file = directory / "ca.key"
        if ca_key_file.is_file():
            return cls(
                ca_bundle, tls_crt, tls_key, (directory / "ca.crt").read_bytes(), ca_key_file.read_bytes()
            )
        return cls(ca_bundle, tls_crt, tls_key)


def b64(data: bytes) -> str:
    return base64.b64encode(data).decode("ascii")


def certificate_secrets(namespace: str, certs: Certificates) -> list[Obj]:
    """The serving pair (``draxr-webhook-tls``, mounted by the webhook) and, when draxr holds it, the
    CA (``draxr-webhook-ca``, read by the worker's leader to renew). Never empty."""
    out: list[Obj] = []
    if certs.ca_crt is not None and certs.ca_key is not None:
        out.append(
            {
                "apiVersion": "v1",
                "kind": "Secret",
                "metadata": metadata(CA_SECRET, namespace, "webhook"),
                "type": "kubernetes.io/tls",
                "data": {"tls.crt": b64(certs.ca_crt), "tls.key": b64(certs.ca_key)},
            }
        )
    out.append(
        {
            "apiVersion": "v1",
            "kind": "Secret",
            "metadata": metadata(TLS_SECRET, namespace, "webhook"),
            "type": "kubernetes.io/tls",
            "data": {
                "ca.crt": b64(certs.ca_bundle),
                "tls.crt": b64(certs.tls_crt),
                "tls.key": b64(certs.tls_key),
            },
        }
    )
    return out


def cert_manager_objects(namespace: str) -> list[Obj]:
    return [
        {
            "apiVersion": "cert-manager.io/v1",
            "kind": "Issuer",
            "metadata": metadata("draxr-selfsigned", namespace, "webhook"),
            "spec": {"selfSigned": {}},
        },
        {
            "apiVersion": "cert-manager.io/v1",
            "kind": "Certificate",
            "metadata": metadata(WEBHOOK, namespace, "webhook"),
            "spec": {
                "secretName": TLS_SECRET,
                "issuerRef": {"name": "draxr-selfsigned", "kind": "Issuer"},
                "dnsNames": [f"{WEBHOOK}.{namespace}.svc", f"{WEBHOOK}.{namespace}.svc.cluster.local"],
            },
        },
    ]
