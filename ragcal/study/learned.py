"""The learned-gate evaluation of ``make reproduce``: several signals combined against one ``dense_top1`` threshold.

Nested held-out protocol: for each of the stratified half splits of
:func:`ragcal.calibration.split_by_slice` (the same seeds as every other
held-out table), the classifier **and** its threshold are fitted on the
calibration half only (the threshold on 5-fold out-of-fold scores of that half,
see :func:`ragcal.gates.fit_learned_gate`), and everything is counted on the
other half: the learned score is never evaluated on a row it was trained on.
On the same split the baseline, one ``dense_top1`` threshold, is fitted with
the same rule, so every number has a paired per-split difference.

What is reported per gate (``learned <set>`` for each candidate signal set,
and ``threshold dense_top1``):

- held-out AUC against all unanswerable questions and against each slice;
- at the rule (``keep@0.95``): answerable kept, each slice refused, all
  unanswerable refused;
- for the learned gates, the standardised coefficients of every split.

Intervals are the 2.5th and 97.5th percentiles over splits. The splits
overlap, so these show how much one split can mislead rather than a
confidence interval of the mean; a paired difference whose interval excludes
0 is the claim "better on practically every split"; "no worse" means the
2.5th percentile is exactly 0 (better on many splits, equal on the rest).
"""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import numpy as np
import pandas as pd
from sklearn.metrics import roc_auc_score

from .._io import atomic_write_text
from ..calibration import split_by_slice
from ..chunking import page_of
from ..gates import LearnedGate, ThresholdGate, fit_learned_gate, fit_threshold_gate, summarize_heldout_gates
from ..gates.base import decided_arrays, decisions_as_arrays
from ..gates.evaluate import ALL_UNANSWERABLE, outcome_counts, outcome_groups
from ..gates.learned import DEFAULT_LEARNED_SIGNALS, fit_learned_gates, fold_strata
from ..gates.learned_score import LinearScore
from ..progress import LONG_LOOP, progress
from ..score_tables import check_score_table, unanswerable_slices
from ..signals import SIGNALS

__all__ = [
    "LEARNED_RULE",
    "BASELINE_SIGNAL",
    "LEARNED_SPLITS",
    "candidate_sets",
    "heldout_learned",
    "summarize_learned",
    "evaluate_learned_gates",
    "learned_transfer",
]

#: The rule every gate of this comparison is fitted with.
LEARNED_RULE = "keep@0.95"
#: The single signal the learned gates are compared with.
BASELINE_SIGNAL = "dense_top1"
#: Splits of ``make reproduce`` (at most this many). The full 1,000 take one to two minutes per bundled corpus on two
#: busy cores (three signal sets, a 5-fold out-of-fold threshold each: 18 logistic regressions a split; see
#: ``benchmarks/README.md``).
LEARNED_SPLITS = 1000
#: (slice, outcome) pairs with a paired difference; higher is better for each except :data:`LOWER_IS_BETTER`.
COMPARED_OUTCOMES = (
    ("answerable", "answered"),
    ("near-domain", "refuse"),
    ("unrelated", "refuse"),
    (ALL_UNANSWERABLE, "refuse"),
    ("answerable", "supported"),
    ("all questions", "selective_risk"),
)
#: Outcomes where a lower share is better (``better`` and the verdict say so).
LOWER_IS_BETTER = ("selective_risk", "unsupported")


def baseline_gate_name(signal: str = BASELINE_SIGNAL) -> str:
    return f"threshold {signal}"


def candidate_sets(table: pd.DataFrame) -> dict:
    """``{name: signals}`` of the learned gates compared, restricted to registered signals in ``table``.

    - ``dense+bm25``: ``dense_top1`` and ``bm25_top1_raw``, the pair the issue started from;
    - ``default``: :data:`ragcal.gates.DEFAULT_LEARNED_SIGNALS`;
    - ``all``: every registered continuous signal of the table (the binary
      "BM25 matched nothing" flags left out).
    """
    present = [name for name in SIGNALS if name in table.columns]
    sets = {
        "dense+bm25": ("dense_top1", "bm25_top1_raw"),
        "default": tuple(DEFAULT_LEARNED_SIGNALS),
        "all": tuple(name for name in present if not name.startswith("bm25_empty")),
    }
    return {name: signals for name, signals in sets.items() if all(signal in present for signal in signals)}


