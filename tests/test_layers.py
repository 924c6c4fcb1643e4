"""The package's layers, read from the code's own imports: a pure core at the bottom, the admission
webhook and the worker side by side on it (never on each other), commands on top. No import cycles,
and nothing of the product imports the test infrastructure beside it (the API emulator in
``e2e/emulator``, the tests, the benchmarks): the wheel carries none of it."""

from __future__ import annotations

import ast
from collections.abc import Iterator
from pathlib import Path

PACKAGE = Path(__file__).resolve().parents[1] / "webhook"

#: Which rooms each room may import (a room is ``webhook.<room>``; the package root holds only the
#: version).
ALLOWED: dict[str, set[str]] = {
    "core": {"core"},
    "kube": {"core", "kube"},
    "admission": {"core", "kube", "admission"},
    "worker": {"core", "kube", "worker"},
    "loader": {"core", "loader"},
    "identity": {"core", "identity"},
    "install": {"core", "identity", "install"},
    "runtime": {"core", "kube", "identity", "admission", "worker", "loader", "runtime"},
    "commands": {
        "",
        "core",
        "kube",
        "identity",
        "admission",
        "worker",
        "loader",
        "install",
        "runtime",
        "commands",
    },
    "cli": {"", "commands", "cli"},
    "": {""},
}
#: The source tree's other top-level packages: test infrastructure (the API emulator lives in
#: ``e2e/emulator``), tests and benchmarks. The product never imports them, at any depth.
OUTSIDE = ("e2e", "tests", "bench")

#: The core's sub-packages, bottom first: each imports only itself and the ones before it. The API's
#: shapes and rules, CEL over devices, the cluster model, the allocator, the scheduler's plugins, and
#: the paths a pod can take (native, rewrite) on top.
CORE_LAYERS = ("api", "cel", "cluster", "allocation", "scheduling", "paths")


