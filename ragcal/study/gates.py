"""The gate evaluation of ``make reproduce``: every seed gate, held out, per slice.

Gates compared (all on the bundled corpus's score table):

- ``threshold <rule>``: a :class:`~ragcal.gates.ThresholdGate` on
  ``dense_top1`` for each rule of :data:`ragcal.study.report.HELDOUT_RULES`;
- ``floor-gap keep@p``: seed 001's :class:`~ragcal.gates.FloorGapGate`, fitted
  by the 2-D search of :func:`~ragcal.gates.fit_floor_gap_gate`;
- ``chain keep@0.95``: seed 003's default :class:`~ragcal.gates.FallbackChain`.

Every number is held out: each gate is fitted on the calibration half of each
of the 1,000 stratified splits that the threshold rules use, and counted on the
other half, including whether each answer passes a gold passage on
(supported answers, unsupported answers and selective risk). Split 0 (the published protocol) also gets exact binomial
intervals. Passage metrics come from the first ``n_passage_splits`` splits.
:func:`gates_section` words the tables for ``summary.md``.
"""

from __future__ import annotations

from functools import partial
from pathlib import Path

import numpy as np
import pandas as pd

from .._io import atomic_write_text
from ..calibration import split_by_slice
from ..gates import (
    fit_floor_gap_gate,
    fit_threshold_gate,
    floor_gap_sweep,
    gate_outcomes,
    heldout_gates,
    save_gate,
    summarize_heldout_gates,
)
from ..gates.chain import fit_default_chain
from ..gates.evaluate import paired_differences, passage_metrics
from ..gates.support import support_inputs, table_support
from ..progress import LONG_LOOP, progress

__all__ = ["AT_95", "BASELINE_GATE", "N_PASSAGE_SPLITS", "gate_fitters", "evaluate_gates", "gates_section"]

#: The gate every other one is compared with, split by split.
BASELINE_GATE = "threshold keep@0.95"
#: Splits whose held-out answerable questions score the passages passed on (full decisions, so slower).
N_PASSAGE_SPLITS = 100
#: Gates fitted to keep 95% of answerable calibration questions (the comparison of the summary).
AT_95 = ("threshold keep@0.95", "floor-gap keep@0.95", "chain keep@0.95")


def gate_fitters(rules) -> dict:
    """``{gate name: fit(calibration table) -> Gate}`` for the study's gates."""
    fitters = {f"threshold {rule}": partial(fit_threshold_gate, signal="dense_top1", rule=rule) for rule in rules}
    fitters["floor-gap keep@1.0"] = partial(fit_floor_gap_gate, rule="keep@1.0")
    fitters["floor-gap keep@0.95"] = partial(fit_floor_gap_gate, rule="keep@0.95")
    fitters["chain keep@0.95"] = partial(fit_default_chain, rule="keep@0.95")
    return fitters


def _file_name(gate_name: str) -> str:
    return gate_name.replace(" ", "_").replace("@", "").replace(".", "") + ".json"


def _split_zero(table: pd.DataFrame, fitters: dict, random_state, results, gold) -> pd.DataFrame:
    calibration = split_by_slice(table["slice"].to_numpy(), random_state=random_state)
    evaluation = table[~calibration].reset_index(drop=True)
    held = np.flatnonzero(~calibration)
    frames = []
    for name, fit in fitters.items():
        gate = fit(table[calibration])
        decisions = gate.decide_table(evaluation)
        supported = table_support(
            gate, evaluation, [results[row] for row in held], [gold[row] for row in held], decisions=decisions
        )
        frames.append(gate_outcomes(evaluation, decisions, supported=supported).assign(gate=name))
    return pd.concat(frames, ignore_index=True)


