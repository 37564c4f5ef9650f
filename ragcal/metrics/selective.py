r"""Selective risk: risk-coverage curves, AURC, E-AURC and AUGRC, with stratified bootstrap intervals.

A gate that answers above a threshold ``t`` answers ``A(t)`` of the ``n``
questions, ``S(t)`` of them supported (see :mod:`ragcal.gates.support`).

- **coverage** :math:`A(t)/n`, the share answered;
- **selective risk** :math:`(A(t) - S(t)) / A(t)`, unsupported answers over
  answers (undefined when nothing is answered);
- **generalized risk** :math:`(A(t) - S(t)) / n`, unsupported answers over all
  questions (Traub et al. 2024).

The curve has one point per distinct finite score, from the strictest
threshold to the most lenient. Whether an answered question is supported may
depend on the threshold (a lower bar passes more passages on), so support is
given as a **level** per question: answered at ``t``, it is supported exactly
when ``level >= t`` (a boolean means "always" or "never").

Areas are step sums over the curve, weighted by the coverage each threshold
adds (Geifman & El-Yaniv 2017; with no tied scores this is the usual mean over
the first k questions, k = 1..n):

.. math::

    \mathrm{AURC} = \sum_j \mathrm{risk}(t_j)\,\frac{A(t_j) - A(t_{j-1})}{n}, \qquad
    \mathrm{AUGRC} = \sum_j \frac{A(t_j) - S(t_j)}{n}\,\frac{A(t_j) - A(t_{j-1})}{n}.

**E-AURC** is AURC minus the AURC of the oracle ordering of the same
questions: the supported ones (at the most lenient threshold) first, so that
with :math:`n_s` supported among :math:`n_a` answered its risk after k
answers is :math:`\max(0, k - n_s)/k`. It is never negative. Lower is better
for all three. Questions whose score is NaN are never answered: they count in
``n`` but never add coverage.
"""

from __future__ import annotations

import math

import numpy as np
import pandas as pd

from ..score_tables import answerable_sign

__all__ = [
    "MEASURES",
    "paired_selective_difference",
    "risk_coverage",
    "selective_areas",
    "selective_comparison",
    "selective_summary",
]

#: The areas :func:`selective_areas` returns, lower is better for each.
MEASURES = ("aurc", "e_aurc", "augrc")


def _oriented(scores, support, higher_is_answerable):
    scores = np.asarray(scores, dtype=float).reshape(-1)
    support = np.asarray(support).reshape(-1)
    if support.shape != scores.shape:
        raise ValueError(f"risk_coverage: {scores.size} scores but {support.size} support entries")
    if support.dtype == bool:
        support = np.where(support, math.inf, -math.inf)
    support = support.astype(float)
    if np.isnan(support).any():
        raise ValueError("risk_coverage: support levels must not be NaN (use -inf for 'never supported')")
    if not higher_is_answerable:
        if np.isfinite(support).any():
            raise ValueError(
                "risk_coverage: finite support levels need higher_is_answerable=True; "
                "for the other orientation give a boolean support per question"
            )
        return -scores, support
    return scores, support


def _counts(scores, support):
    """Thresholds (descending, oriented), answered and supported counts at each; scores already oriented."""
    finite = ~np.isnan(scores)
    ordered = np.sort(scores[finite])
    thresholds = np.unique(ordered)[::-1]
    answered = ordered.size - np.searchsorted(ordered, thresholds, side="left")
    reach = np.sort(np.minimum(scores[finite], support[finite]))
    supported = reach.size - np.searchsorted(reach, thresholds, side="left")
    return thresholds, answered, supported


def risk_coverage(scores, support, *, higher_is_answerable: bool = True) -> pd.DataFrame:
    """The risk-coverage curve of answering when ``scores`` clears each distinct threshold.

    Parameters
    ----------
    scores : array-like of float
        One per question; NaN is never answered.
    support : array-like of float or bool
        Support level per question (answered at ``t``, supported when
        ``level >= t``; -inf never), or a boolean: supported whenever answered.
    higher_is_answerable : bool, default=True

    Returns
    -------
    DataFrame
        One row per distinct finite score, strictest first: ``threshold`` (in
        the signal's units), ``answered``, ``supported``, ``unsupported``,
        ``coverage``, ``risk`` and ``generalized_risk``; ``attrs["n"]`` is the
        number of questions. A binary (0/1) signal has two rows, its operating
        point first (one row when it is constant); see
        :func:`ragcal.metrics.binary.risk_coverage_operating_point`.

    Examples
    --------
    >>> curve = risk_coverage([0.9, 0.8, 0.7, 0.6], [True, False, True, False])
    >>> curve["risk"].round(3).tolist()
    [0.0, 0.5, 0.333, 0.5]
    """
    sign = answerable_sign(higher_is_answerable)
    scores, support = _oriented(scores, support, higher_is_answerable)
    thresholds, answered, supported = _counts(scores, support)
    n = scores.size
    unsupported = answered - supported
    curve = pd.DataFrame(
        {
            "threshold": sign * thresholds,
            "answered": answered,
            "supported": supported,
            "unsupported": unsupported,
            "coverage": answered / n if n else np.array([], dtype=float),
            "risk": unsupported / answered if answered.size else np.array([], dtype=float),
            "generalized_risk": unsupported / n if n else np.array([], dtype=float),
        }
    )
    curve.attrs["n"] = n
    return curve


