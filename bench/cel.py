"""Benchmark of the CEL selector engine; prints one JSON object.

Run: ``.venv/bin/python bench/cel.py``. Figures (single thread, this machine):

* ``cold``: evaluations per second of E1, E2, E3 (cel-engines.md) and E4, E5 (the newer libraries of
  upstream's base environment: sets, optional values, format, regex, IP, lists) on 10,000 synthetic
  devices with empty caches, both fully cold (the device's activation is built too) and with prepared
  activations (only the result cache is empty);
* ``cached``: the same calls again: hit rate and cost per call;
* ``compile``: the process's first compile (celpy builds its grammar) and the mean over distinct
  expressions;
* ``class_cold_start``: 5,000 devices x 25 class selectors ``...index == K``, once with 5,000
  distinct fingerprints and once with 50 distinct device contents repeated (identical GPUs on
  many nodes), which the fingerprint-keyed caches deduplicate.

Every figure is measured per engine (``engines``: ``cel-python``, the reference, and ``cel-rust``
when its extra is installed), plus:

* ``cold_start_80k``: 80,000 distinct devices x 2 selectors with empty caches (device preparation
  included): device by device through ``SelectorEngine.matches`` (``seconds``), and in one
  ``select`` call, the batch the product makes (a device's second selector runs only if its first
  matched: ``select_seconds``). Two pairs:
  ``shared_inputs`` (a class selector and a request selector on attributes many devices share)
  and ``unique_inputs`` (selectors reading a per-device attribute, so cel-rust's per-program memo
  cannot help);
* ``cold_start_80k_product``: the same selectors as one DeviceClass, counted for the first time
  over 10,000 nodes x 8 devices parsed from ResourceSlices (``DeviceIndex.prime``);
* ``memory``: RSS growth over N uncached evaluations of E3 (which calls Python functions:
  quantity/semver), in bytes per evaluation.

``candidates`` measures cel-expr-python (Google's C++ binding) directly when it is importable
(it is not a dependency): evaluations/s and RSS growth per evaluation calling a Python function.

Run: ``.venv/bin/python bench/cel.py [--quick]`` (``--quick``: smaller sizes).
"""

from __future__ import annotations

import gc
import importlib.util
import json
import os
import sys
import time
from collections.abc import Callable
from functools import partial
from typing import Any

if __name__ == "__main__":
    # Run as a script, bench/ comes first on sys.path and bench/webhook.py would shadow the package.
    _here = os.path.dirname(os.path.abspath(__file__))
    sys.path[:] = [p for p in sys.path if os.path.abspath(p or os.curdir) != _here]
    sys.path.insert(0, os.path.dirname(_here))

from bench.common import memory_kib
from webhook.core.api.quantity import Quantity
from webhook.core.api.semver import Semver
from webhook.core.cel import CelCompileError, SelectorEngine, SimpleDevice, available_engines
from webhook.core.cel.backend import make_backend

GPU = "gpu.example.com"
E1 = "device.driver == 'gpu.example.com' && device.attributes['gpu.example.com'].type == 'gpu'"
E2 = (
    "'gpu.example.com' in device.attributes && device.attributes['gpu.example.com'].memory >= 16 && "
    "device.attributes['gpu.example.com'].model.startsWith('A100')"
)
E3 = (
    "device.driver == 'gpu.example.com' && "
    "device.capacity['gpu.example.com'].memory.compareTo(quantity('16Gi')) >= 0 && "
    "device.attributes['gpu.example.com'].driverVersion.isGreaterThan(semver('1.2.3'))"
)
#: The libraries of upstream's base environment beyond quantity and semver (each under upstream's
#: estimated cost limit): sets, optional chaining, regex find, IP, the lists library and format.
E4 = (
    "sets.contains(['A100-40GB', 'A100-80GB', 'H100-80GB'], [device.attributes['gpu.example.com'].model]) && "
    "device.attributes['numa.example.org'].?node.orValue(0) == 0"
)
E5 = (
    "device.attributes['gpu.example.com'].model.find('[0-9]+') != '' && "
    "ip('10.0.0.' + string(device.attributes['gpu.example.com'].memory)).family() == 4 && "
    "[8, 16].sum() < device.attributes['gpu.example.com'].memory && '%s'.format(['x']) == 'x'"
)
MODELS = ["A100-40GB", "A100-80GB", "H100-80GB", "L4-24GB"]


