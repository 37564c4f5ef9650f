"""Review sample design: which rows of a live score log to label, by decision and by distance to the bar.

Used as the first step of a review (see :mod:`ragcal.monitoring`)::

    sample = review_sample(gate, live_log, size=60, random_state=0)

The design
----------
Rows of the live log are split by the gate's decision (``answer``, ``hedge``,
``refuse``, from :meth:`Gate.decide_table`), and each decision by the row's
distance to the bar it was compared with (:func:`bar_distances`):

- threshold and learned gates: ``|score - threshold|`` for refusals,
  ``|score - hedge_below|`` for answers (``threshold`` without a hedge band),
  the nearer of the two for hedges;
- floor + gap: ``|floor_gap_order(top, second, min_gap) - floor|`` (the score
  whose threshold at ``floor`` is exactly the gate's decision);
- fallback chain: an answer or hedge is measured by the stage that gave it
  (that stage's gate, by the rules above); a refusal by the last stage, the
  broadest fallback, which it failed last.

Within each decision (and, for a chain, each stage, so that cosine and BM25
distances are never compared), the ``near`` stratum holds the
``near_fraction`` of rows closest to the bar (rows tied with the last of them
included; rows with no score, NaN, count as far); the rest is ``far``.
Strata are named ``<decision>/<near|far>``.

The sample is split equally between the decisions present (each is a
population of its own for the estimates), then ``near_share`` of a decision's
part goes to its near stratum. Every non-empty stratum gets at least
``min_per_stratum`` rows; a stratum smaller than its part is taken whole and
the rest goes to the others, in proportion to their targets (a highest-average
apportionment). Inside a stratum rows are drawn by simple random sampling
without replacement with a seeded :func:`numpy.random.default_rng`.
"""

from __future__ import annotations

import math

import numpy as np
import pandas as pd

from .._params import check_float, check_int, parameter_error

__all__ = ["allocate_strata", "bar_distances", "review_sample", "stratum_names"]


def bar_distances(gate, table: pd.DataFrame, decisions: pd.DataFrame | None = None) -> tuple[np.ndarray, np.ndarray]:
    """How far each row's score is from the bar the gate compared it with (see the module docstring).

    Parameters
    ----------
    gate : Gate
        A :class:`~ragcal.gates.ThresholdGate`, :class:`~ragcal.gates.LearnedGate`,
        :class:`~ragcal.gates.FloorGapGate` or :class:`~ragcal.gates.FallbackChain`.
    table : DataFrame
        With the gate's :attr:`~ragcal.gates.Gate.columns`.
    decisions : DataFrame, default=None
        ``gate.decide_table(table)``, when already computed.

    Returns
    -------
    distance : ndarray of shape (n_rows,)
        Non-negative; NaN where the row has no score.
    group : ndarray of shape (n_rows,), dtype object
        The scale each distance is on: None for a single gate, the deciding
        stage's name for a chain (the last stage's for refusals). Distances
        are compared only within a group.
    """
    from ..gates.chain import FallbackChain
    from ..gates.floor_gap import FloorGapGate, floor_gap_order
    from ..gates.learned import LearnedGate
    from ..gates.threshold import ThresholdGate

    decisions = gate.decide_table(table) if decisions is None else decisions
    action = decisions["action"].to_numpy(dtype=object)
    score = decisions["score"].to_numpy(dtype=float)
    group = np.full(len(table), None, dtype=object)
    if isinstance(gate, FallbackChain):
        distance = np.full(len(table), np.nan)
        stage = decisions["stage"].to_numpy(dtype=object)
        last = gate.stages[-1].name
        for candidate in gate.stages:
            rows = (stage == candidate.name) | ((action == "refuse") & (candidate.name == last))
            if rows.any():
                distance[rows] = bar_distances(candidate.gate, table)[0][rows]
                group[rows] = candidate.name
        return distance, group
    if isinstance(gate, FloorGapGate):
        top, second = (table[column].to_numpy(dtype=float) for column in gate.columns)
        return np.abs(floor_gap_order(top, second, gate.min_gap) - gate.floor), group
    if isinstance(gate, (ThresholdGate, LearnedGate)):
        to_threshold = np.abs(score - gate.threshold)
        if gate.hedge_below is None:
            return to_threshold, group
        to_hedge = np.abs(score - gate.hedge_below)
        distance = np.where(action == "answer", to_hedge, to_threshold)
        distance = np.where(action == "hedge", np.fmin(to_threshold, to_hedge), distance)
        return distance, group
    raise TypeError(
        f"bar_distances knows threshold, learned, floor_gap and chain gates; got a {type(gate).__name__} "
        f"(type {getattr(gate, 'type', '?')!r})"
    )