def _passage_table(table, queries, per_query, fitters, names, *, n_splits, random_state) -> pd.DataFrame:
    gold = {row.id: set(row.gold) for row in queries.itertuples() if row.answerable}
    ids = list(table["id"])
    rows = []
    for split in progress(range(n_splits), desc="passages held out", unit="split", disable=n_splits < LONG_LOOP):
        calibration = split_by_slice(table["slice"].to_numpy(), random_state=random_state + split)
        held = [position for position in np.nonzero(~calibration)[0] if ids[position] in gold]
        for name in names:
            gate = fitters[name](table[calibration])
            decisions = {ids[position]: gate.decide(per_query[position]) for position in held}
            lists = {ids[position]: per_query[position]["dense"] for position in held}
            metrics = passage_metrics(decisions, gold, lists)
            if metrics.empty:  # the gate answered no held-out answerable question in this split
                continue
            rows.append({"gate": name, "split": split, "scored": len(metrics), **metrics.drop(columns="id").mean()})
    per_split = pd.DataFrame(rows)
    measures = [column for column in per_split.columns if column not in ("gate", "split", "scored")]
    grouped = per_split.groupby("gate", sort=False)[measures]
    summary = grouped.mean()
    for suffix, quantile in (("_p5", 0.05), ("_p95", 0.95)):
        summary = summary.join(grouped.quantile(quantile).add_suffix(suffix))
    return summary[[f"{measure}{suffix}" for measure in measures for suffix in ("", "_p5", "_p95")]].reset_index()


def evaluate_gates(
    table: pd.DataFrame,
    queries: pd.DataFrame,
    retrieved: dict,
    results_dir,
    *,
    rules,
    provenance: dict,
    n_splits: int = 1000,
    n_passage_splits: int = N_PASSAGE_SPLITS,
    random_state=0,
    log=print,
) -> dict:
    """Write ``gates.csv``, ``gate_comparison.csv``, ``gate_passages.csv``, ``floor_gap_sweep.csv`` and ``gates/*.json``.

    Returns
    -------
    dict of str to DataFrame or dict
        ``gates`` (held-out and split-0 outcomes), ``comparison`` (paired
        differences against :data:`BASELINE_GATE`), ``passages``,
        ``floor_gap_sweep``, ``fitted`` (gates fitted on the whole set).
    """
    results_dir = Path(results_dir)
    fitters = gate_fitters(rules)
    table = table.reset_index(drop=True)
    results, gold = support_inputs(queries, retrieved)
    heldout = heldout_gates(table, fitters, n_splits=n_splits, random_state=random_state, results=results, gold=gold)
    summary = summarize_heldout_gates(heldout)
    first = _split_zero(table, fitters, random_state, results, gold)
    first = first[["gate", "slice", "outcome", "k", "n", "share", "low", "high"]]
    first = first.rename(columns={column: f"split0_{column}" for column in ("k", "n", "share", "low", "high")})
    gates = summary.rename(columns={column: f"heldout_{column}" for column in summary.columns[3:]}).merge(
        first, on=["gate", "slice", "outcome"], how="left"
    )
    comparison = pd.concat(
        [
            paired_differences(heldout, BASELINE_GATE, slice_name=slice_name, outcome=outcome).assign(
                slice=slice_name, outcome=outcome
            )
            for slice_name, outcome in (
                ("answerable", "answered"),
                ("near-domain", "refuse"),
                ("unrelated", "refuse"),
                ("all unanswerable", "refuse"),
                ("all unanswerable", "answer"),
            )
            if slice_name in set(heldout["slice"])
        ],
        ignore_index=True,
    )
    comparison = comparison[comparison["gate"] != BASELINE_GATE]
    passages = _passage_table(
        table, queries, results, fitters, AT_95, n_splits=n_passage_splits, random_state=random_state
    )
    sweep = floor_gap_sweep(table)
    fitted = {}
    gates_dir = results_dir / "gates"
    for name in AT_95:
        rule = name.split(" ")[-1]
        fitted[name] = fitters[name](table)
        save_gate(
            gates_dir / _file_name(name),
            fitted[name],
            rule=rule,
            fitted={"n_calibration": len(table), "note": "fitted on every labeled question, for use"},
            provenance=provenance,
        )
    for name, frame in (
        ("gates", gates),
        ("gate_comparison", comparison),
        ("gate_passages", passages),
        ("floor_gap_sweep", sweep),
    ):
        atomic_write_text(results_dir / f"{name}.csv", frame.to_csv(index=False, float_format="%.4f"))
        log(f"wrote {results_dir / name}.csv")
    log(f"wrote {gates_dir}/ ({len(fitted)} gates fitted on the whole set)")
    return {
        "gates": gates,
        "comparison": comparison,
        "passages": passages,
        "floor_gap_sweep": sweep,
        "fitted": fitted,
        "heldout_gates": heldout,
    }


