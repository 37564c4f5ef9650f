r"""ROC AUC of a signal with stratified bootstrap intervals, for small labeled sets and for large score logs.

The AUC itself comes from :func:`sklearn.metrics.roc_auc_score`. Its interval
is a stratified percentile bootstrap (:func:`auc_bootstrap`, vectorised).

**Large tables.** The stratified bootstrap costs O(resamples x rows). With
``bootstrap_rows`` set and more rows than that, :func:`auc_interval` uses the
m-out-of-n bootstrap: it draws, without replacement and per class, a
subsample of about ``bootstrap_rows`` rows in the table's class proportions,
bootstraps it (stratified, ``n_resamples`` times), and rescales the
deviations of the resampled AUCs from the subsample's AUC to the full table's
size. The AUC is a two-sample U-statistic whose variance is
:math:`\approx c_1 / n_{pos} + c_0 / n_{neg}`, so with the same share
:math:`f = m/n` drawn from each class the deviations shrink by
:math:`\sqrt{f}`:

.. math:: [\hat A + s\, q_{\alpha/2},\; \hat A + s\, q_{1-\alpha/2}], \qquad
          s = \sqrt{(1/n_{pos} + 1/n_{neg}) / (1/m_{pos} + 1/m_{neg})},

where :math:`\hat A` is the AUC of the whole table (exact, every row) and
:math:`q` are quantiles of the subsample's bootstrap deviations. Up to
``bootstrap_rows`` rows nothing changes: the plain stratified percentile
bootstrap on every row. The ``interval`` column says which was used.
"""

from __future__ import annotations

import math
import warnings
from dataclasses import dataclass

import numpy as np
import pandas as pd

from ..score_tables import signal_columns, unanswerable_slices
from ._common import DegenerateInputWarning, check_binary, drop_nan

__all__ = ["AucInterval", "auc_bootstrap", "auc_interval", "auc_table", "auc_with_ci", "roc_band"]


