"""The held-out protocol: fit each rule on one half of every slice, score it on the other half, over many splits.

A threshold fitted and scored on the same questions flatters itself. Here every
split gives ceil(n / 2) questions of each slice to calibration and the rest to
evaluation; :func:`summarize_heldout` gives the spread over splits, and
:func:`fallback_notes` says where a rule could not be met.

Questions that are not independent (many questions about one paragraph or one
article, as in SQuAD) must not be split one by one: a threshold fitted on some
questions about an article and scored on the others flatters itself too.
:func:`split_by_group` and :func:`group_splits` give whole groups to one side,
and ``heldout_outcomes(..., splits=...)`` takes such splits.
"""

from __future__ import annotations

import itertools
import math

import numpy as np
import pandas as pd

from ..metrics import outcome_table
from ..progress import LONG_LOOP, progress
from .rules import fit_rule, parse_rule

__all__ = [
    "split_by_slice",
    "split_by_group",
    "group_splits",
    "heldout_outcomes",
    "summarize_heldout",
    "fallback_notes",
]


def split_by_slice(slices, *, random_state=0) -> np.ndarray:
    """Calibration mask that splits every slice in half at random.

    A slice of n queries gives ceil(n / 2) to calibration and floor(n / 2) to
    evaluation (the published split: 15 + 15 answerable, 8 + 7 per
    unanswerable slice).
    """
    slices = np.asarray(slices)
    rng = np.random.default_rng(random_state)
    calibration = np.zeros(slices.size, dtype=bool)
    for name in pd.unique(slices):
        members = np.nonzero(slices == name)[0]
        chosen = rng.permutation(members)[: math.ceil(members.size / 2)]
        calibration[chosen] = True
    return calibration


def split_by_group(groups, *, random_state=0) -> np.ndarray:
    """Calibration mask that gives ceil(g / 2) of the g groups, chosen at random, to calibration.

    Every row of a group is on the same side, so no group is on both.

    Parameters
    ----------
    groups : array-like
        One label per row (e.g. the article of each question).
    random_state : int, default=0

    Examples
    --------
    >>> split_by_group(["a", "a", "b", "c"], random_state=0).tolist()
    [True, True, False, True]
    """
    groups = np.asarray(groups)
    names = pd.unique(groups)
    rng = np.random.default_rng(random_state)
    chosen = rng.permutation(len(names))[: math.ceil(len(names) / 2)]
    return np.isin(groups, names[chosen])


def group_splits(groups, *, max_splits: int | None = None, random_state=0) -> list[np.ndarray]:
    """Every way to give ceil(g / 2) of the g groups to calibration, as calibration masks.

    With g groups there are C(g, ceil(g / 2)) splits (70 for 8 groups); each
    is a boolean mask over the rows, True for the calibration side, with every
    row of a group on the same side. Groups are taken in order of first
    appearance, splits in lexicographic order of the calibration groups.

    Parameters
    ----------
    groups : array-like
        One label per row; at least two distinct groups.
    max_splits : int, default=None
        When there are more splits than this, a seeded random sample of this
        many of them (in the same order); None keeps all.
    random_state : int, default=0
        Seed of that sample.

    Examples
    --------
    >>> [mask.tolist() for mask in group_splits(["a", "b", "b", "c"])]
    [[True, True, True, False], [True, False, False, True], [False, True, True, True]]
    """
    from .._params import check_int

    max_splits = check_int(max_splits, "max_splits", "group_splits", low=1, allow_none=True)
    groups = np.asarray(groups)
    names = pd.unique(groups)
    if len(names) < 2:
        raise ValueError(f"group_splits needs at least two groups to split. Got {len(names)}.")
    combinations = list(itertools.combinations(range(len(names)), math.ceil(len(names) / 2)))
    if max_splits is not None and len(combinations) > max_splits:
        keep = np.sort(np.random.default_rng(random_state).choice(len(combinations), max_splits, replace=False))
        combinations = [combinations[position] for position in keep]
    return [np.isin(groups, names[list(chosen)]) for chosen in combinations]


def _evaluate(table, signal, thresholds, higher_is_answerable, evaluation):
    return outcome_table(
        table[evaluation], signal, thresholds, higher_is_answerable=higher_is_answerable, intervals=False
    )


