"""Review files: the labeling CSV of a review sample, with each question's top passages, and its checked reader.

A review CSV starts with :data:`REVIEW_COLUMNS`, then ``page_i, heading_i,
text_i`` for the top K passages (:func:`attach_passages`), then any other
column (``stage``, ``bar_distance``, the gate's signals, ``passed_pages``).
A labeler fills ``answerable``, ``slice`` and ``gold``; rows left empty are
not labeled yet.
"""

from __future__ import annotations

import math
import re
from pathlib import Path

import pandas as pd

from .._params import check_int

__all__ = [
    "PASSAGE_TEXT_CHARS",
    "REVIEW_COLUMNS",
    "LABELING_COLUMNS",
    "attach_passages",
    "page_columns",
    "read_review_cells",
    "read_review_labels",
    "write_review_csv",
]

#: The first columns of a review CSV, in this order (then ``page_i, heading_i, text_i``, then extras).
REVIEW_COLUMNS = (
    "id",
    "query",
    "answerable",
    "slice",
    "gold",
    "decision",
    "score",
    "stratum",
    "stratum_size",
    "stratum_sampled",
)
#: What labeling one question needs (the strata only matter to the estimates): ``ragcal.interactive.Labeler`` reads these.
LABELING_COLUMNS = REVIEW_COLUMNS[:7]
#: Passage texts in a review CSV are cut to this many characters.
PASSAGE_TEXT_CHARS = 600
_PAGE_COLUMN = re.compile(r"^page_(\d+)$")


def attach_passages(sample: pd.DataFrame, index, gate, *, k: int = 3) -> pd.DataFrame:
    """Add the top ``k`` passages of each sampled question, retrieved on the gate's first retriever view.

    Parameters
    ----------
    sample : DataFrame
        From :func:`review_sample` (``query``, ``decision``, ``stage``).
    index : RetrievalIndex
        The index (or access-level view) the gate decides on.
    gate : Gate
    k : int, default=3

    Returns
    -------
    DataFrame
        ``sample`` with ``page_i, heading_i, text_i`` for i = 1..k after
        :data:`REVIEW_COLUMNS` (the chunk's page path, its heading path joined
        with `` › ``, its body cut to :data:`PASSAGE_TEXT_CHARS` characters;
        empty strings where fewer passages exist) and, at the end,
        ``passed_pages``: the ``;``-joined pages the gate passes on for an
        answer or hedge (:meth:`Gate.passages_for`), empty for a refusal.
    """
    from ..chunking import HEADING_SEPARATOR, page_of

    k = check_int(k, "k", "attach_passages", low=1)
    view = gate.retrievers[0]
    chunks = {chunk.chunk_id: chunk for chunk in index.chunks}
    retrieved = index.retrieve(list(sample["query"])) if len(sample) else {}
    columns = {f"{field}_{rank}": [] for rank in range(1, k + 1) for field in ("page", "heading", "text")}
    passed = []
    for position, row in enumerate(sample.itertuples(index=False)):
        results = {name: per_query[position] for name, per_query in retrieved.items()}
        top = list(results[view].chunk_ids[:k])
        for rank in range(1, k + 1):
            chunk = chunks.get(top[rank - 1]) if rank <= len(top) else None
            columns[f"page_{rank}"].append(chunk.doc_path if chunk else "")
            columns[f"heading_{rank}"].append(HEADING_SEPARATOR.join(chunk.heading_path) if chunk else "")
            columns[f"text_{rank}"].append(chunk.body[:PASSAGE_TEXT_CHARS] if chunk else "")
        if row.decision == "refuse":
            passed.append("")
        else:
            stage = row.stage if isinstance(row.stage, str) else None
            pages = dict.fromkeys(page_of(chunk_id) for chunk_id, _ in gate.passages_for(results, stage=stage))
            passed.append(";".join(pages))
    head = [column for column in REVIEW_COLUMNS if column in sample.columns]
    rest = [column for column in sample.columns if column not in head and not _is_passage_column(column)]
    rest = [column for column in rest if column != "passed_pages"]
    passages = pd.DataFrame(columns, index=sample.index, dtype=object)
    return pd.concat([sample[head], passages, sample[rest]], axis=1).assign(passed_pages=passed)


