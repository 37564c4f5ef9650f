"""Score logs of any size as mergeable counts (issue 35, in progress: the counts layer, the DuckDB and Spark engines).

- :mod:`ragcal.logs.counts`: a log as counts per slice, label and score bin
  (:class:`LogCounts`), and the statistics computed from the counts alone;
- :mod:`ragcal.logs.duckdb_counts`: the same counts computed inside DuckDB from
  a file, a folder or a glob of files on disk.
- :mod:`ragcal.logs.spark_counts`: the same counts as Spark DataFrame
  aggregations (the optional ``pyspark`` extra).
"""

from .counts import Binning, LogCounts, choose_binning, count_log

__all__ = ["Binning", "LogCounts", "choose_binning", "count_log"]
