"""Where a fitted threshold sits: midway between the boundary calibration score and the next one.

A rule such as ``keep@0.95`` picks a threshold equal to one calibration score
(the *boundary* score, the last one answered). Any value between that score
and the next calibration score on the refusing side gives the same decisions
on every calibration question, hence the same calibration outcomes and the
same Learn-then-Test certificate. Left on the boundary score, a perturbation
of 1e-7 in that question's score (another CPU kernel) flips its decision, so
:func:`midway_threshold` puts the threshold in the middle of that open
interval instead, and every fit in ragcal goes through it.

:data:`THRESHOLD_PLACEMENT` is the sentence gate files record about it.
"""

from __future__ import annotations

import math

import numpy as np

from ..score_tables import answerable_sign

__all__ = ["THRESHOLD_PLACEMENT", "EDGE_MARGIN", "midway_threshold"]

#: How fitted thresholds are placed, in the words gate files record (``"threshold_placement"``).
THRESHOLD_PLACEMENT = (
    "midway between the boundary calibration score and the next one; "
    "any value in that open interval gives the same calibration decisions"
)

#: Relative margin used when the boundary score is the only distinct calibration score (no spacing to
#: borrow): the threshold moves by ``EDGE_MARGIN * max(|threshold|, 1)`` to the refusing side.
EDGE_MARGIN = 0.01


def _finite_unique(scores) -> np.ndarray:
    values = np.asarray(scores, dtype=float).reshape(-1)
    return np.unique(values[np.isfinite(values)])


def midway_threshold(threshold: float, scores, *, higher_is_answerable: bool = True) -> float:
    """Move a threshold that sits on a calibration score to the middle of the interval of equivalent ones.

    With ``higher_is_answerable`` a question is answered when ``score >=
    threshold``. When ``threshold`` equals a calibration score ``s`` (the
    boundary: the lowest score answered), every value in ``(s', s]``, where
    ``s'`` is the next distinct calibration score strictly below ``s``, answers
    exactly the same calibration questions. The threshold returned is
    ``(s + s') / 2``: same decisions on every calibration score by
    construction, and no score within half a gap of it. For
    ``higher_is_answerable=False`` (answer when ``score <= threshold``) the
    same holds mirrored: ``s'`` is the next distinct score strictly above.

    Parameters
    ----------
    threshold : float
        A threshold produced by a rule fitted on ``scores``, in the signal's units.
    scores : array-like of float
        The calibration scores the rule was fitted on (every class: the
        decisions of all of them are kept). NaN and infinite scores are
        ignored (a gate refuses a NaN score whatever the threshold).
    higher_is_answerable : bool, default=True
        Orientation of the signal.

    Returns
    -------
    float
        The placed threshold. Edge cases:

        - ``threshold`` is ``-inf``, ``+inf`` (answer all, refuse all) or NaN
          (no data): returned unchanged;
        - no finite score, or ``threshold`` not equal to any of them (already
          between scores, e.g. a grid value given by hand): returned unchanged;
        - no score on the refusing side (the threshold is on the lowest score,
          or the highest for the other orientation): it moves to the refusing
          side by half the gap to the next distinct score on the answering
          side, as if the scores continued with that spacing; with a single
          distinct score, by ``EDGE_MARGIN * max(|threshold|, 1)``;
        - the two scores are adjacent floating-point numbers (nothing lies
          strictly between them): returned unchanged.

    See Also
    --------
    ragcal.calibration.fit_threshold : fits every rule, then places the threshold with this function.

    Examples
    --------
    >>> midway_threshold(0.6, [0.4, 0.5, 0.6, 0.7])
    0.55
    >>> midway_threshold(0.5, [0.5, 1.0])  # nothing below 0.5: half the gap to 1.0, mirrored
    0.25
    >>> midway_threshold(0.5, [0.4, 0.5, 0.6], higher_is_answerable=False)
    0.55
    >>> midway_threshold(0.45, [0.4, 0.5])  # not on a score: unchanged
    0.45
    """
    threshold = float(threshold)
    if not math.isfinite(threshold):
        return threshold
    sign = answerable_sign(higher_is_answerable)
    oriented = _finite_unique(sign * np.asarray(scores, dtype=float))
    t = sign * threshold
    if oriented.size == 0 or not np.any(oriented == t):
        return threshold
    below = oriented[oriented < t]
    if below.size:
        neighbour = float(below[-1])
        placed = neighbour + (t - neighbour) / 2
    else:
        above = oriented[oriented > t]
        gap = float(above[0]) - t if above.size else 2 * EDGE_MARGIN * max(abs(t), 1.0)
        placed = t - gap / 2
        neighbour = -math.inf
    if not neighbour < placed < t:  # adjacent floats: nothing strictly between
        return threshold
    return float(sign * placed)
