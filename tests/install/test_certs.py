"""``webhook.install.certs``: the webhook CA and serving certificate in a directory, idempotent and
renewing."""

from __future__ import annotations

import base64
import datetime as dt
import ipaddress
import os
import shutil
import stat
import tempfile
from pathlib import Path

import pytest
from cryptography import x509
from cryptography.hazmat.primitives import hashes
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import ExtendedKeyUsageOID
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from webhook.identity.pki import CA_CERT, CA_KEY, TLS_CERT, TLS_KEY, CertError, parse_key_pair
from webhook.install.certs import (
    CertPaths,
    describe,
    ensure_certs,
    load_ca_bundle,
    renew_threshold,
)

SVC, NS = "draxr-webhook", "draxr-system"
T0 = dt.datetime(2030, 1, 1, 12, 0, 0, tzinfo=dt.UTC)
ALL = (CA_KEY, CA_CERT, TLS_KEY, TLS_CERT)


def _cert(path: Path) -> x509.Certificate:
    return x509.load_pem_x509_certificate(path.read_bytes())


def _snapshot(d: Path) -> dict[str, tuple[bytes, int]]:
    return {n: ((d / n).read_bytes(), (d / n).stat().st_ino) for n in ALL}


def _names(paths: CertPaths) -> tuple[str, ...]:
    return tuple(p.name for p in paths.written)


def _ext(cert: x509.Certificate, kind: type[x509.ExtensionType]) -> x509.Extension[x509.ExtensionType]:
    return cert.extensions.get_extension_for_class(kind)


@pytest.fixture
def issued(tmp_path: Path) -> Path:
    out = tmp_path / "certs"
    ensure_certs(out, SVC, NS, now=T0)
    return out


# --- first run, layout, extensions -----------------------------------------------------------------


def test_first_run_writes_all_four_files_with_key_modes(tmp_path: Path) -> None:
    out = tmp_path / "nested" / "certs"
    paths = ensure_certs(out, SVC, NS, now=T0)
    assert _names(paths) == ALL
    assert paths.reason == "CA files missing"
    for name in (CA_KEY, TLS_KEY):
        assert stat.S_IMODE((out / name).stat().st_mode) == 0o600
    for name in (CA_CERT, TLS_CERT):
        assert stat.S_IMODE((out / name).stat().st_mode) == 0o644
    assert sorted(p.name for p in out.iterdir()) == sorted(ALL), "no temp files are left behind"
    assert (paths.ca_cert, paths.tls_key) == (out / CA_CERT, out / TLS_KEY)


def test_ca_is_a_self_signed_p256_ca(issued: Path) -> None:
    ca = _cert(issued / CA_CERT)
    ca.verify_directly_issued_by(ca)
    bc = _ext(ca, x509.BasicConstraints)
    assert bc.critical
    assert isinstance(bc.value, x509.BasicConstraints)
    assert bc.value.ca
    ku = _ext(ca, x509.KeyUsage)
    assert isinstance(ku.value, x509.KeyUsage)
    assert ku.critical
    assert ku.value.key_cert_sign
    assert ku.value.crl_sign
    assert not ku.value.digital_signature
    ski = _ext(ca, x509.SubjectKeyIdentifier).value
    assert ski == x509.SubjectKeyIdentifier.from_public_key(ca.public_key())
    key = ca.public_key()
    assert isinstance(key, ec.EllipticCurvePublicKey)
    assert key.curve.name == "secp256r1"
    assert ca.not_valid_after_utc - T0 == dt.timedelta(days=3650)


def test_serving_certificate_extensions_and_chain(issued: Path) -> None:
    ca, leaf = _cert(issued / CA_CERT), _cert(issued / TLS_CERT)
    leaf.verify_directly_issued_by(ca)
    bc = _ext(leaf, x509.BasicConstraints)
    assert isinstance(bc.value, x509.BasicConstraints)
    assert not bc.value.ca
    ku = _ext(leaf, x509.KeyUsage).value
    assert isinstance(ku, x509.KeyUsage)
    assert ku.digital_signature
    assert ku.key_encipherment
    assert not ku.key_cert_sign
    eku = _ext(leaf, x509.ExtendedKeyUsage).value
    assert isinstance(eku, x509.ExtendedKeyUsage)
    assert list(eku) == [ExtendedKeyUsageOID.SERVER_AUTH]
    aki = _ext(leaf, x509.AuthorityKeyIdentifier).value
    ski = _ext(ca, x509.SubjectKeyIdentifier).value
    assert isinstance(aki, x509.AuthorityKeyIdentifier)
    assert isinstance(ski, x509.SubjectKeyIdentifier)
    assert aki.key_identifier == ski.digest
    assert leaf.not_valid_before_utc == T0 - dt.timedelta(minutes=5), "backdated for clock skew"
    assert leaf.not_valid_after_utc == T0 + dt.timedelta(days=365)
    assert leaf.subject.rfc4514_string() == f"CN={SVC}.{NS}.svc"


