"""The Spark engine: a score log in a lake (Parquet or CSV files, or a Spark DataFrame) as counts.

The counts are DataFrame aggregations that run where the data lies, on a
cluster or on a local Spark: one pass for the number of rows, of missing
scores, of distinct scores and their range (which choose the bins, as
:func:`ragcal.logs.counts.choose_binning` does for every engine), then one
``groupBy(slice, answerable, bin).count()``. No row of the log comes back to
Python, only the counts table. The grid cell of a score is computed as the
pandas engine computes it, ``floor((score - low) / width)`` in double
precision, and its edge from the cell number in NumPy, and labels are read as
:mod:`ragcal.logs.duckdb_counts` reads them, so the three engines give
identical counts.

``pyspark`` (4.0 or later, which runs on Java 17) is an optional extra:
``pip install 'ragcal[spark]'`` and a Java runtime.
"""

from __future__ import annotations

import itertools
import math
import os
import sys

import numpy as np
import pandas as pd

from .._params import check_int
from ..score_tables import answerable_sign
from .counts import COUNT_COLUMNS, DEFAULT_BINS, MAX_DISTINCT, LogCounts, canonical, choose_binning
from .sources import FALSE_TEXTS, TRUE_TEXTS, log_files, parse_time

__all__ = [
    "collect_batches_spark",
    "count_log_spark",
    "local_spark_session",
    "quoted_column",
    "read_log",
    "session_for",
    "sum_batches_spark",
    "windowed",
]


def _pyspark_sql():
    """``pyspark.sql``, or an ImportError that says how to install the optional extra."""
    try:
        import pyspark.sql
    except ImportError as error:
        raise ImportError(
            "the Spark engine needs pyspark: pip install 'ragcal[spark]' (and a Java 17+ runtime)"
        ) from error
    return pyspark.sql


def local_spark_session(*, cores: int = 2):
    """A quiet local SparkSession (``local[cores]``, no web UI, few shuffle partitions) for logs on this machine.

    Parameters
    ----------
    cores : int, default=2
        Worker threads of the local Spark.

    Returns
    -------
    SparkSession
        The active session if one was already made in this process, else a new one.
    """
    cores = check_int(cores, "cores", "local_spark_session", low=1)
    SparkSession = _pyspark_sql().SparkSession
    # Python workers (mapInPandas) run this interpreter, which has ragcal and pandas, unless the user chose one.
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    session = (
        SparkSession.builder.master(f"local[{cores}]")
        .appName("ragcal-log-counts")
        .config("spark.ui.enabled", "false")
        .config("spark.ui.showConsoleProgress", "false")
        .config("spark.sql.shuffle.partitions", str(2 * cores))
        .config("spark.sql.session.timeZone", "UTC")
        .config(
            "spark.pyspark.python", sys.executable
        )  # workers run this Python, with ragcal and pandas  # a timestamp without a zone is UTC, as for pandas
        .getOrCreate()
    )
    session.sparkContext.setLogLevel("ERROR")
    return session


def quoted_column(name: str):
    """The Spark column named ``name``, quoted (a name may hold dots or spaces)."""
    from pyspark.sql import functions

    return functions.col("`" + name.replace("`", "``") + "`")


def read_log(spark, source):
    """A DataFrame of the log at ``source``: a local path, folder or glob (see ``log_files``) or a URI Spark lists."""
    text = str(source)
    if "://" in text and not text.startswith("file://"):  # a lake path (s3a://, abfss://, hdfs://): Spark lists it
        kind, files = ("csv" if text.endswith((".csv", ".csv.gz")) else "parquet"), [text]
    else:
        kind, files = log_files(text.removeprefix("file://"))
    if kind == "parquet":
        return spark.read.parquet(*files)
    return spark.read.csv(files, header=True)  # every column as text, cast below as DuckDB casts


def _timestamp(log):
    """The ``timestamp`` column as Spark timestamps; ISO 8601 text without seconds gets ``:00`` (Spark needs them)."""
    from pyspark.sql import functions

    column = quoted_column("timestamp")
    if dict(log.dtypes)["timestamp"] == "string":
        column = functions.regexp_replace(column, r"^(\d{4}-\d\d-\d\d[T ]\d\d:\d\d)(?=[Z+-]|$)", "$1:00")
    return column.try_cast("timestamp")


