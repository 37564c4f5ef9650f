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
sequence the order-statistic argument of :mod:`ragcal.calibration` makes it
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
from dataclasses import dataclass, field

import numpy as np
import pandas as pd
from scipy.stats import binom

from ..calibration import parse_rule
from ..score_tables import check_score_table
from .floor_gap import FloorGapGate, floor_gap_answers, floor_gap_columns
from .threshold import ThresholdGate, zero_means_no_match

__all__ = [
    "RISK_RULES",
    "METHODS",
    "Certificate",
    "binomial_p_values",
    "ltt_certify",
    "certify_candidates",
    "certify_threshold_gate",
    "threshold_answers",
    "certify_floor_gap",
    "certify_learned_gate",
    "certify_chain",
]

#: Rules Learn-then-Test can certify, with the risk each bounds.
RISK_RULES = {
    "recall_guarantee": "share of answerable questions refused <= 1 - r",
    "false_answer_guarantee": "share of unanswerable questions answered <= a",
    "risk_guarantee": "selective risk (unsupported answers / answers) <= a",
    "unsupported_guarantee": "unsupported answers / all questions <= a",
}
#: Corrections across candidates.
METHODS = ("auto", "fixed_sequence", "bonferroni", "holm")
_NEEDS_SUPPORT = ("risk_guarantee", "unsupported_guarantee")


def _parse_risk_rules(rules) -> list[tuple[str, float]]:
    rules = [rules] if isinstance(rules, str) else list(rules)
    if not rules:
        raise ValueError("certify: give at least one rule, e.g. risk_guarantee@0.2")
    parsed = []
    for rule in rules:
        name, value = parse_rule(rule)
        if name not in RISK_RULES:
            raise ValueError(f"certify: {rule!r} is not a risk bound; Learn-then-Test certifies {', '.join(RISK_RULES)}")
        if not 0 < value < 1:
            raise ValueError(f"certify: the bound of {rule!r} must be in (0, 1)")
        parsed.append((name, value))
    return parsed


def binomial_p_values(losses, trials, bound) -> np.ndarray:
    """P(Bin(trials, bound) <= losses): small when the observed loss rate is well below ``bound``; 1 where trials is 0."""
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
    if not 0 < delta < 1:
        raise ValueError(f"ltt_certify: delta must be in (0, 1). Got {delta!r} instead.")
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
    elif method == "holm":
        for rank, position in enumerate(np.argsort(p, kind="stable")):
            if p[position] > delta / (m - rank):
                break
            certified[position] = True
    else:
        raise ValueError(f"ltt_certify: unknown method {method!r}; known: fixed_sequence, bonferroni, holm")
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
        risks = "; ".join(f"{rule}: observed {row[f'{rule}_risk']:.3f}, p {row[f'{rule}_p']:.3g}" for rule in self.rules)
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
        Keys of :data:`RISK_RULES` with a bound, e.g. ``"risk_guarantee@0.2"``.
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
    answered = np.asarray(answered, dtype=bool)
    answerable = np.asarray(answerable, dtype=bool).reshape(-1)
    if answered.ndim != 2 or answered.shape[1] != answerable.size:
        raise ValueError(f"certify: answered has shape {answered.shape} for {answerable.size} questions")
    names = [name for name, _ in parsed]
    if any(name in _NEEDS_SUPPORT for name in names):
        if supported is None:
            raise ValueError(
                "certify: risk_guarantee and unsupported_guarantee need to know which answers are supported "
                "(support levels from the retrieval runs and the gold pages; see ragcal.gates.support)"
            )
        supported = np.asarray(supported, dtype=bool) & answered
    m = answered.shape[0]
    order = np.arange(m) if order is None else np.asarray(order, dtype=int)
    kinds = set(names)
    method = _resolve_method(rules, method, monotone)
    table = pd.DataFrame(index=range(m)) if parameters is None else parameters.reset_index(drop=True).copy()
    table["answered"] = answered.sum(axis=1)
    p_values = []
    keys = []
    for (name, value), rule in zip(parsed, [f"{name}@{value:g}" for name, value in parsed]):
        if name == "recall_guarantee":
            losses, trials, bound = (answerable & ~answered).sum(axis=1), np.full(m, answerable.sum()), 1 - value
        elif name == "false_answer_guarantee":
            losses, trials, bound = (~answerable & answered).sum(axis=1), np.full(m, (~answerable).sum()), value
        elif name == "risk_guarantee":
            losses, trials, bound = (answered & ~supported).sum(axis=1), answered.sum(axis=1), value
        else:
            losses, trials, bound = (answered & ~supported).sum(axis=1), np.full(m, answerable.size), value
        p = binomial_p_values(losses, trials, bound)
        table[f"{rule}_k"], table[f"{rule}_n"] = losses, trials
        with np.errstate(invalid="ignore", divide="ignore"):
            table[f"{rule}_risk"] = np.where(trials > 0, losses / np.maximum(trials, 1), np.nan)
        table[f"{rule}_p"] = p
        p_values.append(p)
        keys.append(rule)
    combined = np.max(p_values, axis=0)
    if method == "fixed_sequence":
        # One fixed sequence per bound, each at delta / (number of bounds), from where that bound is safest
        # (recall: the most lenient candidate; the others: the strictest); certified by all of them.
        certified = np.ones(m, dtype=bool)
        for name, p in zip(names, p_values):
            test_order = order[::-1] if name == "recall_guarantee" else order
            certified &= ltt_certify(p, delta / len(names), method="fixed_sequence", order=test_order)
    else:
        certified = ltt_certify(combined, delta, method=method)
    table["p"], table["certified"] = combined, certified
    chosen = None
    if certified.any():
        rank = np.empty(m, dtype=int)
        rank[order] = np.arange(m)  # 0 = strictest
        candidates = np.flatnonzero(certified)
        coverage = table["answered"].to_numpy()[candidates]
        if kinds <= {"recall_guarantee"}:
            best = np.lexsort((rank[candidates], coverage))  # fewest answered, then the strictest
        else:
            best = np.lexsort((-rank[candidates], -coverage))  # most answered, then the most lenient
        chosen = int(candidates[best[0]])
    table["chosen"] = np.arange(m) == (chosen if chosen is not None else -1)
    return Certificate(table, tuple(keys), float(delta), method, chosen, tuple(parameters.columns) if parameters is not None else ())