def _is_passage_column(column: str) -> bool:
    return bool(re.match(r"^(page|heading|text)_\d+$", str(column)))


def page_columns(columns) -> list:
    """The ``page_<i>`` columns of a review CSV (the pages of its top-K passages), in their order."""
    return [column for column in columns if _PAGE_COLUMN.match(str(column))]


def write_review_csv(path, sample: pd.DataFrame) -> Path:
    """Write a review sample as the labeling CSV (UTF-8, atomically), columns in the contract's order.

    :data:`REVIEW_COLUMNS` first, then ``page_i, heading_i, text_i``, then
    any other column of ``sample`` (``stage``, ``bar_distance``, the gate's
    signals, ``passed_pages``, ...).
    """
    from .._io import atomic_write_text

    missing = [column for column in REVIEW_COLUMNS if column not in sample.columns]
    if missing:
        raise ValueError(f"{path}: the sample has no column(s) {', '.join(map(repr, missing))}; draw it with review_sample")
    k = len(page_columns(sample.columns))
    passages = [f"{field}_{rank}" for rank in range(1, k + 1) for field in ("page", "heading", "text")]
    rest = [column for column in sample.columns if column not in REVIEW_COLUMNS and column not in passages]
    ordered = sample[[*REVIEW_COLUMNS, *passages, *rest]]
    return atomic_write_text(path, ordered.to_csv(index=False, lineterminator="\n"))


def read_review_cells(path, *, columns=REVIEW_COLUMNS, passages: bool = False) -> pd.DataFrame:
    """The cells of a review CSV as text, checked: the one reader of review files (the labeler's and the estimates').

    Parameters
    ----------
    path : str or Path
    columns : sequence of str, default=REVIEW_COLUMNS
        Columns the file must have (:data:`LABELING_COLUMNS` to label it).
    passages : bool, default=False
        Require ``page_<i>, heading_<i>, text_<i>`` for at least one passage,
        and at least one row (what a labeler shows).

    Raises
    ------
    ValueError
        Naming the file (and line and column): missing, not comma-separated,
        not CSV, a missing column, no passages or no rows (with
        ``passages``), an ``answerable`` cell other than true/false (or
        empty), gold pages on a row not labeled answerable.
    """
    from .._io import check_csv_delimiter
    from ..queries import ANSWERABLE_EXPECTED, describe_cell, parse_answerable

    path = Path(path)
    if not path.is_file():
        raise ValueError(f"{path}: review file not found")
    check_csv_delimiter(path)
    try:
        frame = pd.read_csv(path, dtype=str, keep_default_na=False, encoding="utf-8-sig")
    except (pd.errors.EmptyDataError, pd.errors.ParserError, UnicodeDecodeError) as error:
        raise ValueError(f"{path}: cannot be read as CSV ({error})") from error
    needed = list(columns)
    if passages:
        numbers = sorted(int(match[1]) for match in map(_PAGE_COLUMN.match, map(str, frame.columns)) if match)
        if not numbers:
            raise ValueError(
                f"{path}: not a review CSV: no 'page_1' column (the top passages: page_<i>, heading_<i>, text_<i>)"
            )
        needed += [f"{part}_{number}" for number in numbers for part in ("heading", "text")]
    missing = [column for column in needed if column not in frame.columns]
    if missing:
        raise ValueError(
            f"{path}: not a review CSV: missing column(s) {', '.join(map(repr, missing))}; a review CSV starts with "
            f"{', '.join(columns)}, then page_<i>, heading_<i>, text_<i> per passage (write it with "
            "`ragcal review --out`)"
        )
    if passages and frame.empty:
        raise ValueError(f"{path}: no rows to label")
    for position, (answerable, gold) in enumerate(zip(frame["answerable"], frame["gold"])):
        where = f"{path}, line {position + 2}"
        text = answerable.strip()
        flag = parse_answerable(text) if text else None
        if text and flag is None:
            raise ValueError(f"{where}, column 'answerable': {ANSWERABLE_EXPECTED} or empty, got {describe_cell(text)}")
        if gold.strip() and flag is not True:
            state = "not answerable" if flag is False else "not labeled"
            raise ValueError(f"{where}, column 'gold': gold pages {gold!r} on a row {state}")
    return frame


