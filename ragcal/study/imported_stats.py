"""The statistics of the benchmark study (:mod:`ragcal.study.imported`): intervals that resample whole articles,
the learned gate nested held out by article, risk-coverage with both intervals, and binary signals as points.

Questions about one article are not independent: a bootstrap that resamples
questions treats 2,828 SQuAD questions as 2,828 pieces of evidence when they
come from 8 articles. Every interval here that says "article" resamples whole
articles instead (:func:`clustered_auc`, :func:`clustered_share`). With few
articles that bootstrap has few distinct resamples and tends to run narrow,
but it is closer to the truth than the question bootstrap.
"""

from __future__ import annotations

import math

import numpy as np
import pandas as pd

from ..metrics.binary import binary_answered, operating_point_masks

from ..calibration import fit_threshold
from ..gates.learned import crossfit_scores
from ..gates.learned_score import fit_learned_score
from ..metrics import clopper_pearson, outcome_table
from ..metrics.selective import risk_coverage, selective_areas, selective_summary
from ..signals import SIGNALS

__all__ = [
    "GROUP_COLUMN",
    "LEARNED_RULE",
    "BASELINE_SIGNAL",
    "N_TOP_SIGNALS",
    "clustered_auc",
    "clustered_share",
    "learned_heldout",
    "operating_points",
    "headline_signals",
    "risk_coverage_study",
]

#: The column of the query file (and of ``scores.csv``) naming each question's article.
GROUP_COLUMN = "group"
#: The rule of the learned gate's held-out outcomes (and of the main threshold).
LEARNED_RULE = "keep@0.95"
#: Signals always among the headline ones (with the best ones by AUC).
BASELINE_SIGNAL = "dense_top1"
#: How many of the best signals by AUC (besides :data:`BASELINE_SIGNAL`) get clustered intervals, held-out
#: thresholds and risk-coverage curves.
N_TOP_SIGNALS = 3


def _cluster_weights(groups, n_resamples: int, random_state) -> tuple:
    """Row weights of an article bootstrap: each resample draws as many articles as there are, with replacement;
    a row's weight is how often its article was drawn. Returns ``(codes, weights)``, weights ``(n_resamples, g)``."""
    codes, names = pd.factorize(np.asarray(groups))
    rng = np.random.default_rng(random_state)
    draws = rng.integers(0, len(names), size=(n_resamples, len(names)))
    weights = np.stack([np.bincount(draw, minlength=len(names)) for draw in draws]) if n_resamples else None
    return codes, weights


def clustered_auc(labels, scores, groups, *, n_resamples: int = 2000, confidence: float = 0.95, random_state=0):
    """AUC with a percentile bootstrap interval that resamples whole groups (articles), not questions.

    Each resample draws the groups with replacement (as many as there are)
    and counts every question as often as its group was drawn. The AUC of a
    resample is the weighted Mann-Whitney statistic (what
    ``sklearn.metrics.roc_auc_score`` gives with those weights as
    ``sample_weight``): for every distinct score, the drawn positives there
    times the drawn negatives below it plus half those tied with it, over
    (drawn positives x drawn negatives). Counts per (score, group) are
    tallied once, so a resample costs one small matrix product.

    Questions of one article stay together, so the interval reflects how much
    the AUC changes from one set of articles to another. With few groups (8
    on SQuAD half A) the bootstrap has few distinct resamples and tends to be
    too narrow; it is still more honest than treating the questions as
    independent.

    Returns
    -------
    (auc, low, high) : tuple of float
        NaN when a class is missing or ``scores`` is constant (resamples
        that draw only one class are left out).
    """
    from sklearn.metrics import roc_auc_score

    labels = np.asarray(labels, dtype=bool)
    scores = np.asarray(scores, dtype=float)
    groups = np.asarray(groups)
    keep = ~np.isnan(scores)
    labels, scores, groups = labels[keep], scores[keep], groups[keep]
    if labels.all() or not labels.any() or np.ptp(scores) == 0:
        return math.nan, math.nan, math.nan
    auc = float(roc_auc_score(labels, scores))
    codes, weights = _cluster_weights(groups, n_resamples, random_state)
    if weights is None:
        return auc, math.nan, math.nan
    _, level = np.unique(scores, return_inverse=True)
    shape = (level.max() + 1, codes.max() + 1)
    positives = np.zeros(shape)
    negatives = np.zeros(shape)
    np.add.at(positives, (level[labels], codes[labels]), 1.0)
    np.add.at(negatives, (level[~labels], codes[~labels]), 1.0)
    drawn_positives = weights @ positives.T  # (resamples, levels)
    drawn_negatives = weights @ negatives.T
    below = np.cumsum(drawn_negatives, axis=1) - drawn_negatives
    pairs = drawn_positives.sum(axis=1) * drawn_negatives.sum(axis=1)
    credit = (drawn_positives * (below + 0.5 * drawn_negatives)).sum(axis=1)
    resampled = credit[pairs > 0] / pairs[pairs > 0]
    if resampled.size == 0:
        return auc, math.nan, math.nan
    tail = (1 - confidence) / 2
    low, high = np.quantile(resampled, [tail, 1 - tail])
    return auc, float(low), float(high)