#: Default number of candidate thresholds when every candidate costs level (Holm, Bonferroni).
N_CANDIDATES = 40


def _quantile_grid(values, size):
    """``size`` calibration scores at evenly spaced quantiles (scores only, never labels); all when fewer."""
    values = np.unique(values[np.isfinite(values)])
    if values.size <= size:
        return values
    return np.unique(np.quantile(values, np.linspace(0, 1, size), method="inverted_cdf"))


def _threshold_grid(scores, grid, *, fixed_sequence: bool = True, size: int = N_CANDIDATES):
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
        values = _quantile_grid(scores, size)
    values = values[np.isfinite(values)]
    return np.concatenate([[math.inf], values[::-1]])


def _resolve_method(rules, method, monotone=True):
    kinds = {name for name, _ in _parse_risk_rules(rules)}
    if method == "auto":
        return "fixed_sequence" if monotone and kinds <= {"recall_guarantee", "false_answer_guarantee"} else "holm"
    if method not in METHODS[1:]:
        raise ValueError(f"certify: unknown method {method!r}; known: {', '.join(METHODS)}")
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


def certify_threshold_gate(table: pd.DataFrame, signal: str, rules, *, support=None, delta: float = 0.1,
                           method: str = "auto", grid=None, higher_is_answerable: bool | None = None,
                           **gate_options):
    """A :class:`ThresholdGate` on ``signal`` whose threshold Learn-then-Test certifies for ``rules``.

    Parameters
    ----------
    table : DataFrame
        Calibration score table.
    rules : str or sequence of str
        One or several of :data:`RISK_RULES`, certified jointly.
    support : array-like of float, default=None
        Support level per row (:func:`ragcal.gates.support.signal_support`);
        needed by the risk and unsupported rules.
    grid : array-like of float, default=None
        Candidate thresholds; every distinct calibration score when None.
        "Refuse all" (+inf) is always a candidate.

    Returns
    -------
    gate : ThresholdGate
        Threshold +inf (refuse all) when nothing is certified.
    certificate : Certificate
    """
    from ..signals import get_signal

    table = check_score_table(table, [signal])
    if higher_is_answerable is None:
        higher_is_answerable = get_signal(signal).higher_is_answerable
    sign = 1.0 if higher_is_answerable else -1.0
    scores = sign * table[signal].to_numpy(dtype=float)
    fixed_sequence = _resolve_method(rules, method) == "fixed_sequence"
    candidates = _threshold_grid(
        scores, None if grid is None else sign * np.asarray(grid, dtype=float), fixed_sequence=fixed_sequence
    )
    answered, supported = threshold_answers(
        scores,
        candidates,
        support,
        higher_is_answerable=higher_is_answerable,
        no_match_at_zero=zero_means_no_match(signal),
        owner="certify_threshold_gate",
    )
    parameters = pd.DataFrame({"threshold": sign * candidates})
    certificate = certify_candidates(
        answered, supported, table["answerable"], rules, delta=delta, method=method, parameters=parameters
    )
    threshold = math.inf * sign if certificate.chosen is None else float(parameters["threshold"][certificate.chosen])
    gate = ThresholdGate(signal, threshold, higher_is_answerable=higher_is_answerable, **gate_options)
    return gate, certificate


