"""How many labels are enough: the threshold and its held-out outcome as the labeled set grows.

:func:`label_curve` measures it on questions left out of stratified subsamples;
:func:`kept_share_interval` gives the exact spread of the kept share of
``keep@p`` for exchangeable questions.
"""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
from scipy.stats import beta

from .._params import check_float, check_int, parameter_error
from ..metrics import drop_nan
from ..score_tables import check_score_table, slice_column, unanswerable_slices
from .rules import RULES, fit_rule, parse_rule

__all__ = ["label_curve", "kept_share_interval"]


def _stratum_counts(stratum_sizes: np.ndarray, sizes: np.ndarray) -> np.ndarray:
    """Questions each stratum gives to a subsample of each size: proportional, rounded by largest remainder.

    Returns an array of shape (len(sizes), len(stratum_sizes)) whose rows sum
    to ``sizes``; among equal remainders the earlier stratum rounds up.
    """
    exact = np.asarray(sizes, dtype=float)[:, None] * stratum_sizes[None, :] / stratum_sizes.sum()
    counts = np.floor(exact).astype(int)
    short = np.asarray(sizes) - counts.sum(axis=1)
    order = np.argsort(-(exact - counts), axis=1, kind="stable")
    rank = np.argsort(order, axis=1, kind="stable")
    return counts + (rank < short[:, None])


def _label_curve_sizes(sizes, stratum_sizes: np.ndarray, names: list) -> np.ndarray:
    """The subsample sizes of :func:`label_curve`, checked (or the default grid)."""
    total = int(stratum_sizes.sum())
    every = np.arange(1, total + 1)
    counts = _stratum_counts(stratum_sizes, every)
    valid = ((counts >= 1) & (counts <= stratum_sizes - 1)).all(axis=1)
    if not valid.any():
        raise ValueError(
            "label_curve: no subsample size keeps a question of every slice and leaves one of every slice held out; "
            f"the table has {dict(zip(names, stratum_sizes.tolist()))} questions per (slice, answerable)"
        )
    smallest, largest = int(every[valid][0]), int(every[valid][-1])
    if sizes is None:
        # Up to the published split (the subsample gets the larger half of every slice): beyond it the held-out
        # remainder is smaller than the subsample and the band measures the remainder's own noise.
        half = int(np.ceil(stratum_sizes / 2).sum())
        top = int(every[valid & (every <= half)][-1]) if (valid & (every <= half)).any() else largest
        grid = np.unique(np.round(np.geomspace(smallest, top, num=10)).astype(int))
        return grid[valid[grid - 1]]
    given, sizes = sizes, np.asarray(sizes)
    if sizes.ndim != 1 or sizes.size == 0 or not np.issubdtype(sizes.dtype, np.integer):
        raise parameter_error("sizes", "label_curve", "a non-empty list of integers", given)
    for size in np.unique(sizes):
        if size < smallest or size > largest or not valid[size - 1]:
            row = _stratum_counts(stratum_sizes, [max(int(size), 0)])[0]
            if size < 1 or (row < 1).any():
                stratum = names[int(np.argmax(row < 1))] if size >= 1 else names[0]
                problem = f"gives the {stratum} questions none in the subsample"
            else:
                stratum = names[int(np.argmax(row > stratum_sizes - 1))]
                problem = f"leaves none of the {stratum} questions held out"
            raise ValueError(
                f"label_curve: size {int(size)} {problem}; sizes must lie in [{smallest}, {largest}] for a table of "
                f"{total} questions (a subsample keeps the mix of every (slice, answerable) group and leaves at "
                "least one of each held out)"
            )
    return np.unique(sizes)


