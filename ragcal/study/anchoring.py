"""Anchoring a rerun to the committed values: the same study on every processor.

A float32 model's outputs depend on the CPU kernels that compute them. On the
same inputs, MiniLM's vectors from torch's AVX2 kernels and MKL's AVX2 path
differ from those of its generic kernels and MKL's SSE2 path (the study's
"another machine": ``ATEN_CPU_CAPABILITY=default MKL_CBWR=COMPATIBLE``) in 96%
of their components, by at most 1.8e-7; an AMD EPYC moved the study's dense
scores by up to 1.2e-7 (``dense_top1``) and 9.4e-7 (``dense_smv``). Computing
the model in float64 and rounding to float32 removes that (0 of 115,200
components differed between the two kernel sets), but costs 2.1 times the
embedding time: see ``benchmarks/bench_anchoring.py``.

So the study does not make the model exact. It compares each model-derived
quantity with the committed one within a tolerance declared per quantity
(:data:`TOLERANCES`), and continues from the committed values when every value
is within it. Everything downstream (thresholds, held-out splits, intervals,
figures) is deterministic statistics of those values, so it is rewritten byte
for byte. Two quantities are anchored, before anything is computed from them:

- the dense run (``runs/dense.run``): per question, the same chunks in the
  same order, every score within tolerance: the committed scores;
- the score table (``scores.csv``, and the second model's
  ``scores_wordllama.csv``): the same questions and columns, every column
  within its tolerance: the committed column.

A quantity beyond tolerance (a chunk order that changed, a score that moved
more than declared) keeps this run's values and is reported; so is the number
of decisions of the committed gates (``gates/*.json``) that this run's own
scores would change, which must be 0. :func:`anchor_report` says all of it.
"""

from __future__ import annotations

import dataclasses
import fnmatch
import math
from pathlib import Path

import numpy as np
import pandas as pd

__all__ = [
    "TOLERANCES",
    "Anchor",
    "AnchorRecord",
    "anchor_report",
    "read_reference_table",
    "tolerance_for",
]

#: Declared tolerance per quantity: ``(column glob, absolute tolerance, why)``, first match wins. A rerun's value
#: within it of the committed one is the same measurement; the committed value is kept.
TOLERANCES = (
    (
        "dense_nqc",
        5e-5,
        "a spread of cosines over their mean: it amplifies their noise (2.3e-6 measured between two Intel machines)",
    ),
    ("dense_smv", 5e-5, "as dense_nqc (3.1e-6 measured between two Intel machines, 9.4e-7 on an AMD EPYC)"),
    (
        "dense_*",
        1e-5,
        "cosines of float32 embeddings and statistics of them: CPU kernels move them by up to 2e-7 (1.8e-7 measured "
        "between torch's AVX2 and generic kernels), 10 times below the 4th printed decimal",
    ),
    ("*", 1e-9, "float64 statistics of BM25 scores, ranks and counts: kernels move them by about 1e-15"),
)


def tolerance_for(column: str) -> float:
    """The declared tolerance of a score-table column (see :data:`TOLERANCES`)."""
    for glob, tolerance, _ in TOLERANCES:
        if fnmatch.fnmatchcase(column, glob):
            return tolerance
    raise AssertionError("TOLERANCES ends with '*'")


def read_reference_table(path) -> pd.DataFrame | None:
    """A committed score table read to the bit (shortest round-trip floats), or None when there is none."""
    path = Path(path)
    if not path.is_file():
        return None
    return pd.read_csv(path, dtype={"id": str}, float_precision="round_trip")


@dataclasses.dataclass(frozen=True)
class AnchorRecord:
    """One anchored quantity: where, how many values, the largest deviation, and what was done."""

    path: str
    quantity: str
    n_values: int
    max_deviation: float
    tolerance: float
    status: str  # "identical", "anchored" (within tolerance: committed values kept) or "beyond tolerance"
    detail: str = ""


