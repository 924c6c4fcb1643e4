"""``make demo``: the whole system on the KEP-5004 example (``examples/kep-5004``), in one process.

The API emulator (``e2e/emulator``) plays kube-apiserver. draxr's webhook runs over real TLS
(certificates made on the fly) and is registered through the very webhook configurations
``draxr manifests`` renders, so the emulator calls it as kube-apiserver would; the worker talks to
the emulator with the official client. The example's nodes, DeviceClass and ResourceSlice are
created through the API, then the ``demo`` Deployment's pods, with no scheduler name: the mutating
webhook routes them to draxr.

The emulator runs no kube-controller-manager: with the gate off, the claims the resourceclaim
controller would make from the rewritten pods' templates are made here, and the output says so.

It runs from a checkout only (the wheel carries neither the emulator nor this module):
``python -m e2e.demo [--gate on|off] [--timeout SECONDS]``, or ``make demo``.
"""

from __future__ import annotations

import argparse
import contextlib
import sys
import time
from functools import partial
from pathlib import Path
from typing import Any, TextIO

from webhook import __version__
from webhook.commands.flags import OneLineParser, positive_number, print_error
from webhook.commands.text import table
from webhook.core.api.constants import EXTENDED_RESOURCE_CLAIM_ANNOTATION, POD_CLAIM_NAME_ANNOTATION
from webhook.core.api.objects import Obj, as_dict, name, namespace
from webhook.core.paths.rewrite import REWRITTEN_ANNOTATION
from webhook.identity.names import DEFAULT_NAMESPACE, WEBHOOK
from webhook.kube.client import KubeClient
from webhook.kube.resources import BY_PLURAL
from webhook.loader import expand_workloads, load_paths

from .emulator import Emulator
from .emulator.sandbox import Sandbox
from .podclaims import make_claims

PROG = "python -m e2e.demo"
#: The KEP-5004 example, in the source tree.
EXAMPLES = Path(__file__).resolve().parents[1] / "examples" / "kep-5004"


def build_parser() -> argparse.ArgumentParser:
    parser = OneLineParser(
        prog=PROG, description="draxr on the KEP-5004 example, end to end, on the API emulator"
    )
    parser.add_argument(
        "--timeout",
        type=positive_number,
        default=60.0,
        metavar="SECONDS",
        help="how long to wait for every pod to be bound (default: 60)",
    )
    parser.add_argument(
        "--gate",
        choices=("on", "off"),
        default="on",
        help="DRAExtendedResource on the emulated cluster: on (1.36, the native path) or off (1.35 as "
        "released: draxr rewrites the pods into DRA claims)",
    )
    return parser


def main(argv: list[str] | None = None) -> int:
    """Bad flags end in one line and exit status 2; any failure in one line and exit status 1."""
    args = build_parser().parse_args(argv)
    try:
        return run(args, sys.stdout, sys.stderr)
    except BrokenPipeError:
        return 0
    except KeyboardInterrupt:
        return 130
    except Exception as e:  # one line, not a traceback
        print_error(f"{PROG}: error: {type(e).__name__}: {e}")
        return 1


RESOURCE_OF = {
    "Node": "nodes",
    "DeviceClass": "deviceclasses",
    "ResourceSlice": "resourceslices",
    "ResourceClaim": "resourceclaims",
}


def _say(out: TextIO, text: str = "") -> None:
    out.write(text + "\n")
    out.flush()


def _create(api: KubeClient, obj: Obj) -> None:
    kind = str(obj.get("kind"))
    res = BY_PLURAL[RESOURCE_OF[kind]]
    body = {k: v for k, v in obj.items() if k != "status"}
    created = api.create(res, body, namespace(obj) or None)
    if obj.get("status"):
        created["status"] = obj["status"]
        api.update(res, created, subresource="status")


#: The releases the emulated cluster plays: the gate is on by default from 1.36, alpha and off in 1.35.
KUBE_ON, KUBE_OFF = "1.36.3", "1.35.4"


