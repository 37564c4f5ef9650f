"""Binary signals (an LLM said "I don't know": 0 or 1): one operating point, not a curve.

A signal whose finite values are all 0 or 1 has one useful decision, "answer
when it says answerable" (when it is 1; when it is 0 for a signal where lower
means answerable). What the curve functions return for it:

- :func:`sklearn.metrics.roc_curve` has three points, ``(0, 0)``, the
  operating point and ``(1, 1)``; the AUC of the straight lines between them
  is the balanced accuracy, ``(TPR + 1 - FPR) / 2``.
- :func:`ragcal.metrics.selective.risk_coverage` has one row per distinct
  value: two (the operating point first, then "answer every question with a
  value"), or one when the column is constant.

The functions here return the operating point itself, so plots draw a marker
where a curve would suggest thresholds in between that do not exist.
"""

from __future__ import annotations

import numpy as np

__all__ = [
    "binary_answered",
    "is_binary_signal",
    "operating_point_masks",
    "risk_coverage_operating_point",
    "roc_operating_point",
]


def is_binary_signal(values) -> bool:
    """True when ``values`` has a finite value and every finite value is 0 or 1 (NaN are ignored).

    Examples
    --------
    >>> is_binary_signal([1.0, 0.0, float("nan"), 1.0])
    True
    >>> is_binary_signal([0.0, 0.5, 1.0])
    False
    >>> is_binary_signal([float("nan")])
    False
    """
    values = np.asarray(values, dtype=float).reshape(-1)
    finite = values[np.isfinite(values)]
    return bool(finite.size) and bool(np.isin(finite, (0.0, 1.0)).all())


def binary_answered(values, *, higher_is_answerable: bool = True, function: str = "binary_answered") -> np.ndarray:
    """Which questions a binary signal answers: where it is 1 (0 when lower is answerable); NaN never.

    A NaN (no verdict, e.g. an LLM reply that could not be read) counts as an
    abstention, as a deployed system would treat it. Raises ``ValueError``
    naming ``function`` when a value is neither 0, 1 nor NaN.
    """
    values = np.asarray(values, dtype=float).reshape(-1)
    finite = values[~np.isnan(values)]
    if not np.isin(finite, (0.0, 1.0)).all():
        raise ValueError(f"{function}: the signal is not binary (values other than 0, 1 and NaN)")
    return values == (1.0 if higher_is_answerable else 0.0)


def roc_operating_point(answerable, values, *, higher_is_answerable: bool = True) -> tuple[float, float]:
    """``(FPR, TPR)`` of answering when the binary signal says answerable.

    Parameters
    ----------
    answerable : array-like of bool
    values : array-like of float
        0, 1 or NaN (NaN is never answered).
    higher_is_answerable : bool, default=True
        Answer when the value is 1 (True) or 0 (False).

    Returns
    -------
    (fpr, tpr) : tuple of float
        Share of unanswerable and of answerable questions answered; NaN for a
        class with no question.

    Examples
    --------
    >>> roc_operating_point([True, True, False, False, False], [1, 0, 1, 0, 0])
    (0.3333333333333333, 0.5)
    """
    answered = binary_answered(values, higher_is_answerable=higher_is_answerable, function="roc_operating_point")
    answerable = np.asarray(answerable, dtype=bool).reshape(-1)
    if answerable.shape != answered.shape:
        raise ValueError(f"roc_operating_point: {answerable.size} labels but {answered.size} values")
    n_positive, n_negative = int(answerable.sum()), int((~answerable).sum())
    tpr = float(answered[answerable].sum() / n_positive) if n_positive else float("nan")
    fpr = float(answered[~answerable].sum() / n_negative) if n_negative else float("nan")
    return fpr, tpr


def risk_coverage_operating_point(values, support, *, higher_is_answerable: bool = True) -> tuple[float, float]:
    """``(coverage, selective risk)`` of answering when the binary signal says answerable.

    Parameters
    ----------
    values : array-like of float
        0, 1 or NaN (NaN is never answered).
    support : array-like of bool or float
        As for :func:`ragcal.metrics.selective.risk_coverage`: a boolean per
        question, or a support level (answered at the bar 1, supported when
        ``level >= 1``; finite levels only with ``higher_is_answerable``).
    higher_is_answerable : bool, default=True

    Returns
    -------
    (coverage, risk) : tuple of float
        Answered over all questions, and unsupported answers over answers;
        risk is NaN when nothing is answered. It is the strictest row of
        :func:`~ragcal.metrics.selective.risk_coverage` when the signal takes
        its answering value at all.

    Examples
    --------
    >>> risk_coverage_operating_point([1, 1, 1, 0], [True, True, False, True])
    (0.75, 0.3333333333333333)
    """
    answered = binary_answered(
        values, higher_is_answerable=higher_is_answerable, function="risk_coverage_operating_point"
    )
    support = np.asarray(support).reshape(-1)
    if support.shape != answered.shape:
        raise ValueError(f"risk_coverage_operating_point: {answered.size} values but {support.size} support entries")
    if support.dtype == bool:
        supported = support
    else:
        levels = support.astype(float)
        if not higher_is_answerable and np.isfinite(levels).any():
            raise ValueError(
                "risk_coverage_operating_point: finite support levels need higher_is_answerable=True; "
                "for the other orientation give a boolean support per question"
            )
        supported = levels >= 1.0
    n_answered = int(answered.sum())
    coverage = n_answered / answered.size if answered.size else float("nan")
    risk = float((answered & ~supported).sum() / n_answered) if n_answered else float("nan")
    return float(coverage), risk


def operating_point_masks(answered, answerable, support=None) -> dict:
    """What one operating point counts, per space: ``{space: ((x_hits, x_rows), (y_hits, y_rows))}``.

    Each axis is a share, ``hits[rows].sum() / rows.sum()``, so its counts and
    intervals (Clopper-Pearson, or a bootstrap over groups) come from the same
    two boolean arrays.

    - ``"roc"``: x, answered among unanswerable questions (FPR); y, answered
      among answerable ones (TPR).
    - ``"risk-coverage"`` (only with ``support``): x, answered among all
      questions (coverage); y, unsupported among the answered (selective risk).

    Parameters
    ----------
    answered : array-like of bool
        Per question, whether the system answered (:func:`binary_answered`).
    answerable : array-like of bool
    support : array-like of bool, default=None
        Per question, whether an answer to it would be supported.

    Examples
    --------
    >>> masks = operating_point_masks([True, False, True], [True, True, False])
    >>> (x_hits, x_rows), (y_hits, y_rows) = masks["roc"]
    >>> int(x_hits[x_rows].sum()), int(x_rows.sum()), int(y_hits[y_rows].sum()), int(y_rows.sum())
    (1, 1, 1, 2)
    """
    answered = np.asarray(answered, dtype=bool).reshape(-1)
    answerable = np.asarray(answerable, dtype=bool).reshape(-1)
    if answered.shape != answerable.shape:
        raise ValueError(f"operating_point_masks: {answered.size} decisions for {answerable.size} questions")
    masks = {"roc": ((answered, ~answerable), (answered, answerable))}
    if support is not None:
        supported = np.asarray(support, dtype=bool).reshape(-1)
        if supported.shape != answered.shape:
            raise ValueError(f"operating_point_masks: {supported.size} support entries for {answered.size} questions")
        masks["risk-coverage"] = ((answered, np.ones_like(answered)), (answered & ~supported, answered))
    return masks
