"""Serving certificates for the admission webhook in a directory (``draxr certs``).

The kube-apiserver calls the webhook over HTTPS and verifies it against the ``caBundle`` of the
``MutatingWebhookConfiguration``. This module keeps a small private CA and a serving certificate for
``<service>.<namespace>.svc`` in a directory (``ca.crt``, ``ca.key``, ``tls.crt``, ``tls.key``, the
same key names as a ``kubernetes.io/tls`` Secret) and is idempotent: running it again keeps valid files
byte for byte, re-issues only the serving certificate while the CA stays usable (so the ``caBundle``
already in the cluster keeps working), and replaces everything only when the CA itself is unusable.
The certificates themselves (keys, issuing, checks) and the file names are identity/pki.py's.
"""

from __future__ import annotations

import base64
import contextlib
import datetime as dt
import logging
import os
import tempfile
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from cryptography import x509
from cryptography.exceptions import InvalidSignature
from cryptography.x509.oid import ExtendedKeyUsageOID

from ..core.api.objects import format_time
from ..identity.pki import (
    CA_CERT,
    CA_KEY,
    CA_VALIDITY_DAYS,
    TLS_CERT,
    TLS_KEY,
    CertError,
    IPAddress,
    Issued,
    ServingNames,
    ca_problem,
    check_now,
    extension,
    fingerprint,
    issue_ca,
    issue_serving,
    parse_key_pair,
    pem_bundle,
    sans,
    serving_names,
)

logger = logging.getLogger(__name__)

#: A certificate is renewed once it expires within this window (or within a third of its lifetime,
#: whichever is shorter, so that short-lived certificates are not re-issued on every run).
RENEW_BEFORE = dt.timedelta(days=30)
MAX_DAYS = 3650

KEY_MODE = 0o600
CERT_MODE = 0o644


@dataclass(frozen=True)
class CertPaths:
    """Where the four PEM files live, and which of them the last ``ensure_certs`` wrote."""

    out_dir: Path
    written: tuple[Path, ...] = ()
    reason: str = ""

    @property
    def ca_cert(self) -> Path:
        return self.out_dir / CA_CERT

    @property
    def ca_key(self) -> Path:
        return self.out_dir / CA_KEY

    @property
    def tls_cert(self) -> Path:
        return self.out_dir / TLS_CERT

    @property
    def tls_key(self) -> Path:
        return self.out_dir / TLS_KEY


def _check_days(days: object) -> int:
    if not isinstance(days, int) or isinstance(days, bool):
        raise CertError(f"days must be an integer, got {type(days).__name__}")
    if not 1 <= days <= MAX_DAYS:
        raise CertError(f"days must be between 1 and {MAX_DAYS}, got {days}")
    return days


def _read(path: Path) -> bytes | None:
    try:
        return path.read_bytes()
    except OSError:
        return None


def renew_threshold(cert: x509.Certificate) -> dt.timedelta:
    """How long before ``notAfter`` a certificate counts as expiring: 30 days, or a third of its life."""
    lifetime = cert.not_valid_after_utc - cert.not_valid_before_utc
    return min(RENEW_BEFORE, lifetime / 3)


def _time_problem(cert: x509.Certificate, now: dt.datetime) -> str | None:
    if now < cert.not_valid_before_utc:
        return f"is not valid before {format_time(cert.not_valid_before_utc)}"
    if now >= cert.not_valid_after_utc:
        return f"expired at {format_time(cert.not_valid_after_utc)}"
    if now + renew_threshold(cert) >= cert.not_valid_after_utc:
        return f"expires soon ({format_time(cert.not_valid_after_utc)})"
    return None


def _load_ca(paths: CertPaths, now: dt.datetime) -> Issued | str:
    """The CA pair if it can keep signing, else why not."""
    cert_pem, key_pem = _read(paths.ca_cert), _read(paths.ca_key)
    if cert_pem is None or key_pem is None:
        return "CA files missing"
    try:
        chain, key = parse_key_pair(cert_pem, key_pem)
    except CertError as exc:
        return f"CA unusable: {exc}"
    ca = chain[0]
    if len(chain) != 1:
        return f"CA unusable: {CA_CERT} holds {len(chain)} certificates, expected 1"
    unusable = ca_problem(ca)
    if unusable:
        return f"CA unusable: {unusable}"
    problem = _time_problem(ca, now)
    if problem:
        return f"CA {problem}"
    return Issued(ca, key)


def _serving_problem(
    paths: CertPaths, ca: x509.Certificate, names: ServingNames, now: dt.datetime
) -> str | None:
    """Why the serving pair must be re-issued, or None when it is fine as it is."""
    cert_pem, key_pem = _read(paths.tls_cert), _read(paths.tls_key)
    if cert_pem is None or key_pem is None:
        return "serving certificate files missing"
    try:
        leaf = parse_key_pair(cert_pem, key_pem)[0][0]
    except CertError as exc:
        return f"serving certificate unusable: {exc}"
    try:
        leaf.verify_directly_issued_by(ca)
    except (ValueError, TypeError, InvalidSignature):
        return "serving certificate is not signed by the CA"
    constraints = extension(leaf, x509.BasicConstraints)
    eku = extension(leaf, x509.ExtendedKeyUsage)
    if constraints is not None and constraints.ca:
        return "serving certificate is a CA certificate"
    if eku is not None and ExtendedKeyUsageOID.SERVER_AUTH not in eku:
        return "serving certificate lacks extendedKeyUsage serverAuth"
    problem = _time_problem(leaf, now)
    if problem:
        return f"serving certificate {problem}"
    if not names.covered_by(leaf):
        return "serving certificate does not cover the requested names"
    return None


