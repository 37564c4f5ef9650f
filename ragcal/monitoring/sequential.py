"""Exchangeability over time: conformal p-values, a jumper test martingale, and the test built on them.

When a live log has a ``timestamp`` column, :func:`~ragcal.monitoring.monitor`
runs an on-line test of exchangeability over time: a conformal test
martingale over the gate's score (:func:`conformal_p_values`,
:func:`jumper_martingale`, :func:`sequential_test`). It catches traffic that
changes part way through the log (a drift or a change point), which the
two-sample tests of :mod:`ragcal.monitoring.shift_tests` do not look for.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import pandas as pd

from .._params import check_float

__all__ = ["CALIBRATORS", "SequentialTest", "conformal_p_values", "jumper_martingale", "sequential_test"]


def conformal_p_values(scores, *, random_state=0, block: int = 512) -> np.ndarray:
    """Smoothed conformal p-values of a sequence, each point against the points before it.

    With the score itself as nonconformity, the p-value of point ``t``
    (counting from 1) is::

        p_t = (#{i <= t : z_i > z_t} + theta_t * #{i <= t : z_i == z_t}) / t

    with ``theta_t`` uniform on [0, 1). If the sequence is exchangeable, the
    p-values are independent and uniform on [0, 1] (Vovk, Gammerman & Shafer
    2005, *Algorithmic Learning in a Random World*, Theorem 8.2; Vovk,
    Nouretdinov & Gammerman 2003, "Testing exchangeability on-line", ICML).
    A late point that is unusually high gets a small p-value, an unusually low
    one a p-value near 1.

    Parameters
    ----------
    scores : array-like of float
        In time order, without NaN.
    random_state : int or numpy.random.Generator, default=0
        Draws ``theta``.
    block : int, default=512
        Points compared at once: O(n log n + n * block) time, O(block**2)
        memory.

    Returns
    -------
    ndarray of float, shape (n,)
    """
    scores = np.asarray(scores, dtype=float)
    if scores.ndim != 1:
        raise ValueError(f"conformal_p_values: expected a 1-D sequence of scores, got shape {scores.shape}")
    if np.isnan(scores).any():
        raise ValueError("conformal_p_values: scores contain NaN; drop them first")
    rng = np.random.default_rng(random_state)
    theta = rng.random(scores.size)
    greater = np.empty(scores.size)
    equal = np.empty(scores.size)
    earlier = np.empty(0)  # the points before the current block, sorted
    for start in range(0, scores.size, block):
        current = scores[start:start + block]
        left = np.searchsorted(earlier, current, side="left")
        right = np.searchsorted(earlier, current, side="right")
        up_to_self = np.tril(np.ones((current.size, current.size), dtype=bool))  # [t, i]: i <= t
        greater[start:start + current.size] = (earlier.size - right) + (
            (current[None, :] > current[:, None]) & up_to_self
        ).sum(axis=1)
        equal[start:start + current.size] = (right - left) + (
            (current[None, :] == current[:, None]) & up_to_self
        ).sum(axis=1)
        ordered = np.sort(current)
        earlier = np.insert(earlier, np.searchsorted(earlier, ordered), ordered)
    return (greater + theta * equal) / np.arange(1, scores.size + 1)


#: Betting functions of :func:`jumper_martingale`: each maps a p-value to a factor, and integrates to 1 over [0, 1].
CALIBRATORS = {
    "none": lambda p: np.ones_like(p),
    "low": lambda p: 1.5 - p,  # Vovk's eps = -1: a late point unusually high
    "high": lambda p: 0.5 + p,  # eps = +1: unusually low
    "middle": lambda p: 2 - 4 * np.abs(p - 0.5),  # late points bunched in the middle of the earlier ones
    "tails": lambda p: 4 * np.abs(p - 0.5),  # late points more spread out than the earlier ones
}


def jumper_martingale(p_values, *, jump: float = 0.03) -> np.ndarray:
    """A jumper conformal test martingale over a sequence of p-values (Vovk's Simple Jumper, more calibrators).

    Several betting functions (:data:`CALIBRATORS`) share the capital; after
    each p-value every one multiplies its share by its factor, and before each
    a share ``jump`` of the whole capital is spread evenly over all of them
    again, so that the capital follows a change that comes late. This is
    Vovk's Simple Jumper (Vovk 2021, "Testing randomness online", *Statistical
    Science* 36(4), 595-611, Algorithm 1), whose calibrators
    ``1 + eps * (p - 1/2)``, ``eps`` in -1, 0, 1 detect a shift of the score
    up or down, with two more, ``2 - 4|p - 1/2|`` and ``4|p - 1/2|``, that
    detect a change of spread: near-domain questions, whose scores sit between
    the answerable and the unrelated ones, give p-values bunched around 1/2.
    Each calibrator integrates to 1 over [0, 1], so when the p-values are
    independent and uniform (:func:`conformal_p_values` of an exchangeable
    sequence) the capital is a nonnegative martingale starting at 1, and by
    Ville's inequality ``P(sup_t M_t >= 1/alpha) <= alpha``.

    Parameters
    ----------
    p_values : array-like of float in [0, 1]
    jump : float, default=0.03
        Vovk's J (his examples use 0.01; 0.03 followed a change half-way through a log of 140 rows better, see
        docs/monitoring.md).

    Returns
    -------
    ndarray of float, shape (n,)
        The capital ``M_t`` after each p-value.
    """
    p_values = np.asarray(p_values, dtype=float)
    jump = check_float(jump, "jump", "jumper_martingale", low=0, high=1, low_open=False, high_open=False)
    if p_values.size and (np.isnan(p_values).any() or p_values.min() < 0 or p_values.max() > 1):
        raise ValueError("jumper_martingale: p-values must be in [0, 1]")
    bets = np.column_stack([calibrator(p_values) for calibrator in CALIBRATORS.values()])  # (n, strategies)
    capital = np.full(bets.shape[1], 1 / bets.shape[1])
    path = np.empty(p_values.size)
    log_scale = 0.0  # the shares are kept summing to 1 and the log of the total apart, so long logs never underflow
    for step, bet in enumerate(bets):
        capital = ((1 - jump) * capital + jump / capital.size) * bet
        total = capital.sum()
        log_scale += np.log(total) if total > 0 else -np.inf
        capital = capital / total if total > 0 else capital
        path[step] = np.exp(log_scale)
    return path


@dataclass(frozen=True)
class SequentialTest:
    """The exchangeability check over time of :func:`sequential_test`.

    Attributes
    ----------
    n : int
        Rows tested (those with a score).
    dropped_nan : int
        Rows left out because the gate's score was NaN.
    martingale_max : float
        ``sup_t M_t`` of the Simple Jumper martingale.
    p_value : float
        ``min(1, 1 / martingale_max)``, a valid p-value by Ville's inequality.
    bar : float
        The capital at which it fires, ``1 / alpha``.
    crossed_at : pandas.Timestamp or None
        Timestamp of the first row where the capital reached ``bar``.
    crossed_row : int or None
        Position of that row in time order (from 0).
    martingale : ndarray
        The capital after each row, in time order.
    """

    n: int
    dropped_nan: int
    martingale_max: float
    p_value: float
    bar: float
    crossed_at: object = None
    crossed_row: int | None = None
    martingale: np.ndarray = field(default=None, repr=False, compare=False)


def sequential_test(scores, timestamps, *, alpha: float = 0.05, random_state=0, jump: float = 0.03) -> SequentialTest:
    """Test whether the scores of a live log are exchangeable over time (no drift, no change point).

    The rows are put in time order (stable: rows with the same timestamp keep
    the file's order), rows with a NaN score are dropped, and the scores go
    through :func:`conformal_p_values` and :func:`jumper_martingale`.
    Under exchangeability the chance that the capital ever reaches
    ``1 / alpha`` is at most ``alpha`` (Ville's inequality), however long the
    log, so looking at it after every row is allowed.

    Parameters
    ----------
    scores : array-like of float
        The gate's score per row (``score`` of :meth:`~ragcal.gates.Gate.decide_table`).
    timestamps : array-like of datetimes
    alpha : float, default=0.05
        Where ``bar`` (``1 / alpha``) is set; ``crossed_at`` refers to it.
    random_state : int or numpy.random.Generator, default=0
    jump : float, default=0.03

    Returns
    -------
    SequentialTest
    """
    scores = np.asarray(scores, dtype=float)
    timestamps = pd.Series(pd.to_datetime(pd.Series(timestamps)), copy=False).reset_index(drop=True)
    if len(timestamps) != scores.size:
        raise ValueError(f"sequential_test: {scores.size} scores but {len(timestamps)} timestamps")
    order = np.argsort(timestamps.to_numpy(), kind="stable")
    scores, timestamps = scores[order], timestamps.iloc[order].reset_index(drop=True)
    kept = ~np.isnan(scores)
    scores, timestamps = scores[kept], timestamps[kept].reset_index(drop=True)
    path = jumper_martingale(conformal_p_values(scores, random_state=random_state), jump=jump)
    largest = float(path.max()) if path.size else 1.0
    alpha = check_float(alpha, "alpha", "sequential_test", low=0, high=1)
    bar = 1 / alpha
    crossed = np.flatnonzero(path >= bar)
    first = int(crossed[0]) if crossed.size else None
    return SequentialTest(
        n=int(scores.size),
        dropped_nan=int((~kept).sum()),
        martingale_max=largest,
        p_value=min(1.0, 1 / max(largest, 1e-300)),
        bar=bar,
        crossed_at=None if first is None else timestamps.iloc[first],
        crossed_row=first,
        martingale=path,
    )
