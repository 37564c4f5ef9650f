"""``ragcal calibrate`` from a log's counts: the same tables as :func:`ragcal.calibration.calibrate`, any log size.

Every number :func:`~ragcal.calibration.calibrate` shows depends on the rows
only through how many answerable and unanswerable rows of each slice hold
each score, so it is computed here from :class:`~ragcal.logs.counts.LogCounts`
(made by any engine) in NumPy:

- group statistics per slice (count, mean, median, min, max);
- the AUC of answerable against unanswerable rows (all, then each
  unanswerable slice) with its bootstrap interval: up to ``bootstrap_rows``
  rows, the rows themselves are rebuilt from the counts and bootstrapped as in
  memory; above, the m-out-of-n subsample is drawn by position in the sorted
  rows, with the same random draws as :func:`ragcal.metrics.auc.auc_interval`
  (which sorts its rows for this reason), so the interval is the in-memory one;
- ``keep@p``, ``recall_guarantee@r``, ``false_answer_guarantee@a`` and
  ``min_cost@c`` thresholds, from order statistics of the counts (the
  guarantee's largest feasible rank by bisection on the binomial CDF, which
  rises with the rank);
- each threshold's per-slice outcome with exact (Clopper-Pearson) intervals,
  and the sweep.

With bins at the distinct scores every number equals the in-memory one
(tested). With a grid (too many distinct scores), each row sits at its cell's
lower edge, in the orientation where higher means answerable: thresholds are
cell edges, at most one cell width from the exact ones, always on the side
that keeps a rule's promise (``keep@`` and ``recall_guarantee@`` keep at
least the rows they would keep exactly; ``false_answer_guarantee@`` answers
strictly above the cell, not just above the score), and the outcomes of a
threshold are exact counts of the rows it answers.

Every threshold is then placed midway between the boundary bin and the next
labeled bin (:func:`ragcal.logs.counts.place_counted_threshold`): with
distinct bins this is :func:`ragcal.calibration.fit_threshold`'s placement,
so the numbers still equal the in-memory ones.

The rules that need support levels (``risk_guarantee@``,
``unsupported_guarantee@``) read per-question support, not counts: they are
refused here with a message. Held-out splits need the rows: refused too.
"""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
from scipy.stats import binom

from ..calibration import Calibration, parse_rule
from ..calibration.rules import get_rule
from ..metrics.auc import auc_bootstrap, auc_interval
from ..metrics.outcomes import clopper_pearson, sweep_thresholds
from ..score_tables import slice_column
from .counts import LogCounts, place_counted_threshold

__all__ = ["COUNT_RULES", "calibrate_counts", "fit_rule_counts"]

#: The rules fitted from counts.
COUNT_RULES = ("keep", "recall_guarantee", "false_answer_guarantee", "min_cost")


class _Class:
    """One class's rows as sorted oriented scores with counts (``values`` ascending, ``counts`` > 0)."""

    def __init__(self, values, counts):
        order = np.argsort(values, kind="stable")
        self.values = np.asarray(values, dtype=np.float64)[order]
        self.counts = np.asarray(counts, dtype=np.int64)[order]
        self.cumulative = np.cumsum(self.counts)
        self.n = int(self.cumulative[-1]) if self.counts.size else 0

    def at(self, position):
        """The score of the row(s) at 0-based ``position`` in sorted order."""
        return self.values[np.searchsorted(self.cumulative, position, side="right")]

    def at_or_above(self, thresholds) -> np.ndarray:
        """Rows with an oriented score at or above each threshold."""
        below = np.searchsorted(self.values, thresholds, side="left")
        return self.n - np.concatenate([[0], self.cumulative])[below]

    def rows(self) -> np.ndarray:
        return np.repeat(self.values, self.counts)


def _oriented(counts: LogCounts, frame: pd.DataFrame) -> _Class:
    grouped = frame.groupby("bin", sort=True)["n"].sum()
    return _Class(counts.sign * grouped.index.to_numpy(np.float64), grouped.to_numpy(np.int64))


