r"""Query performance prediction (QPP) evaluation: how well a signal predicts each question's retrieval quality.

AUC asks whether a signal separates answerable from unanswerable questions.
The QPP literature asks another question, on answerable questions only: does
the signal rank them by how well retrieval worked? A signal can do one well
and the other badly, so :func:`qpp_table` reports the second beside the first.

For answerable questions :math:`q_1, \dots, q_n`, with predicted values
:math:`p_i` (the signal, oriented so that higher predicts better retrieval)
and actual retrieval quality :math:`e_i` (by default the reciprocal rank of
the first gold page in the top 10 of the signal's own retriever):

- **Kendall's** :math:`\tau_b` (:func:`scipy.stats.kendalltau`), the
  literature's main measure, which handles the many ties of a reciprocal rank;
- **Pearson's** :math:`r` (:func:`scipy.stats.pearsonr`);
- **sMARE**, the scaled mean absolute rank error of Faggioli, Zendel,
  Culpepper, Ferro and Scholer, "sMARE: a new paradigm to evaluate and
  understand query performance prediction methods", Information Retrieval
  Journal 25 (2022), first proposed as sARE at ECIR 2021:

  .. math:: \mathrm{sMARE} = \frac{1}{n} \sum_{i=1}^{n} \frac{|r^p_i - r^e_i|}{n}

  where :math:`r^p_i` and :math:`r^e_i` are the ranks of :math:`q_i` by
  prediction and by quality (average ranks for ties, as
  :func:`scipy.stats.rankdata`). 0 is a perfect prediction; lower is better.

Intervals are percentile bootstrap intervals over questions: each resample
draws the questions with replacement and keeps every pair
:math:`(p_i, e_i)` together.
"""

from __future__ import annotations

import warnings

import numpy as np
import pandas as pd
from scipy.stats import kendalltau, pearsonr, rankdata

from .._params import check_float, check_int
from ..score_tables import answerable_sign
from ._common import DegenerateInputWarning

__all__ = ["QPP_MEASURES", "qpp_correlations", "qpp_measures", "qpp_table", "smare", "smare_chance"]

#: The measures of :func:`qpp_measures`, in column order.
QPP_MEASURES = ("kendall_tau", "pearson_r", "smare")


def smare(predicted, actual) -> float:
    """Scaled mean absolute rank error of ``predicted`` against ``actual`` (see the module docstring).

    Parameters
    ----------
    predicted, actual : array-like of shape (n,)
        Higher ``predicted`` means better predicted quality.

    Returns
    -------
    float
        In ``[0, (n - 1) / n]`` (average ranks); NaN when ``n == 0``.

    Examples
    --------
    >>> smare([3, 2, 1], [0.9, 0.5, 0.1])
    0.0
    >>> round(smare([1, 2, 3], [0.9, 0.5, 0.1]), 4)  # ranks 1,2,3 against 3,2,1: (2 + 0 + 2) / 3 / 3
    0.4444
    """
    predicted, actual = _pairs(predicted, actual, "smare")
    n = predicted.size
    if n == 0:
        return float("nan")
    return float(np.abs(rankdata(predicted) - rankdata(actual)).sum() / n / n)


def smare_chance(actual) -> float:
    """The expected :func:`smare` of a prediction in random order (no ties) against ``actual``, exactly.

    Each question's predicted rank is then uniform on ``1..n``, so the
    expectation is :math:`\\frac{1}{n^2} \\sum_i \\frac{1}{n} \\sum_{k=1}^{n} |k - r^e_i|`.
    About 1/3 without ties in ``actual``; less with them (a reciprocal rank has
    many), which is why a table of sMARE values needs this beside it.

    Examples
    --------
    >>> round(smare_chance([0.1, 0.5, 1.0]), 4)  # ranks 1, 2, 3: (3 + 2 + 3) / 3 / 9
    0.2963
    """
    actual = np.asarray(actual, dtype=float).reshape(-1)
    n = actual.size
    if n == 0:
        return float("nan")
    ranks = rankdata(actual)
    return float(np.abs(np.arange(1, n + 1)[None, :] - ranks[:, None]).mean(axis=1).sum() / n / n)


def _pairs(predicted, actual, function: str) -> tuple[np.ndarray, np.ndarray]:
    predicted = np.asarray(predicted, dtype=float).reshape(-1)
    actual = np.asarray(actual, dtype=float).reshape(-1)
    if predicted.shape != actual.shape:
        raise ValueError(f"{function}: {predicted.size} predictions but {actual.size} quality values")
    if np.isnan(predicted).any() or np.isnan(actual).any():
        raise ValueError(f"{function}: NaN among the values; drop those questions first")
    return predicted, actual


