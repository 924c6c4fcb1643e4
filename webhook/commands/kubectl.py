"""``kubectl draxr``: draxr's view of a live cluster, as a kubectl plugin.

The package installs the executable ``kubectl-draxr``; kubectl finds it on ``PATH`` and runs it for
``kubectl draxr ...``. It reads the cluster through the normal kubeconfig (``$KUBECONFIG``, then
``~/.kube/config``; ``--kubeconfig`` and ``--context`` as kubectl's) and writes nothing.

* ``status``: whether draxr is installed (webhook configurations, the worker's leader), its mode (the
  webhook's last ``Mode`` Event), the DeviceClasses and the names they back, free devices per node and
  class;
* ``why POD``: what was decided for a pod (node, devices, claim), or why it waits: the worker's
  ``0/N nodes are available`` condition and what draxr's engine decides on the cluster as it is now;
* ``plan``: ``draxr plan`` on the live cluster: its pending draxr pods (and the pods of ``-f`` files,
  to try a workload before applying it) placed one by one on what is running.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Callable, Sequence
from typing import TextIO

import kubernetes
import yaml

from ..core.allocation.policy import DEFAULT_POLICY, POLICIES
from ..core.api.constants import (
    DEFAULT_SCHEDULER_NAME,
    DEVICE_CLASS_PREFIX,
    DRAXR_RESOURCES_ANNOTATION,
)
from ..core.api.objects import (
    Obj,
    annotations_of,
    as_dict,
    as_list,
    is_terminating,
    meta,
    name,
    namespace,
    spec,
    status,
    uid,
)
from ..core.api.podgroups import GroupKey, condition, group_of, is_gang, key_of, min_count, topology_key
from ..core.cluster.deviceclasses import ClassResolver, explicit_name
from ..core.cluster.state import ClusterState
from ..core.paths.nodevices import pods_without_devices
from ..core.scheduling.framework import SCHEDULED
from ..core.scheduling.plugins.gangscheduling import pre_enqueue
from ..core.scheduling.podgroupcycle import PodGroupCycle, PodGroupInfo
from ..core.scheduling.scheduler import Scheduler
from ..identity.names import DEFAULT_NAMESPACE, LEASE, WEBHOOK_CONFIGURATION
from ..kube import pager
from ..kube.client import ApiError, KubeClient
from ..kube.resources import (
    DEVICE_CLASSES,
    DEVICE_TAINT_RULE_VERSIONS,
    EVENTS,
    LEASES,
    MUTATING_WEBHOOKS,
    NODES,
    POD_GROUP_VERSIONS,
    PODS,
    RESOURCE_CLAIMS,
    RESOURCE_SLICES,
    VALIDATING_WEBHOOKS,
    Resource,
    device_taint_rules,
    pod_groups,
)
from ..loader import LoadError, expand_workloads, load_paths
from ..runtime.mode import MODE_REASONS, parse_mode_message
from ..worker.events import pod_scheduled_condition
from . import plan as plan_command
from .flags import OneLineParser, add_filename, dns_label, non_empty, one_line
from .text import MACHINE_FORMATS, plural, share_text, table, write_data

PROG = "kubectl draxr"
PAGE = 500


class PluginError(Exception):
    """A failure told in one line (exit status 1)."""


# -- reading the cluster ----------------------------------------------------------------------------


def connect(kubeconfig: str | None, context: str | None) -> tuple[KubeClient, str]:
    """A client through the kubeconfig, as kubectl reads it, and the context's namespace."""
    configuration = kubernetes.client.Configuration()
    try:
        kubernetes.config.load_kube_config(  # type: ignore[no-untyped-call]
            config_file=kubeconfig, context=context, client_configuration=configuration
        )
        contexts, current = kubernetes.config.list_kube_config_contexts(config_file=kubeconfig)  # type: ignore[no-untyped-call]
        if context:
            current = next((c for c in contexts if c.get("name") == context), current)
    except (kubernetes.config.ConfigException, OSError, yaml.YAMLError) as e:
        raise PluginError(f"kubeconfig: {e}") from None
    ns = as_dict(as_dict(current).get("context")).get("namespace") or "default"
    api = kubernetes.client.ApiClient(configuration)
    api.user_agent = "kubectl-draxr"
    return KubeClient(api, retries=2, timeout=30), str(ns)