def _roc_auc(labels: np.ndarray, scores: np.ndarray) -> float:
    """``sklearn.metrics.roc_auc_score(labels, scores)`` for boolean ``labels``, the same float in a tenth of the time.

    With both classes and finite scores, the same arithmetic: the ROC points
    of :func:`sklearn.metrics.roc_curve` without the collinear ones, then the
    trapezoidal rule of :func:`sklearn.metrics.auc`, without the input checks
    that cost a millisecond a call (the study computes twelve per split). The
    counts along the curve are whole numbers, so the order of tied scores does
    not matter. Otherwise scikit-learn answers (NaN with its warning, or its error).
    """
    from scipy.integrate import trapezoid

    if labels.all() or not labels.any() or not np.isfinite(scores).all():
        return roc_auc_score(labels, scores)
    order = np.argsort(scores, kind="stable")[::-1]
    ends = np.r_[np.flatnonzero(np.diff(scores[order])), labels.size - 1]
    true_positives = np.cumsum(labels[order].astype(float))[ends]
    false_positives = 1 + ends - true_positives
    if false_positives.size > 2:
        corners = np.logical_or(np.diff(false_positives, 2), np.diff(true_positives, 2))
        kept = np.flatnonzero(np.r_[True, corners, True])
        false_positives, true_positives = false_positives[kept], true_positives[kept]
    true_positives, false_positives = np.r_[0.0, true_positives], np.r_[0.0, false_positives]
    return float(trapezoid(true_positives / true_positives[-1], false_positives / false_positives[-1]))


def _auc_rows(split, gate, labels, scores, comparisons):
    rows = []
    for comparison, negative in comparisons:
        mask = labels | negative
        auc = _roc_auc(labels[mask], scores[mask]) if (~labels[mask]).any() else np.nan
        rows.append((split, gate, comparison, auc))
    return rows


def _passage_key(gate):
    """Everything :meth:`Gate.passages_for` reads: two gates with one key pass on the same passages for a row.

    A threshold gate's passages are cut at its threshold (or floor), so the
    key is the gate without its hedge band; a learned gate's are cut at its
    cosine bar, whatever its model and threshold.
    """
    if isinstance(gate, LearnedGate):
        return (LearnedGate, gate.passages_from, gate.passage_floor, gate.max_passages)
    if isinstance(gate, ThresholdGate):
        return replace(gate, hedge_below=None)
    raise TypeError(f"_passage_key takes a LearnedGate or a ThresholdGate, got {type(gate).__name__}")


class _HeldOutSupport:
    """:func:`ragcal.gates.support.table_support` over many splits, remembering what it found.

    A row a gate answers is supported when the passages
    :meth:`~ragcal.gates.Gate.passages_for` gives for its results include a
    gold page. That depends on the row and the gate's :func:`_passage_key`
    only, and the cosine bar of a ``keep@`` rule is one of a few dozen
    answerable scores, so over a thousand splits the same (row, key) comes
    back again and again.
    """

    def __init__(self, results, gold):
        self.results, self.gold = results, gold
        self.passes_gold = {}

    def __call__(self, gate, decisions, rows: np.ndarray) -> np.ndarray:
        """Supported answers of ``gate`` on the table rows ``rows``; ``decisions`` is its decide_table of them."""
        known = self.passes_gold.setdefault(_passage_key(gate), {})
        supported = np.zeros(len(rows), dtype=bool)
        for position in np.flatnonzero(decisions_as_arrays(decisions).action != "refuse"):
            row = int(rows[position])
            pages = self.gold[row]
            if not pages:
                continue
            if row not in known:
                known[row] = any(page_of(chunk_id) in pages for chunk_id, _ in gate.passages_for(self.results[row]))
            supported[position] = known[row]
        return supported


