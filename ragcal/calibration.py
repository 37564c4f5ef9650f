r"""Where to put the threshold, and how it holds up on questions it was not tuned on.

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
"""

from __future__ import annotations

import math
import re
import warnings
from dataclasses import dataclass

import numpy as np
import pandas as pd
from scipy.stats import beta, binom

from .metrics import auc_table, group_stats, outcome_table, sweep
from .metrics._common import drop_nan
from .score_tables import slice_column, unanswerable_slices

__all__ = [
    "CalibrationWarning",
    "RULES",
    "SUPPORT_RULES",
    "parse_rule",
    "threshold_keep_share",
    "threshold_recall_guarantee",
    "threshold_false_answer_guarantee",
    "threshold_min_cost",
    "fit_threshold",
    "split_by_slice",
    "fit_rule",
    "heldout_outcomes",
    "summarize_heldout",
    "fallback_notes",
    "published_split",
    "label_curve",
    "kept_share_interval",
    "Calibration",
    "calibrate",
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
    _check_share("keep", keep, "threshold_keep_share")
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
    _check_share("target", target, "threshold_recall_guarantee")
    _check_share("delta", delta, "threshold_recall_guarantee", open_right=True)
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
    _check_share("alpha", alpha, "threshold_false_answer_guarantee", open_right=True)
    _check_share("delta", delta, "threshold_false_answer_guarantee", open_right=True)
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
    if cost_answer_unanswerable < 0 or cost_refuse_answerable < 0:
        raise ValueError("threshold_min_cost: costs must be non-negative")
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


def _check_share(name, value, function, *, open_right=False):
    upper_ok = value < 1 if open_right else value <= 1
    if not isinstance(value, (int, float)) or isinstance(value, bool) or not (0 < value and upper_ok):
        interval = "(0, 1)" if open_right else "(0, 1]"
        raise ValueError(f"The '{name}' parameter of {function} must be a float in {interval}. Got {value!r} instead.")


#: Rule names accepted by :func:`parse_rule`, with the meaning of the number after ``@``.
RULES = {
    "keep": "share of answerable calibration questions to keep (the published rule), e.g. keep@0.95",
    "recall_guarantee": "recall target guaranteed with confidence 1 - delta, e.g. recall_guarantee@0.9",
    "false_answer_guarantee": "bound on the share of unanswerable questions answered, e.g. false_answer_guarantee@0.2",
    "min_cost": "cost of answering an unanswerable question relative to refusing an answerable one, e.g. min_cost@5",
    "risk_guarantee": "bound on the selective risk (unsupported answers / answers), Learn-then-Test; needs support",
    "unsupported_guarantee": "bound on unsupported answers / all questions, Learn-then-Test; needs support",
}
#: Rules that need to know which answers are supported (``support=`` levels, see :mod:`ragcal.gates.support`).
SUPPORT_RULES = ("risk_guarantee", "unsupported_guarantee")
_RULE_KEY = re.compile(r"^(?P<name>[a-z_]+)@(?P<value>[0-9]*\.?[0-9]+)$")


def parse_rule(key: str) -> tuple[str, float]:
    """Split ``"keep@0.95"`` into ``("keep", 0.95)``; unknown names list the known ones."""
    match = _RULE_KEY.match(key.strip()) if isinstance(key, str) else None
    if match is None or match.group("name") not in RULES:
        known = "; ".join(f"{name}: {meaning}" for name, meaning in RULES.items())
        raise ValueError(f"unknown threshold rule {key!r}. Known rules: {known}")
    return match.group("name"), float(match.group("value"))


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
        only the :data:`SUPPORT_RULES` read it, and they need it. They are
        certified by Learn-then-Test (:func:`ragcal.gates.certify_threshold_gate`,
        Holm over 40 quantiles of the scores); when nothing is certified the
        threshold refuses everything, with a :class:`CalibrationWarning`.

    Returns
    -------
    float
        Answer when ``score >= threshold`` (or ``<=`` for the other
        orientation).
    """
    name, value = parse_rule(rule)
    sign = 1.0 if higher_is_answerable else -1.0
    oriented = sign * np.asarray(scores, dtype=float)
    answerable = np.asarray(answerable, dtype=bool)
    if name == "keep":
        threshold = threshold_keep_share(oriented[answerable], keep=value)
    elif name == "recall_guarantee":
        threshold = threshold_recall_guarantee(oriented[answerable], target=value, delta=delta)
    elif name == "false_answer_guarantee":
        threshold = threshold_false_answer_guarantee(oriented[~answerable], alpha=value, delta=delta)
    elif name == "min_cost":
        threshold = threshold_min_cost(oriented, answerable, cost_answer_unanswerable=value)
    else:
        threshold = _threshold_by_ltt(rule, oriented, answerable, support, higher_is_answerable, delta)
    return sign * threshold


def _threshold_by_ltt(rule, oriented, answerable, support, higher_is_answerable, delta) -> float:
    from .gates.certify import _threshold_grid, certify_candidates, threshold_answers

    if support is None:
        raise ValueError(
            f"{rule} needs to know which answers are supported: pass support= (levels from the retrieval runs and "
            "the gold pages, ragcal.gates.signal_support), or on the command line --runs and --queries"
        )
    candidates = _threshold_grid(oriented, None, fixed_sequence=False)
    answered, supported = threshold_answers(
        oriented, candidates, support, higher_is_answerable=higher_is_answerable, owner=rule
    )
    certificate = certify_candidates(answered, supported, answerable, [rule], delta=delta)
    if certificate.chosen is None:
        warnings.warn(
            f"{rule}: no threshold is certified with confidence {1 - delta} on {oriented.size} calibration "
            "questions; returning +inf (refuse everything)",
            CalibrationWarning,
            stacklevel=3,
        )
        return math.inf
    return float(candidates[certificate.chosen])


# --------------------------------------------------------------------------- held-out protocol


def split_by_slice(slices, *, random_state=0) -> np.ndarray:
    """Calibration mask that splits every slice in half at random.

    A slice of n queries gives ceil(n / 2) to calibration and floor(n / 2) to
    evaluation (the published split: 15 + 15 answerable, 8 + 7 per
    unanswerable slice).
    """
    slices = np.asarray(slices)
    rng = np.random.default_rng(random_state)
    calibration = np.zeros(slices.size, dtype=bool)
    for name in pd.unique(slices):
        members = np.nonzero(slices == name)[0]
        chosen = rng.permutation(members)[: math.ceil(members.size / 2)]
        calibration[chosen] = True
    return calibration


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


def _evaluate(table, signal, threshold, higher_is_answerable, evaluation):
    outcome = outcome_table(
        table[evaluation], signal, [threshold], higher_is_answerable=higher_is_answerable, intervals=False
    )
    return outcome.iloc[0]


def heldout_outcomes(
    table: pd.DataFrame,
    signal: str,
    rules,
    *,
    n_splits: int = 1000,
    random_state=0,
    higher_is_answerable: bool = True,
    delta: float = 0.1,
) -> pd.DataFrame:
    """Fit each rule on one half of every slice and score it on the other half, over many splits.

    Parameters
    ----------
    table : DataFrame
        Score table with ``answerable``, ``slice`` and ``signal``.
    signal : str
    rules : sequence of str
        Rule keys, see :func:`fit_threshold`.
    n_splits : int, default=1000
        Split ``i`` uses seed ``random_state + i``; split 0 is
        :func:`published_split`'s.

    Returns
    -------
    DataFrame
        One row per (split, rule): ``threshold``; ``fallback``, True where the
        rule could not be met on that calibration half (a guarantee rule with
        too few questions gives ``-inf`` or ``+inf``, see
        :class:`CalibrationWarning`; ``keep`` without answerable questions
        gives NaN); and on the evaluation half only ``answerable_kept``,
        ``<slice>_refused`` for each unanswerable slice and
        ``unanswerable_refused``, with their counts.
    """
    for rule in rules:
        parse_rule(rule)
    table = table[~table[signal].isna()].reset_index(drop=True)
    scores = table[signal].to_numpy(dtype=float)
    answerable = table["answerable"].to_numpy(dtype=bool)
    slices = table["slice"].to_numpy()
    rows = []
    for split in range(n_splits):
        calibration = split_by_slice(slices, random_state=random_state + split)
        evaluation = ~calibration
        for rule in rules:
            threshold, fallback, _ = fit_rule(
                rule,
                scores[calibration],
                answerable[calibration],
                higher_is_answerable=higher_is_answerable,
                delta=delta,
            )
            outcome = _evaluate(table, signal, threshold, higher_is_answerable, evaluation)
            if math.isnan(threshold):  # no threshold, so no outcome either (rather than "refuses all")
                outcome[[name for name in outcome.index if not name.endswith("_n")]] = np.nan
            rows.append(
                {"split": split, "rule": rule, "threshold": threshold, "fallback": fallback, **outcome.to_dict()}
            )
    return pd.DataFrame(rows)


def published_split(
    table: pd.DataFrame,
    signal: str = "dense_top1",
    *,
    rule: str = "keep@1.0",
    random_state=0,
    higher_is_answerable: bool = True,
) -> pd.Series:
    """The published protocol: one seeded half split, calibrate keeping every answerable question."""
    return heldout_outcomes(
        table, signal, [rule], n_splits=1, random_state=random_state, higher_is_answerable=higher_is_answerable
    ).iloc[0]


def summarize_heldout(heldout: pd.DataFrame, *, answerable: bool = True, unanswerable: bool = True) -> pd.DataFrame:
    """5th, 50th and 95th percentile over splits of each rule's threshold and held-out outcomes.

    Parameters
    ----------
    heldout : DataFrame
        From :func:`heldout_outcomes`.
    answerable, unanswerable : bool, default=True
        Keep ``answerable_kept`` / the ``*_refused`` columns (False when the
        table has no question of that kind, so the rates are undefined).

    Returns
    -------
    DataFrame
        One row per rule (in order); columns (measure, quantile). A threshold
        quantile next to an infinite threshold (a rule that fell back) is the
        nearest split's threshold rather than NaN.
    """
    columns = [
        column
        for column in heldout.columns
        if (column in ("threshold", "answerable_kept") or column.endswith("_refused"))
        and not (column == "answerable_kept" and not answerable)
        and not (column.endswith("_refused") and not unanswerable)
    ]
    quantiles = heldout.groupby("rule", sort=False)[columns].quantile([0.05, 0.5, 0.95])
    nearest = heldout.groupby("rule", sort=False)[["threshold"]].quantile([0.05, 0.5, 0.95], interpolation="nearest")
    quantiles["threshold"] = quantiles["threshold"].fillna(nearest["threshold"])
    return quantiles.unstack()


def fallback_notes(heldout: pd.DataFrame) -> list[str]:
    """One sentence per rule that could not be met on some calibration halves, saying what it did there."""
    lines = []
    for rule, group in heldout.groupby("rule", sort=False):
        fell_back = group[group["fallback"]]
        if fell_back.empty:
            continue
        counted = f"in {len(fell_back)} of {len(group)} splits"
        threshold = fell_back["threshold"].iloc[0]
        name = parse_rule(rule)[0]
        if name == "keep":
            lines.append(f"{rule}: no answerable calibration questions {counted}, no threshold there (n/a)")
        elif name == "recall_guarantee":
            lines.append(
                f"{rule}: too few answerable calibration questions for the guarantee {counted}, "
                f"the rule answers everything there (threshold {threshold:+g})"
            )
        else:
            lines.append(
                f"{rule}: too few unanswerable calibration questions for the guarantee {counted}, "
                f"the rule refuses everything there (threshold {threshold:+g})"
            )
    return lines


# --------------------------------------------------------------------------- how many labels are enough


def _stratum_counts(stratum_sizes: np.ndarray, sizes: np.ndarray) -> np.ndarray:
    """Questions each stratum gives to a subsample of each size: proportional, rounded by largest remainder.

    Returns an array of shape (len(sizes), len(stratum_sizes)) whose rows sum
    to ``sizes``; among equal remainders the earlier stratum rounds up.
    """
    exact = np.asarray(sizes, dtype=float)[:, None] * stratum_sizes[None, :] / stratum_sizes.sum()
    counts = np.floor(exact).astype(int)
    short = np.asarray(sizes) - counts.sum(axis=1)
    order = np.argsort(-(exact - counts), axis=1, kind="stable")
    rank = np.argsort(order, axis=1, kind="stable")
    return counts + (rank < short[:, None])


def _label_curve_sizes(sizes, stratum_sizes: np.ndarray, names: list) -> np.ndarray:
    """The subsample sizes of :func:`label_curve`, checked (or the default grid)."""
    total = int(stratum_sizes.sum())
    every = np.arange(1, total + 1)
    counts = _stratum_counts(stratum_sizes, every)
    valid = ((counts >= 1) & (counts <= stratum_sizes - 1)).all(axis=1)
    if not valid.any():
        raise ValueError(
            "label_curve: no subsample size keeps a question of every slice and leaves one of every slice held out; "
            f"the table has {dict(zip(names, stratum_sizes.tolist()))} questions per (slice, answerable)"
        )
    smallest, largest = int(every[valid][0]), int(every[valid][-1])
    if sizes is None:
        # Up to the published split (the subsample gets the larger half of every slice): beyond it the held-out
        # remainder is smaller than the subsample and the band measures the remainder's own noise.
        half = int(np.ceil(stratum_sizes / 2).sum())
        top = int(every[valid & (every <= half)][-1]) if (valid & (every <= half)).any() else largest
        grid = np.unique(np.round(np.geomspace(smallest, top, num=10)).astype(int))
        return grid[valid[grid - 1]]
    given, sizes = sizes, np.asarray(sizes)
    if sizes.ndim != 1 or sizes.size == 0 or not np.issubdtype(sizes.dtype, np.integer):
        raise ValueError(
            f"The 'sizes' parameter of label_curve must be a non-empty list of integers. Got {given!r} instead."
        )
    for size in np.unique(sizes):
        if size < smallest or size > largest or not valid[size - 1]:
            row = _stratum_counts(stratum_sizes, [max(int(size), 0)])[0]
            if size < 1 or (row < 1).any():
                stratum = names[int(np.argmax(row < 1))] if size >= 1 else names[0]
                problem = f"gives the {stratum} questions none in the subsample"
            else:
                stratum = names[int(np.argmax(row > stratum_sizes - 1))]
                problem = f"leaves none of the {stratum} questions held out"
            raise ValueError(
                f"label_curve: size {int(size)} {problem}; sizes must lie in [{smallest}, {largest}] for a table of "
                f"{total} questions (a subsample keeps the mix of every (slice, answerable) group and leaves at "
                "least one of each held out)"
            )
    return np.unique(sizes)


def label_curve(
    table: pd.DataFrame,
    signal: str,
    rule: str,
    *,
    sizes=None,
    n_repeats: int = 200,
    random_state: int = 0,
    higher_is_answerable: bool = True,
    confidence: float = 0.9,
    delta: float = 0.1,
) -> pd.DataFrame:
    """How the threshold and its held-out outcome settle as the labeled set grows.

    For each size, ``n_repeats`` subsamples of that many labeled questions are
    drawn, stratified so that each keeps the table's mix of slices (every
    (slice, answerable) group gives its proportional share, rounded by largest
    remainder). ``rule`` is fitted on the subsample (:func:`fit_rule`) and
    scored on every question left out of it.

    Parameters
    ----------
    table : DataFrame
        Score table with ``answerable``, ``slice`` and ``signal``. Rows with a
        NaN score are left out, with a
        :class:`~ragcal.metrics.DegenerateInputWarning`.
    signal : str
    rule : str
        A rule key as in :data:`RULES` (not the :data:`SUPPORT_RULES`, which
        need support levels).
    sizes : sequence of int, default=None
        Subsample sizes, in labeled questions (sorted, duplicates dropped).
        Each must give every group at least one question and leave at least
        one of every group held out, else a ``ValueError`` gives the allowed
        range. None: about ten sizes spaced geometrically from the smallest
        allowed to the published half split (the subsample takes the larger
        half of every slice). Larger sizes are allowed, but their held-out
        remainder is smaller than the subsample, so their band grows with the
        remainder's own noise.
    n_repeats : int, default=200
        Subsamples per size.
    random_state : int, default=0
        Size ``n`` draws from ``numpy.random.default_rng([random_state, n])``,
        so a row does not depend on the other sizes asked for.
    higher_is_answerable : bool, default=True
    confidence : float, default=0.9
        Width of the percentile band over repeats: the 5th to 95th percentile
        by default.
    delta : float, default=0.1
        1 - confidence of the guarantee rules, as for :func:`fit_threshold`.

    Returns
    -------
    DataFrame
        One row per size, in increasing order: ``size``; ``n_answerable`` and
        ``n_unanswerable`` in the subsample, ``n_heldout`` left out; the
        median over repeats of ``threshold``, ``answerable_kept`` (held-out
        share of answerable questions answered), ``<slice>_refused`` for each
        unanswerable slice and ``unanswerable_refused``, each with its
        percentile band ``<name>_low`` and ``<name>_high``; ``fallback``, the
        share of repeats where the rule could not be met (see
        :func:`fit_rule`). ``attrs`` holds ``signal``, ``rule``,
        ``n_repeats`` and ``confidence``.

    See Also
    --------
    heldout_outcomes : the same protocol at the half split, over many splits.
    kept_share_interval : the exact spread of the kept share of ``keep@p``.
    ragcal.plotting.LabelCurveDisplay : draws this table.

    Examples
    --------
    >>> table = read_score_table("results/fastapi/scores.csv", ["dense_top1"])  # doctest: +SKIP
    >>> label_curve(table, "dense_top1", "keep@0.95")[["size", "answerable_kept_low", "answerable_kept_high"]]
    ... # doctest: +SKIP
    """
    from .score_tables import check_score_table

    table = check_score_table(table, [signal], source="label_curve's table")
    name, _ = parse_rule(rule)
    if name in SUPPORT_RULES:
        raise ValueError(f"label_curve: {rule} needs support levels, which label_curve does not take; use another rule")
    if isinstance(n_repeats, bool) or not isinstance(n_repeats, (int, np.integer)) or n_repeats < 2:
        raise ValueError(
            f"The 'n_repeats' parameter of label_curve must be an integer >= 2. Got {n_repeats!r} instead."
        )
    _check_share("confidence", confidence, "label_curve", open_right=True)
    table = drop_nan(table, signal).reset_index(drop=True)
    answerable = table["answerable"].to_numpy(dtype=bool)
    if answerable.all() or not answerable.any():
        kind = "answerable" if answerable.all() else "unanswerable"
        raise ValueError(
            f"label_curve: every one of the {len(table)} questions with a {signal!r} score is {kind}; the curve "
            "needs answerable and unanswerable questions"
        )
    scores = table[signal].to_numpy(dtype=float)
    slices = table["slice"].astype(str).to_numpy()
    strata = pd.MultiIndex.from_arrays([slices, answerable])
    codes, groups = pd.factorize(strata)
    members = [np.nonzero(codes == code)[0] for code in range(len(groups))]
    stratum_sizes = np.array([group.size for group in members])
    names = [
        f"slice {slice_name!r} ({'answerable' if is_answerable else 'unanswerable'})"
        for slice_name, is_answerable in groups
    ]
    sizes = _label_curve_sizes(sizes, stratum_sizes, names)

    measures = {"answerable_kept": (answerable, True)}
    for slice_name in unanswerable_slices(table):
        measures[f"{slice_column(slice_name)}_refused"] = ((slices == str(slice_name)) & ~answerable, False)
    measures["unanswerable_refused"] = (~answerable, False)
    low_q, high_q = (1 - confidence) / 2, (1 + confidence) / 2
    rows = []
    for size, counts in zip(sizes, _stratum_counts(stratum_sizes, sizes)):
        rng = np.random.default_rng([random_state, int(size)])
        chosen = np.zeros((n_repeats, len(table)), dtype=bool)
        for group, count in zip(members, counts):
            picks = np.argsort(rng.random((n_repeats, group.size)), axis=1)[:, :count]
            chosen[np.arange(n_repeats)[:, None], group[picks]] = True
        fitted = [
            fit_rule(rule, scores[mask], answerable[mask], higher_is_answerable=higher_is_answerable, delta=delta)
            for mask in chosen
        ]
        thresholds = np.array([threshold for threshold, _, _ in fitted])
        with np.errstate(invalid="ignore"):
            answered = scores >= thresholds[:, None] if higher_is_answerable else scores <= thresholds[:, None]
        heldout = ~chosen
        row = {
            "size": int(size),
            "n_answerable": int(answerable[chosen[0]].sum()),
            "n_unanswerable": int((~answerable[chosen[0]]).sum()),
            "n_heldout": int(heldout[0].sum()),
        }
        finite = thresholds[np.isfinite(thresholds)]
        row["threshold"], row["threshold_low"], row["threshold_high"] = (
            np.quantile(thresholds, [0.5, low_q, high_q], method="nearest")
            if finite.size < thresholds.size
            else np.quantile(thresholds, [0.5, low_q, high_q])
        )
        row["fallback"] = float(np.mean([fallback for _, fallback, _ in fitted]))
        for column, (group_mask, kept) in measures.items():
            outcome = answered if kept else ~answered
            share = (outcome & heldout & group_mask).sum(axis=1) / (heldout & group_mask).sum(axis=1)
            row[column], row[f"{column}_low"], row[f"{column}_high"] = np.quantile(share, [0.5, low_q, high_q])
        rows.append(row)
    curve = pd.DataFrame(rows)
    curve.attrs.update(signal=signal, rule=rule, n_repeats=int(n_repeats), confidence=float(confidence))
    return curve


def kept_share_interval(n_answerable: int, *, keep: float = 0.95, confidence: float = 0.9) -> tuple[float, float]:
    r"""Central interval of the kept share that ``keep@p`` fitted on ``n_answerable`` questions will deliver.

    ``keep@p`` puts the threshold at the j-th lowest answerable score, with
    :math:`j = n - \lceil p n \rceil + 1`. For exchangeable answerable
    questions with continuous scores, the share :math:`1 - F(s_{(j)})` of
    future answerable questions at or above it is distributed as
    :math:`\mathrm{Beta}(n - j + 1, j)` over the draw of the calibration set
    (the coverage distribution of split conformal prediction: Vovk, 2012,
    "Conditional validity of inductive conformal predictors", ACML;
    Angelopoulos and Bates, 2021, "A gentle introduction to conformal
    prediction", section 3.2). Ties only raise the kept share. The interval
    is about the gate fitted on all ``n`` questions; :func:`label_curve`
    shows the same spread measured on held-out questions.

    Returns
    -------
    low, high : float
        The ``(1 - confidence) / 2`` and ``(1 + confidence) / 2`` quantiles.

    Examples
    --------
    >>> low, high = kept_share_interval(100, keep=0.95)
    >>> round(low, 3), round(high, 3)
    (0.898, 0.974)
    """
    if isinstance(n_answerable, bool) or not isinstance(n_answerable, (int, np.integer)) or n_answerable < 1:
        raise ValueError(
            f"The 'n_answerable' parameter of kept_share_interval must be a positive integer. Got {n_answerable!r}."
        )
    _check_share("keep", keep, "kept_share_interval")
    _check_share("confidence", confidence, "kept_share_interval", open_right=True)
    kept_count = math.ceil(keep * n_answerable - 1e-12)  # n - j + 1
    distribution = beta(kept_count, n_answerable - kept_count + 1)
    return float(distribution.ppf((1 - confidence) / 2)), float(distribution.ppf((1 + confidence) / 2))


@dataclass(frozen=True)
class Calibration:
    """Everything :func:`calibrate` computed for one signal of a score table, as plain tables.

    Attributes
    ----------
    signal : str
    higher_is_answerable : bool
    n_rows : int
    group_stats : DataFrame
        :func:`ragcal.metrics.group_stats` (exact, every row).
    auc : DataFrame
        :func:`ragcal.metrics.auc_table` with ``bootstrap_rows``; its
        ``interval`` column names the bootstrap scheme.
    thresholds : DataFrame
        One row per rule, fitted on every row: ``rule``, ``threshold``,
        ``fallback``, ``messages`` (the :class:`CalibrationWarning` texts) and
        the exact per-slice outcome with Clopper-Pearson intervals.
    sweep : DataFrame
        :func:`ragcal.metrics.sweep` with the fitted thresholds (sized for
        large tables by ``every_score_limit``); ``sweep.attrs["scheme"]``
        says which thresholds were swept.
    heldout : DataFrame or None
        :func:`heldout_outcomes` over ``n_splits`` splits; None without splits.
    """

    signal: str
    higher_is_answerable: bool
    n_rows: int
    group_stats: pd.DataFrame
    auc: pd.DataFrame
    thresholds: pd.DataFrame
    sweep: pd.DataFrame
    heldout: pd.DataFrame | None = None

    @property
    def sweep_scheme(self) -> str:
        return self.sweep.attrs.get("scheme", "")


def calibrate(
    table: pd.DataFrame,
    signal: str,
    rules=("keep@0.95",),
    *,
    higher_is_answerable: bool = True,
    delta: float = 0.1,
    n_splits: int = 0,
    n_resamples: int = 2000,
    bootstrap_rows: int = 20_000,
    grid_points: int = 1001,
    every_score_limit: int = 20_000,
    random_state=0,
) -> Calibration:
    """Group statistics, AUC with intervals, every rule with its exact outcome, a sweep and held-out splits.

    Sized for any table: a labeled set of 200 questions or a production log
    of millions of rows (subsampled bootstrap above ``bootstrap_rows`` rows, a
    threshold grid above ``every_score_limit`` distinct scores).

    Parameters
    ----------
    table : DataFrame
        A checked score table, e.g. from :func:`ragcal.score_tables.read_score_table`.
    signal : str
    rules : sequence of str, default=("keep@0.95",)
        Rule keys, see :func:`fit_threshold`.
    higher_is_answerable, delta
        As for :func:`fit_threshold`.
    n_splits : int, default=0
        Held-out stratified half splits (:func:`heldout_outcomes`); none when 0.
    n_resamples, bootstrap_rows
        See :func:`ragcal.metrics.auc_interval`.
    grid_points, every_score_limit
        See :func:`ragcal.metrics.sweep`.
    random_state : int, default=0
        Seeds the AUC bootstrap and the held-out splits.

    Returns
    -------
    Calibration

    Examples
    --------
    >>> table = read_score_table("scores.parquet", ["dense_top1"])  # doctest: +SKIP
    >>> calibrate(table, "dense_top1", ["keep@0.95", "min_cost@5"]).thresholds  # doctest: +SKIP
    """
    rules = list(rules)
    for rule in rules:
        parse_rule(rule)
    stats = group_stats(table, [signal])
    aucs = auc_table(
        table,
        [signal],
        directions={signal: higher_is_answerable},
        n_resamples=n_resamples,
        bootstrap_rows=bootstrap_rows,
        random_state=random_state,
    )
    finite = table[~table[signal].isna()]
    scores = finite[signal].to_numpy(dtype=float)
    answerable = finite["answerable"].to_numpy(dtype=bool)
    fitted = [
        fit_rule(rule, scores, answerable, higher_is_answerable=higher_is_answerable, delta=delta) for rule in rules
    ]
    outcomes = outcome_table(
        finite, signal, [threshold for threshold, _, _ in fitted], higher_is_answerable=higher_is_answerable
    )
    outcomes.insert(0, "messages", [messages for _, _, messages in fitted])
    outcomes.insert(0, "fallback", [fallback for _, fallback, _ in fitted])
    outcomes.insert(0, "rule", rules)
    swept = sweep(
        finite,
        signal,
        thresholds=[threshold for threshold, _, _ in fitted],
        higher_is_answerable=higher_is_answerable,
        grid_points=grid_points,
        every_score_limit=every_score_limit,
    )
    heldout = None
    if n_splits:
        heldout = heldout_outcomes(
            table,
            signal,
            rules,
            n_splits=n_splits,
            random_state=random_state,
            higher_is_answerable=higher_is_answerable,
            delta=delta,
        )
    return Calibration(signal, higher_is_answerable, len(table), stats, aucs, outcomes, swept, heldout)
