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

from .counts import Binning, LogCounts, choose_binning, count_log

__all__ = ["Binning", "LogCounts", "choose_binning", "count_log"]
