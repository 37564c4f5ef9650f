r"""Threshold rules: where to put the threshold, from labeled calibration scores (one registry, :data:`RULES`).

Convention: a query is **answered** when its score clears the threshold
(``score >= threshold`` for signals where higher means answerable, ``score <=
threshold`` otherwise) and **refused** otherwise. ``-inf`` answers everything,
``+inf`` refuses everything (for the usual orientation).

Threshold rules
---------------
Each rule is a function of calibration scores in the "higher is answerable"
orientation; :func:`fit_threshold` handles orientation and parses rule keys
such as ``"keep@0.95"`` in one place (:data:`RULES` lists them).

``keep@p`` (the published rule)
    The highest threshold that keeps at least a share ``p`` of the answerable
    calibration questions. ``keep@1.0`` is "just under the lowest answerable
    score".

``recall_guarantee@r`` (finite-sample guarantee, with ``delta``)
    Let :math:`s_{(1)} \le \dots \le s_{(n)}` be the sorted answerable
    calibration scores and take :math:`t = s_{(k)}`. A future answerable query
    with score :math:`S` (exchangeable with the calibration ones) is refused when
    :math:`S < s_{(k)}`, so the miss rate is :math:`F(s_{(k)}^-) \le U_{(k)}`,
    the k-th order statistic of n uniforms, :math:`U_{(k)} \sim
    \mathrm{Beta}(k, n-k+1)`. Hence

    .. math:: P(\text{recall} < r) \le P(U_{(k)} > 1-r) = P(\mathrm{Bin}(n, 1-r) < k).

    The rule takes the largest k with :math:`P(\mathrm{Bin}(n, 1-r) \le k-1) \le
    \delta`, so that with probability at least :math:`1-\delta` over the draw of
    the calibration set, recall on future answerable questions is at least r.
    This is the split-conformal / Learn-then-Test bound for a monotone risk.
    Ties only make it conservative. When even k = 1 fails (n too small:
    :math:`(1-(1-r))^n > \delta`, i.e. :math:`n < \log\delta / \log r`), the
    only safe threshold is ``-inf`` and a :class:`CalibrationWarning` says so.

``false_answer_guarantee@a`` (the symmetric bound, with ``delta``)
    Bounds the share of unanswerable questions that get answered. With the
    unanswerable calibration scores sorted from the top, :math:`u_{[1]} \ge
    u_{[2]} \ge \dots`, answering only strictly above :math:`u_{[j]}` gives a
    false-answer rate :math:`1 - F(u_{[j]}) \le \mathrm{Beta}(j, m-j+1)`, so the
    rule takes the largest j with :math:`P(\mathrm{Bin}(m, a) \le j-1) \le
    \delta` (the lowest threshold that still guarantees, with probability
    :math:`1-\delta`, that at most a share a of future unanswerable questions
    are answered). Too few calibration questions give ``+inf`` (refuse all).

``min_cost@c``
    Refusing an answerable question costs 1, answering an unanswerable one
    costs c ("trust is asymmetric": seed 001). The rule picks the candidate
    threshold (every distinct calibration score, plus "answer all" and "refuse all") with the
    lowest total cost on the calibration set; among equal costs, the highest
    threshold. No guarantee: it is an empirical optimum.

``risk_guarantee@a`` and ``unsupported_guarantee@a`` (need support levels)
    Bound the share of answers that are unsupported (among answers, or among
    all questions). No closed form: Learn-then-Test certifies a threshold
    (:mod:`ragcal.calibration.ltt`, which registers these two rules).

Where the threshold is put
--------------------------
The ``threshold_*`` functions return the boundary itself (a calibration
score, or just above one). :func:`fit_threshold` then places the threshold
midway between the boundary calibration score and the next one on the
refusing side (:func:`~ragcal.calibration.midway.midway_threshold`): every
value in that open interval answers the same calibration questions, so the
rule's outcomes and guarantees are unchanged, and a perturbation smaller than
half the gap cannot flip a calibration decision. The guarantee rules stay
valid: the threshold moves towards answering only where no calibration score
lies, and the order-statistic bounds above hold for every threshold in the
interval (``recall_guarantee@`` refuses no more, ``false_answer_guarantee@``
still answers only strictly above :math:`u_{[j]}`).

Every rule is one :class:`Rule` in :data:`RULES`: its name, what its number
means, the function that fits it and, for the rules Learn-then-Test can
certify, the loss it bounds.
"""

