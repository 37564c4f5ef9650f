"""Logged signals: scores ragcal cannot compute itself, joined into a score table by question id.

A production reranker's scores, an LLM's own "I don't know" or a judge's
verdict come as a file with one value per question and signal:

- **long**: columns ``id, name, value`` (and optionally ``direction``,
  ``higher`` or ``lower``, the same on every row of a name);
- **wide**: an ``id`` column and one column per signal.

CSV (any ending but ``.parquet`` / ``.pq``) or Parquet. Values are numbers;
``true/false/yes/no`` (any case) are read as 1.0/0.0, so an LLM's verdict is a
binary signal; an empty cell (or ``nan``) is a missing value. Anything else is
an error that lists the offending cells with their line.

**Directions.** Each logged signal needs to say whether higher means
answerable. A declared direction (the long file's ``direction`` column, or
``directions={"name": "lower"}``, ``--direction name=lower`` on the command
line) is used as it is. An undeclared one is **inferred from the labels of the
table it is joined into**: ``lower`` when the signal's AUC (answerable against
unanswerable, as higher-is-answerable) is below 0.5, else ``higher``. That
choice looks at the very questions the signal is then evaluated on, so on this
table its AUC is at least 0.5 by construction: a signal with no information
shows up as slightly better than chance. The provenance records
``"inferred from labels"`` and a warning says so; declare the direction for an
honest number, or evaluate on questions the direction was not chosen on.
Labels that cannot decide (one class, a constant signal) give ``higher``, said
as such.

The joined table's provenance (``<name>.meta.json``, see
:func:`ragcal.score_tables.write_score_table`) records ``directions``
(``{name: "higher"|"lower"}``), ``direction_sources`` and ``logged_signals``
(the file, its sha256 and its signal names, one entry per join), and
:func:`signal_direction` reads them back for ``ragcal calibrate`` and
``ragcal fit-gate``.

::

    from ragcal.signals.logged import join_logged_signals, read_logged_signals

    logged = read_logged_signals("llm_verdicts.csv", directions={"llm_refused": "lower"})
    joined = join_logged_signals(table, logged)
    joined.table, joined.summary, joined.provenance
"""

from __future__ import annotations

import csv
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import pandas as pd

from .._io import check_csv_delimiter, sha256_file
from .._params import check_choice
from ..formatting import LISTED, listing
from ..metrics.binary import is_binary_signal
from ..score_tables import SCORE_KEY_COLUMNS
from .directions import DIRECTIONS, decide_directions, direction_warning

__all__ = [
    "JoinedSignals",
    "LoggedSignals",
    "check_logged_ids",
    "join_logged_signals",
    "join_signals",
    "read_logged_signals",
]

#: Words read as 1.0 and 0.0 (any case).
BOOLEAN_VALUES = {"true": 1.0, "yes": 1.0, "false": 0.0, "no": 0.0}
#: Columns of a long file (``direction`` is optional).
LONG_COLUMNS = ("id", "name", "value")


@dataclass(frozen=True)
class LoggedSignals:
    """Logged signals read from one file, checked, one column per signal.

    Attributes
    ----------
    values : DataFrame
        Indexed by question id (text), one float column per signal in file
        order; NaN where the file has no value.
    directions : dict of str to str
        Declared directions (``"higher"`` or ``"lower"``) of the signals that
        have one.
    source : str
        The file, as messages name it.
    sha256 : str
        Of the file's bytes.
    layout : str
        ``"long"`` or ``"wide"``.
    """

    values: pd.DataFrame
    directions: dict
    source: str
    sha256: str
    layout: str

    @property
    def names(self) -> list[str]:
        return list(self.values.columns)


