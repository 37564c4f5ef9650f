"""Unlabeled score logs: what a deployed gate saw, read from CSV, CSV.gz or Parquet and checked.

A score log has the gate's signal columns, and optionally ``id``, ``query``
and a ``timestamp``; it needs no labels. :func:`read_score_log` reads one for
:func:`~ragcal.monitoring.monitor` and :func:`~ragcal.monitoring.review_sample`.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd

__all__ = ["LOG_OPTIONAL_COLUMNS", "read_score_log"]

#: Optional columns of a score log, kept when present (``answerable`` and ``slice`` are ignored by the monitor).
LOG_OPTIONAL_COLUMNS = ("id", "query", "answerable", "slice", "timestamp")


def read_score_log(path, signals=(), *, source: str | None = None) -> pd.DataFrame:
    """Read an unlabeled score log: the signal columns, plus ``id``, ``query``, ``timestamp`` when present.

    Parameters
    ----------
    path : str or Path
        ``*.parquet`` / ``*.pq`` are read as Parquet, anything else as CSV
        (``*.csv.gz`` decompressed on the fly), as
        :func:`ragcal.score_tables.read_score_table` reads them.
    signals : sequence of str, default=()
        Signal columns that must be present and numeric (a gate's
        :attr:`~ragcal.gates.Gate.columns`). Empty cells are read as NaN.
    source : str, default=None
        How messages name the file; ``str(path)`` when None.

    Returns
    -------
    DataFrame
        The columns of :data:`LOG_OPTIONAL_COLUMNS` that the file has, then
        ``signals``, in the file's row order. ``timestamp``, when present, is
        parsed to timezone-aware (UTC) datetimes; a timestamp without a zone is
        taken as UTC. ``answerable`` and ``slice`` are kept as read (no labels
        are needed, none are checked).

    Raises
    ------
    ValueError
        Naming the file: not found, unreadable, a missing signal column, a
        non-numeric signal cell (with its line for CSV), a timestamp that is
        not a date and time (with its line).

    Examples
    --------
    >>> from ragcal.monitoring import read_score_log
    >>> log = read_score_log("results/fastapi/scores.csv", ["dense_top1"])
    >>> list(log.columns)
    ['id', 'query', 'answerable', 'slice', 'dense_top1']
    """
    from ..score_tables import check_numeric_columns, read_columns

    path = Path(path)
    source = source or str(path)
    signals = list(dict.fromkeys(signals))
    table = read_columns(
        path,
        signals,
        source=source,
        what="score log",
        optional=LOG_OPTIONAL_COLUMNS,
        text_columns=("query", "timestamp"),
    )
    if len(table):  # an empty file's columns have no type; there is no cell to be wrong
        check_numeric_columns(table, signals, source=source)
    for signal in signals:
        table[signal] = pd.to_numeric(table[signal]).astype(float)
    if "timestamp" in table.columns:
        table["timestamp"] = _parse_timestamps(table["timestamp"], source)
    return table


def _parse_timestamps(values: pd.Series, source: str) -> pd.Series:
    if isinstance(values.dtype, pd.DatetimeTZDtype):
        parsed = values.dt.tz_convert("UTC")
    elif pd.api.types.is_datetime64_dtype(values):
        parsed = values.dt.tz_localize("UTC")
    elif pd.api.types.is_object_dtype(values) or pd.api.types.is_string_dtype(values):
        parsed = pd.to_datetime(values, errors="coerce", utc=True, format="ISO8601")
    else:
        raise ValueError(
            f"{source}, column 'timestamp': expected ISO 8601 dates and times (e.g. 2024-05-01T12:00:00Z), "
            f"got a column of {values.dtype}"
        )
    bad = np.flatnonzero(parsed.isna().to_numpy())
    if bad.size:
        from ..queries import describe_cell

        raise ValueError(
            f"{source}, line {bad[0] + 2}, column 'timestamp': expected an ISO 8601 date and time "
            f"(e.g. 2024-05-01T12:00:00Z), got {describe_cell(values.iloc[bad[0]])}"
        )
    return parsed
