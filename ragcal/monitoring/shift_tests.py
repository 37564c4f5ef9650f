"""Two-sample shift tests of a live log against the calibration set: decision shares and signal distributions.

- :func:`share_tests`: the shares of answers, hedges and refusals the gate
  gives on the live log against those it gives on the calibration set (under
  the calibration set's own slice mix), one Fisher exact test per action
  (:func:`share_tests_from_counts` computes them from the counts of each
  action alone, as an engine over a large log gives them);
- :func:`signal_tests`: for every signal the gate reads, a two-sample
  Kolmogorov-Smirnov test of the live values against the calibration values,
  and the shift of the median with a seeded bootstrap interval.

:func:`~ragcal.monitoring.monitor` runs both, with the sequential test of
:mod:`ragcal.monitoring.sequential`, as one family.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

__all__ = ["share_tests", "share_tests_from_counts", "signal_tests"]


def share_tests(live_actions, calibration_actions, *, confidence: float = 0.95) -> pd.DataFrame:
    """Live answer, hedge and refuse shares against the calibration set's, with exact intervals and tests.

    For each action, the count in the live log and in the calibration set form
    a 2x2 table (this action or another, live or calibration), tested with
    Fisher's exact test (two-sided). If calibration and live rows are
    exchangeable (drawn from the same traffic), then given the pooled count
    of the action the live count is hypergeometric, and that is exactly the
    null distribution of Fisher's test: the test is exact at any sample size,
    including a random split of one fixed set, and conservative where counts
    are small, where a chi-square test is not valid. Both shares are estimates,
    so neither side is treated as known.

    Parameters
    ----------
    live_actions, calibration_actions : array-like of str
        ``action`` column of :meth:`ragcal.gates.Gate.decide_table`.
    confidence : float, default=0.95
        Of the Clopper-Pearson intervals.

    Returns
    -------
    DataFrame
        One row per action of :data:`~ragcal.gates.ACTIONS`: ``live_k, live_n, live_share,
        live_low, live_high``, the same for ``calibration_``, ``difference``
        (live minus calibration share), ``p_value`` and ``tested``. Only
        actions the gate took somewhere are tested; when only two occur, the
        tests of the two are the same test and only the first is counted
        (``tested`` False on the other, which repeats its p-value). An action
        that never occurs has ``p_value`` 1 and ``tested`` False.
    """
    from ..gates.base import ACTIONS

    live_actions = np.asarray(live_actions, dtype=object)
    calibration_actions = np.asarray(calibration_actions, dtype=object)
    known = np.array(ACTIONS, dtype=object)
    unknown = sorted(map(str, set(np.concatenate([live_actions, calibration_actions])) - set(ACTIONS)))
    if unknown:
        raise ValueError(f"share_tests: actions must be among {ACTIONS}; got {unknown}")
    live_k = (live_actions[:, None] == known).sum(axis=0)
    calibration_k = (calibration_actions[:, None] == known).sum(axis=0)
    return share_tests_from_counts(
        live_k, live_actions.size, calibration_k, calibration_actions.size, confidence=confidence
    )


def share_tests_from_counts(live_k, live_n: int, calibration_k, calibration_n: int, *,
                            confidence: float = 0.95) -> pd.DataFrame:  # fmt: skip
    """:func:`share_tests` from the counts of each action: what any engine that can count decisions gives.

    Parameters
    ----------
    live_k, calibration_k : array-like of int, shape (3,)
        How many rows got each action of :data:`~ragcal.gates.ACTIONS`, in that order.
    live_n, calibration_n : int
        Rows of each side (every row gets one action, so each ``k`` sums to ``n``).
    confidence : float, default=0.95

    Returns
    -------
    DataFrame
        As :func:`share_tests`, which calls this function: the two give identical results.
    """
    from scipy.stats import fisher_exact

    from ..gates.base import ACTIONS
    from ..metrics.outcomes import clopper_pearson

    live_k = np.asarray(live_k, dtype=np.int64)
    calibration_k = np.asarray(calibration_k, dtype=np.int64)
    live_n, calibration_n = int(live_n), int(calibration_n)
    for name, counts, total in (("live", live_k, live_n), ("calibration", calibration_k, calibration_n)):
        if counts.shape != (len(ACTIONS),) or counts.min() < 0 or counts.sum() != total:
            raise ValueError(
                f"share_tests_from_counts: {name}_k must be {len(ACTIONS)} counts (one per action of {ACTIONS}) "
                f"summing to {name}_n={total}; got {counts.tolist()}"
            )
    live_low, live_high = clopper_pearson(live_k, live_n, confidence=confidence)
    calibration_low, calibration_high = clopper_pearson(calibration_k, calibration_n, confidence=confidence)
    occurs = (live_k + calibration_k) > 0
    p_values = np.ones(len(ACTIONS))
    tested = np.zeros(len(ACTIONS), dtype=bool)
    for position in np.flatnonzero(occurs):
        counts = [[live_k[position], live_n - live_k[position]],
                  [calibration_k[position], calibration_n - calibration_k[position]]]
        p_values[position] = fisher_exact(counts).pvalue
    if occurs.sum() == 2:
        tested[np.flatnonzero(occurs)[0]] = True
    elif occurs.sum() == 3:
        tested[:] = True
    with np.errstate(invalid="ignore", divide="ignore"):
        live_share = live_k / live_n
        calibration_share = calibration_k / calibration_n
    return pd.DataFrame(
        {
            "action": list(ACTIONS),
            "live_k": live_k,
            "live_n": live_n,
            "live_share": live_share,
            "live_low": live_low,
            "live_high": live_high,
            "calibration_k": calibration_k,
            "calibration_n": calibration_n,
            "calibration_share": calibration_share,
            "calibration_low": calibration_low,
            "calibration_high": calibration_high,
            "difference": live_share - calibration_share,
            "p_value": p_values,
            "tested": tested,
        }
    )


def signal_tests(live: pd.DataFrame, calibration: pd.DataFrame, signals, *, n_resamples: int = 2000,
                 confidence: float = 0.95, random_state=0) -> pd.DataFrame:
    """Two-sample comparison of each signal's live and calibration values.

    NaN values are dropped signal by signal, and counted (``live_nan``,
    ``calibration_nan``). The Kolmogorov-Smirnov test is
    :func:`scipy.stats.ks_2samp` (two-sided, exact p-value for small samples):
    under exchangeability of live and calibration rows it is valid for any
    split of one pooled set (ties, such as a BM25 score of 0, make it
    conservative). The median shift is live minus calibration, with a
    percentile bootstrap interval (:func:`scipy.stats.bootstrap`, each sample
    resampled on its own), which describes the size of a shift and takes no
    part in the decision.

    Parameters
    ----------
    live, calibration : DataFrame
        With the ``signals`` columns.
    signals : sequence of str
    n_resamples : int, default=2000
        Bootstrap resamples of the median shift; 0 leaves its interval NaN.
    confidence : float, default=0.95
    random_state : int or numpy.random.Generator, default=0

    Returns
    -------
    DataFrame
        One row per signal: ``signal, live_n, live_nan, calibration_n,
        calibration_nan, ks_statistic, p_value, live_median,
        calibration_median, median_shift, shift_low, shift_high``. A signal
        with no value on one side has NaN statistics and p-value (and is not
        tested).
    """
    from scipy.stats import bootstrap, ks_2samp

    rng = np.random.default_rng(random_state)
    rows = []
    for signal in signals:
        live_values = live[signal].to_numpy(dtype=float)
        calibration_values = calibration[signal].to_numpy(dtype=float)
        live_kept = live_values[~np.isnan(live_values)]
        calibration_kept = calibration_values[~np.isnan(calibration_values)]
        row = {
            "signal": signal,
            "live_n": live_kept.size,
            "live_nan": int(live_values.size - live_kept.size),
            "calibration_n": calibration_kept.size,
            "calibration_nan": int(calibration_values.size - calibration_kept.size),
            "ks_statistic": np.nan,
            "p_value": np.nan,
            "live_median": np.nan,
            "calibration_median": np.nan,
            "median_shift": np.nan,
            "shift_low": np.nan,
            "shift_high": np.nan,
        }
        if live_kept.size and calibration_kept.size:
            result = ks_2samp(live_kept, calibration_kept)
            row["ks_statistic"], row["p_value"] = float(result.statistic), float(result.pvalue)
            row["live_median"], row["calibration_median"] = float(np.median(live_kept)), float(np.median(calibration_kept))
            row["median_shift"] = row["live_median"] - row["calibration_median"]
            if n_resamples > 0 and live_kept.size > 1 and calibration_kept.size > 1:
                interval = bootstrap(
                    (live_kept, calibration_kept),
                    _median_difference,
                    n_resamples=n_resamples,
                    confidence_level=confidence,
                    method="percentile",
                    paired=False,
                    vectorized=True,
                    rng=rng,
                ).confidence_interval
                row["shift_low"], row["shift_high"] = float(interval.low), float(interval.high)
        rows.append(row)
    return pd.DataFrame(rows, columns=list(rows[0]) if rows else None)


def _median_difference(live_values, calibration_values, axis=-1):
    return np.median(live_values, axis=axis) - np.median(calibration_values, axis=axis)