def read_review_labels(path) -> pd.DataFrame:
    """Read a (partly) labeled review CSV and check it.

    Rows whose ``answerable`` is empty are not labeled yet; they are kept
    (``labeled`` False) and counted as such by :func:`review_estimates`.

    Returns
    -------
    DataFrame
        Every column of the file, in its order; ``answerable`` as pandas'
        nullable ``boolean`` (NA when unlabeled), ``gold`` a tuple of pages,
        ``score`` a float, ``stratum_size`` and ``stratum_sampled`` ints, and
        a ``labeled`` column.

    Raises
    ------
    ValueError
        Naming the file, line (the header is line 1) and column: a missing
        column, an ``answerable`` other than true/false (or empty), gold pages
        on an unanswerable row, an unknown decision, a stratum that does not
        belong to its decision, sizes that are not integers or disagree within
        a stratum, or a stratum with more or fewer rows than its
        ``stratum_sampled`` says (a row was deleted or added).
    """
    from ..gates.base import ACTIONS
    from ..queries import describe_cell, parse_answerable

    frame = read_review_cells(path)
    labels, gold, numbers = [], [], {"score": [], "stratum_size": [], "stratum_sampled": []}
    for position, row in enumerate(frame.to_dict("records")):
        where = f"{path}, line {position + 2}"
        text = row["answerable"].strip()
        flag = None if not text else parse_answerable(text)
        pages = tuple(part.strip() for part in row["gold"].split(";") if part.strip())
        if row["decision"] not in ACTIONS:
            raise ValueError(f"{where}, column 'decision': expected one of {', '.join(ACTIONS)}, got "
                             f"{describe_cell(row['decision'])}")
        if row["stratum"].split("/")[0] != row["decision"]:
            raise ValueError(f"{where}, column 'stratum': {row['stratum']!r} is not a stratum of decision "
                             f"{row['decision']!r} (expected '{row['decision']}/...')")
        for column in ("stratum_size", "stratum_sampled"):
            value = row[column].strip()
            if not value.isdigit() or int(value) < 1:
                raise ValueError(f"{where}, column {column!r}: expected a positive integer, got {describe_cell(value)}")
            numbers[column].append(int(value))
        try:
            numbers["score"].append(float(row["score"]) if row["score"].strip() else math.nan)
        except ValueError:
            raise ValueError(f"{where}, column 'score': not a number, got {describe_cell(row['score'])}") from None
        labels.append(flag)
        gold.append(pages)
    frame["answerable"] = pd.array(labels, dtype="boolean")
    frame["gold"] = gold
    for column, values in numbers.items():
        frame[column] = values
    frame["labeled"] = frame["answerable"].notna().to_numpy(dtype=bool)
    for name, rows in frame.groupby("stratum", sort=False).groups.items():
        block = frame.loc[rows]
        for column in ("stratum_size", "stratum_sampled"):
            if block[column].nunique() > 1:
                line = int(block.index[(block[column] != block[column].iloc[0]).to_numpy()][0]) + 2
                raise ValueError(f"{path}, line {line}, column {column!r}: stratum {name!r} has {column} "
                                 f"{block[column].iloc[0]} on its first row and another value here")
        sampled, size = int(block["stratum_sampled"].iloc[0]), int(block["stratum_size"].iloc[0])
        if len(block) != sampled:
            raise ValueError(f"{path}: stratum {name!r} has {len(block)} row(s) but stratum_sampled says {sampled}; "
                             "keep every sampled row (leave answerable empty for the ones not labeled)")
        if sampled > size:
            raise ValueError(f"{path}, line {int(block.index[0]) + 2}, column 'stratum_sampled': {sampled} rows drawn "
                             f"from a stratum of {size}")
    return frame