def _answer_counts(scores, support):
    """The answered and supported counts of :func:`_counts` (thresholds not returned), without a second sort.

    The distinct scores are the first of each run of the sorted scores, so
    ``np.unique`` (which sorts them again) is not needed; the counts are the
    same integers.
    """
    finite = ~np.isnan(scores)
    ordered = np.sort(scores[finite])
    starts = np.ones(ordered.size, dtype=bool)
    starts[1:] = ordered[1:] != ordered[:-1]
    first = np.flatnonzero(starts)[::-1]  # where each distinct score starts, highest first
    answered = ordered.size - first
    reach = np.sort(np.minimum(scores[finite], support[finite]))
    supported = reach.size - np.searchsorted(reach, ordered[first], side="left")
    return answered, supported


def _areas(scores, support) -> np.ndarray:
    """(AURC, E-AURC, AUGRC) of oriented scores; NaN when nothing can be answered."""
    answered, supported = _answer_counts(scores, support)
    n = scores.size
    if answered.size == 0:
        return np.full(3, np.nan)
    steps = np.diff(answered, prepend=0) / n
    unsupported = answered - supported
    aurc = float(np.sum(unsupported / answered * steps))
    augrc = float(np.sum(unsupported / n * steps))
    n_answered, n_supported = int(answered[-1]), int(supported[-1])
    k = np.arange(1, n_answered + 1)
    oracle = float(np.sum(np.maximum(0, k - n_supported) / k) / n)
    return np.array([aurc, aurc - oracle, augrc])


def selective_areas(scores, support, *, higher_is_answerable: bool = True) -> dict:
    """``{"aurc", "e_aurc", "augrc"}`` of the curve :func:`risk_coverage` draws (see the module docstring).

    Examples
    --------
    >>> areas = selective_areas([0.9, 0.8, 0.7, 0.6], [True, False, True, False])
    >>> round(areas["aurc"], 4), round(areas["e_aurc"], 4), round(areas["augrc"], 4)
    (0.3333, 0.125, 0.25)
    """
    scores, support = _oriented(scores, support, higher_is_answerable)
    return {name: float(value) for name, value in zip(MEASURES, _areas(scores, support))}


def _resamples(strata, n, n_resamples, random_state):
    """Index arrays of a stratified bootstrap: each stratum resampled with replacement to its own size."""
    rng = np.random.default_rng(random_state)
    strata = np.zeros(n, dtype=int) if strata is None else pd.factorize(np.asarray(strata).reshape(-1))[0]
    if strata.size != n:
        raise ValueError(f"selective_summary: {strata.size} strata labels for {n} questions")
    groups = [np.flatnonzero(strata == label) for label in np.unique(strata)]
    for _ in range(n_resamples):
        yield np.concatenate([rng.choice(group, size=group.size, replace=True) for group in groups])


def selective_summary(
    scores,
    support,
    *,
    strata=None,
    higher_is_answerable: bool = True,
    n_resamples: int = 2000,
    confidence: float = 0.95,
    random_state=0,
) -> pd.DataFrame:
    """AURC, E-AURC and AUGRC with stratified percentile bootstrap intervals.

    Parameters
    ----------
    strata : array-like, default=None
        Resample within each label (e.g. the ``slice`` column), so that every
        resample has the labeled set's mix of slices.

    Returns
    -------
    DataFrame
        ``measure, value, low, high`` (one row per :data:`MEASURES`).
    """
    scores, support = _oriented(scores, support, higher_is_answerable)
    value = _areas(scores, support)
    draws = np.array([_areas(scores[rows], support[rows]) for rows in _resamples(strata, scores.size, n_resamples, random_state)])
    tail = (1 - confidence) / 2
    low, high = np.nanquantile(draws, [tail, 1 - tail], axis=0) if n_resamples else (np.full(3, np.nan),) * 2
    return pd.DataFrame({"measure": MEASURES, "value": value, "low": low, "high": high})


