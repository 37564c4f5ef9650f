"""The statistics of the cross-model study: two models' score tables of the same questions, compared pairwise.

- :func:`auc_by_model` and :func:`aurc_by_model`: every signal's AUC and AURC
  under each model, with the paired difference on the same bootstrap draws;
- :func:`thresholds_by_model`: each model's threshold per rule on the whole set;
- :func:`threshold_copy` and :func:`summarize_copy`: a threshold fitted on one
  model's calibration half, applied to the other model's evaluation half.

:mod:`ragcal.study.cross_model` runs both models and words these tables.
"""

from __future__ import annotations

import math
import warnings

import numpy as np
import pandas as pd
from sklearn.metrics import roc_auc_score

from ..calibration import split_by_slice
from ..calibration.rules import fit_rule
from ..metrics import DegenerateInputWarning, outcome_table
from ..metrics.auc import auc_bootstrap
from ..metrics.selective import selective_comparison
from ..progress import LONG_LOOP, progress
from ..score_tables import answerable_sign, unanswerable_slices
from ..signals import SIGNALS

__all__ = [
    "TRANSFER_SIGNAL",
    "model_dependent_signals",
    "check_paired",
    "auc_by_model",
    "aurc_by_model",
    "thresholds_by_model",
    "threshold_copy",
    "summarize_copy",
]

#: The signal whose thresholds are compared across models.
TRANSFER_SIGNAL = "dense_top1"
#: Retrievers whose lists change with the embedding model.
_MODEL_RETRIEVERS = {"dense", "rrf", "rerank"}


def model_dependent_signals(table: pd.DataFrame) -> list[str]:
    """Registered signals of ``table`` that read a dense list (directly or through fusion)."""
    return [
        name for name in SIGNALS if name in table.columns and _MODEL_RETRIEVERS.intersection(SIGNALS[name].retrievers)
    ]


def check_paired(tables: dict) -> list:
    """The two model labels of ``tables``, after checking that both score the same questions in the same order."""
    labels = list(tables)
    if len(labels) != 2:
        raise ValueError(f"the cross-model study compares two models; got {len(labels)}: {labels}")
    first, second = (tables[label] for label in labels)
    for column in ("id", "answerable", "slice"):
        if not first[column].reset_index(drop=True).equals(second[column].reset_index(drop=True)):
            raise ValueError(f"the two models' score tables differ in their {column!r} column: not the same questions")
    return labels


def _oriented(table: pd.DataFrame, signal: str) -> np.ndarray:
    sign = answerable_sign(SIGNALS[signal].higher_is_answerable)
    return sign * table[signal].to_numpy(dtype=float)


def auc_by_model(tables: dict, signals, *, n_resamples: int = 2000, random_state=0) -> pd.DataFrame:
    """AUC of each signal under both models, and the paired difference (second minus first), per comparison.

    Parameters
    ----------
    tables : dict of str to DataFrame
        Model label -> score table, the same questions in the same order.

    Returns
    -------
    DataFrame
        ``signal, comparison, n_answerable, n_unanswerable``, then per model
        ``<label>_auc, <label>_low, <label>_high``, then ``difference,
        difference_low, difference_high``. Questions where either model's
        signal is NaN are left out of that signal's row; a signal constant on
        the questions of a comparison under either model gets NaN.
    """
    labels = check_paired(tables)
    first = tables[labels[0]]
    answerable = first["answerable"].to_numpy(dtype=bool)
    comparisons = [("all unanswerable", ~answerable)]
    comparisons += [(name, (first["slice"] == name).to_numpy() & ~answerable) for name in unanswerable_slices(first)]
    rows = []
    for signal in signals:
        scores = {label: _oriented(tables[label], signal) for label in labels}
        finite = ~np.isnan(scores[labels[0]]) & ~np.isnan(scores[labels[1]])
        for comparison, negative in comparisons:
            keep = finite & (answerable | negative)
            truth = answerable[keep]
            row = {
                "signal": signal,
                "comparison": comparison,
                "n_answerable": int(truth.sum()),
                "n_unanswerable": int((~truth).sum()),
            }
            draws = {}
            for label in labels:
                values = scores[label][keep]
                if truth.all() or not truth.any() or np.ptp(values) == 0:
                    row.update({f"{label}_auc": np.nan, f"{label}_low": np.nan, f"{label}_high": np.nan})
                    continue
                with warnings.catch_warnings():
                    warnings.simplefilter("ignore", DegenerateInputWarning)
                    draws[label] = auc_bootstrap(truth, values, n_resamples=n_resamples, random_state=random_state)
                low, high = np.nanquantile(draws[label], [0.025, 0.975])
                row.update({f"{label}_auc": roc_auc_score(truth, values), f"{label}_low": low, f"{label}_high": high})
            if len(draws) == 2:  # the same seed and labels draw the same resamples: the difference is paired
                low, high = np.nanquantile(draws[labels[1]] - draws[labels[0]], [0.025, 0.975])
                row.update(
                    difference=row[f"{labels[1]}_auc"] - row[f"{labels[0]}_auc"],
                    difference_low=low,
                    difference_high=high,
                )
            else:
                row.update(difference=np.nan, difference_low=np.nan, difference_high=np.nan)
            rows.append(row)
    return pd.DataFrame(rows)


