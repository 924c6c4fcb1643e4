"""NodePorts: a host port (protocol, IP, port) the pod asks for must be free on the node; 0.0.0.0
conflicts with every IP (upstream ``nodeports``)."""

from __future__ import annotations

from typing import Final

from ...cluster.nodeinfo import HostPort, NodeInfo

NAME: Final = "NodePorts"
REASON: Final = "node(s) didn't have free ports for the requested pod ports"


def filter_node(wanted: list[HostPort], info: NodeInfo) -> str | None:
    return REASON if wanted and conflicts(wanted, info) else None


def conflicts(wanted: list[HostPort], info: NodeInfo) -> bool:
    for used in info.host_ports.values():
        for proto, ip, port in used:
            for wproto, wip, wport in wanted:
                if port == wport and proto == wproto and (ip == wip or "0.0.0.0" in (ip, wip)):
                    return True
    return False