@dataclass(frozen=True)
class JoinedSignals:
    """What :func:`join_logged_signals` returns.

    Attributes
    ----------
    table : DataFrame
        The score table with the logged columns (replaced ones in place, new ones at the end).
    summary : DataFrame
        One row per logged signal: ``name, direction, decided_by, binary, n_values, n_missing``.
    provenance : dict
        The table's provenance with ``directions``, ``direction_sources`` and
        ``logged_signals`` updated, ready for
        :func:`~ragcal.score_tables.write_score_table`.
    warnings : tuple of str
        One per direction inferred from labels or defaulted.
    """

    table: pd.DataFrame
    summary: pd.DataFrame
    provenance: dict
    warnings: tuple = field(default_factory=tuple)


def _read_cells(path: Path, source: str) -> tuple[pd.DataFrame, str]:
    """Every cell as text (empty for a missing one), and ``"line"`` (CSV) or ``"row"`` (Parquet) for messages."""
    if not path.is_file():
        raise ValueError(f"{source}: logged signals file not found")
    if path.suffix.lower() in (".parquet", ".pq"):
        import duckdb

        from ..score_tables import read_parquet_columns

        connection = duckdb.connect()
        try:
            frame = read_parquet_columns(connection, path)  # pandas' unnamed index left out
        except duckdb.Error as error:
            raise ValueError(f"{source}: cannot be read as Parquet ({error})") from error
        finally:
            connection.close()
        frame = frame.astype(object).where(frame.notna(), "").astype(str)
        return frame.reset_index(drop=True), "row"
    check_csv_delimiter(path)
    try:
        with open(path, encoding="utf-8-sig", newline="") as stream:
            header = next(csv.reader(stream), [])
        frame = pd.read_csv(path, dtype=str, keep_default_na=False, na_filter=False, encoding="utf-8-sig")
    except (pd.errors.EmptyDataError, pd.errors.ParserError, UnicodeDecodeError) as error:
        raise ValueError(f"{source}: cannot be read as CSV ({error})") from error
    repeated = sorted({name for name in header if header.count(name) > 1})
    if repeated:
        raise ValueError(f"{source}: column(s) {', '.join(map(repr, repeated))} appear more than once in the header")
    return frame, "line"


def _position(unit: str, index) -> str:
    """``line N`` of a CSV (the header is line 1) or ``row N`` of a Parquet file."""
    return f"line {int(index) + 2}" if unit == "line" else f"row {int(index) + 1}"


def _parse_values(cells: pd.Series) -> tuple[np.ndarray, np.ndarray]:
    """Float values of text cells (true/false/yes/no as 1/0, empty and 'nan' as NaN) and a mask of bad cells
    (text, and infinite numbers)."""
    text = cells.astype(str).str.strip()
    numbers = pd.to_numeric(text, errors="coerce").to_numpy(dtype=float)
    words = text.str.lower().map(BOOLEAN_VALUES).to_numpy(dtype=float)
    unparsed = np.isnan(numbers)
    values = np.where(unparsed, words, numbers)
    bad = unparsed & np.isnan(words) & (text != "").to_numpy() & (text.str.lower() != "nan").to_numpy()
    infinite = np.isinf(values)  # no threshold, AUC or learned gate can use an infinite score
    return np.where(infinite, np.nan, values), bad | infinite


def _check_ids(ids: pd.Series, source: str, unit: str) -> pd.Series:
    ids = ids.astype(str).str.strip()
    empty = np.flatnonzero((ids == "").to_numpy())
    if empty.size:
        raise ValueError(f"{source}, {_position(unit, empty[0])}, column 'id': empty id")
    return ids


def _bad_cell_error(problems: list, source: str) -> ValueError:
    listed = "; ".join(
        f"{where} (id {qid!r}, {column!r}): {value!r}" for where, qid, column, value in problems[:LISTED]
    )
    more = f"; and {len(problems) - LISTED} more" if len(problems) > LISTED else ""
    return ValueError(
        f"{source}: {len(problems)} value(s) are not numbers (expected a finite number, true/false or yes/no; "
        f"empty for a missing value): {listed}{more}"
    )


