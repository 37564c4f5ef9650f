"""How many labels are enough: ``label_curve.csv`` and the "How many labels are enough" part of each summary.

Two answers, side by side. The exact one is about the gate fitted on the
whole labeled set: the spread of the kept share that ``keep@0.95`` delivers
on future answerable questions (:func:`ragcal.calibration.kept_share_interval`)
and the exact Clopper-Pearson interval of its refused share on the
unanswerable questions. The measured one is
:func:`ragcal.calibration.label_curve`: stratified subsamples at growing
sizes, the rule fitted on each and scored on the questions left out.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd

from .._io import atomic_write_text
from .._params import parameter_error
from ..calibration import fit_threshold, kept_share_interval, label_curve, parse_rule
from ..metrics import outcome_table

__all__ = [
    "LABEL_CURVE_RULE",
    "LABEL_CURVE_REPEATS",
    "LABEL_CURVE_CONFIDENCE",
    "evaluate_label_curve",
    "label_curve_section",
]

#: The rule whose label curve the summaries report (the gates' ``keep@0.95``).
LABEL_CURVE_RULE = "keep@0.95"
#: Subsamples per size.
LABEL_CURVE_REPEATS = 200
#: Width of every interval of the section: 90%, the 5th to 95th percentile of the held-out tables.
LABEL_CURVE_CONFIDENCE = 0.9


def evaluate_label_curve(
    table: pd.DataFrame,
    results_dir,
    *,
    signal: str = "dense_top1",
    rule: str = LABEL_CURVE_RULE,
    n_repeats: int = LABEL_CURVE_REPEATS,
    confidence: float = LABEL_CURVE_CONFIDENCE,
    log=print,
) -> dict:
    """Write ``label_curve.csv``; return it with the whole-set outcome of ``rule`` and its exact intervals.

    Returns
    -------
    dict
        ``label_curve``: :func:`ragcal.calibration.label_curve` (default
        sizes); ``label_curve_outcome``: one row of
        :func:`ragcal.metrics.outcome_table` at the threshold fitted on every
        question, with Clopper-Pearson intervals at ``confidence`` and the
        kept share's exact interval as ``future_kept_low`` and
        ``future_kept_high``.
    """
    results_dir = Path(results_dir)
    curve = label_curve(table, signal, rule, n_repeats=n_repeats, confidence=confidence)
    atomic_write_text(results_dir / "label_curve.csv", curve.to_csv(index=False, float_format="%.4f"))
    log(f"wrote {results_dir / 'label_curve.csv'}")
    finite = table[~table[signal].isna()]
    threshold = fit_threshold(rule, finite[signal], finite["answerable"])
    outcome = outcome_table(finite, signal, [threshold], confidence=confidence).iloc[0].copy()
    name, keep = parse_rule(rule)
    if name != "keep":
        expected = "a keep@p rule (the exact kept-share interval is for keep@ rules only)"
        raise parameter_error("rule", "evaluate_label_curve", expected, rule)
    outcome["future_kept_low"], outcome["future_kept_high"] = kept_share_interval(
        int(outcome["answerable_n"]), keep=keep, confidence=confidence
    )
    return {"label_curve": curve, "label_curve_outcome": outcome}


def _points(low, high) -> str:
    return f"± {50 * (high - low):.1f} points"


def _band(row, column, percent=True) -> str:
    if percent:
        return f"{row[column]:.0%} ({row[f'{column}_low']:.0%} to {row[f'{column}_high']:.0%})"
    return f"{row[column]:.3f} ({row[f'{column}_low']:.3f} to {row[f'{column}_high']:.3f})"


def label_curve_section(
    curve: pd.DataFrame, outcome: pd.Series, *, rule: str = LABEL_CURVE_RULE, figure: str = "figures/label_curve.png"
) -> str:
    """The "How many labels are enough" subsection of a summary, from :func:`evaluate_label_curve`'s tables."""
    confidence = curve.attrs.get("confidence", LABEL_CURVE_CONFIDENCE)
    repeats = curve.attrs.get("n_repeats", LABEL_CURVE_REPEATS)
    level = f"{confidence:.0%}"
    n, m = int(outcome["answerable_n"]), int(outcome["unanswerable_n"])
    kept_count = int(np.ceil(parse_rule(rule)[1] * n - 1e-12))
    slices = [
        column[: -len("_refused")]
        for column in curve.columns
        if column.endswith("_refused") and column != "unanswerable_refused"
    ]
    refused = "; ".join(
        f"{name.replace('_', '-')} {outcome[f'{name}_refused']:.0%} ({int(outcome[f'{name}_refused_k'])}/"
        f"{int(outcome[f'{name}_n'])}), {_points(outcome[f'{name}_refused_low'], outcome[f'{name}_refused_high'])}"
        for name in slices
    )
    last = curve.iloc[-1]
    lines = [
        "### How many labels are enough",
        "",
        f"With {n} answerable and {m} unanswerable questions, the kept share at `{rule}` is known to "
        f"{_points(outcome['future_kept_low'], outcome['future_kept_high'])} (half the width of the exact {level} "
        f"interval, {outcome['future_kept_low']:.1%} to {outcome['future_kept_high']:.1%}, of the share of future "
        f"answerable questions that the threshold fitted on all {n} keeps: Beta({kept_count}, {n - kept_count + 1}), "
        "the distribution of a conformal order statistic, for exchangeable questions; "
        "`ragcal.calibration.kept_share_interval`). Its refused shares are known to half the width of their exact "
        f"{level} Clopper-Pearson intervals: {refused}.",
        "",
        f"Measured instead on questions left out (`ragcal.calibration.label_curve`: {repeats} subsamples per size, "
        f"stratified so that each keeps the slice mix, `{rule}` fitted on each and scored on the rest; median and "
        f"{(1 - confidence) / 2:.0%} to {(1 + confidence) / 2:.0%} percentile; `label_curve.csv`, `{figure}`):",
        "",
    ]
    rows = []
    for _, row in curve.iterrows():
        record = {
            "labeled": int(row["size"]),
            "answerable": int(row["n_answerable"]),
            "unanswerable": int(row["n_unanswerable"]),
            "threshold": _band(row, "threshold", percent=False),
            "answerable kept": _band(row, "answerable_kept"),
        }
        for name in slices:
            record[f"{name.replace('_', '-')} refused"] = _band(row, f"{name}_refused")
        rows.append(record)
    lines += [pd.DataFrame(rows).to_markdown(index=False), ""]
    heldout_width = last["answerable_kept_high"] - last["answerable_kept_low"]
    exact_width = outcome["future_kept_high"] - outcome["future_kept_low"]
    comparison = (
        f"wider than the exact band of the whole set: it is fitted on {int(last['size'])} of the "
        f"{int(last['size'] + last['n_heldout'])} labels and also carries the noise of the {int(last['n_heldout'])} "
        "held-out questions it is scored on"
        if heldout_width > exact_width
        else "no wider than the exact band of the whole set"
    )
    lines.append(
        f"At the largest size ({int(last['n_answerable'])} answerable and {int(last['n_unanswerable'])} unanswerable "
        f"labeled questions) the held-out kept share spans {last['answerable_kept_low']:.0%} to "
        f"{last['answerable_kept_high']:.0%} ({_points(last['answerable_kept_low'], last['answerable_kept_high'])}), "
        f"{comparison}."
    )
    name, keep = parse_rule(rule)
    if name == "keep" and keep < 1:
        lines[-1] += (
            f" Below {_small_set(keep)} answerable questions `{rule}` keeps every one of them (its threshold is "
            "their lowest score), so on the smallest sets it is `keep@1.0`, with a higher threshold."
        )
    lines.append("")
    return "\n".join(lines)


def _small_set(keep: float) -> int:
    """The fewest answerable questions on which ``keep@p`` leaves one out (``ceil(p * n) < n``)."""
    n = 1
    while np.ceil(keep * n - 1e-12) >= n:
        n += 1
    return n
