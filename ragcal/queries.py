"""Labeled query files: ``id,query,answerable,slice,gold`` (see DESIGN.md).

Validation is strict and happens before anything is computed or written. Each
problem is reported with the file, the line (the header is line 1) and the
column.
"""

from __future__ import annotations

from pathlib import Path

import pandas as pd

__all__ = ["QUERY_COLUMNS", "QueryFileError", "load_queries"]

QUERY_COLUMNS = ("id", "query", "answerable", "slice", "gold")
_BOOLEANS = {"true": True, "false": False}


class QueryFileError(ValueError):
    """A labeled query file is malformed. The message names file, line and column."""


def load_queries(path, *, corpus_paths=None) -> pd.DataFrame:
    """Read and validate a labeled query CSV.

    Parameters
    ----------
    path : str or Path
    corpus_paths : collection of str, default=None
        Document paths of the corpus. When given, every ``gold`` entry must be
        one of them.

    Returns
    -------
    DataFrame
        Columns ``id, query, answerable (bool), slice, gold`` plus any extra
        columns of the file (e.g. ``note``), in file order. ``gold`` is a
        tuple of paths (empty for unanswerable rows).

    Raises
    ------
    QueryFileError
        Missing column, empty file, duplicate or empty id, empty query,
        ``answerable`` other than true/false, gold on an unanswerable row, or
        a gold path not in the corpus.
    """
    path = Path(path)
    if not path.is_file():
        raise QueryFileError(f"{path}: query file not found")
    try:
        frame = pd.read_csv(path, dtype=str, keep_default_na=False, skipinitialspace=False)
    except (pd.errors.EmptyDataError, pd.errors.ParserError, UnicodeDecodeError) as error:
        raise QueryFileError(f"{path}: cannot be read as CSV ({error})") from error
    missing = [column for column in QUERY_COLUMNS if column not in frame.columns]
    if missing:
        raise QueryFileError(
            f"{path}: missing column(s) {', '.join(repr(c) for c in missing)}; the header must contain {', '.join(QUERY_COLUMNS)}"
        )
    if frame.empty:
        raise QueryFileError(f"{path}: no query rows")
    known = set(corpus_paths) if corpus_paths is not None else None
    seen: dict[str, int] = {}
    answerable, gold = [], []
    for position, row in enumerate(frame.itertuples(index=False)):
        line = position + 2
        where = f"{path}, line {line}"
        query_id = row.id.strip()
        if not query_id:
            raise QueryFileError(f"{where}, column 'id': empty id")
        if query_id in seen:
            raise QueryFileError(f"{where}, column 'id': duplicate id {query_id!r} (first on line {seen[query_id]})")
        seen[query_id] = line
        if not row.query.strip():
            raise QueryFileError(f"{where}, column 'query': empty query")
        flag = _BOOLEANS.get(row.answerable.strip().lower())
        if flag is None:
            raise QueryFileError(f"{where}, column 'answerable': expected true or false, got {row.answerable!r}")
        paths = tuple(part.strip() for part in row.gold.split(";") if part.strip())
        if paths and not flag:
            raise QueryFileError(f"{where}, column 'gold': an unanswerable query cannot have gold pages ({row.gold!r})")
        if known is not None:
            unknown = [gold_path for gold_path in paths if gold_path not in known]
            if unknown:
                raise QueryFileError(f"{where}, column 'gold': {', '.join(unknown)} not in the corpus")
        answerable.append(flag)
        gold.append(paths)
    frame["id"] = frame["id"].str.strip()
    frame["answerable"] = answerable
    frame["gold"] = gold
    return frame
