"""Install options kube-apiserver would refuse are refused before anything is rendered."""

from __future__ import annotations

from typing import Any

import pytest

from webhook.install.options import InstallOptions, ManifestError


@pytest.mark.parametrize(
    ("change", "message"),
    [
        ({"failure_policy": "Sometimes"}, "failurePolicy must be one of Fail, Ignore"),
        ({"timeout_seconds": 31}, "timeoutSeconds must be between 1 and 30"),
        ({"route": "maybe"}, "route must be one of"),
        ({"worker_replicas": 0}, "replicas must be at least 1"),
        ({"flow_control_shares": 0}, "flow control shares must be between 1 and 1000, not 0"),
    ],
)
def test_options_are_checked(change: dict[str, Any], message: str) -> None:
    with pytest.raises(ManifestError, match=message):
        InstallOptions(**change)