def list_all(client: KubeClient, res: Resource, ns: str | None = None) -> list[Obj]:
    """Every object of ``res`` (in ``ns``, or everywhere), in pages (an expired continue token
    starts the list over, as informers do), each with its kind."""
    items = pager.list_all(client, res, page_size=PAGE, namespace=ns).items
    for item in items:
        item.setdefault("kind", res.kind)
        item.setdefault("apiVersion", res.api_version)
    return items


def read_cluster(client: KubeClient) -> list[Obj]:
    """What draxr's engine reads: nodes, classes, slices, claims, DeviceTaintRules, pods."""
    objects: list[Obj] = []
    for res in (NODES, DEVICE_CLASSES, RESOURCE_SLICES, RESOURCE_CLAIMS):
        objects += list_all(client, res)
    version = client.served("resource.k8s.io", "devicetaintrules", DEVICE_TAINT_RULE_VERSIONS)
    if version is not None:
        objects += list_all(client, device_taint_rules(version))
    group_version = client.served("scheduling.k8s.io", "podgroups", POD_GROUP_VERSIONS)
    if group_version is not None:
        objects += list_all(client, pod_groups(group_version))
    return objects + list_all(client, PODS)


def _is_pending(pod: Obj) -> bool:
    return not spec(pod).get("nodeName") and status(pod).get("phase") not in ("Succeeded", "Failed")


def running_state(objects: Sequence[Obj], leave_out: Obj | None = None) -> ClusterState:
    """The engine's state: everything but pending pods (and ``leave_out``)."""
    state = ClusterState()
    for o in objects:
        kind = str(o.get("kind"))
        if kind == "Pod" and (_is_pending(o) or (leave_out is not None and _same(o, leave_out))):
            continue
        if kind == "Pod" and status(o).get("phase") in ("Succeeded", "Failed"):
            continue
        state.apply(kind, o)
    return state


def _same(a: Obj, b: Obj) -> bool:
    return (namespace(a), name(a)) == (namespace(b), name(b))


# -- status -----------------------------------------------------------------------------------------


def _get(client: KubeClient, res: Resource, obj_name: str, ns: str | None = None) -> Obj | None:
    try:
        return client.get(res, obj_name, ns)
    except ApiError as e:
        if e.not_found:
            return None
        raise


def _mode(client: KubeClient, draxr_ns: str) -> Obj | None:
    """The webhook's latest ``Mode``/``ModeChanged`` Event: ``{mode, message, time}``."""
    events = [
        e
        for e in list_all(client, EVENTS, draxr_ns)
        if e.get("reason") in MODE_REASONS
        and as_dict(e.get("involvedObject")).get("kind") == "Deployment"
        and parse_mode_message(str(e.get("message") or ""))
    ]
    if not events:
        return None
    latest = max(events, key=lambda e: (str(e.get("lastTimestamp") or ""), _rv(e)))
    parsed = parse_mode_message(str(latest.get("message")))
    assert parsed is not None
    return {
        "mode": parsed[0],
        "why": parsed[1],
        "time": latest.get("lastTimestamp"),
        "deployment": as_dict(latest.get("involvedObject")).get("name"),
    }


def _rv(obj: Obj) -> int:
    text = str(meta(obj).get("resourceVersion") or "0")
    return int(text) if text.isdigit() else 0