def qpp_measures(predicted, actual) -> dict[str, float]:
    """Kendall's tau-b, Pearson's r and sMARE of one set of pairs.

    A constant ``predicted`` or ``actual`` leaves every measure undefined: all
    are NaN, with a :class:`DegenerateInputWarning`. (sMARE would be defined,
    but a constant prediction, all ranks tied, scores better than a random
    order: about 1/4 against 1/3.) Fewer than 2 pairs: all NaN.
    """
    predicted, actual = _pairs(predicted, actual, "qpp_measures")
    if predicted.size < 2:
        return dict.fromkeys(QPP_MEASURES, float("nan"))
    if np.ptp(actual) == 0 or np.ptp(predicted) == 0:
        which = "quality" if np.ptp(actual) == 0 else "prediction"
        warnings.warn(f"qpp_measures: constant {which}; the measures are undefined", DegenerateInputWarning, 2)
        return dict.fromkeys(QPP_MEASURES, float("nan"))
    return {
        "kendall_tau": float(kendalltau(predicted, actual).statistic),
        "pearson_r": float(pearsonr(predicted, actual).statistic),
        "smare": smare(predicted, actual),
    }


def qpp_correlations(
    predicted, actual, *, n_resamples: int = 2000, confidence: float = 0.95, random_state=0
) -> dict[str, float]:
    """:func:`qpp_measures` with percentile bootstrap intervals over the pairs.

    Returns
    -------
    dict
        ``n`` and, per measure of :data:`QPP_MEASURES`, the value and
        ``<measure>_low`` / ``<measure>_high``. Resamples in which a measure
        is undefined (a constant resample) are left out of its interval.
    """
    n_resamples = check_int(n_resamples, "n_resamples", "qpp_correlations", low=1)
    confidence = check_float(confidence, "confidence", "qpp_correlations", low=0, high=1)
    predicted, actual = _pairs(predicted, actual, "qpp_correlations")
    n = predicted.size
    point = qpp_measures(predicted, actual)
    row = {"n": int(n)}
    if n < 2 or all(np.isnan(value) for value in point.values()):
        for measure in QPP_MEASURES:
            row.update({measure: point[measure], f"{measure}_low": np.nan, f"{measure}_high": np.nan})
        return row
    rng = np.random.default_rng(random_state)
    draws = rng.integers(0, n, size=(n_resamples, n))
    resampled = _resampled_measures(predicted, actual, draws)
    tail = (1 - confidence) / 2 * 100
    for measure in QPP_MEASURES:
        values = np.asarray(resampled[measure])
        values = values[~np.isnan(values)]
        low, high = np.percentile(values, [tail, 100 - tail]) if values.size else (np.nan, np.nan)
        row.update({measure: point[measure], f"{measure}_low": float(low), f"{measure}_high": float(high)})
    return row


def _resampled_measures(predicted: np.ndarray, actual: np.ndarray, draws: np.ndarray) -> dict[str, np.ndarray]:
    """:func:`qpp_measures` of each bootstrap resample: row ``r`` pairs ``predicted[draws[r]]`` with
    ``actual[draws[r]]``; NaN where a resample is constant.

    Kendall's tau-b, Pearson's r and sMARE are computed on all resamples at
    once (a test holds tau-b to scipy's bit for bit per resample, and the
    others to within 1e-12).
    """
    resampled_p, resampled_a = predicted[draws], actual[draws]
    constant = (np.ptp(resampled_p, axis=1) == 0) | (np.ptp(resampled_a, axis=1) == 0)
    tau = _kendall_tau_b_resamples(predicted, actual, draws)
    tau[constant] = np.nan
    centred_p = resampled_p - resampled_p.mean(axis=1, keepdims=True)
    centred_a = resampled_a - resampled_a.mean(axis=1, keepdims=True)
    with np.errstate(divide="ignore", invalid="ignore"):
        r = (centred_p * centred_a).sum(axis=1) / np.sqrt((centred_p**2).sum(axis=1) * (centred_a**2).sum(axis=1))
    n = resampled_p.shape[1]
    error = np.abs(rankdata(resampled_p, axis=1) - rankdata(resampled_a, axis=1)).sum(axis=1) / n / n
    r[constant] = np.nan
    error[constant] = np.nan
    return {"kendall_tau": tau, "pearson_r": r, "smare": error}


