"""After deployment: checks on live traffic that has no labels.

- :mod:`ragcal.monitoring.shift`: :func:`monitor` compares an unlabeled score
  log with the gate's calibration set (decision shares, each signal's
  distribution, exchangeability over time) at a controlled false-alarm rate.
"""

from .shift import (
    ACTIONS,
    CALIBRATORS,
    MIN_ROWS,
    MonitorReport,
    SequentialTest,
    conformal_p_values,
    monitor,
    read_score_log,
    sequential_test,
    share_tests,
    signal_tests,
    jumper_martingale,
)

__all__ = [
    "ACTIONS",
    "CALIBRATORS",
    "MIN_ROWS",
    "MonitorReport",
    "SequentialTest",
    "conformal_p_values",
    "monitor",
    "read_score_log",
    "sequential_test",
    "share_tests",
    "signal_tests",
    "jumper_martingale",
]
