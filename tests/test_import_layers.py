"""The package's import structure: no import circles between modules, no import from a lower layer into a higher
one, and imports inside functions only where they load something slow on first use (issue 17).

The graph is read from the source with ``ast`` (every ``import`` and ``from ... import``, at any depth, under
``TYPE_CHECKING`` too). Importing ``a.b.c`` also runs the packages ``a.b`` and ``a`` first, so an edge to a
module is also an edge to each package above it, except the root package (which every module's import runs)
and the importer's own packages (already running when one of their modules imports a sibling).
"""

from __future__ import annotations

import ast
import importlib
from collections.abc import Iterator
from pathlib import Path

import pytest

import synergy_opt
from synergy_opt.moved import MOVED_MODULES

ROOT = Path(synergy_opt.__file__).parent
PACKAGE = "synergy_opt"

# Lowest first. A module's layer is that of its top-level module or subpackage under synergy_opt; a module may
# import its own layer or a lower one. Written down once, here.
LAYERS: tuple[tuple[str, ...], ...] = (
    ("errors", "portable", "gc_pause", "float_keys"),
    ("validation", "files", "moved"),
    ("profile",),
    ("profile_groups",),
    ("instance",),
    ("hetero",),
    ("gavel_throughputs", "profiles", "io", "evaluation"),
    ("profiling",),
    ("generate",),
    ("round_family",),
    ("hetero_family",),
    ("cli",),
    ("solvers",),
    ("policies",),
    ("ideal",),
    ("packing",),
    ("placement", "joint"),
    ("mechanisms",),
    ("sim",),
    ("bench",),
)

# The only imports allowed inside functions: each loads something slow (or an optional library) on first use.
LAZY_IMPORTS: dict[tuple[str, str], str] = {
    ("synergy_opt", "synergy_opt.sim"): "the simulator and pandas on first use of a simulator name",
    ("synergy_opt.bench.compare", "synergy_opt.bench.plots"): "matplotlib only when drawing (--plot, plot, compare)",
    ("synergy_opt.bench.compare", "synergy_opt.cli.plots"): "matplotlib only when drawing (--plot, plot, compare)",
    ("synergy_opt.sim.compare", "synergy_opt.sim.plots"): "matplotlib only when drawing (--plot, plot, compare)",
    ("synergy_opt.sim.compare", "synergy_opt.cli.plots"): "matplotlib only when drawing (--plot, plot, compare)",
    ("synergy_opt.sim.fidelity", "synergy_opt.cli.plots"): "matplotlib only when the experiment draws its figure",
    ("synergy_opt.ideal.lagrangian", "synergy_opt.solvers.highs"): "highspy on first solve",
    ("synergy_opt.joint.master", "synergy_opt.solvers.highs"): "highspy on first solve",
    ("synergy_opt.joint.decomposition", "synergy_opt.solvers.highs"): "highspy on first solve",
    ("synergy_opt.joint.model", "synergy_opt.solvers.highs"): "highspy on a direct solve on HiGHS",
    ("synergy_opt.joint.hetero_master", "synergy_opt.solvers.highs"): "highspy on first solve",
    ("synergy_opt.joint.placing", "synergy_opt.solvers.highs"): "highspy on first solve",
    ("synergy_opt.ideal.hetero_types", "synergy_opt.solvers.highs"): "highspy on first solve",
    ("synergy_opt.solvers.export", "synergy_opt.solvers.highs"): "highspy on first export",
}


def module_name(path: Path) -> str:
    parts = [PACKAGE, *path.relative_to(ROOT).with_suffix("").parts]
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


MODULES = {module_name(path): path for path in sorted(ROOT.rglob("*.py"))}


def is_package(module: str) -> bool:
    return MODULES[module].name == "__init__.py"


def imports(module: str) -> Iterator[tuple[str, bool]]:
    """``(imported module, inside a function)`` for every import of ``module`` within the package."""
    tree = ast.parse(MODULES[module].read_text(encoding="utf-8"))
    in_function: set[int] = set()
    for node in ast.walk(tree):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)):
            in_function.update(id(inner) for inner in ast.walk(node) if inner is not node)
    for node in ast.walk(tree):
        lazy = id(node) in in_function
        if isinstance(node, ast.Import):
            for alias in node.names:
                yield from ((name, lazy) for name in _known(alias.name))
        elif isinstance(node, ast.ImportFrom):
            base = _absolute(module, node.module, node.level)
            for alias in node.names:
                target = f"{base}.{alias.name}"
                yield from ((name, lazy) for name in _known(target if target in MODULES else base))