def _labeled(counts: LogCounts):
    """``(answerable, unanswerable, per unanswerable slice)`` as :class:`_Class`; unlabeled rows left out."""
    frame = counts.frame[counts.frame["answerable"].notna()]
    label = frame["answerable"].astype(bool)
    negative = frame[~label]
    slices = {name: _oriented(counts, part) for name, part in negative.groupby("slice", sort=True)}
    return _oriented(counts, frame[label]), _oriented(counts, negative), slices


def _largest_feasible(n: int, probability: float, delta: float) -> int:
    """Largest k in [1, n] with ``binom.cdf(k - 1, n, probability) <= delta``; 0 when none."""
    if n == 0 or binom.cdf(0, n, probability) > delta:
        return 0
    low, high = 1, n  # cdf(low - 1) <= delta holds; bisect for the last k where it does
    while low < high:
        middle = (low + high + 1) // 2
        if binom.cdf(middle - 1, n, probability) <= delta:
            low = middle
        else:
            high = middle - 1
    return low


def _fit_oriented(name, value, positive: _Class, negative: _Class, *, delta: float, width: float):
    """``(threshold, messages)`` in the oriented scores; see the module docstring."""
    if name == "keep":
        index = positive.n - math.ceil(value * positive.n - 1e-12)
        return float(positive.at(max(index, 0))), []
    if name == "recall_guarantee":
        k = _largest_feasible(positive.n, 1 - value, delta)
        if k == 0:
            return -math.inf, [
                (
                    f"threshold_recall_guarantee: {positive.n} answerable calibration scores cannot guarantee recall >= "
                    f"{value} with confidence {1 - delta}; returning -inf (answer everything)"
                )
            ]
        return float(positive.at(k - 1)), []
    if name == "false_answer_guarantee":
        j = _largest_feasible(negative.n, value, delta)
        if j == 0:
            return math.inf, [
                (
                    f"threshold_false_answer_guarantee: {negative.n} unanswerable calibration scores cannot guarantee a "
                    f"false-answer rate <= {value} with confidence {1 - delta}; returning +inf (refuse everything)"
                )
            ]
        score = float(negative.at(negative.n - j))
        # Strictly above that score; on a grid, above its whole cell (the next edge).
        return (score + width if width else float(np.nextafter(score, math.inf))), []
    # min_cost: every distinct score, plus answer all and refuse all; ties go to the highest threshold.
    candidates = np.concatenate([[-math.inf], np.union1d(positive.values, negative.values), [math.inf]])
    refused_answerable = positive.n - positive.at_or_above(candidates)
    cost = 1.0 * refused_answerable + value * negative.at_or_above(candidates)
    return float(candidates[np.nonzero(cost == cost.min())[0][-1]]), []


def fit_rule_counts(rule: str, counts: LogCounts, *, delta: float = 0.1):
    """:func:`ragcal.calibration.fit_rule` from counts: ``(threshold, fallback, messages)`` in the signal's units.

    Raises
    ------
    ValueError
        A rule that needs support levels (they are not in a score log's counts).
    """
    name, value = parse_rule(rule)
    if name not in COUNT_RULES:
        raise ValueError(
            f"{rule}: {get_rule(rule).description}; it needs each question's support level, which a log's counts "
            f"do not hold. From counts: {', '.join(rule + '@X' for rule in COUNT_RULES)}"
        )
    positive, negative, _ = _labeled(counts)
    if name == "keep" and positive.n == 0:
        return math.nan, True, []
    threshold, messages = _fit_oriented(name, value, positive, negative, delta=delta, width=counts.binning.width)
    values = np.union1d(positive.values, negative.values)
    threshold = counts.sign * place_counted_threshold(threshold, values, counts.binning.width)
    return threshold, bool(messages) or math.isnan(threshold), messages


def outcome_counts(counts: LogCounts, thresholds, *, confidence: float = 0.95) -> pd.DataFrame:
    """:func:`ragcal.metrics.outcome_table` from counts (unanswerable slices in sorted order)."""
    thresholds = np.asarray(thresholds, dtype=float).reshape(-1)
    positive, negative, slices = _labeled(counts)
    groups = [("answerable", "kept", positive)]
    groups += [(slice_column(name), "refused", part) for name, part in slices.items()]
    groups.append(("unanswerable", "refused", negative))
    oriented = counts.sign * thresholds
    columns = {"threshold": thresholds}
    for group, outcome, part in groups:
        answered = part.at_or_above(oriented)
        count = answered if outcome == "kept" else part.n - answered
        name = f"{group}_{outcome}"
        with np.errstate(invalid="ignore", divide="ignore"):
            columns[name] = count / part.n if part.n else np.full(thresholds.size, np.nan)
        columns[f"{name}_low"], columns[f"{name}_high"] = clopper_pearson(count, part.n, confidence=confidence)
        columns[f"{name}_k"] = count
        columns[f"{group}_n"] = np.full(thresholds.size, part.n)
    return pd.DataFrame(columns)


