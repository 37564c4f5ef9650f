"""After deployment: checks on live traffic that has no labels, and the labels that settle them.

Monitor: :func:`monitor` compares an unlabeled score log
(:func:`read_score_log`) with the gate's calibration set (decision shares,
each signal's distribution, exchangeability over time) at a controlled
false-alarm rate, and returns a :class:`MonitorReport`.

Review: seed 003's advice is to "log rejected queries and manually check
whether relevant documents existed. If more than 20% of rejections were
wrong, your threshold is too high". This is that loop::

    sample = review_sample(gate, live_log, size=60, random_state=0)
    sample = attach_passages(sample, index, gate, k=3)
    write_review_csv("review.csv", sample)          # label it (JupyterLab labeler, or by hand)
    labels = read_review_labels("review.csv")
    estimates = review_estimates(labels)             # shares with exact stratified intervals
    print(estimates.to_markdown())
    new_gate, change = refit_with_labels(gate, calibration, labels, rule="keep@0.95")

One module per concept:

- :mod:`~ragcal.monitoring.score_log`: :func:`read_score_log`;
- :mod:`~ragcal.monitoring.shift_tests`: decision shares (Fisher) and signal
  distributions (Kolmogorov-Smirnov, median shift);
- :mod:`~ragcal.monitoring.sequential`: conformal p-values, the jumper test
  martingale, the exchangeability test over time;
- :mod:`~ragcal.monitoring.report`: :func:`monitor` and :class:`MonitorReport`;
- :mod:`~ragcal.monitoring.sample`: the stratified review sample (:func:`review_sample`);
- :mod:`~ragcal.monitoring.review_files`: the labeling CSV
  (:func:`attach_passages`, :func:`write_review_csv`, :func:`read_review_labels`);
- :mod:`~ragcal.monitoring.estimates`: :func:`review_estimates` and
  :func:`stratified_share`, exact intervals for the design;
- :mod:`~ragcal.monitoring.refit`: :func:`refit_with_labels`.
"""

from .estimates import ReviewEstimates, review_estimates, stratified_share
from .refit import refit_with_labels
from .report import MonitorReport, monitor
from .review_files import attach_passages, read_review_labels, write_review_csv
from .sample import review_sample
from .score_log import read_score_log

__all__ = [
    "MonitorReport",
    "ReviewEstimates",
    "attach_passages",
    "monitor",
    "read_review_labels",
    "read_score_log",
    "refit_with_labels",
    "review_estimates",
    "review_sample",
    "stratified_share",
    "write_review_csv",
]