def _held_cell(gates: pd.DataFrame, gate: str, slice_name: str, outcome: str) -> str:
    row = gates[(gates["gate"] == gate) & (gates["slice"] == slice_name) & (gates["outcome"] == outcome)]
    if row.empty:
        return "n/a"
    row = row.iloc[0]
    return f"{row['heldout_mean']:.0%} ({row['heldout_p5']:.0%} to {row['heldout_p95']:.0%})"


def _split_zero_cell(gates: pd.DataFrame, gate: str, slice_name: str, outcome: str) -> str:
    row = gates[(gates["gate"] == gate) & (gates["slice"] == slice_name) & (gates["outcome"] == outcome)].iloc[0]
    return f"{int(row['split0_k'])}/{int(row['split0_n'])} [{row['split0_low']:.0%}, {row['split0_high']:.0%}]"


def gates_section(
    gates: pd.DataFrame,
    comparison: pd.DataFrame,
    passages: pd.DataFrame,
    *,
    baseline: str,
    n_splits: int,
    n_passage_splits: int,
    at_95=(),
    fitted=None,
) -> str:
    """Held-out gate outcomes per slice, the comparison at 95% answerable kept, and the passages passed on."""
    names = list(dict.fromkeys(gates["gate"]))
    slices = [
        name
        for name in dict.fromkeys(gates["slice"])
        if name not in ("answerable", "all unanswerable", "all questions")
    ]
    with_support = (gates["outcome"] == "selective_risk").any()
    lines = [
        "## Gates: answer, hedge or refuse",
        "",
        f"Each gate is fitted on the calibration half of each of {n_splits:,} stratified splits (the same splits as the "
        "threshold rules above) and counted on the other half. Cells: mean held-out share (5th to 95th percentile "
        "over splits). *Abstention accuracy* (seed 000) is the share of unanswerable questions refused. The "
        "`threshold` gates are one `dense_top1` threshold per rule; `floor-gap` is seed 001's check fitted by a "
        "2-D search over floor and minimum gap; `chain` is seed 003's fallback chain (hybrid, keyword-only BM25, "
        "broad dense search that hedges, refuse).",
        "",
    ]
    rows = []
    for name in names:
        record = {"gate": name, "answerable answered": _held_cell(gates, name, "answerable", "answered")}
        record["answerable hedged"] = _held_cell(gates, name, "answerable", "hedge")
        for slice_name in slices:
            record[f"{slice_name} refused"] = _held_cell(gates, name, slice_name, "refuse")
        record["abstention accuracy"] = _held_cell(gates, name, "all unanswerable", "refuse")
        record["split 0: abstention, exact 95% CI"] = _split_zero_cell(gates, name, "all unanswerable", "refuse")
        rows.append(record)
    lines += [pd.DataFrame(rows).to_markdown(index=False), ""]
    if with_support:
        lines += [
            "**Supported answers.** An answer is *supported* when the question is answerable and a passage passed on "
            "comes from a gold page; every other answer (an unanswerable question answered, or an answerable one "
            "answered from the wrong pages) is *unsupported*. *Selective risk* is unsupported answers over answers. "
            "Same splits and cells as above; split 0 with exact (Clopper-Pearson) 95% intervals.",
            "",
        ]
        support_rows = []
        for name in names:
            support_rows.append(
                {
                    "gate": name,
                    "answered (all questions)": _held_cell(gates, name, "all questions", "answered"),
                    "answerable: supported": _held_cell(gates, name, "answerable", "supported"),
                    "answerable: answered, no gold passed on": _held_cell(gates, name, "answerable", "unsupported"),
                    "unsupported (all questions)": _held_cell(gates, name, "all questions", "unsupported"),
                    "selective risk": _held_cell(gates, name, "all questions", "selective_risk"),
                    "split 0: selective risk, exact 95% CI": _split_zero_cell(
                        gates, name, "all questions", "selective_risk"
                    ),
                }
            )
        lines += [pd.DataFrame(support_rows).to_markdown(index=False), ""]
    stages = gates[gates["outcome"].str.startswith("stage:")]
    if not stages.empty:
        chain_rows = []
        for gate, group in stages.groupby("gate", sort=False):
            for slice_name, per_slice in group.groupby("slice", sort=False):
                record = {"gate": gate, "slice": slice_name}
                for row in per_slice.itertuples():
                    record[row.outcome.removeprefix("stage:")] = f"{row.heldout_mean:.0%}"
                chain_rows.append(record)
        lines += [
            "Which chain stage decided (held-out share of each slice; the rest were refused):",
            "",
            pd.DataFrame(chain_rows).to_markdown(index=False),
            "",
        ]
    lines += [
        "### Which gate is best at 95% answerable kept",
        "",
        f"Gates fitted to keep 95% of the answerable calibration questions, each compared with `{baseline}` on the "
        "same split: mean paired difference in held-out share, with the 2.5th to 97.5th percentile over splits.",
        "",
    ]
    selected = comparison[comparison["gate"].isin(at_95)]
    table = []
    for gate, group in selected.groupby("gate", sort=False):
        record = {"gate": gate}
        for row in group.itertuples():
            record[f"{row.slice} {row.outcome}"] = f"{row.mean:+.1%} [{row.low:+.1%}, {row.high:+.1%}]"
        table.append(record)
    lines += [pd.DataFrame(table).to_markdown(index=False), ""]
    verdicts = []
    for gate, group in selected.groupby("gate", sort=False):
        near = group[(group["slice"] == "near-domain") & (group["outcome"] == "refuse")]
        kept = group[(group["slice"] == "answerable") & (group["outcome"] == "answered")]
        if near.empty:
            continue
        near, kept = near.iloc[0], kept.iloc[0]
        if near["low"] > 0:
            verdict = f"refuses more near-domain questions than one threshold ({near['mean']:+.1%})"
        elif near["high"] < 0 or (near["high"] <= 0 and near["mean"] < 0 and kept["mean"] > 0):
            verdict = (
                f"does not beat one threshold: it answers more (answerable {kept['mean']:+.1%}) and so refuses fewer "
                f"near-domain questions ({near['mean']:+.1%})"
            )
        else:
            verdict = (
                f"cannot be told apart from one threshold on this set (near-domain refused {near['mean']:+.1%}, "
                f"interval [{near['low']:+.1%}, {near['high']:+.1%}])"
            )
        verdicts.append(f"- `{gate}` {verdict}.")
    lines += verdicts + [""]
    if fitted:
        lines += ["Fitted on every labeled question (saved in `results/gates/`, usable with `ragcal ask --gate`):", ""]
        lines += [f"- `{name}`: `{json_line}`" for name, json_line in fitted.items()]
        lines.append("")
    columns = {
        "passages": "passages",
        "precision@cut": "precision@cut",
        "recall@cut": "recall@cut",
        "precision@5": "precision@5",
        "recall@5": "recall@5",
        "precision@10": "precision@10",
        "recall@10": "recall@10",
    }
    rows = []
    for row in passages.to_dict("records"):
        record = {"gate": row["gate"]}
        for column, label in columns.items():
            digits = 1 if column == "passages" else 2
            record[label] = (
                f"{row[column]:.{digits}f} ({row[column + '_p5']:.{digits}f} to {row[column + '_p95']:.{digits}f})"
            )
        rows.append(record)
    lines += [
        "### Passages passed on: the cut against a fixed top-k",
        "",
        f"Answerable held-out questions that the gate answered, first {n_passage_splits} splits; page-level context precision (share "
        "of passages from a gold page) and recall (share of gold pages among them), mean over splits (5th to 95th "
        "percentile). The cut passes on the passages that clear the gate's bar, at most 10 (20 in the chain's broad "
        "stage); top-k takes the first k dense passages whatever their score. Within a row, the cut and top-k are "
        "scored on the same questions; across rows the questions differ (each gate answers its own), so compare "
        "the cut with top-k within a row rather than one gate's precision with another's.",
        "",
        pd.DataFrame(rows).to_markdown(index=False),
        "",
    ]
    return "\n".join(lines)
