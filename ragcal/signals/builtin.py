"""The built-in gating signals, each a vectorised function of a :class:`~ragcal.signals.batch.ResultBatch`.

The top scores of each retriever (``dense_top1``, ``bm25_top1_raw``,
``rrf_top1``, ...), then the signals of issue 11 (:data:`NEW_SIGNALS`): the
sorted top-k score vector, length-normalised BM25, lexical coverage,
dense-BM25 agreement and the domain scores. Signals that need corpus-level
numbers read the ``info`` that :mod:`ragcal.retrieval.diagnostics` attached
from the retriever that produced each result. The query-performance
predictors are in :mod:`ragcal.signals.qpp`.

Importing :mod:`ragcal.signals` registers them all, in the order of this
module (the column order of score tables).
"""

from __future__ import annotations

import numpy as np

from ..retrieval.diagnostics.dense_domain import PAGE_NEIGHBOURS
from .batch import ResultBatch, by_length
from .registry import register_batch_signal

__all__ = ["NEW_SIGNALS", "TOP_K"]


def _top(batch: ResultBatch, retriever: str, rank: int = 1) -> np.ndarray:
    """Score at 1-based ``rank`` of each query; NaN when the list is shorter."""
    return batch.top_scores(retriever, rank)[:, rank - 1]


def _top_or_zero(batch: ResultBatch, retriever: str) -> np.ndarray:
    """Best score of each query; 0 when nothing matched."""
    return np.where(batch.lengths(retriever) == 0, 0.0, _top(batch, retriever))


@register_batch_signal("dense_top1", retrievers=("dense",), passage_scale=True)
def dense_top1(batch):
    """Cosine similarity of the best chunk."""
    return _top(batch, "dense")


@register_batch_signal("dense_top2", retrievers=("dense",), passage_scale=True)
def dense_top2(batch):
    """Cosine similarity of the second-best chunk."""
    return _top(batch, "dense", 2)


@register_batch_signal("dense_gap", retrievers=("dense",))
def dense_gap(batch):
    """Cosine top-1 minus top-2 (the margin of the floor-and-gap check)."""
    return _top(batch, "dense") - _top(batch, "dense", 2)


@register_batch_signal("bm25_top1_raw", retrievers=("bm25_raw",), passage_scale=True)
def bm25_top1_raw(batch):
    """Best BM25 score, all tokens kept; 0 when nothing matched."""
    return _top_or_zero(batch, "bm25_raw")


@register_batch_signal("bm25_top1_stopwords", retrievers=("bm25_stopwords",), passage_scale=True)
def bm25_top1_stopwords(batch):
    """Best BM25 score, English stop words removed; 0 when nothing matched."""
    return _top_or_zero(batch, "bm25_stopwords")


@register_batch_signal("bm25_empty_raw", retrievers=("bm25_raw",), higher_is_answerable=False)
def bm25_empty_raw(batch):
    """1 when BM25 (all tokens) matched no chunk, else 0."""
    return (batch.lengths("bm25_raw") == 0).astype(float)


@register_batch_signal("bm25_empty_stopwords", retrievers=("bm25_stopwords",), higher_is_answerable=False)
def bm25_empty_stopwords(batch):
    """1 when BM25 without stop words matched no chunk, else 0."""
    return (batch.lengths("bm25_stopwords") == 0).astype(float)


@register_batch_signal("rrf_top1", retrievers=("rrf",), passage_scale=True)
def rrf_top1(batch):
    """Reciprocal-rank-fusion score of the best fused chunk."""
    return _top(batch, "rrf")


@register_batch_signal("rerank_top1", retrievers=("rerank",), passage_scale=True)
def rerank_top1(batch):
    """Cross-encoder score of the best re-scored candidate (needs a reranker; on the reranker's own scale)."""
    return _top(batch, "rerank")


@register_batch_signal("rerank_gap", retrievers=("rerank",))
def rerank_gap(batch):
    """Cross-encoder top-1 minus top-2: how clearly the reranker prefers one passage."""
    return _top(batch, "rerank") - _top(batch, "rerank", 2)


