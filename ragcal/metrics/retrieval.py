"""Page-level retrieval metrics, each with a seeded bootstrap confidence interval.

Retrieval metrics are **page-level**: the chunks of a run are mapped to their
page (the chunk id before ``#``) and each page keeps its best rank, so that a
page answering the question counts once however many of its chunks were
retrieved. Only answerable queries (those with gold pages) are scored.

- ``recall@k``: share of a query's gold pages among its top ``k`` pages.
- ``mrr@k``: 1 / rank of the first gold page within the top ``k`` pages, else 0.
- ``context_precision@k``: share of the top ``k`` *chunks* (the passages that
  would be passed on) that come from a gold page.

These definitions match trec_eval on the page-level run (tested through pytrec_eval and ir_measures).
"""

from __future__ import annotations

import re

import numpy as np
import pandas as pd

from ..chunking import pages_of

__all__ = ["RETRIEVAL_METRICS", "bootstrap_mean_ci", "per_query_retrieval_metrics", "retrieval_metrics"]

#: Metric keys computed by :func:`retrieval_metrics` by default.
RETRIEVAL_METRICS = ("recall@1", "recall@5", "recall@10", "recall@50", "mrr@10", "context_precision@5")


_METRIC_KEY = re.compile(r"^(recall|mrr|context_precision)@(\d+)$")


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
        qid: pages_of(group["docid"]) for qid, group in run.groupby("qid", sort=False)
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


def retrieval_metrics(
    runs: dict,
    gold: dict,
    *,
    metrics=RETRIEVAL_METRICS,
    n_resamples: int = 2000,
    confidence: float = 0.95,
    random_state=0,
) -> pd.DataFrame:
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
            value, low, high = bootstrap_mean_ci(
                per_query[metric], n_resamples=n_resamples, confidence=confidence, random_state=random_state
            )
            rows.append(
                {
                    "retriever": name,
                    "metric": metric,
                    "value": value,
                    "ci_low": low,
                    "ci_high": high,
                    "n_queries": len(per_query),
                }
            )
    return pd.DataFrame(rows)