def heldout_outcomes(
    table: pd.DataFrame,
    signal: str,
    rules,
    *,
    n_splits: int = 1000,
    random_state=0,
    higher_is_answerable: bool = True,
    delta: float = 0.1,
    splits=None,
) -> pd.DataFrame:
    """Fit each rule on one half of every slice and score it on the other half, over many splits.

    Parameters
    ----------
    table : DataFrame
        Score table with ``answerable``, ``slice`` and ``signal``.
    signal : str
    rules : sequence of str
        Rule keys, see :func:`fit_threshold`.
    n_splits : int, default=1000
        Split ``i`` uses seed ``random_state + i`` (:func:`split_by_slice`);
        with the default seed, split 0 is the published experiment's split.
    splits : sequence of array-like of bool, default=None
        Calibration masks over the rows of ``table`` (True: calibration, the
        rest is evaluated), e.g. :func:`group_splits` of its articles, so that
        no group is on both sides; they replace the random splits, and
        ``n_splits`` and ``random_state`` are not used.

    Returns
    -------
    DataFrame
        One row per (split, rule): ``threshold``; ``fallback``, True where the
        rule could not be met on that calibration half (a guarantee rule with
        too few questions gives ``-inf`` or ``+inf``, see
        :class:`CalibrationWarning`; ``keep`` without answerable questions
        gives NaN); and on the evaluation half only ``answerable_kept``,
        ``<slice>_refused`` for each unanswerable slice and
        ``unanswerable_refused``, with their counts.
    """
    for rule in rules:
        parse_rule(rule)
    if splits is not None:
        splits = [_check_mask(mask, len(table), position) for position, mask in enumerate(splits)]
        present = ~table[signal].isna().to_numpy()
        splits = [mask[present] for mask in splits]
    table = table[~table[signal].isna()].reset_index(drop=True)
    scores = table[signal].to_numpy(dtype=float)
    answerable = table["answerable"].to_numpy(dtype=bool)
    slices = table["slice"].to_numpy()
    rows = []
    count = n_splits if splits is None else len(splits)
    for split in progress(range(count), desc=f"held-out splits ({signal})", unit="split", disable=count < LONG_LOOP):
        if splits is None:
            calibration = split_by_slice(slices, random_state=random_state + split)
        else:
            calibration = splits[split]
        evaluation = ~calibration
        fitted = [
            fit_rule(
                rule,
                scores[calibration],
                answerable[calibration],
                higher_is_answerable=higher_is_answerable,
                delta=delta,
            )[:2]
            for rule in rules
        ]
        # Every rule's threshold in one outcome table: each threshold's counts are its own, whatever comes beside it.
        outcomes = _evaluate(table, signal, [threshold for threshold, _ in fitted], higher_is_answerable, evaluation)
        for position, (rule, (threshold, fallback)) in enumerate(zip(rules, fitted)):
            outcome = outcomes.iloc[position]
            if math.isnan(threshold):  # no threshold, so no outcome either (rather than "refuses all")
                outcome[[name for name in outcome.index if not name.endswith("_n")]] = np.nan
            rows.append(
                {"split": split, "rule": rule, "threshold": threshold, "fallback": fallback, **outcome.to_dict()}
            )
    return pd.DataFrame(rows)


def _check_mask(mask, n_rows: int, position: int) -> np.ndarray:
    mask = np.asarray(mask)
    if mask.dtype != bool or mask.shape != (n_rows,):
        raise ValueError(
            f"The 'splits' parameter of heldout_outcomes must hold boolean masks of {n_rows} rows. "
            f"Got {mask.dtype} of shape {mask.shape} for split {position} instead."
        )
    return mask


def summarize_heldout(heldout: pd.DataFrame, *, answerable: bool = True, unanswerable: bool = True) -> pd.DataFrame:
    """5th, 50th and 95th percentile over splits of each rule's threshold and held-out outcomes.

    Parameters
    ----------
    heldout : DataFrame
        From :func:`heldout_outcomes`.
    answerable, unanswerable : bool, default=True
        Keep ``answerable_kept`` / the ``*_refused`` columns (False when the
        table has no question of that kind, so the rates are undefined).

    Returns
    -------
    DataFrame
        One row per rule (in order); columns (measure, quantile). A threshold
        quantile next to an infinite threshold (a rule that fell back) is the
        nearest split's threshold rather than NaN.
    """
    columns = [
        column
        for column in heldout.columns
        if (column in ("threshold", "answerable_kept") or column.endswith("_refused"))
        and not (column == "answerable_kept" and not answerable)
        and not (column.endswith("_refused") and not unanswerable)
    ]
    quantiles = heldout.groupby("rule", sort=False)[columns].quantile([0.05, 0.5, 0.95])
    nearest = heldout.groupby("rule", sort=False)[["threshold"]].quantile([0.05, 0.5, 0.95], interpolation="nearest")
    quantiles["threshold"] = quantiles["threshold"].fillna(nearest["threshold"])
    return quantiles.unstack()


def fallback_notes(heldout: pd.DataFrame) -> list[str]:
    """One sentence per rule that could not be met on some calibration halves, saying what it did there."""
    lines = []
    for rule, group in heldout.groupby("rule", sort=False):
        fell_back = group[group["fallback"]]
        if fell_back.empty:
            continue
        counted = f"in {len(fell_back)} of {len(group)} splits"
        threshold = fell_back["threshold"].iloc[0]
        name = parse_rule(rule)[0]
        if name == "keep":
            lines.append(f"{rule}: no answerable calibration questions {counted}, no threshold there (n/a)")
        elif name == "recall_guarantee":
            lines.append(
                f"{rule}: too few answerable calibration questions for the guarantee {counted}, "
                f"the rule answers everything there (threshold {threshold:+g})"
            )
        else:
            lines.append(
                f"{rule}: too few unanswerable calibration questions for the guarantee {counted}, "
                f"the rule refuses everything there (threshold {threshold:+g})"
            )
    return lines