def _deviation(new: np.ndarray, old: np.ndarray) -> float:
    """Largest absolute difference of two float arrays; inf where one is NaN and the other is not."""
    new, old = np.asarray(new, dtype=np.float64), np.asarray(old, dtype=np.float64)
    if new.shape != old.shape:
        return math.inf
    both_nan = np.isnan(new) & np.isnan(old)
    if (np.isnan(new) ^ np.isnan(old)).any():
        return math.inf
    same = (new == old) | both_nan  # equal infinities too
    if same.all():
        return 0.0
    return float(np.max(np.abs(new[~same] - old[~same])))


class Anchor:
    """Anchors one run's model-derived quantities to a folder of committed results.

    Parameters
    ----------
    reference_dir : str or Path or None
        The committed results of one corpus (``results/<corpus>/``), read
        before this run overwrites them. None (or a folder without the files)
        anchors nothing: every quantity is this run's own.
    label : str
        How records name the folder (``fastapi``, ...).
    """

    def __init__(self, reference_dir, *, label: str = ""):
        self.reference_dir = None if reference_dir is None else Path(reference_dir)
        self.label = label
        self.records: list[AnchorRecord] = []
        self.changed_decisions: dict[str, int] = {}
        # Read now: the run overwrites these files.
        self._tables = {}
        self._runs = {}
        self._gates = {}
        if self.reference_dir is not None:
            for name in ("scores.csv", "scores_wordllama.csv"):
                table = read_reference_table(self.reference_dir / name)
                if table is not None:
                    self._tables[name] = table
            run = self.reference_dir / "runs" / "dense.run"
            if run.is_file():
                from ..runs import read_trec_run

                self._runs["dense"] = read_trec_run(run)
            for path in sorted((self.reference_dir / "gates").glob("*.json")):
                self._gates[path.name] = path.read_text(encoding="utf-8")

    def _name(self, relative: str) -> str:
        return f"{self.label}/{relative}" if self.label else relative

    def retrieved(self, retrieved: dict, query_ids) -> dict:
        """``retrieved`` with its dense scores anchored to the committed ``runs/dense.run``.

        Per question: the same chunk ids in the same order and every score
        within the ``dense_*`` tolerance take the committed scores. One
        question beyond it leaves every dense score as this run computed it
        (the record says which and by how much).
        """
        reference = self._runs.get("dense")
        if reference is None or "dense" not in retrieved:
            return retrieved
        tolerance = tolerance_for("dense_score")
        by_query = {qid: group for qid, group in reference.groupby("qid", sort=False)}
        results = retrieved["dense"]
        anchored, worst, n_values, problems = [], 0.0, 0, []
        for qid, result in zip(query_ids, results):
            group = by_query.get(str(qid))
            if group is None or tuple(group["docid"]) != tuple(result.chunk_ids):
                problems.append(f"{qid}: other chunks or another order")
                anchored.append(result)
                continue
            committed = group["score"].to_numpy(dtype=np.float64)
            deviation = _deviation(result.scores, committed)
            worst = max(worst, deviation)
            n_values += len(committed)
            if deviation > tolerance:
                problems.append(f"{qid}: a score {deviation:.1e} away")
            anchored.append(dataclasses.replace(result, scores=committed))
        extra = set(by_query) - {str(qid) for qid in query_ids}
        if extra:
            problems.append(f"{len(extra)} committed questions not asked")
        relative = "runs/dense.run"
        if problems:
            self.records.append(
                AnchorRecord(
                    self._name(relative),
                    "dense scores",
                    n_values,
                    worst,
                    tolerance,
                    "beyond tolerance",
                    "; ".join(problems[:5]),
                )
            )
            return retrieved
        status = "identical" if worst == 0.0 else "anchored"
        self.records.append(AnchorRecord(self._name(relative), "dense scores", n_values, worst, tolerance, status))
        return {**retrieved, "dense": anchored}

    def table(self, table: pd.DataFrame, name: str = "scores.csv", *, decisions: bool = False) -> pd.DataFrame:
        """``table`` with every column within its tolerance of the committed ``name`` taking the committed values.

        The committed table must hold the same questions in the same order,
        and this run every committed column (columns it adds, such as a
        signal being prototyped, stay its own); otherwise nothing is anchored
        and the record says why. Text and label columns must be equal; a float
        column beyond its tolerance keeps this run's values (and is recorded).
        ``decisions`` counts the decisions of the committed gates that this
        run's own scores change (:attr:`changed_decisions`).
        """
        reference = self._tables.get(name)
        if reference is None:
            return table
        missing = [column for column in reference.columns if column not in table.columns]
        if missing or len(reference) != len(table):
            self.records.append(
                AnchorRecord(
                    self._name(name),
                    "score table",
                    0,
                    math.inf,
                    0.0,
                    "beyond tolerance",
                    f"{len(table)} questions for {len(reference)}; columns not computed: {missing[:5]}",
                )
            )
            return table
        anchored = table.copy()
        for column in reference.columns:
            new, old = table[column], reference[column]
            if pd.api.types.is_float_dtype(new) and pd.api.types.is_numeric_dtype(old):
                deviation, tolerance = _deviation(new.to_numpy(), old.to_numpy()), tolerance_for(column)
                if deviation <= tolerance:
                    anchored[column] = old.to_numpy(dtype=np.float64)
                status = (
                    "identical" if deviation == 0.0 else "anchored" if deviation <= tolerance else "beyond tolerance"
                )
                self.records.append(AnchorRecord(self._name(name), column, len(new), deviation, tolerance, status))
            elif not new.astype(str).reset_index(drop=True).equals(old.astype(str)):
                self.records.append(
                    AnchorRecord(self._name(name), column, len(new), math.inf, 0.0, "beyond tolerance", "other values")
                )
                return table
        if decisions:
            self._count_decisions(table, reference)
        return anchored

    def _count_decisions(self, table: pd.DataFrame, reference: pd.DataFrame) -> None:
        """How many decisions of each committed gate this run's own scores change (must be 0)."""
        import json

        from ..gates.base import gate_from_dict

        for name, text in self._gates.items():
            gate = gate_from_dict(json.loads(text)["gate"])
            if not set(gate.columns) <= set(table.columns):
                continue
            mine = gate.decide_table(table)["action"].to_numpy()
            theirs = gate.decide_table(reference)["action"].to_numpy()
            self.changed_decisions[self._name(f"gates/{name}")] = int((mine != theirs).sum())


