"""``import_benchmark``: a public benchmark or a candidates JSONL, written as Markdown pages and a query file.

The formats live in one registry, :data:`BENCHMARK_FORMATS`; the command
line's choices, its per-format options and every error message are taken
from it. Adding a format takes one function ``write(source, writer,
**options) -> notes`` and one registry line.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from .._params import check_choice
from .beir import BEIR_OPTIONS, write_beir
from .candidates import passage_pages, read_candidates_jsonl
from .squad2 import SQUAD2_OPTIONS, write_squad2
from .writing import BenchmarkWriter, ImportSummary

__all__ = ["BenchmarkFormat", "BENCHMARK_FORMATS", "import_benchmark", "write_candidates"]


def write_candidates(source, writer) -> tuple[str, ...]:
    """Import a candidates JSONL (:func:`~ragcal.importers.read_candidates_jsonl`) into ``writer``.

    Every passage becomes one page (:func:`~ragcal.importers.passage_pages`),
    a passage listed under several questions once. A question's gold is the
    pages of its passages marked ``"answers": true`` (none: an answerable
    question with empty gold, counted in the summary); its slice is the
    file's, else ``answerable`` / ``unanswerable``. ``group`` is empty.
    """
    candidates = read_candidates_jsonl(source, require_labels=True)
    pages = passage_pages(candidates.passages)
    for passage_id, passage in candidates.passages.items():
        writer.add_page(pages[passage_id], passage.title, passage.text, page_id=passage_id)
    for question in candidates.questions:
        writer.add_question(
            question.id,
            question.query,
            answerable=question.answerable,
            slice=question.slice,
            gold=[pages[passage_id] for passage_id in question.gold],
        )
    return ()


@dataclass(frozen=True)
class BenchmarkFormat:
    """One importable format: its name, what its source is, its importer and the options the importer takes."""

    name: str
    source: str
    write: Callable
    options: tuple[str, ...] = ()


#: Every format :func:`import_benchmark` reads, by name.
BENCHMARK_FORMATS = {
    benchmark_format.name: benchmark_format
    for benchmark_format in (
        BenchmarkFormat("squad2", "the official SQuAD 2.0 JSON file", write_squad2, SQUAD2_OPTIONS),
        BenchmarkFormat(
            "beir", "a BEIR folder (corpus.jsonl, queries.jsonl, qrels/<split>.tsv)", write_beir, BEIR_OPTIONS
        ),
        BenchmarkFormat("candidates", "a candidates JSONL, one question with its passages a line", write_candidates),
    )
}


def import_benchmark(format: str, source, out, *, overwrite: bool = False, **options) -> ImportSummary:
    """Write ``out/corpus/`` (one Markdown page per passage) and ``out/queries.csv`` from a benchmark.

    Parameters
    ----------
    format : {"squad2", "beir", "candidates"}
        A key of :data:`BENCHMARK_FORMATS`.
    source : str or Path
        The file (squad2, candidates) or folder (beir) to read.
    out : str or Path
        The folder to write. It must not exist or be empty, unless ``overwrite``.
    overwrite : bool, default=False
        Replace an existing ``out``, once the new folder is complete.
    **options
        The format's own options: ``articles`` (squad2); ``split``,
        ``unanswerable_slice``, ``queries`` (beir). See
        :func:`~ragcal.importers.squad2.write_squad2` and
        :func:`~ragcal.importers.beir.write_beir`.

    Returns
    -------
    ImportSummary
        Pages and questions written, per slice and group.

    Raises
    ------
    ValueError
        An unknown format, an option the format does not take, or a source
        that cannot be read (:class:`~ragcal.importers.CandidateFileError`,
        naming the file, the line or JSON path, and the field). Nothing is
        left behind: neither ``out`` nor a temporary folder.
    FileExistsError
        ``out`` exists and is not empty, and ``overwrite`` is false.

    Examples
    --------
    >>> import json, pathlib, tempfile
    >>> folder = pathlib.Path(tempfile.mkdtemp())
    >>> question = {"id": "q1", "query": "Where is the Louvre?", "answerable": True,
    ...             "passages": [{"id": "louvre", "title": "Louvre", "text": "The Louvre is in Paris.", "answers": True}]}
    >>> _ = (folder / "run.jsonl").write_text(json.dumps(question) + "\\n")
    >>> summary = import_benchmark("candidates", folder / "run.jsonl", folder / "bench")
    >>> summary.pages, summary.questions, (folder / "bench" / "queries.csv").read_text().splitlines()[1]
    (1, 1, 'q1,Where is the Louvre?,true,answerable,louvre.md,')

    SQuAD 2.0, two of its articles (``--articles`` on the command line):

    >>> import_benchmark("squad2", "dev-v2.0.json", "squad2-dev", articles="Normans,Huguenot")  # doctest: +SKIP
    """
    benchmark_format = BENCHMARK_FORMATS[check_choice(format, "format", "import_benchmark", BENCHMARK_FORMATS)]
    unknown = [name for name in options if name not in benchmark_format.options]
    if unknown:
        takes = ", ".join(benchmark_format.options) or "no options"
        raise ValueError(
            f"import_benchmark: {', '.join(repr(name) for name in unknown)} is not an option of format "
            f"{benchmark_format.name!r}, which takes {takes}"
        )
    source = Path(source)
    out = Path(out)
    if overwrite and out.is_dir() and source.resolve().is_relative_to(out.resolve()):
        raise ValueError(f"{out}: the source {source} lies inside it; overwriting it would delete the source")
    with BenchmarkWriter(out, overwrite=overwrite) as writer:
        notes = benchmark_format.write(source, writer, **options)
    return writer.summary(benchmark_format.name, source, notes=notes)
