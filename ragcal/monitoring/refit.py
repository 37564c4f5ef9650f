"""Refit a gate with the labels of a review: its calibration table plus the labeled live rows, same kind and rule.

::

    new_gate, change = refit_with_labels(gate, calibration, labels, rule="keep@0.95")

See Also
--------
ragcal.gates.fit_gate : the refit in :func:`refit_with_labels`.
"""

from __future__ import annotations

import math
from pathlib import Path

import pandas as pd

__all__ = ["refit_with_labels"]


def _fit_options(gate) -> dict:
    """:func:`ragcal.gates.fit_gate` options that reproduce ``gate``'s kind and settings."""
    from ..gates.chain import FallbackChain
    from ..gates.floor_gap import FloorGapGate
    from ..gates.learned import LearnedGate
    from ..gates.threshold import ThresholdGate

    if isinstance(gate, ThresholdGate):
        return {"signal": gate.signal, "higher_is_answerable": gate.higher_is_answerable,
                "max_passages": gate.max_passages}
    if isinstance(gate, LearnedGate):
        return {"signals": list(gate.signals), "max_passages": gate.max_passages}
    if isinstance(gate, FloorGapGate):
        return {"retriever": gate.retriever, "max_passages": gate.max_passages}
    if isinstance(gate, FallbackChain):
        names = [stage.name for stage in gate.stages]
        first = gate.stages[1 if "rerank" in names else 0].gate
        return {"use_reranker": "rerank" in names, "max_passages": first.max_passages}
    raise TypeError(f"refit_with_labels cannot refit a {type(gate).__name__}")


def _bars(gate, prefix: str = "") -> dict:
    """Every bar of a gate by name, e.g. ``{"threshold": 0.48}`` or ``{"hybrid: dense_top1": 0.6, ...}``."""
    from ..gates.chain import FallbackChain
    from ..gates.floor_gap import FloorGapGate

    if isinstance(gate, FallbackChain):
        bars = {}
        for stage in gate.stages:
            bars.update(_bars(stage.gate, f"{stage.name}: "))
        return bars
    if isinstance(gate, FloorGapGate):
        return {f"{prefix}floor": gate.floor, f"{prefix}min_gap": gate.min_gap}
    name = getattr(gate, "signal", "learned score")
    bars = {f"{prefix}{name} threshold": gate.threshold}
    if gate.hedge_below is not None:
        bars[f"{prefix}{name} hedge_below"] = gate.hedge_below
    return bars


def _shares(gate, table: pd.DataFrame) -> dict:
    answered = gate.decide_table(table)["action"].to_numpy(dtype=object) != "refuse"
    answerable = table["answerable"].to_numpy(dtype=bool)
    return {
        "answerable kept": (answered[answerable].mean() if answerable.any() else math.nan, int(answerable.sum())),
        "unanswerable refused": ((~answered[~answerable]).mean() if (~answerable).any() else math.nan,
                                 int((~answerable).sum())),
    }


def refit_with_labels(gate, calibration: pd.DataFrame, labels: pd.DataFrame, *, rule: str | None = None,
                      **options) -> tuple:
    """Refit the same gate kind and rule on the calibration table plus the labeled rows of a review sample.

    Parameters
    ----------
    gate : Gate, or str or Path of a gate file
        From a file, ``rule`` defaults to the file's.
    calibration : DataFrame
        The score table the gate was fitted on (``answerable``, ``slice`` and
        the gate's columns).
    labels : DataFrame
        From :func:`read_review_labels`; its labeled rows, with the gate's
        signal columns that :func:`review_sample` keeps, join the
        calibration rows. Their ``slice`` is the labeled one (``answerable`` or
        ``unanswerable`` where the labeler left it empty).
    rule : str, default=None
        A threshold rule such as ``"keep@0.95"``; the gate file's when None.
    **options
        Override the settings read from the gate (:func:`ragcal.gates.fit_gate` options).

    Returns
    -------
    new_gate : Gate
    comparison : DataFrame
        ``quantity, old, new, n``: every bar of both gates, then the shares of
        answerable questions kept and unanswerable ones refused on the
        calibration table and on the labeled review rows. The review rows are
        a stratified sample weighted towards the bar, so their shares (and
        their weight in the refit) are the sample's, not the live log's.
    """
    from ..calibration.rules import get_rule
    from ..gates.files import read_gate_file
    from ..gates.fit import fit_gate
    from ..score_tables import check_score_table

    if isinstance(gate, (str, Path)):
        document = read_gate_file(gate)
        gate, rule = document["gate"], rule or document.get("rule")
    if not rule:
        raise ValueError("refit_with_labels needs the rule the gate was fitted with (e.g. rule='keep@0.95')")
    if "+" in rule or get_rule(rule).needs_support:
        raise ValueError(f"refit_with_labels refits single threshold rules (keep@, recall_guarantee@, ...); "
                         f"{rule!r} needs support levels or a joint certificate: refit with `ragcal fit-gate`")
    columns = list(gate.columns)
    missing = [column for column in columns if column not in labels.columns]
    if missing:
        raise ValueError(f"the review labels have no column(s) {', '.join(map(repr, missing))}, which the gate reads; "
                         "draw the sample with `ragcal review`, which keeps them")
    rows = labels[labels["labeled"].to_numpy(dtype=bool)]
    if rows.empty:
        raise ValueError("the review file has no labeled row yet: nothing to refit with")
    flags = rows["answerable"].to_numpy(dtype=bool)
    slices = [text.strip() or ("answerable" if flag else "unanswerable") for text, flag in zip(rows["slice"], flags)]
    live = pd.DataFrame({"id": rows["id"].astype(str).to_numpy(), "query": rows["query"].to_numpy(),
                         "answerable": flags, "slice": slices})
    for column in columns:
        live[column] = pd.to_numeric(rows[column], errors="coerce").to_numpy(dtype=float)
    calibration = check_score_table(calibration, columns, source="calibration table")
    keep = [column for column in ("id", "query", "answerable", "slice", *columns) if column in calibration.columns]
    calibration = calibration[keep].assign(slice=calibration["slice"].astype(str))
    combined = pd.concat([calibration, live], ignore_index=True)
    new_gate = fit_gate(combined, gate.type, rule, **{**_fit_options(gate), **options})
    old_bars, new_bars = _bars(gate), _bars(new_gate)
    records = [{"quantity": name, "old": old_bars.get(name, math.nan), "new": new_bars.get(name, math.nan),
                "n": len(combined)} for name in dict.fromkeys([*old_bars, *new_bars])]
    for where, table in (("calibration", calibration), ("review labels", live)):
        old, new = _shares(gate, table), _shares(new_gate, table)
        for name, (share, count) in old.items():
            records.append({"quantity": f"{where}: {name}", "old": share, "new": new[name][0], "n": count})
    return new_gate, pd.DataFrame(records)
