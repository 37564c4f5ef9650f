"""Calibration: where to put the threshold, what it guarantees, and how it holds up on questions it was not fitted on.

::

    from ragcal.calibration import calibrate, fit_threshold, heldout_outcomes

    threshold = fit_threshold("keep@0.95", table["dense_top1"], table["answerable"])
    heldout = heldout_outcomes(table, "dense_top1", ["keep@0.95", "recall_guarantee@0.9"])

Modules, one concept each:

- :mod:`~ragcal.calibration.rules`: every threshold rule in one registry
  (:data:`RULES`), :func:`parse_rule`, :func:`fit_threshold`;
- :mod:`~ragcal.calibration.midway`: :func:`midway_threshold`, where a fitted
  threshold sits (midway between the boundary calibration score and the next one);
- :mod:`~ragcal.calibration.ltt`: Learn-then-Test (binomial p-values,
  fixed-sequence / Bonferroni / Holm, :class:`Certificate`), which certifies
  the risk rules and every gate of :mod:`ragcal.gates.certify`;
- :mod:`~ragcal.calibration.heldout`: the held-out protocol over stratified half splits, or splits by
  group (article) for questions that are not independent;
- :mod:`~ragcal.calibration.label_curve`: how many labels are enough;
- :mod:`~ragcal.calibration.report`: :func:`calibrate`, everything ``ragcal calibrate`` shows.

The package never imports :mod:`ragcal.gates`: gates import calibration.
"""

from .heldout import group_splits, heldout_outcomes, split_by_group, split_by_slice, summarize_heldout
from .label_curve import kept_share_interval, label_curve
from .ltt import Certificate, certify_candidates, ltt_certify
from .report import Calibration, calibrate
from .midway import THRESHOLD_PLACEMENT, midway_threshold
from .rules import RULES, CalibrationWarning, Rule, fit_threshold, parse_rule

__all__ = [
    "RULES",
    "Rule",
    "parse_rule",
    "fit_threshold",
    "midway_threshold",
    "THRESHOLD_PLACEMENT",
    "CalibrationWarning",
    "split_by_slice",
    "split_by_group",
    "group_splits",
    "heldout_outcomes",
    "summarize_heldout",
    "label_curve",
    "kept_share_interval",
    "Calibration",
    "calibrate",
    "Certificate",
    "certify_candidates",
    "ltt_certify",
]
