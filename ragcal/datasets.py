"""The data bundled with ragcal: the FastAPI docs snapshot and its query files."""

from __future__ import annotations

from pathlib import Path

__all__ = ["DATA_DIR", "FASTAPI_CORPUS", "FASTAPI_EXCLUDE", "FASTAPI_QUERIES", "STARTER_QUERIES", "default_exclude"]

#: ``data/`` at the repository root (ragcal is installed in editable mode).
DATA_DIR = Path(__file__).resolve().parent.parent / "data"
#: The Markdown folder of the bundled FastAPI docs.
FASTAPI_CORPUS = DATA_DIR / "corpora" / "fastapi" / "docs"
#: Pages of the snapshot that are not documentation (see data/README.md).
FASTAPI_EXCLUDE = ("_llm-test.md", "translation-banner.md")
#: The labeled query set: answerable, near-domain and unrelated (see data/README.md).
FASTAPI_QUERIES = DATA_DIR / "queries" / "fastapi.csv"
#: A small hand-labeled query file to smoke-test the pipeline.
STARTER_QUERIES = DATA_DIR / "queries" / "starter.csv"


def default_exclude(corpus_dir) -> tuple[str, ...]:
    """Pages left out by default: :data:`FASTAPI_EXCLUDE` for the bundled corpus, none elsewhere."""
    return FASTAPI_EXCLUDE if Path(corpus_dir).resolve() == FASTAPI_CORPUS.resolve() else ()
