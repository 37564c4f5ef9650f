"""Which engine reads a score log, the time window, and per-batch functions merged by addition.

A score log is a path: one CSV, CSV.gz or Parquet file, a folder of Parquet
files or a glob. Three engines read it:

- ``"pandas"``: the whole log in memory, for tables that fit;
- ``"duckdb"``: embedded, out of core and on every core, memory bounded;
- ``"spark"``: DataFrame aggregations where the log lies (a cluster or a local
  Spark), with the optional ``pyspark`` extra.

``"auto"`` picks DuckDB for a folder, a glob or a file above
:data:`AUTO_BYTES`, pandas otherwise. ``since`` and ``until`` keep the rows
whose ``timestamp`` is in ``[since, until)``, inside the engine.

Counts of one signal come from :func:`count_signal`. Anything else that
decomposes into counts (a gate's decisions, say) is a function applied to the
log in batches of rows, each returning a small table of keys and ``n``, summed
over batches by :func:`sum_batches`: in Python for pandas and DuckDB (which
streams the batches; their tables are summed as they come, so that memory
holds about a batch), as ``mapInPandas`` followed by ``groupBy().sum()`` on
Spark.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from functools import partial
from pathlib import Path

import numpy as np
import pandas as pd

from .._params import check_choice, check_int
from ..score_tables import _numpy_columns
from .counts import DEFAULT_BINS, MAX_DISTINCT, LogCounts, count_log
from .duckdb_counts import count_log_duckdb
from .sources import duckdb_connection, duckdb_view, log_files, parse_time, read_pandas

__all__ = [
    "AUTO_BYTES",
    "ENGINES",
    "choose_engine",
    "collect_batches",
    "count_signal",
    "gather",
    "log_batches",
    "sum_batches",
]

ENGINES = ("auto", "pandas", "duckdb", "spark")
#: Under ``engine="auto"``, a log file above this size is read by DuckDB (a folder or a glob always is).
AUTO_BYTES = 256 * 2**20
#: Rows per batch handed to a Python function by the DuckDB engine.
BATCH_ROWS = 1_000_000


def choose_engine(engine: str, source) -> str:
    """The engine that reads ``source``: ``engine`` itself, or under ``"auto"`` DuckDB for large or many files."""
    engine = check_choice(engine, "engine", "choose_engine", ENGINES)
    if engine != "auto":
        return engine
    text = str(source)
    if not any(character in text for character in "*?[") and not Path(text).exists():
        return "pandas"  # which says the file is missing, as for any table
    _, files = log_files(source)
    many = len(files) > 1 or str(source) != files[0]
    return "duckdb" if many or Path(files[0]).stat().st_size > AUTO_BYTES else "pandas"


def count_signal(source, signal: str, *, engine: str = "auto", since=None, until=None, max_distinct=MAX_DISTINCT,
                 bins=DEFAULT_BINS, higher_is_answerable: bool = True) -> LogCounts:  # fmt: skip
    """Counts of ``signal`` per slice, label and score bin in the log at ``source``, by ``engine``.

    The three engines give identical counts (tested); see :mod:`ragcal.logs.counts` for the bins.
    """
    engine = choose_engine(engine, source)
    since, until = parse_time(since, "since"), parse_time(until, "until")
    if engine == "pandas":
        table = read_pandas(source, [signal], since, until)
        return count_log(table, signal, max_distinct=max_distinct, bins=bins, higher_is_answerable=higher_is_answerable)
    if engine == "duckdb":
        return count_log_duckdb(
            source, signal, max_distinct=max_distinct, bins=bins, since=since, until=until,
            higher_is_answerable=higher_is_answerable,
        )  # fmt: skip
    from .spark_counts import count_log_spark

    return count_log_spark(
        source, signal, max_distinct=max_distinct, bins=bins, since=since, until=until,
        higher_is_answerable=higher_is_answerable,
    )  # fmt: skip


def log_batches(source, columns, *, engine: str = "auto", since=None, until=None,
                batch_rows: int = BATCH_ROWS) -> Iterator[pd.DataFrame]:  # fmt: skip
    """The log's rows in the window as DataFrames of at most ``batch_rows`` rows (pandas or DuckDB engine).

    ``columns`` are read as numbers (text that is not a number is NaN); ``id``,
    ``query``, ``slice``, ``answerable`` and ``timestamp`` come along when the log has them.
    """
    engine = choose_engine(engine, source)
    batch_rows = check_int(batch_rows, "batch_rows", "log_batches", low=1)
    since, until = parse_time(since, "since"), parse_time(until, "until")
    if engine == "spark":
        raise ValueError("log_batches reads with pandas or DuckDB; on Spark use sum_batches (mapInPandas)")
    if engine == "pandas":
        table = read_pandas(source, columns, since, until)
        for start in range(0, max(len(table), 1), batch_rows):
            yield table.iloc[start : start + batch_rows].reset_index(drop=True)
        return
    connection = duckdb_connection()
    try:
        present = duckdb_view(connection, source, since, until)
        missing = [column for column in columns if column not in present]
        if missing:
            raise ValueError(f"{source}: no column {missing[0]!r}; the log has {', '.join(present)}")
        selected = [f'TRY_CAST("{column}" AS DOUBLE) AS "{column}"' for column in columns]
        selected += [f'"{column}"' for column in ("id", "query", "slice", "answerable") if column in present]
        if "timestamp" in present:
            selected.append('TRY_CAST("timestamp" AS TIMESTAMPTZ) AS "timestamp"')
        result = connection.execute(f"SELECT {', '.join(selected)} FROM score_log")
        # DuckDB hands pandas chunks of 2,048-row vectors; they are cut into batches of batch_rows rows.
        vectors = max(1, -(-batch_rows // 2048))
        pending, rows = [], 0
        while True:
            chunk = result.fetch_df_chunk(vectors)
            if len(chunk):
                pending.append(chunk)
                rows += len(chunk)
            while rows >= batch_rows or (rows and not len(chunk)):
                table = pd.concat(pending, ignore_index=True) if len(pending) > 1 else pending[0]
                yield _numpy_columns(table.iloc[:batch_rows].reset_index(drop=True))
                rest = table.iloc[batch_rows:].reset_index(drop=True)
                pending, rows = ([rest] if len(rest) else []), len(rest)
            if not len(chunk):
                return
    finally:
        connection.close()


def sum_batches(source, columns, function: Callable[[pd.DataFrame], pd.DataFrame], keys, *, engine: str = "auto",
                since=None, until=None, key_types=None, batch_rows: int = BATCH_ROWS) -> pd.DataFrame:  # fmt: skip
    """``function`` applied to every batch of the log, its tables of ``keys`` and ``n`` summed over batches.

    Parameters
    ----------
    source : str or Path
        The log (see :func:`choose_engine`).
    columns : sequence of str
        Numeric columns ``function`` reads (see :func:`log_batches`).
    function : callable
        ``function(batch) -> DataFrame`` with the columns ``keys`` and ``n``;
        it must depend on nothing but the batch's rows (Spark runs it on its
        workers, in any order).
    keys : sequence of str
    engine, since, until
        See the module docstring.
    key_types : dict, optional
        Spark SQL type of each key (default ``"string"``), for ``mapInPandas``.
    batch_rows : int
        Rows per batch on pandas and DuckDB (Spark makes its own batches). The
        tables ``function`` returns are summed whenever they hold more than this
        many rows, so memory holds about two batches whatever the log's size.

    Returns
    -------
    DataFrame
        ``keys`` and ``n`` (int64), one row per key seen, sorted by the keys.
    """
    keys = list(keys)
    engine = choose_engine(engine, source)
    if engine == "spark":
        from .spark_counts import sum_batches_spark

        summed = sum_batches_spark(source, columns, function, keys, key_types or {}, since=since, until=until)
    else:
        batches = log_batches(source, columns, engine=engine, since=since, until=until, batch_rows=batch_rows)
        summed = gather((function(batch) for batch in batches), [*keys, "n"], partial(_summed, keys=keys), batch_rows)
        if summed.empty:
            return pd.DataFrame({**{key: pd.Series(dtype=object) for key in keys}, "n": pd.Series(dtype=np.int64)})
    summed["n"] = summed["n"].astype(np.int64)
    return summed.sort_values(keys, kind="stable").reset_index(drop=True)


def _summed(rows: pd.DataFrame, keys) -> pd.DataFrame:
    """``n`` summed per distinct ``keys`` (missing keys are keys too)."""
    return rows.groupby(keys, dropna=False)["n"].sum().reset_index()


def collect_batches(source, columns, function: Callable[[pd.DataFrame], pd.DataFrame], output_columns, *,
                    engine: str = "auto", since=None, until=None, output_types=None, reduce=None,
                    reduce_rows: int = BATCH_ROWS, batch_rows: int = BATCH_ROWS) -> pd.DataFrame:  # fmt: skip
    """``function`` applied to every batch of the log, its outputs (a few rows each) concatenated.

    For merges that are not sums: e.g. each batch's ``k`` rows with the
    smallest hash per stratum, of which the caller keeps the ``k`` smallest
    overall. ``function(batch)`` returns a DataFrame with ``output_columns``;
    ``output_types`` gives their Spark SQL types (default ``"string"``).

    ``reduce(rows) -> rows``, when given, keeps what matters of the rows
    gathered so far (the ``k`` smallest, say); it is applied whenever more than
    ``reduce_rows`` rows are held and once at the end, so memory holds about
    ``reduce_rows`` rows whatever the log's size. It must not depend on how the
    rows were split: ``reduce(a + b) == reduce(reduce(a) + reduce(b))``. Rows
    come in batch order. The row order of the result is otherwise not defined.
    ``batch_rows`` is the rows per batch on pandas and DuckDB (Spark makes its own).
    """
    output_columns = list(output_columns)
    reduce_rows = check_int(reduce_rows, "reduce_rows", "collect_batches", low=1)
    engine = choose_engine(engine, source)
    if engine == "spark":
        from .spark_counts import collect_batches_spark

        outputs = collect_batches_spark(
            source, columns, function, output_columns, output_types or {}, since=since, until=until,
            chunk_rows=reduce_rows,
        )  # fmt: skip
    else:
        batches = log_batches(source, columns, engine=engine, since=since, until=until, batch_rows=batch_rows)
        outputs = (function(batch) for batch in batches)
    return gather(outputs, output_columns, reduce, reduce_rows)


def gather(parts, output_columns, reduce=None, reduce_rows: int = BATCH_ROWS) -> pd.DataFrame:
    """DataFrames ``parts`` concatenated (their ``output_columns``), reduced as :func:`collect_batches` says."""
    output_columns = list(output_columns)
    held, n_held = [], 0
    for part in parts:
        if not len(part):
            continue
        held.append(part[output_columns])
        n_held += len(part)
        if reduce is not None and n_held > reduce_rows:
            held = [reduce(pd.concat(held, ignore_index=True))]
            n_held = len(held[0])
    if not held:
        return pd.DataFrame({column: pd.Series(dtype=object) for column in output_columns})
    rows = pd.concat(held, ignore_index=True)
    return (rows if reduce is None else reduce(rows)).reset_index(drop=True)
