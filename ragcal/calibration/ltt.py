r"""Learn-then-Test: certify any gate for one or several risk bounds at once.

Learn-then-Test (Angelopoulos, Bates, Candès, Jordan & Lei 2022) turns risk
control into multiple testing. For every candidate gate :math:`\lambda` (a
threshold, a (floor, gap) pair, a learned gate's threshold) and every bound
"risk :math:`R_c(\lambda) \le \alpha_c`", test the null hypothesis
:math:`H_{c,\lambda}: R_c(\lambda) > \alpha_c` on the calibration questions.
Every candidate whose nulls are all rejected is **certified**: with
probability at least :math:`1-\delta` over the draw of the calibration set,
every certified candidate meets every bound at once.

The losses are 0/1 per question, so each p-value is an exact binomial tail:
with :math:`k` losses among :math:`n` trials, :math:`p = P(\mathrm{Bin}(n,
\alpha_c) \le k)`.

==========================  =====================================  ==========================
rule                        loss (1 per question)                  trials n
==========================  =====================================  ==========================
``recall_guarantee@r``      answerable and refused                 answerable questions; bound 1 - r
``false_answer_guarantee@a`` unanswerable and answered              unanswerable questions; bound a
``risk_guarantee@a``        answered and unsupported               answered questions (selective risk)
``unsupported_guarantee@a`` answered and unsupported               all questions
==========================  =====================================  ==========================

For the selective risk, the answered calibration questions are, given how
many there are, independent draws from the answered population, so the
binomial tail conditional on that count is exact. A candidate that answers
nothing has no selective risk to certify (p = 1).

**Several bounds at once** (``joint``): a candidate's p-value is the largest
of its bounds' p-values (intersection-union), so no correction is needed
across bounds; the correction across candidates is:

- ``fixed_sequence``: candidates in a fixed order, certified until the first
  p-value above :math:`\delta` (no loss of level; powerful when the risk is
  monotone along the order: recall from the most lenient threshold up, the
  false-answer rate from the strictest down);
- ``bonferroni``: :math:`p \le \delta / m` over the m candidates;
- ``holm``: Holm's step-down, never certifies fewer than Bonferroni.

``method="auto"`` takes fixed sequence when every bound is monotone in the
same direction along a 1-D family (recall alone, false answers alone), and
Holm otherwise (selective risk, joint bounds of both kinds, 2-D grids).

The candidate grid is every distinct calibration score (plus "refuse all")
unless a grid is given. That grid depends on the calibration scores, as it
does when MAPIE is given the observed scores; for monotone risks under fixed
sequence the order-statistic argument of :mod:`ragcal.calibration.rules` makes it
exact, and for the rest the simulation tests check the nominal rate. Pass a
grid fixed in advance to rule the question out.

**Choosing among the certified.** Any certified candidate meets the bounds;
ragcal takes the one that answers the most calibration questions (ties: the
most lenient), except when every bound is a recall bound, where it takes the
one that answers the fewest (ties: the strictest), as ``recall_guarantee@``
does. When none is
certified the gate refuses everything and the certificate says so.
"""

from __future__ import annotations

import math
import warnings
from dataclasses import dataclass, field

import numpy as np
import pandas as pd
from scipy.stats import binom

from .._params import check_choice, check_float
from .rules import RULES, CalibrationWarning, Rule, parse_rule, register_rule

__all__ = [
    "METHODS",
    "N_CANDIDATES",
    "Certificate",
    "binomial_p_values",
    "ltt_certify",
    "certify_candidates",
    "risk_rules",
    "resolve_method",
    "quantile_grid",
    "threshold_grid",
    "threshold_answers",
    "threshold_by_ltt",
]

#: Corrections across candidates.
METHODS = ("auto", "fixed_sequence", "bonferroni", "holm")


def risk_rules() -> tuple[str, ...]:
    """Names of the rules Learn-then-Test can certify (those of :data:`~ragcal.calibration.rules.RULES` with a loss)."""
    return tuple(name for name, rule in RULES.items() if rule.loss is not None)