def module_name(path: Path, top: Path = PACKAGE.parent) -> str:
    parts = list(path.relative_to(top).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def room(module: str) -> str:
    parts = module.split(".")
    if len(parts) == 1:
        return ""
    return "cli" if parts[1] in ("cli", "__main__") else parts[1]


def imports(path: Path, top: Path = PACKAGE.parent) -> Iterator[tuple[str, bool]]:
    """(imported draxr module, at the top level?) for every import in the file."""
    module = module_name(path, top)
    package = module if path.name == "__init__.py" else module.rsplit(".", 1)[0]
    tree = ast.parse(path.read_text())
    top_level = set(map(id, tree.body))
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")[: len(package.split(".")) - node.level + 1]
                target = ".".join(base + ([node.module] if node.module else []))
            else:
                target = node.module or ""
            if target.split(".")[0] != "webhook":
                continue
            # ``from pkg import module`` names a module; ``from module import name`` a name in it.
            for alias in node.names:
                sub = f"{target}.{alias.name}"
                found = (top / sub.replace(".", "/")).with_suffix(".py").exists() or (
                    top / sub.replace(".", "/") / "__init__.py"
                ).exists()
                yield (sub if found else target), id(node) in top_level
        elif isinstance(node, ast.Import):
            for alias in node.names:
                if alias.name.split(".")[0] == "webhook":
                    yield alias.name, id(node) in top_level


def graph() -> dict[str, set[str]]:
    edges: dict[str, set[str]] = {}
    for path in PACKAGE.rglob("*.py"):
        edges[module_name(path)] = {target for target, _ in imports(path)}
    return edges


def test_every_room_imports_only_the_rooms_below_it() -> None:
    wrong: list[str] = []
    for path in sorted(PACKAGE.rglob("*.py")):
        module = module_name(path)
        mine = room(module)
        for target, _ in imports(path):
            theirs = room(target)
            if theirs in ALLOWED[mine]:
                continue
            wrong.append(f"{module} ({mine or 'root'}) imports {target} ({theirs or 'root'})")
    assert wrong == []


def test_what_runs_and_what_is_applied_share_only_identity() -> None:
    """``draxr serve`` and ``draxr manifests`` find the same objects and certificates through
    ``identity/`` (names, PKI); the runtime never borrows the renderings of ``install/``, nor they the
    runtime."""
    assert "install" not in ALLOWED["runtime"]
    assert "runtime" not in ALLOWED["install"]
    runtime_imports = {
        room(target) for path in (PACKAGE / "runtime").rglob("*.py") for target, _ in imports(path)
    }
    assert "identity" in runtime_imports
    assert "install" not in runtime_imports


def test_convert_uses_the_core_not_the_webhook() -> None:
    """``draxr convert`` applies the webhook's rewrite offline: from core (and the loader), never by
    borrowing the admission webhook's modules, which speak AdmissionReview."""
    path = PACKAGE / "commands" / "convert.py"
    borrowed = [target for target, _ in imports(path) if room(target) == "admission"]
    assert borrowed == []
    assert any(target.startswith("webhook.core.paths.") for target, _ in imports(path))


def core_layer(module: str) -> str | None:
    """``webhook.core.<layer>...`` -> layer; None for modules outside the core (or its face)."""
    parts = module.split(".")
    return parts[2] if len(parts) > 2 and parts[1] == "core" else None


def test_each_core_layer_imports_only_the_layers_below_it() -> None:
    wrong: list[str] = []
    for path in sorted((PACKAGE / "core").rglob("*.py")):
        module = module_name(path)
        mine = core_layer(module)
        if mine is None:
            continue
        for target, _ in imports(path):
            theirs = core_layer(target)
            if theirs is None or CORE_LAYERS.index(theirs) <= CORE_LAYERS.index(mine):
                continue
            wrong.append(f"{module} ({mine}) imports {target} ({theirs})")
    assert wrong == []


def test_every_core_module_is_in_a_layer() -> None:
    """No module is left in the core's hall: each lives in one of the layers."""
    loose = [p.name for p in (PACKAGE / "core").glob("*.py") if p.name != "__init__.py"]
    layers = {p.name for p in (PACKAGE / "core").iterdir() if (p / "__init__.py").exists()}
    assert loose == []
    assert layers == set(CORE_LAYERS)


def test_the_core_checker_sees_an_upside_down_import(tmp_path: Path) -> None:
    """The layer rule catches what it is for: the cluster model importing the allocator."""
    probe = tmp_path / "webhook" / "core" / "cluster" / "probe.py"
    probe.parent.mkdir(parents=True)
    target = tmp_path / "webhook" / "core" / "allocation" / "allocator.py"
    target.parent.mkdir(parents=True)
    target.write_text("")
    probe.write_text("from ..allocation.allocator import Allocator\n")
    found = [t for t, _ in imports(probe, tmp_path)]
    assert found == ["webhook.core.allocation.allocator"]
    assert CORE_LAYERS.index(core_layer(found[0]) or "") > CORE_LAYERS.index("cluster")


def test_every_room_is_known() -> None:
    rooms = {room(module_name(p)) for p in PACKAGE.rglob("*.py")}
    assert rooms <= set(ALLOWED), rooms - set(ALLOWED)


def test_no_import_cycles() -> None:
    edges = graph()
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    cycles: list[list[str]] = []

    def visit(v: str) -> None:  # Tarjan's strongly connected components
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in edges.get(v, ()):
            if w not in edges:
                continue
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component: list[str] = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                component.append(w)
                if w == v:
                    break
            # A package's face (``__init__``) importing its own modules is not a cycle of design.
            if len(component) > 1:
                cycles.append(sorted(component))

    for v in sorted(edges):
        if v not in index:
            visit(v)
    assert cycles == []


def outside_imports(path: Path) -> Iterator[str]:
    """Every module of ``OUTSIDE`` the file imports, wherever the import statement is."""
    for node in ast.walk(ast.parse(path.read_text())):
        names: list[str] = []
        if isinstance(node, ast.ImportFrom) and not node.level:
            names = [node.module or ""]
        elif isinstance(node, ast.Import):
            names = [alias.name for alias in node.names]
        yield from (n for n in names if n.split(".")[0] in OUTSIDE)


def test_the_product_never_imports_the_emulator_tests_or_benchmarks() -> None:
    wrong = [
        f"{module_name(path)} imports {target}"
        for path in sorted(PACKAGE.rglob("*.py"))
        for target in outside_imports(path)
    ]
    assert wrong == []


def test_the_checker_sees_a_forbidden_import(tmp_path: Path) -> None:
    """The rules above catch what they are for: an admission module importing the worker, and a
    function importing the emulator lazily."""
    probe = tmp_path / "webhook" / "admission" / "probe.py"
    probe.parent.mkdir(parents=True)
    probe.write_text(
        "from ..worker.queue import SchedulingQueue\n\ndef f():\n    from e2e.emulator import Emulator\n"
    )
    found = list(imports(probe, tmp_path))
    assert found == [("webhook.worker.queue", True)]
    assert room("webhook.worker.queue") not in ALLOWED["admission"]
    assert list(outside_imports(probe)) == ["e2e.emulator"]


TESTS = PACKAGE.parent / "tests"
#: Test folders that do not mirror a module: scenarios across modules, the packaging checks, and the
#: CEL package's topic suites (its conftest runs each of them on both engines).
UNMIRRORED = ("scenarios", "packaging", "core/cel")


def unmirrored_tests(tests: Path = TESTS, package: Path = PACKAGE) -> list[str]:
    """Test modules ``tests/<room>/test_<m>.py`` (or ``test_<m>_properties.py``, its property tests)
    with no ``webhook/<room>/<m>.py`` (or package)."""
    found = []
    for path in sorted(tests.rglob("test_*.py")):
        rel = path.relative_to(tests)
        room_dir = rel.parent
        if room_dir == Path(".") or any(room_dir.as_posix().startswith(u) for u in UNMIRRORED):
            continue
        module = rel.stem.removeprefix("test_").removesuffix("_properties")
        target = package / room_dir / module
        if not (target.with_suffix(".py").exists() or target.is_dir()):
            found.append(rel.as_posix())
    return found


def test_tests_mirror_modules_and_scenarios_live_apart() -> None:
    assert unmirrored_tests() == []


def test_the_mirror_checker_sees_a_stray_test(tmp_path: Path) -> None:
    (tmp_path / "tests" / "worker").mkdir(parents=True)
    (tmp_path / "webhook" / "worker").mkdir(parents=True)
    (tmp_path / "webhook" / "worker" / "queue.py").write_text("")
    (tmp_path / "tests" / "worker" / "test_queue.py").write_text("")
    (tmp_path / "tests" / "worker" / "test_everything.py").write_text("")
    assert unmirrored_tests(tmp_path / "tests", tmp_path / "webhook") == ["worker/test_everything.py"]


SCHEDULING = PACKAGE / "core" / "scheduling"
DRA = "webhook.core.scheduling.plugins.dynamicresources"
#: The framework level's one door into DynamicResources: the profile declares the plugin object.
DRA_DOOR = "webhook.core.scheduling.profile"
#: The one exception: the fused fast path checks the usual pod on the usual node in one call, so it
#: reads DynamicResources' counts and state directly (its property test holds it equal to the plugin).
DRA_FUSED = {"webhook.core.scheduling.usual": {f"{DRA}.filter", f"{DRA}.score", f"{DRA}.state"}}


def dra_internals_used(top: Path = PACKAGE.parent, package: Path = SCHEDULING) -> list[str]:
    """Imports of ``plugins/dynamicresources/*`` by the framework level (the modules directly in
    ``core/scheduling/``: the search, its cycle, the fused path, the nominated pods, the phases'
    shapes), other than the profile's and the fused path's allowed ones."""
    wrong: list[str] = []
    for path in sorted(package.glob("*.py")):
        module = module_name(path, top)
        if module == DRA_DOOR:
            continue
        allowed = DRA_FUSED.get(module, set())
        for target, _ in imports(path, top):
            if (target == DRA or target.startswith(f"{DRA}.")) and target not in allowed:
                wrong.append(f"{module} imports {target}")
    return wrong


def test_the_framework_level_reaches_dynamicresources_only_through_the_profile() -> None:
    """The search, the cycle and the nominated pods use DynamicResources as one plugin object
    (``profile.DYNAMIC_RESOURCES``), never its modules; the fused fast path is the one exception."""
    assert dra_internals_used() == []


def test_the_framework_checker_sees_a_hand_wired_plugin(tmp_path: Path) -> None:
    sched = tmp_path / "webhook" / "core" / "scheduling"
    dra = sched / "plugins" / "dynamicresources"
    dra.mkdir(parents=True)
    for f in ("filter.py", "plugin.py"):
        (dra / f).write_text("")
    (sched / "scheduler.py").write_text("from .plugins.dynamicresources.filter import served_on\n")
    (sched / "profile.py").write_text("from .plugins.dynamicresources.plugin import DynamicResources\n")
    (sched / "usual.py").write_text("from .plugins.dynamicresources.filter import counts\n")
    assert dra_internals_used(tmp_path, sched) == [
        "webhook.core.scheduling.scheduler imports webhook.core.scheduling.plugins.dynamicresources.filter"
    ]