# The sorted top-k score vector. Gisserot-Boukhlef et al. (TMLR 2024) found that a regression over the sorted
# retrieval scores beat the max, the standard deviation and the top-1/top-2 gap for deciding when to abstain; these
# are the summaries of that vector.

#: How many of the best dense scores the top-k features summarise.
TOP_K = 10


def _dense_top_k(batch: ResultBatch, function, *, minimum: int = 1) -> np.ndarray:
    """``function`` of each query's (up to) ``TOP_K`` best dense scores; NaN with fewer than ``minimum``."""
    lengths = np.minimum(batch.lengths("dense"), TOP_K)
    return by_length(batch.top_scores("dense", TOP_K), lengths, function, minimum=minimum)


@register_batch_signal("dense_top10_mean", retrievers=("dense",))
def dense_top10_mean(batch):
    """Mean cosine of the ten best chunks (the level of the sorted top-k score vector); NaN with no hit."""
    return _dense_top_k(batch, lambda scores: scores.mean(axis=1))


@register_batch_signal("dense_top10_std", retrievers=("dense",))
def dense_top10_std(batch):
    """Standard deviation of the ten best cosines (the spread of the sorted top-k vector); NaN with no hit."""
    return _dense_top_k(batch, lambda scores: scores.std(axis=1))


def least_squares_drop(scores: np.ndarray) -> np.ndarray:
    """Minus the least-squares slope of each row of ``scores`` against its ranks 1, 2, ..."""
    ranks = np.arange(1, scores.shape[1] + 1) - (scores.shape[1] + 1) / 2  # centred ranks
    return -(ranks * (scores - scores.mean(axis=1, keepdims=True))).sum(axis=1) / (ranks**2).sum()


@register_batch_signal("dense_top10_drop", retrievers=("dense",))
def dense_top10_drop(batch):
    """Cosine lost per rank over the ten best chunks: minus the least-squares slope of score against rank.

    Large when a few chunks stand out above the rest (the slope of the sorted
    top-k vector); NaN with fewer than two hits.
    """
    return _dense_top_k(batch, least_squares_drop, minimum=2)


# Length-normalised BM25.


def _bm25_norm(batch: ResultBatch, retriever: str) -> np.ndarray:
    max_score = batch.info(retriever, "max_score")
    values = np.where(np.isnan(max_score), np.nan, 0.0)
    scored = (batch.lengths(retriever) > 0) & (max_score > 0)  # NaN > 0 is False
    values[scored] = _top(batch, retriever)[scored] / max_score[scored]
    return values


@register_batch_signal("bm25_norm_raw", retrievers=("bm25_raw",))
def bm25_norm_raw(batch):
    """Best BM25 score (all tokens) over the query's maximum attainable score, the sum of idf * (k1 + 1).

    Between 0 and 1 whatever the query's length, so long and short queries are
    comparable; 0 when nothing matched. The maximum comes from the BM25
    retriever that scored the query (``info["max_score"]``); NaN without it.
    """
    return _bm25_norm(batch, "bm25_raw")


@register_batch_signal("bm25_norm_stopwords", retrievers=("bm25_stopwords",))
def bm25_norm_stopwords(batch):
    """Best BM25 score without stop words over the query's maximum attainable score (as ``bm25_norm_raw``)."""
    return _bm25_norm(batch, "bm25_stopwords")


# Lexical coverage.


@register_batch_signal("bm25_coverage_top10", retrievers=("bm25_raw",))
def bm25_coverage_top10(batch):
    """IDF-weighted share of the query's distinct terms found in the ten best BM25 chunks (all tokens).

    From the BM25 retriever that scored the query (``info["coverage_top"]``):
    a question whose rare terms no top passage contains is probably not
    covered. NaN without that information or for a query with no token.
    """
    return batch.info("bm25_raw", "coverage_top")


