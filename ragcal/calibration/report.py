"""Everything ``ragcal calibrate`` shows for one signal of a score table, as plain tables (:class:`Calibration`)."""

from __future__ import annotations

from dataclasses import dataclass

import pandas as pd

from ..metrics import auc_table, group_stats, outcome_table, sweep
from .heldout import heldout_outcomes
from .rules import fit_rule, parse_rule

__all__ = ["Calibration", "calibrate"]


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
        See :func:`ragcal.metrics.auc.auc_interval`.
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
