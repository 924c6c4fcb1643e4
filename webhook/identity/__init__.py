"""Who draxr is in a cluster: the names of its own objects and the certificates it serves with.

Both what an operator applies (``install/``: manifests, the chart, ``draxr certs``) and what runs
(``runtime/``: the Lease, the webhook's TLS pair, the leader renewing it) need these, and neither may
import the other's room; so they live here, below both, on ``core`` alone.
"""