def heldout_learned(
    table: pd.DataFrame,
    signal_sets: dict,
    *,
    rule: str = LEARNED_RULE,
    baseline: str = BASELINE_SIGNAL,
    n_splits: int = LEARNED_SPLITS,
    n_folds: int = 5,
    estimator=None,
    random_state=0,
    results=None,
    gold=None,
) -> dict:
    """Nested held-out evaluation of learned gates against one threshold on ``baseline``.

    Parameters
    ----------
    table : DataFrame
        Score table with every signal of ``signal_sets`` and ``baseline``.
    signal_sets : dict of str to sequence of str
        ``{name: signals}``; gate ``learned <name>`` per entry.
    n_splits : int, default=LEARNED_SPLITS
        Split ``i`` uses seed ``random_state + i`` (the splits of every other held-out table).
    results, gold : sequence, default=None
        Retrieval results and gold pages per row: add the support outcomes
        (as :func:`ragcal.gates.heldout_gates`).

    Returns
    -------
    dict of str to DataFrame
        ``outcomes``: ``split, gate, slice, outcome, k, n`` (as
        :func:`ragcal.gates.heldout_gates`); ``auc``: ``split, gate,
        comparison, auc`` on the evaluation half; ``coefficients``: ``split,
        gate, signal, coefficient`` (standardised; ``(intercept)`` too).
    """
    table = check_score_table(table, [baseline, *{s for signals in signal_sets.values() for s in signals}])
    table = table.reset_index(drop=True)
    slices = table["slice"].to_numpy()
    higher = SIGNALS[baseline].higher_is_answerable if baseline in SIGNALS else True
    base = baseline_gate_name(baseline)
    strata = fold_strata(table)
    support = None if results is None else _HeldOutSupport(results, gold)
    outcome_rows, auc_rows, coefficient_rows = [], [], []
    for split in progress(range(n_splits), desc="learned gates held out", unit="split", disable=n_splits < LONG_LOOP):
        calibration = split_by_slice(slices, random_state=random_state + split)
        fitting, evaluation = table[calibration].reset_index(drop=True), table[~calibration].reset_index(drop=True)
        answerable = evaluation["answerable"].to_numpy(dtype=bool)
        comparisons = [(ALL_UNANSWERABLE, ~answerable)]
        comparisons += [
            (name, (evaluation["slice"] == name).to_numpy() & ~answerable) for name in unanswerable_slices(evaluation)
        ]
        groups = outcome_groups(evaluation, everyone=support is not None)
        gates = {base: fit_threshold_gate(fitting, baseline, rule)}
        # Every set in one call: the folds and the cosine bar are the same for all of them (the table was checked).
        learned = fit_learned_gates(
            fitting,
            rule,
            signal_sets,
            estimator=estimator,
            n_folds=n_folds,
            random_state=random_state + split,
            strata=strata[calibration],
            checked=True,
        )
        gates.update({f"learned {name}": gate for name, gate in learned.items()})
        held = np.flatnonzero(~calibration)
        for gate_name, gate in gates.items():
            decisions = decided_arrays(gate, evaluation)
            supported = None if support is None else support(gate, decisions, held)
            counts = outcome_counts(evaluation, decisions, (), supported, groups=groups)
            outcome_rows += [(split, gate_name, *row) for row in counts]
            scores = decisions.score
            keep = ~np.isnan(scores)
            oriented = scores if (gate_name != base or higher) else -scores
            auc_rows += _auc_rows(
                split, gate_name, answerable[keep], oriented[keep], [(c, m[keep]) for c, m in comparisons]
            )
            model = getattr(gate, "model", None)
            if isinstance(model, LinearScore):
                coefficient_rows += [(split, gate_name, s, c) for s, c in zip(model.signals, model.coef)]
                coefficient_rows.append((split, gate_name, "(intercept)", model.intercept))
    return {
        "outcomes": pd.DataFrame(outcome_rows, columns=["split", "gate", "slice", "outcome", "k", "n"]),
        "auc": pd.DataFrame(auc_rows, columns=["split", "gate", "comparison", "auc"]),
        "coefficients": pd.DataFrame(coefficient_rows, columns=["split", "gate", "signal", "coefficient"]),
    }


