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

from ._common import DegenerateInputWarning
from .auc import AucInterval, auc_bootstrap, auc_interval, auc_table, auc_with_ci, roc_band
from .outcomes import clopper_pearson, group_stats, outcome_table, slice_summary, sweep
from .qpp import QPP_MEASURES, qpp_correlations, qpp_measures, qpp_table, smare, smare_chance
from .retrieval import RETRIEVAL_METRICS, bootstrap_mean_ci, per_query_retrieval_metrics, retrieval_metrics

__all__ = [
    "DegenerateInputWarning",
    "RETRIEVAL_METRICS",
    "retrieval_metrics",
    "per_query_retrieval_metrics",
    "bootstrap_mean_ci",
    "auc_with_ci",
    "auc_interval",
    "AucInterval",
    "auc_bootstrap",
    "auc_table",
    "roc_band",
    "clopper_pearson",
    "outcome_table",
    "sweep",
    "group_stats",
    "slice_summary",
    "QPP_MEASURES",
    "smare",
    "smare_chance",
    "qpp_measures",
    "qpp_correlations",
    "qpp_table",
]
