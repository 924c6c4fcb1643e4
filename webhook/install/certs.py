"""Serving certificates for the admission webhook (``draxr certs``).

The kube-apiserver calls the webhook over HTTPS and verifies it against the ``caBundle`` of the
``MutatingWebhookConfiguration``. This module keeps a small private CA and a serving certificate for
``<service>.<namespace>.svc`` in a directory (``ca.crt``, ``ca.key``, ``tls.crt``, ``tls.key``, the
same key names as a ``kubernetes.io/tls`` Secret) and is idempotent: running it again keeps valid files
byte for byte, re-issues only the serving certificate while the CA stays usable (so the ``caBundle``
already in the cluster keeps working), and replaces everything only when the CA itself is unusable.

Keys are ECDSA P-256: every TLS stack involved (Go's crypto/tls in the apiserver, OpenSSL behind
Python's ``ssl``) supports it, it gives 128-bit security, handshakes are small, and generating a key
takes about a millisecond instead of tens of milliseconds for RSA.
"""

from __future__ import annotations

import base64
import contextlib
import datetime as dt
import ipaddress
import logging
import os
import tempfile
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from cryptography import x509
from cryptography.exceptions import InvalidSignature, UnsupportedAlgorithm
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec, rsa
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

from ..core.api.names import is_dns1123_label, is_dns1123_subdomain, regex_error
from ..core.api.objects import format_time

logger = logging.getLogger(__name__)

#: Where the CA and serving certificate go unless a flag says otherwise (``draxr certs --out``,
#: ``draxr manifests --cert-dir``, ``draxr serve --cert-dir``).
DEFAULT_CERT_DIR = "certs"
CA_CERT = "ca.crt"
CA_KEY = "ca.key"
TLS_CERT = "tls.crt"
TLS_KEY = "tls.key"

#: A certificate is renewed once it expires within this window (or within a third of its lifetime,
#: whichever is shorter, so that short-lived certificates are not re-issued on every run).
RENEW_BEFORE = dt.timedelta(days=30)
#: The CA outlives the serving certificates it signs (kubeadm uses ten years for its CAs too).
CA_VALIDITY_DAYS = 3650
#: Self-managed certificates in the cluster (``draxr manifests``, ``draxr serve --rotate-certificates``):
#: a serving certificate lives 90 days and the running leader renews it 30 days before it expires
#: (cert-manager's defaults); the CA lives ten years.
DEFAULT_VALIDITY = dt.timedelta(days=90)
DEFAULT_RENEW_BEFORE = dt.timedelta(days=30)
DEFAULT_CA_VALIDITY = dt.timedelta(days=CA_VALIDITY_DAYS)
MAX_DAYS = 3650
#: ``notBefore`` is backdated so that a peer whose clock lags a little still accepts a fresh cert.
CLOCK_SKEW = dt.timedelta(minutes=5)

KEY_MODE = 0o600
CERT_MODE = 0o644

IPAddress = ipaddress.IPv4Address | ipaddress.IPv6Address
PrivateKey = ec.EllipticCurvePrivateKey | rsa.RSAPrivateKey

_DNS1035_LABEL_FMT = "[a-z]([-a-z0-9]*[a-z0-9])?"
_DNS1035_LABEL_MSG = (
    "a DNS-1035 label must consist of lower case alphanumeric characters or '-', start with an "
    "alphabetic character, and end with an alphanumeric character"
)


class CertError(Exception):
    """Bad input or an unusable certificate file; the message is meant for the user."""


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


@dataclass(frozen=True)
class ServingNames:
    """The subjectAltNames a serving certificate must carry."""

    dns: tuple[str, ...]
    ips: tuple[IPAddress, ...] = field(default=())

    def covered_by(self, cert: x509.Certificate) -> bool:
        have_dns, have_ips = _sans(cert)
        dns_ok = {d.lower() for d in self.dns} <= {d.lower() for d in have_dns}
        return dns_ok and set(self.ips) <= set(have_ips)


# --- input validation -------------------------------------------------------------------------------


def _service_errors(service: str) -> list[str]:
    """Service names are DNS-1035 labels (apimachinery ``NameIsDNS1035Label``), stricter than 1123."""
    errs = is_dns1123_label(service)
    if not errs and not service[0].isalpha():
        errs.append(regex_error(_DNS1035_LABEL_MSG, _DNS1035_LABEL_FMT, "my-name", "abc-123"))
    return errs