def _percentiles(values: pd.Series) -> dict:
    low, high = np.nanquantile(values, [0.025, 0.975])
    return {"mean": float(np.nanmean(values)), "low": float(low), "high": float(high)}


def _verdict(low: float, high: float, mean: float = 0.0) -> str:
    """From the 2.5th and 97.5th percentile of a paired per-split difference (higher is better).

    Shares of a few questions are discrete, so a gate that is better on most
    splits and equal on the rest has a 2.5th percentile of exactly 0: that is
    "no worse", not "better".
    """
    if low == high == mean == 0:
        return "the same on every split"
    if low > 0:
        return "better"
    if high < 0:
        return "worse"
    if low == 0 and mean > 0:
        return "no worse"
    if high == 0 and mean < 0:
        return "no better"
    return "cannot be told apart"


def _paired(values: pd.Series, baseline: pd.Series, *, is_baseline: bool, lower_is_better: bool = False) -> dict:
    """Percentiles of ``values`` over splits, and of their paired difference against ``baseline``, with a verdict.

    ``better`` is the share of splits where the gate beats the baseline: a
    higher share, or a lower one with ``lower_is_better``.
    """
    difference = values - baseline
    spread = _percentiles(difference)
    if lower_is_better:
        better = float((difference < 0).mean())
        verdict = _verdict(-spread["high"], -spread["low"], -spread["mean"])
    else:
        better = float((difference > 0).mean())
        verdict = _verdict(spread["low"], spread["high"], spread["mean"])
    return {
        **_percentiles(values),
        "difference": spread["mean"],
        "difference_low": spread["low"],
        "difference_high": spread["high"],
        "better": better,
        "verdict": "baseline" if is_baseline else verdict,
    }


def summarize_learned(heldout: dict, *, baseline: str = BASELINE_SIGNAL) -> dict:
    """Per gate: held-out means with percentile intervals, and paired differences against the baseline.

    Returns
    -------
    dict of str to DataFrame
        ``auc``: ``gate, comparison, mean, low, high, difference, difference_low,
        difference_high, better, verdict``; ``outcomes``: the same columns for
        each (slice, outcome) of :data:`COMPARED_OUTCOMES`; ``coefficients``:
        ``gate, signal, mean, low, high, positive`` (share of splits with a
        positive coefficient).
    """
    base = baseline_gate_name(baseline)
    auc = heldout["auc"]
    rows = []
    pivot = auc.pivot_table(index="split", columns=["gate", "comparison"], values="auc")
    for gate, comparison in pivot.columns:
        rows.append(
            {"gate": gate, "comparison": comparison}
            | _paired(pivot[(gate, comparison)], pivot[(base, comparison)], is_baseline=gate == base)
        )
    auc_summary = pd.DataFrame(rows)

    outcomes = heldout["outcomes"]
    shares = outcomes.assign(share=outcomes["k"] / outcomes["n"].where(outcomes["n"] > 0))
    rows = []
    present = set(shares["slice"])
    for slice_name, outcome in COMPARED_OUTCOMES:
        if slice_name not in present:
            continue
        selected = shares[(shares["slice"] == slice_name) & (shares["outcome"] == outcome)]
        if selected.empty:  # support outcomes need the runs and gold pages
            continue
        table = selected.pivot(index="split", columns="gate", values="share")
        for gate in table.columns:
            rows.append(
                {"gate": gate, "slice": slice_name, "outcome": outcome}
                | _paired(
                    table[gate], table[base], is_baseline=gate == base, lower_is_better=outcome in LOWER_IS_BETTER
                )
            )
    outcome_summary = pd.DataFrame(rows)

    coefficients = heldout["coefficients"]
    grouped = coefficients.groupby(["gate", "signal"], sort=False)["coefficient"]
    coefficient_summary = grouped.agg(mean="mean").reset_index()
    coefficient_summary["low"] = grouped.quantile(0.025).to_numpy()
    coefficient_summary["high"] = grouped.quantile(0.975).to_numpy()
    coefficient_summary["positive"] = grouped.apply(lambda values: (values > 0).mean()).to_numpy()
    return {
        "auc": auc_summary,
        "outcomes": outcome_summary,
        "coefficients": coefficient_summary,
        "shares": summarize_heldout_gates(outcomes),
    }