def test_sans_cover_service_forms_loopback_and_extras(tmp_path: Path) -> None:
    ensure_certs(tmp_path, SVC, NS, extra_dns=["webhook.example.com", "*.draxr.test"], extra_ips=["10.0.0.7"])
    san = _ext(_cert(tmp_path / TLS_CERT), x509.SubjectAlternativeName).value
    assert isinstance(san, x509.SubjectAlternativeName)
    assert san.get_values_for_type(x509.DNSName) == [
        SVC,
        f"{SVC}.{NS}",
        f"{SVC}.{NS}.svc",
        f"{SVC}.{NS}.svc.cluster.local",
        "localhost",
        "webhook.example.com",
        "*.draxr.test",
    ]
    assert san.get_values_for_type(x509.IPAddress) == [
        ipaddress.ip_address("127.0.0.1"),
        ipaddress.ip_address("::1"),
        ipaddress.ip_address("10.0.0.7"),
    ]


def test_longest_names_still_issue(tmp_path: Path) -> None:
    """A 63+63 name exceeds the 64-character CN limit: the CN falls back, the SANs stay complete."""
    svc, ns = "s" * 63, "n" * 63
    ensure_certs(tmp_path, svc, ns)
    leaf = _cert(tmp_path / TLS_CERT)
    assert leaf.subject.rfc4514_string() == f"CN={svc}"
    assert f"{svc}.{ns}.svc.cluster.local" in describe(tmp_path)["serving"]["dns_names"]


# --- idempotency and renewal -----------------------------------------------------------------------


def test_second_run_writes_nothing_and_keeps_bytes(issued: Path) -> None:
    before = _snapshot(issued)
    paths = ensure_certs(issued, SVC, NS, now=T0 + dt.timedelta(days=1))
    assert paths.written == ()
    assert paths.reason == ""
    assert _snapshot(issued) == before, "same bytes, same inodes: nothing was rewritten"


@pytest.mark.parametrize(
    ("age_days", "renewed"),
    [(334, False), (335, True), (364, True), (400, True)],
)
def test_serving_cert_renewed_inside_30_days_with_ca_kept(issued: Path, age_days: int, renewed: bool) -> None:
    """365-day certificate, 30-day threshold: kept up to day 334, re-issued from day 335 on."""
    before = _snapshot(issued)
    old_leaf = _cert(issued / TLS_CERT)
    now = T0 + dt.timedelta(days=age_days)
    paths = ensure_certs(issued, SVC, NS, now=now)
    if not renewed:
        assert paths.written == ()
        assert _snapshot(issued) == before
        return
    assert _names(paths) == (TLS_KEY, TLS_CERT)
    assert "serving certificate" in paths.reason
    after = _snapshot(issued)
    assert after[CA_CERT] == before[CA_CERT]
    assert after[CA_KEY] == before[CA_KEY]
    assert after[TLS_KEY][0] != before[TLS_KEY][0], "a fresh key, not just a new certificate"
    leaf = _cert(issued / TLS_CERT)
    assert leaf.serial_number != old_leaf.serial_number
    leaf.verify_directly_issued_by(_cert(issued / CA_CERT))
    assert leaf.not_valid_after_utc == now + dt.timedelta(days=365)
    assert ensure_certs(issued, SVC, NS, now=now).written == ()


def test_expiring_ca_regenerates_everything(issued: Path) -> None:
    before = _snapshot(issued)
    paths = ensure_certs(issued, SVC, NS, now=T0 + dt.timedelta(days=3650 - 29))
    assert _names(paths) == ALL
    assert paths.reason.startswith("CA expires soon")
    after = _snapshot(issued)
    assert all(after[n][0] != before[n][0] for n in ALL)


def test_leaf_never_outlives_the_ca(issued: Path) -> None:
    now = T0 + dt.timedelta(days=3650 - 100)
    paths = ensure_certs(issued, SVC, NS, now=now)
    assert _names(paths) == (TLS_KEY, TLS_CERT)
    ca, leaf = _cert(issued / CA_CERT), _cert(issued / TLS_CERT)
    assert leaf.not_valid_after_utc == ca.not_valid_after_utc


