"""Import paths that moved when the package was regrouped by formulation (issue 17), and where they went.

Old module paths fail with a :class:`ModuleNotFoundError` that names the new path, rather than aliasing the
old name: one name per module keeps ``git grep``, tracebacks and pickles unambiguous. The public names of
``synergy_opt`` itself (``so.solve_opt``, ...) did not move.
"""

from __future__ import annotations

import importlib.abc
import importlib.machinery
import sys
from collections.abc import Sequence
from types import ModuleType

MOVED_MODULES: dict[str, str] = {
    "synergy_opt.opt": "synergy_opt.placement (solve_opt, solve_placement, OptResult)",
    "synergy_opt.rounding": "synergy_opt.placement.rounding",
    "synergy_opt.builders": "synergy_opt.ideal.model, synergy_opt.placement.model and synergy_opt.joint",
    "synergy_opt.builders.ideal": "synergy_opt.ideal.model (build_ideal, Reductions)",
    "synergy_opt.builders.placement": "synergy_opt.placement.model",
    "synergy_opt.builders.joint": "synergy_opt.joint (build_joint, build_joint_literal)",
    "synergy_opt.lagrangian": "synergy_opt.ideal.lagrangian",
    "synergy_opt.core_search": "synergy_opt.ideal.core_search",
    "synergy_opt.ideal_core": "synergy_opt.ideal.core",
    "synergy_opt.model": "synergy_opt.solvers.model (LinearModel; export: synergy_opt.solvers.write_model)",
    "synergy_opt.benchmarking": "synergy_opt.bench",
    "synergy_opt.cli_args": "synergy_opt.cli.args",
    "synergy_opt.cli_errors": "synergy_opt.cli.errors",
    "synergy_opt.parallel": "synergy_opt.cli.parallel",
    "synergy_opt.mechanisms.state": "synergy_opt.packing.state",
    "synergy_opt.mechanisms.packing": "synergy_opt.packing.place",
    "synergy_opt.mechanisms.demotion": "synergy_opt.packing.demotion",
    "synergy_opt.mechanisms.order": "synergy_opt.packing.order",
}
# Names that left a package which still exists: package -> {name: new path}.
MOVED_NAMES: dict[str, dict[str, str]] = {
    "synergy_opt.profiling": {"with_profiling_delay": "synergy_opt.sim.with_profiling_delay"},
}


def moved_message(old: str) -> str:
    return f"{old} moved to {MOVED_MODULES[old]}"


def moved_name(package: str, name: str) -> Exception:
    """The error for ``package.name``: an ImportError naming the new path when ``name`` moved out of
    ``package`` (an AttributeError would be swallowed by ``from package import name``), else the plain
    AttributeError."""
    new = MOVED_NAMES.get(package, {}).get(name)
    if new is None:
        return AttributeError(f"module {package!r} has no attribute {name!r}")
    return ImportError(f"{package}.{name} moved to {new}", name=package)


class MovedFinder(importlib.abc.MetaPathFinder):
    """Answers an import of a moved module with an error naming its new path (before the normal finders say
    only "No module named ...")."""

    def find_spec(
        self, fullname: str, path: Sequence[str] | None, target: ModuleType | None = None
    ) -> importlib.machinery.ModuleSpec | None:
        if fullname in MOVED_MODULES:
            raise ModuleNotFoundError(moved_message(fullname), name=fullname)
        return None


def install() -> None:
    """Put the finder first on ``sys.meta_path`` once."""
    if not any(isinstance(finder, MovedFinder) for finder in sys.meta_path):
        sys.meta_path.insert(0, MovedFinder())