def clustered_share(successes, groups, *, n_resamples: int = 2000, confidence: float = 0.95, random_state=0):
    """A share (mean of a boolean) with an article-bootstrap interval: ``(share, low, high)``, NaN when empty."""
    successes = np.asarray(successes, dtype=float)
    if successes.size == 0:
        return math.nan, math.nan, math.nan
    codes, weights = _cluster_weights(groups, n_resamples, random_state)
    share = float(successes.mean())
    if weights is None:
        return share, math.nan, math.nan
    per_group_k = np.bincount(codes, weights=successes)
    per_group_n = np.bincount(codes).astype(float)
    shares = (weights @ per_group_k) / (weights @ per_group_n)
    tail = (1 - confidence) / 2
    low, high = np.quantile(shares, [tail, 1 - tail])
    return share, float(low), float(high)


def learned_heldout(
    table: pd.DataFrame, signals, splits, *, rule: str = LEARNED_RULE, random_state=0, max_folds: int | None = None
):
    """The learned gate nested held out on each split: model and threshold fitted on the calibration side only.

    On each calibration side a logistic model over ``signals`` is fitted on
    every row, and its threshold (``rule``) on out-of-fold scores of those
    rows, cross-fitted with one calibration article left out at a time, so
    the threshold never sees a score from a model that saw that article
    (at most ``max_folds`` folds of whole articles when given: with one
    question per group, leaving one out at a time is needlessly slow).
    The evaluation side (whole other articles) is then counted, and its AUC
    computed.

    Returns
    -------
    DataFrame
        One row per split: ``split, threshold, auc`` and the per-slice
        outcomes of :func:`ragcal.metrics.outcome_table` on the evaluation side.
    """
    from sklearn.metrics import roc_auc_score

    signals = list(signals)
    rows = []
    for split, calibration in enumerate(splits):
        fitted_on, counted_on = table[calibration].reset_index(drop=True), table[~calibration].reset_index(drop=True)
        groups = fitted_on[GROUP_COLUMN].to_numpy()
        model = fit_learned_score(fitted_on, signals, random_state=random_state)
        n_folds = len(pd.unique(groups)) if max_folds is None else min(len(pd.unique(groups)), max_folds)
        out_of_fold = crossfit_scores(fitted_on, signals, n_folds=n_folds, random_state=random_state, groups=groups)
        threshold = fit_threshold(rule, out_of_fold, fitted_on["answerable"])
        scored = counted_on.assign(learned=model.score(counted_on[signals].to_numpy(dtype=float)))
        labels = scored["answerable"].to_numpy(dtype=bool)
        auc = roc_auc_score(labels, scored["learned"]) if 0 < labels.sum() < labels.size else math.nan
        outcome = outcome_table(scored, "learned", [threshold], intervals=False).iloc[0].drop("threshold")
        rows.append({"split": split, "threshold": threshold, "auc": auc, **outcome.to_dict()})
    return pd.DataFrame(rows)