def _parse_risk_rules(rules) -> list[tuple[str, float]]:
    rules = [rules] if isinstance(rules, str) else list(rules)
    if not rules:
        raise ValueError("certify: give at least one rule, e.g. risk_guarantee@0.2")
    parsed = []
    for rule in rules:
        name, value = parse_rule(rule)
        if RULES[name].loss is None:
            raise ValueError(
                f"certify: {rule!r} is not a risk bound; Learn-then-Test certifies {', '.join(risk_rules())}"
            )
        if not 0 < value < 1:
            raise ValueError(f"certify: the bound of {rule!r} must be in (0, 1)")
        parsed.append((name, value))
    return parsed


def binomial_p_values(losses, trials, bound) -> np.ndarray:
    """P(Bin(trials, bound) <= losses): small when the observed loss rate is well below ``bound``.

    1 where ``trials`` is 0 (nothing to certify).
    """
    losses = np.asarray(losses, dtype=float)
    trials = np.asarray(trials, dtype=float)
    with np.errstate(invalid="ignore"):
        p = binom.cdf(losses, trials, bound)
    return np.where(trials > 0, p, 1.0)


def ltt_certify(p_values, delta: float, *, method: str, order=None) -> np.ndarray:
    """Which candidates are certified at family-wise level ``delta``.

    Parameters
    ----------
    p_values : array-like of float, shape (m,)
        One (combined) p-value per candidate.
    method : {"fixed_sequence", "bonferroni", "holm"}
    order : array-like of int, default=None
        Test order for ``fixed_sequence`` (positions into ``p_values``);
        the given order when None.

    Examples
    --------
    >>> ltt_certify([0.01, 0.04, 0.2, 0.01], 0.05, method="fixed_sequence").tolist()
    [True, True, False, False]
    >>> ltt_certify([0.01, 0.04, 0.2, 0.01], 0.05, method="holm").tolist()
    [True, False, False, True]
    """
    p = np.asarray(p_values, dtype=float).reshape(-1)
    if np.isnan(p).any():
        raise ValueError("ltt_certify: p-values must not be NaN")
    delta = check_float(delta, "delta", "ltt_certify", low=0, high=1)
    check_choice(method, "method", "ltt_certify", METHODS[1:])
    m = p.size
    certified = np.zeros(m, dtype=bool)
    if m == 0:
        return certified
    if method == "fixed_sequence":
        order = np.arange(m) if order is None else np.asarray(order, dtype=int)
        for position in order:
            if p[position] > delta:
                break
            certified[position] = True
    elif method == "bonferroni":
        certified = p <= delta / m
    else:  # holm
        for rank, position in enumerate(np.argsort(p, kind="stable")):
            if p[position] > delta / (m - rank):
                break
            certified[position] = True
    return certified