def evaluate_learned_gates(
    table: pd.DataFrame,
    results_dir,
    *,
    n_splits: int = LEARNED_SPLITS,
    random_state=0,
    results=None,
    gold=None,
    log=print,
) -> dict:
    """Write ``learned_auc.csv``, ``learned_gate.csv`` and ``learned_coefficients.csv``; return the summaries.

    Also returns ``sets`` (the candidate signal sets) and ``n_splits``.
    """
    results_dir = Path(results_dir)
    sets = candidate_sets(table)
    heldout = heldout_learned(table, sets, n_splits=n_splits, random_state=random_state, results=results, gold=gold)
    summary = summarize_learned(heldout)
    for name, frame in (
        ("learned_auc", summary["auc"]),
        ("learned_gate", summary["outcomes"]),
        ("learned_coefficients", summary["coefficients"]),
    ):
        atomic_write_text(results_dir / f"{name}.csv", frame.to_csv(index=False, float_format="%.4f"))
        log(f"wrote {results_dir / name}.csv")
    return {**summary, "sets": sets, "n_splits": n_splits, "heldout": heldout}


def learned_transfer(
    score_tables: dict,
    *,
    signals=DEFAULT_LEARNED_SIGNALS,
    rule: str = LEARNED_RULE,
    baseline: str = BASELINE_SIGNAL,
    n_resamples: int = 2000,
) -> pd.DataFrame:
    """Fit a learned gate and one ``baseline`` threshold on each corpus and apply both to every other corpus.

    Returns
    -------
    DataFrame
        One row per (fitted on, applied to, gate): ``auc`` with its stratified
        bootstrap interval on the target corpus (the learned score is the one
        fitted on the source; ``dense_top1`` has no fitted part), the paired
        AUC difference learned minus baseline with its interval, and for
        ``answerable_kept`` and each ``<slice>_refused`` the share, count and
        exact 95% interval.
    """
    from ..gates import gate_outcomes
    from ..metrics.auc import auc_bootstrap
    from ..score_tables import slice_column

    rows = []
    for fitted_on, source in score_tables.items():
        gates = {
            baseline_gate_name(baseline): fit_threshold_gate(source, baseline, rule),
            "learned default": fit_learned_gate(source, rule, signals=signals),
        }
        for applied_to, target in score_tables.items():
            if applied_to == fitted_on:
                continue
            labels = target["answerable"].to_numpy(dtype=bool)
            resampled = {}
            for gate_name, gate in gates.items():
                decisions = gate.decide_table(target)
                scores = decisions["score"].to_numpy(dtype=float)
                resampled[gate_name] = auc_bootstrap(labels, scores, n_resamples=n_resamples, random_state=0)
                low, high = np.quantile(resampled[gate_name], [0.025, 0.975])
                outcomes = gate_outcomes(target, decisions)
                record = {
                    "fitted_on": fitted_on,
                    "applied_to": applied_to,
                    "gate": gate_name,
                    "threshold": gate.threshold,
                    "auc": roc_auc_score(labels, scores),
                    "auc_low": low,
                    "auc_high": high,
                }
                for row in outcomes.itertuples():
                    if row.slice == "answerable" and row.outcome == "answered":
                        group = "answerable_kept"
                    elif row.slice != "answerable" and row.outcome == "refuse":
                        group = (
                            f"{slice_column(row.slice) if row.slice != ALL_UNANSWERABLE else 'unanswerable'}_refused"
                        )
                    else:
                        continue
                    record.update(
                        {
                            group: row.share,
                            f"{group}_k": row.k,
                            f"{group}_n": row.n,
                            f"{group}_low": row.low,
                            f"{group}_high": row.high,
                        }
                    )
                rows.append(record)
            difference = resampled["learned default"] - resampled[baseline_gate_name(baseline)]
            low, high = np.quantile(difference, [0.025, 0.975])
            rows[-1].update(
                {
                    "auc_difference": rows[-1]["auc"] - rows[-2]["auc"],
                    "auc_difference_low": low,
                    "auc_difference_high": high,
                }
            )
    return pd.DataFrame(rows)
