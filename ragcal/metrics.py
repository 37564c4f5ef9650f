"""Retrieval metrics and AUC, each with a seeded bootstrap confidence interval.

Retrieval metrics are **page-level**: the chunks of a run are mapped to their
page (the chunk id before ``#``) and each page keeps its best rank, so that a
page answering the question counts once however many of its chunks were
retrieved. Only answerable queries (those with gold pages) are scored.

- ``recall@k``: share of a query's gold pages among its top ``k`` pages.
- ``mrr@k``: 1 / rank of the first gold page within the top ``k`` pages, else 0.
- ``context_precision@k``: share of the top ``k`` *chunks* (the passages that
  would be passed on) that come from a gold page.

These definitions match ranx on the page-level run (tested).
"""

from __future__ import annotations

import re
import warnings
from pathlib import Path

import numpy as np
import pandas as pd
from sklearn.metrics import roc_auc_score

__all__ = [
    "read_trec_run",
    "retrieval_metrics",
    "per_query_retrieval_metrics",
    "bootstrap_mean_ci",
    "auc_bootstrap",
    "auc_with_ci",
    "DegenerateInputWarning",
    "RETRIEVAL_METRICS",
]

#: Metric keys computed by :func:`retrieval_metrics` by default.
RETRIEVAL_METRICS = ("recall@1", "recall@5", "recall@10", "recall@50", "mrr@10", "context_precision@5")
_METRIC_KEY = re.compile(r"^(recall|mrr|context_precision)@(\d+)$")


class DegenerateInputWarning(UserWarning):
    """The input cannot give a meaningful number (one class only, a constant score); NaN is returned."""


def read_trec_run(path) -> pd.DataFrame:
    """Read a TREC run file into columns ``qid, docid, rank, score, tag``.

    Rows are sorted by query and rank. Raises ``ValueError`` naming the file
    and line on a malformed row.
    """
    path = Path(path)
    rows = []
    with open(path, encoding="utf-8") as handle:
        for line_number, line in enumerate(handle, start=1):
            if not line.strip():
                continue
            parts = line.split()
            if len(parts) != 6:
                raise ValueError(f"{path}, line {line_number}: expected 6 fields 'qid Q0 docid rank score tag', got {len(parts)}")
            try:
                rows.append((parts[0], parts[2], int(parts[3]), float(parts[4]), parts[5]))
            except ValueError as error:
                raise ValueError(f"{path}, line {line_number}: {error}") from error
    frame = pd.DataFrame(rows, columns=["qid", "docid", "rank", "score", "tag"])
    return frame.sort_values(["qid", "rank"], kind="stable").reset_index(drop=True)


def _parse_metric(key: str) -> tuple[str, int]:
    match = _METRIC_KEY.match(key)
    if not match or int(match.group(2)) < 1:
        raise ValueError(f"unknown metric {key!r}; use recall@k, mrr@k or context_precision@k with k >= 1")
    return match.group(1), int(match.group(2))


def per_query_retrieval_metrics(run: pd.DataFrame, gold: dict, *, metrics=RETRIEVAL_METRICS) -> pd.DataFrame:
    """One row per answerable query, one column per metric.

    Parameters
    ----------
    run : DataFrame
        As from :func:`read_trec_run` (``qid, docid, rank``).
    gold : dict of str to collection of str
        Gold pages per query id; queries with no gold pages are skipped.
        A query missing from the run scores 0 on every metric.
    metrics : sequence of str, default=RETRIEVAL_METRICS

    Returns
    -------
    DataFrame indexed by ``qid``.
    """
    parsed = [(key, *_parse_metric(key)) for key in metrics]
    run = run.sort_values(["qid", "rank"], kind="stable")
    chunk_pages = {
        qid: group["docid"].str.rsplit("#", n=1).str[0].tolist() for qid, group in run.groupby("qid", sort=False)
    }
    pages = {qid: list(dict.fromkeys(chunk_list)) for qid, chunk_list in chunk_pages.items()}
    rows = {}
    for qid, relevant in gold.items():
        relevant = set(relevant)
        if not relevant:
            continue
        ranked_pages, ranked_chunks = pages.get(qid, []), chunk_pages.get(qid, [])
        values = {}
        for key, name, k in parsed:
            if name == "recall":
                values[key] = len(relevant & set(ranked_pages[:k])) / len(relevant)
            elif name == "mrr":
                first = next((rank for rank, page in enumerate(ranked_pages[:k], start=1) if page in relevant), None)
                values[key] = 1.0 / first if first else 0.0
            else:
                values[key] = sum(page in relevant for page in ranked_chunks[:k]) / k
        rows[qid] = values
    return pd.DataFrame.from_dict(rows, orient="index", columns=[key for key, _, _ in parsed]).rename_axis("qid")


def bootstrap_mean_ci(values, *, n_resamples: int = 2000, confidence: float = 0.95, random_state=0):
    """Percentile bootstrap interval of the mean of ``values``.

    Returns
    -------
    (mean, low, high) : tuple of float
        NaN for empty input.
    """
    values = np.asarray(values, dtype=float)
    values = values[~np.isnan(values)]
    if values.size == 0:
        return (np.nan, np.nan, np.nan)
    rng = np.random.default_rng(random_state)
    means = values[rng.integers(0, values.size, size=(n_resamples, values.size))].mean(axis=1)
    alpha = (1 - confidence) / 2
    low, high = np.quantile(means, [alpha, 1 - alpha])
    return float(values.mean()), float(low), float(high)