def group_stats_counts(counts: LogCounts) -> pd.DataFrame:
    """:func:`ragcal.metrics.group_stats` from counts: count, mean, median, min, max per slice (sorted)."""
    rows = []
    for name, part in counts.frame.groupby("slice", sort=True):
        scores = part.groupby("bin", sort=True)["n"].sum()
        values, weights = scores.index.to_numpy(np.float64), scores.to_numpy(np.int64)
        cumulative, n = np.cumsum(weights), int(weights.sum())
        middle = values[np.searchsorted(cumulative, [(n - 1) // 2, n // 2], side="right")]
        rows.append({"signal": counts.signal, "slice": name, "n": n, "mean": float(values @ weights / n),
                     "median": float(middle.mean()), "min": values[0], "max": values[-1]})  # fmt: skip
    return pd.DataFrame(rows, columns=["signal", "slice", "n", "mean", "median", "min", "max"])


def auc_interval_counts(positive: _Class, negative: _Class, *, n_resamples=2000, confidence=0.95,
                        bootstrap_rows=20_000, random_state=0):  # fmt: skip
    """:func:`ragcal.metrics.auc.auc_interval` on oriented counts, draw for draw (see the module docstring)."""
    from sklearn.metrics import roc_auc_score

    from ..metrics.auc import AucInterval

    n = positive.n + negative.n
    interval = "bootstrap" if n <= bootstrap_rows else "m-out-of-n bootstrap"
    if positive.n == 0 or negative.n == 0:
        return AucInterval(math.nan, math.nan, math.nan, interval, min(n, bootstrap_rows))
    if n <= bootstrap_rows:  # few rows: rebuild them and bootstrap
        labels = np.concatenate([np.ones(positive.n, bool), np.zeros(negative.n, bool)])
        rows = np.concatenate([positive.rows(), negative.rows()])
        return auc_interval(labels, rows, n_resamples=n_resamples, confidence=confidence,
                            bootstrap_rows=bootstrap_rows, random_state=random_state)  # fmt: skip
    values = np.union1d(positive.values, negative.values)
    if values.size == 1:
        return AucInterval(math.nan, math.nan, math.nan, interval, bootstrap_rows)
    # Mann-Whitney from counts: each answerable row beats the unanswerable rows below it, ties count half.
    below = np.concatenate([[0], negative.cumulative])[np.searchsorted(negative.values, positive.values, "left")]
    tied = negative.at_or_above(positive.values) - negative.at_or_above(np.nextafter(positive.values, math.inf))
    auc = float(np.sum(positive.counts * (below + 0.5 * tied)) / (positive.n * negative.n))
    rng = np.random.default_rng(random_state)
    share = bootstrap_rows / n
    m_pos, m_neg = max(1, round(positive.n * share)), max(1, round(negative.n * share))
    sub_score = np.concatenate([
        positive.at(rng.choice(positive.n, size=m_pos, replace=False)),
        negative.at(rng.choice(negative.n, size=m_neg, replace=False)),
    ])  # fmt: skip
    sub_true = np.concatenate([np.ones(m_pos, bool), np.zeros(m_neg, bool)])
    sub_auc = float(roc_auc_score(sub_true, sub_score)) if np.ptp(sub_score) > 0 else 0.5
    resampled = auc_bootstrap(sub_true, sub_score, n_resamples=n_resamples, random_state=random_state)
    alpha = (1 - confidence) / 2
    scale = math.sqrt((1 / positive.n + 1 / negative.n) / (1 / m_pos + 1 / m_neg))
    low, high = auc + scale * (np.quantile(resampled, [alpha, 1 - alpha]) - sub_auc)
    return AucInterval(auc, float(max(low, 0.0)), float(min(high, 1.0)), "m-out-of-n bootstrap", m_pos + m_neg)


def auc_table_counts(counts: LogCounts, *, n_resamples=2000, confidence=0.95, bootstrap_rows=20_000,
                     random_state=0) -> pd.DataFrame:  # fmt: skip
    """:func:`ragcal.metrics.auc_table` (with ``bootstrap_rows``) from counts, unanswerable slices sorted."""
    import warnings

    from ..metrics import DegenerateInputWarning

    positive, negative, slices = _labeled(counts)
    rows = []
    for comparison, part in [("all unanswerable", negative), *slices.items()]:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", DegenerateInputWarning)  # NaN says it; the CLI prints n/a
            result = auc_interval_counts(positive, part, n_resamples=n_resamples, confidence=confidence,
                                         bootstrap_rows=bootstrap_rows, random_state=random_state)  # fmt: skip
        rows.append({"signal": counts.signal, "comparison": comparison, "auc": result.auc, "ci_low": result.low,
                     "ci_high": result.high, "n_answerable": positive.n, "n_unanswerable": part.n,
                     "interval": result.interval, "bootstrap_rows": result.bootstrap_rows})  # fmt: skip
    return pd.DataFrame(rows)


def calibrate_counts(counts: LogCounts, rules=("keep@0.95",), *, delta: float = 0.1, n_resamples: int = 2000,
                     bootstrap_rows: int = 20_000, grid_points: int = 1001, every_score_limit: int = 20_000,
                     random_state=0) -> Calibration:  # fmt: skip
    """:func:`ragcal.calibration.calibrate` from a log's counts (no held-out splits: they need the rows).

    Parameters
    ----------
    counts : LogCounts
        From any engine (:func:`ragcal.logs.engines.count_signal`), made in the
        orientation of the signal (``higher_is_answerable``).
    rules : sequence of str, default=("keep@0.95",)
        Keys of the rules in :data:`COUNT_RULES`.
    delta, n_resamples, bootstrap_rows, grid_points, every_score_limit, random_state
        As for :func:`ragcal.calibration.calibrate`.

    Returns
    -------
    Calibration
        Equal to the in-memory one on the same rows when the bins are the
        distinct scores, but for the order of the unanswerable slices
        (sorted here, in order of appearance in memory) and floating-point
        rounding of the AUC and the means (summed in another order).

    Raises
    ------
    ValueError
        A rule that needs support levels; a log without any labeled score.
    """
    rules = list(rules)
    for rule in rules:
        parse_rule(rule)
    labeled = counts.frame[counts.frame["answerable"].notna()]
    if labeled.empty:
        raise ValueError(f"{counts.signal}: no row has both a score and an answerable label to calibrate on")
    fitted = [fit_rule_counts(rule, counts, delta=delta) for rule in rules]
    labeled_counts = LogCounts(counts.signal, labeled, counts.binning, counts.n_rows, counts.n_nan,
                               counts.higher_is_answerable)  # fmt: skip
    outcomes = outcome_counts(labeled_counts, [threshold for threshold, _, _ in fitted])
    outcomes.insert(0, "messages", [messages for _, _, messages in fitted])
    outcomes.insert(0, "fallback", [fallback for _, fallback, _ in fitted])
    outcomes.insert(0, "rule", rules)
    distinct = np.unique(labeled["bin"].to_numpy(np.float64))
    chosen, source, scheme = sweep_thresholds(
        distinct, [threshold for threshold, _, _ in fitted], every_score_limit=every_score_limit,
        grid_points=grid_points,
    )  # fmt: skip
    swept = outcome_counts(labeled_counts, chosen)
    swept.insert(0, "source", source)
    swept.insert(0, "signal", counts.signal)
    swept.attrs["scheme"] = scheme if counts.binning.kind == "distinct" else f"{scheme}; scores binned on a grid"
    aucs = auc_table_counts(labeled_counts, n_resamples=n_resamples, bootstrap_rows=bootstrap_rows,
                            random_state=random_state)  # fmt: skip
    stats = group_stats_counts(labeled_counts)
    return Calibration(counts.signal, counts.higher_is_answerable, int(labeled["n"].sum()), stats, aucs, outcomes,
                       swept)  # fmt: skip
