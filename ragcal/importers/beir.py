"""BEIR: the de facto folder format of IR evaluation, imported as Markdown pages and a labeled query file.

A BEIR folder (Thakur et al., 2021) holds::

    corpus.jsonl        {"_id": "d1", "title": "...", "text": "..."}   one document a line
    queries.jsonl       {"_id": "q1", "text": "..."}                    one query a line
    qrels/<split>.tsv   query-id<TAB>corpus-id<TAB>score                 a header line, then one judgement a line

A score above 0 means relevant. What :func:`write_beir` makes of it:

- every document becomes one page, named from its id by
  :func:`~ragcal.importers.passage_pages` (as in a candidates JSONL) and
  headed with its title (its id when the title is empty);
- a query with at least one relevant document in ``qrels/<split>.tsv`` is
  answerable (slice ``answerable``, gold = its relevant documents' pages);
- a query without one is unanswerable, in the slice ``unanswerable_slice``
  (default ``no-relevant-document``): its assessors found nothing relevant,
  or nobody claims it for any split;
- ``group`` is empty: BEIR says nothing about which queries depend on each other.

Which queries are imported (``queries=``). ``queries.jsonl`` usually holds
the queries of every split (train, dev and test), while each qrels file
judges only its own; a train query is not unanswerable because the test
qrels do not name it. So by default (``"split"``) a query is imported when
the split's qrels name it, or when no qrels file in ``qrels/`` names it at
all (how a folder built for abstention carries its unanswerable queries);
queries that only other splits' qrels name are left out, and the summary
says how many. ``"qrels"`` imports only the queries the split's qrels name
(unanswerable ones then are those judged with scores of 0 only); ``"all"``
imports every query in ``queries.jsonl``, each without a relevant document
in this split being unanswerable.

The corpus is streamed twice (its ids first, to name pages and check the
qrels, then its texts, written page by page), so a corpus of millions of
documents is never held in memory; the queries and the split's qrels are.
"""

from __future__ import annotations

import math
from pathlib import Path

from .._params import check_choice, parameter_error
from .candidates import iter_jsonl, passage_pages
from .writing import BenchmarkFileError, text_field

__all__ = ["write_beir", "BEIR_OPTIONS", "QUERY_SELECTIONS", "DEFAULT_UNANSWERABLE_SLICE"]

#: The options :func:`write_beir` takes besides the source and the writer.
BEIR_OPTIONS = ("split", "unanswerable_slice", "queries")
#: Which queries are imported (see the module docstring); the first is the default.
QUERY_SELECTIONS = ("split", "qrels", "all")
#: The slice of queries with no relevant document.
DEFAULT_UNANSWERABLE_SLICE = "no-relevant-document"
QRELS_HEADER = ("query-id", "corpus-id", "score")


def write_beir(
    source, writer, *, split: str = "test", unanswerable_slice: str = DEFAULT_UNANSWERABLE_SLICE, queries: str = "split"
) -> tuple[str, ...]:
    """Import a BEIR folder into ``writer`` (see the module docstring).

    Parameters
    ----------
    source : str or Path
        The folder holding ``corpus.jsonl``, ``queries.jsonl`` and ``qrels/``.
    writer : BenchmarkWriter
    split : str, default="test"
        The qrels file to read: ``qrels/<split>.tsv``.
    unanswerable_slice : str, default="no-relevant-document"
        The slice of queries with no relevant document.
    queries : {"split", "qrels", "all"}, default="split"
        Which queries of ``queries.jsonl`` are imported.

    Returns
    -------
    tuple of str
        Notes for the summary (the split, queries left out).

    Raises
    ------
    CandidateFileError
        Naming the file, the line and the field (a :class:`BenchmarkFileError`
        unless a JSON line itself is unreadable): a missing file, invalid JSON,
        a missing field, a duplicate document or query id, a qrels line that
        is not three tab-separated fields or whose score is not a number, a
        judgement given twice, or a qrels line naming an unknown query or
        document.
    """
    split = check_split(split)
    unanswerable_slice = check_slice(unanswerable_slice)
    queries = check_choice(queries, "queries", "write_beir", QUERY_SELECTIONS)
    folder = Path(source)
    if not folder.is_dir():
        raise BenchmarkFileError(f"{folder}: BEIR folder not found (corpus.jsonl, queries.jsonl, qrels/<split>.tsv)")
    qrels_folder = folder / "qrels"
    qrels_path = qrels_folder / f"{split}.tsv"
    if not qrels_path.is_file():
        known = sorted(path.stem for path in qrels_folder.glob("*.tsv")) if qrels_folder.is_dir() else []
        raise BenchmarkFileError(
            f"{qrels_path}: qrels file not found; the folder's splits are {', '.join(known) if known else '(none)'}"
        )
    pages = passage_pages(corpus_ids(folder / "corpus.jsonl"))
    query_texts = read_queries(folder / "queries.jsonl")
    relevant = read_qrels(qrels_path, query_texts, pages)
    other_splits = set()
    if queries == "split":
        for path in sorted(qrels_folder.glob("*.tsv")):
            if path != qrels_path:
                other_splits |= qrels_query_ids(path)
    for line_number, record in iter_jsonl(folder / "corpus.jsonl", what="BEIR corpus"):
        where = f"{folder / 'corpus.jsonl'}, line {line_number}"
        document_id = text_field(record, "_id", where)
        if document_id not in pages:
            raise BenchmarkFileError(f"{where}: document {document_id!r} was not in the file when first read")
        writer.add_page(
            pages[document_id],
            text_field(record, "title", where, required=False),
            document_text(record, where),
            page_id=document_id,
        )
    left_out = 0
    for query_id, text in query_texts.items():
        judged = query_id in relevant
        if not judged and (queries == "qrels" or (queries == "split" and query_id in other_splits)):
            left_out += 1
            continue
        gold = [pages[document_id] for document_id in relevant.get(query_id, ())]
        writer.add_question(
            query_id, text, answerable=bool(gold), slice="answerable" if gold else unanswerable_slice, gold=gold
        )
    notes = [f"split {split!r}, queries {queries!r}"]
    if left_out:
        reason = "the split's qrels do not name them" if queries == "qrels" else "only other splits' qrels name them"
        notes.append(f"{left_out} of the {len(query_texts)} queries in queries.jsonl left out: {reason}")
    return tuple(notes)