def status_report(client: KubeClient, draxr_ns: str) -> Obj:
    objects = read_cluster(client)
    lease = _get(client, LEASES, LEASE, draxr_ns)
    state = running_state(objects)
    resolver = ClassResolver(o for o in objects if o.get("kind") == "DeviceClass")
    classes: list[Obj] = []
    for dc in resolver.classes():
        cls = name(dc)
        explicit = explicit_name(dc)
        backs = [f"{DEVICE_CLASS_PREFIX}{cls}"]
        shadowed_by = None
        if explicit is not None:
            winner = resolver.class_name(explicit)
            if winner == cls:
                backs.insert(0, explicit)
            else:
                shadowed_by = winner
        classes.append(
            {"name": cls, "extendedResourceName": explicit, "backs": backs, "shadowedBy": shadowed_by}
        )
    devices: list[Obj] = []
    for dc in resolver.classes():
        cls = name(dc)
        totals = state.capacity.total(cls)
        free = state.capacity.free(cls)
        for node in sorted(totals):
            devices.append(
                {
                    "node": node,
                    "class": cls,
                    "free": free.get(node, 0),
                    "allocated": totals[node] - free.get(node, 0),
                }
            )
    pods = [o for o in objects if o.get("kind") == "Pod"]
    doubles = [
        {"device": "/".join(device), "claims": [f"{ns}/{n}" for ns, n in claims]}
        for device, claims in state.allocated.holders.double_allocated().items()
    ]
    silent = [
        {"pod": f"{r.namespace}/{r.pod}", "node": r.node, "why": r.why}
        for r in pods_without_devices(list(state.allocated.pods.values()), state)
    ]
    return {
        "namespace": draxr_ns,
        "webhooks": {
            "mutating": _get(client, MUTATING_WEBHOOKS, WEBHOOK_CONFIGURATION) is not None,
            "validating": _get(client, VALIDATING_WEBHOOKS, WEBHOOK_CONFIGURATION) is not None,
        },
        "leader": as_dict(as_dict(lease).get("spec")).get("holderIdentity") or None,
        "mode": _mode(client, draxr_ns),
        "nodes": sum(1 for o in objects if o.get("kind") == "Node"),
        "pendingPods": sum(
            1 for p in pods if _is_pending(p) and spec(p).get("schedulerName") == DEFAULT_SCHEDULER_NAME
        ),
        "classes": classes,
        "devices": devices,
        "doubleAllocated": doubles,
        "podsWithoutDevices": silent,
    }


def write_status(report: Obj, out: TextIO) -> None:
    hooks = report["webhooks"]
    installed = [k for k in ("mutating", "validating") if hooks[k]]
    if installed:
        out.write(f"webhooks: {' and '.join(installed)} configuration {WEBHOOK_CONFIGURATION} installed\n")
    else:
        out.write(
            f"webhooks: not installed (no webhook configuration {WEBHOOK_CONFIGURATION}): "
            "pods are not routed\n"
        )
    leader = report["leader"]
    out.write(
        f"worker: {'leader ' + leader if leader else 'no leader'} (Lease {report['namespace']}/{LEASE})\n"
    )
    mode = report["mode"]
    if mode:
        out.write(f"mode: {mode['mode']} since {mode['time']} ({mode['why']})\n")
    else:
        out.write(f"mode: unknown (no Mode Event in {report['namespace']})\n")
    out.write(
        f"cluster: {plural(report['nodes'], 'node')}, "
        f"{plural(report['pendingPods'], 'pending pod')} for draxr\n"
    )
    write_doubles(report["doubleAllocated"], out)
    write_without_devices(report["podsWithoutDevices"], out)
    out.write("\n")
    if report["classes"]:
        rows = [["DEVICECLASS", "BACKS", "NOTE"]]
        for c in report["classes"]:
            note = f"{c['extendedResourceName']} goes to {c['shadowedBy']}" if c["shadowedBy"] else ""
            rows.append([c["name"], ", ".join(c["backs"]), note])
        out.write(table(rows) + "\n\n")
    else:
        out.write("no DeviceClasses: no name is backed by DRA\n\n")
    if report["devices"]:
        rows = [["NODE", "DEVICECLASS", "FREE", "ALLOCATED"]]
        rows += [[d["node"], d["class"], str(d["free"]), str(d["allocated"])] for d in report["devices"]]
        out.write(table(rows) + "\n")
    else:
        out.write("no devices: no ResourceSlice offers a device of any class\n")