def _read_long(frame: pd.DataFrame, source: str, unit: str) -> tuple[pd.DataFrame, dict]:
    ids = _check_ids(frame["id"], source, unit)
    names = frame["name"].astype(str).str.strip()
    empty = np.flatnonzero((names == "").to_numpy())
    if empty.size:
        raise ValueError(f"{source}, {_position(unit, empty[0])}, column 'name': empty signal name")
    _check_names(pd.unique(names), source)
    values, bad = _parse_values(frame["value"])
    if bad.any():
        problems = [
            (_position(unit, row), ids.iloc[row], names.iloc[row], frame["value"].iloc[row])
            for row in np.flatnonzero(bad)
        ]
        raise _bad_cell_error(problems, source)
    repeated = pd.DataFrame({"id": ids, "name": names}).duplicated(keep=False).to_numpy()
    if repeated.any():
        pairs = [
            f"({ids.iloc[row]!r}, {names.iloc[row]!r}) at {_position(unit, row)}" for row in np.flatnonzero(repeated)
        ]
        raise ValueError(f"{source}: {len(pairs)} rows repeat an (id, name) pair: {listing(pairs)}")
    directions = {}
    if "direction" in frame.columns:
        spelled = frame["direction"].astype(str).str.strip().str.lower()
        wrong = np.flatnonzero(~spelled.isin(("", *DIRECTIONS)).to_numpy())
        if wrong.size:
            row = wrong[0]
            raise ValueError(
                f"{source}, {_position(unit, row)}, column 'direction': expected higher or lower (or empty), "
                f"got {frame['direction'].iloc[row]!r}"
            )
        for name in pd.unique(names):
            rows = np.flatnonzero((names == name).to_numpy() & (spelled != "").to_numpy())
            if not rows.size:
                continue
            first = spelled.iloc[rows[0]]
            others = rows[spelled.iloc[rows].to_numpy() != first]
            if others.size:
                raise ValueError(
                    f"{source}: signal {name!r} has direction {first!r} at {_position(unit, rows[0])} but "
                    f"{spelled.iloc[others[0]]!r} at {_position(unit, others[0])}; one direction per signal"
                )
            directions[str(name)] = first
    long = pd.DataFrame({"id": ids, "name": names, "value": values})
    table = long.pivot(index="id", columns="name", values="value")
    table = table.reindex(index=pd.unique(ids), columns=pd.unique(names))
    table.index.name, table.columns.name = "id", None
    return table.astype(float), directions


def _read_wide(frame: pd.DataFrame, source: str, unit: str) -> pd.DataFrame:
    ids = _check_ids(frame["id"], source, unit)
    repeated = np.flatnonzero(ids.duplicated(keep=False).to_numpy())
    if repeated.size:
        listed = [f"{ids.iloc[row]!r} at {_position(unit, row)}" for row in repeated]
        raise ValueError(f"{source}: {len(listed)} rows repeat an id: {listing(listed)}")
    names = [column for column in frame.columns if column != "id"]
    if not names:
        raise ValueError(f"{source}: no signal column besides 'id' (a wide file has id, then one column per signal)")
    _check_names(names, source)
    columns, problems = {}, []
    for name in names:
        values, bad = _parse_values(frame[name])
        problems += [(_position(unit, row), ids.iloc[row], name, frame[name].iloc[row]) for row in np.flatnonzero(bad)]
        columns[str(name)] = values
    if problems:
        problems.sort(key=lambda problem: int(problem[0].split()[1]))
        raise _bad_cell_error(problems, source)
    return pd.DataFrame(columns, index=pd.Index(ids.to_numpy(), name="id"))


def _check_names(names, source: str) -> None:
    keys = [name for name in names if name in SCORE_KEY_COLUMNS]
    if keys:
        raise ValueError(
            f"{source}: {', '.join(map(repr, keys))} is a key column of score tables, not a signal; a logged "
            "signals file holds ids and signal values only"
        )


def _check_directions(directions, function: str) -> dict:
    directions = dict(directions or {})
    for name, direction in directions.items():
        check_choice(direction, f"directions[{name}]", function, DIRECTIONS)
    return directions


