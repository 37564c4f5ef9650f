"""The data bundled with ragcal: the FastAPI docs and Rust book snapshots and their query files."""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

__all__ = [
    "DATA_DIR",
    "FASTAPI_CORPUS",
    "FASTAPI_EXCLUDE",
    "FASTAPI_ACCESS_MAP",
    "FASTAPI_QUERIES",
    "FASTAPI_LIVE_QUERIES",
    "RUST_BOOK_CORPUS",
    "RUST_BOOK_EXCLUDE",
    "RUST_BOOK_QUERIES",
    "STARTER_QUERIES",
    "BundledCorpus",
    "BUNDLED",
    "bundled",
    "default_exclude",
    "find_data_dir",
    "check_data_dir",
]


def find_data_dir() -> Path:
    """Where the bundled corpora and query sets are, by a fixed rule.

    1. ``$RAGCAL_DATA_DIR``, when set;
    2. ``data/`` of the checkout that this ragcal was imported from (an
       editable install, or running from the repository);
    3. ``ragcal/_bundled/`` inside an installed wheel, which ships the data.

    The first that holds ``corpora/`` wins; when none does, the checkout's path
    is returned and :func:`check_data_dir` says what to do.
    """
    package = Path(__file__).resolve().parent
    candidates = [package.parent / "data", package / "_bundled"]
    if os.environ.get("RAGCAL_DATA_DIR"):
        candidates.insert(0, Path(os.environ["RAGCAL_DATA_DIR"]))
    return next((folder for folder in candidates if (folder / "corpora").is_dir()), candidates[0])


def check_data_dir(folder=None) -> Path:
    """Raise a ``FileNotFoundError`` that says what to do when the bundled data is missing."""
    folder = Path(folder or DATA_DIR)
    if not (folder / "corpora").is_dir():
        raise FileNotFoundError(
            f"ragcal's bundled corpora were not found (looked in {folder}). Set RAGCAL_DATA_DIR to the data/ folder "
            "of a ragcal checkout, or install ragcal from a wheel built from the repository (it ships data/)."
        )
    return folder


#: The folder with ``corpora/`` and ``queries/``: see :func:`find_data_dir`.
DATA_DIR = find_data_dir()
#: The Markdown folder of the bundled FastAPI docs.
FASTAPI_CORPUS = DATA_DIR / "corpora" / "fastapi" / "docs"
#: Pages of the snapshot that are not documentation (see data/README.md).
FASTAPI_EXCLUDE = ("_llm-test.md", "translation-banner.md")
#: The labeled query set: answerable, near-domain and unrelated (see data/README.md).
FASTAPI_QUERIES = DATA_DIR / "queries" / "fastapi.csv"
#: New FastAPI questions that the labeled set has never seen, for a live log (see data/README.md).
FASTAPI_LIVE_QUERIES = DATA_DIR / "queries" / "fastapi-live.csv"
#: The Markdown folder of the bundled Rust book; its listings sit beside it, in ``rust-book/listings/``.
RUST_BOOK_CORPUS = DATA_DIR / "corpora" / "rust-book" / "src"
#: mdBook's table of contents, a list of links rather than prose (see data/README.md).
RUST_BOOK_EXCLUDE = ("SUMMARY.md",)
#: The labeled query set for the Rust book (see data/README.md).
RUST_BOOK_QUERIES = DATA_DIR / "queries" / "rust-book.csv"
#: A made-up access map for the FastAPI docs: the access-control demonstration (see data/access/README.md).
FASTAPI_ACCESS_MAP = DATA_DIR / "access" / "fastapi-demo.csv"
#: A small hand-labeled query file to smoke-test the pipeline.
STARTER_QUERIES = DATA_DIR / "queries" / "starter.csv"


@dataclass(frozen=True)
class BundledCorpus:
    """A corpus that ships with ragcal, with its labeled query set.

    Attributes
    ----------
    name : str
        Short name, used for results folders (``results/<name>/``).
    title : str
        How reports name it.
    corpus : Path
        The Markdown folder.
    queries : Path
        The labeled query file.
    exclude : tuple of str
        Pages of the folder that are not documentation (pass them to
        ``build_index(..., exclude=spec.exclude)``).
    published : bool
        Whether the published experiment was run on it (FastAPI): reports then
        set our numbers beside the published ones.
    """

    name: str
    title: str
    corpus: Path
    queries: Path
    exclude: tuple = ()
    published: bool = False


#: The bundled corpora, FastAPI first (the published experiment).
BUNDLED = {
    "fastapi": BundledCorpus(
        "fastapi", "FastAPI docs", FASTAPI_CORPUS, FASTAPI_QUERIES, exclude=FASTAPI_EXCLUDE, published=True
    ),
    "rust-book": BundledCorpus(
        "rust-book", "Rust book", RUST_BOOK_CORPUS, RUST_BOOK_QUERIES, exclude=RUST_BOOK_EXCLUDE
    ),
}


def bundled(name: str) -> BundledCorpus:
    """Look a bundled corpus up by name; an unknown name lists the known ones."""
    try:
        return BUNDLED[name]
    except KeyError:
        raise ValueError(f"unknown bundled corpus {name!r}; bundled corpora are: {', '.join(BUNDLED)}") from None


_DEFAULT_EXCLUDES = {FASTAPI_CORPUS: FASTAPI_EXCLUDE, RUST_BOOK_CORPUS: RUST_BOOK_EXCLUDE}


def default_exclude(corpus_dir) -> tuple[str, ...]:
    """The non-doc pages of a bundled corpus, for the command line's default ``--exclude``.

    No library function applies this by itself: ``build_index`` and friends
    leave out exactly the pages they are given.

    Parameters
    ----------
    corpus_dir : str or Path
        A Markdown folder.

    Returns
    -------
    tuple of str
        :data:`FASTAPI_EXCLUDE` for the bundled FastAPI docs,
        :data:`RUST_BOOK_EXCLUDE` for the bundled Rust book, ``()`` for any
        other folder.
    """
    resolved = Path(corpus_dir).resolve()
    return next((pages for corpus, pages in _DEFAULT_EXCLUDES.items() if corpus.resolve() == resolved), ())