def write_doubles(doubles: list[Obj], out: TextIO) -> None:
    """The double-allocation line (core/cluster/doubles.py): a device two claims hold."""
    if not doubles:
        out.write("double allocations: none (no device is in two claims)\n")
        return
    held = "; ".join(f"{d['device']} in {' and '.join(d['claims'])}" for d in doubles)
    out.write(
        f"double allocations: {plural(len(doubles), 'device')} in two claims at once (two schedulers "
        f"allocated from one pool): {held}\n"
    )


def write_without_devices(pods: list[Obj], out: TextIO) -> None:
    """The no-device line (core/paths/nodevices.py): bound pods running without their devices."""
    if not pods:
        return
    which = "; ".join(f"{p['pod']} on {p['node']}: {p['why']}" for p in pods)
    out.write(
        f"pods without devices: {plural(len(pods), 'pod')} asked for a DRA-backed name and run "
        f"without it: {which}\n"
    )


# -- why --------------------------------------------------------------------------------------------


def why_report(client: KubeClient, pod_name: str, ns: str) -> Obj:
    pod = _get(client, PODS, pod_name, ns)
    if pod is None:
        raise PluginError(f'pods "{pod_name}" not found in namespace {ns}')
    pod.setdefault("kind", "Pod")
    pod.setdefault("apiVersion", "v1")
    scheduler = spec(pod).get("schedulerName") or "default-scheduler"
    routed = annotations_of(pod).get(DRAXR_RESOURCES_ANNOTATION)
    report: Obj = {
        "pod": f"{ns}/{pod_name}",
        "schedulerName": scheduler,
        "draxrs": scheduler == DEFAULT_SCHEDULER_NAME,
        "resources": json.loads(routed) if routed else {},
        "phase": status(pod).get("phase"),
        "node": spec(pod).get("nodeName"),
        "condition": pod_scheduled_condition(pod),
    }
    ercs = as_dict(status(pod).get("extendedResourceClaimStatus"))
    if ercs:
        claim_name = str(ercs.get("resourceClaimName") or "")
        claim = _get(client, RESOURCE_CLAIMS, claim_name, ns) if claim_name else None
        allocation = as_dict(as_dict(as_dict(claim).get("status")).get("allocation"))
        results = as_list(as_dict(allocation.get("devices")).get("results"))
        report["claim"] = claim_name
        report["mappings"] = as_list(ercs.get("requestMappings"))
        report["devices"] = [
            f"{r.get('driver')}/{r.get('pool')}/{r.get('device')}{share_text(r)}"
            for r in results
            if isinstance(r, dict)
        ]
    group = group_of(pod)
    if _is_pending(pod) and group is not None:
        report["podGroup"] = _group_report(read_cluster(client), pod, group)
    elif _is_pending(pod):
        objects = read_cluster(client)
        decision = Scheduler(running_state(objects, leave_out=pod)).schedule(pod)
        report["now"] = {
            "status": decision.status,
            "node": decision.node,
            "message": decision.message,
            "devices": [
                f"{x.device.pool}/{x.device.name}{share_text(x.to_api())}" for x in decision.special.results
            ]
            if decision.special is not None and decision.status == SCHEDULED
            else [],
        }
    return report