def read_logged_signals(path, *, directions: Mapping | None = None) -> LoggedSignals:
    """Read and check a file of logged signals (long or wide, CSV or Parquet).

    Parameters
    ----------
    path : str or Path
        Long (``id, name, value[, direction]``) or wide (``id`` then one column
        per signal); ``*.parquet`` / ``*.pq`` as Parquet, anything else as CSV.
    directions : mapping of str to str, default=None
        Declared directions, ``{"name": "higher" | "lower"}``. A name must be
        a signal of the file; a direction that contradicts the file's own
        ``direction`` column is an error.

    Returns
    -------
    LoggedSignals

    Raises
    ------
    ValueError
        Naming the file: not found or unreadable; no ``id`` column; an empty
        id or name; values that are not numbers (up to ten listed, each with
        its line, id and column); a repeated (id, name) pair or, in a wide
        file, a repeated id; a key column of score tables (``query``,
        ``answerable``, ``slice``); a direction spelled other than higher or
        lower, or two directions for one signal.

    Examples
    --------
    >>> logged = read_logged_signals("verdicts.csv", directions={"llm_idk": "lower"})  # doctest: +SKIP
    """
    path = Path(path)
    source = str(path)
    directions = _check_directions(directions, "read_logged_signals")
    frame, unit = _read_cells(path, source)
    columns = [str(column) for column in frame.columns]
    if "id" not in columns:
        raise ValueError(
            f"{source}: no 'id' column; a logged signals file is long (id,name,value[,direction]) or wide "
            f"(id, then one column per signal); have {', '.join(columns) or 'no columns'}"
        )
    if set(LONG_COLUMNS) <= set(columns):
        extra = [column for column in columns if column not in (*LONG_COLUMNS, "direction")]
        if extra:
            raise ValueError(
                f"{source}: has id, name and value (a long file) but also {', '.join(map(repr, extra))}; a long file "
                "has the columns id, name, value and optionally direction"
            )
        values, declared = _read_long(frame, source, unit)
        layout = "long"
    else:
        values, declared, layout = _read_wide(frame, source, unit), {}, "wide"
    unknown = [name for name in directions if name not in values.columns]
    if unknown:
        raise ValueError(
            f"{source}: a direction is given for {', '.join(map(repr, unknown))}, which the file does not have; "
            f"its signals are {', '.join(values.columns)}"
        )
    for name, direction in directions.items():
        if declared.get(name, direction) != direction:
            raise ValueError(
                f"{source}: signal {name!r} is declared {direction!r}, but the file's direction column says "
                f"{declared[name]!r}"
            )
    return LoggedSignals(values, {**declared, **directions}, source, sha256_file(path), layout)


def _table_ids(table: pd.DataFrame, source: str) -> pd.Index:
    if "id" not in table.columns:
        raise ValueError(f"{source}: no 'id' column; logged signals are joined by question id")
    ids = pd.Index(table["id"].astype(str).str.strip())
    repeated = ids[ids.duplicated()].unique()
    if len(repeated):
        raise ValueError(f"{source}: ids appear more than once ({listing(repeated)}); joining by id needs one row each")
    return ids


def check_logged_ids(logged: LoggedSignals, ids, *, source: str = "score table") -> None:
    """Raise when ``logged`` has ids that are not among ``ids`` (listed, up to ten, with the count)."""
    known = pd.Index(pd.Series(list(ids), dtype=object).astype(str).str.strip())
    unknown = logged.values.index[~logged.values.index.isin(known)]
    if len(unknown):
        raise ValueError(f"{logged.source}: {len(unknown)} id(s) are not questions of {source}: {listing(unknown)}")