def check_split(split) -> str:
    if not isinstance(split, str) or not split or split.startswith(".") or Path(split).name != split:
        raise parameter_error("split", "write_beir", "a file name under qrels/ without .tsv, e.g. 'test'", split)
    return split


def check_slice(name) -> str:
    if not isinstance(name, str) or not name.strip() or name != name.strip() or name == "answerable":
        raise parameter_error(
            "unanswerable_slice", "write_beir", "a non-empty slice name other than 'answerable'", name
        )
    return name


def document_text(record, where: str) -> str:
    """A document's ``text``: the field must be there, and may be empty (some BEIR documents are a title only)."""
    if "text" not in record or record["text"] is None:
        raise BenchmarkFileError(f"{where}: missing field 'text'")
    return text_field(record, "text", where, required=False)


def corpus_ids(path: Path) -> list[str]:
    """The document ids of ``corpus.jsonl`` in file order, each checked once (fields present, no duplicate)."""
    lines: dict[str, int] = {}
    for line_number, record in iter_jsonl(path, what="BEIR corpus"):
        where = f"{path}, line {line_number}"
        document_id = text_field(record, "_id", where)
        if document_id in lines:
            raise BenchmarkFileError(
                f"{where}, field '_id': duplicate document id {document_id!r} (first on line {lines[document_id]})"
            )
        document_text(record, where)
        text_field(record, "title", where, required=False)
        lines[document_id] = line_number
    if not lines:
        raise BenchmarkFileError(f"{path}: no documents")
    return list(lines)


def read_queries(path: Path) -> dict[str, str]:
    """``{query id: text}`` of ``queries.jsonl``, in file order."""
    texts, lines = {}, {}
    for line_number, record in iter_jsonl(path, what="BEIR queries file"):
        where = f"{path}, line {line_number}"
        query_id = text_field(record, "_id", where)
        if query_id in lines:
            raise BenchmarkFileError(
                f"{where}, field '_id': duplicate query id {query_id!r} (first on line {lines[query_id]})"
            )
        lines[query_id] = line_number
        texts[query_id] = text_field(record, "text", where)
    if not texts:
        raise BenchmarkFileError(f"{path}: no queries")
    return texts


def qrels_lines(path: Path):
    """``(line number, query id, document id, score text)`` of a qrels file; the header line is skipped when present."""
    try:
        stream = open(path, encoding="utf-8-sig")
    except OSError as error:
        raise BenchmarkFileError(f"{path}: cannot be read ({error})") from error
    with stream:
        line_number = 0
        try:
            for line_number, line in enumerate(stream, start=1):
                line = line.rstrip("\r\n")
                if not line.strip():
                    continue
                fields = line.split("\t")
                if line_number == 1 and tuple(field.strip().lower() for field in fields) == QRELS_HEADER:
                    continue
                if len(fields) != 3:
                    raise BenchmarkFileError(
                        f"{path}, line {line_number}: expected 3 tab-separated fields "
                        f"(query-id, corpus-id, score), found {len(fields)}"
                    )
                query_id, document_id, score = (field.strip() for field in fields)
                yield line_number, query_id, document_id, score
        except UnicodeDecodeError as error:
            raise BenchmarkFileError(f"{path}, line {line_number + 1}: not UTF-8 text ({error.reason})") from error


def read_qrels(path: Path, query_texts, pages) -> dict[str, list[str]]:
    """``{query id: relevant document ids}`` for every query the file judges (an empty list: none relevant)."""
    judgements: dict[str, dict[str, tuple[int, bool]]] = {}  # query -> document -> (line, relevant)
    for line_number, query_id, document_id, score_text in qrels_lines(path):
        where = f"{path}, line {line_number}"
        if query_id not in query_texts:
            raise BenchmarkFileError(f"{where}, field 'query-id': unknown query {query_id!r} (not in queries.jsonl)")
        if document_id not in pages:
            raise BenchmarkFileError(
                f"{where}, field 'corpus-id': unknown document {document_id!r} (not in corpus.jsonl)"
            )
        try:
            score = float(score_text)
        except ValueError:
            score = math.nan
        if not math.isfinite(score):
            raise BenchmarkFileError(f"{where}, field 'score': expected a number, got {score_text!r}")
        judged = judgements.setdefault(query_id, {})
        if document_id in judged:
            raise BenchmarkFileError(
                f"{where}: query {query_id!r} and document {document_id!r} judged twice (first on line "
                f"{judged[document_id][0]})"
            )
        judged[document_id] = (line_number, score > 0)
    if not judgements:
        raise BenchmarkFileError(f"{path}: no judgements")
    return {
        query_id: [document_id for document_id, (_, is_relevant) in judged.items() if is_relevant]
        for query_id, judged in judgements.items()
    }


def qrels_query_ids(path: Path) -> set[str]:
    """The query ids another split's qrels file names (nothing else of it is checked)."""
    return {query_id for _, query_id, _, _ in qrels_lines(path)}
