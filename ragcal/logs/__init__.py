"""Score logs of any size as mergeable counts, read by pandas, DuckDB or Spark.

- :mod:`ragcal.logs.counts`: a log as counts per slice, label and score bin
  (:class:`LogCounts`), and the bins (:class:`Binning`);
- :mod:`ragcal.logs.sources`: where a log lies (a file, a folder, a glob) and
  the ``[since, until)`` window on its ``timestamp``;
- :mod:`ragcal.logs.engines`: which engine reads it, the counts of a signal on
  any engine, and Python functions applied to every batch of rows, merged;
- :mod:`ragcal.logs.duckdb_counts` and :mod:`ragcal.logs.spark_counts`: the
  counts inside DuckDB and as Spark DataFrame aggregations (the ``spark`` extra);
- :mod:`ragcal.logs.calibration_counts`, :mod:`ragcal.logs.monitor_counts`,
  :mod:`ragcal.logs.review_draw`: ``ragcal calibrate``, ``monitor`` and
  ``review`` on a log of any size.
"""

from .._lazy import lazy_names

#: The entry points, loaded on first use (DuckDB and Spark only when an engine needs them): what
#: ``ragcal calibrate``, ``monitor`` and ``review`` call on a log of any size, and the counts they share.
_API = {
    "calibrate_counts": "calibration_counts",
    "monitor_log": "monitor_counts",
    "review_sample_log": "review_draw",
    "count_signal": "engines",
    "choose_engine": "engines",
    "Binning": "counts",
    "LogCounts": "counts",
    "choose_binning": "counts",
    "count_log": "counts",
}

__all__ = list(_API)

__getattr__, __dir__ = lazy_names(__name__, _API, globals())
