"""Selectors with a figure upstream's compiler gives, shared by the tests of every layer that checks
them (the estimate, the selector checks, ``draxr validate``, the DeviceClass webhook)."""

from __future__ import annotations

#: Four nested comprehensions over the attributes: upstream estimates 24,387,779 (limit 1,000,000).
TOO_COMPLEX = (
    "device.attributes.all(d, device.attributes.all(e, device.attributes[d].all(k,"
    " device.attributes[e].exists(j, device.attributes[d][k] == device.attributes[e][j]))))"
)
