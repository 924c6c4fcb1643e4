"""The admission webhook over real TLS (tests/admission's fixtures), for ``draxr convert``'s
fixed-point test: a converted pod passes through the webhook unchanged."""

from tests.admission.conftest import server, webhook

__all__ = ["server", "webhook"]