def _group_report(objects: Sequence[Obj], pod: Obj, group: GroupKey) -> Obj:
    """Why a member of a pod group waits: its PodGroup, how many of its pods exist and are bound,
    and the group cycle draxr's engine would run now on the cluster as it runs."""
    pod_group = next((o for o in objects if o.get("kind") == "PodGroup" and key_of(o) == group), None)
    pods = (o for o in objects if o.get("kind") == "Pod" and not is_terminating(o))
    members = [o for o in pods if group_of(o) == group]
    bound = [(o, str(spec(o)["nodeName"])) for o in members if spec(o).get("nodeName")]
    pending = [o for o in members if _is_pending(o)]
    out: Obj = {"name": str(group), "exists": pod_group is not None}
    out |= {"pods": len(members), "bound": len(bound)}
    if pod_group is None:
        out["waiting"] = pre_enqueue(group.name, False, None, len(members))
        return out
    gang = is_gang(pod_group)
    out |= {
        "policy": "gang" if gang else "basic",
        "minCount": min_count(pod_group),
        "topologyKey": topology_key(pod_group),
        "condition": condition(pod_group),
    }
    out["waiting"] = pre_enqueue(group.name, True, min_count(pod_group) if gang else None, len(members))
    if out["waiting"] is None and pending:
        leave = {uid(o) for o in pending}
        state = running_state([o for o in objects if o.get("kind") != "Pod" or uid(o) not in leave])
        decision = PodGroupCycle(Scheduler(state)).schedule(PodGroupInfo(pod_group, pending, bound))
        mine = next((d for d in decision.decisions if uid(d.pod) == uid(pod)), None)
        out["now"] = {
            "status": decision.status,
            "message": decision.message,
            "placement": decision.placement,
            "node": mine.node if mine is not None else None,
            "member": mine.message if mine is not None and mine.status != SCHEDULED else "",
        }
    return out


def _write_group(group: Obj, out: TextIO) -> None:
    if not group["exists"]:
        out.write(f"pod group {group['name']}: {group['waiting']}\n")
        return
    out.write(
        f"pod group {group['name']} ({group['policy']}, minCount {group['minCount']}"
        + (f", topology {group['topologyKey']}" if group["topologyKey"] else "")
        + f"): {group['pods']} pods, {group['bound']} bound\n"
    )
    if group["waiting"]:
        short = group["minCount"] - group["pods"]
        out.write(f"  {group['waiting']} ({short} short of minCount)\n")
    now = group.get("now")
    if now:
        if now["status"] == SCHEDULED:
            where = f" in {now['placement']}" if now["placement"] else ""
            out.write(f"draxr's engine now: the group fits{where}; this pod on {now['node']}\n")
        else:
            out.write(f"draxr's engine now: {now['message']}\n")
            if now["member"] and now["member"] != now["message"]:
                out.write(f"  this pod: {now['member']}\n")


def write_why(report: Obj, out: TextIO) -> None:
    pod = report["pod"]
    if report["node"]:
        out.write(f"{pod} is bound to {report['node']} (phase {report['phase']})\n")
        if report.get("claim"):
            out.write(f"claim: {report['claim']}\n")
            for m in report["mappings"]:
                out.write(
                    f"  container {m.get('containerName')}: {m.get('resourceName')} "
                    f"-> request {m.get('requestName')}\n"
                )
            devices = report["devices"]
            out.write(f"devices: {', '.join(devices) if devices else 'none allocated'}\n")
        elif report["resources"]:
            out.write("no special claim: the node's device plugin serves its extended resources\n")
        return
    if not report["draxrs"]:
        line = f"{pod} is pending and not draxr's: spec.schedulerName is {report['schedulerName']}"
        if report["resources"]:
            line += f" (draxr annotated {', '.join(sorted(report['resources']))}; --route never?)"
        out.write(line + "\n")
    else:
        cond = report["condition"]
        if cond and cond.get("status") == "False":
            out.write(f"{pod} is pending: {cond.get('reason')}: {cond.get('message')}\n")
        else:
            out.write(f"{pod} is pending: the worker has not tried it yet (is a worker the leader?)\n")
    if report.get("podGroup"):
        _write_group(report["podGroup"], out)
    now = report.get("now")
    if now:
        if now["status"] == SCHEDULED:
            devices = f", devices {', '.join(now['devices'])}" if now["devices"] else ""
            out.write(f"draxr's engine now: fits on {now['node']}{devices}\n")
        else:
            out.write(f"draxr's engine now: {now['message']}\n")


# -- plan -------------------------------------------------------------------------------------------


