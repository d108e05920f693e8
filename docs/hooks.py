"""mkdocs hook: the site's pages at their places in the repository (``README.md`` as the home page, ``docs/*.md``,
``formulations/*.md``, ``docs/reference/*.md``), so that relative links between them hold on the site and in the
repository alike. Nothing else of the repository is a page."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from mkdocs.structure.files import File, Files

ROOT = Path(__file__).resolve().parent.parent
PAGES = ("README.md", "docs/*.md", "docs/reference/*.md", "formulations/*.md")


def on_files(files: Files, config: Any) -> Files:
    """Replace what mkdocs found under ``docs_dir`` with the repository's documents, keyed by their paths."""
    kept = [file for file in files if not file.src_uri.endswith((".md", ".py"))]  # theme and plugin assets
    pages = [File(str(path.relative_to(ROOT)), str(ROOT), config["site_dir"], config["use_directory_urls"])
             for pattern in PAGES for path in sorted(ROOT.glob(pattern))]
    return Files([*kept, *pages])
