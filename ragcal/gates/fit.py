"""Fitting gates on a calibration table (never on the rows they are evaluated on).

Every fit takes a score table (``answerable``, ``slice`` and signal columns,
as from :func:`ragcal.scoring.score_table`) and returns a gate. The held-out
evaluation in :mod:`ragcal.gates.evaluate` calls these on one half of every
slice and scores the result on the other half.
"""

from __future__ import annotations

import math

import numpy as np
import pandas as pd

from ..calibration.midway import midway_threshold
from ..calibration.rules import fit_threshold, keep_share
from ..score_tables import check_score_table, slice_column, unanswerable_slices
from ..signals import get_signal
from .chain import DEFAULT_CHAIN_COLUMNS, fit_default_chain
from .floor_gap import FloorGapGate, floor_gap_answers, floor_gap_columns
from .learned import DEFAULT_LEARNED_SIGNALS, fit_learned_gate
from .threshold import ThresholdGate, zero_means_no_match

__all__ = [
    "retriever_features",
    "fit_threshold_gate",
    "floor_gap_sweep",
    "fit_floor_gap_gate",
    "place_floor_gap",
    "GATE_FITTERS",
    "gate_kinds",
    "gate_columns",
    "fit_gate",
]


def retriever_features(retrieved: dict) -> pd.DataFrame:
    """Top and second score of every retriever, one row per query.

    Columns ``<retriever>_top1`` and ``<retriever>_top2`` (NaN when the
    retriever returned fewer hits), which is what :class:`FloorGapGate`
    reads in :meth:`~FloorGapGate.decide_table`; for ``dense`` they equal the
    ``dense_top1`` and ``dense_top2`` signals.
    """
    columns = {}
    for name, results in retrieved.items():
        top, second = floor_gap_columns(name)
        columns[top] = [result.score_at(1) for result in results]
        columns[second] = [result.score_at(2) for result in results]
    return pd.DataFrame(columns, dtype=float)


def fit_threshold_gate(
    table: pd.DataFrame,
    signal: str,
    rule: str,
    *,
    hedge_rule: str | None = None,
    higher_is_answerable: bool | None = None,
    delta: float = 0.1,
    support=None,
    **gate_options,
) -> ThresholdGate:
    """A :class:`ThresholdGate` whose threshold is ``rule`` fitted on ``table``.

    Parameters
    ----------
    table : DataFrame
        Calibration score table.
    signal : str
        A registered signal and a column of ``table``.
    rule : str
        Any rule of :data:`ragcal.calibration.RULES`, e.g. ``"keep@0.95"``.
    hedge_rule : str, default=None
        A second, stricter rule for the hedge band, e.g. ``"keep@0.8"``.
    higher_is_answerable : bool, default=None
        The registry's direction for the signal when None.
    delta : float, default=0.1
        For the guarantee rules.
    support : array-like of float, default=None
        Support levels per row (:func:`ragcal.gates.support.signal_support`),
        for ``risk_guarantee@`` and ``unsupported_guarantee@``.
    **gate_options
        Passed to :class:`ThresholdGate` (``passages_from``, ``max_passages``, ...).
    """
    table = check_score_table(table, [signal])
    higher = get_signal(signal).higher_is_answerable if higher_is_answerable is None else higher_is_answerable
    scores, answerable = table[signal], table["answerable"]
    threshold = fit_threshold(rule, scores, answerable, higher_is_answerable=higher, delta=delta, support=support)
    if zero_means_no_match(signal) and higher:
        # BM25's top score is 0 when nothing matched: a gate must at least need one match.
        threshold = max(threshold, np.nextafter(0.0, 1.0))
    hedge_below = None
    if hedge_rule is not None:
        hedge = fit_threshold(hedge_rule, scores, answerable, higher_is_answerable=higher, delta=delta)
        hedge_below = max(hedge, threshold) if higher else min(hedge, threshold)
    return ThresholdGate(signal, threshold, higher_is_answerable=higher, hedge_below=hedge_below, **gate_options)


def _grid(values, n):
    values = values[np.isfinite(values)]
    if values.size == 0:
        raise ValueError("floor_gap_sweep: no finite scores to build a grid from")
    low, high = np.quantile(values, [0.0, 1.0])
    return np.linspace(low, high, n)