def operating_points(
    table: pd.DataFrame, columns, support, *, directions=None, n_resamples: int = 2000, random_state=0
):
    """Binary logged signals as points in ROC space and in risk-coverage space, with their intervals.

    A column holds 1 where the system answered (e.g. an LLM's
    ``found_answer``) and 0 where it abstained (the other way round when
    ``directions[name]`` is False); NaN counts as an abstention
    (:func:`ragcal.metrics.binary.binary_answered`). In ROC space: ``x`` the share
    of unanswerable questions answered (FPR), ``y`` the share of answerable
    ones answered (TPR); in risk-coverage space: ``x`` the share of all
    questions answered, ``y`` the unsupported share of the answers
    (``support``: one boolean per row). Intervals: Clopper-Pearson (questions
    independent) and an article bootstrap (:func:`clustered_share`).

    Returns
    -------
    DataFrame
        ``name, space, x, x_low, x_high, y, y_low, y_high, x_k, x_n, y_k, y_n,
        x_article_low, x_article_high, y_article_low, y_article_high``.
    """
    rows = []
    answerable = table["answerable"].to_numpy(dtype=bool)
    groups = table[GROUP_COLUMN].to_numpy()
    support = np.asarray(support, dtype=bool)
    for name in columns:
        higher = True if directions is None else directions.get(name, True)
        answered = binary_answered(table[name], higher_is_answerable=higher, function=f"operating_points: {name}")
        spaces = operating_point_masks(answered, answerable, support)
        for space, ((x_hits, x_rows), (y_hits, y_rows)) in spaces.items():
            row = {"name": name, "space": space}
            for axis, hits, rows_of in (("x", x_hits, x_rows), ("y", y_hits, y_rows)):
                k, n = int(hits[rows_of].sum()), int(rows_of.sum())
                low, high = clopper_pearson(k, n)
                _, article_low, article_high = clustered_share(
                    hits[rows_of], groups[rows_of], n_resamples=n_resamples, random_state=random_state
                )
                row.update(
                    {
                        axis: k / n if n else math.nan,
                        f"{axis}_low": float(low),
                        f"{axis}_high": float(high),
                        f"{axis}_k": k,
                        f"{axis}_n": n,
                        f"{axis}_article_low": article_low,
                        f"{axis}_article_high": article_high,
                    }
                )
            rows.append(row)
    return pd.DataFrame(rows)


def headline_signals(auc: pd.DataFrame, *, n_top: int = N_TOP_SIGNALS) -> list:
    """:data:`BASELINE_SIGNAL` and the ``n_top`` other registered signals with the highest AUC (all unanswerable).

    Picked by AUC on the whole table: a choice made on the same questions, so
    the best of 31 is flattered a little (its held-out outcomes below are not).
    """
    overall = auc[(auc["comparison"] == "all unanswerable") & auc["signal"].isin(list(SIGNALS))].dropna(subset=["auc"])
    ranked = [name for name in overall.sort_values("auc", ascending=False)["signal"] if name != BASELINE_SIGNAL]
    present = [BASELINE_SIGNAL] if BASELINE_SIGNAL in set(overall["signal"]) else []
    return present + ranked[:n_top]


def _clustered_areas(scores, support, groups, higher, *, n_resamples: int, confidence: float, random_state):
    """2.5th and 97.5th percentiles of (AURC, E-AURC, AUGRC) over article resamples (whole articles drawn)."""
    codes, weights = _cluster_weights(groups, n_resamples, random_state)
    members = [np.flatnonzero(codes == code) for code in range(codes.max() + 1)]
    draws = []
    for draw in weights if weights is not None else []:
        rows = np.concatenate([np.tile(members[code], count) for code, count in enumerate(draw) if count])
        areas = selective_areas(scores[rows], support[rows], higher_is_answerable=higher)
        draws.append([areas["aurc"], areas["e_aurc"], areas["augrc"]])
    if not draws:
        return np.full(3, np.nan), np.full(3, np.nan)
    tail = (1 - confidence) / 2
    low, high = np.nanquantile(np.array(draws), [tail, 1 - tail], axis=0)
    return low, high


def risk_coverage_study(inputs: dict, table: pd.DataFrame, *, n_resamples: int = 2000, random_state=0):
    """Curves and areas of ``{name: (scores, support, higher_is_answerable)}``, with question and article intervals.

    Returns
    -------
    curves : DataFrame
        :func:`ragcal.metrics.selective.risk_coverage` of each, with ``kind`` (``signal``) and ``name``.
    summary : DataFrame
        ``name, measure, value, low, high, article_low, article_high`` (AURC, E-AURC, AUGRC).
    """
    curves, summaries = [], []
    slices, groups = table["slice"].to_numpy(), table[GROUP_COLUMN].to_numpy()
    for name, (scores, support, higher) in inputs.items():
        curves.append(risk_coverage(scores, support, higher_is_answerable=higher).assign(kind="signal", name=name))
        summary = selective_summary(
            scores, support, strata=slices, higher_is_answerable=higher, n_resamples=n_resamples,
            random_state=random_state,
        )
        low, high = _clustered_areas(
            np.asarray(scores, dtype=float), np.asarray(support), groups, higher, n_resamples=n_resamples,
            confidence=0.95, random_state=random_state,
        )
        summaries.append(summary.assign(name=name, article_low=low, article_high=high))
    curves = pd.concat(curves, ignore_index=True)
    curves = curves[["kind", "name"] + [column for column in curves.columns if column not in ("kind", "name")]]
    summary = pd.concat(summaries, ignore_index=True)
    return curves, summary[["name", "measure", "value", "low", "high", "article_low", "article_high"]]
