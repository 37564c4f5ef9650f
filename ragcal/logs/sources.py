"""Where a score log lies and which of its rows count: files, the time window, a DuckDB view of it.

Shared by the engines (:mod:`ragcal.logs.duckdb_counts`,
:mod:`ragcal.logs.spark_counts`, :mod:`ragcal.logs.engines`): a log is one
CSV, CSV.gz or Parquet file, a folder of Parquet files or a glob, and
``since``/``until`` keep the rows whose ``timestamp`` is in ``[since, until)``.
"""

from __future__ import annotations

import glob
from pathlib import Path

import numpy as np
import pandas as pd

from ..score_tables import duckdb_file

#: Label texts read as answerable / unanswerable by every engine (case and spaces ignored); others are unlabeled.
TRUE_TEXTS = ("true", "t", "yes", "1", "1.0")
FALSE_TEXTS = ("false", "f", "no", "0", "0.0")

__all__ = [
    "FALSE_TEXTS",
    "TRUE_TEXTS",
    "duckdb_connection",
    "duckdb_view",
    "log_files",
    "parse_time",
    "read_pandas",
    "window_pandas",
    "window_sql",
]


def log_files(source) -> tuple[str, list[str]]:
    """``(format, files)`` of a log path: one CSV / CSV.gz / Parquet file, a folder of Parquet files, or a glob."""
    text = str(source)
    if any(character in text for character in "*?["):
        files = sorted(glob.glob(text))
    elif Path(text).is_dir():
        files = sorted(str(path) for pattern in ("*.parquet", "*.pq") for path in Path(text).glob(pattern))
    else:
        if not Path(text).is_file():
            raise FileNotFoundError(f"{text}: score log not found")
        # One file: Parquet by its name, anything else CSV (as ragcal.score_tables reads it).
        return ("parquet" if text.endswith((".parquet", ".pq")) else "csv"), [text]
    if not files:
        raise FileNotFoundError(f"{text}: no Parquet files there")
    kinds = {
        "parquet" if name.endswith((".parquet", ".pq")) else "csv" if name.endswith((".csv", ".csv.gz")) else ""
        for name in files
    }
    if kinds != {"parquet"} and kinds != {"csv"}:
        raise ValueError(f"{text}: a score log is CSV, CSV.gz or Parquet (one kind); found {sorted(files)[:3]}")
    return kinds.pop(), files


def parse_time(value, name: str):
    """``value`` (ISO 8601 text, a datetime or None) as a UTC ``Timestamp``; a time without a zone is UTC."""
    if value is None:
        return None
    try:
        stamp = pd.Timestamp(value)
    except (TypeError, ValueError) as error:
        raise ValueError(f"--{name}: expected an ISO 8601 date or date and time, got {value!r}") from error
    if stamp is pd.NaT:
        raise ValueError(f"--{name}: expected an ISO 8601 date or date and time, got {value!r}")
    return stamp.tz_localize("UTC") if stamp.tzinfo is None else stamp.tz_convert("UTC")


def window_sql(since, until) -> str:
    """A DuckDB condition on ``timestamp`` for ``[since, until)`` ("TRUE" without bounds)."""
    stamp = 'TRY_CAST("timestamp" AS TIMESTAMPTZ)'
    parts = [f"{stamp} >= TIMESTAMPTZ '{bound.isoformat()}'" for bound in [since] if bound is not None]
    parts += [f"{stamp} < TIMESTAMPTZ '{bound.isoformat()}'" for bound in [until] if bound is not None]
    return " AND ".join(parts) or "TRUE"


def window_pandas(table: pd.DataFrame, since, until, source) -> pd.DataFrame:
    if since is None and until is None:
        return table
    if "timestamp" not in table.columns:
        raise ValueError(f"{source}: --since/--until need a 'timestamp' column, and the log has none")
    keep = np.ones(len(table), dtype=bool)
    if since is not None:
        keep &= (table["timestamp"] >= since).to_numpy()
    if until is not None:
        keep &= (table["timestamp"] < until).to_numpy()
    return table[keep].reset_index(drop=True)


def read_pandas(source, columns, since, until) -> pd.DataFrame:
    from ..monitoring.score_log import read_score_log

    _, files = log_files(source)
    if len(files) != 1:
        raise ValueError(f"{source}: the pandas engine reads one file; use --engine duckdb for a folder or a glob")
    table = read_score_log(files[0], columns, source=str(source))
    return window_pandas(table, since, until, source)


def duckdb_view(connection, source, since, until):
    """A DuckDB view ``score_log`` of the rows of ``source`` in the window; returns its columns."""
    kind, files = log_files(source)
    # CSV cells as text, cast where they are used (as Spark reads CSV): an id such as "1.50" stays "1.50".
    files = [duckdb_file(name) for name in files]  # each one file, not a pattern
    relation = connection.read_parquet(files) if kind == "parquet" else connection.read_csv(files, all_varchar=True)
    columns = relation.columns
    if (since is not None or until is not None) and "timestamp" not in columns:
        raise ValueError(f"{source}: --since/--until need a 'timestamp' column, and the log has none")
    relation.create_view("raw_log")
    if since is not None or until is not None:
        bad = connection.execute(
            'SELECT count(*), any_value("timestamp"::VARCHAR) FROM raw_log '
            'WHERE "timestamp" IS NOT NULL AND TRY_CAST("timestamp" AS TIMESTAMPTZ) IS NULL'
        ).fetchone()
        if bad[0]:
            raise ValueError(
                f"{source}, column 'timestamp': {bad[0]:,} values are not ISO 8601 dates and times "
                f"(e.g. {bad[1]!r}); the window cannot place them"
            )
    connection.execute(f"CREATE VIEW score_log AS SELECT * FROM raw_log WHERE {window_sql(since, until)}")
    return columns


def duckdb_connection(memory_limit: str = "1GB", threads=None):
    """A quiet in-memory DuckDB connection with a memory limit."""
    import duckdb

    connection = duckdb.connect()
    connection.execute(f"SET memory_limit = '{memory_limit}'")
    connection.execute("SET enable_progress_bar = false")  # a library prints nothing of its own
    # A timestamp without a zone is UTC, as the pandas engine reads it (not the machine's zone).
    connection.execute("SET TimeZone = 'UTC'")
    if threads is not None:
        connection.execute(f"SET threads = {int(threads)}")
    return connection


def label_values(values) -> np.ndarray:
    """Labels as every engine reads them: True, False or None (anything not in the label texts)."""
    text = pd.Series(values, dtype=object).map(lambda value: None if value is None else str(value).strip().lower())
    return np.where(text.isin(TRUE_TEXTS), True, np.where(text.isin(FALSE_TEXTS), False, None)).astype(object)
