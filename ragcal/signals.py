"""Gating signals: one number per query, computed from its retrieval results.

A signal is an ordinary function that takes the mapping ``{retriever name:
RetrievalResult}`` of one query and returns a float. Registering it makes it a
column of every score table, and so part of every AUC table, sweep and plot::

    from ragcal.signals import register_signal

    @register_signal("dense_top3_mean", retrievers=("dense",))
    def dense_top3_mean(results):
        return float(results["dense"].scores[:3].mean())

By convention a higher value means "more likely answerable"; a signal for
which the opposite holds says so with ``higher_is_answerable=False``.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable, Mapping

from .retrieval.base import RetrievalResult

__all__ = ["Signal", "SIGNALS", "register_signal", "get_signal", "compute_signals", "unregister_signal"]


@dataclass(frozen=True)
class Signal:
    """A registered gating signal.

    Attributes
    ----------
    name : str
        Column name in score tables.
    function : callable
        ``function(results) -> float`` with ``results`` a mapping from
        retriever name to :class:`RetrievalResult`.
    retrievers : tuple of str
        The retrievers the function reads.
    description : str
    higher_is_answerable : bool
        Whether larger values point to an answerable query.
    passage_scale : bool
        True when the value is the score of one passage in the list of
        ``retrievers[0]`` (``dense_top1`` is a cosine of a chunk). A threshold
        on such a signal is also a bar that single passages can clear, which is
        how :class:`ragcal.gates.ThresholdGate` cuts the passages it passes on.
    """

    name: str
    function: Callable[[Mapping[str, RetrievalResult]], float]
    retrievers: tuple[str, ...]
    description: str = ""
    higher_is_answerable: bool = True
    passage_scale: bool = False

    def __call__(self, results: Mapping[str, RetrievalResult]) -> float:
        missing = [name for name in self.retrievers if name not in results]
        if missing:
            raise KeyError(f"signal {self.name!r} needs retriever results {missing}; got {sorted(results)}")
        return float(self.function(results))


#: The registry, in registration order (which is the column order of score tables).
SIGNALS: dict[str, Signal] = {}


def register_signal(
    name: str,
    *,
    retrievers,
    description: str = "",
    higher_is_answerable: bool = True,
    passage_scale: bool = False,
    replace: bool = False,
):
    """Decorator that registers ``function`` under ``name``.

    Parameters
    ----------
    name : str
    retrievers : tuple of str
        Retriever names the function reads, e.g. ``("dense",)``.
    description : str, default=""
        One line for tables and legends; defaults to the docstring's first line.
    higher_is_answerable : bool, default=True
    passage_scale : bool, default=False
        The value is one passage's score in the first retriever's list (see
        :class:`Signal`).
    replace : bool, default=False
        Allow re-registering an existing name (handy when iterating in a
        notebook); otherwise a duplicate name raises ``ValueError``.
    """
    if not isinstance(name, str) or not name.isidentifier():
        raise ValueError(f"The 'name' parameter of register_signal must be a valid identifier. Got {name!r} instead.")
    if isinstance(retrievers, str):
        retrievers = (retrievers,)

    def decorator(function):
        if name in SIGNALS and not replace:
            raise ValueError(f"signal {name!r} is already registered; pass replace=True to redefine it")
        summary = description or (function.__doc__ or "").strip().split("\n")[0]
        SIGNALS[name] = Signal(name, function, tuple(retrievers), summary, higher_is_answerable, passage_scale)
        return function

    return decorator


def unregister_signal(name: str) -> None:
    """Remove a signal from the registry."""
    get_signal(name)
    del SIGNALS[name]


def get_signal(name: str) -> Signal:
    """Look a signal up by name; an unknown name lists the known ones."""
    try:
        return SIGNALS[name]
    except KeyError:
        raise ValueError(f"unknown signal {name!r}; registered signals are: {', '.join(SIGNALS)}") from None


def compute_signals(results: Mapping[str, RetrievalResult], names=None) -> dict[str, float]:
    """Evaluate the named signals on one query.

    Without ``names``: every registered signal whose retrievers are in
    ``results`` (``rerank_*`` only when a reranker ran).
    """
    if names is None:
        names = [name for name, signal in SIGNALS.items() if all(r in results for r in signal.retrievers)]
    return {name: get_signal(name)(results) for name in names}


# --------------------------------------------------------------------------- built-in signals


def _top(results, retriever, rank=1) -> float:
    return results[retriever].score_at(rank)


@register_signal("dense_top1", retrievers=("dense",), passage_scale=True)
def dense_top1(results):
    """Cosine similarity of the best chunk."""
    return _top(results, "dense")


@register_signal("dense_top2", retrievers=("dense",), passage_scale=True)
def dense_top2(results):
    """Cosine similarity of the second-best chunk."""
    return _top(results, "dense", 2)


@register_signal("dense_gap", retrievers=("dense",))
def dense_gap(results):
    """Cosine top-1 minus top-2 (the margin of the floor-and-gap check)."""
    return _top(results, "dense") - _top(results, "dense", 2)


@register_signal("bm25_top1_raw", retrievers=("bm25_raw",), passage_scale=True)
def bm25_top1_raw(results):
    """Best BM25 score, all tokens kept; 0 when nothing matched."""
    result = results["bm25_raw"]
    return 0.0 if result.is_empty else result.score_at(1)


@register_signal("bm25_top1_stopwords", retrievers=("bm25_stopwords",), passage_scale=True)
def bm25_top1_stopwords(results):
    """Best BM25 score, English stop words removed; 0 when nothing matched."""
    result = results["bm25_stopwords"]
    return 0.0 if result.is_empty else result.score_at(1)


@register_signal("bm25_empty_raw", retrievers=("bm25_raw",), higher_is_answerable=False)
def bm25_empty_raw(results):
    """1 when BM25 (all tokens) matched no chunk, else 0."""
    return float(results["bm25_raw"].is_empty)


@register_signal("bm25_empty_stopwords", retrievers=("bm25_stopwords",), higher_is_answerable=False)
def bm25_empty_stopwords(results):
    """1 when BM25 without stop words matched no chunk, else 0."""
    return float(results["bm25_stopwords"].is_empty)


@register_signal("rrf_top1", retrievers=("rrf",), passage_scale=True)
def rrf_top1(results):
    """Reciprocal-rank-fusion score of the best fused chunk."""
    return _top(results, "rrf")


@register_signal("rerank_top1", retrievers=("rerank",), passage_scale=True)
def rerank_top1(results):
    """Cross-encoder score of the best re-scored candidate (needs a reranker; on the reranker's own scale)."""
    return _top(results, "rerank")


@register_signal("rerank_gap", retrievers=("rerank",))
def rerank_gap(results):
    """Cross-encoder top-1 minus top-2: how clearly the reranker prefers one passage."""
    return _top(results, "rerank") - _top(results, "rerank", 2)