def anchor_report(anchors) -> list[str]:
    """The anchoring's lines of the verdict: what was anchored, the largest deviation, decisions changed."""
    records = [record for anchor in anchors for record in anchor.records]
    decisions = {name: count for anchor in anchors for name, count in anchor.changed_decisions.items()}
    if not records:
        return ["anchoring: no committed values to compare with (nothing anchored)"]
    by_status = {
        status: [r for r in records if r.status == status] for status in ("identical", "anchored", "beyond tolerance")
    }
    lines = [
        f"anchoring: {len(records)} model-derived quantities compared with the committed ones: "
        f"{len(by_status['identical'])} identical, {len(by_status['anchored'])} within their declared tolerance "
        f"(committed values kept), {len(by_status['beyond tolerance'])} beyond it"
    ]
    if by_status["anchored"]:
        worst = max(by_status["anchored"], key=lambda record: record.max_deviation / record.tolerance)
        lines.append(
            f"  largest deviation kept: {worst.max_deviation:.2e} ({worst.path} {worst.quantity}, tolerance "
            f"{worst.tolerance:.0e})"
        )
    lines.append(
        f"  decisions of the committed gates changed by this run's own scores: {sum(decisions.values())}"
        + (
            f" ({', '.join(f'{name}: {count}' for name, count in decisions.items() if count)})"
            if any(decisions.values())
            else ""
        )
        + f" (over {len(decisions)} gates)"
    )
    for record in by_status["beyond tolerance"]:
        lines.append(
            f"  beyond tolerance: {record.path} {record.quantity}: deviation {record.max_deviation:.2e} > "
            f"{record.tolerance:.0e}" + (f" ({record.detail})" if record.detail else "")
        )
    return lines
