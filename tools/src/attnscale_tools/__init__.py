"""The attnscale site's build: what ``nox -s docs`` runs besides MkDocs, and what the tests read
of its output.

``mkdocs_hooks`` (the hooks both editions' ``mkdocs.yml`` load), ``gallery_format`` (all the build
reads of mkdocs-gallery's and Material's output), ``gallery_cache`` (which examples the gallery
reruns), ``cards``, ``figure_copies``, ``zh_figures``, ``zh_style`` and ``catalogue`` (the Chinese
edition's figures, typography and generated text), ``i18n`` (its translations and tree:
``python -m attnscale_tools.i18n --help``), ``explorer_vectors`` and ``compare_builds``.

The package works on the clone it is installed from, editable (``pip install -e ./tools``):
``ROOT`` is that clone, found once, here.
"""

from __future__ import annotations

from pathlib import Path


def _checkout() -> Path:
    """The clone this package lives in: ``tools/src/attnscale_tools/`` is three levels down."""
    root = Path(__file__).resolve().parents[3]
    if not (root / "mkdocs.yml").is_file() or not (root / "tools" / "pyproject.toml").is_file():
        raise ImportError(
            f"attnscale_tools builds the clone it is installed from: install it editable from "
            f"one (pip install -e ./tools); {Path(__file__).parent} is not inside a clone"
        )
    return root


#: The root of the clone the build works on.
ROOT = _checkout()