def _absolute(module: str, name: str | None, level: int) -> str:
    if level == 0:
        return name or ""
    parts = module.split(".") if is_package(module) else module.split(".")[:-1]
    parts = parts[: len(parts) - level + 1]
    return ".".join([*parts, name] if name else parts)


def _known(name: str) -> list[str]:
    """The package module ``name`` (or its nearest module ancestor), or nothing for an outside library."""
    while name and name not in MODULES:
        name = name.rpartition(".")[0]
    return [name] if name.startswith(PACKAGE) else []


def edges(module: str) -> set[str]:
    """What importing ``module`` runs directly: each imported module and the packages above it (see above)."""
    own = {".".join(module.split(".")[:k]) for k in range(1, module.count(".") + 2)}
    out: set[str] = set()
    for target, _ in imports(module):
        parts = target.split(".")
        for k in range(2, len(parts) + 1):
            name = ".".join(parts[:k])
            if name in MODULES and name not in own:
                out.add(name)
    out.discard(module)
    return out


def layer_of(module: str) -> int:
    unit = module.split(".")[1] if "." in module else None
    for index, names in enumerate(LAYERS):
        if unit in names:
            return index
    raise AssertionError(f"{module}: its top-level name {unit!r} is in no layer of LAYERS")


def find_circles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components with more than one module (Tarjan), each as a sorted list."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    circles: list[list[str]] = []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        on_stack.add(node)
        for nxt in sorted(graph.get(node, ())):
            if nxt not in index:
                visit(nxt)
                low[node] = min(low[node], low[nxt])
            elif nxt in on_stack:
                low[node] = min(low[node], index[nxt])
        if low[node] == index[node]:
            component = []
            while True:
                member = stack.pop()
                on_stack.discard(member)
                component.append(member)
                if member == node:
                    break
            if len(component) > 1:
                circles.append(sorted(component))

    for node in sorted(graph):
        if node not in index:
            visit(node)
    return circles


GRAPH = {module: edges(module) for module in MODULES}


def test_the_package_has_no_import_circle() -> None:
    assert find_circles(GRAPH) == []


def test_no_module_imports_a_higher_layer() -> None:
    upward = [
        f"{module} (layer {layer_of(module)}) imports {target} (layer {layer_of(target)})"
        for module, targets in GRAPH.items() if module != PACKAGE
        for target in sorted(targets) if target != PACKAGE and layer_of(target) > layer_of(module)
    ]
    assert upward == []


def test_every_module_has_a_layer() -> None:
    for module in MODULES:
        if module != PACKAGE:
            layer_of(module)


def test_imports_inside_functions_are_only_the_listed_lazy_ones() -> None:
    lazy = {(module, target) for module in MODULES for target, inner in imports(module) if inner}
    assert lazy <= set(LAZY_IMPORTS), sorted(lazy - set(LAZY_IMPORTS))


# --- the checks themselves can fail ---------------------------------------------------------------------------


def test_a_circle_is_found() -> None:
    graph = {"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}
    assert find_circles(graph) == [["a", "b", "c"]]
    assert find_circles({"a": {"b"}, "b": set()}) == []


def test_parent_packages_count_except_the_root_and_the_importers_own() -> None:
    # placement.solve imports synergy_opt.ideal.solve: running it runs the ideal package first.
    assert "synergy_opt.ideal" in edges("synergy_opt.placement.solve")
    assert PACKAGE not in edges("synergy_opt.placement.solve")
    # a module of mechanisms importing a sibling does not depend on its own package's __init__
    assert "synergy_opt.mechanisms" not in edges("synergy_opt.mechanisms.tune")


@pytest.mark.parametrize(("module", "target"), sorted(LAZY_IMPORTS))
def test_each_listed_lazy_import_exists(module: str, target: str) -> None:
    assert (target, True) in set(imports(module)), f"{module} no longer imports {target} lazily: unlist it"


@pytest.mark.parametrize("old", sorted(MOVED_MODULES))
def test_an_old_module_path_fails_naming_its_new_one(old: str) -> None:
    """Old import paths (issue 17) fail with the new path in the message, never with a bare 'No module'."""
    with pytest.raises(ModuleNotFoundError, match="moved to") as caught:
        importlib.import_module(old)
    assert MOVED_MODULES[old].split()[0] in str(caught.value)


def test_a_name_that_left_a_package_names_its_new_home() -> None:
    with pytest.raises(ImportError, match=r"moved to synergy_opt\.sim\.with_profiling_delay"):
        from synergy_opt.profiling import with_profiling_delay  # noqa: F401
    with pytest.raises(AttributeError, match="no attribute 'no_such_name'"):
        _ = synergy_opt.profiling.no_such_name  # type: ignore[attr-defined]
