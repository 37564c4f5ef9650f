"""Every signal as a query performance predictor: ``qpp.csv`` and the "Signals as QPP predictors" section.

The QPP protocol (:mod:`ragcal.metrics.qpp`) runs on the answerable questions
only: each signal against the reciprocal rank of the first gold page in the
top 10 of the list of the signal's own retriever (its first retriever for a
signal that reads two), read from the TREC runs that ``make reproduce`` writes.
The section sets it beside the AUC, because the two ask different things: a
signal can rank answerable questions by how well retrieval went and still fail
to tell answerable from unanswerable ones, or the other way round.
"""

from __future__ import annotations

from pathlib import Path

import pandas as pd

from .._io import atomic_write_text
from ..formatting import format_interval
from ..metrics import qpp_table
from ..metrics.retrieval import per_query_retrieval_metrics
from ..queries import gold_pages
from ..signals.registry import SIGNALS

__all__ = ["QUALITY", "retrieval_quality", "evaluate_qpp", "qpp_section"]

#: The retrieval quality that the signals predict: reciprocal rank of the first gold page in the top 10 pages.
QUALITY = "mrr@10"


def retrieval_quality(runs: dict, queries: pd.DataFrame, *, metric: str = QUALITY) -> pd.DataFrame:
    """``metric`` of every answerable question in every run: indexed by query id, one column per run name."""
    gold = gold_pages(queries)
    return pd.DataFrame(
        {name: per_query_retrieval_metrics(run, gold, metrics=[metric])[metric] for name, run in runs.items()}
    )


def evaluate_qpp(table: pd.DataFrame, runs: dict, queries: pd.DataFrame, results_dir, *, log=print) -> pd.DataFrame:
    """``qpp.csv``: the QPP measures of every registered signal in ``table`` whose retriever has a run.

    Parameters
    ----------
    table : DataFrame
        The score table.
    runs : dict of str to DataFrame
        TREC runs by retriever name (:func:`ragcal.runs.read_trec_run`).
    queries : DataFrame
        The labeled set (gold pages).
    """
    quality = retrieval_quality(runs, queries)
    signals = [name for name in SIGNALS if name in table.columns and SIGNALS[name].retrievers[0] in quality.columns]
    qpp = qpp_table(
        table,
        quality,
        signals,
        targets={name: SIGNALS[name].retrievers[0] for name in signals},
        directions={name: SIGNALS[name].higher_is_answerable for name in signals},
    )
    path = Path(results_dir) / "qpp.csv"
    atomic_write_text(path, qpp.to_csv(index=False, float_format="%.4f"))
    log(f"wrote {path}")
    return qpp


def qpp_section(qpp: pd.DataFrame, aucs: pd.DataFrame) -> str:
    """Markdown: each signal's AUC beside its QPP measures, and which signals do one job but not the other."""
    overall = aucs[aucs["comparison"] == "all unanswerable"].set_index("signal")
    rows = []
    for row in qpp.itertuples(index=False):
        auc = overall.loc[row.signal] if row.signal in overall.index else None
        rows.append(
            {
                "signal": row.signal,
                "predicts": f"{row.target} {QUALITY}",
                "AUC [95% CI]": format_interval(auc["auc"], auc["ci_low"], auc["ci_high"]) if auc is not None else "",
                "Kendall τ": format_interval(row.kendall_tau, row.kendall_tau_low, row.kendall_tau_high),
                "Pearson r": format_interval(row.pearson_r, row.pearson_r_low, row.pearson_r_high),
                "sMARE (lower is better)": format_interval(row.smare, row.smare_low, row.smare_high),
                "sMARE of a random order": f"{row.smare_chance:.3f}",
                "n": row.n,
            }
        )
    frame = pd.DataFrame(rows)
    merged = qpp.merge(overall[["ci_low", "ci_high"]], left_on="signal", right_index=True, how="left")
    predicts = merged["kendall_tau_low"] > 0
    separates = merged["ci_low"] > 0.5
    both = merged.loc[predicts & separates, "signal"].tolist()
    only_qpp = merged.loc[predicts & ~separates, "signal"].tolist()
    only_auc = merged.loc[~predicts & separates, "signal"].tolist()
    neither = merged.loc[~predicts & ~separates & merged["kendall_tau"].notna(), "signal"].tolist()
    reversed_ = merged.loc[merged["ci_high"] < 0.5, "signal"].tolist()

    def names(values):
        return ", ".join(f"`{value}`" for value in values) if values else "none"

    n = int(qpp["n"].max()) if len(qpp) else 0
    return "\n".join(
        [
            "## Signals as query performance predictors",
            "",
            f"On the answerable questions only (up to {n}): does the signal rank them by how well retrieval worked? "
            f"Quality is {QUALITY} of the first gold page in the list of the signal's own retriever (the first it "
            "reads). A signal for which lower means answerable is negated first, so a positive τ or r always "
            "means \"predicts quality\". Kendall's τ-b and Pearson's r (scipy), and sMARE (Faggioli et al. 2022: the "
            "mean absolute difference of the two rankings, over n; 0 is perfect). sMARE's chance level depends on "
            "the ties in the quality (most answerable questions have their gold page first), so the expected sMARE of "
            "a random order of the same questions stands beside it. A constant signal has no ranking: n/a. 95% "
            "percentile bootstrap intervals over questions, 2,000 resamples, seed 0. The AUC beside them is answerable "
            "vs all unanswerable, as above.",
            "",
            frame.to_markdown(index=False),
            "",
            f"Both jobs (the τ interval above 0 and the AUC interval above 0.5): {names(both)}. Predicts retrieval "
            f"quality, but its AUC interval reaches 0.5: {names(only_qpp)}. Separates answerable from unanswerable, "
            f"but its τ interval reaches 0 (no evidence that it ranks answerable questions by quality): "
            f"{names(only_auc)}. Neither: {names(neither)}."
            + (
                f" The AUC interval of {names(reversed_)} lies below 0.5: on this set they rank unanswerable "
                "questions above answerable ones, against the direction their papers give."
                if reversed_
                else ""
            ),
            "",
        ]
    )
