"""After deployment: checks on live traffic that has no labels, and the labels that settle them.

- :mod:`ragcal.monitoring.shift`: :func:`monitor` compares an unlabeled score
  log with the gate's calibration set (decision shares, each signal's
  distribution, exchangeability over time) at a controlled false-alarm rate.
- :mod:`ragcal.monitoring.review`: :func:`review_sample` draws a stratified
  sample of a live log to label; :func:`review_estimates` turns its labels
  into the shares of wrong refusals and unsupported answers, with exact
  intervals for the design; :func:`refit_with_labels` refits the gate.
"""

from .review import (
    ReviewEstimates,
    attach_passages,
    bar_distances,
    read_review_labels,
    refit_with_labels,
    review_estimates,
    review_sample,
    stratified_share,
    write_review_csv,
)
from .shift import (
    ACTIONS,
    CALIBRATORS,
    MIN_ROWS,
    MonitorReport,
    SequentialTest,
    conformal_p_values,
    jumper_martingale,
    monitor,
    read_score_log,
    sequential_test,
    share_tests,
    signal_tests,
)

__all__ = [
    "ACTIONS",
    "CALIBRATORS",
    "MIN_ROWS",
    "MonitorReport",
    "SequentialTest",
    "conformal_p_values",
    "jumper_martingale",
    "monitor",
    "read_score_log",
    "sequential_test",
    "share_tests",
    "signal_tests",
    "ReviewEstimates",
    "attach_passages",
    "bar_distances",
    "read_review_labels",
    "refit_with_labels",
    "review_estimates",
    "review_sample",
    "stratified_share",
    "write_review_csv",
]
