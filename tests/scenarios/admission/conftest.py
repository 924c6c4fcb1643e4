"""The admission scenarios run against the same TLS webhook server as tests/admission."""

from tests.admission.conftest import server, webhook

__all__ = ["server", "webhook"]