def windowed(log, source, since, until):
    """The rows of ``log`` whose ``timestamp`` is in ``[since, until)``."""
    if since is None and until is None:
        return log
    if "timestamp" not in log.columns:
        raise ValueError(f"{source}: --since/--until need a 'timestamp' column, and the log has none")
    stamp = _timestamp(log)
    bad = log.where(quoted_column("timestamp").isNotNull() & stamp.isNull())
    first = bad.select(quoted_column("timestamp").cast("string")).first()
    if first is not None:
        raise ValueError(
            f"{source}, column 'timestamp': {bad.count():,} values are not ISO 8601 dates and times "
            f"(e.g. {first[0]!r}); the window cannot place them"
        )
    if since is not None:
        log = log.where(stamp >= since.to_pydatetime())
    if until is not None:
        log = log.where(stamp < until.to_pydatetime())
    return log


def session_for(source, spark):
    """``(session, own)``: the session given, the active one, or a local one that the caller must stop."""
    sql = _pyspark_sql()
    if spark is not None or isinstance(source, sql.DataFrame):
        return spark, False
    active = sql.SparkSession.getActiveSession()
    return (active, False) if active is not None else (local_spark_session(), True)


def count_log_spark(source, signal: str, *, max_distinct=MAX_DISTINCT, bins=DEFAULT_BINS, since=None, until=None,
                    higher_is_answerable=True, spark=None) -> LogCounts:  # fmt: skip
    """Counts of ``signal`` in a score log, computed by Spark (see the module docstring).

    Parameters
    ----------
    source : str, Path or pyspark.sql.DataFrame
        A CSV, CSV.gz or Parquet file, a folder or glob of Parquet files, a
        URI Spark can list (``s3a://bucket/logs/``), or a DataFrame already
        loaded (a table of the lake).
    signal : str
        The score column; text that is not a number counts as a missing score.
    max_distinct : int, default=MAX_DISTINCT
        Bins are the distinct scores up to this many, else a grid.
    bins : int, default=DEFAULT_BINS
        Grid cells over the score range when the scores are too many.
    since, until : str or datetime, optional
        Keep the rows whose ``timestamp`` is in ``[since, until)``.
    spark : SparkSession, optional
        The session to run in; default the active one, else a local one made
        here (``local[2]``) and stopped at the end.

    Returns
    -------
    LogCounts
        Identical to :func:`ragcal.logs.counts.count_log` on the same rows.
    """
    sql = _pyspark_sql()
    F = sql.functions
    since, until = parse_time(since, "since"), parse_time(until, "until")
    spark, own_session = session_for(source, spark)
    try:
        log = windowed(source if isinstance(source, sql.DataFrame) else read_log(spark, source), source, since, until)
        if signal not in log.columns:
            raise ValueError(f"{source}: no column {signal!r}; the log has {', '.join(log.columns)}")
        score = quoted_column(signal).try_cast("double")
        missing = score.isNull() | F.isnan(score)
        sign = answerable_sign(higher_is_answerable)
        oriented = F.lit(sign) * score
        present_score = F.when(~missing, score)
        present_oriented = F.when(~missing, oriented)
        summary = log.agg(
            F.count(F.lit(1)).alias("n_rows"),
            F.count(F.when(missing, 1)).alias("n_nan"),
            F.count_distinct(present_score).alias("n_distinct"),
            F.min(present_oriented).alias("low"),
            F.max(present_oriented).alias("high"),
        ).first()
        binning = choose_binning(
            int(summary["n_distinct"]),
            math.nan if summary["low"] is None else float(summary["low"]),
            math.nan if summary["high"] is None else float(summary["high"]),
            max_distinct=max_distinct,
            bins=bins,
        )
        if binning.kind == "distinct":
            bin_column = score
        else:
            cell = F.floor((oriented - F.lit(binning.low)) / F.lit(binning.width))
            bin_column = F.least(F.greatest(cell, F.lit(0)), F.lit(binning.bins - 1)).cast("long")
        slice_column = quoted_column("slice").cast("string") if "slice" in log.columns else F.lit("all")
        if "answerable" in log.columns:
            text = F.lower(F.trim(quoted_column("answerable").cast("string")))
            label = F.when(text.isin(*TRUE_TEXTS), True).when(text.isin(*FALSE_TEXTS), False)
        else:
            label = F.lit(None).cast("boolean")
        counted = (
            log.where(~missing)
            .select(slice_column.alias("slice"), label.alias("answerable"), bin_column.alias("bin"))
            .groupBy("slice", "answerable", "bin")
            .count()
            .collect()  # the counts table: one row per (slice, label, bin), never the log's rows
        )
    finally:
        if own_session:
            spark.stop()
    frame = pd.DataFrame([tuple(row) for row in counted], columns=list(COUNT_COLUMNS))
    if binning.kind == "grid":
        frame["bin"] = sign * binning.edges(frame["bin"].to_numpy(np.int64))
    return LogCounts(
        signal, canonical(frame), binning, int(summary["n_rows"]), int(summary["n_nan"]), bool(higher_is_answerable)
    )


