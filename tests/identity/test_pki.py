"""``webhook.identity.pki``: the names a serving certificate must carry, from any service and namespace
(the CA and serving certificates it issues are checked through ``draxr certs``' directory, test_certs.py)."""

from __future__ import annotations

import ipaddress

from hypothesis import given
from hypothesis import strategies as st

from webhook.identity.pki import CertError, serving_names

_LABEL = st.from_regex(r"[a-z]([-a-z0-9]{0,20}[a-z0-9])?", fullmatch=True)


@given(service=_LABEL, namespace=_LABEL, ip=st.ip_addresses())
def test_valid_labels_give_the_four_service_forms(
    service: str, namespace: str, ip: ipaddress.IPv4Address | ipaddress.IPv6Address
) -> None:
    names = serving_names(service, namespace, extra_ips=[str(ip)])
    assert names.dns[:4] == (
        service,
        f"{service}.{namespace}",
        f"{service}.{namespace}.svc",
        f"{service}.{namespace}.svc.cluster.local",
    )
    assert ip in names.ips
    assert len(set(names.ips)) == len(names.ips)


@given(service=st.text(max_size=70), namespace=st.text(max_size=70), extra=st.lists(st.text(max_size=30)))
def test_arbitrary_text_is_accepted_or_a_cert_error(service: str, namespace: str, extra: list[str]) -> None:
    try:
        names = serving_names(service, namespace, extra_dns=extra)
    except CertError as exc:
        message = str(exc)
    else:
        assert service[0].isalpha()
        assert names.dns[0] == service
        return
    assert message.split(" ", 1)[0] in {"invalid", "extra"}, message