#: Default grid of :func:`certify_floor_gap`: floors and minimum gaps at evenly spaced quantiles.
N_FLOORS, N_GAPS = 20, 6


def certify_floor_gap(table: pd.DataFrame, rules, *, support=None, delta: float = 0.1, method: str = "auto",
                      floors=None, gaps=None, retriever: str = "dense", max_passages: int | None = 10):
    """A :class:`FloorGapGate` whose (floor, min_gap) Learn-then-Test certifies over a 2-D grid.

    The gate passes on ``retriever``'s passages that clear the floor, so an
    answer is supported when the support level (:func:`ragcal.gates.support.support_levels`
    of ``retriever``) is at least the floor. Candidates are :data:`N_FLOORS`
    floors at quantiles of the top scores times 0 and :data:`N_GAPS` - 1
    quantiles of the top-second gaps as minimum gaps (or the grids given),
    plus "refuse all"; there is no single order along which every risk is
    monotone, so ``auto`` takes Holm.

    Returns
    -------
    gate : FloorGapGate
        Floor +inf (refuse all) when nothing is certified.
    certificate : Certificate
    """
    top_column, second_column = floor_gap_columns(retriever)
    table = check_score_table(table, [top_column, second_column])
    top = table[top_column].to_numpy(dtype=float)
    second = table[second_column].to_numpy(dtype=float)
    if floors is None:
        floors = _quantile_grid(top, N_FLOORS)
    if gaps is None:
        gaps = np.union1d([0.0], _quantile_grid(top - second, N_GAPS - 1))
    floors, gaps = np.asarray(floors, dtype=float), np.asarray(gaps, dtype=float)
    grid_floor, grid_gap = np.meshgrid(floors, gaps, indexing="ij")
    grid_floor = np.concatenate([[math.inf], grid_floor.ravel()])
    grid_gap = np.concatenate([[0.0], grid_gap.ravel()])
    answered = floor_gap_answers(top[None, :], second[None, :], grid_floor[:, None], grid_gap[:, None])
    supported = None
    if support is not None:
        levels = np.asarray(support, dtype=float).reshape(-1)
        if levels.size != top.size:
            raise ValueError(f"certify_floor_gap: {levels.size} support levels for {top.size} rows")
        supported = answered & (levels[None, :] >= grid_floor[:, None])
    # strictest first: by how few questions each answers
    order = np.lexsort((grid_gap, -grid_floor, answered.sum(axis=1)))
    parameters = pd.DataFrame({"floor": grid_floor, "min_gap": grid_gap})
    certificate = certify_candidates(
        answered, supported, table["answerable"], rules, delta=delta, method=method, order=order, monotone=False,
        parameters=parameters,
    )
    if certificate.chosen is None:
        floor, gap = math.inf, 0.0
    else:
        floor, gap = float(grid_floor[certificate.chosen]), float(grid_gap[certificate.chosen])
    return FloorGapGate(floor, gap, retriever=retriever, max_passages=max_passages), certificate