def synthetic_device(i: int, variety: int | None = None) -> SimpleDevice:
    """Device ``i``; with ``variety`` only that many distinct contents exist."""
    k = i if variety is None else i % variety
    memory = (16, 24, 40, 80)[k % 4]
    return SimpleDevice(
        driver=GPU if k % 10 else "nic.example.com",
        attributes={
            f"{GPU}/type": ("string", "gpu" if k % 7 else "fpga"),
            f"{GPU}/memory": ("int", memory),
            f"{GPU}/model": ("string", MODELS[k % 4]),
            f"{GPU}/driverVersion": ("version", Semver(1, k % 4, k % 3)),
            f"{GPU}/index": ("int", k),
            f"{GPU}/uuid": ("string", f"GPU-{k:08d}"),
            "numa.example.org/node": ("int", k % 2),
        },
        capacity={f"{GPU}/memory": Quantity.parse(f"{memory}Gi"), f"{GPU}/cores": Quantity.parse("6912")},
    )


def timed(fn: Callable[[], Any]) -> float:
    gc.collect()  # what earlier measurements left behind (cycles) must not slow this one's collections
    start = time.perf_counter()
    fn()
    return time.perf_counter() - start


def rss_kib() -> int:
    return memory_kib()["VmRSS"]


def run_all(engine: SelectorEngine, expression: str, devices: list[SimpleDevice]) -> None:
    for d in devices:
        engine.matches(expression, d)


def compile_all(engine: SelectorEngine, expressions: list[str]) -> None:
    for e in expressions:
        engine.compile(e)


def class_cold_start(devices: list[SimpleDevice], classes: int, name: str) -> dict[str, float | int]:
    engine = SelectorEngine(engine=name)
    selectors = [f'device.attributes["gpu.example.com"].index == {k}' for k in range(classes)]

    def work() -> None:
        for expr in selectors:
            for d in devices:
                engine.matches(expr, d)

    seconds = timed(work)
    stats = engine.stats()
    return {
        "calls": len(devices) * classes,
        "seconds": round(seconds, 3),
        "evaluations": stats["evaluations"],
        "result_hits": stats["result_hits"],
        "activations_built": stats["activation_misses"],
        "calls_per_s": round(len(devices) * classes / seconds),
    }


COLD_SELECTORS = {
    "shared_inputs": [
        "device.driver == 'gpu.example.com'",
        "device.attributes['gpu.example.com'].memory >= 24 && "
        "device.attributes['gpu.example.com'].model.startsWith('A100')",
    ],
    "unique_inputs": [
        "device.attributes['gpu.example.com'].index >= 0",
        "device.attributes['gpu.example.com'].uuid.startsWith('GPU-')",
    ],
}


def cold_start(name: str, devices: list[SimpleDevice], selectors: list[str]) -> dict[str, Any]:
    engine = SelectorEngine(engine=name)

    def work() -> None:
        for expr in selectors:
            for d in devices:
                engine.matches(expr, d)

    seconds = timed(work)
    stats = engine.stats()
    select_engine = SelectorEngine(engine=name)
    select = timed(partial(select_engine.select, selectors, devices))
    return {
        "devices": len(devices),
        "selectors": len(selectors),
        "seconds": round(seconds, 3),
        "calls_per_s": round(len(devices) * len(selectors) / seconds),
        "select_seconds": round(select, 3),
        **{k: v for k, v in stats.items() if k.endswith(("_evaluations", "memo_hits", "declined_programs"))},
    }