def floor_gap_sweep(
    table: pd.DataFrame, *, retriever: str = "dense", floors=None, gaps=None, n_floors: int = 61, n_gaps: int = 41
) -> pd.DataFrame:
    """Per-slice outcome of :class:`FloorGapGate` over a grid of floors and minimum gaps.

    Parameters
    ----------
    table : DataFrame
        With ``answerable``, ``slice`` and the two columns of
        :func:`floor_gap_columns` for ``retriever``.
    floors, gaps : array-like of float, default=None
        When None, ``n_floors`` evenly spaced floors over the range of top
        scores and ``n_gaps`` minimum gaps from 0 to the largest top-second gap.

    Returns
    -------
    DataFrame
        One row per (floor, min_gap): ``answerable_kept``,
        ``<slice>_refused`` per unanswerable slice and ``unanswerable_refused``,
        each with ``_k`` (count) and ``_n``.
    """
    top_column, second_column = floor_gap_columns(retriever)
    table = check_score_table(table, [top_column, second_column])
    top = table[top_column].to_numpy(dtype=float)
    second = table[second_column].to_numpy(dtype=float)
    floors = _grid(top, n_floors) if floors is None else np.asarray(floors, dtype=float)
    if gaps is None:
        gaps = np.linspace(0.0, max(float(np.nanmax(top - second, initial=0.0)), 0.0), n_gaps)
    gaps = np.asarray(gaps, dtype=float)
    answers = floor_gap_answers(top[None, None, :], second[None, None, :], floors[:, None, None], gaps[None, :, None])
    answerable = table["answerable"].to_numpy(dtype=bool)
    grid_floor, grid_gap = np.meshgrid(floors, gaps, indexing="ij")
    columns = {"floor": grid_floor.ravel(), "min_gap": grid_gap.ravel()}
    groups = [("answerable", "kept", answerable)]
    groups += [
        (slice_column(name), "refused", (table["slice"] == name).to_numpy() & ~answerable)
        for name in unanswerable_slices(table)
    ]
    groups.append(("unanswerable", "refused", ~answerable))
    for group, outcome, mask in groups:
        answered = answers[:, :, mask].sum(axis=2).ravel()
        count = answered if outcome == "kept" else mask.sum() - answered
        with np.errstate(invalid="ignore", divide="ignore"):
            columns[f"{group}_{outcome}"] = count / mask.sum() if mask.sum() else np.full(count.shape, np.nan)
        columns[f"{group}_{outcome}_k"] = count
        columns[f"{group}_n"] = np.full(count.shape, mask.sum())
    return pd.DataFrame(columns)


def fit_floor_gap_gate(
    table: pd.DataFrame, *, rule: str = "keep@0.95", retriever: str = "dense", max_passages: int | None = 10
) -> FloorGapGate:
    """The :class:`FloorGapGate` that refuses most unanswerable questions while keeping a share of answerable ones.

    A 2-D search over every candidate floor (each distinct top score) and
    minimum gap (0 and each distinct top-second gap): among the pairs that
    answer at least a share ``p`` of the answerable questions (``rule`` is
    ``keep@p``), take the one that refuses the most unanswerable questions;
    ties go to more answerable questions kept, then the smaller gap, then the
    higher floor. It is an empirical optimum on the calibration table, with
    no finite-sample guarantee.

    Neither parameter is left on a calibration value (:func:`place_floor_gap`):
    the floor goes midway between the chosen top score and the next top or
    second score below it, the gap midway between the chosen gap and the next
    top-second gap above it, so the calibration decisions are unchanged.
    """
    keep = keep_share(rule, "fit_floor_gap_gate")
    top_column, second_column = floor_gap_columns(retriever)
    table = check_score_table(table, [top_column, second_column])
    # Questions with no hit (NaN top score) are refused by any floor; like fit_threshold, the share is of the rest.
    table = table[~table[top_column].isna()]
    top = table[top_column].to_numpy(dtype=float)
    second = table[second_column].to_numpy(dtype=float)
    answerable = table["answerable"].to_numpy(dtype=bool)
    if not answerable.any():
        raise ValueError(
            f"fit_floor_gap_gate needs at least one answerable calibration question with a {retriever} hit; got none"
        )
    floors = np.unique(top[np.isfinite(top)])
    gaps = np.unique(np.concatenate([[0.0], (top - second)[np.isfinite(top - second)]]))
    kept, refused = floor_gap_counts(top, second, answerable, floors, gaps)
    feasible = kept >= math.ceil(keep * answerable.sum() - 1e-12)
    floor_index, gap_index = np.nonzero(feasible)
    order = np.lexsort(
        (-floors[floor_index], gaps[gap_index], -kept[floor_index, gap_index], -refused[floor_index, gap_index])
    )
    best = order[0]
    floor, gap = place_floor_gap(float(floors[floor_index[best]]), float(gaps[gap_index[best]]), top, second)
    return FloorGapGate(floor, gap, retriever=retriever, max_passages=max_passages)


