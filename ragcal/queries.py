"""Labeled query files: ``id,query,answerable,slice,gold`` (see DESIGN.md).

Validation is strict and happens before anything is computed or written. Each
problem is reported with the file, the line (the header is line 1) and the
column.
"""

from __future__ import annotations

import math
from pathlib import Path

import pandas as pd

from ._io import delimiter_problem

__all__ = ["QUERY_COLUMNS", "QueryFileError", "close_path", "gold_pages", "load_queries", "parse_answerable"]

QUERY_COLUMNS = ("id", "query", "answerable", "slice", "gold")
_BOOLEANS = {"true": True, "false": False, "yes": True, "no": False, "1": True, "0": False}
#: How an unreadable ``answerable`` cell is explained, in query files and score tables alike.
ANSWERABLE_EXPECTED = "expected true or false (or 1/0, yes/no)"


def parse_answerable(value) -> bool | None:
    """``answerable`` label of one cell, or None when it is not one.

    Accepted, case-insensitively: true/false, yes/no, 1/0 and the numbers 1.0/0.0
    (as a spreadsheet or pandas may write them).
    """
    if isinstance(value, bool):
        return value
    if isinstance(value, str):
        text = value.strip().lower()
        if text in _BOOLEANS:
            return _BOOLEANS[text]
        try:
            value = float(text)
        except ValueError:
            return None
    try:
        number = float(value)
    except (TypeError, ValueError):
        return None
    return {1.0: True, 0.0: False}.get(number)


def describe_cell(value) -> str:
    """A cell as the user typed it, for messages: ``'maybe'``, ``'2.0'`` or ``an empty cell``; never a NumPy repr."""
    if value is None or (isinstance(value, float) and math.isnan(value)) or not str(value).strip():
        return "an empty cell"
    return repr(str(value))


def _normalise_path(path: str) -> str:
    path = path.strip().replace("\\", "/")
    while path.startswith("./"):
        path = path[2:]
    return path.lstrip("/")


def close_path(path: str, known) -> str | None:
    """The one known path that ``path`` differs from only by a prefix, else None.

    Catches ``./tutorial/cors.md``, ``docs/tutorial/cors.md`` (the corpus folder
    written in front), ``tutorial\\cors.md`` and ``cors.md`` (a folder left out)
    for ``tutorial/cors.md``. Several candidates give None: no guess.
    """
    normalised = _normalise_path(path)
    if normalised in known:
        return normalised
    candidates = [
        candidate for candidate in known if normalised.endswith("/" + candidate) or candidate.endswith("/" + normalised)
    ]
    return candidates[0] if len(candidates) == 1 else None


def unknown_paths_message(unknown, known, *, corpus: str = "the corpus") -> str:
    """``"a.md, b.md not in the corpus; did you mean x/a.md?"``: the unknown paths and any close match."""
    message = f"{', '.join(unknown)} not in {corpus}"
    suggestions = {path: close_path(path, known) for path in unknown}
    suggestions = {path: match for path, match in suggestions.items() if match}
    if len(unknown) == 1 and suggestions:
        message += f"; did you mean {suggestions[unknown[0]]}?"
    elif suggestions:
        message += "; did you mean " + ", ".join(f"{match} (for {path})" for path, match in suggestions.items()) + "?"
    if suggestions:
        message += " Gold paths are relative to the corpus folder."
    return message


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
        A header separated by semicolons or tabs, missing column, empty file,
        duplicate or empty id, empty query, ``answerable`` other than
        true/false, yes/no or 1/0, gold on an unanswerable row, or a gold path
        not in the corpus (with the close match when it differs only by a
        prefix such as ``./`` or the corpus folder).
    """
    path = Path(path)
    if not path.is_file():
        raise QueryFileError(f"{path}: query file not found")
    with open(path, encoding="utf-8-sig", errors="replace") as stream:
        problem = delimiter_problem(stream.readline())
    if problem:
        raise QueryFileError(f"{path}: {problem}")
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
        flag = parse_answerable(row.answerable)
        if flag is None:
            raise QueryFileError(
                f"{where}, column 'answerable': {ANSWERABLE_EXPECTED}, got {describe_cell(row.answerable)}"
            )
        paths = tuple(part.strip() for part in row.gold.split(";") if part.strip())
        if paths and not flag:
            raise QueryFileError(f"{where}, column 'gold': an unanswerable query cannot have gold pages ({row.gold!r})")
        if known is not None:
            unknown = [gold_path for gold_path in paths if gold_path not in known]
            if unknown:
                raise QueryFileError(f"{where}, column 'gold': {unknown_paths_message(unknown, known)}")
        answerable.append(flag)
        gold.append(paths)
    frame["id"] = frame["id"].str.strip()
    frame["answerable"] = answerable
    frame["gold"] = gold
    return frame


def gold_pages(queries: pd.DataFrame) -> dict:
    """``{query id: gold pages}`` for answerable queries."""
    return {row.id: set(row.gold) for row in queries.itertuples() if row.answerable}