def label_curve(
    table: pd.DataFrame,
    signal: str,
    rule: str,
    *,
    sizes=None,
    n_repeats: int = 200,
    random_state: int = 0,
    higher_is_answerable: bool = True,
    confidence: float = 0.9,
    delta: float = 0.1,
) -> pd.DataFrame:
    """How the threshold and its held-out outcome settle as the labeled set grows.

    For each size, ``n_repeats`` subsamples of that many labeled questions are
    drawn, stratified so that each keeps the table's mix of slices (every
    (slice, answerable) group gives its proportional share, rounded by largest
    remainder). ``rule`` is fitted on the subsample (:func:`fit_rule`) and
    scored on every question left out of it.

    Parameters
    ----------
    table : DataFrame
        Score table with ``answerable``, ``slice`` and ``signal``. Rows with a
        NaN score are left out, with a
        :class:`~ragcal.metrics.DegenerateInputWarning`.
    signal : str
    rule : str
        A rule key as in :data:`RULES` (not one that needs support levels,
        which label_curve does not take).
    sizes : sequence of int, default=None
        Subsample sizes, in labeled questions (sorted, duplicates dropped).
        Each must give every group at least one question and leave at least
        one of every group held out, else a ``ValueError`` gives the allowed
        range. None: about ten sizes spaced geometrically from the smallest
        allowed to the published half split (the subsample takes the larger
        half of every slice). Larger sizes are allowed, but their held-out
        remainder is smaller than the subsample, so their band grows with the
        remainder's own noise.
    n_repeats : int, default=200
        Subsamples per size.
    random_state : int, default=0
        Size ``n`` draws from ``numpy.random.default_rng([random_state, n])``,
        so a row does not depend on the other sizes asked for.
    higher_is_answerable : bool, default=True
    confidence : float, default=0.9
        Width of the percentile band over repeats: the 5th to 95th percentile
        by default.
    delta : float, default=0.1
        1 - confidence of the guarantee rules, as for :func:`fit_threshold`.

    Returns
    -------
    DataFrame
        One row per size, in increasing order: ``size``; ``n_answerable`` and
        ``n_unanswerable`` in the subsample, ``n_heldout`` left out; the
        median over repeats of ``threshold``, ``answerable_kept`` (held-out
        share of answerable questions answered), ``<slice>_refused`` for each
        unanswerable slice and ``unanswerable_refused``, each with its
        percentile band ``<name>_low`` and ``<name>_high``; ``fallback``, the
        share of repeats where the rule could not be met (see
        :func:`fit_rule`). ``attrs`` holds ``signal``, ``rule``,
        ``n_repeats`` and ``confidence``.

    See Also
    --------
    heldout_outcomes : the same protocol at the half split, over many splits.
    kept_share_interval : the exact spread of the kept share of ``keep@p``.
    ragcal.plotting.LabelCurveDisplay : draws this table.

    Examples
    --------
    >>> table = read_score_table("results/fastapi/scores.csv", ["dense_top1"])  # doctest: +SKIP
    >>> label_curve(table, "dense_top1", "keep@0.95")[["size", "answerable_kept_low", "answerable_kept_high"]]
    ... # doctest: +SKIP
    """
    table = check_score_table(table, [signal], source="label_curve's table")
    name, _ = parse_rule(rule)
    if RULES[name].needs_support:
        raise ValueError(f"label_curve: {rule} needs support levels, which label_curve does not take; use another rule")
    n_repeats = check_int(n_repeats, "n_repeats", "label_curve", low=2)
    confidence = check_float(confidence, "confidence", "label_curve", low=0, high=1)
    table = drop_nan(table, signal).reset_index(drop=True)
    answerable = table["answerable"].to_numpy(dtype=bool)
    if answerable.all() or not answerable.any():
        kind = "answerable" if answerable.all() else "unanswerable"
        raise ValueError(
            f"label_curve: every one of the {len(table)} questions with a {signal!r} score is {kind}; the curve "
            "needs answerable and unanswerable questions"
        )
    scores = table[signal].to_numpy(dtype=float)
    slices = table["slice"].astype(str).to_numpy()
    strata = pd.MultiIndex.from_arrays([slices, answerable])
    codes, groups = pd.factorize(strata)
    members = [np.nonzero(codes == code)[0] for code in range(len(groups))]
    stratum_sizes = np.array([group.size for group in members])
    names = [
        f"slice {slice_name!r} ({'answerable' if is_answerable else 'unanswerable'})"
        for slice_name, is_answerable in groups
    ]
    sizes = _label_curve_sizes(sizes, stratum_sizes, names)

    measures = {"answerable_kept": (answerable, True)}
    for slice_name in unanswerable_slices(table):
        measures[f"{slice_column(slice_name)}_refused"] = ((slices == str(slice_name)) & ~answerable, False)
    measures["unanswerable_refused"] = (~answerable, False)
    low_q, high_q = (1 - confidence) / 2, (1 + confidence) / 2
    rows = []
    for size, counts in zip(sizes, _stratum_counts(stratum_sizes, sizes)):
        rng = np.random.default_rng([random_state, int(size)])
        chosen = np.zeros((n_repeats, len(table)), dtype=bool)
        for group, count in zip(members, counts):
            picks = np.argsort(rng.random((n_repeats, group.size)), axis=1)[:, :count]
            chosen[np.arange(n_repeats)[:, None], group[picks]] = True
        fitted = [
            fit_rule(rule, scores[mask], answerable[mask], higher_is_answerable=higher_is_answerable, delta=delta)
            for mask in chosen
        ]
        thresholds = np.array([threshold for threshold, _, _ in fitted])
        with np.errstate(invalid="ignore"):
            answered = scores >= thresholds[:, None] if higher_is_answerable else scores <= thresholds[:, None]
        heldout = ~chosen
        row = {
            "size": int(size),
            "n_answerable": int(answerable[chosen[0]].sum()),
            "n_unanswerable": int((~answerable[chosen[0]]).sum()),
            "n_heldout": int(heldout[0].sum()),
        }
        finite = thresholds[np.isfinite(thresholds)]
        row["threshold"], row["threshold_low"], row["threshold_high"] = (
            np.quantile(thresholds, [0.5, low_q, high_q], method="nearest")
            if finite.size < thresholds.size
            else np.quantile(thresholds, [0.5, low_q, high_q])
        )
        row["fallback"] = float(np.mean([fallback for _, fallback, _ in fitted]))
        for column, (group_mask, kept) in measures.items():
            outcome = answered if kept else ~answered
            share = (outcome & heldout & group_mask).sum(axis=1) / (heldout & group_mask).sum(axis=1)
            row[column], row[f"{column}_low"], row[f"{column}_high"] = np.quantile(share, [0.5, low_q, high_q])
        rows.append(row)
    curve = pd.DataFrame(rows)
    curve.attrs.update(signal=signal, rule=rule, n_repeats=int(n_repeats), confidence=float(confidence))
    return curve