def test_new_names_reissue_only_the_serving_cert(issued: Path) -> None:
    before = _snapshot(issued)
    paths = ensure_certs(issued, SVC, NS, extra_ips=["192.0.2.1"], now=T0)
    assert _names(paths) == (TLS_KEY, TLS_CERT)
    assert paths.reason == "serving certificate does not cover the requested names"
    assert _snapshot(issued)[CA_CERT] == before[CA_CERT]
    # Asking for fewer names than the certificate has is still covered.
    assert ensure_certs(issued, SVC, NS, now=T0).written == ()


def test_short_lived_certificates_are_not_reissued_every_run(tmp_path: Path) -> None:
    ensure_certs(tmp_path, SVC, NS, days=3, now=T0)
    leaf = _cert(tmp_path / TLS_CERT)
    assert renew_threshold(leaf) == (leaf.not_valid_after_utc - leaf.not_valid_before_utc) / 3
    assert ensure_certs(tmp_path, SVC, NS, days=3, now=T0 + dt.timedelta(days=1)).written == ()
    assert ensure_certs(tmp_path, SVC, NS, days=3, now=T0 + dt.timedelta(days=2)).written != ()


def test_not_yet_valid_serving_cert_is_reissued(issued: Path) -> None:
    """A clock that went backwards must not leave a certificate clients reject as not yet valid."""
    paths = ensure_certs(issued, SVC, NS, now=T0 - dt.timedelta(hours=1))
    assert _names(paths) == ALL, "the CA is not valid yet either"


def test_any_timezone_is_accepted(tmp_path: Path) -> None:
    tz = dt.timezone(dt.timedelta(hours=-7))
    ensure_certs(tmp_path, SVC, NS, now=T0.astimezone(tz))
    assert _cert(tmp_path / TLS_CERT).not_valid_after_utc == T0 + dt.timedelta(days=365)


def test_loose_key_mode_is_tightened_without_rewriting(issued: Path) -> None:
    os.chmod(issued / TLS_KEY, 0o644)
    before = _snapshot(issued)
    assert ensure_certs(issued, SVC, NS, now=T0).written == ()
    assert stat.S_IMODE((issued / TLS_KEY).stat().st_mode) == 0o600
    assert _snapshot(issued) == before


# --- damaged directories ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("damage", "expected", "reason"),
    [
        ({TLS_CERT: b"garbage"}, (TLS_KEY, TLS_CERT), "serving certificate unusable"),
        ({TLS_KEY: None}, (TLS_KEY, TLS_CERT), "serving certificate files missing"),
        ({TLS_KEY: CA_KEY}, (TLS_KEY, TLS_CERT), "does not match"),
        ({TLS_CERT: CA_CERT, TLS_KEY: CA_KEY}, (TLS_KEY, TLS_CERT), "serving certificate is a CA"),
        ({CA_KEY: b""}, ALL, "CA unusable"),
        ({CA_CERT: TLS_CERT}, ALL, "CA unusable"),
        ({CA_CERT: None}, ALL, "CA files missing"),
    ],
)
def test_damaged_files_are_replaced(
    issued: Path, damage: dict[str, bytes | str | None], expected: tuple[str, ...], reason: str
) -> None:
    for name, content in damage.items():
        target = issued / name
        if content is None:
            target.unlink()
        elif isinstance(content, str):
            target.write_bytes((issued / content).read_bytes())
        else:
            target.write_bytes(content)
    paths = ensure_certs(issued, SVC, NS, now=T0)
    assert _names(paths) == expected
    assert reason in paths.reason
    assert ensure_certs(issued, SVC, NS, now=T0).written == ()


def test_serving_cert_of_another_ca_is_reissued(tmp_path: Path, issued: Path) -> None:
    other = tmp_path / "other"
    ensure_certs(other, SVC, NS, now=T0)
    for name in (TLS_CERT, TLS_KEY):
        shutil.copy(other / name, issued / name)
    paths = ensure_certs(issued, SVC, NS, now=T0)
    assert paths.reason == "serving certificate is not signed by the CA"
    _cert(issued / TLS_CERT).verify_directly_issued_by(_cert(issued / CA_CERT))


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(name=st.sampled_from(ALL), junk=st.binary(max_size=600), keep=st.integers(0, 700))
def test_fuzzed_file_contents_end_in_a_valid_directory(
    issued: Path, name: str, junk: bytes, keep: int
) -> None:
    """Garbage, or a valid file cut short at any byte, never escapes as an exception."""
    original = (issued / name).read_bytes()
    with tempfile.TemporaryDirectory() as scratch:
        work = Path(scratch)
        for n in ALL:
            shutil.copy(issued / n, work / n)
        (work / name).write_bytes(original[:keep] + junk)
        ensure_certs(work, SVC, NS, now=T0)
        assert ensure_certs(work, SVC, NS, now=T0).written == ()
        parse_key_pair((work / TLS_CERT).read_bytes(), (work / TLS_KEY).read_bytes())


