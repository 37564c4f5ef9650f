"""The summary's section on the learned gate: held-out AUC, outcomes and coefficients against one threshold.

The numbers come from :func:`ragcal.study.learned.evaluate_learned_gates`; this module only words them.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from ..formatting import format_interval

__all__ = ["learned_gate_section"]


def _learned_cell(row, digits: int, percent: bool) -> str:
    if percent:
        return f"{row['mean']:.1%} [{row['low']:.1%}, {row['high']:.1%}]"
    return format_interval(row["mean"], row["low"], row["high"], digits=digits)


def _learned_difference(row, digits: int, percent: bool) -> str:
    if percent:
        return f"{row['difference']:+.1%} [{row['difference_low']:+.1%}, {row['difference_high']:+.1%}]"
    return format_interval(row["difference"], row["difference_low"], row["difference_high"], digits=digits, sign=True)


def _learned_label(slice_name: str, outcome: str) -> str:
    """Column name of one compared outcome of the learned-gate table."""
    if outcome == "answered":
        return "answerable kept"
    if outcome == "refuse":
        return f"{slice_name} refused"
    if outcome == "selective_risk":
        return f"selective risk ({slice_name}, lower is better)"
    return f"{slice_name} {outcome}"


def learned_gate_section(learned: dict, *, baseline_gate: str, default_gate: str, rule: str, default_signals) -> str:
    """The learned gate against one threshold: held-out AUC, outcomes at ``rule``, paired differences, coefficients.

    ``learned`` is the return value of :func:`ragcal.study.learned.evaluate_learned_gates`.
    """
    sets, n_splits = learned["sets"], learned["n_splits"]
    auc, outcomes, coefficients = learned["auc"], learned["outcomes"], learned["coefficients"]
    gates = [baseline_gate, *[f"learned {name}" for name in sets]]
    comparisons = list(dict.fromkeys(auc["comparison"]))
    auc_rows = []
    for gate in gates:
        record = {"gate": gate}
        for comparison in comparisons:
            row = auc[(auc["gate"] == gate) & (auc["comparison"] == comparison)].iloc[0]
            cell = _learned_cell(row, 3, False)
            if gate != baseline_gate:
                cell += f"; {_learned_difference(row, 3, False)}"
            record[f"vs {comparison}"] = cell
        auc_rows.append(record)
    outcome_rows = []
    compared = list(dict.fromkeys(zip(outcomes["slice"], outcomes["outcome"])))
    for gate in gates:
        record = {"gate": gate}
        for slice_name, outcome in compared:
            row = outcomes[
                (outcomes["gate"] == gate) & (outcomes["slice"] == slice_name) & (outcomes["outcome"] == outcome)
            ]
            row = row.iloc[0]
            label = _learned_label(slice_name, outcome)
            cell = _learned_cell(row, 3, True)
            if gate != baseline_gate:
                cell += f"; {_learned_difference(row, 3, True)}"
            record[label] = cell
        outcome_rows.append(record)
    verdicts = []
    for gate in gates[1:]:
        parts = []
        for slice_name, outcome in compared:
            row = outcomes[
                (outcomes["gate"] == gate) & (outcomes["slice"] == slice_name) & (outcomes["outcome"] == outcome)
            ]
            row = row.iloc[0]
            label = _learned_label(slice_name, outcome)
            parts.append(
                f"{label} {row['verdict']} ({row['difference']:+.1%}, better in {row['better']:.0%} of splits)"
            )
        row = auc[(auc["gate"] == gate) & (auc["comparison"] == "all unanswerable")].iloc[0]
        parts.append(f"AUC {row['verdict']} ({row['difference']:+.3f})")
        verdicts.append(f"- `{gate}` against `{baseline_gate}`: " + "; ".join(parts) + ".")
    near = outcomes[(outcomes["slice"] == "near-domain") & (outcomes["outcome"] == "refuse")]
    near = near[near["gate"] != baseline_gate].sort_values("mean", ascending=False)
    best_line = ""
    if not near.empty:
        best = near.iloc[0]
        default_near = near[near["gate"] == default_gate]
        own = coefficients[(coefficients["gate"] == default_gate) & (coefficients["signal"] != "(intercept)")]
        steady = float(np.maximum(own["positive"], 1 - own["positive"]).min()) if not own.empty else float("nan")
        best_line = (
            f"Of the learned gates, `{best['gate']}` refuses the most near-domain questions at {rule} "
            f"({best['mean']:.1%} on average). `ragcal fit-gate --learned` without `--signals` uses `{default_gate}` "
            f"({', '.join(f'`{name}`' for name in default_signals)})"
            + (f", which refuses {default_near.iloc[0]['mean']:.1%} of them" if not default_near.empty else "")
            + (
                "."
                if np.isnan(steady)
                else "; each of its coefficients keeps its sign on every split."
                if steady == 1
                else f"; each of its coefficients keeps its sign on at least {steady:.0%} of the splits."
            )
            + " That default set was picked after looking at whole-set AUCs of these labeled questions, so its "
            "held-out numbers carry some selection effect; `learned all`, which picks nothing, is the clean "
            "comparison."
        )
    coefficient_rows = []
    for gate in gates[1:]:
        part = coefficients[coefficients["gate"] == gate]
        for row in part.to_dict("records"):
            coefficient_rows.append(
                {
                    "gate": gate,
                    "signal": row["signal"],
                    "standardised coefficient": format_interval(
                        row["mean"], row["low"], row["high"], digits=2, sign=True
                    ),
                    "splits with a positive coefficient": f"{row['positive']:.0%}",
                }
            )
    set_lines = [
        f"- `learned {name}`: {', '.join(f'`{signal}`' for signal in signals)}" for name, signals in sets.items()
    ]
    return "\n".join(
        [
            "## A learned gate against one `dense_top1` threshold (nested held-out)",
            "",
            f"A logistic regression (C = 1, mean imputation and standard scaling inside the pipeline) over each signal "
            f"set below, against one `dense_top1` threshold. On each of {n_splits:,} stratified half splits (the same "
            f"seeds as every held-out table here), the model and its `{rule}` threshold are fitted on the calibration "
            "half only (the threshold on 5-fold out-of-fold scores of that half), and everything is counted on the "
            "other half: no learned score is evaluated on a question it was trained on. Cells: mean over splits "
            "[2.5th, 97.5th percentile]; after the semicolon, the paired per-split difference against the threshold "
            "on the same split. The splits overlap, so the percentiles show how much one split can vary, not a "
            "confidence interval of the mean; 'better' or 'worse' means the paired interval excludes 0, 'no worse' "
            "(or 'no better') that its bound is exactly 0: better (worse) on many splits, equal on the rest.",
            "",
            *set_lines,
            "",
            "Held-out AUC:",
            "",
            pd.DataFrame(auc_rows).to_markdown(index=False),
            "",
            f"At `{rule}` (fitted on the calibration half):",
            "",
            pd.DataFrame(outcome_rows).to_markdown(index=False),
            "",
            *verdicts,
            "",
            best_line,
            "",
            "Standardised coefficients (change of the log-odds of 'answerable' per standard deviation of the signal, "
            "with the other signals held fixed) across splits. Correlated signals share their weight, so a small or "
            "unstable coefficient in the larger set does not mean the signal is useless on its own (see the AUC "
            "table above).",
            "",
            pd.DataFrame(coefficient_rows).to_markdown(index=False),
            "",
        ]
    )