def floor_gap_counts(top, second, answerable, floors, gaps):
    """Answerable questions kept and unanswerable ones refused by :class:`FloorGapGate` at every (floor, gap).

    The counts of ``floor_gap_answers`` over the whole grid, without the
    (floors, gaps, questions) array: at a fixed gap each question is
    answered exactly when its :func:`~ragcal.gates.floor_gap.floor_gap_order`
    level is at least the floor (for a top score that does not stand out,
    the gate needs both scores to clear the floor), so one sort per gap
    counts every floor.

    Parameters
    ----------
    top, second : ndarray of float, shape (n,)
        No NaN top score (a question without hits is refused by every floor).
    answerable : ndarray of bool, shape (n,)
    floors, gaps : ndarray of float

    Returns
    -------
    kept, refused : ndarray of int, shape (len(floors), len(gaps))
    """
    with np.errstate(invalid="ignore"):
        stands_out = np.isnan(second)[None, :] | ((top - second)[None, :] > gaps[:, None])
        levels = np.where(stands_out, top[None, :], np.minimum(top, second)[None, :])
    kept = np.empty((floors.size, gaps.size), dtype=np.intp)
    refused = np.empty((floors.size, gaps.size), dtype=np.intp)
    for column, level in enumerate(levels):
        for counts, mask, answered_counts in ((kept, answerable, True), (refused, ~answerable, False)):
            ordered = np.sort(level[mask])
            answered = ordered.size - np.searchsorted(ordered, floors, side="left")
            counts[:, column] = answered if answered_counts else ordered.size - answered
    return kept, refused


def place_floor_gap(floor: float, min_gap: float, top, second, *, levels=None) -> tuple[float, float]:
    """Move a fitted (floor, min_gap) off the calibration values, keeping every calibration decision.

    A :class:`FloorGapGate` compares the floor with the top and second scores
    (``>=``) and the gap with ``top - second`` (strictly ``>``). The floor is
    placed by :func:`ragcal.calibration.midway_threshold` among the top and
    second scores (and the support ``levels``, which the floor also cuts
    passages at); the gap, whose answering side is *above* it (``gap >
    min_gap``), midway between it and the next observed gap above
    (``higher_is_answerable=False``). A gap that is not an observed one (the
    grid's 0, say) stays.

    Parameters
    ----------
    floor, min_gap : float
    top, second : array-like of float
        Calibration top and second scores (NaN: no such hit, ignored).
    levels : array-like of float, default=None
        Support levels (:func:`ragcal.gates.support.support_levels`).

    Returns
    -------
    floor, min_gap : float
    """
    top, second = np.asarray(top, dtype=float), np.asarray(second, dtype=float)
    compared = [top, second] + ([] if levels is None else [np.asarray(levels, dtype=float).reshape(-1)])
    floor = midway_threshold(floor, np.concatenate(compared))
    min_gap = midway_threshold(min_gap, top - second, higher_is_answerable=False)
    return floor, min_gap


def _fit_threshold_kind(table, rule, *, signal, hedge_rule, higher_is_answerable, delta, max_passages, support, **_):
    return fit_threshold_gate(
        table,
        signal,
        rule,
        hedge_rule=hedge_rule,
        higher_is_answerable=higher_is_answerable,
        delta=delta,
        max_passages=max_passages,
        support=support,
    )


