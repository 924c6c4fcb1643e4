"""Certificates for the install tests, made in memory."""

from __future__ import annotations

import datetime as dt
import functools

from webhook.identity.pki import issue_ca, issue_serving, serving_names
from webhook.install.trust import Certificates


@functools.cache
def certificates(renewable: bool = True, namespace: str = "draxr-system") -> Certificates:
    """A CA and a serving certificate made in memory (no key ever lands in the repository)."""
    ca = issue_ca(validity=dt.timedelta(days=3650))
    leaf = issue_serving(ca, serving_names("draxr-webhook", namespace), validity=dt.timedelta(days=90))
    if renewable:
        return Certificates(ca.cert_pem, leaf.cert_pem, leaf.key_pem, ca.cert_pem, ca.key_pem)
    return Certificates(ca.cert_pem, leaf.cert_pem, leaf.key_pem)
