"""Sphinx configuration of ragcal's documentation site: `make docs` builds it into docs/_build/html.

The source folder is the project root, so the site renders the executed notebooks (notebooks/*.ipynb, with their
figures) and the study's results (results/**/*.md) where they are, without copies; ``include_patterns`` keeps
everything else out. The API reference is generated from the docstrings (numpydoc style, through napoleon).
"""

from __future__ import annotations

import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

project = "ragcal"
author = "the ragcal developers"
copyright = "2026, the ragcal developers"

extensions = [
    "myst_nb",
    "sphinx.ext.autodoc",
    "sphinx.ext.napoleon",
    "sphinx.ext.intersphinx",
]

root_doc = "docs/index"
include_patterns = [
    "docs/**",
    "notebooks/*.ipynb",
    "results/cross_corpus.md",
    "results/cross_model.md",
    "benchmarks/README.md",
    "results/*/summary.md",
    "results/judge/*/summary.md",
]
exclude_patterns = ["docs/_build/**", "docs/_extra/**", "docs/conf.py"]

# Notebooks are executed by `ragcal reproduce` and committed with their outputs: the site shows them as they are.
nb_execution_mode = "off"
myst_heading_anchors = 3
myst_enable_extensions = ["colon_fence", "dollarmath"]

autodoc_member_order = "bysource"
autodoc_typehints = "none"
autodoc_default_options = {"members": True, "show-inheritance": False}
# Sphinx 9's new autodoc re-reads third-party sources and writes string annotations back onto pydantic models,
# which breaks importing llama_index (sphinx-doc/sphinx#14337); the class-based implementation does not.
autodoc_use_legacy_class_based = True
napoleon_google_docstring = False
napoleon_numpy_docstring = True
napoleon_use_rtype = False
napoleon_use_ivar = True

intersphinx_mapping = {}

html_theme = "pydata_sphinx_theme"
html_title = "ragcal"
html_theme_options = {
    "navigation_with_keys": False,
    "show_toc_level": 2,
    "secondary_sidebar_items": ["page-toc"],
}
html_show_sourcelink = False
# The site opens at docs/index.html; the root index.html sends a browser there.
html_extra_path = ["_extra"]