def _mapped(spark, source, columns, function, schema, since, until):
    """The log's rows in the window, selected as :func:`ragcal.logs.engines.log_batches` selects them, mapped."""
    sql = _pyspark_sql()
    log = windowed(source if isinstance(source, sql.DataFrame) else read_log(spark, source), source, since, until)
    missing = [column for column in columns if column not in log.columns]
    if missing:
        raise ValueError(f"{source}: no column {missing[0]!r}; the log has {', '.join(log.columns)}")
    selected = [quoted_column(column).try_cast("double").alias(column) for column in columns]
    selected += [quoted_column(column) for column in ("id", "query", "slice", "answerable") if column in log.columns]
    if "timestamp" in log.columns:
        selected.append(_timestamp(log).alias("timestamp"))

    def batches(frames):
        for frame in frames:
            if "timestamp" in frame.columns:
                frame["timestamp"] = pd.to_datetime(frame["timestamp"], utc=True)
            yield function(frame.reset_index(drop=True))

    return log.select(*selected).mapInPandas(batches, schema)


def _schema(columns, types) -> str:
    return ", ".join(f"`{column}` {types.get(column, 'string')}" for column in columns)


def sum_batches_spark(source, columns, function, keys, key_types, *, since=None, until=None, spark=None):
    """:func:`ragcal.logs.engines.sum_batches` on Spark: ``mapInPandas(function)`` then ``groupBy(keys).sum("n")``.

    ``columns`` are cast to double (text that is not a number is null, NaN in
    the batch); ``id``, ``query``, ``slice``, ``answerable`` and ``timestamp``
    come along when present. ``key_types`` gives each key's Spark SQL type
    (default ``"string"``). Only the summed table comes back to Python.
    """
    F = _pyspark_sql().functions
    since, until = parse_time(since, "since"), parse_time(until, "until")
    spark, own_session = session_for(source, spark)
    try:
        schema = _schema(keys, key_types) + ", n long"
        mapped = _mapped(spark, source, columns, function, schema, since, until)
        rows = mapped.groupBy(*keys).agg(F.sum("n").alias("n")).collect()
    finally:
        if own_session:
            spark.stop()
    return pd.DataFrame([tuple(row) for row in rows], columns=[*keys, "n"])


def collect_batches_spark(source, columns, function, output_columns, output_types, *, since=None, until=None,
                          spark=None, chunk_rows: int = 1_000_000):  # fmt: skip
    """:func:`ragcal.logs.engines.collect_batches` on Spark: ``mapInPandas(function)``, its rows brought back.

    Yields DataFrames of at most ``chunk_rows`` rows, one partition at a time
    (``toLocalIterator``), so that the driver holds what the caller keeps of
    them, not every row ``function`` returned.
    """
    since, until = parse_time(since, "since"), parse_time(until, "until")
    output_columns = list(output_columns)
    spark, own_session = session_for(source, spark)
    try:
        schema = _schema(output_columns, output_types)
        rows = _mapped(spark, source, columns, function, schema, since, until).toLocalIterator()
        while chunk := list(itertools.islice(rows, chunk_rows)):
            yield pd.DataFrame([tuple(row) for row in chunk], columns=output_columns)
    finally:
        if own_session:
            spark.stop()
