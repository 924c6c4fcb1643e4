"""The KEP-5004 admission webhook: validate, guard, annotate and route, with no side effects.

``create_app(cache, config)`` builds the Starlette application; ``draxr serve`` runs it over TLS.
Hooks read the shared ``ClusterCache`` and write nothing, so ``kubectl apply --dry-run=server``
gets exactly the answers and warnings of a real apply.
"""

from .app import ENDPOINTS, create_app
from .config import AdmissionConfig

__all__ = ["ENDPOINTS", "AdmissionConfig", "create_app"]
