"""What the chart row's tests hold: the cluster, the host as it was before, kubectl with draxr's
plugin on PATH."""

from __future__ import annotations

import json
import subprocess
from dataclasses import dataclass
from typing import Any

from ..controlplane.host import HostState
from ..controlplane.realnode import HostNetState
from ..local import LocalCluster

Obj = dict[str, Any]


@dataclass
class ChartRow:
    cluster: LocalCluster
    host: HostState
    host_net: HostNetState
    started: float  # seconds from nothing to the JSON line's moment (draxr available, hooks called)
    env: dict[str, str]

    def kubectl(self, *args: str, stdin: str = "", check: bool = True, timeout: float = 60) -> str:
        done = subprocess.run(
            [self.cluster.kubectl, *args],
            input=stdin,
            capture_output=True,
            text=True,
            env=self.env,
            check=False,
            timeout=timeout,
        )
        if check:
            assert done.returncode == 0, f"kubectl {' '.join(args)}: {done.stderr}"
        return done.stdout

    def get(self, *args: str) -> Obj:
        out: Obj = json.loads(self.kubectl("get", *args, "-o", "json"))
        return out