def paired_selective_difference(
    first,
    second,
    *,
    strata=None,
    n_resamples: int = 2000,
    confidence: float = 0.95,
    random_state=0,
) -> pd.DataFrame:
    """First minus second for each area, on the same questions and the same bootstrap resamples.

    Parameters
    ----------
    first, second : tuple
        ``(scores, support)`` or ``(scores, support, higher_is_answerable)``,
        aligned row for row (the same questions).

    Returns
    -------
    DataFrame
        ``measure, difference, low, high, lower`` where ``lower`` is the share
        of resamples in which the first has the lower (better) area.
    """
    pairs = [_oriented(*(entry if len(entry) == 3 else (*entry, True))) for entry in (first, second)]
    (a_scores, a_support), (b_scores, b_support) = pairs
    if a_scores.size != b_scores.size:
        raise ValueError(f"paired_selective_difference: {a_scores.size} and {b_scores.size} questions")
    difference = _areas(a_scores, a_support) - _areas(b_scores, b_support)
    draws = np.array(
        [
            _areas(a_scores[rows], a_support[rows]) - _areas(b_scores[rows], b_support[rows])
            for rows in _resamples(strata, a_scores.size, n_resamples, random_state)
        ]
    )
    tail = (1 - confidence) / 2
    low, high = np.nanquantile(draws, [tail, 1 - tail], axis=0)
    return pd.DataFrame(
        {"measure": MEASURES, "difference": difference, "low": low, "high": high, "lower": (draws < 0).mean(axis=0)}
    )


def selective_comparison(
    inputs: dict,
    *,
    baseline: str,
    strata=None,
    n_resamples: int = 2000,
    confidence: float = 0.95,
    random_state=0,
) -> pd.DataFrame:
    """:func:`selective_summary` of every input and its :func:`paired_selective_difference` against ``baseline``.

    Every input is resampled with the same stratified bootstrap draws as those
    two functions with the same ``strata`` and ``random_state``, so the table
    equals calling both for each input, bit for bit; but each input's areas are
    computed once per draw instead of three times, and the draws are made once.

    Parameters
    ----------
    inputs : dict of str to tuple
        ``name -> (scores, support)`` or ``(scores, support, higher_is_answerable)``,
        aligned row for row (the same questions).
    baseline : str
        The key of ``inputs`` that every input is compared with.

    Returns
    -------
    DataFrame
        ``name, measure, value, low, high, difference, difference_low,
        difference_high, lower``: one row per input and measure, in the order of
        ``inputs``; ``lower`` is the share of resamples in which the input has
        the lower (better) area than the baseline.
    """
    oriented = {name: _oriented(*(entry if len(entry) == 3 else (*entry, True))) for name, entry in inputs.items()}
    if baseline not in oriented:
        raise ValueError(f"selective_comparison: the baseline {baseline!r} is not one of the inputs")
    sizes = sorted({scores.size for scores, _ in oriented.values()})
    if len(sizes) > 1:
        raise ValueError(f"selective_comparison: the inputs hold different numbers of questions: {sizes}")
    resamples = list(_resamples(strata, sizes[0], n_resamples, random_state))
    tail = (1 - confidence) / 2

    def draws_of(scores, support):
        return np.array([_areas(scores[rows], support[rows]) for rows in resamples]).reshape(len(resamples), 3)

    def interval(draws):
        if not len(resamples):
            return np.full(3, np.nan), np.full(3, np.nan)
        return tuple(np.nanquantile(draws, [tail, 1 - tail], axis=0))

    baseline_value, baseline_draws = _areas(*oriented[baseline]), draws_of(*oriented[baseline])
    frames = []
    for name, (scores, support) in oriented.items():
        value = _areas(scores, support)
        draws = baseline_draws if name == baseline else draws_of(scores, support)
        differences = draws - baseline_draws
        (low, high), (difference_low, difference_high) = interval(draws), interval(differences)
        frames.append(
            pd.DataFrame(
                {
                    "name": name,
                    "measure": MEASURES,
                    "value": value,
                    "low": low,
                    "high": high,
                    "difference": value - baseline_value,
                    "difference_low": difference_low,
                    "difference_high": difference_high,
                    "lower": (differences < 0).mean(axis=0) if len(resamples) else np.full(3, np.nan),
                }
            )
        )
    return pd.concat(frames, ignore_index=True)
