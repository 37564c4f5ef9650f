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

import math

import numpy as np

from ..score_tables import answerable_sign
from .counts import DEFAULT_BINS, MAX_DISTINCT, LogCounts, canonical, choose_binning
from .sources import FALSE_TEXTS, TRUE_TEXTS, duckdb_connection, duckdb_view, parse_time

__all__ = ["count_log_duckdb"]


def count_log_duckdb(source, signal: str, *, max_distinct=MAX_DISTINCT, bins=DEFAULT_BINS, since=None, until=None,
                     higher_is_answerable=True, memory_limit="1GB", threads=None) -> LogCounts:  # fmt: skip
    """Counts of ``signal`` in the log at ``source``, computed inside DuckDB (see the module docstring).

    ``since``/``until`` keep the rows whose ``timestamp`` is in ``[since, until)`` (ISO 8601 text or datetimes).
    """
    since, until = parse_time(since, "since"), parse_time(until, "until")
    connection = duckdb_connection(memory_limit, threads)
    try:
        columns = duckdb_view(connection, source, since, until)
        if signal not in columns:
            raise ValueError(f"{source}: no column {signal!r}; the log has {', '.join(columns)}")
        score = f'TRY_CAST("{signal}" AS DOUBLE)'
        sign = answerable_sign(higher_is_answerable)
        oriented = f"({sign!r} * {score})"
        n_rows, n_nan, n_distinct, low, high = connection.execute(
            f"SELECT count(*), count(*) FILTER (WHERE {score} IS NULL OR isnan({score})), "
            f"count(DISTINCT {score}) FILTER (WHERE NOT isnan({score})), "
            f"min({oriented}) FILTER (WHERE NOT isnan({score})), max({oriented}) FILTER (WHERE NOT isnan({score})) "
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
                f"least(greatest(floor(({oriented} - {binning.low!r}) / {width}), 0), {binning.bins - 1})::BIGINT"
            )
        slice_expression = 'CAST("slice" AS VARCHAR)' if "slice" in columns else "'all'"
        if "answerable" in columns:
            text = 'lower(trim(CAST("answerable" AS VARCHAR)))'
            label = f"CASE WHEN {text} IN {TRUE_TEXTS} THEN TRUE WHEN {text} IN {FALSE_TEXTS} THEN FALSE ELSE NULL END"
        else:
            label = "NULL::BOOLEAN"
        counted = connection.execute(
            f"SELECT {slice_expression} AS slice, {label} AS answerable, {bin_expression} AS bin, count(*) AS n "
            f"FROM score_log WHERE {score} IS NOT NULL AND NOT isnan({score}) GROUP BY ALL ORDER BY ALL"
        ).df()
    finally:
        connection.close()
    if binning.kind == "grid":
        counted["bin"] = sign * binning.edges(counted["bin"].to_numpy(np.int64))
    return LogCounts(signal, canonical(counted), binning, int(n_rows), int(n_nan), bool(higher_is_answerable))
