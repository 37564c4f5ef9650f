"""Signals of a user's own run: the scores their system gave its own candidates (``run_top1``, ``run_gap``, ...).

The results of the retriever named ``"run"`` are an exported top-k with the
exporting system's own scores, in its own order
(:class:`ragcal.retrieval.candidates.CandidateRunRetriever`, fed by a TREC
run or a candidates JSONL with scores). Its scores are on that system's
scale, whatever it is (a cosine, a BM25 score, a reranker's logit): a
threshold on them belongs to that system. The signals are defined on the
ranked list alone, like the dense top-k summaries of
:mod:`ragcal.signals.builtin`, and exist only where ``run`` results do (see
:func:`ragcal.signals.signals_for`).
"""

from __future__ import annotations

from .batch import ResultBatch, by_length
from .builtin import TOP_K
from .builtin import least_squares_drop
from .registry import register_batch_signal

__all__ = ["RUN", "RUN_SIGNALS"]

#: The retriever name of a user's own run.
RUN = "run"


def _top(batch: ResultBatch, rank: int = 1):
    return batch.top_scores(RUN, rank)[:, rank - 1]


def _run_top_k(batch: ResultBatch, function, *, minimum: int = 1):
    """``function`` of each query's (up to) ``TOP_K`` best run scores; NaN with fewer than ``minimum``."""
    lengths = batch.lengths(RUN).clip(max=TOP_K)
    return by_length(batch.top_scores(RUN, TOP_K), lengths, function, minimum=minimum)


@register_batch_signal("run_top1", retrievers=(RUN,), passage_scale=True)
def run_top1(batch):
    """The user's system's own score of its best candidate; NaN when it retrieved nothing."""
    return _top(batch)


@register_batch_signal("run_gap", retrievers=(RUN,))
def run_gap(batch):
    """The system's top-1 score minus its top-2 score; NaN with fewer than two candidates."""
    return _top(batch) - _top(batch, 2)


@register_batch_signal("run_top10_mean", retrievers=(RUN,))
def run_top10_mean(batch):
    """Mean of the system's ten best scores (fewer when it listed fewer); NaN when it retrieved nothing."""
    return _run_top_k(batch, lambda scores: scores.mean(axis=1))


@register_batch_signal("run_top10_std", retrievers=(RUN,))
def run_top10_std(batch):
    """Population standard deviation of the system's ten best scores; NaN when it retrieved nothing."""
    return _run_top_k(batch, lambda scores: scores.std(axis=1))


@register_batch_signal("run_top10_drop", retrievers=(RUN,))
def run_top10_drop(batch):
    """Score lost per rank over the system's ten best: minus the least-squares slope; NaN below two candidates."""
    return _run_top_k(batch, least_squares_drop, minimum=2)


#: The signals this module registers, in registration order.
RUN_SIGNALS = ("run_top1", "run_gap", "run_top10_mean", "run_top10_std", "run_top10_drop")
