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

Re-running the cell or re-importing the module that registers a signal
replaces it: a name is owned by the place that defined it (the function's
module and qualified name). Registering the same name from another place is a
``ValueError`` that names both, unless ``replace=True`` says the override is
meant.

Signals that need more than a ranked list (IDF weights, the corpus centroid)
read the ``info`` mapping of a result, which
:mod:`ragcal.retrieval.diagnostics` fills from the retriever that produced it;
they are NaN for results without it (e.g. from a user's own retriever).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable, Mapping

import numpy as np

from .chunking import page_of, pages_of
from .retrieval.base import RetrievalResult
from .retrieval.diagnostics import PAGE_NEIGHBOURS

__all__ = [
    "Signal",
    "SIGNALS",
    "NEW_SIGNALS",
    "register_signal",
    "get_signal",
    "compute_signals",
    "signals_for",
    "unregister_signal",
    "load_signals_module",
]


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
    origin : str
        Where the function was defined (``module.qualname``); registering the
        same name from the same origin replaces the entry.
    """

    name: str
    function: Callable[[Mapping[str, RetrievalResult]], float]
    retrievers: tuple[str, ...]
    description: str = ""
    higher_is_answerable: bool = True
    passage_scale: bool = False
    origin: str = ""

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
        Replace a signal of the same name defined elsewhere. Without it, the
        same name from the same place (module and qualified name of the
        function, so re-running a notebook cell or re-importing a module) is
        replaced silently, and from another place raises ``ValueError``.
    """
    if not isinstance(name, str) or not name.isidentifier():
        raise ValueError(f"The 'name' parameter of register_signal must be a valid identifier. Got {name!r} instead.")
    if isinstance(retrievers, str):
        retrievers = (retrievers,)

    def decorator(function):
        origin = _origin(function)
        existing = SIGNALS.get(name)
        if existing is not None and not replace and existing.origin != origin:
            raise ValueError(
                f"signal {name!r} is already registered by {existing.origin}; {origin} defines it again. "
                "Rename one of them, or pass replace=True to override the first"
            )
        summary = description or (function.__doc__ or "").strip().split("\n")[0]
        SIGNALS[name] = Signal(name, function, tuple(retrievers), summary, higher_is_answerable, passage_scale, origin)
        return function

    return decorator


def load_signals_module(path):
    """Import a Python file so that the signals it registers join the registry (``ragcal --signals-module``).

    The module is named ``ragcal_signals_<file stem>``, so loading the same file
    again replaces its signals instead of clashing with them.

    Returns
    -------
    list of str
        The names the file registered or redefined, in registry order.
    """
    import importlib.util
    import re
    import sys
    from pathlib import Path

    path = Path(path)
    if path.suffix != ".py" or not path.is_file():
        raise ValueError(f"The 'signals module' must be an existing .py file. Got {str(path)!r} instead.")
    name = "ragcal_signals_" + re.sub(r"\W", "_", path.stem)
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    before = {key: signal.function for key, signal in SIGNALS.items()}
    sys.modules[name] = module
    try:
        spec.loader.exec_module(module)
    except ValueError:  # e.g. a clash between two definitions of one signal: already a clear message
        del sys.modules[name]
        raise
    except Exception as error:
        del sys.modules[name]
        where = f", line {error.lineno}" if isinstance(error, SyntaxError) and error.lineno else ""
        raise ValueError(f"{path}{where}: the signals module failed to load: {type(error).__name__}: {error}") from error
    return [key for key, signal in SIGNALS.items() if before.get(key) is not signal.function]


def _origin(function) -> str:
    module = getattr(function, "__module__", None) or "<unknown>"
    return f"{module}.{getattr(function, '__qualname__', repr(function))}"


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
    names = signals_for(results) if names is None else names
    return {name: get_signal(name)(results) for name in names}


def signals_for(retrievers) -> list[str]:
    """Registered signals, in registry order, whose retrievers are all among ``retrievers`` (names or a mapping)."""
    return [name for name, signal in SIGNALS.items() if all(r in retrievers for r in signal.retrievers)]


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
# --------------------------------------------------------------------------- the sorted top-k score vector
# Gisserot-Boukhlef et al. (TMLR 2024) found that a regression over the sorted retrieval scores beat the max, the
# standard deviation and the top-1/top-2 gap for deciding when to abstain; these are the summaries of that vector.

#: How many of the best dense scores the top-k features summarise.
TOP_K = 10


def _dense_top_k(results) -> np.ndarray:
    return results["dense"].scores[:TOP_K]


@register_signal("dense_top10_mean", retrievers=("dense",))
def dense_top10_mean(results):
    """Mean cosine of the ten best chunks (the level of the sorted top-k score vector); NaN with no hit."""
    scores = _dense_top_k(results)
    return float(scores.mean()) if scores.size else float("nan")


@register_signal("dense_top10_std", retrievers=("dense",))
def dense_top10_std(results):
    """Standard deviation of the ten best cosines (the spread of the sorted top-k vector); NaN with no hit."""
    scores = _dense_top_k(results)
    return float(scores.std()) if scores.size else float("nan")


@register_signal("dense_top10_drop", retrievers=("dense",))
def dense_top10_drop(results):
    """Cosine lost per rank over the ten best chunks: minus the least-squares slope of score against rank.

    Large when a few chunks stand out above the rest (the slope of the sorted
    top-k vector); NaN with fewer than two hits.
    """
    scores = _dense_top_k(results)
    if scores.size < 2:
        return float("nan")
    ranks = np.arange(1, scores.size + 1) - (scores.size + 1) / 2  # centred ranks
    return float(-(ranks * (scores - scores.mean())).sum() / (ranks**2).sum())


# --------------------------------------------------------------------------- length-normalised BM25


def _bm25_norm(result: RetrievalResult) -> float:
    max_score = result.info.get("max_score", float("nan"))
    if np.isnan(max_score):
        return float("nan")
    if result.is_empty or max_score <= 0:
        return 0.0
    return result.score_at(1) / max_score


@register_signal("bm25_norm_raw", retrievers=("bm25_raw",))
def bm25_norm_raw(results):
    """Best BM25 score (all tokens) over the query's maximum attainable score, the sum of idf * (k1 + 1).

    Between 0 and 1 whatever the query's length, so long and short queries are
    comparable; 0 when nothing matched. The maximum comes from the BM25
    retriever that scored the query (``info["max_score"]``); NaN without it.
    """
    return _bm25_norm(results["bm25_raw"])


@register_signal("bm25_norm_stopwords", retrievers=("bm25_stopwords",))
def bm25_norm_stopwords(results):
    """Best BM25 score without stop words over the query's maximum attainable score (as ``bm25_norm_raw``)."""
    return _bm25_norm(results["bm25_stopwords"])


# --------------------------------------------------------------------------- lexical coverage


def _info(result: RetrievalResult, key: str) -> float:
    return float(result.info.get(key, float("nan")))


@register_signal("bm25_coverage_top10", retrievers=("bm25_raw",))
def bm25_coverage_top10(results):
    """IDF-weighted share of the query's distinct terms found in the ten best BM25 chunks (all tokens).

    From the BM25 retriever that scored the query (``info["coverage_top"]``):
    a question whose rare terms no top passage contains is probably not
    covered. NaN without that information or for a query with no token.
    """
    return _info(results["bm25_raw"], "coverage_top")


@register_signal("bm25_coverage_corpus", retrievers=("bm25_raw",))
def bm25_coverage_corpus(results):
    """IDF-weighted share of the query's distinct terms that occur anywhere in the corpus (all tokens).

    A term the corpus never uses counts with the IDF it would have at document
    frequency 0, so one unknown rare word weighs a lot (``info["coverage_corpus"]``).
    """
    return _info(results["bm25_raw"], "coverage_corpus")


# --------------------------------------------------------------------------- dense-BM25 agreement


def _pages(result: RetrievalResult, depth: int) -> list[str]:
    """Distinct pages of the first ``depth`` chunks, in rank order."""
    return list(dict.fromkeys(pages_of(result.chunk_ids[:depth])))


@register_signal("dense_bm25_page_overlap", retrievers=("dense", "bm25_stopwords"))
def dense_bm25_page_overlap(results):
    """Jaccard overlap of the pages among the ten best dense chunks and the ten best BM25 chunks (no stop words).

    Two retrievers that agree on where the answer is suggest there is one; 0
    when BM25 matched nothing, NaN when dense found nothing.
    """
    dense = set(_pages(results["dense"], TOP_K))
    if not dense:
        return float("nan")
    lexical = set(_pages(results["bm25_stopwords"], TOP_K))
    return len(dense & lexical) / len(dense | lexical)


@register_signal("dense_top_page_bm25_rr", retrievers=("dense", "bm25_stopwords"))
def dense_top_page_bm25_rr(results):
    """Reciprocal rank of the dense top page among the pages BM25 (no stop words) returns, in BM25's order.

    1 when both put the same page first, 0 when BM25 does not list it (or
    matched nothing); NaN when dense found nothing.
    """
    dense = results["dense"]
    if dense.is_empty:
        return float("nan")
    top_page = page_of(dense.chunk_ids[0])
    seen = set()
    for chunk_id in results["bm25_stopwords"].chunk_ids:  # pages in BM25's order, until the dense top page
        page = page_of(chunk_id)
        if page == top_page:
            return 1.0 / (len(seen) + 1)
        seen.add(page)
    return 0.0


# --------------------------------------------------------------------------- domain scores (seed 003, no LLM)


@register_signal("dense_centroid_cosine", retrievers=("dense",))
def dense_centroid_cosine(results):
    """Cosine between the query and the centroid of the corpus's chunk embeddings ("is this our domain at all").

    The centroid is that of the dense retriever that searched the query
    (``info["centroid_cosine"]``); NaN without it.
    """
    return _info(results["dense"], "centroid_cosine")


@register_signal(f"dense_page_knn{PAGE_NEIGHBOURS}", retrievers=("dense",))
def dense_page_knn(results):
    """Mean cosine between the query and its five nearest page centroids (mean embedding of a page's chunks).

    A softer domain check than the single corpus centroid: a corpus covers
    several topics. From the dense retriever that searched the query
    (``info["page_knn_cosine"]``); NaN without it.
    """
    return _info(results["dense"], "page_knn_cosine")


#: The signals this module adds beyond the top scores (issue 11), in registration order.
NEW_SIGNALS = (
    "dense_top10_mean",
    "dense_top10_std",
    "dense_top10_drop",
    "bm25_norm_raw",
    "bm25_norm_stopwords",
    "bm25_coverage_top10",
    "bm25_coverage_corpus",
    "dense_bm25_page_overlap",
    "dense_top_page_bm25_rr",
    "dense_centroid_cosine",
    f"dense_page_knn{PAGE_NEIGHBOURS}",
)