from __future__ import annotations

import math
import re
import warnings
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
from scipy.stats import binom

from .._params import check_float
from ..score_tables import answerable_sign
from .midway import midway_threshold

__all__ = [
    "CalibrationWarning",
    "Rule",
    "RULES",
    "register_rule",
    "parse_rule",
    "get_rule",
    "keep_share",
    "threshold_keep_share",
    "threshold_recall_guarantee",
    "threshold_false_answer_guarantee",
    "threshold_min_cost",
    "fit_threshold",
    "fit_rule",
    "place_threshold",
]


class CalibrationWarning(UserWarning):
    """A rule could not be met with the data given; the fallback is named in the message."""


def _finite_sorted(scores) -> np.ndarray:
    scores = np.asarray(scores, dtype=float)
    return np.sort(scores[~np.isnan(scores)])


def threshold_keep_share(answerable_scores, *, keep: float = 1.0) -> float:
    """Highest threshold keeping at least a share ``keep`` of ``answerable_scores``.

    Examples
    --------
    >>> threshold_keep_share([0.4, 0.5, 0.6, 0.7], keep=0.75)
    0.5
    """
    keep = check_float(keep, "keep", "threshold_keep_share", low=0, high=1, high_open=False)
    scores = _finite_sorted(answerable_scores)
    if scores.size == 0:
        raise ValueError("threshold_keep_share needs at least one answerable score")
    # Keeping s >= scores[i] keeps at least n - i questions; need n - i >= keep * n.
    index = scores.size - math.ceil(keep * scores.size - 1e-12)
    return float(scores[max(index, 0)])


def threshold_recall_guarantee(answerable_scores, *, target: float = 0.95, delta: float = 0.1) -> float:
    """Threshold with P(recall on future answerable questions >= target) >= 1 - delta.

    See the module docstring for the derivation.
    """
    target = check_float(target, "target", "threshold_recall_guarantee", low=0, high=1, high_open=False)
    delta = check_float(delta, "delta", "threshold_recall_guarantee", low=0, high=1)
    scores = _finite_sorted(answerable_scores)
    n = scores.size
    k = np.arange(1, n + 1)
    # P(Bin(n, 1 - target) <= k - 1) is the probability that recall falls short with t = s_(k).
    feasible = np.nonzero(binom.cdf(k - 1, n, 1 - target) <= delta)[0]
    if feasible.size == 0:
        warnings.warn(
            f"threshold_recall_guarantee: {n} answerable calibration scores cannot guarantee recall >= {target} "
            f"with confidence {1 - delta}; returning -inf (answer everything)",
            CalibrationWarning,
            stacklevel=2,
        )
        return -math.inf
    return float(scores[feasible[-1]])


def threshold_false_answer_guarantee(unanswerable_scores, *, alpha: float = 0.1, delta: float = 0.1) -> float:
    """Threshold with P(share of future unanswerable questions answered <= alpha) >= 1 - delta.

    See the module docstring for the derivation. The threshold is just above
    an unanswerable calibration score (``numpy.nextafter``), so that ``score >=
    threshold`` means strictly above it.
    """
    alpha = check_float(alpha, "alpha", "threshold_false_answer_guarantee", low=0, high=1)
    delta = check_float(delta, "delta", "threshold_false_answer_guarantee", low=0, high=1)
    descending = _finite_sorted(unanswerable_scores)[::-1]
    m = descending.size
    j = np.arange(1, m + 1)
    feasible = np.nonzero(binom.cdf(j - 1, m, alpha) <= delta)[0]
    if feasible.size == 0:
        warnings.warn(
            f"threshold_false_answer_guarantee: {m} unanswerable calibration scores cannot guarantee a false-answer "
            f"rate <= {alpha} with confidence {1 - delta}; returning +inf (refuse everything)",
            CalibrationWarning,
            stacklevel=2,
        )
        return math.inf
    return float(np.nextafter(descending[feasible[-1]], math.inf))


