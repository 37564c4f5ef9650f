"""The DuckDB engine: a score log on disk (CSV, CSV.gz, Parquet, a folder or glob of Parquet files) as counts.

DuckDB reads the file where it lies, out of core and on every core, in two
aggregate queries: the number of distinct scores and their range (which choose
the bins, as :func:`ragcal.logs.counts.choose_binning` does for every engine),
then one ``GROUP BY slice, label, bin``. Only the counts table comes back to
Python, so memory stays bounded by DuckDB's ``memory_limit`` whatever the size
of the log. The grid cell of a score is computed as the pandas engine computes
it, ``floor((score - low) / width)`` in double precision, and its edge from
the cell number in NumPy, so the two engines give identical counts.
"""

from __future__ import annotations

import glob
import math
from pathlib import Path

import numpy as np

from .counts import DEFAULT_BINS, MAX_DISTINCT, LogCounts, canonical, choose_binning

__all__ = ["count_log_duckdb", "log_files"]

_TRUE = ("true", "t", "yes", "1", "1.0")
_FALSE = ("false", "f", "no", "0", "0.0")


def log_files(source) -> tuple[str, list[str]]:
    """``(format, files)`` of a log path: one CSV / CSV.gz / Parquet file, a folder of Parquet files, or a glob."""
    text = str(source)
    if any(character in text for character in "*?["):
        files = sorted(glob.glob(text))
    elif Path(text).is_dir():
        files = sorted(str(path) for path in Path(text).glob("*.parquet"))
    else:
        if not Path(text).is_file():
            raise FileNotFoundError(f"{text}: score log not found")
        files = [text]
    if not files:
        raise FileNotFoundError(f"{text}: no Parquet files there")
    kinds = {"parquet" if name.endswith(".parquet") else "csv" if name.endswith((".csv", ".csv.gz")) else "" for name in files}
    if kinds != {"parquet"} and kinds != {"csv"}:
        raise ValueError(f"{text}: a score log is CSV, CSV.gz or Parquet (one kind); found {sorted(files)[:3]}")
    return kinds.pop(), files


def count_log_duckdb(source, signal: str, *, max_distinct=MAX_DISTINCT, bins=DEFAULT_BINS, memory_limit="1GB",
                     threads=None) -> LogCounts:  # fmt: skip
    """Counts of ``signal`` in the log at ``source``, computed inside DuckDB (see the module docstring)."""
    import duckdb

    kind, files = log_files(source)
    connection = duckdb.connect()
    try:
        connection.execute(f"SET memory_limit = '{memory_limit}'")
        connection.execute("SET enable_progress_bar = false")  # a library prints nothing of its own
        if threads is not None:
            connection.execute(f"SET threads = {int(threads)}")
        relation = connection.read_parquet(files) if kind == "parquet" else connection.read_csv(files)
        columns = relation.columns
        if signal not in columns:
            raise ValueError(f"{source}: no column {signal!r}; the log has {', '.join(columns)}")
        relation.create_view("score_log")
        score = f'TRY_CAST("{signal}" AS DOUBLE)'
        n_rows, n_nan, n_distinct, low, high = connection.execute(
            f"SELECT count(*), count(*) FILTER (WHERE {score} IS NULL OR isnan({score})), "
            f"count(DISTINCT {score}) FILTER (WHERE NOT isnan({score})), "
            f"min({score}) FILTER (WHERE NOT isnan({score})), max({score}) FILTER (WHERE NOT isnan({score})) "
            "FROM score_log"
        ).fetchone()
        binning = choose_binning(
            int(n_distinct), math.nan if low is None else low, math.nan if high is None else high,
            max_distinct=max_distinct, bins=bins,
        )  # fmt: skip
        if binning.kind == "distinct":
            bin_expression = score
        else:
            width = repr(binning.width)
            bin_expression = (
                f"least(greatest(floor(({score} - {binning.low!r}) / {width}), 0), {binning.bins - 1})::BIGINT"
            )
        slice_expression = 'CAST("slice" AS VARCHAR)' if "slice" in columns else "'all'"
        if "answerable" in columns:
            text = 'lower(trim(CAST("answerable" AS VARCHAR)))'
            label = (
                f"CASE WHEN {text} IN {_TRUE} THEN TRUE WHEN {text} IN {_FALSE} THEN FALSE ELSE NULL END"
            )
        else:
            label = "NULL::BOOLEAN"
        counted = connection.execute(
            f"SELECT {slice_expression} AS slice, {label} AS answerable, {bin_expression} AS bin, count(*) AS n "
            f"FROM score_log WHERE {score} IS NOT NULL AND NOT isnan({score}) GROUP BY ALL ORDER BY ALL"
        ).df()
    finally:
        connection.close()
    if binning.kind == "grid":
        counted["bin"] = binning.edges(counted["bin"].to_numpy(np.int64))
    return LogCounts(signal, canonical(counted), binning, int(n_rows), int(n_nan))