def _check_dns_name(value: object, what: str) -> str:
    if not isinstance(value, str):
        raise CertError(f"{what} must be a string, got {type(value).__name__}")
    base = value[2:] if value.startswith("*.") else value
    errs = is_dns1123_subdomain(base)
    if errs:
        raise CertError(f"{what} {value!r} is not a valid DNS name: {'; '.join(errs)}")
    return value


def _check_ip(value: object) -> IPAddress:
    if isinstance(value, ipaddress.IPv4Address | ipaddress.IPv6Address):
        return value
    if not isinstance(value, str):
        raise CertError(f"extra IP must be a string, got {type(value).__name__}")
    try:
        return ipaddress.ip_address(value.strip())
    except ValueError:
        raise CertError(f"extra IP {value!r} is not a valid IPv4 or IPv6 address") from None


def _as_list(values: object, what: str) -> list[object]:
    if values is None:
        return []
    if isinstance(values, str | bytes) or not isinstance(values, Iterable):
        raise CertError(f"{what} must be a list, got {type(values).__name__}")
    return list(values)


def serving_names(
    service: str,
    namespace: str,
    *,
    extra_dns: Iterable[str] = (),
    extra_ips: Iterable[str | IPAddress] = (),
) -> ServingNames:
    """The names under which the apiserver (and local tools) reach the webhook Service.

    The apiserver dials ``<service>.<namespace>.svc``; the shorter and longer forms cover in-cluster
    clients with other search paths, and ``localhost``/loopback cover port-forwards and tests.
    """
    for value, what, errors in (
        (service, "service", _service_errors),
        (namespace, "namespace", is_dns1123_label),
    ):
        if not isinstance(value, str):
            raise CertError(f"{what} must be a string, got {type(value).__name__}")
        errs = errors(value)
        if errs:
            raise CertError(f"invalid {what} {value!r}: {'; '.join(errs)}")
    base = f"{service}.{namespace}"
    dns = [service, base, f"{base}.svc", f"{base}.svc.cluster.local", "localhost"]
    dns.extend(_check_dns_name(d, "extra DNS name") for d in _as_list(extra_dns, "extra_dns"))
    ips: list[IPAddress] = [ipaddress.ip_address("127.0.0.1"), ipaddress.ip_address("::1")]
    ips.extend(_check_ip(i) for i in _as_list(extra_ips, "extra_ips"))
    return ServingNames(dns=tuple(dict.fromkeys(dns)), ips=tuple(dict.fromkeys(ips)))


def _check_days(days: object) -> int:
    if not isinstance(days, int) or isinstance(days, bool):
        raise CertError(f"days must be an integer, got {type(days).__name__}")
    if not 1 <= days <= MAX_DAYS:
        raise CertError(f"days must be between 1 and {MAX_DAYS}, got {days}")
    return days


def _check_now(now: dt.datetime | None) -> dt.datetime:
    if now is None:
        return dt.datetime.now(dt.UTC).replace(microsecond=0)
    if not isinstance(now, dt.datetime) or now.tzinfo is None or now.utcoffset() is None:
        raise CertError("now must be a timezone-aware datetime")
    return now.astimezone(dt.UTC).replace(microsecond=0)


# --- parsing and checks -----------------------------------------------------------------------------


def _sans(cert: x509.Certificate) -> tuple[list[str], list[IPAddress]]:
    try:
        ext = cert.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
    except x509.ExtensionNotFound:
        return [], []
    ips = [ip for ip in ext.get_values_for_type(x509.IPAddress) if not isinstance(ip, ipaddress._BaseNetwork)]
    return list(ext.get_values_for_type(x509.DNSName)), ips


def _public_der(key: Any) -> bytes:
    der: bytes = key.public_bytes(serialization.Encoding.DER, serialization.PublicFormat.SubjectPublicKeyInfo)
    return der


def parse_key_pair(cert_pem: bytes, key_pem: bytes) -> tuple[list[x509.Certificate], PrivateKey]:
    """Parse a PEM chain (leaf first) and its unencrypted private key, and check they belong together.

    Raises ``CertError`` for anything a TLS server could not load: garbage, a truncated file, an
    encrypted or unsupported key, or a key that does not match the leaf certificate.
    """
    try:
        chain = x509.load_pem_x509_certificates(cert_pem)
    except ValueError as exc:
        raise CertError(f"no valid PEM certificate: {exc}") from None
    try:
        key = serialization.load_pem_private_key(key_pem, password=None)
    except (ValueError, TypeError) as exc:
        raise CertError(f"no valid unencrypted PEM private key: {exc}") from None
    except UnsupportedAlgorithm as exc:
        raise CertError(f"unsupported private key: {exc}") from None
    if not isinstance(key, ec.EllipticCurvePrivateKey | rsa.RSAPrivateKey):
        raise CertError(f"unsupported private key type {type(key).__name__} (want ECDSA or RSA)")
    if _public_der(chain[0].public_key()) != _public_der(key.public_key()):
        raise CertError("the private key does not match the certificate")
    return chain, key


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