def auc_bootstrap(
    y_true, y_score, *, n_resamples: int = 2000, random_state=0, batch_size: int | None = None
) -> np.ndarray:
    """AUC of stratified bootstrap resamples, vectorised.

    Positives and negatives are resampled separately, so every resample has
    both classes in the original numbers. The AUC of a resample is the
    Mann-Whitney statistic that ``sklearn.metrics.roc_auc_score`` computes::

        AUC = sum over drawn positives p of (N(< s_p) + 0.5 * N(= s_p)) / (n_pos * n_neg)

    where ``N(< s)`` counts the drawn negatives scoring below ``s``. The
    negatives are sorted once; per resample their draw counts are
    accumulated along that order, and each drawn positive reads its two
    counts at positions found once by ``searchsorted``. The cost is linear
    in the number of queries per resample: 10,000 resamples of 200 queries
    take milliseconds, and large tables are processed ``batch_size``
    resamples at a time to bound memory.

    Returns
    -------
    ndarray of shape (n_resamples,)
        NaN everywhere when a class is missing.
    """
    y_true, y_score = check_binary(y_true, y_score, "auc_bootstrap")
    positives, negatives = y_score[y_true], y_score[~y_true]
    n_pos, n_neg = positives.size, negatives.size
    if n_pos == 0 or n_neg == 0:
        return np.full(n_resamples, np.nan)
    order = np.argsort(negatives, kind="stable")
    sorted_position = np.empty(n_neg, dtype=np.intp)
    sorted_position[order] = np.arange(n_neg)
    below = np.searchsorted(negatives[order], positives, side="left")  # negatives strictly below each positive
    up_to = np.searchsorted(negatives[order], positives, side="right")  # ... and those tied with it
    tied = np.nonzero(below != up_to)[0]
    batch_size = batch_size or max(1, min(n_resamples, 4_000_000 // (n_pos + n_neg)))
    rng = np.random.default_rng(random_state)
    out = np.empty(n_resamples)
    for start in range(0, n_resamples, batch_size):
        batch = min(batch_size, n_resamples - start)
        positive_draws = rng.integers(0, n_pos, size=(batch, n_pos))
        negative_draws = rng.integers(0, n_neg, size=(batch, n_neg))
        offsets = (np.arange(batch) * n_neg)[:, None]
        counts = np.bincount((sorted_position[negative_draws] + offsets).ravel(), minlength=batch * n_neg)
        # Drawn negatives strictly below sorted position j: cumulative[:, j]; float32 counts are exact below 2**24.
        cumulative = np.zeros((batch, n_neg + 1), dtype=np.float32)
        np.cumsum(counts.reshape(batch, n_neg), axis=1, out=cumulative[:, 1:])
        # Per positive: drawn negatives below it plus half of those tied with it.
        credit = np.take_along_axis(cumulative, np.broadcast_to(below, (batch, n_pos)), axis=1)
        if tied.size:
            credit[:, tied] += 0.5 * (cumulative[:, up_to[tied]] - cumulative[:, below[tied]])
        out[start : start + batch] = np.take_along_axis(credit, positive_draws, axis=1).sum(axis=1, dtype=np.float64)
    return out / (n_pos * n_neg)


@dataclass(frozen=True)
class AucInterval:
    """An AUC with its bootstrap interval and how the interval was computed.

    Attributes
    ----------
    auc, low, high : float
        NaN when the AUC is undefined (one class, a constant score).
    interval : str
        ``"bootstrap"`` (stratified percentile bootstrap on every row) or
        ``"m-out-of-n bootstrap"`` (subsample, rescaled; see the module docstring).
    bootstrap_rows : int
        Rows the bootstrap resampled: all of them, or the subsample's size.
    """

    auc: float
    low: float
    high: float
    interval: str
    bootstrap_rows: int


def auc_interval(
    y_true,
    y_score,
    *,
    n_resamples: int = 2000,
    confidence: float = 0.95,
    bootstrap_rows: int | None = 20_000,
    higher_is_answerable: bool = True,
    random_state=0,
    _caller: str = "auc_interval",
) -> AucInterval:
    """ROC AUC (sklearn, every row) with a stratified bootstrap interval that stays cheap for millions of rows.

    Parameters
    ----------
    y_true : array-like of bool
        True for the positive class (answerable).
    y_score : array-like of float
    n_resamples : int, default=2000
    confidence : float, default=0.95
    bootstrap_rows : int or None, default=20_000
        Up to this many rows (always, when None): stratified percentile
        bootstrap of every row. Above: the m-out-of-n bootstrap of a
        stratified subsample of about this size (see the module docstring).
    higher_is_answerable : bool, default=True
        False scores ``-y_score``, for signals where a high value means
        unanswerable.
    random_state : int, default=0

    Returns
    -------
    AucInterval
        All NaN, with a :class:`DegenerateInputWarning`, when only one class
        is present or the score is constant. The same rows in any order give
        the same interval (they are sorted by class and score before drawing).
    """
    from sklearn.metrics import roc_auc_score

    if bootstrap_rows is not None and (not isinstance(bootstrap_rows, (int, np.integer)) or bootstrap_rows < 2):
        raise ValueError(
            f"The 'bootstrap_rows' parameter of {_caller} must be an int >= 2 or None. Got {bootstrap_rows!r} instead."
        )
    y_true, y_score = check_binary(y_true, y_score, _caller)
    n = y_true.size
    every_row = bootstrap_rows is None or n <= bootstrap_rows
    interval = "bootstrap" if every_row else "m-out-of-n bootstrap"
    used_rows = n if every_row else bootstrap_rows
    if not higher_is_answerable:
        y_score = -y_score
    # Positives then negatives, each by score: the interval depends on the rows, not on their order, so that
    # counts of a log (ragcal.logs) reproduce it draw for draw.
    order = np.lexsort((y_score, ~y_true))
    y_true, y_score = y_true[order], y_score[order]
    n_pos = int(y_true.sum())
    n_neg = n - n_pos
    if n_pos == 0 or n_neg == 0:
        warnings.warn(
            f"{_caller}: only one class present; AUC is undefined, returning NaN", DegenerateInputWarning, stacklevel=3
        )
        return AucInterval(math.nan, math.nan, math.nan, interval, used_rows)
    if np.all(y_score == y_score[0]):
        warnings.warn(
            f"{_caller}: the score is constant; AUC carries no information, returning NaN",
            DegenerateInputWarning,
            stacklevel=3,
        )
        return AucInterval(math.nan, math.nan, math.nan, interval, used_rows)
    auc = float(roc_auc_score(y_true, y_score))
    alpha = (1 - confidence) / 2
    if every_row:
        resampled = auc_bootstrap(y_true, y_score, n_resamples=n_resamples, random_state=random_state)
        low, high = np.quantile(resampled, [alpha, 1 - alpha])
        return AucInterval(auc, float(low), float(high), interval, n)
    rng = np.random.default_rng(random_state)
    share = bootstrap_rows / n
    m_pos = max(1, round(n_pos * share))
    m_neg = max(1, round(n_neg * share))
    positives = rng.choice(n_pos, size=m_pos, replace=False)  # rows 0 .. n_pos - 1 are the positives
    negatives = n_pos + rng.choice(n_neg, size=m_neg, replace=False)
    chosen = np.concatenate([positives, negatives])
    sub_true, sub_score = y_true[chosen], y_score[chosen]
    sub_auc = float(roc_auc_score(sub_true, sub_score)) if np.ptp(sub_score) > 0 else 0.5
    resampled = auc_bootstrap(sub_true, sub_score, n_resamples=n_resamples, random_state=random_state)
    scale = math.sqrt((1 / n_pos + 1 / n_neg) / (1 / m_pos + 1 / m_neg))
    low, high = auc + scale * (np.quantile(resampled, [alpha, 1 - alpha]) - sub_auc)
    return AucInterval(auc, float(max(low, 0.0)), float(min(high, 1.0)), interval, m_pos + m_neg)


def auc_with_ci(
    y_true,
    y_score,
    *,
    n_resamples: int = 2000,
    confidence: float = 0.95,
    random_state=0,
    higher_is_answerable: bool = True,
):
    """Deprecated: :func:`auc_interval` with ``bootstrap_rows=None``, as a tuple ``(auc, low, high)``.

    One name for one idea: ``auc_interval(y_true, y_score, bootstrap_rows=None)``
    computes the same numbers and returns them named.

    Returns
    -------
    (auc, low, high) : tuple of float
        All NaN, with a :class:`DegenerateInputWarning`, when only one class
        is present or the score is constant.
    """
    import warnings

    warnings.warn(
        "auc_with_ci is deprecated: call auc_interval(y_true, y_score, bootstrap_rows=None), which returns the same "
        "numbers as .auc, .low and .high",
        DeprecationWarning,
        stacklevel=2,
    )
    result = auc_interval(
        y_true,
        y_score,
        n_resamples=n_resamples,
        confidence=confidence,
        bootstrap_rows=None,
        higher_is_answerable=higher_is_answerable,
        random_state=random_state,
        _caller="auc_with_ci",
    )
    return result.auc, result.low, result.high


def auc_table(
    table: pd.DataFrame,
    signals=None,
    *,
    directions=None,
    n_resamples: int = 2000,
    confidence: float = 0.95,
    random_state=0,
    bootstrap_rows: int | None = None,
) -> pd.DataFrame:
    """AUC with a stratified bootstrap interval for each signal and comparison.

    Comparisons: answerable vs all unanswerable, then answerable vs each
    unanswerable slice.

    Parameters
    ----------
    directions : dict of str to bool, default=None
        ``higher_is_answerable`` per signal; True when missing.
    bootstrap_rows : int or None, default=None
        For large tables (score logs): above this many rows a comparison's
        interval is the m-out-of-n bootstrap of a subsample of that size
        (:func:`auc_interval`). None bootstraps every row.

    Returns
    -------
    DataFrame
        ``signal, comparison, auc, ci_low, ci_high, n_answerable, n_unanswerable``,
        plus ``interval`` and ``bootstrap_rows`` (how each interval was made)
        when ``bootstrap_rows`` is given. Degenerate cases (a constant signal)
        are NaN, with a :class:`DegenerateInputWarning`.
    """
    signals = list(signals) if signals is not None else signal_columns(table)
    directions = directions or {}
    answerable = table["answerable"].astype(bool)
    comparisons = [("all unanswerable", ~answerable)]
    comparisons += [(name, (table["slice"] == name) & ~answerable) for name in unanswerable_slices(table)]
    rows = []
    for signal in signals:
        for comparison, negative in comparisons:
            subset = drop_nan(table[answerable | negative], signal)
            labels = subset["answerable"].to_numpy(dtype=bool)
            with warnings.catch_warnings(record=True) as caught:
                warnings.simplefilter("always", DegenerateInputWarning)
                result = auc_interval(
                    labels,
                    subset[signal].to_numpy(dtype=float),
                    n_resamples=n_resamples,
                    confidence=confidence,
                    bootstrap_rows=bootstrap_rows,
                    higher_is_answerable=directions.get(signal, True),
                    random_state=random_state,
                    _caller="auc_with_ci" if bootstrap_rows is None else "auc_interval",
                )
            for warning in caught:
                warnings.warn(
                    f"{signal} (answerable vs {comparison}): {warning.message}", DegenerateInputWarning, stacklevel=2
                )
            row = {
                "signal": signal,
                "comparison": comparison,
                "auc": result.auc,
                "ci_low": result.low,
                "ci_high": result.high,
                "n_answerable": int(labels.sum()),
                "n_unanswerable": int((~labels).sum()),
            }
            if bootstrap_rows is not None:
                row.update(interval=result.interval, bootstrap_rows=result.bootstrap_rows)
            rows.append(row)
    return pd.DataFrame(rows)


def roc_band(y_true, y_score, *, n_resamples: int = 300, grid=None, confidence: float = 0.95, random_state=0):
    """Pointwise bootstrap band of the ROC curve: TPR percentiles at fixed FPRs.

    Each resample draws the positives and the negatives separately with
    replacement (stratified), computes :func:`sklearn.metrics.roc_curve` and
    reads its TPR at each FPR of ``grid`` by linear interpolation.

    Parameters
    ----------
    y_true : array-like of bool
    y_score : array-like of float
        Oriented so that higher means positive.
    n_resamples : int, default=300
    grid : array-like of float, default=None
        FPRs at which the band is read; 101 points from 0 to 1 when None.
    confidence : float, default=0.95
    random_state : int or numpy.random.Generator, default=0
        A Generator is drawn from as is, so several bands can share one stream.

    Returns
    -------
    (grid, tpr_low, tpr_high) : tuple of ndarray, each of shape (len(grid),)
    """
    from sklearn.metrics import roc_curve

    y_true, y_score = check_binary(y_true, y_score, "roc_band")
    grid = np.linspace(0, 1, 101) if grid is None else np.asarray(grid, dtype=float)
    rng = random_state if isinstance(random_state, np.random.Generator) else np.random.default_rng(random_state)
    positives, negatives = np.nonzero(y_true)[0], np.nonzero(~y_true)[0]
    resampled = np.empty((n_resamples, grid.size))
    for resample in range(n_resamples):
        chosen = np.concatenate([rng.choice(positives, positives.size), rng.choice(negatives, negatives.size)])
        band_fpr, band_tpr, _ = roc_curve(y_true[chosen], y_score[chosen])
        resampled[resample] = np.interp(grid, band_fpr, band_tpr)
    alpha = round((1 - confidence) / 2, 12)  # 0.025, not 0.025000000000000022
    low, high = np.quantile(resampled, [alpha, 1 - alpha], axis=0)
    return grid, low, high