@dataclass(frozen=True)
class Certificate:
    """What Learn-then-Test tested and what it certified.

    Attributes
    ----------
    candidates : DataFrame
        One row per candidate: its parameters, ``answered`` (calibration
        questions answered), for each rule ``<rule>_k``, ``<rule>_n``,
        ``<rule>_risk`` (the observed rate) and ``<rule>_p``; then ``p`` (the
        largest of the rules' p-values), ``certified`` and ``chosen``.
    rules : tuple of str
    delta : float
    method : str
        The correction used (``auto`` resolved).
    chosen : int or None
        Row of ``candidates`` the gate uses; None when nothing was certified
        (the gate then refuses everything).
    """

    candidates: pd.DataFrame
    rules: tuple
    delta: float
    method: str
    chosen: int | None
    parameters: tuple = field(default=())

    @property
    def certified(self) -> bool:
        """True when some candidate was certified."""
        return self.chosen is not None

    @property
    def correction(self) -> str:
        """The multiple-testing correction, in words."""
        m = len(self.candidates)
        b = len(self.rules)
        across = {
            "fixed_sequence": f"fixed-sequence testing over {m} candidates"
            + (f", one sequence per bound at delta / {b}, certified by all" if b > 1 else " (no split of delta)"),
            "bonferroni": f"Bonferroni over {m} candidates (each at delta / {m})",
            "holm": f"Holm's step-down over {m} candidates",
        }[self.method]
        joint = (
            " Bounds are joint: a candidate's p-value is the largest of its bounds' (intersection-union)."
            if b > 1 and self.method != "fixed_sequence"
            else ""
        )
        return f"{across}.{joint}"

    def summary(self) -> str:
        """A few lines for a report: the bounds, the correction, and what was chosen."""
        bounds = " and ".join(self.rules)
        head = f"Learn-then-Test: {bounds}, each with probability >= {1 - self.delta:g}; {self.correction}"
        n_certified = int(self.candidates["certified"].sum())
        if self.chosen is None:
            return (
                f"{head}\nNo candidate is certified ({len(self.candidates)} tested): the gate refuses everything. "
                "More calibration questions, or looser bounds, are needed."
            )
        row = self.candidates.iloc[self.chosen]
        parameters = ", ".join(f"{name} {row[name]:.4g}" for name in self.parameters)
        risks = "; ".join(
            f"{rule}: observed {row[f'{rule}_risk']:.3f}, p {row[f'{rule}_p']:.3g}" for rule in self.rules
        )
        return f"{head}\n{n_certified} of {len(self.candidates)} candidates certified; chosen: {parameters} ({risks})"


def certify_candidates(answered, supported, answerable, rules, *, delta: float = 0.1, method: str = "auto",
                       order=None, monotone: bool = True, parameters: pd.DataFrame | None = None) -> Certificate:
    """Learn-then-Test over candidates given by what each answers (the engine of the ``certify_*`` functions).

    Parameters
    ----------
    answered : array-like of bool, shape (m, n)
        Whether candidate i answers calibration question j.
    supported : array-like of bool, shape (m, n) or None
        Whether it would be supported (answered and a gold passage passed
        on); needed by the risk and unsupported rules.
    answerable : array-like of bool, shape (n,)
    rules : str or sequence of str
        Keys of the rules Learn-then-Test certifies (:func:`risk_rules`) with a
        bound, e.g. ``"risk_guarantee@0.2"``.
    order : array-like of int, default=None
        Candidates from the strictest to the most lenient (for fixed sequence
        and for breaking ties); the given order when None.
    monotone : bool, default=True
        Whether the candidates form a 1-D family along ``order`` (so that
        ``auto`` may take fixed sequence).
    parameters : DataFrame, default=None
        One row per candidate, put in front of the certificate's table.
    """
    parsed = _parse_risk_rules(rules)
    delta = check_float(delta, "delta", "certify_candidates", low=0, high=1)
    answered = np.asarray(answered, dtype=bool)
    answerable = np.asarray(answerable, dtype=bool).reshape(-1)
    if answered.ndim != 2 or answered.shape[1] != answerable.size:
        raise ValueError(f"certify: answered has shape {answered.shape} for {answerable.size} questions")
    names = [name for name, _ in parsed]
    if any(RULES[name].needs_support for name in names):
        if supported is None:
            needing = " and ".join(name for name, rule in RULES.items() if rule.needs_support)
            raise ValueError(
                f"certify: {needing} need to know which answers are supported "
                "(support levels from the retrieval runs and the gold pages; see ragcal.gates.support)"
            )
        supported = np.asarray(supported, dtype=bool) & answered
    m = answered.shape[0]
    order = np.arange(m) if order is None else np.asarray(order, dtype=int)
    method = resolve_method(rules, method, monotone, owner="certify_candidates")
    # The columns are gathered first and the table is built once at the end: inserting them one at a time into a
    # DataFrame cost more than the testing itself in the study's thousands of certifications.
    n_answered = answered.sum(axis=1)
    columns = {"answered": n_answered}
    p_values = []
    keys = []
    for (name, value), rule in zip(parsed, [f"{name}@{value:g}" for name, value in parsed]):
        losses, trials, bound = RULES[name].loss(answered, supported, answerable, value)
        p = binomial_p_values(losses, trials, bound)
        columns[f"{rule}_k"], columns[f"{rule}_n"] = losses, trials
        with np.errstate(invalid="ignore", divide="ignore"):
            columns[f"{rule}_risk"] = np.where(trials > 0, losses / np.maximum(trials, 1), np.nan)
        columns[f"{rule}_p"] = p
        p_values.append(p)
        keys.append(rule)
    combined = np.max(p_values, axis=0)
    if method == "fixed_sequence":
        # One fixed sequence per bound, each at delta / (number of bounds), from where that bound is safest
        # (recall: the most lenient candidate; false answers: the strictest); certified by all of them.
        certified = np.ones(m, dtype=bool)
        for name, p in zip(names, p_values):
            test_order = order[::-1] if RULES[name].safest == "lenient" else order
            certified &= ltt_certify(p, delta / len(names), method="fixed_sequence", order=test_order)
    else:
        certified = ltt_certify(combined, delta, method=method)
    chosen = None
    if certified.any():
        rank = np.empty(m, dtype=int)
        rank[order] = np.arange(m)  # 0 = strictest
        candidates = np.flatnonzero(certified)
        coverage = n_answered[candidates]
        if all(RULES[name].safest == "lenient" for name in names):  # recall bounds only
            best = np.lexsort((rank[candidates], coverage))  # fewest answered, then the strictest
        else:
            best = np.lexsort((-rank[candidates], -coverage))  # most answered, then the most lenient
        chosen = int(candidates[best[0]])
    columns["p"], columns["certified"] = combined, certified
    columns["chosen"] = np.arange(m) == (chosen if chosen is not None else -1)
    if parameters is not None:  # in front, in one construction (a concat per certification cost as much again)
        if len(parameters) != m or set(parameters.columns) & set(columns):
            raise ValueError(f"certify: parameters must have one row per candidate ({m}) and columns of their own")
        columns = {**{name: parameters[name].array for name in parameters.columns}, **columns}
    table = pd.DataFrame(columns, index=pd.RangeIndex(m))
    names_of_parameters = tuple(parameters.columns) if parameters is not None else ()
    return Certificate(table, tuple(keys), float(delta), method, chosen, names_of_parameters)


