"""Anchoring a rerun to the committed values: the same study on every processor.

A float32 model's outputs depend on the CPU kernels that compute them. On the
same inputs, MiniLM's vectors from torch's AVX2 kernels and MKL's AVX2 path
differ from those of its generic kernels and MKL's SSE2 path (the study's
"another machine": ``ATEN_CPU_CAPABILITY=default MKL_CBWR=COMPATIBLE``) in 96%
of their components, by at most 1.8e-7; an AMD EPYC moved the study's dense
scores by up to 1.2e-7 (``dense_top1``) and 9.4e-7 (``dense_smv``), and
another Intel machine, pinned, by as much. Computing the model in float64 and
rounding to float32 removes that (0 of 76,800 components differed between the
two kernel sets), but costs 2 times the embedding time, where anchoring costs
0.2 s per corpus: see ``benchmarks/bench_anchoring.py``.

So the study does not make the model exact. It compares each model-derived
quantity with the committed one within a tolerance declared per quantity
(:data:`TOLERANCES`), and continues from the committed values when every value
is within it. Everything downstream (thresholds, held-out splits, intervals,
figures) is deterministic statistics of those values, so it is rewritten byte
for byte. Anchored, before anything is computed from them:

- the dense run (``runs/dense.run``; SQuAD commits its top 10 ranks): per
  question, the same chunks in the same order, every score within
  tolerance: the committed scores;
- the dense diagnostics that a score-table column holds as they are (the
  cosines to the corpus and page centroids, :data:`INFO_COLUMNS`);
- the score tables (``scores.csv``, the second model's
  ``scores_wordllama.csv``, the live questions' ``live_scores.csv``, the
  reranker's ``rerank_scores.csv`` when the committed one is the same
  reranker's): the same questions and columns, every column within its
  tolerance: the committed column.

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
    "INFO_COLUMNS",
    "Anchor",
    "copy_reference",
    "AnchorRecord",
    "anchor_report",
    "read_reference_table",
    "tolerance_for",
    "within_tolerance",
]

#: Declared tolerance per quantity: ``(column glob, absolute, relative, why)``, first match wins. A rerun's value
#: ``new`` is the same measurement as the committed ``old`` when ``|new - old| <= absolute + relative * |old|``.
TOLERANCES = (
    (
        "dense_nqc",
        1e-5,
        1e-4,
        "a spread of cosines over the query's cosine to the corpus centroid (about 0.02): relative noise, 1.1e-5 "
        "measured under torch's generic kernels (1.4e-4 absolute), 9.4e-7 absolute on an AMD EPYC",
    ),
    ("dense_smv", 1e-5, 1e-4, "as dense_nqc (1.1e-5 relative measured under torch's generic kernels)"),
    (
        "dense_*",
        1e-5,
        0.0,
        "cosines of float32 embeddings and statistics of them: CPU kernels move them by up to 4.2e-7 (dense_gap "
        "under torch's generic kernels), 10 times below the 4th printed decimal",
    ),
    (
        "rerank_*",
        1e-5,
        0.0,
        "a float32 cross-encoder's sigmoid and differences of them: other kernels on an AMD EPYC (torch's generic "
        "ones with MKL's COMPATIBLE path, or its AVX-512 ones) moved the tiny reranker's 9,450 FastAPI pair scores "
        "by up to 6.0e-7",
    ),
    ("*", 1e-9, 0.0, "float64 statistics of BM25 scores, ranks and counts: kernels move them by about 1e-15"),
)


#: Per-question diagnostics of a dense result (``RetrievalResult.info``) that a score-table column holds as they are.
INFO_COLUMNS = {"centroid_cosine": "dense_centroid_cosine", "page_knn_cosine": "dense_page_knn5"}


def tolerance_for(column: str) -> tuple[float, float]:
    """The declared ``(absolute, relative)`` tolerance of a score-table column (see :data:`TOLERANCES`)."""
    for glob, absolute, relative, _ in TOLERANCES:
        if fnmatch.fnmatchcase(column, glob):
            return absolute, relative
    raise AssertionError("TOLERANCES ends with '*'")


def within_tolerance(new, old, column: str) -> tuple[float, float]:
    """``(largest absolute difference, largest share of the tolerance used)`` of two arrays of one column.

    The share is at most 1 when every value is within :func:`tolerance_for`
    ``column``; NaN in one array and not the other is infinitely far.
    """
    new, old = np.asarray(new, dtype=np.float64), np.asarray(old, dtype=np.float64)
    if new.shape != old.shape or (np.isnan(new) ^ np.isnan(old)).any():
        return math.inf, math.inf
    differ = ~((new == old) | (np.isnan(new) & np.isnan(old)))
    if not differ.any():
        return 0.0, 0.0
    absolute, relative = tolerance_for(column)
    gaps = np.abs(new[differ] - old[differ])
    return float(gaps.max()), float(np.max(gaps / (absolute + relative * np.abs(old[differ]))))


def read_reference_table(path) -> pd.DataFrame | None:
    """A committed score table as its text cells (so nothing is lost), or None when there is none.

    :func:`_floats` reads a column's numbers to the bit: Python's ``float``, as
    every pandas version's own parser is not (pandas 2's default one is not).
    """
    path = Path(path)
    if not path.is_file():
        return None
    return pd.read_csv(path, dtype=str, keep_default_na=False)


def _read_provenance(path) -> dict | None:
    """A committed table's provenance (its ``.meta.json``), or None when it has none or it does not hold."""
    from ..score_tables import read_provenance

    try:
        return read_provenance(path)
    except ValueError:  # a provenance that is not the table's names nothing to compare with
        return None