@register_batch_signal("bm25_coverage_corpus", retrievers=("bm25_raw",))
def bm25_coverage_corpus(batch):
    """IDF-weighted share of the query's distinct terms that occur anywhere in the corpus (all tokens).

    A term the corpus never uses counts with the IDF it would have at document
    frequency 0, so one unknown rare word weighs a lot (``info["coverage_corpus"]``).
    """
    return batch.info("bm25_raw", "coverage_corpus")


# Dense-BM25 agreement.


@register_batch_signal("dense_bm25_page_overlap", retrievers=("dense", "bm25_stopwords"))
def dense_bm25_page_overlap(batch):
    """Jaccard overlap of the pages among the ten best dense chunks and the ten best BM25 chunks (no stop words).

    Two retrievers that agree on where the answer is suggest there is one; 0
    when BM25 matched nothing, NaN when dense found nothing.
    """
    dense, lexical = batch.pages("dense", TOP_K), batch.pages("bm25_stopwords", TOP_K)
    n_dense, n_lexical = _distinct_counts(dense), _distinct_counts(lexical)
    union = _distinct_counts(np.concatenate([dense, lexical], axis=1))
    with np.errstate(invalid="ignore"):
        return np.where(n_dense > 0, (n_dense + n_lexical - union) / union, np.nan)


def _distinct_counts(codes: np.ndarray) -> np.ndarray:
    """Number of distinct non-negative codes in each row."""
    ordered = np.sort(codes, axis=1)
    new = ordered >= 0
    new[:, 1:] &= ordered[:, 1:] != ordered[:, :-1]
    return new.sum(axis=1)


def _page_rank(pages: np.ndarray, target: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Position of the first ``target[i]`` in ``pages[i]`` (-1 when absent) and how many distinct pages precede it."""
    width = pages.shape[1]
    hits = (pages == target[:, None]) & (target[:, None] >= 0)
    first = np.where(hits, np.arange(width), width).min(axis=1, initial=width)
    before = _distinct_counts(np.where(np.arange(width) < first[:, None], pages, -1))
    return np.where(first < width, first, -1), before


@register_batch_signal("dense_top_page_bm25_rr", retrievers=("dense", "bm25_stopwords"))
def dense_top_page_bm25_rr(batch):
    """Reciprocal rank of the dense top page among the pages BM25 (no stop words) returns, in BM25's order.

    1 when both put the same page first, 0 when BM25 does not list it (or
    matched nothing); NaN when dense found nothing.
    """
    dense = batch.pages("dense", TOP_K)
    top_page = dense[:, 0] if dense.shape[1] else np.full(len(batch), -1)
    first, before = _page_rank(batch.pages("bm25_stopwords", TOP_K), top_page)
    # Most queries meet the page among BM25's first chunks; only the others need the pages of their whole list.
    deeper = np.flatnonzero((first < 0) & (top_page >= 0) & (batch.lengths("bm25_stopwords") > TOP_K))
    if deeper.size:
        first[deeper], before[deeper] = _page_rank(batch.pages_of("bm25_stopwords", deeper), top_page[deeper])
    values = np.where(first >= 0, 1.0 / (before + 1), 0.0)
    return np.where(batch.lengths("dense") > 0, values, np.nan)


# Domain scores (seed 003, no LLM).


@register_batch_signal("dense_centroid_cosine", retrievers=("dense",))
def dense_centroid_cosine(batch):
    """Cosine between the query and the centroid of the corpus's chunk embeddings ("is this our domain at all").

    The centroid is that of the dense retriever that searched the query
    (``info["centroid_cosine"]``); NaN without it.
    """
    return batch.info("dense", "centroid_cosine")


@register_batch_signal(f"dense_page_knn{PAGE_NEIGHBOURS}", retrievers=("dense",))
def dense_page_knn(batch):
    """Mean cosine between the query and its five nearest page centroids (mean embedding of a page's chunks).

    A softer domain check than the single corpus centroid: a corpus covers
    several topics. From the dense retriever that searched the query
    (``info["page_knn_cosine"]``); NaN without it.
    """
    return batch.info("dense", "page_knn_cosine")


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