def _near_rows(distance: np.ndarray, near_fraction: float) -> np.ndarray:
    """True for the ``near_fraction`` of rows closest to the bar (ties with the last included; NaN is far)."""
    near = np.zeros(distance.shape, dtype=bool)
    finite = np.isfinite(distance)
    if not finite.any():
        return near
    count = max(1, math.ceil(near_fraction * int(finite.sum())))
    cutoff = np.sort(distance[finite])[count - 1]
    near[finite] = distance[finite] <= cutoff
    return near


def _allocate(sizes: np.ndarray, weights: np.ndarray, total: int, minimum: int) -> np.ndarray:
    """Integer sample sizes per stratum: at least ``minimum`` (capped by the size), the rest by highest averages.

    Each further unit goes to the stratum with room whose ``weight / (taken + 1)``
    is largest (D'Hondt), so a full stratum's share flows to the others in
    proportion to their weights. Ties go to the earlier stratum.
    """
    taken = np.minimum(sizes, minimum)
    while taken.sum() < total:
        room = taken < sizes
        priority = np.where(room, weights / (taken + 1), -np.inf)
        taken[int(np.argmax(priority))] += 1
    return taken


def stratum_names() -> tuple[str, ...]:
    """The strata of the design, in report order: ``answer/near``, ``answer/far``, ``hedge/near``, ..."""
    from ..gates.base import ACTIONS

    return tuple(f"{decision}/{band}" for decision in ACTIONS for band in ("near", "far"))