def join_signals(
    table: pd.DataFrame,
    logged: LoggedSignals,
    *,
    replace: bool = False,
    allow_missing: bool = False,
    source: str = "score table",
) -> pd.DataFrame:
    """The score table with the logged signals as columns, matched by ``id``.

    Parameters
    ----------
    table : DataFrame
        A score table with an ``id`` column (ids compared as text).
    logged : LoggedSignals
    replace : bool, default=False
        Let a logged signal replace a column of the same name (it keeps its
        place); without it such a collision is an error.
    allow_missing : bool, default=False
        Keep questions of the table that have no value of a logged signal,
        as NaN, instead of refusing. Useful when a signal exists for only
        part of the questions (a judge run on a sample, an LLM call that
        failed): a threshold gate never answers a NaN score (the question is
        refused, which is what such a gate would do live), calibration counts
        it as never answered, and a learned gate fills in the calibration
        mean. Ids of the file that are not in the table are an error either
        way.
    source : str, default="score table"
        How messages name the table.

    Returns
    -------
    DataFrame
        A copy of ``table``; new columns after the existing ones, in file order.

    Raises
    ------
    ValueError
        Listing (up to ten, with the count) the file's ids that are not in the
        table, the table's ids without a value (unless ``allow_missing``), or
        naming the columns that already exist (unless ``replace``).
    """
    ids = _table_ids(table, source)
    check_logged_ids(logged, ids, source=source)
    existing = [name for name in logged.names if name in table.columns]
    keys = [name for name in existing if name in SCORE_KEY_COLUMNS]
    if keys or (existing and not replace):
        hint = "" if keys else " (pass replace=True, --replace on the command line, to replace them)"
        raise ValueError(
            f"{logged.source}: signal(s) {', '.join(map(repr, existing))} are already columns of {source}{hint}"
        )
    aligned = logged.values.reindex(ids)
    if not allow_missing:
        missing = {name: list(ids[aligned[name].isna().to_numpy()]) for name in logged.names}
        missing = {name: listed for name, listed in missing.items() if listed}
        if missing:
            described = "; ".join(f"{name}: {len(listed)} ({listing(listed)})" for name, listed in missing.items())
            raise ValueError(
                f"{logged.source}: no value for some questions of {source} ({described}); add them, or allow "
                "missing values (allow_missing=True, --allow-missing) to keep them as NaN"
            )
    joined = table.copy()
    for name in logged.names:
        joined[name] = aligned[name].to_numpy(dtype=float)
    return joined


def join_logged_signals(
    table: pd.DataFrame,
    logged: LoggedSignals,
    *,
    provenance: Mapping | None = None,
    replace: bool = False,
    allow_missing: bool = False,
    source: str = "score table",
) -> JoinedSignals:
    """Join (:func:`join_signals`), decide the directions (:func:`decide_directions`) and record both.

    Parameters
    ----------
    table : DataFrame
    logged : LoggedSignals
    provenance : mapping, default=None
        The table's provenance (its ``.meta.json``); the result's provenance
        is a copy with ``directions`` and ``direction_sources`` updated and an
        entry ``{"file", "sha256", "signals"}`` added to ``logged_signals``.
    replace, allow_missing, source
        As for :func:`join_signals`.

    Returns
    -------
    JoinedSignals
    """
    joined = join_signals(table, logged, replace=replace, allow_missing=allow_missing, source=source)
    directions = decide_directions(joined, logged.names, declared=logged.directions)
    rows = []
    for name in logged.names:
        values = joined[name].to_numpy(dtype=float)
        rows.append(
            {
                "name": name,
                "direction": directions[name].word,
                "decided_by": directions[name].decided_by,
                "binary": is_binary_signal(values),
                "n_values": int((~np.isnan(values)).sum()),
                "n_missing": int(np.isnan(values).sum()),
            }
        )
    record = dict(provenance or {})
    record["directions"] = {**record.get("directions", {}), **{name: d.word for name, d in directions.items()}}
    record["direction_sources"] = {
        **record.get("direction_sources", {}),
        **{name: d.decided_by for name, d in directions.items()},
    }
    record["logged_signals"] = [
        *record.get("logged_signals", []),
        {"file": logged.source, "sha256": logged.sha256, "signals": logged.names},
    ]
    notes = tuple(note for name, d in directions.items() if (note := direction_warning(name, d)))
    return JoinedSignals(joined, pd.DataFrame(rows), record, notes)