def certify_learned_gate(table: pd.DataFrame, rules, *, support=None, signals=None, fit_share: float = 0.5,
                         delta: float = 0.1, method: str = "auto", passage_rule: str = "keep@0.95",
                         random_state=0, **gate_options):
    """A learned gate: the model and its cosine bar fitted on one split, its threshold certified on the other.

    The certification questions are never seen by the model (Learn-then-Test
    needs the candidates fixed before the calibration draw). ``fit_share`` of
    every slice fits the classifier (and the dense cosine bar that cuts the
    passages, by ``passage_rule``); the rest certifies the threshold on the
    learned score.

    Parameters
    ----------
    support : array-like of float, default=None
        Dense support levels per row (:func:`ragcal.gates.support.support_levels`
        of ``"dense"``): an answer is supported when the level clears the cosine bar.

    Returns
    -------
    gate : LearnedGate
    certificate : Certificate
        With ``fit_rows`` in its candidates' ``attrs``: how many rows fitted the model.
    """
    from ..calibration import fit_threshold
    from .learned import DEFAULT_LEARNED_SIGNALS, LearnedGate, _matrix, fit_learned_score
    from .support import bar_support

    signals = tuple(DEFAULT_LEARNED_SIGNALS if signals is None else signals)
    table = check_score_table(table).reset_index(drop=True)
    rng = np.random.default_rng(random_state)
    fitting = np.zeros(len(table), dtype=bool)
    slices = table["slice"].to_numpy()
    for name in pd.unique(slices):
        members = np.flatnonzero(slices == name)
        fitting[rng.permutation(members)[: int(round(fit_share * members.size))]] = True
    fit_table, certify_table = table[fitting], table[~fitting].reset_index(drop=True)
    model = fit_learned_score(fit_table, signals, random_state=random_state)
    bar = fit_threshold(passage_rule, fit_table["dense_top1"], fit_table["answerable"])
    scores = model.score(_matrix(certify_table, signals))
    candidates = _threshold_grid(scores, None, fixed_sequence=_resolve_method(rules, method) == "fixed_sequence")
    answered = np.isfinite(scores)[None, :] & (scores[None, :] >= candidates[:, None])
    supported = None
    if support is not None:
        levels = np.asarray(support, dtype=float).reshape(-1)
        if levels.size != len(table):
            raise ValueError(f"certify_learned_gate: {levels.size} support levels for {len(table)} rows")
        levels, top = levels[~fitting], certify_table["dense_top1"].to_numpy(dtype=float)
        # Passages are the dense ones clearing the bar; when none does, the top one (gold when its level is the top).
        supported = answered & bar_support(levels, top, bar)[None, :]
    parameters = pd.DataFrame({"threshold": candidates})
    certificate = certify_candidates(
        answered, supported, certify_table["answerable"], rules, delta=delta, method=method, parameters=parameters
    )
    certificate.candidates.attrs["fit_rows"] = int(fitting.sum())
    threshold = math.inf if certificate.chosen is None else float(candidates[certificate.chosen])
    gate = LearnedGate(model, threshold, passage_floor=bar, **gate_options)
    return gate, certificate


#: Default grid of :func:`certify_chain`: dense bars (for both the hybrid and the broad stage) and keyword bars.
N_DENSE_BARS, N_KEYWORD_BARS = 8, 3


def _stage_fires(gate, bars, table):
    """(len(bars), rows): whether the stage's gate, at each bar, answers each row (:meth:`decide_table`)."""
    from dataclasses import replace

    return np.stack(
        [replace(gate, threshold=float(bar)).decide_table(table)["action"].to_numpy(dtype=object) != "refuse"
         for bar in bars]
    )