def aurc_by_model(tables: dict, support: dict, signals, *, n_resamples: int = 2000, random_state=0) -> pd.DataFrame:
    """AURC of each signal under both models, and the paired difference (second minus first).

    Parameters
    ----------
    tables : dict of str to DataFrame
        Model label -> score table, the same questions in the same order.
    support : dict of str to dict of str to ndarray
        Model label -> signal -> support level per question
        (:func:`ragcal.gates.support.signal_support` of that model's results):
        an answered question is supported when its level is at least the
        threshold that answered it.

    Returns
    -------
    DataFrame
        ``signal``, per model ``<label>_aurc, <label>_low, <label>_high``, and
        ``difference, difference_low, difference_high`` (lower is better, so a
        negative difference favours the second model), stratified by slice.
    """
    labels = check_paired(tables)
    strata = tables[labels[0]]["slice"].to_numpy()
    rows = []
    for signal in signals:
        higher = SIGNALS[signal].higher_is_answerable
        inputs = {
            label: (tables[label][signal].to_numpy(dtype=float), support[label][signal], higher) for label in labels
        }
        # Both models on the same bootstrap draws; the difference is the second model minus the first.
        compared = selective_comparison(
            inputs, baseline=labels[0], strata=strata, n_resamples=n_resamples, random_state=random_state
        )
        aurc = compared[compared["measure"] == "aurc"].set_index("name")
        row = {"signal": signal}
        for label in labels:
            row.update(
                {
                    f"{label}_aurc": aurc.loc[label, "value"],
                    f"{label}_low": aurc.loc[label, "low"],
                    f"{label}_high": aurc.loc[label, "high"],
                }
            )
        row.update(
            difference=aurc.loc[labels[1], "difference"],
            difference_low=aurc.loc[labels[1], "difference_low"],
            difference_high=aurc.loc[labels[1], "difference_high"],
        )
        rows.append(row)
    return pd.DataFrame(rows)


def thresholds_by_model(tables: dict, rules, *, signal: str = TRANSFER_SIGNAL) -> pd.DataFrame:
    """Each model's threshold on ``signal`` for every rule, fitted on the whole labeled set.

    Returns
    -------
    DataFrame
        ``model, rule, threshold, fallback`` (True where the rule could not be met).
    """
    rows = []
    for label, table in tables.items():
        for rule in rules:
            threshold, fallback, _ = fit_rule(
                rule,
                table[signal].to_numpy(dtype=float),
                table["answerable"].to_numpy(dtype=bool),
                higher_is_answerable=SIGNALS[signal].higher_is_answerable,
            )
            rows.append({"model": label, "rule": rule, "threshold": threshold, "fallback": fallback})
    return pd.DataFrame(rows)


