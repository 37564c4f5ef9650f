"""Per-slice outcomes of answering above a threshold: shares with exact intervals, sweeps, group statistics."""

from __future__ import annotations

import numpy as np
import pandas as pd

from ..score_tables import signal_columns, slice_column, unanswerable_slices
from ._common import drop_nan

__all__ = ["clopper_pearson", "group_stats", "outcome_table", "slice_summary", "sweep", "sweep_thresholds"]


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
    table = drop_nan(table, signal)
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
    table: pd.DataFrame,
    signal: str,
    *,
    grid=None,
    thresholds=(),
    higher_is_answerable: bool = True,
    confidence: float = 0.95,
    every_score_limit: int | None = None,
    grid_points: int = 1001,
) -> pd.DataFrame:
    """:func:`outcome_table` over a grid and over every distinct score, sized for tables of any length.

    Parameters
    ----------
    grid : array-like of float, default=None
        Extra thresholds; 51 evenly spaced points from the lowest to the
        highest score when None.
    thresholds : array-like of float, default=()
        Thresholds that must appear (e.g. fitted ones); those not already
        swept get ``source`` ``"rule"``. Non-finite ones are left out.
    every_score_limit : int or None, default=None
        For large tables (score logs): with more distinct scores than this,
        the sweep is ``grid_points`` evenly spaced thresholds plus
        ``thresholds`` instead of every distinct score. None never limits.
    grid_points : int, default=1001
        Size of that grid.

    Returns
    -------
    DataFrame
        Sorted by threshold, with ``signal`` and ``source`` (``"grid"``,
        ``"score"``, ``"grid+score"`` or ``"rule"``) in front. Every count is
        exact. ``attrs["scheme"]`` says which thresholds were swept.
    """
    table = drop_nan(table, signal)
    scores = table[signal].to_numpy(dtype=float)
    if scores.size == 0:
        raise ValueError(f"sweep: no finite {signal!r} scores")
    chosen, source, scheme = sweep_thresholds(
        np.unique(scores), thresholds, grid=grid, every_score_limit=every_score_limit, grid_points=grid_points
    )
    outcomes = outcome_table(table, signal, chosen, higher_is_answerable=higher_is_answerable, confidence=confidence)
    outcomes.insert(0, "source", source)
    outcomes.insert(0, "signal", signal)
    outcomes.attrs["scheme"] = scheme
    return outcomes


def sweep_thresholds(distinct, thresholds=(), *, grid=None, every_score_limit=None, grid_points: int = 1001):
    """The thresholds :func:`sweep` visits, given the sorted distinct scores: ``(chosen, source, scheme)``.

    Shared with the sweep from a log's counts (:mod:`ragcal.logs.calibration_counts`).
    """
    distinct = np.asarray(distinct, dtype=float)
    low, high = distinct[0], distinct[-1]
    extra = np.asarray(thresholds, dtype=float).reshape(-1)
    extra = extra[np.isfinite(extra)]
    if every_score_limit is not None and distinct.size > every_score_limit:
        chosen = np.union1d(np.linspace(low, high, grid_points), extra)
        source = np.where(np.isin(chosen, extra), "rule", "grid")
        scheme = (
            f"grid of {grid_points} + rule thresholds ({distinct.size} distinct scores > every_score_limit "
            f"{every_score_limit})"
        )
    else:
        grid = np.linspace(low, high, 51) if grid is None else np.asarray(grid, dtype=float)
        swept = np.union1d(grid, distinct)
        chosen = np.union1d(swept, extra)  # a rule threshold the sweep already has keeps its grid / score label
        source = np.select(
            [~np.isin(chosen, swept), np.isin(chosen, grid) & np.isin(chosen, distinct), np.isin(chosen, grid)],
            ["rule", "grid+score", "grid"],
            "score",
        )
        scheme = "every distinct score"
    return chosen, source, scheme


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


def slice_summary(table: pd.DataFrame, signal: str) -> pd.DataFrame:
    """Count, median, min and max of one signal per slice, rounded to 3 decimals (what ``ragcal score`` prints)."""
    summary = table.groupby("slice", sort=False)[signal].describe()[["count", "50%", "min", "max"]]
    return summary.rename(columns={"50%": "median"}).round(3).astype({"count": int})  # describe() counts in floats