def _ext_value(cert: x509.Certificate, kind: type[x509.ExtensionType]) -> Any:
    try:
        return cert.extensions.get_extension_for_class(kind).value
    except x509.ExtensionNotFound:
        return None


def _load_ca(paths: CertPaths, now: dt.datetime) -> tuple[x509.Certificate, PrivateKey] | str:
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
    return ca, key


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
    constraints = _ext_value(leaf, x509.BasicConstraints)
    eku = _ext_value(leaf, x509.ExtendedKeyUsage)
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


# --- issuing ----------------------------------------------------------------------------------------


def _new_key() -> ec.EllipticCurvePrivateKey:
    return ec.generate_private_key(ec.SECP256R1())


def _key_pem(key: PrivateKey) -> bytes:
    return key.private_bytes(
        serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
    )


def _cert_pem(cert: x509.Certificate) -> bytes:
    return cert.public_bytes(serialization.Encoding.PEM)


def _issue_ca(now: dt.datetime, days: int) -> tuple[x509.Certificate, ec.EllipticCurvePrivateKey]:
    return _issue_ca_for(now, dt.timedelta(days=max(CA_VALIDITY_DAYS, days)))


def _issue_ca_for(
    now: dt.datetime, validity: dt.timedelta
) -> tuple[x509.Certificate, ec.EllipticCurvePrivateKey]:
    key = _new_key()
    # A unique CN per CA (like kube's "<name>-ca@<unix time>") keeps issuer names of old and new CAs apart.
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, f"draxr-webhook-ca@{int(now.timestamp())}")])
    ski = x509.SubjectKeyIdentifier.from_public_key(key.public_key())
    cert = (
        x509.CertificateBuilder()
        .subject_name(name)
        .issuer_name(name)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - CLOCK_SKEW)
        .not_valid_after(now + validity)
        .add_extension(x509.BasicConstraints(ca=True, path_length=0), critical=True)
        .add_extension(
            x509.KeyUsage(
                digital_signature=False,
                content_commitment=False,
                key_encipherment=False,
                data_encipherment=False,
                key_agreement=False,
                key_cert_sign=True,
                crl_sign=True,
                encipher_only=False,
                decipher_only=False,
            ),
            critical=True,
        )
        .add_extension(ski, critical=False)
        .sign(key, hashes.SHA256())
    )
    return cert, key


def _authority_key_id(ca: x509.Certificate, ca_key: PrivateKey) -> x509.AuthorityKeyIdentifier:
    """Point at the CA's own subjectKeyIdentifier when it has one (it may use another derivation)."""
    ski = _ext_value(ca, x509.SubjectKeyIdentifier)
    if isinstance(ski, x509.SubjectKeyIdentifier):
        return x509.AuthorityKeyIdentifier.from_issuer_subject_key_identifier(ski)
    return x509.AuthorityKeyIdentifier.from_issuer_public_key(ca_key.public_key())


def _common_name(names: ServingNames) -> str:
    """``<service>.<namespace>.svc`` when it fits X.509's 64-character CN limit, else the service.

    Clients match SANs, not the CN (Go ignores it since 1.15); the CN only helps humans.
    """
    svc_name = names.dns[2]
    return svc_name if len(svc_name) <= 64 else names.dns[0]


def _issue_serving(
    ca: x509.Certificate, ca_key: PrivateKey, names: ServingNames, now: dt.datetime, days: int
) -> tuple[x509.Certificate, ec.EllipticCurvePrivateKey]:
    return _issue_serving_for(ca, ca_key, names, now, dt.timedelta(days=days))


