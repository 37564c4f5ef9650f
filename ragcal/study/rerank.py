"""The reranker's signals beside the others: the "Reranker signals" section of each summary.

No trained cross-encoder ships in any package reachable from ragcal's CI, so
``make reproduce`` runs this check with the tiny, randomly initialised
cross-encoder of :func:`ragcal.retrieval.rerank.build_tiny_cross_encoder`. It
exercises the real path (loading, re-scoring the fused top 50, the signals,
the AUC table); its AUCs say nothing about reranking. ``ragcal reproduce --reranker PATH_OR_NAME`` runs the same check
with a real cross-encoder.
"""

from __future__ import annotations

import dataclasses
import tempfile
from pathlib import Path

import pandas as pd

from ..metrics import auc_table
from ..scoring import score_table

__all__ = ["RERANK_SCORES", "RERANK_SIGNALS", "rerank_aucs", "rerank_scores", "rerank_section"]

#: Compared in the section: the cosine baseline and the reranker's two signals.
RERANK_SIGNALS = ("dense_top1", "rerank_top1", "rerank_gap")

#: The reranker's per-question scores in ``results/<corpus>/``: a float32 model's outputs, which CPU kernels move in
#: their last bits, so ``ragcal reproduce`` anchors them (:mod:`ragcal.study.anchoring`) like the dense scores.
RERANK_SCORES = "rerank_scores.csv"


def rerank_scores(index, queries: pd.DataFrame, *, reranker=None, depth: int = 50, cache_dir=None):
    """The score table of :data:`RERANK_SIGNALS` with the reranker on ``index``.

    Parameters
    ----------
    index : RetrievalIndex
        Without a reranker; it is not changed.
    queries : DataFrame
        The labeled set.
    reranker : str, default=None
        A cross-encoder folder or Hub name; None builds the tiny random one
        in a temporary folder. Its scores are cached like any model's: its
        weights are the same bytes on every processor and run
        (:func:`ragcal.retrieval.rerank.build_tiny_cross_encoder`), so its
        fingerprint, which keys the cache, names it whatever folder it sits in.
    depth : int, default=50
        How many fused candidates the reranker re-scores per question.
    cache_dir : str or Path, default=None
        The score cache's folder (:class:`ragcal.retrieval.rerank.CrossEncoderReranker`).

    Returns
    -------
    table : DataFrame
        As :func:`ragcal.scoring.score_table`, with the columns :data:`RERANK_SIGNALS`.
    description : dict
        The reranker's provenance (:meth:`CrossEncoderReranker.to_dict`) and
        ``random``: whether it is the tiny random model.
    """
    from ..retrieval.rerank import CrossEncoderReranker, build_tiny_cross_encoder

    with tempfile.TemporaryDirectory() as folder:
        model = build_tiny_cross_encoder(Path(folder) / "tiny-random-cross-encoder") if reranker is None else reranker
        ranker = CrossEncoderReranker(str(model), depth=depth, cache_dir=cache_dir)
        reranked = dataclasses.replace(index, reranker=ranker, _views={})
        table = score_table(queries, reranked.retrieve(queries["query"]), signals=list(RERANK_SIGNALS))
        description = {**ranker.to_dict(), "random": reranker is None}
    if description["random"]:
        description["reranker"] = "tiny random cross-encoder (build_tiny_cross_encoder, seed 0)"
    return table, description


def rerank_aucs(index, queries: pd.DataFrame, *, reranker=None, depth: int = 50, cache_dir=None):
    """AUC table of :data:`RERANK_SIGNALS` with the reranker on ``index``: :func:`rerank_scores`' table's AUCs.

    Returns
    -------
    aucs : DataFrame
        As :func:`ragcal.metrics.auc_table`.
    description : dict
        As :func:`rerank_scores`.
    """
    table, description = rerank_scores(index, queries, reranker=reranker, depth=depth, cache_dir=cache_dir)
    return auc_table(table, list(RERANK_SIGNALS)), description


def rerank_section(aucs: pd.DataFrame, description: dict) -> str:
    """Markdown: the reranker's AUCs beside ``dense_top1``, with the caveat that fits the model."""
    from ..formatting import format_interval

    comparisons = list(dict.fromkeys(aucs["comparison"]))
    rows = []
    for signal in RERANK_SIGNALS:
        part = aucs[aucs["signal"] == signal].set_index("comparison")
        rows.append(
            {"signal": signal}
            | {
                ("AUC, " if name == "all unanswerable" else "vs ") + name: format_interval(
                    *part.loc[name, ["auc", "ci_low", "ci_high"]]
                )
                for name in comparisons
            }
        )
    lines = [
        "## Reranker signals",
        "",
        f"Reranker: {description['reranker']} (fingerprint `{description['reranker_fingerprint']}`), re-scoring the "
        f"top {description['rerank_depth']} fused candidates. AUC with 95% stratified bootstrap intervals, as above.",
        "",
        pd.DataFrame(rows).to_markdown(index=False),
        "",
    ]
    if description.get("random"):
        lines += [
            "**Caveat: this cross-encoder is random.** No trained cross-encoder can be installed here, so this is a "
            "check that the reranking path works end to end (loading, re-scoring, signals, tables), not a "
            "measurement of reranking. A random network is still a fixed function of the text (of its length, "
            "say), so its AUCs need not sit at 0.5 and may even point the wrong way; either way they say nothing "
            "about what a trained reranker would do. Run `ragcal reproduce "
            "--reranker cross-encoder/ms-marco-MiniLM-L-6-v2` (or a local folder) where such a model is available; "
            "its scores are on its own scale, so a gate on them needs its own calibration.",
            "",
        ]
    return "\n".join(lines)
