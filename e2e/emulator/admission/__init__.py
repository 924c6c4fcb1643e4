"""Admission webhooks as kube-apiserver runs them (see :mod:`.dispatcher`)."""

from .attributes import Attributes
from .client import ServiceMap, WebhookClient
from .dispatcher import AdmissionChain

__all__ = ["AdmissionChain", "Attributes", "ServiceMap", "WebhookClient"]
