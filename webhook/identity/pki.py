"""draxr's small PKI: the webhook's CA and serving certificates, issued, parsed and checked.

Both sides of the webhook's certificates use it: what an operator applies (``draxr certs``'
directory, install/certs.py; the Secrets ``draxr manifests`` renders) and what runs (the worker's
leader renewing the certificates in the cluster, runtime/rotation.py; the webhook loading its pair,
runtime/tls.py). So it sits in ``identity/``, below both rooms (tests/test_layers.py ``ALLOWED``:
neither install nor runtime imports the other; core, below all, has no clock, no randomness and no
files).

Keys are ECDSA P-256: every TLS stack involved (Go's crypto/tls in the apiserver, OpenSSL behind
Python's ``ssl``) supports it, it gives 128-bit security, handshakes are small, and generating a key
takes about a millisecond instead of tens of milliseconds for RSA.
"""

from __future__ import annotations

import datetime as dt
import ipaddress
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from cryptography import x509
from cryptography.exceptions import InvalidSignature, UnsupportedAlgorithm
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec, rsa
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

from ..core.api.names import is_dns1123_label, is_dns1123_subdomain, regex_error

#: The CA outlives the serving certificates it signs (kubeadm uses ten years for its CAs too).
CA_VALIDITY_DAYS = 3650
#: Self-managed certificates in the cluster (``draxr manifests``, ``draxr serve --rotate-certificates``):
#: a serving certificate lives 90 days and the running leader renews it 30 days before it expires
#: (cert-manager's defaults); the CA lives ten years.
DEFAULT_VALIDITY = dt.timedelta(days=90)
DEFAULT_RENEW_BEFORE = dt.timedelta(days=30)
DEFAULT_CA_VALIDITY = dt.timedelta(days=CA_VALIDITY_DAYS)
#: Where the CA and serving certificate go unless a flag says otherwise (``draxr certs --out``,
#: ``draxr manifests --cert-dir``, ``draxr serve --cert-dir``), and the files in it: the key names of
#: a ``kubernetes.io/tls`` Secret, so a mounted Secret is such a directory too.
DEFAULT_CERT_DIR = "certs"
CA_CERT = "ca.crt"
CA_KEY = "ca.key"
TLS_CERT = "tls.crt"
TLS_KEY = "tls.key"
#: ``notBefore`` is backdated so that a peer whose clock lags a little still accepts a fresh cert.
CLOCK_SKEW = dt.timedelta(minutes=5)

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
class ServingNames:
    """The subjectAltNames a serving certificate must carry."""

    dns: tuple[str, ...]
    ips: tuple[IPAddress, ...] = field(default=())

    def covered_by(self, cert: x509.Certificate) -> bool:
        have_dns, have_ips = sans(cert)
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


def check_now(now: dt.datetime | None) -> dt.datetime:
    if now is None:
        return dt.datetime.now(dt.UTC).replace(microsecond=0)
    if not isinstance(now, dt.datetime) or now.tzinfo is None or now.utcoffset() is None:
        raise CertError("now must be a timezone-aware datetime")
    return now.astimezone(dt.UTC).replace(microsecond=0)


# --- parsing and checks -----------------------------------------------------------------------------


def sans(cert: x509.Certificate) -> tuple[list[str], list[IPAddress]]:
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


def extension(cert: x509.Certificate, kind: type[x509.ExtensionType]) -> Any:
    try:
        return cert.extensions.get_extension_for_class(kind).value
    except x509.ExtensionNotFound:
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
    ski = extension(ca, x509.SubjectKeyIdentifier)
    if isinstance(ski, x509.SubjectKeyIdentifier):
        return x509.AuthorityKeyIdentifier.from_issuer_subject_key_identifier(ski)
    return x509.AuthorityKeyIdentifier.from_issuer_public_key(ca_key.public_key())


def _common_name(names: ServingNames) -> str:
    """``<service>.<namespace>.svc`` when it fits X.509's 64-character CN limit, else the service.

    Clients match SANs, not the CN (Go ignores it since 1.15); the CN only helps humans.
    """
    svc_name = names.dns[2]
    return svc_name if len(svc_name) <= 64 else names.dns[0]


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


# --- issued pairs, in memory: the directory writes them, the running leader renews them ------------


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
    cert, key = _issue_ca_for(check_now(now), _check_validity(validity, "CA validity"))
    return Issued(cert, key)


def issue_serving(
    ca: Issued, names: ServingNames, *, validity: dt.timedelta, now: dt.datetime | None = None
) -> Issued:
    """A serving certificate for ``names`` signed by ``ca``; it never outlives the CA."""
    problem = ca_problem(ca.cert)
    if problem:
        raise CertError(f"cannot sign with this CA: {problem}")
    cert, key = _issue_serving_for(
        ca.cert, ca.key, names, check_now(now), _check_validity(validity, "validity")
    )
    return Issued(cert, key)


def ca_problem(cert: x509.Certificate) -> str | None:
    """Why ``cert`` cannot sign serving certificates (not a CA, no keyCertSign, not self-signed)."""
    constraints = extension(cert, x509.BasicConstraints)
    usage = extension(cert, x509.KeyUsage)
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
    dns, ips = sans(cert)
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
    moment = check_now(now)
    unique = {fingerprint(c): c for c in certs if c.not_valid_after_utc > moment}
    return sorted(unique.values(), key=lambda c: (c.not_valid_before_utc, fingerprint(c)))


def pem_bundle(certs: Iterable[x509.Certificate]) -> bytes:
    return b"".join(_cert_pem(c) for c in certs)


def remaining(cert: x509.Certificate, now: dt.datetime | None = None) -> dt.timedelta:
    """Time left until ``notAfter`` (negative once expired)."""
    moment = now if now is not None else dt.datetime.now(dt.UTC)
    return cert.not_valid_after_utc - moment


def fingerprint(cert: x509.Certificate) -> str:
    return cert.fingerprint(hashes.SHA256()).hex(":").upper()
