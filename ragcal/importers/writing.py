"""An imported benchmark on disk: a Markdown folder and a labeled query file, written whole or not at all.

Every importer (:mod:`~ragcal.importers.squad2`, :mod:`~ragcal.importers.beir`,
the candidates JSONL) feeds one :class:`BenchmarkWriter`, which writes::

    DIR/corpus/<page>.md    one page per passage: "# <title>", a blank line, the text
    DIR/queries.csv         id,query,answerable,slice,gold,group

``queries.csv`` is ragcal's labeled format (:func:`ragcal.queries.load_queries`
reads it; ``gold`` holds ``;``-separated page paths relative to
``DIR/corpus``) plus a ``group`` column: questions of one group are not
independent of each other (SQuAD's questions on one article), so any split
into calibration and test parts must keep a group on one side.

Everything is written into a temporary folder beside ``DIR`` and renamed into
place once complete: an error in the source leaves neither a half-written
``DIR`` nor the temporary folder behind, and ``overwrite=True`` replaces an
existing ``DIR`` only after the new one is complete.
"""

from __future__ import annotations

import csv
import json
import os
import shutil
import tempfile
from collections import Counter
from dataclasses import dataclass
from pathlib import Path

from .._io import _current_umask
from .candidates import CandidateFileError

__all__ = [
    "BenchmarkFileError",
    "BenchmarkWriter",
    "ImportSummary",
    "QUERY_FILE_COLUMNS",
    "page_markdown",
    "text_field",
]

#: The header of an imported ``queries.csv``: ragcal's labeled columns, then ``group``.
QUERY_FILE_COLUMNS = ("id", "query", "answerable", "slice", "gold", "group")


class BenchmarkFileError(CandidateFileError):
    """A benchmark file (SQuAD JSON, BEIR folder) that cannot be imported; the message names file, place and field."""


def text_field(record, name: str, where: str, *, required: bool = True) -> str:
    """``record[name]`` as stripped text (a JSON string or an integer id); errors name ``where`` and the field.

    A missing or empty required field is an error; a missing optional one is ``""``.
    """
    value = record.get(name)
    if value is None:
        if required:
            raise BenchmarkFileError(f"{where}: missing field {name!r}")
        return ""
    if isinstance(value, bool) or not isinstance(value, (str, int)):
        raise BenchmarkFileError(f"{where}, field {name!r}: expected a string, got {json.dumps(value)[:60]}")
    text = str(value).strip()
    if required and not text:
        raise BenchmarkFileError(f"{where}, field {name!r}: empty")
    return text


def page_markdown(title: str, text: str, *, page_id: str) -> str:
    """One page: ``# <title>`` (``page_id`` when the title is empty), a blank line, the text.

    Whitespace runs in the heading (a title over several lines) become one space; the text is stripped.

    Examples
    --------
    >>> page_markdown("", "  Some text. ", page_id="doc-7")
    '# doc-7\\n\\nSome text.\\n'
    """
    heading = " ".join(title.split()) or " ".join(page_id.split())
    text = text.strip()
    return f"# {heading}\n\n{text}\n" if text else f"# {heading}\n"


@dataclass(frozen=True)
class ImportSummary:
    """What an import wrote.

    Attributes
    ----------
    format : str
        The benchmark format (a key of ``ragcal.importers.BENCHMARK_FORMATS``).
    source, out, corpus, queries : Path
        The source read, the folder written, its ``corpus/`` and its ``queries.csv``.
    pages, questions, answerable : int
    unanswerable : tuple of (str, int)
        Unanswerable questions per slice, sorted by slice.
    answerable_without_gold : int
        Answerable questions whose source names no answering passage (empty ``gold``).
    groups : int
        Distinct non-empty values of the ``group`` column (0: every question stands alone).
    notes : tuple of str
        What the importer left out or decided, one sentence each.
    """

    format: str
    source: Path
    out: Path
    corpus: Path
    queries: Path
    pages: int
    questions: int
    answerable: int
    unanswerable: tuple[tuple[str, int], ...]
    answerable_without_gold: int
    groups: int
    notes: tuple[str, ...] = ()

    @property
    def unanswerable_total(self) -> int:
        return sum(count for _, count in self.unanswerable)