# --- input validation ------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"service": "Webhook"}, "invalid service 'Webhook': a lowercase RFC 1123 label"),
        ({"service": "1webhook"}, "a DNS-1035 label must consist of"),
        ({"service": "web.hook"}, "must not contain dots"),
        ({"service": ""}, "invalid service ''"),
        ({"service": "w" * 64}, "must be no more than 63 bytes"),
        ({"namespace": "kube_system"}, "invalid namespace 'kube_system'"),
        ({"service": 7}, "service must be a string, got int"),
        ({"extra_dns": ["Bad_Host"]}, "extra DNS name 'Bad_Host' is not a valid DNS name"),
        ({"extra_dns": "example.com"}, "extra_dns must be a list, got str"),
        ({"extra_ips": 5}, "extra_ips must be a list, got int"),
        ({"extra_dns": [None]}, "extra DNS name must be a string, got NoneType"),
        ({"extra_ips": ["10.0.0.300"]}, "extra IP '10.0.0.300' is not a valid IPv4 or IPv6 address"),
        ({"extra_ips": [10]}, "extra IP must be a string, got int"),
        ({"days": 0}, "days must be between 1 and 3650, got 0"),
        ({"days": 3651}, "days must be between 1 and 3650"),
        ({"days": True}, "days must be an integer, got bool"),
        ({"days": "30"}, "days must be an integer, got str"),
        ({"now": dt.datetime(2030, 1, 1)}, "now must be a timezone-aware datetime"),
    ],
)
def test_bad_input_raises_cert_error(tmp_path: Path, kwargs: dict[str, object], message: str) -> None:
    args: dict[str, object] = {"service": SVC, "namespace": NS, **kwargs}
    with pytest.raises(CertError) as info:
        ensure_certs(tmp_path / "out", **args)  # type: ignore[arg-type]
    assert message in str(info.value)
    assert not (tmp_path / "out").exists(), "validation happens before anything touches the disk"


def test_out_dir_that_is_a_file_is_a_cert_error(tmp_path: Path) -> None:
    blocker = tmp_path / "file"
    blocker.write_text("x")
    with pytest.raises(CertError, match="cannot create certificate directory"):
        ensure_certs(blocker / "certs", SVC, NS)
    with pytest.raises(CertError, match="is not a directory"):
        ensure_certs(blocker, SVC, NS)


# --- caBundle and describe -------------------------------------------------------------------------


def test_ca_bundle_is_base64_of_the_ca_pem(issued: Path) -> None:
    bundle = load_ca_bundle(issued / CA_CERT)
    assert base64.b64decode(bundle) == (issued / CA_CERT).read_bytes()
    assert load_ca_bundle(issued) == bundle, "a directory means its ca.crt"


def test_ca_bundle_never_carries_a_private_key(issued: Path, tmp_path: Path) -> None:
    mixed = tmp_path / "mixed.pem"
    mixed.write_bytes(b"comment\n" + (issued / CA_KEY).read_bytes() + (issued / CA_CERT).read_bytes())
    decoded = base64.b64decode(load_ca_bundle(mixed))
    assert b"PRIVATE KEY" not in decoded
    assert decoded == (issued / CA_CERT).read_bytes()


@pytest.mark.parametrize(
    ("content", "message"), [(None, "cannot read"), (b"nope", "no valid PEM certificate")]
)
def test_ca_bundle_errors(tmp_path: Path, content: bytes | None, message: str) -> None:
    path = tmp_path / "ca.crt"
    if content is not None:
        path.write_bytes(content)
    with pytest.raises(CertError, match=message):
        load_ca_bundle(path)


def test_describe_reports_subjects_sans_expiry_and_fingerprints(issued: Path) -> None:
    info = describe(CertPaths(issued))
    leaf = _cert(issued / TLS_CERT)
    serving = info["serving"]
    assert serving["subject"] == f"CN={SVC}.{NS}.svc"
    assert serving["issuer"] == info["ca"]["subject"]
    assert serving["dns_names"][2] == f"{SVC}.{NS}.svc"
    assert serving["ip_addresses"] == ["127.0.0.1", "::1"]
    assert serving["not_after"] == "2031-01-01T12:00:00Z"
    assert serving["serial"] == format(leaf.serial_number, "x")
    assert serving["fingerprint_sha256"].replace(":", "").lower() == leaf.fingerprint(hashes.SHA256()).hex()
    assert describe(issued) == info


def test_describe_of_an_empty_directory_is_a_cert_error(tmp_path: Path) -> None:
    with pytest.raises(CertError, match="cannot read"):
        describe(tmp_path)