def threshold_copy(
    tables: dict, rules, *, signal: str = TRANSFER_SIGNAL, n_splits: int = 1000, random_state=0
) -> pd.DataFrame:
    """A threshold fitted on one model's calibration half, applied to the other model's evaluation half.

    Split ``i`` halves every slice with seed ``random_state + i``
    (:func:`ragcal.calibration.split_by_slice`), the same questions for both
    models. For each rule and each ordered pair of models (fitted on, applied
    to) the threshold is fitted on the calibration half of the first model's
    scores and applied to the evaluation half of the second's; the pair with
    the same model twice is that model's own held-out threshold.

    Returns
    -------
    DataFrame
        One row per (split, rule, fitted_on, applied_to): ``threshold``,
        ``fallback`` and the evaluation half's outcomes
        (:func:`ragcal.metrics.outcome_table`, without intervals).
    """
    labels = check_paired(tables)
    higher = SIGNALS[signal].higher_is_answerable
    for label in labels:
        if tables[label][signal].isna().any():
            raise ValueError(f"threshold_copy: {signal} is NaN for some questions under {label}")
    first = tables[labels[0]]
    slices = first["slice"].to_numpy()
    answerable = first["answerable"].to_numpy(dtype=bool)
    scores = {label: tables[label][signal].to_numpy(dtype=float) for label in labels}
    rows = []
    splits = progress(range(n_splits), desc="threshold copies", unit="split", disable=n_splits < LONG_LOOP)
    for split in splits:
        calibration = split_by_slice(slices, random_state=random_state + split)
        fits = []
        for rule in rules:
            for fitted_on in labels:
                threshold, fallback, _ = fit_rule(
                    rule, scores[fitted_on][calibration], answerable[calibration], higher_is_answerable=higher
                )
                fits.append((rule, fitted_on, threshold, fallback))
        thresholds = [threshold for _, _, threshold, _ in fits]
        # Every fitted threshold on each model's evaluation half at once: outcome_table counts each one alone.
        outcomes = {
            applied_to: outcome_table(
                tables[applied_to][~calibration], signal, thresholds, higher_is_answerable=higher, intervals=False
            )
            .drop(columns="threshold")
            .astype(float)
            .to_dict("records")
            for applied_to in labels
        }
        for position, (rule, fitted_on, threshold, fallback) in enumerate(fits):
            for applied_to in labels:
                outcome = outcomes[applied_to][position]
                if math.isnan(threshold):
                    outcome = {key: (value if key.endswith("_n") else np.nan) for key, value in outcome.items()}
                rows.append(
                    {
                        "split": split,
                        "rule": rule,
                        "fitted_on": fitted_on,
                        "applied_to": applied_to,
                        "threshold": threshold,
                        "fallback": fallback,
                        **outcome,
                    }
                )
    return pd.DataFrame(rows)


def _outcome_columns(frame: pd.DataFrame) -> list[str]:
    return [column for column in frame.columns if column == "answerable_kept" or column.endswith("_refused")]


def summarize_copy(copies: pd.DataFrame) -> pd.DataFrame:
    """Per rule, model applied to and outcome: the own and the copied threshold's held-out share, and their difference.

    Returns
    -------
    DataFrame
        ``rule, applied_to, fitted_on, outcome`` and the 5th, 50th and 95th
        percentile over splits of ``own``, ``copied`` and ``difference``
        (copied minus own, paired by split), plus ``own_threshold`` and
        ``copied_threshold`` medians.
    """
    outcomes = _outcome_columns(copies)
    own = copies[copies["fitted_on"] == copies["applied_to"]].set_index(["split", "rule", "applied_to"])
    copied = copies[copies["fitted_on"] != copies["applied_to"]].set_index(["split", "rule", "applied_to"])
    rows = []
    for (rule, applied_to), part in copied.groupby(level=["rule", "applied_to"], sort=False):
        mine = own.loc[part.index]
        for outcome in outcomes:
            difference = part[outcome] - mine[outcome]
            row = {
                "rule": rule,
                "applied_to": applied_to,
                "fitted_on": part["fitted_on"].iloc[0],
                "outcome": outcome,
                "own_threshold": mine["threshold"].median(),
                "copied_threshold": part["threshold"].median(),
            }
            for name, values in (("own", mine[outcome]), ("copied", part[outcome]), ("difference", difference)):
                low, median, high = values.quantile([0.05, 0.5, 0.95]).tolist()
                row.update({f"{name}_p5": low, f"{name}": median, f"{name}_p95": high})
            rows.append(row)
    return pd.DataFrame(rows)