def product_cold_start(name: str, nodes: int, per_node: int, selectors: list[str]) -> dict[str, Any]:
    """A class's first count over a cluster as the allocator makes it: ``DeviceIndex.prime`` over
    ``nodes`` node-local ResourceSlices (parsed from JSON) of ``per_node`` distinct devices."""
    from webhook.core.cluster.deviceclasses import ClassResolver
    from webhook.core.cluster.devices import DeviceIndex

    dc = {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "DeviceClass",
        "metadata": {"name": "gpu"},
        "spec": {"selectors": [{"cel": {"expression": e}} for e in selectors]},
    }
    index = DeviceIndex(ClassResolver([dc]), SelectorEngine(engine=name))
    node_objs = []
    for n in range(nodes):
        node_name = f"node-{n:05d}"
        node_objs.append({"apiVersion": "v1", "kind": "Node", "metadata": {"name": node_name, "labels": {}}})
        devices = []
        for d in range(per_node):
            sd = synthetic_device(n * per_node + d)
            attrs: dict[str, Any] = {}
            for qualified, (kind, value) in sd.attributes.items():
                attrs[qualified] = {kind: str(value) if kind == "version" else value}
            devices.append(
                {
                    "name": f"gpu-{d}",
                    "driver": sd.driver,
                    "attributes": attrs,
                    "capacity": {k: {"value": str(q)} for k, q in sd.capacity.items()},
                }
            )
        index.upsert_slice(
            {
                "apiVersion": "resource.k8s.io/v1",
                "kind": "ResourceSlice",
                "metadata": {"name": node_name},
                "spec": {
                    "driver": GPU,
                    "nodeName": node_name,
                    "pool": {"name": node_name, "generation": 1, "resourceSliceCount": 1},
                    "devices": devices,
                },
            }
        )
    for node in node_objs:
        index.node_devices(node)  # the views (pools per node) exist before the class is counted
    seconds = timed(partial(index.prime, "gpu", node_objs))
    candidates = sum(len(index.node_devices(n).class_candidates("gpu")) for n in node_objs)
    return {
        "nodes": nodes,
        "devices": nodes * per_node,
        "prime_seconds": round(seconds, 3),
        "candidates": candidates,
    }