def _issue_serving_for(
    ca: x509.Certificate, ca_key: PrivateKey, names: ServingNames, now: dt.datetime, validity: dt.timedelta
) -> tuple[x509.Certificate, ec.EllipticCurvePrivateKey]:
    key = _new_key()
    sans: list[x509.GeneralName] = [x509.DNSName(d) for d in names.dns]
    sans.extend(x509.IPAddress(ip) for ip in names.ips)
    # The leaf never outlives its CA: a chain is only as valid as its shortest-lived link.
    not_after = min(now + validity, ca.not_valid_after_utc)
    cert = (
        x509.CertificateBuilder()
        .subject_name(x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, _common_name(names))]))
        .issuer_name(ca.subject)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - CLOCK_SKEW)
        .not_valid_after(not_after)
        .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
        .add_extension(
            x509.KeyUsage(
                digital_signature=True,
                content_commitment=False,
                key_encipherment=True,
                data_encipherment=False,
                key_agreement=False,
                key_cert_sign=False,
                crl_sign=False,
                encipher_only=False,
                decipher_only=False,
            ),
            critical=True,
        )
        .add_extension(x509.ExtendedKeyUsage([ExtendedKeyUsageOID.SERVER_AUTH]), critical=False)
        .add_extension(x509.SubjectAlternativeName(sans), critical=False)
        .add_extension(_authority_key_id(ca, ca_key), critical=False)
        .add_extension(x509.SubjectKeyIdentifier.from_public_key(key.public_key()), critical=False)
        .sign(ca_key, hashes.SHA256())
    )
    return cert, key


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
    now = _check_now(now)
    directory = Path(out_dir)
    if directory.exists() and not directory.is_dir():
        raise CertError(f"{directory} is not a directory")
    try:
        directory.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise CertError(f"cannot create certificate directory {directory}: {exc.strerror or exc}") from None
    paths = CertPaths(directory)

    ca: x509.Certificate
    ca_key: PrivateKey
    loaded = _load_ca(paths, now)
    if isinstance(loaded, str):
        reason = loaded
        ca, ca_key = _issue_ca(now, days)
        files: list[tuple[Path, bytes, int]] = [
            (paths.ca_key, _key_pem(ca_key), KEY_MODE),
            (paths.ca_cert, _cert_pem(ca), CERT_MODE),
        ]
    else:
        ca, ca_key = loaded
        problem = _serving_problem(paths, ca, names, now)
        if problem is None:
            _tighten_key_mode(paths.ca_key)
            _tighten_key_mode(paths.tls_key)
            return paths
        reason, files = problem, []

    leaf, leaf_key = _issue_serving(ca, ca_key, names, now, days)
    # Key before certificate: a watcher that catches the moment in between sees a mismatched pair
    # and keeps serving the previous one (see webhook.tls).
    files += [(paths.tls_key, _key_pem(leaf_key), KEY_MODE), (paths.tls_cert, _cert_pem(leaf), CERT_MODE)]
    try:
        for path, data, mode in files:
            _atomic_write(path, data, mode)
    except OSError as exc:
        raise CertError(f"cannot write certificates to {directory}: {exc.strerror or exc}") from None
    _fsync_dir(directory)
    written = tuple(path for path, _, _ in files)
    logger.info("wrote %s in %s: %s", ", ".join(p.name for p in written), directory, reason)
    return CertPaths(directory, written=written, reason=reason)


# --- in memory: what the running leader renews in the cluster --------------------------------------


@dataclass(frozen=True)
class Issued:
    """A certificate and its private key, as kept in a Secret (PEM)."""

    cert: x509.Certificate
    key: PrivateKey

    @property
    def cert_pem(self) -> bytes:
        return _cert_pem(self.cert)

    @property
    def key_pem(self) -> bytes:
        return _key_pem(self.key)

    @classmethod
    def parse(cls, cert_pem: bytes, key_pem: bytes) -> Issued:
        """The pair in ``cert_pem``/``key_pem`` (first certificate); ``CertError`` when unusable."""
        chain, key = parse_key_pair(cert_pem, key_pem)
        return cls(chain[0], key)


def _check_validity(validity: object, what: str) -> dt.timedelta:
    if not isinstance(validity, dt.timedelta) or validity <= dt.timedelta(0):
        raise CertError(f"{what} must be a positive duration, got {validity!r}")
    return validity


def issue_ca(*, validity: dt.timedelta, now: dt.datetime | None = None) -> Issued:
    """A new self-signed CA (ECDSA P-256) valid for ``validity`` from ``now``."""
    cert, key = _issue_ca_for(_check_now(now), _check_validity(validity, "CA validity"))
    return Issued(cert, key)


def issue_serving(
    ca: Issued, names: ServingNames, *, validity: dt.timedelta, now: dt.datetime | None = None
) -> Issued:
    """A serving certificate for ``names`` signed by ``ca``; it never outlives the CA."""
    problem = ca_problem(ca.cert)
    if problem:
        raise CertError(f"cannot sign with this CA: {problem}")
    cert, key = _issue_serving_for(
        ca.cert, ca.key, names, _check_now(now), _check_validity(validity, "validity")
    )
    return Issued(cert, key)


