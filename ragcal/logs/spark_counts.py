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

import math

import numpy as np
import pandas as pd

from .._params import check_int
from .counts import COUNT_COLUMNS, DEFAULT_BINS, MAX_DISTINCT, LogCounts, canonical, choose_binning
from .duckdb_counts import log_files

__all__ = ["count_log_spark", "local_spark_session"]

#: Label texts read as answerable / unanswerable (case and spaces ignored); anything else is unlabeled.
TRUE_TEXTS = ("true", "t", "yes", "1", "1.0")
FALSE_TEXTS = ("false", "f", "no", "0", "0.0")


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
    session = (
        SparkSession.builder.master(f"local[{cores}]")
        .appName("ragcal-log-counts")
        .config("spark.ui.enabled", "false")
        .config("spark.ui.showConsoleProgress", "false")
        .config("spark.sql.shuffle.partitions", str(2 * cores))
        .getOrCreate()
    )
    session.sparkContext.setLogLevel("ERROR")
    return session


def _column(name: str):
    from pyspark.sql import functions

    return functions.col("`" + name.replace("`", "``") + "`")


def _read(spark, source):
    """A DataFrame of the log at ``source``: a local path, folder or glob (see ``log_files``) or a URI Spark lists."""
    text = str(source)
    if "://" in text and not text.startswith("file://"):  # a lake path (s3a://, abfss://, hdfs://): Spark lists it
        kind, files = ("csv" if text.endswith((".csv", ".csv.gz")) else "parquet"), [text]
    else:
        kind, files = log_files(text.removeprefix("file://"))
    if kind == "parquet":
        return spark.read.parquet(*files)
    return spark.read.csv(files, header=True)  # every column as text, cast below as DuckDB casts


def count_log_spark(source, signal: str, *, max_distinct=MAX_DISTINCT, bins=DEFAULT_BINS, spark=None) -> LogCounts:
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
    DataFrame = sql.DataFrame
    own_session = False
    if spark is None and not isinstance(source, DataFrame):
        spark = sql.SparkSession.getActiveSession()
        if spark is None:
            spark, own_session = local_spark_session(), True
    try:
        log = source if isinstance(source, DataFrame) else _read(spark, source)
        if signal not in log.columns:
            raise ValueError(f"{source}: no column {signal!r}; the log has {', '.join(log.columns)}")
        score = _column(signal).try_cast("double")
        missing = score.isNull() | F.isnan(score)
        present_score = F.when(~missing, score)
        summary = log.agg(
            F.count(F.lit(1)).alias("n_rows"),
            F.count(F.when(missing, 1)).alias("n_nan"),
            F.count_distinct(present_score).alias("n_distinct"),
            F.min(present_score).alias("low"),
            F.max(present_score).alias("high"),
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
            cell = F.floor((score - F.lit(binning.low)) / F.lit(binning.width))
            bin_column = F.least(F.greatest(cell, F.lit(0)), F.lit(binning.bins - 1)).cast("long")
        slice_column = _column("slice").cast("string") if "slice" in log.columns else F.lit("all")
        if "answerable" in log.columns:
            text = F.lower(F.trim(_column("answerable").cast("string")))
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
        frame["bin"] = binning.edges(frame["bin"].to_numpy(np.int64))
    return LogCounts(signal, canonical(frame), binning, int(summary["n_rows"]), int(summary["n_nan"]))