#: Default number of candidate thresholds when every candidate costs level (Holm, Bonferroni).
N_CANDIDATES = 40


def quantile_grid(values, size):
    """``size`` calibration scores at evenly spaced quantiles (scores only, never labels); all when fewer."""
    values = np.unique(values[np.isfinite(values)])
    if values.size <= size:
        return values
    return np.unique(np.quantile(values, np.linspace(0, 1, size), method="inverted_cdf"))


def threshold_grid(scores, grid, *, fixed_sequence: bool = True, size: int = N_CANDIDATES):
    """Candidate thresholds, strictest first: "refuse all" (+inf), then the grid descending.

    Without a grid: under fixed-sequence testing (where extra candidates cost
    nothing) every distinct score and the value just above each (answering
    strictly above it, as ``false_answer_guarantee@`` does); under Holm or
    Bonferroni (where each costs level) ``size`` scores at evenly spaced quantiles.
    """
    if grid is not None:
        values = np.unique(np.asarray(grid, dtype=float))
    elif fixed_sequence:
        values = np.unique(scores[np.isfinite(scores)])
        values = np.union1d(values, np.nextafter(values, math.inf))
    else:
        values = quantile_grid(scores, size)
    values = values[np.isfinite(values)]
    return np.concatenate([[math.inf], values[::-1]])


def resolve_method(rules, method: str, monotone: bool = True, *, owner: str = "certify_candidates") -> str:
    """The correction ``method`` stands for: ``"auto"`` is fixed sequence when the candidates form a 1-D family
    (``monotone``) along which every rule's risk is monotone (recall, false answers), and Holm otherwise."""
    names = [name for name, _ in _parse_risk_rules(rules)]
    check_choice(method, "method", owner, METHODS)
    if method == "auto":
        return "fixed_sequence" if monotone and all(RULES[name].safest is not None for name in names) else "holm"
    return method