def retrieval_metrics(runs: dict, gold: dict, *, metrics=RETRIEVAL_METRICS, n_resamples: int = 2000,
                      confidence: float = 0.95, random_state=0) -> pd.DataFrame:
    """Mean retrieval metrics with bootstrap intervals for several runs.

    Parameters
    ----------
    runs : dict of str to DataFrame
        ``{retriever name: run}``.
    gold : dict of str to collection of str
    metrics, n_resamples, confidence, random_state
        See :func:`per_query_retrieval_metrics` and :func:`bootstrap_mean_ci`.

    Returns
    -------
    DataFrame
        Columns ``retriever, metric, value, ci_low, ci_high, n_queries``.
    """
    rows = []
    for name, run in runs.items():
        per_query = per_query_retrieval_metrics(run, gold, metrics=metrics)
        for metric in per_query.columns:
            value, low, high = bootstrap_mean_ci(per_query[metric], n_resamples=n_resamples,
                                                 confidence=confidence, random_state=random_state)
            rows.append({"retriever": name, "metric": metric, "value": value, "ci_low": low, "ci_high": high,
                         "n_queries": len(per_query)})
    return pd.DataFrame(rows)


def _check_binary(y_true, y_score, function: str):
    y_true = np.asarray(y_true)
    y_score = np.asarray(y_score, dtype=float)
    if y_true.shape != y_score.shape or y_true.ndim != 1:
        raise ValueError(f"{function}: y_true and y_score must be 1-D of the same length; got {y_true.shape} and {y_score.shape}")
    if np.isnan(y_score).any():
        raise ValueError(f"{function}: y_score contains NaN; drop or impute those queries first")
    return y_true.astype(bool), y_score


def auc_bootstrap(y_true, y_score, *, n_resamples: int = 2000, random_state=0) -> np.ndarray:
    """AUC of stratified bootstrap resamples, vectorised.

    Positives and negatives are resampled separately (so every resample has
    both classes, in the original proportions). With ``C[i, j] = 1`` when
    positive i outscores negative j, ``0.5`` on a tie and 0 otherwise, a
    resample with multiplicities ``p`` (positives) and ``q`` (negatives) has
    ``AUC = p @ C @ q / (n_pos * n_neg)``, the Mann-Whitney form of the area
    under the ROC curve that ``sklearn.metrics.roc_auc_score`` computes.

    Returns
    -------
    ndarray of shape (n_resamples,)
    """
    y_true, y_score = _check_binary(y_true, y_score, "auc_bootstrap")
    positives, negatives = y_score[y_true], y_score[~y_true]
    if positives.size == 0 or negatives.size == 0:
        return np.full(n_resamples, np.nan)
    comparison = (positives[:, None] > negatives[None, :]) + 0.5 * (positives[:, None] == negatives[None, :])
    rng = np.random.default_rng(random_state)
    positive_counts = _resample_counts(rng, positives.size, n_resamples)
    negative_counts = _resample_counts(rng, negatives.size, n_resamples)
    wins = np.einsum("bi,ij,bj->b", positive_counts, comparison, negative_counts, optimize=True)
    return wins / (positives.size * negatives.size)


def _resample_counts(rng, size: int, n_resamples: int) -> np.ndarray:
    """How often each of ``size`` items is drawn in each of ``n_resamples`` resamples of ``size`` draws."""
    draws = rng.integers(0, size, size=(n_resamples, size))
    offsets = (np.arange(n_resamples) * size)[:, None]
    return np.bincount((draws + offsets).ravel(), minlength=n_resamples * size).reshape(n_resamples, size).astype(float)


def auc_with_ci(y_true, y_score, *, n_resamples: int = 2000, confidence: float = 0.95, random_state=0,
                higher_is_positive: bool = True):
    """ROC AUC (sklearn) with a stratified percentile bootstrap interval.

    Parameters
    ----------
    y_true : array-like of bool
        True for the positive class (answerable).
    y_score : array-like of float
    n_resamples : int, default=2000
    confidence : float, default=0.95
    random_state : int, default=0
    higher_is_positive : bool, default=True
        False scores ``-y_score``, for signals where a high value means
        unanswerable.

    Returns
    -------
    (auc, low, high) : tuple of float
        All NaN, with a :class:`DegenerateInputWarning`, when only one class
        is present or the score is constant.
    """
    y_true, y_score = _check_binary(y_true, y_score, "auc_with_ci")
    if not higher_is_positive:
        y_score = -y_score
    if y_true.all() or not y_true.any():
        warnings.warn("auc_with_ci: only one class present; AUC is undefined, returning NaN", DegenerateInputWarning, stacklevel=2)
        return (np.nan, np.nan, np.nan)
    if np.all(y_score == y_score[0]):
        warnings.warn("auc_with_ci: the score is constant; AUC carries no information, returning NaN", DegenerateInputWarning, stacklevel=2)
        return (np.nan, np.nan, np.nan)
    auc = float(roc_auc_score(y_true, y_score))
    resampled = auc_bootstrap(y_true, y_score, n_resamples=n_resamples, random_state=random_state)
    alpha = (1 - confidence) / 2
    low, high = np.quantile(resampled, [alpha, 1 - alpha])
    return auc, float(low), float(high)
