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

from ._io import delimiter_problem
from .queries import ANSWERABLE_EXPECTED, close_path, describe_cell, parse_answerable, unknown_paths_message

__all__ = [
    "read_trec_run",
    "retrieval_metrics",
    "per_query_retrieval_metrics",
    "bootstrap_mean_ci",
    "auc_bootstrap",
    "auc_with_ci",
    "DegenerateInputWarning",
    "RETRIEVAL_METRICS",
    "signal_columns",
    "unanswerable_slices",
    "slice_column",
    "check_score_table",
    "check_queries_against_runs",
    "clopper_pearson",
    "outcome_table",
    "sweep",
    "group_stats",
    "auc_table",
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
                raise ValueError(
                    f"{path}, line {line_number}: expected 6 fields 'qid Q0 docid rank score tag', got {len(parts)}"
                )
            try:
                rows.append((parts[0], parts[2], int(parts[3]), float(parts[4]), parts[5]))
            except ValueError as error:
                raise ValueError(f"{path}, line {line_number}: {error}") from error
    frame = pd.DataFrame(rows, columns=["qid", "docid", "rank", "score", "tag"])
    return frame.sort_values(["qid", "rank"], kind="stable").reset_index(drop=True)


def _listing(items, limit: int = 10) -> str:
    items = list(items)
    shown = ", ".join(map(str, items[:limit]))
    return shown + (f" and {len(items) - limit} more" if len(items) > limit else "")


def check_queries_against_runs(
    runs: dict,
    gold: dict,
    *,
    documents=None,
    source: str = "queries",
    runs_label: str = "the runs",
    documents_label: str = "the corpus documents",
) -> None:
    """Refuse queries that the runs cannot score, before any metric is computed.

    A query id missing from every run, or a gold path that is not a page of
    the corpus, would silently score 0. Both raise ``ValueError``.

    Parameters
    ----------
    runs : dict of str to DataFrame
        As from :func:`read_trec_run`.
    gold : dict of str to collection of str
        Gold pages per answerable query id.
    documents : collection of str, default=None
        Every page of the corpus the runs were made from. When None, gold
        paths are only checked against the pages the runs retrieved, and only
        those that differ from one by a prefix (``./``, the corpus folder) are
        refused.
    source, runs_label, documents_label : str
        How the messages name the queries, the runs and ``documents``.
    """
    run_ids = set().union(*(set(run["qid"]) for run in runs.values()))
    missing = [query_id for query_id, pages in gold.items() if pages and query_id not in run_ids]
    if missing:
        raise ValueError(
            f"{source}: query id(s) {_listing(missing)} not in any run file in {runs_label} "
            f"({len(missing)} of {sum(bool(pages) for pages in gold.values())} answerable queries; the runs hold ids "
            f"such as {_listing(sorted(run_ids), 5)}). They would score 0 on every metric. Evaluate the query file the "
            f"runs were made from, or make runs for this file with `ragcal score {source} --out SCORES.csv --runs DIR`."
        )
    gold_paths = list(dict.fromkeys(path for pages in gold.values() for path in sorted(pages)))
    if documents is not None:
        known = set(documents)
        unknown = [path for path in gold_paths if path not in known]
        if unknown:
            raise ValueError(
                f"{source}, column 'gold': "
                + unknown_paths_message(
                    unknown[:10], known, corpus=f"the corpus of the runs ({documents_label}, {len(known)} documents)"
                )
            )
        return
    retrieved = {page for run in runs.values() for page in run["docid"].str.rsplit("#", n=1).str[0].unique().tolist()}
    near = [path for path in gold_paths if path not in retrieved and close_path(path, retrieved)]
    if near:
        raise ValueError(
            f"{source}, column 'gold': "
            + unknown_paths_message(
                near[:10], retrieved, corpus=f"any run in {runs_label} (no meta.json there lists the corpus documents)"
            )
        )


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


def _check_binary(y_true, y_score, function: str):
    y_true = np.asarray(y_true)
    y_score = np.asarray(y_score, dtype=float)
    if y_true.shape != y_score.shape or y_true.ndim != 1:
        raise ValueError(
            f"{function}: y_true and y_score must be 1-D of the same length; got {y_true.shape} and {y_score.shape}"
        )
    if np.isnan(y_score).any():
        raise ValueError(f"{function}: y_score contains NaN; drop or impute those queries first")
    return y_true.astype(bool), y_score


def auc_bootstrap(
    y_true, y_score, *, n_resamples: int = 2000, random_state=0, batch_size: int | None = None
) -> np.ndarray:
    """AUC of stratified bootstrap resamples, vectorised.

    Positives and negatives are resampled separately, so every resample has
    both classes in the original numbers. The AUC of a resample is the
    Mann-Whitney statistic that ``sklearn.metrics.roc_auc_score`` computes::

        AUC = sum over drawn positives p of (N(< s_p) + 0.5 * N(= s_p)) / (n_pos * n_neg)

    where ``N(< s)`` counts the drawn negatives scoring below ``s``. The
    negatives are sorted once; per resample their draw counts are
    accumulated along that order, and each drawn positive reads its two
    counts at positions found once by ``searchsorted``. The cost is linear
    in the number of queries per resample: 10,000 resamples of 200 queries
    take milliseconds, and large tables are processed ``batch_size``
    resamples at a time to bound memory.

    Returns
    -------
    ndarray of shape (n_resamples,)
        NaN everywhere when a class is missing.
    """
    y_true, y_score = _check_binary(y_true, y_score, "auc_bootstrap")
    positives, negatives = y_score[y_true], y_score[~y_true]
    n_pos, n_neg = positives.size, negatives.size
    if n_pos == 0 or n_neg == 0:
        return np.full(n_resamples, np.nan)
    order = np.argsort(negatives, kind="stable")
    sorted_position = np.empty(n_neg, dtype=np.intp)
    sorted_position[order] = np.arange(n_neg)
    below = np.searchsorted(negatives[order], positives, side="left")  # negatives strictly below each positive
    up_to = np.searchsorted(negatives[order], positives, side="right")  # ... and those tied with it
    tied = np.nonzero(below != up_to)[0]
    batch_size = batch_size or max(1, min(n_resamples, 4_000_000 // (n_pos + n_neg)))
    rng = np.random.default_rng(random_state)
    out = np.empty(n_resamples)
    for start in range(0, n_resamples, batch_size):
        batch = min(batch_size, n_resamples - start)
        positive_draws = rng.integers(0, n_pos, size=(batch, n_pos))
        negative_draws = rng.integers(0, n_neg, size=(batch, n_neg))
        offsets = (np.arange(batch) * n_neg)[:, None]
        counts = np.bincount((sorted_position[negative_draws] + offsets).ravel(), minlength=batch * n_neg)
        # Drawn negatives strictly below sorted position j: cumulative[:, j]; float32 counts are exact below 2**24.
        cumulative = np.zeros((batch, n_neg + 1), dtype=np.float32)
        np.cumsum(counts.reshape(batch, n_neg), axis=1, out=cumulative[:, 1:])
        # Per positive: drawn negatives below it plus half of those tied with it.
        credit = np.take_along_axis(cumulative, np.broadcast_to(below, (batch, n_pos)), axis=1)
        if tied.size:
            credit[:, tied] += 0.5 * (cumulative[:, up_to[tied]] - cumulative[:, below[tied]])
        out[start : start + batch] = np.take_along_axis(credit, positive_draws, axis=1).sum(axis=1, dtype=np.float64)
    return out / (n_pos * n_neg)


def auc_with_ci(
    y_true,
    y_score,
    *,
    n_resamples: int = 2000,
    confidence: float = 0.95,
    random_state=0,
    higher_is_positive: bool = True,
):
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
        warnings.warn(
            "auc_with_ci: only one class present; AUC is undefined, returning NaN", DegenerateInputWarning, stacklevel=2
        )
        return (np.nan, np.nan, np.nan)
    if np.all(y_score == y_score[0]):
        warnings.warn(
            "auc_with_ci: the score is constant; AUC carries no information, returning NaN",
            DegenerateInputWarning,
            stacklevel=2,
        )
        return (np.nan, np.nan, np.nan)
    auc = float(roc_auc_score(y_true, y_score))
    resampled = auc_bootstrap(y_true, y_score, n_resamples=n_resamples, random_state=random_state)
    alpha = (1 - confidence) / 2
    low, high = np.quantile(resampled, [alpha, 1 - alpha])
    return auc, float(low), float(high)


# --------------------------------------------------------------------------- score tables

#: Columns of a score table that are not signals.
SCORE_KEY_COLUMNS = ("id", "query", "answerable", "slice")


def signal_columns(table: pd.DataFrame) -> list[str]:
    """The numeric columns of a score table other than its key columns."""
    return [
        column
        for column in table.columns
        if column not in SCORE_KEY_COLUMNS
        and pd.api.types.is_numeric_dtype(table[column])
        and not pd.api.types.is_bool_dtype(table[column])
    ]


def unanswerable_slices(table: pd.DataFrame) -> list[str]:
    """Slice names of the unanswerable rows, in order of appearance."""
    return list(pd.unique(table.loc[~table["answerable"].astype(bool), "slice"]))


def slice_column(name: str) -> str:
    """Column-name form of a slice: ``"near-domain"`` -> ``"near_domain"``."""
    return re.sub(r"\W+", "_", str(name)).strip("_").lower()


def check_score_table(table: pd.DataFrame, signals=(), *, source: str = "score table") -> pd.DataFrame:
    """Validate the columns calibration needs; return a copy with a boolean ``answerable``.

    ``answerable`` may be true/false, yes/no or 1/0 (also 1.0/0.0). Problems
    are reported with ``source`` and the line of the CSV (the header is line 1,
    as for query files).
    """
    if len(table.columns) == 1:
        problem = delimiter_problem(str(table.columns[0]))
        if problem:
            raise ValueError(f"{source}: {problem}")
    missing = [column for column in ("answerable", "slice", *signals) if column not in table.columns]
    if missing:
        raise ValueError(
            f"{source}: missing column(s) {', '.join(map(repr, missing))}; have {', '.join(map(str, table.columns))}"
        )
    table = table.copy()
    if table["answerable"].dtype != bool:
        # Parse each distinct cell once: a logged table of millions of rows holds a handful of spellings.
        codes, distinct = pd.factorize(table["answerable"], use_na_sentinel=False)
        labels = [parse_answerable(value) for value in pd.Index(distinct).tolist()]
        bad_codes = [code for code, label in enumerate(labels) if label is None]
        if bad_codes:
            first = int(np.flatnonzero(np.isin(codes, bad_codes))[0])
            raise ValueError(
                f"{source}, line {first + 2}, column 'answerable': {ANSWERABLE_EXPECTED}, got "
                f"{describe_cell(table['answerable'].iloc[first])}"
            )
        table["answerable"] = np.array(labels, dtype=bool)[codes]
    for signal in signals:
        if not pd.api.types.is_numeric_dtype(table[signal]):
            values = table[signal]
            bad = np.nonzero((pd.to_numeric(values, errors="coerce").isna() & values.notna()).to_numpy())[0]
            where = f", line {bad[0] + 2}" if bad.size else ""
            got = f", got {describe_cell(values.iloc[bad[0]])}" if bad.size else ""
            raise ValueError(f"{source}{where}, column {signal!r}: not numeric{got}")
    return table


def _drop_nan(table: pd.DataFrame, signal: str) -> pd.DataFrame:
    missing = int(table[signal].isna().sum())
    if missing:
        warnings.warn(
            f"{signal}: {missing} queries with a NaN score are left out", DegenerateInputWarning, stacklevel=3
        )
    return table[~table[signal].isna()]


def clopper_pearson(successes, trials, *, confidence: float = 0.95):
    """Exact (Clopper-Pearson) binomial interval, vectorised; NaN where ``trials`` is 0."""
    from scipy.stats import beta

    successes = np.asarray(successes, dtype=float)
    trials = np.asarray(trials, dtype=float)
    alpha = 1 - confidence
    with np.errstate(invalid="ignore", divide="ignore"):
        low = np.where(successes > 0, beta.ppf(alpha / 2, successes, trials - successes + 1), 0.0)
        high = np.where(successes < trials, beta.ppf(1 - alpha / 2, successes + 1, trials - successes), 1.0)
    empty = trials == 0
    return np.where(empty, np.nan, low), np.where(empty, np.nan, high)


def outcome_table(
    table: pd.DataFrame,
    signal: str,
    thresholds,
    *,
    higher_is_answerable: bool = True,
    intervals: bool = True,
    confidence: float = 0.95,
) -> pd.DataFrame:
    """Per-slice outcome of answering when the signal clears each threshold.

    Parameters
    ----------
    table : DataFrame
        Score table with ``answerable``, ``slice`` and ``signal``.
    signal : str
    thresholds : array-like of float
        A query is answered when ``score >= threshold`` (``<=`` when
        ``higher_is_answerable`` is False).
    intervals : bool, default=True
        Add exact binomial (Clopper-Pearson) bounds ``*_low`` and ``*_high``.

    Returns
    -------
    DataFrame
        One row per threshold, in the given order: ``threshold``;
        ``answerable_kept`` (share of answerable questions answered),
        ``<slice>_refused`` for each unanswerable slice and
        ``unanswerable_refused`` (all of them), each with ``_k`` (the count)
        and the group size ``<group>_n``.
    """
    table = _drop_nan(table, signal)
    thresholds = np.asarray(thresholds, dtype=float).reshape(-1)
    answerable = table["answerable"].to_numpy(dtype=bool)
    scores = table[signal].to_numpy(dtype=float)
    groups = [("answerable", "kept", answerable)]
    groups += [
        (slice_column(name), "refused", (table["slice"] == name).to_numpy() & ~answerable)
        for name in unanswerable_slices(table)
    ]
    groups.append(("unanswerable", "refused", ~answerable))
    columns = {"threshold": thresholds}
    for group, outcome, mask in groups:
        ordered = np.sort(scores[mask])
        if higher_is_answerable:
            answered = ordered.size - np.searchsorted(ordered, thresholds, side="left")
        else:
            answered = np.searchsorted(ordered, thresholds, side="right")
        count = answered if outcome == "kept" else ordered.size - answered
        name = f"{group}_{outcome}"
        with np.errstate(invalid="ignore", divide="ignore"):
            columns[name] = count / ordered.size if ordered.size else np.full(thresholds.size, np.nan)
        if intervals:
            columns[f"{name}_low"], columns[f"{name}_high"] = clopper_pearson(
                count, ordered.size, confidence=confidence
            )
        columns[f"{name}_k"] = count
        columns[f"{group}_n"] = np.full(thresholds.size, ordered.size)
    return pd.DataFrame(columns)


def sweep(
    table: pd.DataFrame, signal: str, *, grid=None, higher_is_answerable: bool = True, confidence: float = 0.95
) -> pd.DataFrame:
    """:func:`outcome_table` over a grid and over every distinct score.

    Parameters
    ----------
    grid : array-like of float, default=None
        Extra thresholds; 51 evenly spaced points from the lowest to the
        highest score when None.

    Returns
    -------
    DataFrame
        Sorted by threshold, with ``signal`` and ``source`` (``"grid"``,
        ``"score"`` or ``"grid+score"``) in front.
    """
    table = _drop_nan(table, signal)
    scores = table[signal].to_numpy(dtype=float)
    if scores.size == 0:
        raise ValueError(f"sweep: no finite {signal!r} scores")
    grid = np.linspace(scores.min(), scores.max(), 51) if grid is None else np.asarray(grid, dtype=float)
    distinct = np.unique(scores)
    thresholds = np.union1d(grid, distinct)
    source = np.where(np.isin(thresholds, grid), np.where(np.isin(thresholds, distinct), "grid+score", "grid"), "score")
    outcomes = outcome_table(
        table, signal, thresholds, higher_is_answerable=higher_is_answerable, confidence=confidence
    )
    outcomes.insert(0, "source", source)
    outcomes.insert(0, "signal", signal)
    return outcomes


def group_stats(table: pd.DataFrame, signals=None) -> pd.DataFrame:
    """Count, mean, median, min and max of each signal per slice (the published first table)."""
    signals = list(signals) if signals is not None else signal_columns(table)
    frames = [
        table.groupby("slice", sort=False)[signal]
        .agg(["count", "mean", "median", "min", "max"])
        .rename(columns={"count": "n"})
        .reset_index()
        .assign(signal=signal)
        for signal in signals
    ]
    stats = pd.concat(frames, ignore_index=True)
    return stats[["signal", "slice", "n", "mean", "median", "min", "max"]]


def auc_table(
    table: pd.DataFrame,
    signals=None,
    *,
    directions=None,
    n_resamples: int = 2000,
    confidence: float = 0.95,
    random_state=0,
) -> pd.DataFrame:
    """AUC with a stratified bootstrap interval for each signal and comparison.

    Comparisons: answerable vs all unanswerable, then answerable vs each
    unanswerable slice.

    Parameters
    ----------
    directions : dict of str to bool, default=None
        ``higher_is_answerable`` per signal; True when missing.

    Returns
    -------
    DataFrame
        ``signal, comparison, auc, ci_low, ci_high, n_answerable, n_unanswerable``.
        Degenerate cases (a constant signal) are NaN, with a
        :class:`DegenerateInputWarning`.
    """
    signals = list(signals) if signals is not None else signal_columns(table)
    directions = directions or {}
    comparisons = [("all unanswerable", ~table["answerable"].astype(bool))]
    comparisons += [(name, table["slice"] == name) for name in unanswerable_slices(table)]
    rows = []
    for signal in signals:
        for comparison, negative in comparisons:
            subset = _drop_nan(table[table["answerable"].astype(bool) | negative], signal)
            labels = subset["answerable"].to_numpy(dtype=bool)
            with warnings.catch_warnings(record=True) as caught:
                warnings.simplefilter("always", DegenerateInputWarning)
                auc, low, high = auc_with_ci(
                    labels,
                    subset[signal].to_numpy(dtype=float),
                    n_resamples=n_resamples,
                    confidence=confidence,
                    random_state=random_state,
                    higher_is_positive=directions.get(signal, True),
                )
            for warning in caught:
                warnings.warn(
                    f"{signal} (answerable vs {comparison}): {warning.message}", DegenerateInputWarning, stacklevel=2
                )
            rows.append(
                {
                    "signal": signal,
                    "comparison": comparison,
                    "auc": auc,
                    "ci_low": low,
                    "ci_high": high,
                    "n_answerable": int(labels.sum()),
                    "n_unanswerable": int((~labels).sum()),
                }
            )
    return pd.DataFrame(rows)