def threshold_answers(scores, candidates, support, *, higher_is_answerable=True, no_match_at_zero=False, owner=""):
    """What each candidate threshold answers, and which of those answers are supported.

    Parameters
    ----------
    scores : ndarray of float, shape (n,)
        Oriented (higher is answerable); NaN is never answered.
    candidates : ndarray of float, shape (m,)
        Thresholds in the same orientation.
    support : array-like of float or None
        Support levels per question in the signal's units (see
        :func:`ragcal.gates.support.signal_support`); for the other
        orientation only "always" or "never" carries over.
    no_match_at_zero : bool
        A score of exactly 0 means nothing matched (BM25), never answered.

    Returns
    -------
    answered : ndarray of bool, shape (m, n)
    supported : ndarray of bool, shape (m, n), or None without ``support``
    """
    with np.errstate(invalid="ignore"):
        answered = ~np.isnan(scores)[None, :] & (scores[None, :] >= candidates[:, None])
        if no_match_at_zero:
            answered &= (scores != 0)[None, :]
    if support is None:
        return answered, None
    levels = np.asarray(support, dtype=float).reshape(-1)
    if levels.size != scores.size:
        raise ValueError(f"{owner}: {levels.size} support levels for {scores.size} rows")
    if not higher_is_answerable:
        levels = np.where(levels > -math.inf, math.inf, -math.inf)
    return answered, answered & (levels[None, :] >= candidates[:, None])


def threshold_by_ltt(scores, answerable, value, *, delta, support, higher_is_answerable, key) -> float:
    """The threshold Learn-then-Test certifies for the rule ``key`` (Holm over :data:`N_CANDIDATES` quantiles).

    The ``fit`` of the rules registered below (see :class:`~ragcal.calibration.rules.Rule`): ``scores`` are
    oriented (higher is answerable), ``support`` in the signal's units. When nothing is certified, ``+inf``
    (refuse everything) with a :class:`~ragcal.calibration.rules.CalibrationWarning`.
    """
    if support is None:
        raise ValueError(
            f"{key} needs to know which answers are supported: pass support= (levels from the retrieval runs and "
            "the gold pages, ragcal.gates.support.signal_support), or on the command line --runs and --queries"
        )
    candidates = threshold_grid(scores, None, fixed_sequence=False)
    answered, supported = threshold_answers(
        scores, candidates, support, higher_is_answerable=higher_is_answerable, owner=key
    )
    certificate = certify_candidates(answered, supported, answerable, [key], delta=delta)
    if certificate.chosen is None:
        warnings.warn(
            f"{key}: no threshold is certified with confidence {1 - delta} on {scores.size} calibration "
            "questions; returning +inf (refuse everything)",
            CalibrationWarning,
            stacklevel=3,
        )
        return math.inf
    return float(candidates[certificate.chosen])


def _unsupported_among_answers(answered, supported, answerable, value):
    return (answered & ~supported).sum(axis=1), answered.sum(axis=1), value


def _unsupported_among_all(answered, supported, answerable, value):
    return (answered & ~supported).sum(axis=1), np.full(answered.shape[0], answerable.size), value


register_rule(Rule(
    "risk_guarantee",
    "bound on the selective risk (unsupported answers / answers), Learn-then-Test; needs support",
    threshold_by_ltt,
    needs_support=True,
    risk="selective risk (unsupported answers / answers) <= a",
    loss=_unsupported_among_answers,
))
register_rule(Rule(
    "unsupported_guarantee",
    "bound on unsupported answers / all questions, Learn-then-Test; needs support",
    threshold_by_ltt,
    needs_support=True,
    risk="unsupported answers / all questions <= a",
    loss=_unsupported_among_all,
))
