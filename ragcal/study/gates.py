"""The gate evaluation of ``make reproduce``: every seed gate, held out, per slice.

Gates compared (all on the bundled corpus's score table):

- ``threshold <rule>``: a :class:`~ragcal.gates.ThresholdGate` on
  ``dense_top1`` for each rule of :data:`ragcal.study.report.HELDOUT_RULES`;
- ``floor-gap keep@p``: seed 001's :class:`~ragcal.gates.FloorGapGate`, fitted
  by the 2-D search of :func:`~ragcal.gates.fit_floor_gap`;
- ``chain keep@0.95``: seed 003's default :class:`~ragcal.gates.FallbackChain`.

Every number is held out: each gate is fitted on the calibration half of each
of the 1,000 stratified splits that the threshold rules use, and counted on the
other half, including whether each answer passes a gold passage on
(supported answers, unsupported answers and selective risk). Split 0 (the published protocol) also gets exact binomial
intervals. Passage metrics come from the first ``n_passage_splits`` splits.
"""

from __future__ import annotations

from functools import partial
from pathlib import Path

import numpy as np
import pandas as pd

from .._io import atomic_write_text
from ..calibration import split_by_slice
from ..gates import (
    fit_default_chain,
    fit_floor_gap,
    fit_threshold_gate,
    floor_gap_sweep,
    gate_outcomes,
    heldout_gates,
    paired_differences,
    passage_metrics,
    save_gate,
    summarize_heldout_gates,
    support_inputs,
)
from ..gates.support import table_support

__all__ = ["AT_95", "BASELINE_GATE", "N_PASSAGE_SPLITS", "gate_fitters", "evaluate_gates"]

#: The gate every other one is compared with, split by split.
BASELINE_GATE = "threshold keep@0.95"
#: Splits whose held-out answerable questions score the passages passed on (full decisions, so slower).
N_PASSAGE_SPLITS = 100
#: Gates fitted to keep 95% of answerable calibration questions (the comparison of the summary).
AT_95 = ("threshold keep@0.95", "floor-gap keep@0.95", "chain keep@0.95")


def gate_fitters(rules) -> dict:
    """``{gate name: fit(calibration table) -> Gate}`` for the study's gates."""
    fitters = {f"threshold {rule}": partial(fit_threshold_gate, signal="dense_top1", rule=rule) for rule in rules}
    fitters["floor-gap keep@1.0"] = partial(fit_floor_gap, rule="keep@1.0")
    fitters["floor-gap keep@0.95"] = partial(fit_floor_gap, rule="keep@0.95")
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
    for split in range(n_splits):
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