def threshold_min_cost(
    scores, answerable, *, cost_answer_unanswerable: float = 5.0, cost_refuse_answerable: float = 1.0
) -> float:
    """Threshold with the lowest calibration cost; ties go to the highest threshold."""
    cost_answer_unanswerable = check_float(
        cost_answer_unanswerable, "cost_answer_unanswerable", "threshold_min_cost", low=0, low_open=False
    )
    cost_refuse_answerable = check_float(
        cost_refuse_answerable, "cost_refuse_answerable", "threshold_min_cost", low=0, low_open=False
    )
    scores = np.asarray(scores, dtype=float)
    answerable = np.asarray(answerable, dtype=bool)
    finite = ~np.isnan(scores)
    scores, answerable = scores[finite], answerable[finite]
    candidates = np.concatenate([[-math.inf], np.unique(scores), [math.inf]])  # answer all ... refuse all
    positives, negatives = np.sort(scores[answerable]), np.sort(scores[~answerable])
    refused_answerable = np.searchsorted(positives, candidates, side="left")
    answered_unanswerable = negatives.size - np.searchsorted(negatives, candidates, side="left")
    cost = cost_refuse_answerable * refused_answerable + cost_answer_unanswerable * answered_unanswerable
    best = np.nonzero(cost == cost.min())[0][-1]
    return float(candidates[best])


@dataclass(frozen=True)
class Rule:
    """One threshold rule: its name, what the number after ``@`` means, how it is fitted, what it guarantees.

    Attributes
    ----------
    name : str
        The key before ``@``, e.g. ``"keep"``.
    description : str
        What the number after ``@`` means, with an example (shown by ``ragcal calibrate --help``).
    fit : callable
        ``fit(scores, answerable, value, *, delta, support, higher_is_answerable, key) -> threshold``, on
        scores oriented so that higher is answerable (:func:`fit_threshold` orients them and back).
    needs_support : bool, default=False
        The rule needs to know which answers are supported (``support=`` levels,
        :mod:`ragcal.gates.support`).
    risk : str, default=None
        The risk it bounds when Learn-then-Test certifies it (:mod:`ragcal.calibration.ltt`); None when
        Learn-then-Test cannot certify it.
    loss : callable, default=None
        ``loss(answered, supported, answerable, value) -> (losses, trials, bound)`` per candidate (rows of
        ``answered``), the binomial counts Learn-then-Test tests; None when ``risk`` is None.
    safest : {"strict", "lenient"} or None, default=None
        Where the risk is lowest along candidates ordered from the strictest to the most lenient (recall:
        the most lenient; false answers: the strictest); None when the risk is not monotone along them.
    """

    name: str
    description: str
    fit: Callable
    needs_support: bool = False
    risk: str | None = None
    loss: Callable | None = None
    safest: str | None = None


#: Every threshold rule, by name: the key before ``@`` in ``"keep@0.95"``. The rules with a closed form are
#: registered here; ``risk_guarantee`` and ``unsupported_guarantee``, which Learn-then-Test certifies, by
#: :mod:`ragcal.calibration.ltt` (imported with the package).
RULES: dict[str, Rule] = {}
_RULE_KEY = re.compile(r"^(?P<name>[a-z_]+)@(?P<value>[0-9]*\.?[0-9]+)$")


