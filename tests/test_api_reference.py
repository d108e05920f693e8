"""The API reference (docs/reference/*.md, built by mkdocs in CI) names every public module of the package, and
mkdocs.yml's navigation lists every document the site holds, so a new module or document cannot be left out."""

from __future__ import annotations

import pkgutil
import re
from pathlib import Path

import synergy_opt

ROOT = Path(__file__).resolve().parent.parent
REFERENCE = ROOT / "docs" / "reference"


def _public_modules() -> list[str]:
    found = pkgutil.walk_packages(synergy_opt.__path__, "synergy_opt.")
    return sorted(
        module.name for module in found
        if not module.ispkg and not any(part.startswith("_") for part in module.name.split("."))
    )


def _documented() -> set[str]:
    return {name for page in REFERENCE.glob("*.md") for name in re.findall(r"^::: (\S+)", page.read_text(), re.M)}


def test_every_public_module_has_a_reference_entry() -> None:
    missing = sorted(set(_public_modules()) - _documented())
    assert not missing, f"add to a page of docs/reference/: {missing}"


def test_every_reference_entry_names_a_module_that_exists() -> None:
    modules = {*_public_modules(), "synergy_opt"}
    packages = {module.name for module in pkgutil.walk_packages(synergy_opt.__path__, "synergy_opt.") if module.ispkg}
    stale = sorted(_documented() - modules - packages)
    assert not stale, f"entries naming no module: {stale}"


def test_the_navigation_lists_every_page() -> None:
    nav = (ROOT / "mkdocs.yml").read_text()
    pages = [*ROOT.glob("docs/*.md"), *ROOT.glob("docs/reference/*.md"), *ROOT.glob("formulations/*.md")]
    missing = sorted(str(page.relative_to(ROOT)) for page in pages if str(page.relative_to(ROOT)) not in nav)
    assert not missing, f"add to mkdocs.yml's nav: {missing}"