def memory(name: str, evaluations: int) -> dict[str, Any]:
    """RSS growth of uncached E3 evaluations (two Python library calls each) on one device."""
    backend = make_backend(name)
    program = backend.compile(E3)
    prepared = backend.prepare(synthetic_device(1))
    memo = getattr(program, "memo", None)

    def run(n: int) -> None:
        for _ in range(n):
            if memo is not None:
                memo.clear()  # cel-rust memoises by input: force a real evaluation
            backend.evaluate(program, prepared)

    run(min(20_000, evaluations // 10))
    gc.collect()
    before = rss_kib()
    seconds = timed(partial(run, evaluations))
    gc.collect()
    growth = rss_kib() - before
    return {
        "evaluations": evaluations,
        "evals_per_s": round(evaluations / seconds),
        "rss_growth_kib": growth,
        "bytes_per_evaluation": round(growth * 1024 / evaluations, 2),
    }


def cel_expr_python(evaluations: int) -> dict[str, Any]:
    """Google's cel-expr-python, measured directly: not integrated (see the report)."""
    from cel_expr_python import cel as gcel  # type: ignore[import-not-found,unused-ignore]

    def qlen(s: str) -> int:
        return len(s)

    env = gcel.NewEnv(
        variables={"device": gcel.Type.Map(gcel.Type.STRING, gcel.Type.DYN)},
        functions=[
            gcel.FunctionDecl(
                "qlen", [gcel.Overload("qlen_string", gcel.Type.INT, [gcel.Type.STRING], impl=qlen)]
            )
        ],
    )
    activation = env.Activation({"device": {"driver": "gpu.example.com", "type": "gpu"}})
    out: dict[str, Any] = {}
    for label, expr in (
        ("E1_like", "device.driver == 'gpu.example.com' && device.type == 'gpu'"),
        ("python_function", "qlen(device.driver) > 3"),
    ):
        program = env.compile(expr)
        for _ in range(10_000):
            program.eval(activation)
        gc.collect()
        before = rss_kib()
        start = time.perf_counter()
        for _ in range(evaluations):
            program.eval(activation)
        seconds = time.perf_counter() - start
        gc.collect()
        growth = rss_kib() - before
        out[label] = {
            "evals_per_s": round(evaluations / seconds),
            "bytes_per_evaluation": round(growth * 1024 / evaluations, 2),
        }
    return out


def engine_report(
    name: str, devices: list[SimpleDevice], cold_devices: list[SimpleDevice], quick: bool
) -> dict[str, Any]:
    engine = SelectorEngine(engine=name)
    first_compile = timed(lambda: engine.compile(E1))
    distinct = [f"device.attributes['gpu.example.com'].index == {k} && {E3}" for k in range(200)]
    compile_mean = timed(partial(compile_all, engine, distinct)) / len(distinct)

    cold: dict[str, Any] = {}
    cached: dict[str, Any] = {}
    for label, expr in (("E1", E1), ("E2", E2), ("E3", E3), ("E4", E4), ("E5", E5)):
        fresh = SelectorEngine(engine=name)
        try:
            fresh.compile(expr)
        except CelCompileError as e:  # a tree without the library: measured where it compiles
            cold[label] = cached[label] = {"not_compiled": f"{type(e).__name__}: {e}"[:200]}
            continue
        fully_cold = timed(partial(run_all, fresh, expr, devices))
        warm = SelectorEngine(engine=name)
        warm.compile(expr)
        run_all(warm, "true", devices)  # prepare every device
        results_cold = timed(partial(run_all, warm, expr, devices))
        before = warm.stats()
        hit_time = timed(partial(run_all, warm, expr, devices))
        after = warm.stats()
        hits = after["result_hits"] - before["result_hits"]
        cold[label] = {
            "evals_per_s_fully_cold": round(len(devices) / fully_cold),
            "evals_per_s_prepared_device": round(len(devices) / results_cold),
            "matched": sum(1 for d in devices if warm.matches(expr, d)),
        }
        cached[label] = {
            "hit_rate": round(hits / len(devices), 4),
            "us_per_cached_call": round(hit_time / len(devices) * 1e6, 3),
        }
    return {
        "engine": name,
        "cold": cold,
        "cached": cached,
        "compile": {
            "first_compile_ms": round(first_compile * 1e3, 2),
            "mean_compile_ms": round(compile_mean * 1e3, 3),
        },
        "class_cold_start": {
            "distinct_fingerprints": class_cold_start(devices[:5_000], 25, name),
            "50_distinct_contents": class_cold_start(
                [synthetic_device(i, 50) for i in range(5_000)], 25, name
            ),
        },
        "cold_start_80k": {
            label: cold_start(name, cold_devices, selectors) for label, selectors in COLD_SELECTORS.items()
        },
        "cold_start_80k_product": {
            label: product_cold_start(name, len(cold_devices) // 8, 8, selectors)
            for label, selectors in COLD_SELECTORS.items()
        },
        "memory": memory(name, 100_000 if quick or name == "cel-python" else 1_000_000),
    }


def main() -> None:
    quick = "--quick" in sys.argv
    devices = [synthetic_device(i) for i in range(2_000 if quick else 10_000)]
    cold_devices = [synthetic_device(i) for i in range(8_000 if quick else 80_000)]
    report: dict[str, Any] = {
        "devices": len(devices),
        "engines": {name: engine_report(name, devices, cold_devices, quick) for name in available_engines()},
    }
    if importlib.util.find_spec("cel_expr_python") is not None:
        report["candidates"] = {"cel-expr-python": cel_expr_python(20_000 if quick else 200_000)}
    print(json.dumps(report, indent=2))


if __name__ == "__main__":
    main()