# --- files ------------------------------------------------------------------------------------------


def _atomic_write(path: Path, data: bytes, mode: int) -> None:
    """Write via a temp file in the same directory and rename, so readers see old or new, never half."""
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "wb") as fh:
            os.fchmod(fh.fileno(), mode)
            fh.write(data)
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise


def _fsync_dir(directory: Path) -> None:
    with contextlib.suppress(OSError):
        fd = os.open(directory, os.O_RDONLY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)


def _tighten_key_mode(path: Path) -> None:
    """A kept key file readable by group or others is narrowed to 0600 (nothing is rewritten)."""
    with contextlib.suppress(OSError):
        if path.stat().st_mode & 0o077:
            os.chmod(path, KEY_MODE)


def ensure_certs(
    out_dir: str | os.PathLike[str],
    service: str,
    namespace: str,
    *,
    extra_dns: Iterable[str] = (),
    extra_ips: Iterable[str | IPAddress] = (),
    days: int = 365,
    now: dt.datetime | None = None,
) -> CertPaths:
    """Make ``out_dir`` hold a valid CA and serving pair for the webhook Service; write only what must change.

    Kept as is when every file parses, each key matches its certificate, the serving certificate is
    signed by the CA, neither expires within the renewal threshold (``renew_threshold``) and the
    serving certificate covers ``serving_names(...)``. Otherwise the serving pair is re-issued with a
    fresh key, under the existing CA when that CA is still usable, under a new CA when it is not.
    """
    names = serving_names(service, namespace, extra_dns=extra_dns, extra_ips=extra_ips)
    days = _check_days(days)
    now = check_now(now)
    directory = Path(out_dir)
    if directory.exists() and not directory.is_dir():
        raise CertError(f"{directory} is not a directory")
    try:
        directory.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise CertError(f"cannot create certificate directory {directory}: {exc.strerror or exc}") from None
    paths = CertPaths(directory)

    loaded = _load_ca(paths, now)
    if isinstance(loaded, str):
        reason = loaded
        # The CA outlives the serving certificates it signs.
        ca = issue_ca(validity=dt.timedelta(days=max(CA_VALIDITY_DAYS, days)), now=now)
        files: list[tuple[Path, bytes, int]] = [
            (paths.ca_key, ca.key_pem, KEY_MODE),
            (paths.ca_cert, ca.cert_pem, CERT_MODE),
        ]
    else:
        ca = loaded
        problem = _serving_problem(paths, ca.cert, names, now)
        if problem is None:
            _tighten_key_mode(paths.ca_key)
            _tighten_key_mode(paths.tls_key)
            return paths
        reason, files = problem, []

    leaf = issue_serving(ca, names, validity=dt.timedelta(days=days), now=now)
    # Key before certificate: a watcher that catches the moment in between sees a mismatched pair
    # and keeps serving the previous one (see webhook.tls).
    files += [(paths.tls_key, leaf.key_pem, KEY_MODE), (paths.tls_cert, leaf.cert_pem, CERT_MODE)]
    try:
        for path, data, mode in files:
            _atomic_write(path, data, mode)
    except OSError as exc:
        raise CertError(f"cannot write certificates to {directory}: {exc.strerror or exc}") from None
    _fsync_dir(directory)
    written = tuple(path for path, _, _ in files)
    logger.info("wrote %s in %s: %s", ", ".join(p.name for p in written), directory, reason)
    return CertPaths(directory, written=written, reason=reason)


# --- read side --------------------------------------------------------------------------------------


def _as_paths(paths: CertPaths | str | os.PathLike[str]) -> CertPaths:
    return paths if isinstance(paths, CertPaths) else CertPaths(Path(paths))


def _load_certs(path: Path) -> list[x509.Certificate]:
    try:
        data = path.read_bytes()
    except OSError as exc:
        raise CertError(f"cannot read {path}: {exc.strerror or exc}") from None
    try:
        return x509.load_pem_x509_certificates(data)
    except ValueError:
        raise CertError(f"{path} holds no valid PEM certificate") from None


def load_ca_bundle(path: str | os.PathLike[str]) -> str:
    """The base64 ``caBundle`` for webhook configurations, from ``ca.crt`` (or a directory holding it).

    The PEM is re-encoded from the parsed certificates, so stray text (or a private key pasted into
    the same file by mistake) never ends up in a cluster object.
    """
    file = Path(path)
    if file.is_dir():
        file = file / CA_CERT
    pem = pem_bundle(_load_certs(file))
    return base64.b64encode(pem).decode("ascii")


def _summary(cert: x509.Certificate) -> dict[str, Any]:
    dns, ips = sans(cert)
    return {
        "subject": cert.subject.rfc4514_string(),
        "issuer": cert.issuer.rfc4514_string(),
        "serial": format(cert.serial_number, "x"),
        "dns_names": dns,
        "ip_addresses": [str(ip) for ip in ips],
        "not_before": format_time(cert.not_valid_before_utc),
        "not_after": format_time(cert.not_valid_after_utc),
        "fingerprint_sha256": fingerprint(cert),
    }


def describe(paths: CertPaths | str | os.PathLike[str]) -> dict[str, Any]:
    """A JSON-ready summary of the CA and serving certificates (for ``draxr certs`` output)."""
    resolved = _as_paths(paths)
    return {
        "directory": str(resolved.out_dir),
        "ca": _summary(_load_certs(resolved.ca_cert)[0]),
        "serving": _summary(_load_certs(resolved.tls_cert)[0]),
    }