def ca_problem(cert: x509.Certificate) -> str | None:
    """Why ``cert`` cannot sign serving certificates (not a CA, no keyCertSign, not self-signed)."""
    constraints = _ext_value(cert, x509.BasicConstraints)
    usage = _ext_value(cert, x509.KeyUsage)
    if constraints is None or not constraints.ca:
        return "not a CA certificate (basicConstraints CA:false)"
    if usage is not None and not usage.key_cert_sign:
        return "keyUsage lacks keyCertSign"
    try:
        cert.verify_directly_issued_by(cert)
    except (ValueError, TypeError, InvalidSignature):
        return "not self-signed"
    return None


def names_of(cert: x509.Certificate) -> ServingNames:
    """The subjectAltNames ``cert`` carries (a renewal keeps them)."""
    dns, ips = _sans(cert)
    return ServingNames(dns=tuple(dict.fromkeys(dns)), ips=tuple(dict.fromkeys(ips)))


def merge_names(*names: ServingNames) -> ServingNames:
    dns = [d for n in names for d in n.dns]
    ips = [ip for n in names for ip in n.ips]
    return ServingNames(dns=tuple(dict.fromkeys(dns)), ips=tuple(dict.fromkeys(ips)))


def signed_by(leaf: x509.Certificate, ca: x509.Certificate) -> bool:
    try:
        leaf.verify_directly_issued_by(ca)
    except (ValueError, TypeError, InvalidSignature):
        return False
    return True


def parse_bundle(data: bytes) -> list[x509.Certificate]:
    """Every certificate of a PEM bundle (a ``caBundle``, a Secret's ``ca.crt``); ``CertError`` if none."""
    try:
        return x509.load_pem_x509_certificates(data)
    except ValueError:
        raise CertError("no valid PEM certificate in the bundle") from None


def trust_bundle(certs: Iterable[x509.Certificate], now: dt.datetime | None = None) -> list[x509.Certificate]:
    """The CAs to trust: each once (by fingerprint), unexpired at ``now``, oldest first."""
    moment = _check_now(now)
    unique = {_fingerprint(c): c for c in certs if c.not_valid_after_utc > moment}
    return sorted(unique.values(), key=lambda c: (c.not_valid_before_utc, _fingerprint(c)))


def pem_bundle(certs: Iterable[x509.Certificate]) -> bytes:
    return b"".join(_cert_pem(c) for c in certs)


def remaining(cert: x509.Certificate, now: dt.datetime | None = None) -> dt.timedelta:
    """Time left until ``notAfter`` (negative once expired)."""
    moment = now if now is not None else dt.datetime.now(dt.UTC)
    return cert.not_valid_after_utc - moment


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
    pem = b"".join(_cert_pem(c) for c in _load_certs(file))
    return base64.b64encode(pem).decode("ascii")


def _fingerprint(cert: x509.Certificate) -> str:
    return cert.fingerprint(hashes.SHA256()).hex(":").upper()


def _summary(cert: x509.Certificate) -> dict[str, Any]:
    dns, ips = _sans(cert)
    return {
        "subject": cert.subject.rfc4514_string(),
        "issuer": cert.issuer.rfc4514_string(),
        "serial": format(cert.serial_number, "x"),
        "dns_names": dns,
        "ip_addresses": [str(ip) for ip in ips],
        "not_before": format_time(cert.not_valid_before_utc),
        "not_after": format_time(cert.not_valid_after_utc),
        "fingerprint_sha256": _fingerprint(cert),
    }


def describe(paths: CertPaths | str | os.PathLike[str]) -> dict[str, Any]:
    """A JSON-ready summary of the CA and serving certificates (for ``draxr certs`` output)."""
    resolved = _as_paths(paths)
    return {
        "directory": str(resolved.out_dir),
        "ca": _summary(_load_certs(resolved.ca_cert)[0]),
        "serving": _summary(_load_certs(resolved.tls_cert)[0]),
    }


__all__ = [
    "CA_CERT",
    "CA_KEY",
    "DEFAULT_CA_VALIDITY",
    "DEFAULT_RENEW_BEFORE",
    "DEFAULT_VALIDITY",
    "RENEW_BEFORE",
    "TLS_CERT",
    "TLS_KEY",
    "CertError",
    "CertPaths",
    "Issued",
    "ServingNames",
    "ca_problem",
    "describe",
    "ensure_certs",
    "issue_ca",
    "issue_serving",
    "load_ca_bundle",
    "merge_names",
    "names_of",
    "parse_bundle",
    "parse_key_pair",
    "pem_bundle",
    "remaining",
    "renew_threshold",
    "serving_names",
    "signed_by",
    "trust_bundle",
]