def _kendall_tau_b_resamples(predicted: np.ndarray, actual: np.ndarray, draws: np.ndarray) -> np.ndarray:
    """Kendall's tau-b of each resample (``predicted[draws[r]]`` against ``actual[draws[r]]``), as
    :func:`scipy.stats.kendalltau` computes it.

    Over the pairs of positions of a resample, the sum of ``sign(dx) * sign(dy)`` is scipy's concordant minus
    discordant count, and the numbers of pairs with ``dx != 0`` and ``dy != 0`` are its ``tot - xtie`` and
    ``tot - ytie``. Two positions that drew the same question tie on both sides and count in none of them, so each
    count is ``c @ W @ c / 2``: ``c`` how often the resample drew each question, ``W`` the question pairs' signs
    (or whether they differ). These are small integers, exact in float64 whatever order a matrix product adds them
    in, so the counts are scipy's and the same float operations give the same bits, for ``n * n`` work per
    resample instead of one per pair of positions. A resample with a constant side gives NaN.
    """
    resamples, n = draws.shape
    offsets = n * np.arange(resamples)[:, None]
    counts = np.bincount((draws + offsets).ravel(), minlength=resamples * n).reshape(resamples, n).astype(float)
    sign_p = np.sign(predicted[:, None] - predicted[None, :])
    sign_a = np.sign(actual[:, None] - actual[None, :])

    def pairs(weights):
        return np.einsum("ij,ij->i", counts @ weights, counts) / 2

    con_minus_dis = pairs(sign_p * sign_a)
    x_pairs, y_pairs = pairs((sign_p != 0).astype(float)), pairs((sign_a != 0).astype(float))
    with np.errstate(divide="ignore", invalid="ignore"):
        tau = con_minus_dis / np.sqrt(x_pairs) / np.sqrt(y_pairs)
    tau = np.minimum(1.0, np.maximum(-1.0, tau))
    tau[(x_pairs == 0) | (y_pairs == 0)] = np.nan
    return tau


def qpp_table(
    table: pd.DataFrame,
    quality: pd.DataFrame,
    signals,
    *,
    targets: dict | None = None,
    directions: dict | None = None,
    n_resamples: int = 2000,
    confidence: float = 0.95,
    random_state=0,
) -> pd.DataFrame:
    """Each signal as a query performance predictor, on the answerable questions of a score table.

    Parameters
    ----------
    table : DataFrame
        A score table (``id``, ``answerable`` and one column per signal).
    quality : DataFrame
        Retrieval quality per question: indexed by query id, one column per
        retriever (for example the ``mrr@10`` of each retriever's run, from
        :func:`ragcal.metrics.retrieval.per_query_retrieval_metrics`).
    signals : sequence of str
    targets : dict of str to str, default=None
        The column of ``quality`` each signal predicts. A signal without one
        predicts the only column when ``quality`` has one; otherwise it is a
        ``KeyError`` that names the signal.
    directions : dict of str to bool, default=None
        ``higher_is_answerable`` per signal (True when missing). A signal for
        which lower means answerable is negated, so that a positive
        correlation always means "predicts quality".

    Returns
    -------
    DataFrame
        ``signal, target, n``, each measure of :data:`QPP_MEASURES` with
        ``_low`` and ``_high``, and ``smare_chance`` (:func:`smare_chance`, the
        sMARE of a random order on the same questions). Questions whose signal is NaN or that have no
        quality value are left out (``n`` counts the rest).
    """
    targets = dict(targets or {})
    directions = directions or {}
    answerable = table[table["answerable"].astype(bool)].set_index("id")
    rows = []
    for signal in signals:
        if signal in targets:
            target = targets[signal]
        elif quality.shape[1] == 1:
            target = quality.columns[0]
        else:
            raise KeyError(f"qpp_table: no quality column given for signal {signal!r} (targets=)")
        if target not in quality.columns:
            raise KeyError(f"qpp_table: signal {signal!r} targets {target!r}, which is not a quality column")
        pairs = pd.concat(
            [answerable[signal].rename("predicted"), quality[target].rename("actual")], axis=1, join="inner"
        ).dropna()
        sign = answerable_sign(directions.get(signal, True))
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always", DegenerateInputWarning)
            row = qpp_correlations(
                sign * pairs["predicted"].to_numpy(dtype=float),
                pairs["actual"].to_numpy(dtype=float),
                n_resamples=n_resamples,
                confidence=confidence,
                random_state=random_state,
            )
        for warning in caught:
            warnings.warn(f"{signal}: {warning.message}", DegenerateInputWarning, stacklevel=2)
        rows.append({"signal": signal, "target": target, **row, "smare_chance": smare_chance(pairs["actual"])})
    return pd.DataFrame(rows)