def _floats(cells) -> np.ndarray:
    """Text cells of a CSV column as float64 to the bit (an empty cell is NaN)."""
    return np.array([float(cell) if cell else math.nan for cell in cells], dtype=np.float64)


def _cells(values) -> list[str]:
    """A column as the text cells ``DataFrame.to_csv`` writes for it (NaN as an empty cell)."""
    return ["" if pd.isna(value) else str(value) for value in values]


@dataclasses.dataclass(frozen=True)
class AnchorRecord:
    """One anchored quantity: where, how many values, the largest deviation, and what was done."""

    path: str
    quantity: str
    n_values: int
    max_deviation: float
    share: float  # the largest share of its declared tolerance a value used: at most 1 within tolerance
    status: str  # "identical", "anchored" (within tolerance: committed values kept) or "beyond tolerance"
    detail: str = ""


#: What an :class:`Anchor` reads of a corpus's committed results: score tables, the dense run, the gate files.
REFERENCE_TABLES = ("scores.csv", "scores_wordllama.csv")
REFERENCE_RUN = "runs/dense.run"
REFERENCE_GATES = "gates/*.json"


def copy_reference(reference_dir, target) -> Path:
    """Copy what an :class:`Anchor` of ``reference_dir`` would read into ``target`` (made); return ``target``.

    For a task that anchors later, while another process may be overwriting ``reference_dir``.
    """
    import shutil

    reference_dir, target = Path(reference_dir), Path(target)
    target.mkdir(parents=True, exist_ok=True)
    files = [reference_dir / name for name in (*REFERENCE_TABLES, REFERENCE_RUN)]
    for source in [*files, *sorted(reference_dir.glob(REFERENCE_GATES))]:
        if source.is_file():
            destination = target / source.relative_to(reference_dir)
            destination.parent.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(source, destination)
    return target


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
        self._provenances = {}
        self._runs = {}
        self._gates = {}
        if self.reference_dir is not None:
            for name in REFERENCE_TABLES:
                table = read_reference_table(self.reference_dir / name)
                if table is not None:
                    self._tables[name] = table
            run = self.reference_dir / REFERENCE_RUN
            if run.is_file():
                from ..runs import read_trec_run

                self._runs["dense"] = read_trec_run(run)
            for path in sorted(self.reference_dir.glob(REFERENCE_GATES)):
                self._gates[path.name] = path.read_text(encoding="utf-8")

    def _name(self, relative: str) -> str:
        return f"{self.label}/{relative}" if self.label else relative

    def retrieved(self, retrieved: dict, query_ids) -> dict:
        """``retrieved`` with its dense scores and domain diagnostics anchored to the committed ones.

        Scores: per question, the chunks of the committed ``runs/dense.run``
        (all of them, or its first ranks when the run is shallower, as
        SQuAD's top 10) in the same order and every score within the
        ``dense_*`` tolerance take the committed scores. Diagnostics: the
        cosines to the corpus and page centroids (:data:`INFO_COLUMNS`) take
        the committed score table's, when within tolerance. One question
        beyond it leaves that quantity as this run computed it for every
        question (the record says which and by how much).
        """
        if "dense" not in retrieved:
            return retrieved
        results = list(retrieved["dense"])
        reference = self._runs.get("dense")
        if reference is not None:
            results = self._anchor_scores(results, query_ids, reference)
        table = self._tables.get("scores.csv")
        if table is not None:
            results = self._anchor_info(results, query_ids, table)
        return {**retrieved, "dense": results}

    def _anchor_scores(self, results, query_ids, reference) -> list:
        by_query = {qid: group for qid, group in reference.groupby("qid", sort=False)}
        anchored, worst, share, n_values, problems = [], 0.0, 0.0, 0, []
        for qid, result in zip(query_ids, results):
            group = by_query.get(str(qid))
            depth = 0 if group is None else len(group)
            if group is None or tuple(group["docid"]) != tuple(result.chunk_ids[:depth]):
                problems.append(f"{qid}: other chunks or another order")
                continue
            committed = group["score"].to_numpy(dtype=np.float64)
            deviation, used = within_tolerance(result.scores[:depth], committed, "dense_score")
            worst, share, n_values = max(worst, deviation), max(share, used), n_values + depth
            if used > 1:
                problems.append(f"{qid}: a score {deviation:.1e} away")
            scores = np.concatenate([committed, result.scores[depth:]])
            if np.any(np.diff(scores) > 0):  # the first unanchored score above the last anchored one: a near tie
                problems.append(f"{qid}: rank {depth + 1} ties rank {depth}")
            anchored.append(dataclasses.replace(result, scores=scores))
        extra = set(by_query) - {str(qid) for qid in query_ids}
        if extra:
            problems.append(f"{len(extra)} committed questions not asked")
        status = "beyond tolerance" if problems else "identical" if worst == 0.0 else "anchored"
        detail = "; ".join(problems[:5])
        self.records.append(
            AnchorRecord(self._name("runs/dense.run"), "dense scores", n_values, worst, share, status, detail)
        )
        return results if problems else anchored

    def _anchor_info(self, results, query_ids, table) -> list:
        committed_ids = list(table["id"])
        if committed_ids != [str(qid) for qid in query_ids]:
            return results
        anchored = results
        for key, column in INFO_COLUMNS.items():
            if column not in table.columns:
                continue
            mine = np.array([result.info.get(key, math.nan) for result in anchored], dtype=np.float64)
            committed = _floats(table[column])
            deviation, used = within_tolerance(mine, committed, column)
            status = "identical" if used == 0.0 else "anchored" if used <= 1 else "beyond tolerance"
            self.records.append(
                AnchorRecord(self._name("scores.csv"), f"dense info {key}", len(mine), deviation, used, status)
            )
            if used <= 1:
                anchored = [
                    dataclasses.replace(result, info={**result.info, key: value}) if key in result.info else result
                    for result, value in zip(anchored, committed)
                ]
        return anchored

    def table(
        self,
        table: pd.DataFrame,
        name: str = "scores.csv",
        *,
        decisions: bool = False,
        columns=None,
        provenance: dict | None = None,
    ) -> pd.DataFrame:
        """``table`` with every column within its tolerance of the committed ``name`` taking the committed values.

        The committed table must hold the same questions in the same order,
        and this run every committed column (columns it adds, such as a
        signal being prototyped, stay its own); otherwise nothing is anchored
        and the record says why. Text and label columns must be equal; a float
        column beyond its tolerance keeps this run's values (and is recorded).
        ``decisions`` counts the decisions of the committed gates that this
        run's own scores change (:attr:`changed_decisions`). ``columns``, when
        given, names the committed columns compared (the others are neither
        required nor anchored): for a table computed another way, such as a
        framework store's, that shares only some of them. ``provenance``,
        when given, holds items that the committed table's provenance
        (``<name>.meta.json``) must hold too: a committed table of another
        model (another reranker, say) is another measurement, and nothing is
        anchored to it or recorded.
        """
        if name not in self._tables and self.reference_dir is not None:  # read before this run writes it
            self._tables[name] = read_reference_table(self.reference_dir / name)
            self._provenances[name] = _read_provenance(self.reference_dir / name)
        reference = self._tables.get(name)
        if reference is None:
            return table
        if provenance is not None:
            committed = self._provenances.get(name) or {}
            if any(committed.get(key) != value for key, value in provenance.items()):
                return table
        if columns is not None:
            compared = set(columns)
            reference = reference[[column for column in reference.columns if column in compared]]
        missing = [column for column in reference.columns if column not in table.columns]
        if missing or len(reference) != len(table):
            detail = f"{len(table)} questions for {len(reference)}; columns not computed: {missing[:5]}"
            self.records.append(
                AnchorRecord(self._name(name), "score table", 0, math.inf, math.inf, "beyond tolerance", detail)
            )
            return table
        anchored, committed = table.copy(), table.copy()
        for column in reference.columns:
            new, old = table[column], reference[column]
            if pd.api.types.is_float_dtype(new):
                try:
                    old = _floats(old)
                except ValueError:  # text where this run has numbers
                    old = np.full(len(new), math.inf)
                deviation, used = within_tolerance(new.to_numpy(), old, column)
                committed[column] = old
                if used <= 1:
                    anchored[column] = old
                status = "identical" if used == 0.0 else "anchored" if used <= 1 else "beyond tolerance"
                self.records.append(AnchorRecord(self._name(name), column, len(new), deviation, used, status))
            elif _cells(new) != list(old):
                self.records.append(
                    AnchorRecord(
                        self._name(name), column, len(new), math.inf, math.inf, "beyond tolerance", "other values"
                    )
                )
                return table
        if decisions:
            self._count_decisions(table, committed)
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
        worst = max(by_status["anchored"], key=lambda record: record.share)
        lines.append(
            f"  largest deviation kept: {worst.max_deviation:.2e} ({worst.path} {worst.quantity}), "
            f"{worst.share:.0%} of its declared tolerance"
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
            f"  beyond tolerance: {record.path} {record.quantity}: deviation {record.max_deviation:.2e}, "
            f"{record.share:.1f} times its declared tolerance" + (f" ({record.detail})" if record.detail else "")
        )
    return lines