def live_plan(
    client: KubeClient, files: Sequence[str], policy: str, scheduler_name: str
) -> plan_command.Plan:
    objects = read_cluster(client)
    keep = [
        o
        for o in objects
        if o.get("kind") != "Pod" or not _is_pending(o) or spec(o).get("schedulerName") == scheduler_name
    ]
    if files:
        try:
            loaded = load_paths(files)
            plan_command.check_inputs(loaded)
        except LoadError as e:
            raise PluginError(str(e)) from None
        keep += expand_workloads([item.obj for item in loaded])
    return plan_command.build_plan(keep, policy)


# -- the command line --------------------------------------------------------------------------------


def _output(value: Obj, fmt: str, out: TextIO, human: Callable[[Obj, TextIO], None]) -> None:
    if fmt in MACHINE_FORMATS:
        write_data(value, fmt, out)
    else:
        human(value, out)


def _common(p: argparse.ArgumentParser) -> argparse.ArgumentParser:
    p.add_argument(
        "--kubeconfig", type=non_empty, help="kubeconfig file (default: $KUBECONFIG, then ~/.kube/config)"
    )
    p.add_argument("--context", type=non_empty, help="the kubeconfig context to use")
    p.add_argument("-o", "--output", choices=("text", *MACHINE_FORMATS), default="text")
    return p


def build_parser() -> argparse.ArgumentParser:
    parser = OneLineParser(
        prog=PROG,
        description="draxr's view of the cluster your kubeconfig points at (read only).",
    )
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    s = _common(sub.add_parser("status", help="mode, classes and names, free devices per node"))
    s.add_argument(
        "--draxr-namespace", type=dns_label, default=DEFAULT_NAMESPACE, help="where draxr is installed"
    )
    w = _common(sub.add_parser("why", help="what was decided for a pod, or why it waits"))
    w.add_argument("pod", metavar="POD")
    w.add_argument("-n", "--namespace", type=dns_label, help="the pod's namespace (default: the context's)")
    p = _common(sub.add_parser("plan", help="draxr plan on the live cluster's pending pods"))
    add_filename(
        p,
        required=False,
        help="also place the pods of these files (a workload to try before applying it; repeatable)",
    )
    p.add_argument("--policy", choices=POLICIES, default=DEFAULT_POLICY)
    p.add_argument(
        "--scheduler-name", type=non_empty, default=DEFAULT_SCHEDULER_NAME, help="the worker's scheduler name"
    )
    return parser


def run(argv: Sequence[str] | None, out: TextIO, err: TextIO) -> int:
    args = build_parser().parse_args(argv)
    try:
        client, context_ns = connect(args.kubeconfig, args.context)
        if args.command == "status":
            _output(status_report(client, args.draxr_namespace), args.output, out, write_status)
            return 0
        if args.command == "why":
            report = why_report(client, args.pod, args.namespace or context_ns)
            _output(report, args.output, out, write_why)
            return 0
        result = live_plan(client, args.filename, args.policy, args.scheduler_name)
        if args.output == "text":
            plan_command.write_table(result, out, where="cluster")
        else:
            _output(result.to_json(), args.output, out, lambda v, o: None)
        return 0 if all(r.decision.status == SCHEDULED for r in result.results) else 1
    except PluginError as e:
        err.write(f"{PROG} {args.command}: error: {one_line(str(e))}\n")
    except ApiError as e:
        err.write(f"{PROG} {args.command}: error: the API server answered {e.status}: {one_line(str(e))}\n")
    except (OSError, kubernetes.client.exceptions.OpenApiException) as e:
        err.write(f"{PROG} {args.command}: error: cannot reach the cluster: {one_line(str(e))}\n")
    except Exception as e:  # a bug: one line, never a traceback
        err.write(f"{PROG} {args.command}: error: {type(e).__name__}: {one_line(str(e))}\n")
    return 1


def main() -> int:
    try:
        return run(None, sys.stdout, sys.stderr)
    except BrokenPipeError:
        return 0
    except KeyboardInterrupt:
        return 130


__all__ = ["build_parser", "main", "run"]