def run(args: argparse.Namespace, out: TextIO, err: TextIO) -> int:
    del err  # every failure is raised: ``main`` reports it in one line
    timeout = float(getattr(args, "timeout", 60.0))
    gate = str(getattr(args, "gate", "on")) == "on"
    release = KUBE_ON if gate else KUBE_OFF
    started = time.monotonic()
    _say(
        out,
        f"draxr {__version__} demo: KEP-5004 on an emulated Kubernetes {release} cluster, "
        f"DRAExtendedResource {'on' if gate else 'off'} ({EXAMPLES})",
    )
    # With the gate off, rewritten pods keep their scheduler; the emulator has none, so they are
    # routed to draxr's worker (--route=always), which allocates ordinary claims too.
    options: dict[str, Any] = {} if gate else {"route": "always"}
    with Sandbox(feature_gates={"DRAExtendedResource": gate}, **options) as box:
        em = box.em
        _say(
            out,
            f"[1/6] API emulator on {em.url}; TLS certificates for {WEBHOOK}.{DEFAULT_NAMESPACE}.svc made",
        )
        _say(
            out,
            f"[2/6] draxr serve (webhook + worker) on https://127.0.0.1:{box.port}, registered as "
            "admission webhooks from `draxr manifests`",
        )
        objects = expand_workloads([item.obj for item in load_paths([EXAMPLES])])
        pods = [o for o in objects if o.get("kind") == "Pod"]
        admin = box.admin
        for o in objects:
            if o.get("kind") == "Node":  # the kubelets run the cluster's release
                o = {
                    **o,
                    "status": {**as_dict(o.get("status")), "nodeInfo": {"kubeletVersion": f"v{release}"}},
                }
            if o.get("kind") in RESOURCE_OF:
                _create(admin, o)
        cache = box.webhook.cache
        em.wait_for(lambda: len(cache.state.devices.slices) >= 1 and len(cache.state.nodes) >= 2, 10)
        _say(
            out,
            "[3/6] created through the API: "
            + ", ".join(f"{o['kind']} {name(o)}" for o in objects if o.get("kind") in RESOURCE_OF),
        )
        reporter = box.webhook.mode
        mode = reporter.refresh() if reporter is not None else "native"
        _say(
            out, f"[4/6] draxr detected mode {mode}: " + "; ".join(reporter.details()[1:] if reporter else [])
        )
        dev = box.dev
        routed = rewritten = 0
        created_pods: list[Obj] = []
        for p in pods:
            body = {k: v for k, v in p.items() if k != "status"}
            body["metadata"] = {k: v for k, v in as_dict(p.get("metadata")).items() if k != "uid"}
            created = dev.create(BY_PLURAL["pods"], body, namespace(p))
            created_pods.append(created)
            if created["spec"].get("schedulerName") == "draxr":
                routed += 1
            if REWRITTEN_ANNOTATION in as_dict(created["metadata"].get("annotations")):
                rewritten += 1
        did = f"rewrote {rewritten} into DRA claims and " if rewritten else ""
        _say(
            out,
            f"[5/6] created {_plural(len(pods), 'pod')} of Deployment demo as user 'dev'; the mutating "
            f"webhook {did}routed {routed} to schedulerName=draxr",
        )
        made = sum(_claims_from_templates(em, admin, p, started + timeout) for p in created_pods)
        if made:
            _say(
                out,
                f"      made {_plural(made, 'ResourceClaim')} from draxr's templates for the rewritten pods, "
                "as kube-controller-manager's resourceclaim controller would (the emulator runs none)",
            )
        code = _wait(em, out, [name(p) for p in pods], started + timeout)
        _report(em, out)
        elapsed = time.monotonic() - started
        _say(out, f"done in {elapsed:.1f}s" + ("" if code == 0 else " (not every pod was bound)"))
        return code


