"""draxr: KEP-5004 for real clusters.

Pods keep asking for ``example.com/gpu: 1``; draxr serves those requests with DRA devices
published in ResourceSlices. ``webhook.core`` is the pure engine (no I/O, no clock) shared by
``draxr plan``, the admission webhook and the allocation worker.
"""

__version__ = "0.1.0"
