"""How gates do per slice, on questions they were not fitted on.

- :func:`gate_outcomes`: answer / hedge / refuse shares per slice with exact
  (Clopper-Pearson) intervals, abstention accuracy, and which chain stage fired.
- :func:`heldout_gates`: the repeated held-out protocol of
  :func:`ragcal.calibration.heldout_outcomes` (same stratified half splits,
  same seeds) for any gate: fit on the calibration half, decide on the other.
- :func:`passage_metrics`: context precision and recall of the passages a gate
  passes on (the cut) beside a fixed top-5 and top-10.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from ..calibration import split_by_slice
from ..chunking import pages_of
from ..metrics import clopper_pearson
from ..progress import LONG_LOOP, progress
from ..score_tables import check_score_table, unanswerable_slices
from .base import ACTIONS, decided_arrays, decisions_as_arrays
from .support import SupportMemo

__all__ = [
    "answered_shares",
    "ALL_UNANSWERABLE",
    "ALL_QUESTIONS",
    "gate_outcomes",
    "heldout_gates",
    "outcome_counts",
    "outcome_groups",
    "summarize_heldout_gates",
    "paired_differences",
    "passage_metrics",
]

#: Name of the pooled unanswerable group in outcome tables.
ALL_UNANSWERABLE = "all unanswerable"
#: Name of the group of every question (support outcomes only).
ALL_QUESTIONS = "all questions"


def outcome_groups(table: pd.DataFrame, *, everyone: bool = False):
    """``[(name, row mask)]``: the answerable questions, each unanswerable slice, all unanswerable, (all questions)."""
    answerable = table["answerable"].to_numpy(dtype=bool)
    slices = table["slice"].to_numpy()
    groups = [("answerable", answerable)]
    groups += [(name, (slices == name) & ~answerable) for name in unanswerable_slices(table)]
    groups.append((ALL_UNANSWERABLE, ~answerable))
    if everyone:
        groups.append((ALL_QUESTIONS, np.ones(answerable.size, dtype=bool)))
    return groups


def outcome_counts(table, decisions, stages=(), supported=None, *, groups=None):
    """``[(slice, outcome, k, n)]`` for actions, 'answered', each stage and, with ``supported``, the support outcomes.

    With ``supported`` (a boolean per row: answered with a gold passage), every
    group also gets ``supported`` and ``unsupported`` (over the group) and
    ``selective_risk`` (unsupported over the group's answers), and the group
    ``all questions`` is added. ``groups`` is ``outcome_groups(table, everyone=supported
    is not None)`` when the caller counts several gates on one table.
    """
    arrays = decisions_as_arrays(decisions)
    action, stage = arrays.action, arrays.stage
    answered = action != "refuse"
    if supported is not None:
        supported = np.asarray(supported, dtype=bool) & answered
    rows = []
    for name, mask in outcome_groups(table, everyone=supported is not None) if groups is None else groups:
        n = int(mask.sum())
        for outcome in ACTIONS:
            rows.append((name, outcome, int((action[mask] == outcome).sum()), n))
        n_answered = int(answered[mask].sum())
        rows.append((name, "answered", n_answered, n))
        for stage_name in stages:
            rows.append((name, f"stage:{stage_name}", int((stage[mask] == stage_name).sum()), n))
        if supported is not None:
            n_supported = int(supported[mask].sum())
            rows.append((name, "supported", n_supported, n))
            rows.append((name, "unsupported", n_answered - n_supported, n))
            rows.append((name, "selective_risk", n_answered - n_supported, n_answered))
    return rows


def gate_outcomes(
    table: pd.DataFrame, decisions: pd.DataFrame, *, supported=None, confidence: float = 0.95
) -> pd.DataFrame:
    """Per-slice shares of each action, with exact binomial intervals.

    Parameters
    ----------
    table : DataFrame
        Score table (``answerable``, ``slice``), aligned row for row with ``decisions``.
    decisions : DataFrame
        ``action`` and ``stage`` per row, from :meth:`Gate.decide_table`.
    supported : array-like of bool, default=None
        Per row: answered with a passage from a gold page
        (:func:`ragcal.gates.support.supported_answers`). Adds the support
        outcomes below.

    Returns
    -------
    DataFrame
        ``slice, outcome, k, n, share, low, high``. Outcomes: ``answer``,
        ``hedge``, ``refuse``, ``answered`` (answer or hedge) and
        ``stage:<name>`` for every chain stage that appears. The ``refuse``
        share of ``all unanswerable`` is the abstention accuracy (seed 000),
        and ``answered`` of ``answerable`` the share of answerable questions kept.
        With ``supported``: ``supported`` and ``unsupported`` answers (shares
        of the slice) and ``selective_risk`` (unsupported over the slice's
        answers, so ``n`` is the answers; NaN share when there are none), for
        every slice and for ``all questions``.
    """
    table = check_score_table(table)
    if len(table) != len(decisions):
        raise ValueError(f"gate_outcomes: {len(table)} table rows but {len(decisions)} decisions")
    if supported is not None and len(supported) != len(table):
        raise ValueError(f"gate_outcomes: {len(table)} table rows but {len(supported)} support flags")
    stages = [name for name in pd.unique(decisions["stage"].dropna())]
    frame = pd.DataFrame(outcome_counts(table, decisions, stages, supported), columns=["slice", "outcome", "k", "n"])
    low, high = clopper_pearson(frame["k"], frame["n"], confidence=confidence)
    frame["share"] = frame["k"] / frame["n"].where(frame["n"] > 0)  # NaN for an empty slice
    frame["low"], frame["high"] = low, high
    return frame


def answered_shares(table: pd.DataFrame, gate, *, n_splits: int = 0, fit=None, random_state=0):
    """Share of each slice a gate answers (answer or hedge): on the table itself and, optionally, held out.

    Parameters
    ----------
    table : DataFrame
        Score table with every column the gate reads.
    gate : Gate
        Usually fitted on ``table``: its shares here are in-sample.
    n_splits : int, default=0
        Also refit with ``fit`` on half of every slice and count on the other
        half, over this many splits (:func:`heldout_gates`).
    fit : callable, default=None
        ``fit(calibration_table) -> Gate``; needed when ``n_splits`` > 0.

    Returns
    -------
    in_sample : DataFrame
        :func:`gate_outcomes` rows of outcome ``answered``.
    heldout : DataFrame or None
        :func:`summarize_heldout_gates` rows of outcome ``answered``; None
        without splits.
    """
    in_sample = gate_outcomes(table, gate.decide_table(table))
    in_sample = in_sample[in_sample["outcome"] == "answered"]
    if not n_splits:
        return in_sample, None
    if fit is None:
        raise ValueError("answered_shares: held-out splits need fit=, the function that refits the gate")
    summary = summarize_heldout_gates(heldout_gates(table, {"gate": fit}, n_splits=n_splits, random_state=random_state))
    return in_sample, summary[summary["outcome"] == "answered"]


def heldout_gates(
    table: pd.DataFrame, fitters: dict, *, n_splits: int = 1000, random_state=0, results=None, gold=None
) -> pd.DataFrame:
    """Fit each gate on the calibration half of every split and count its decisions on the other half.

    Parameters
    ----------
    table : DataFrame
        Score table with every column the gates read.
    fitters : dict of str to callable
        ``{gate name: fit(calibration_table) -> Gate}``.
    n_splits : int, default=1000
        Split ``i`` is :func:`ragcal.calibration.split_by_slice` with seed
        ``random_state + i``: the same splits as the threshold rules' held-out
        table, so the two can be compared split by split.
    results : sequence of mapping, default=None
        ``{retriever name: RetrievalResult}`` per table row. With ``gold``,
        every held-out answer is decided in full (:meth:`Gate.decide`) to see
        whether a gold passage is passed on, and the support outcomes of
        :func:`gate_outcomes` are added.
    gold : sequence of set of str, default=None
        Gold pages per table row (empty for unanswerable questions).

    Returns
    -------
    DataFrame
        ``split, gate, slice, outcome, k, n`` (outcomes as in :func:`gate_outcomes`).
    """
    table = check_score_table(table).reset_index(drop=True)
    if (results is None) != (gold is None):
        raise ValueError("heldout_gates: give both results= and gold= (support needs the passages and the gold pages)")
    if results is not None and not (len(results) == len(gold) == len(table)):
        raise ValueError(f"heldout_gates: {len(table)} rows but {len(results)} result sets and {len(gold)} gold sets")
    slices = table["slice"].to_numpy()
    support = None if results is None else SupportMemo(results, gold)  # table_support, remembered across splits
    rows = []
    splits = progress(range(n_splits), desc="held-out gate splits", unit="split", disable=n_splits < LONG_LOOP)
    for split in splits:
        calibration = split_by_slice(slices, random_state=random_state + split)
        fitting, evaluation = table[calibration], table[~calibration].reset_index(drop=True)
        held = np.flatnonzero(~calibration)
        groups = outcome_groups(evaluation, everyone=support is not None)
        for name, fit in fitters.items():
            gate = fit(fitting)
            decisions = decided_arrays(gate, evaluation)
            stages = [stage.name for stage in getattr(gate, "stages", ())]
            supported = None if support is None else support(gate, decisions, held)
            counts = outcome_counts(evaluation, decisions, stages, supported, groups=groups)
            rows += [(split, name, *row) for row in counts]
    return pd.DataFrame(rows, columns=["split", "gate", "slice", "outcome", "k", "n"])


def summarize_heldout_gates(heldout: pd.DataFrame) -> pd.DataFrame:
    """Mean share over splits with the 2.5th, 5th, 50th, 95th and 97.5th percentiles.

    Shares of different splits are not independent draws (the splits overlap),
    so these percentiles show how much one split can mislead, not a confidence
    interval of the mean.
    """
    shares = heldout.assign(share=heldout["k"] / heldout["n"].where(heldout["n"] > 0))
    grouped = shares.groupby(["gate", "slice", "outcome"], sort=False)["share"]
    summary = grouped.agg(mean="mean").reset_index()
    for quantile in (0.025, 0.05, 0.5, 0.95, 0.975):
        summary[f"p{quantile * 100:g}"] = grouped.quantile(quantile).to_numpy()
    return summary


def paired_differences(heldout: pd.DataFrame, baseline: str, *, slice_name: str, outcome: str) -> pd.DataFrame:
    """Per-split difference of each gate's share against ``baseline`` on the same split.

    Returns
    -------
    DataFrame
        ``gate, mean, low, high, better`` with the 2.5th and 97.5th
        percentiles of the paired per-split difference, and the share of
        splits in which the gate's share is higher than the baseline's.
    """
    selected = heldout[(heldout["slice"] == slice_name) & (heldout["outcome"] == outcome)]
    if selected.empty:
        raise ValueError(f"paired_differences: no rows for slice {slice_name!r} and outcome {outcome!r}")
    shares = selected.assign(share=selected["k"] / selected["n"]).pivot(index="split", columns="gate", values="share")
    if baseline not in shares.columns:
        raise ValueError(f"paired_differences: unknown baseline {baseline!r}; gates are {list(shares.columns)}")
    rows = []
    for gate in shares.columns:
        difference = shares[gate] - shares[baseline]
        low, high = np.quantile(difference, [0.025, 0.975])
        rows.append(
            {"gate": gate, "mean": difference.mean(), "low": low, "high": high, "better": (difference > 0).mean()}
        )
    return pd.DataFrame(rows)


def passage_metrics(decisions, gold: dict, retrieved_lists: dict, *, ks=(5, 10)) -> pd.DataFrame:
    """Context precision and recall of the passages passed on, beside a fixed top-k.

    Parameters
    ----------
    decisions : dict of str to Decision
        Query id -> decision; only answerable queries that were answered (or
        hedged) are scored.
    gold : dict of str to set of str
        Gold pages per query id.
    retrieved_lists : dict of str to RetrievalResult
        Query id -> the ranked list the fixed top-k baseline takes its passages from.

    Returns
    -------
    DataFrame
        One row per scored query: ``passages`` (how many were passed on),
        ``precision@cut`` (share of passages from a gold page), ``recall@cut``
        (share of gold pages among them), and ``precision@k``, ``recall@k`` for
        each k.
    """
    rows = []
    for query_id, decision in decisions.items():
        relevant = set(gold.get(query_id, ()))
        if not relevant or not decision.answered:
            continue
        row = {"id": query_id, "passages": len(decision.passages)}
        pages = pages_of(chunk_id for chunk_id, _ in decision.passages)
        row["precision@cut"] = sum(page in relevant for page in pages) / len(pages) if pages else 0.0
        row["recall@cut"] = len(relevant & set(pages)) / len(relevant)
        listed = retrieved_lists[query_id].doc_paths()
        for k in ks:
            top = listed[:k]
            row[f"precision@{k}"] = sum(page in relevant for page in top) / k
            row[f"recall@{k}"] = len(relevant & set(top)) / len(relevant)
        rows.append(row)
    return pd.DataFrame(rows)
