"""Metrics: retrieval quality, AUC with intervals, and per-slice outcomes of a threshold.

- :mod:`ragcal.metrics.retrieval`: page-level Recall@k, MRR@k and context
  precision@k of TREC runs, with bootstrap intervals.
- :mod:`ragcal.metrics.auc`: ROC AUC with stratified bootstrap intervals (an
  m-out-of-n bootstrap for large score logs) and ROC bootstrap bands.
- :mod:`ragcal.metrics.outcomes`: answerable kept and each slice refused at a
  threshold, with exact binomial intervals; sweeps; group statistics.
- :mod:`ragcal.metrics.qpp`: signals as query performance predictors on the
  answerable questions (Kendall's tau, Pearson's r, sMARE), with intervals.
"""

from ._common import DegenerateInputWarning, drop_nan
from .auc import (
    auc_interval,
    auc_table,
    auc_with_ci,  # noqa: F401  (deprecated name, kept importable)
    roc_band,
)
from .outcomes import clopper_pearson, group_stats, outcome_table, sweep
from .qpp import qpp_correlations, qpp_table
from .retrieval import retrieval_metrics

#: What a user calls; the building blocks (bootstrap draws, AUC intervals of large tables, per-query metrics,
#: sMARE) are imported from their modules.
__all__ = [
    "DegenerateInputWarning",
    "auc_interval",
    "auc_table",
    "clopper_pearson",
    "drop_nan",
    "group_stats",
    "outcome_table",
    "qpp_correlations",
    "qpp_table",
    "retrieval_metrics",
    "roc_band",
    "sweep",
]