def kept_share_interval(n_answerable: int, *, keep: float = 0.95, confidence: float = 0.9) -> tuple[float, float]:
    r"""Central interval of the kept share that ``keep@p`` fitted on ``n_answerable`` questions will deliver.

    ``keep@p`` puts the threshold at the j-th lowest answerable score, with
    :math:`j = n - \lceil p n \rceil + 1`. For exchangeable answerable
    questions with continuous scores, the share :math:`1 - F(s_{(j)})` of
    future answerable questions at or above it is distributed as
    :math:`\mathrm{Beta}(n - j + 1, j)` over the draw of the calibration set
    (the coverage distribution of split conformal prediction: Vovk, 2012,
    "Conditional validity of inductive conformal predictors", ACML;
    Angelopoulos and Bates, 2021, "A gentle introduction to conformal
    prediction", section 3.2). Ties only raise the kept share. The interval
    is about a threshold on the boundary score :math:`s_{(j)}`; the gate
    :func:`~ragcal.calibration.fit_threshold` fits sits midway below it
    (:func:`~ragcal.calibration.midway.midway_threshold`), so it keeps at
    least that share, and more when the gap to the next calibration score is
    wide (few labels). :func:`label_curve` measures the placed gate on
    held-out questions.

    Returns
    -------
    low, high : float
        The ``(1 - confidence) / 2`` and ``(1 + confidence) / 2`` quantiles.

    Examples
    --------
    >>> low, high = kept_share_interval(100, keep=0.95)
    >>> round(low, 3), round(high, 3)
    (0.898, 0.974)
    """
    n_answerable = check_int(n_answerable, "n_answerable", "kept_share_interval", low=1)
    keep = check_float(keep, "keep", "kept_share_interval", low=0, high=1, high_open=False)
    confidence = check_float(confidence, "confidence", "kept_share_interval", low=0, high=1)
    kept_count = math.ceil(keep * n_answerable - 1e-12)  # n - j + 1
    distribution = beta(kept_count, n_answerable - kept_count + 1)
    return float(distribution.ppf((1 - confidence) / 2)), float(distribution.ppf((1 + confidence) / 2))