def _claims_from_templates(em: Emulator, admin: KubeClient, pod: Obj, deadline: float) -> int:
    """The claims the resourceclaim controller would make for ``pod`` (``e2e/podclaims.py``), once
    draxr's worker has made the templates; how many."""

    def template(template_name: str) -> Obj:
        found = em.wait_for(
            partial(em.find, "resourceclaimtemplates", template_name, namespace(pod)),
            max(0.1, deadline - time.monotonic()),
            f"ResourceClaimTemplate {namespace(pod)}/{template_name}",
        )
        return as_dict(found)

    return len(make_claims(admin, pod, template))


def _plural(n: int, noun: str) -> str:
    return f"{n} {noun}" if n == 1 else f"{n} {noun}s"


def _wait(em: Any, out: TextIO, names: list[str], deadline: float) -> int:
    last = -1
    while True:
        pods = {p["metadata"]["name"]: p for p in em.list("pods", "default")}
        bound = sum(1 for n in names if pods.get(n, {}).get("spec", {}).get("nodeName"))
        if bound != last:
            _say(out, f"      waiting for bindings: {bound}/{len(names)} bound")
            last = bound
        if bound == len(names):
            _say(out, "[6/6] every pod is bound")
            return 0
        remaining = deadline - time.monotonic()
        if remaining <= 0:
            _say(out, "[6/6] gave up waiting")
            return 1
        with contextlib.suppress(TimeoutError):
            em.wait_for(lambda seen=bound: _count(em, names) != seen, min(remaining, 2.0))


def _count(em: Any, names: list[str]) -> int:
    pods = {p["metadata"]["name"]: p for p in em.list("pods", "default")}
    return sum(1 for n in names if pods.get(n, {}).get("spec", {}).get("nodeName"))


def _results(claim: Obj) -> list[Obj]:
    """The claim's allocated devices; none while it waits for its allocation (a demo cut short)."""
    allocation = as_dict(as_dict(as_dict(claim.get("status")).get("allocation")).get("devices"))
    return [as_dict(r) for r in allocation.get("results") or []]


def _owner(claim: Obj) -> str:
    refs = as_dict(claim.get("metadata")).get("ownerReferences") or [{}]
    return str(as_dict(refs[0]).get("name", "?"))


def _claims_of(pod: Obj, claims: dict[str, Obj]) -> list[Obj]:
    """The pod's claims: its special claim (native path) or those made from its claim templates
    (rewrite), as the pod's status names them."""
    st = as_dict(pod.get("status"))
    names = [str(as_dict(st.get("extendedResourceClaimStatus")).get("resourceClaimName", ""))]
    names += [str(as_dict(r).get("resourceClaimName", "")) for r in st.get("resourceClaimStatuses") or []]
    return [claims[n] for n in names if n in claims]