def certify_chain(table: pd.DataFrame, rules, *, results=None, gold=None, delta: float = 0.1, method: str = "auto",
                  dense_bars=None, keyword_bars=None, max_passages: int = 10, broad_max_passages: int = 20):
    """The default :class:`FallbackChain` whose three stage bars Learn-then-Test certifies together.

    The chain is :func:`ragcal.gates.default_chain` (no reranker stage):
    ``hybrid`` answers when ``dense_top1`` clears the high bar (passages in
    fused order, each clearing it), then ``keyword`` when
    ``bm25_top1_stopwords`` clears its bar, then ``broad`` hedges when
    ``dense_top1`` clears the low bar. Hedges count as answers: an
    unsupported hedge is still an unsupported answer.

    Candidates are every (high, keyword, low) with ``high >= low`` from
    :data:`N_DENSE_BARS` dense bars and :data:`N_KEYWORD_BARS` keyword bars
    at evenly spaced quantiles of the calibration scores (or the grids
    given), the keyword stage also switched off (+inf), plus "refuse all".
    No single order makes every risk monotone over three bars, so ``auto``
    takes Holm.

    Parameters
    ----------
    table : DataFrame
        Calibration score table with ``dense_top1`` and ``bm25_top1_stopwords``.
    rules : str or sequence of str
        One or several of :data:`RISK_RULES`, certified jointly.
    results, gold : sequence, default=None
        Per row of ``table``: ``{retriever: RetrievalResult}`` (``dense``,
        ``rrf``, ``bm25_stopwords``; :func:`ragcal.gates.support.results_from_runs`
        gives them from TREC runs) and the gold pages. Needed by the risk and
        unsupported rules: each stage's passages at each of its bars are cut
        as the stage cuts them (:func:`ragcal.gates.support.cut_support`).

    Returns
    -------
    gate : FallbackChain
        Every bar +inf (refuse all) when nothing is certified.
    certificate : Certificate
    """
    from .chain import DEFAULT_CHAIN_COLUMNS, default_chain
    from .support import cut_support

    table = check_score_table(table, list(DEFAULT_CHAIN_COLUMNS))
    dense = table["dense_top1"].to_numpy(dtype=float)
    keyword_scores = table["bm25_top1_stopwords"].to_numpy(dtype=float)
    if dense_bars is None:
        dense_bars = _quantile_grid(dense, N_DENSE_BARS)
    if keyword_bars is None:
        keyword_bars = _quantile_grid(keyword_scores[keyword_scores > 0], N_KEYWORD_BARS)
    dense_bars = np.unique(np.asarray(dense_bars, dtype=float))
    keyword_bars = np.union1d(np.asarray(keyword_bars, dtype=float), [math.inf])
    if dense_bars.size == 0:
        raise ValueError("certify_chain: no finite dense_top1 score to build the grid from")
    options = {"max_passages": max_passages, "broad_max_passages": broad_max_passages}
    hybrid, keyword, broad = (stage.gate for stage in default_chain(math.inf, math.inf, math.inf, **options).stages)
    fires = (_stage_fires(hybrid, dense_bars, table), _stage_fires(keyword, keyword_bars, table),
             _stage_fires(broad, dense_bars, table))
    high_index, low_index = np.nonzero(dense_bars[:, None] >= dense_bars[None, :])
    keyword_index = np.repeat(np.arange(keyword_bars.size), high_index.size)
    high_index, low_index = np.tile(high_index, keyword_bars.size), np.tile(low_index, keyword_bars.size)
    by_hybrid = fires[0][high_index]
    by_keyword = fires[1][keyword_index] & ~by_hybrid
    by_broad = fires[2][low_index] & ~by_hybrid & ~by_keyword
    n = len(table)
    answered = np.vstack([np.zeros((1, n), dtype=bool), by_hybrid | by_keyword | by_broad])
    supported = None
    if results is not None or gold is not None:
        if results is None or gold is None:
            raise ValueError("certify_chain: results and gold go together (the passages and the gold pages)")
        passes = (cut_support(hybrid, results, gold, dense_bars), cut_support(keyword, results, gold, keyword_bars),
                  cut_support(broad, results, gold, dense_bars))
        supported = np.vstack([
            np.zeros((1, n), dtype=bool),
            (by_hybrid & passes[0][high_index]) | (by_keyword & passes[1][keyword_index])
            | (by_broad & passes[2][low_index]),
        ])
    grid = {
        "high": np.concatenate([[math.inf], dense_bars[high_index]]),
        "keyword": np.concatenate([[math.inf], keyword_bars[keyword_index]]),
        "low": np.concatenate([[math.inf], dense_bars[low_index]]),
    }
    order = np.lexsort((-grid["keyword"], -grid["high"], -grid["low"], answered.sum(axis=1)))
    certificate = certify_candidates(
        answered, supported, table["answerable"], rules, delta=delta, method=method, order=order, monotone=False,
        parameters=pd.DataFrame(grid),
    )
    bars = (math.inf,) * 3 if certificate.chosen is None else tuple(
        float(grid[name][certificate.chosen]) for name in ("high", "keyword", "low")
    )
    return default_chain(*bars, **options), certificate
