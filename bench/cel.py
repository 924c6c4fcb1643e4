"""Benchmark of the CEL selector engine; prints one JSON object.

Run: ``.venv/bin/python bench/cel.py``. Figures (single thread, this machine):

* ``cold``: evaluations per second of E1, E2, E3 (cel-engines.md) on 10,000 synthetic devices
  with empty caches, both fully cold (the device's activation is built too) and with prepared
  activations (only the result cache is empty);
* ``cached``: the same calls again: hit rate and cost per call;
* ``compile``: the process's first compile (celpy builds its grammar) and the mean over distinct
  expressions;
* ``class_cold_start``: 5,000 devices x 25 class selectors ``...index == K``, once with 5,000
  distinct fingerprints and once with 50 distinct device contents repeated (identical GPUs on
  many nodes), which the fingerprint-keyed caches deduplicate.

It stays well under a minute on the project's 2-core machine.
"""

from __future__ import annotations

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

from webhook.core.cel import SelectorEngine, SimpleDevice
from webhook.core.quantity import Quantity
from webhook.core.semver import Semver

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
    start = time.perf_counter()
    fn()
    return time.perf_counter() - start


def run_all(engine: SelectorEngine, expression: str, devices: list[SimpleDevice]) -> None:
    for d in devices:
        engine.matches(expression, d)


def compile_all(engine: SelectorEngine, expressions: list[str]) -> None:
    for e in expressions:
        engine.compile(e)


def class_cold_start(devices: list[SimpleDevice], classes: int) -> dict[str, float | int]:
    engine = SelectorEngine()
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


def main() -> None:
    engine = SelectorEngine()
    first_compile = timed(lambda: engine.compile(E1))
    distinct = [f"device.attributes['gpu.example.com'].index == {k} && {E3}" for k in range(200)]
    compile_mean = timed(partial(compile_all, engine, distinct)) / len(distinct)

    devices = [synthetic_device(i) for i in range(10_000)]
    cold: dict[str, Any] = {}
    cached: dict[str, Any] = {}
    for name, expr in (("E1", E1), ("E2", E2), ("E3", E3)):
        fresh = SelectorEngine()
        fresh.compile(expr)
        fully_cold = timed(partial(run_all, fresh, expr, devices))
        warm = SelectorEngine()
        warm.compile(expr)
        run_all(warm, "true", devices)  # prepare every activation
        results_cold = timed(partial(run_all, warm, expr, devices))
        before = warm.stats()
        hit_time = timed(partial(run_all, warm, expr, devices))
        after = warm.stats()
        hits = after["result_hits"] - before["result_hits"]
        cold[name] = {
            "evals_per_s_fully_cold": round(len(devices) / fully_cold),
            "evals_per_s_prepared_activation": round(len(devices) / results_cold),
            "matched": sum(1 for d in devices if warm.matches(expr, d)),
        }
        cached[name] = {
            "hit_rate": round(hits / len(devices), 4),
            "us_per_cached_call": round(hit_time / len(devices) * 1e6, 3),
        }

    report = {
        "devices": len(devices),
        "cold": cold,
        "cached": cached,
        "compile": {
            "first_compile_ms": round(first_compile * 1e3, 2),
            "mean_compile_ms": round(compile_mean * 1e3, 3),
        },
        "class_cold_start": {
            "distinct_fingerprints": class_cold_start([synthetic_device(i) for i in range(5_000)], 25),
            "50_distinct_contents": class_cold_start([synthetic_device(i, 50) for i in range(5_000)], 25),
        },
    }
    print(json.dumps(report, indent=2))


if __name__ == "__main__":
    main()