def _report(em: Any, out: TextIO) -> None:
    pods = sorted(em.list("pods", "default"), key=lambda p: p["metadata"]["name"])
    claims = {c["metadata"]["name"]: c for c in em.list("resourceclaims", "default")}
    rows = [["POD", "NODE", "DEVICES / WHY IT WAITS"]]
    for p in pods:
        mine = _claims_of(p, claims)
        if mine:
            results = [r for c in mine for r in _results(c)]
            what = ", ".join(f"{r['driver']}/{r['pool']}/{r['device']}" for r in results) or "allocating"
        elif p["spec"].get("nodeName"):
            what = "example.com/gpu from the device plugin"
        else:
            conds = [
                c for c in (p.get("status") or {}).get("conditions") or [] if c["type"] == "PodScheduled"
            ]
            what = conds[0].get("message", "pending") if conds else "pending"
        rows.append([p["metadata"]["name"], p["spec"].get("nodeName") or "<pending>", what])
    _say(out, "\nPods:")
    _say(out, table(rows, "  "))
    named = {
        str(as_dict(as_dict(p.get("status")).get("extendedResourceClaimStatus")).get("resourceClaimName"))
        for p in pods
    }
    special = {
        n: c for n, c in claims.items() if n in named or EXTENDED_RESOURCE_CLAIM_ANNOTATION in _annotations(c)
    }
    if special:
        _say(out, f"\nSpecial ResourceClaims (annotation {EXTENDED_RESOURCE_CLAIM_ANNOTATION}=true):")
        _say(out, _claims_table(special))
    templated = {n: c for n, c in claims.items() if POD_CLAIM_NAME_ANNOTATION in _annotations(c)}
    if templated:
        _say(out, "\nResourceClaims of the rewritten pods (made from draxr's ResourceClaimTemplates):")
        _say(out, _claims_table(templated))
        _say(
            out, "\nRewritten containers (resources.claims; the extended resource left requests and limits):"
        )
        for p in pods:
            for c in p["spec"].get("containers") or []:
                refs = as_dict(c.get("resources")).get("claims") or []
                if refs:
                    refs_text = ", ".join(f"{r['name']}/{r.get('request', '*')}" for r in refs)
                    _say(out, f"  {p['metadata']['name']}/{c['name']}: {refs_text}")
    mapped = [p for p in pods if (p.get("status") or {}).get("extendedResourceClaimStatus")]
    if mapped:
        _say(out, "\nPods' status.extendedResourceClaimStatus:")
        for p in mapped:
            erc = p["status"]["extendedResourceClaimStatus"]
            maps = "; ".join(
                f"{m['containerName']}/{m['resourceName']} -> {m['requestName']}"
                for m in erc["requestMappings"]
            )
            _say(out, f"  {p['metadata']['name']}: resourceClaimName={erc['resourceClaimName']}  {maps}")
    _say(out, "\nDevices per node:")
    used: dict[tuple[str, str, str], str] = {}
    for c in claims.values():
        for r in _results(c):
            used[(str(r.get("driver")), str(r.get("pool")), str(r.get("device")))] = _owner(c)
    rows = [["NODE", "SOURCE", "FREE", "USED"]]
    for s in sorted(em.list("resourceslices"), key=lambda s: s["metadata"]["name"]):
        spec = s["spec"]
        keys = [(spec["driver"], spec["pool"]["name"], d["name"]) for d in spec.get("devices") or []]
        free = sum(1 for k in keys if k not in used)
        rows.append([spec.get("nodeName") or "*", f"DRA {spec['driver']}", str(free), str(len(keys) - free)])
    for n in sorted(em.list("nodes"), key=lambda n: n["metadata"]["name"]):
        alloc = (n.get("status") or {}).get("allocatable") or {}
        if "example.com/gpu" in alloc and int(alloc["example.com/gpu"]) > 0:
            on_node = sum(
                1
                for p in pods
                if p["spec"].get("nodeName") == n["metadata"]["name"] and not _claims_of(p, claims)
            )
            total = int(alloc["example.com/gpu"])
            rows.append(
                [n["metadata"]["name"], "device plugin example.com/gpu", str(total - on_node), str(on_node)]
            )
    _say(out, table(rows, "  "))


def _annotations(obj: Obj) -> dict[str, Any]:
    return as_dict(as_dict(obj.get("metadata")).get("annotations"))


def _claims_table(claims: dict[str, Obj]) -> str:
    rows = [["CLAIM", "OWNER", "REQUESTS", "ALLOCATED", "RESERVED FOR"]]
    for cname, c in sorted(claims.items()):
        reqs = ", ".join(
            f"{r['name']}: {r['exactly'].get('count', 1)} x {r['exactly']['deviceClassName']}"
            for r in c["spec"]["devices"]["requests"]
        )
        devices = ", ".join(str(r.get("device")) for r in _results(c)) or "-"
        reserved = ", ".join(
            str(as_dict(r).get("name")) for r in as_dict(c.get("status")).get("reservedFor") or []
        )
        rows.append([cname, f"Pod/{_owner(c)}", reqs, devices, reserved or "-"])
    return table(rows, "  ")


if __name__ == "__main__":
    sys.exit(main())