def register_rule(rule: Rule) -> Rule:
    """Add ``rule`` to :data:`RULES`; a name already registered raises ``ValueError``."""
    if rule.name in RULES:
        raise ValueError(f"a threshold rule named {rule.name!r} is already registered")
    RULES[rule.name] = rule
    return rule


def parse_rule(key: str) -> tuple[str, float]:
    """Split ``"keep@0.95"`` into ``("keep", 0.95)``; unknown names list the known ones."""
    match = _RULE_KEY.match(key.strip()) if isinstance(key, str) else None
    if match is None or match.group("name") not in RULES:
        known = "; ".join(f"{name}: {rule.description}" for name, rule in RULES.items())
        raise ValueError(f"unknown threshold rule {key!r}. Known rules: {known}")
    return match.group("name"), float(match.group("value"))


def get_rule(key: str) -> Rule:
    """The :class:`Rule` of a key such as ``"risk_guarantee@0.2"`` (checked by :func:`parse_rule`)."""
    return RULES[parse_rule(key)[0]]


def keep_share(rule: str, function: str) -> float:
    """The share ``p`` of a ``keep@p`` rule, for ``function``, which fits by that rule only."""
    name, value = parse_rule(rule)
    if name != "keep":
        raise ValueError(f"{function} fits by the keep@p rule only (e.g. keep@0.95). Got {rule!r} instead.")
    return value


def _fit_keep(scores, answerable, value, **_):
    return threshold_keep_share(scores[answerable], keep=value)


def _fit_recall(scores, answerable, value, *, delta, **_):
    return threshold_recall_guarantee(scores[answerable], target=value, delta=delta)


def _fit_false_answer(scores, answerable, value, *, delta, **_):
    return threshold_false_answer_guarantee(scores[~answerable], alpha=value, delta=delta)


def _fit_min_cost(scores, answerable, value, **_):
    return threshold_min_cost(scores, answerable, cost_answer_unanswerable=value)


def _refused_answerable(answered, supported, answerable, value):
    return (answerable & ~answered).sum(axis=1), np.full(answered.shape[0], answerable.sum()), 1 - value


def _answered_unanswerable(answered, supported, answerable, value):
    return (~answerable & answered).sum(axis=1), np.full(answered.shape[0], (~answerable).sum()), value


register_rule(Rule(
    "keep", "share of answerable calibration questions to keep (the published rule), e.g. keep@0.95", _fit_keep
))
register_rule(Rule(
    "recall_guarantee",
    "recall target guaranteed with confidence 1 - delta, e.g. recall_guarantee@0.9",
    _fit_recall,
    risk="share of answerable questions refused <= 1 - r",
    loss=_refused_answerable,
    safest="lenient",
))
register_rule(Rule(
    "false_answer_guarantee",
    "bound on the share of unanswerable questions answered, e.g. false_answer_guarantee@0.2",
    _fit_false_answer,
    risk="share of unanswerable questions answered <= a",
    loss=_answered_unanswerable,
    safest="strict",
))
register_rule(Rule(
    "min_cost",
    "cost of answering an unanswerable question relative to refusing an answerable one, e.g. min_cost@5",
    _fit_min_cost,
))