class BenchmarkWriter:
    """Write one imported benchmark into ``out`` through a temporary folder (see the module docstring).

    Use as a context manager: pages and questions go into the temporary
    folder; leaving the block normally renames it to ``out``, leaving it with
    an exception removes it.

    Parameters
    ----------
    out : str or Path
        The folder to create. Its parent folders are created when missing.
    overwrite : bool, default=False
        Replace an existing non-empty ``out`` (once the new one is complete).
        Without it such a folder is an error, raised before anything is read.

    Examples
    --------
    >>> import tempfile, pathlib
    >>> out = pathlib.Path(tempfile.mkdtemp()) / "tiny"
    >>> with BenchmarkWriter(out) as writer:
    ...     writer.add_page("p1.md", "Paris", "Paris is the capital of France.", page_id="p1")
    ...     writer.add_question("q1", "Capital of France?", answerable=True, slice="answerable", gold=["p1.md"])
    ...     writer.add_question("q2", "What is the capital of Mars?", answerable=False, slice="unrelated")
    >>> (out / "corpus" / "p1.md").read_text()
    '# Paris\\n\\nParis is the capital of France.\\n'
    >>> writer.summary("candidates", "run.jsonl").unanswerable
    (('unrelated', 1),)
    """

    def __init__(self, out, *, overwrite: bool = False):
        self.out = Path(out)
        self.overwrite = bool(overwrite)
        refuse_existing(self.out, overwrite=self.overwrite)
        self.temporary: Path | None = None
        self.pages: dict[str, str] = {}  # lower-cased page path -> page path
        self.question_ids: set[str] = set()
        self.answerable = 0
        self.answerable_without_gold = 0
        self.unanswerable: Counter = Counter()
        self.groups: set[str] = set()
        self.committed = False

    def __enter__(self) -> BenchmarkWriter:
        self.out.parent.mkdir(parents=True, exist_ok=True)
        self.temporary = Path(tempfile.mkdtemp(dir=self.out.parent, prefix=f".{self.out.name}.", suffix=".tmp"))
        try:
            (self.temporary / "corpus").mkdir()
            self.query_stream = open(self.temporary / "queries.csv", "w", encoding="utf-8", newline="")  # noqa: SIM115
        except BaseException:
            shutil.rmtree(self.temporary, ignore_errors=True)
            raise
        # The csv module's own dialect: "\r\n" line ends, quotes only where needed.
        self.query_rows = csv.writer(self.query_stream)
        self.query_rows.writerow(QUERY_FILE_COLUMNS)
        return self

    def __exit__(self, error_type, error, traceback) -> None:
        self.query_stream.close()
        if error_type is not None:
            shutil.rmtree(self.temporary, ignore_errors=True)
            return
        try:
            if not self.pages or not self.question_ids:
                missing = "passages" if not self.pages else "questions"
                raise ValueError(f"{self.out}: nothing to import, the source holds no {missing}")
            self._move_into_place()
        except BaseException:
            shutil.rmtree(self.temporary, ignore_errors=True)
            raise
        self.committed = True

    def add_page(self, page: str, title: str, text: str, *, page_id: str) -> None:
        """Write ``corpus/<page>``: ``# title`` (``page_id`` when empty) and ``text``.

        ``page`` is a relative ``/``-separated path ending in ``.md``; two pages
        may not share a path, even in letter case only (one file on macOS and
        Windows).
        """
        folded = page.lower()
        if folded in self.pages:
            raise ValueError(f"page {page!r} would be written twice (as {self.pages[folded]!r} before)")
        parts = page.split("/")
        if not page.endswith(".md") or any(part in ("", ".", "..") for part in parts):
            raise ValueError(f"page {page!r} is not a relative path to a .md file")
        target = self.temporary / "corpus" / page
        if len(parts) > 1:
            target.parent.mkdir(parents=True, exist_ok=True)
        with open(target, "w", encoding="utf-8", newline="") as stream:
            stream.write(page_markdown(title, text, page_id=page_id))
        self.pages[folded] = page

    def add_question(
        self, question_id: str, query: str, *, answerable: bool, slice: str, gold=(), group: str = ""
    ) -> None:
        """Append one row to ``queries.csv``; every ``gold`` page must have been written already."""
        if question_id in self.question_ids:
            raise ValueError(f"question id {question_id!r} would be written twice")
        gold = tuple(dict.fromkeys(gold))
        if not answerable and gold:
            raise ValueError(f"question {question_id!r}: an unanswerable question cannot have gold pages")
        unknown = [page for page in gold if self.pages.get(page.lower()) != page]
        if unknown:
            raise ValueError(f"question {question_id!r}: gold page(s) {', '.join(unknown)} not written")
        self.query_rows.writerow([question_id, query, "true" if answerable else "false", slice, ";".join(gold), group])
        self.question_ids.add(question_id)
        if answerable:
            self.answerable += 1
            self.answerable_without_gold += not gold
        else:
            self.unanswerable[slice] += 1
        if group:
            self.groups.add(group)

    def summary(self, format: str, source, *, notes=()) -> ImportSummary:
        """What was written (call after the ``with`` block)."""
        if not self.committed:
            raise RuntimeError("the benchmark folder is not complete yet; call summary() after the with block")
        return ImportSummary(
            format=format,
            source=Path(source),
            out=self.out,
            corpus=self.out / "corpus",
            queries=self.out / "queries.csv",
            pages=len(self.pages),
            questions=len(self.question_ids),
            answerable=self.answerable,
            unanswerable=tuple(sorted(self.unanswerable.items())),
            answerable_without_gold=self.answerable_without_gold,
            groups=len(self.groups),
            notes=tuple(notes),
        )

    def _move_into_place(self) -> None:
        os.chmod(self.temporary, 0o777 & ~_current_umask())  # mkdtemp's owner-only mode is no output's mode
        refuse_existing(self.out, overwrite=self.overwrite)
        if self.out.is_dir() and not any(self.out.iterdir()):
            self.out.rmdir()
        if not self.out.exists():
            os.rename(self.temporary, self.out)
            return
        previous = Path(tempfile.mkdtemp(dir=self.out.parent, prefix=f".{self.out.name}.", suffix=".old"))
        previous.rmdir()
        os.rename(self.out, previous)
        try:
            os.rename(self.temporary, self.out)
        except BaseException:
            os.rename(previous, self.out)
            raise
        shutil.rmtree(previous, ignore_errors=True)


def refuse_existing(out: Path, *, overwrite: bool) -> None:
    """Raise when ``out`` is a file, or a non-empty folder and ``overwrite`` is false."""
    if out.exists() and not out.is_dir():
        raise FileExistsError(f"{out}: exists and is not a folder")
    if out.is_dir() and not overwrite and any(out.iterdir()):
        raise FileExistsError(f"{out}: folder exists and is not empty (overwrite=True, or --force, replaces it)")