def _fit_floor_gap_kind(table, rule, *, retriever, max_passages, **_):
    return fit_floor_gap_gate(table, rule=rule, retriever=retriever, max_passages=max_passages)


def _fit_chain_kind(table, rule, *, delta, max_passages, use_reranker, **_):
    return fit_default_chain(table, rule=rule, delta=delta, max_passages=max_passages, use_reranker=use_reranker)


def _fit_learned_kind(table, rule, *, signals, hedge_rule, delta, max_passages, **_):
    return fit_learned_gate(
        table,
        rule,
        signals=DEFAULT_LEARNED_SIGNALS if signals is None else signals,
        hedge_rule=hedge_rule,
        delta=delta,
        max_passages=max_passages,
    )


#: Gate type (the ``type`` of :data:`ragcal.gates.base.GATE_TYPES`) -> (fit function, score-table columns it needs).
GATE_FITTERS = {
    "threshold": (_fit_threshold_kind, lambda options: [options["signal"]]),
    "floor_gap": (_fit_floor_gap_kind, lambda options: list(floor_gap_columns(options["retriever"]))),
    "chain": (_fit_chain_kind, lambda options: list(DEFAULT_CHAIN_COLUMNS)),
    "learned": (
        _fit_learned_kind,
        lambda options: list(DEFAULT_LEARNED_SIGNALS if options["signals"] is None else options["signals"]),
    ),
}


def gate_kinds() -> tuple[str, ...]:
    """The gate types that can be fitted from a score table: every registered gate type (tested to agree)."""
    from .base import GATE_TYPES

    return tuple(kind for kind in GATE_TYPES if kind in GATE_FITTERS)


def _gate_options(options: dict) -> dict:
    defaults = {
        "signal": "dense_top1",
        "signals": None,
        "hedge_rule": None,
        "higher_is_answerable": None,
        "delta": 0.1,
        "max_passages": 10,
        "retriever": "dense",
        "use_reranker": None,
        "support": None,
    }
    unknown = sorted(set(options) - set(defaults))
    if unknown:
        raise TypeError(f"fit_gate got unexpected option(s) {', '.join(unknown)}; known: {', '.join(defaults)}")
    return {**defaults, **options}


def gate_columns(kind: str, **options) -> list[str]:
    """Score-table columns that :func:`fit_gate` of ``kind`` with these options reads."""
    if kind not in GATE_FITTERS:
        raise ValueError(f"unknown gate kind {kind!r}; known kinds are {', '.join(gate_kinds())}")
    return GATE_FITTERS[kind][1](_gate_options(options))


def fit_gate(table: pd.DataFrame, kind: str = "threshold", rule: str = "keep@0.95", **options):
    """Fit a gate of any registered kind on a score table.

    Parameters
    ----------
    table : DataFrame
        Score table with the columns :func:`gate_columns` names.
    kind : str, default="threshold"
        A gate type: ``threshold``, ``floor_gap``, ``chain`` or ``learned``
        (:func:`gate_kinds`).
    rule : str, default="keep@0.95"
    **options
        ``signal`` (threshold), ``signals`` (learned), ``hedge_rule``,
        ``higher_is_answerable``, ``delta``, ``max_passages``, ``retriever``
        (floor + gap), ``use_reranker`` (chain); see the kind's own fit
        function.

    Returns
    -------
    Gate
    """
    if kind not in GATE_FITTERS:
        raise ValueError(f"unknown gate kind {kind!r}; known kinds are {', '.join(gate_kinds())}")
    return GATE_FITTERS[kind][0](table, rule, **_gate_options(options))


def fit_floor_gap(*args, **kwargs):
    """Deprecated name of :func:`fit_floor_gap_gate` (``fit_<kind>_gate``, as ``fit_threshold_gate``)."""
    import warnings

    warnings.warn("fit_floor_gap is deprecated: call fit_floor_gap_gate", DeprecationWarning, stacklevel=2)
    return fit_floor_gap_gate(*args, **kwargs)