def fit_threshold(
    rule: str, scores, answerable, *, higher_is_answerable: bool = True, delta: float = 0.1, support=None
) -> float:
    """Fit a rule (``"keep@1.0"``, ``"recall_guarantee@0.9"``, ...) on calibration data.

    Parameters
    ----------
    rule : str
        A key as in :data:`RULES`.
    scores : array-like of float
    answerable : array-like of bool
    higher_is_answerable : bool, default=True
        For signals where low means answerable, the rule is fitted on
        ``-scores`` and the threshold returned in the signal's own units.
    delta : float, default=0.1
        1 - confidence of the guarantee rules.
    support : array-like of float, default=None
        Support level per question (:func:`ragcal.gates.support.signal_support`);
        only the rules that need support (:attr:`Rule.needs_support`) read it,
        and they need it. They are certified by Learn-then-Test
        (:func:`ragcal.calibration.ltt.threshold_by_ltt`, Holm over 40
        quantiles of the scores); when nothing is certified the threshold
        refuses everything, with a :class:`CalibrationWarning`.

    Returns
    -------
    float
        Answer when ``score >= threshold`` (or ``<=`` for the other
        orientation). Never on a calibration score: midway between the
        boundary calibration score and the next one (:func:`place_threshold`;
        for the rules that need support, the support levels count as scores
        too, since the threshold also cuts the passages); ``-inf``, ``+inf``
        and NaN unchanged.

    Examples
    --------
    >>> fit_threshold("keep@0.75", [0.4, 0.5, 0.6, 0.7], [True, True, True, True])  # boundary 0.5, next 0.4
    0.45
    """
    name, value = parse_rule(rule)
    sign = answerable_sign(higher_is_answerable)
    oriented = sign * np.asarray(scores, dtype=float)
    answerable = np.asarray(answerable, dtype=bool)
    threshold = RULES[name].fit(
        oriented, answerable, value, delta=delta, support=support, higher_is_answerable=higher_is_answerable, key=rule
    )
    compared = oriented
    if RULES[name].needs_support and support is not None and higher_is_answerable:
        # The threshold is also the passage bar: keep the support levels' side of it too.
        compared = np.concatenate([oriented, np.asarray(support, dtype=float).reshape(-1)])
    return sign * place_threshold(threshold, compared)


def place_threshold(threshold: float, scores) -> float:
    """Midway placement of a threshold in the "higher is answerable" orientation, for any rule's output.

    A finite threshold answers the calibration scores at or above it; the
    lowest of those (the boundary) answers the same ones, and
    :func:`~ragcal.calibration.midway.midway_threshold` moves it midway to the
    next score below. A threshold above every score (it refuses every
    calibration question, e.g. ``false_answer_guarantee@`` just above the
    highest score) goes half the gap to the next score above the highest one;
    see :func:`~ragcal.calibration.midway.midway_threshold` for the edge cases.

    Parameters
    ----------
    threshold : float
        Oriented (answer when ``score >= threshold``).
    scores : array-like of float
        Oriented calibration scores (NaN and infinite ones ignored).

    Returns
    -------
    float
        ``threshold`` unchanged when it is infinite or NaN, or when there is no finite score.
    """
    threshold = float(threshold)
    values = np.asarray(scores, dtype=float).reshape(-1)
    values = np.unique(values[np.isfinite(values)])
    if not math.isfinite(threshold) or values.size == 0:
        return threshold
    answered = values[values >= threshold]
    if answered.size:
        return midway_threshold(float(answered[0]), values)
    # Refuses every calibration score: the interval (highest score, +inf), placed as in the other orientation.
    return midway_threshold(float(values[-1]), values, higher_is_answerable=False)


def fit_rule(rule: str, scores, answerable, *, higher_is_answerable: bool = True, delta: float = 0.1, support=None):
    """:func:`fit_threshold`, saying whether the rule could be met, without raising or warning.

    A ``keep@`` rule on scores with no answerable question has no share to
    keep: its threshold is NaN. A rule whose guarantee cannot be met falls
    back (see :class:`CalibrationWarning`).

    Returns
    -------
    threshold : float
    fallback : bool
        True when the threshold is NaN or the rule fell back.
    messages : list of str
        The :class:`CalibrationWarning` messages, in order.
    """
    if parse_rule(rule)[0] == "keep" and not np.asarray(answerable, dtype=bool).any():
        return math.nan, True, []  # no answerable question to keep a share of
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always", CalibrationWarning)
        threshold = fit_threshold(
            rule, scores, answerable, higher_is_answerable=higher_is_answerable, delta=delta, support=support
        )
    messages = [str(warning.message) for warning in caught if issubclass(warning.category, CalibrationWarning)]
    return threshold, bool(messages) or math.isnan(threshold), messages