def allocate_strata(sizes, *, size: int, near_share: float, min_per_stratum: int,
                    function: str = "review_sample") -> np.ndarray:  # fmt: skip
    """Rows to draw from each stratum of :func:`stratum_names`, given their sizes (the module docstring's design).

    Parameters
    ----------
    sizes : array of int, one per name of :func:`stratum_names`
    size, near_share, min_per_stratum
        As for :func:`review_sample` (already checked).
    function : str, default="review_sample"
        How an error names the caller.

    Returns
    -------
    ndarray of int
        Rows to draw per stratum, in the order of ``sizes``; the total is ``min(size, sizes.sum())``.

    Raises
    ------
    ValueError
        ``size`` smaller than the number of non-empty strata.
    """
    names = stratum_names()
    sizes = np.asarray(sizes, dtype=np.int64)
    decisions = [name.split("/")[0] for name in names]
    present = {decision for decision, count in zip(decisions, sizes) if count}
    weights = np.array(
        [
            (near_share if name.endswith("/near") else 1 - near_share) / len(present) if count else 0.0
            for name, count in zip(names, sizes)
        ]
    )
    weights = np.where(sizes > 0, np.maximum(weights, 1e-12), 0.0)  # near_share 0 or 1: the minimum still applies
    total = min(size, int(sizes.sum()))
    if total < int((sizes > 0).sum()):
        raise parameter_error(
            "size",
            function,
            f"at least the number of non-empty strata ({int((sizes > 0).sum())}: "
            f"{', '.join(n for n, c in zip(names, sizes) if c)}) so that every stratum is represented",
            size,
        )
    return _allocate(sizes, weights, total, min(min_per_stratum, max(1, total // int((sizes > 0).sum()))))


def review_sample(
    gate,
    live: pd.DataFrame,
    *,
    size: int = 60,
    near_share: float = 0.5,
    near_fraction: float = 0.25,
    min_per_stratum: int = 2,
    random_state=0,
    source: str = "live log",
) -> pd.DataFrame:
    """Draw a stratified review sample of a live score log (the design of the module docstring).

    Parameters
    ----------
    gate : Gate
    live : DataFrame
        One row per logged question: ``query``, the gate's
        :attr:`~ragcal.gates.Gate.columns`, and ``id`` when it has one. No
        labels needed (any ``answerable``, ``slice`` or ``gold`` is not copied).
    size : int, default=60
        Rows to draw; the whole log when it has fewer.
    near_share : float in [0, 1], default=0.5
        Share of each decision's part of the sample that goes to its near stratum.
    near_fraction : float in (0, 1], default=0.25
        Share of each decision's rows (closest to the bar) that forms its near
        stratum. ``near_share > near_fraction`` oversamples the rows near the bar.
    min_per_stratum : int, default=2
        Rows drawn at least from every non-empty stratum (all of a smaller one).
    random_state : int or numpy.random.Generator, default=0
    source : str, default="live log"
        How messages name the log.

    Returns
    -------
    DataFrame
        One row per sampled question, in log order: :data:`REVIEW_COLUMNS`
        (``answerable``, ``slice`` and ``gold`` empty strings), then ``stage``,
        ``bar_distance``, ``log_row`` (0-based row of the log) and the gate's
        signal columns (kept so that :func:`refit_with_labels` needs no
        recomputation).

    Raises
    ------
    ValueError
        A missing ``query`` or signal column, duplicate ids, an empty log,
        bad parameters, or ``size`` smaller than the number of non-empty strata.
    """
    size = check_int(size, "size", "review_sample", low=1)
    min_per_stratum = check_int(min_per_stratum, "min_per_stratum", "review_sample", low=1)
    near_share = check_float(near_share, "near_share", "review_sample", low=0, high=1, low_open=False, high_open=False)
    near_fraction = check_float(near_fraction, "near_fraction", "review_sample", low=0, high=1, high_open=False)
    missing = [column for column in ("query", *gate.columns) if column not in live.columns]
    if missing:
        raise ValueError(
            f"{source}: missing column(s) {', '.join(map(repr, missing))}; have {', '.join(map(str, live.columns))}"
        )
    if live.empty:
        raise ValueError(f"{source}: no rows to sample")
    live = live.reset_index(drop=True)
    if "id" in live.columns:
        ids = live["id"].astype(str).str.strip()
        duplicated = ids[ids.duplicated()]
        if not duplicated.empty:
            line = int(duplicated.index[0]) + 2
            raise ValueError(f"{source}, line {line}, column 'id': duplicate id {duplicated.iloc[0]!r}")
    else:
        ids = pd.Series([f"live-{row + 1}" for row in range(len(live))])
    decisions = gate.decide_table(live)
    distance, group = bar_distances(gate, live, decisions)
    action = decisions["action"].to_numpy(dtype=object)
    near = np.zeros(len(live), dtype=bool)
    for key in pd.unique(pd.Series(list(zip(action, group)), dtype=object)):
        rows = np.array([(a, g) == key for a, g in zip(action, group)])
        near[rows] = _near_rows(distance[rows], near_fraction)
    stratum = np.array([f"{a}/{'near' if n else 'far'}" for a, n in zip(action, near)], dtype=object)

    names = list(stratum_names())
    sizes = np.array([int((stratum == name).sum()) for name in names])
    taken = allocate_strata(sizes, size=size, near_share=near_share, min_per_stratum=min_per_stratum)

    rng = np.random.default_rng(random_state)
    chosen = []
    for name, count in zip(names, taken):
        members = np.flatnonzero(stratum == name)
        if count:
            chosen.append(rng.choice(members, size=int(count), replace=False))
    rows = np.sort(np.concatenate(chosen)) if chosen else np.array([], dtype=int)
    counts = dict(zip(names, zip(sizes, taken)))
    sample = pd.DataFrame(
        {
            "id": ids.iloc[rows].to_numpy(dtype=object),
            "query": live["query"].iloc[rows].astype(str).to_numpy(dtype=object),
            "answerable": "",
            "slice": "",
            "gold": "",
            "decision": action[rows],
            "score": decisions["score"].to_numpy(dtype=float)[rows],
            "stratum": stratum[rows],
            "stratum_size": [int(counts[name][0]) for name in stratum[rows]],
            "stratum_sampled": [int(counts[name][1]) for name in stratum[rows]],
            "stage": decisions["stage"].to_numpy(dtype=object)[rows],
            "bar_distance": distance[rows],
            "log_row": rows,
        }
    )
    for column in gate.columns:
        sample[column] = live[column].to_numpy(dtype=float)[rows]
    return sample
