"""Per-query diagnostics that gating signals need beyond a ranked list.

Some signals need corpus-level numbers: the IDF weights of the query's terms,
which chunks contain which term, the embedding centroid of the corpus. Those
numbers must come from the retriever object that produced the query's results,
never from a global corpus object: when a caller may only see some chunks, the
retrievers are built on those chunks only, and a restricted page must not move
a signal. So each diagnostic here is a function of one retriever object and
one query, and :func:`attach_diagnostics` stores it in the ``info`` mapping of
that retriever's :class:`~ragcal.retrieval.RetrievalResult`.

BM25 (``bm25_raw``, ``bm25_stopwords``), from :func:`bm25_info`:

``max_score``
    The largest score any chunk could reach for this query: one query term
    adds at most ``idf * (k1 + 1)`` (Okapi BM25's term-frequency factor tends
    to ``k1 + 1``), so the sum over the query's terms (repeats counted, as the
    scorer counts them) of ``idf * (k1 + 1)``, over terms that occur in the
    corpus. 0 when none does.
``coverage_top``
    IDF-weighted share of the query's distinct terms that occur in at least
    one of the top ``COVERAGE_DEPTH`` chunks of the result.
``coverage_corpus``
    IDF-weighted share of the query's distinct terms that occur anywhere in
    the retriever's chunks. A term the corpus lacks is weighted with the IDF
    it would have at document frequency 0 (:meth:`BM25Retriever.unseen_idf`).

Dense, from :func:`dense_info`:

``centroid_cosine``
    Cosine between the query and the mean of the retriever's chunk embeddings.
``page_knn_cosine``
    Mean cosine between the query and its ``PAGE_NEIGHBOURS`` nearest page
    centroids (the normalised mean embedding of each page's chunks).

Both are seed 003's "is this question in our domain at all" check, without
an LLM.
"""

from __future__ import annotations

import weakref
from collections import Counter
from dataclasses import replace
from typing import TYPE_CHECKING

import numpy as np

from ..chunking import pages_of
from .base import RetrievalResult

if TYPE_CHECKING:
    from .bm25 import BM25Retriever
    from .dense import DenseRetriever

__all__ = ["COVERAGE_DEPTH", "PAGE_NEIGHBOURS", "bm25_info", "dense_info", "attach_diagnostics"]

#: How many of a BM25 result's top chunks ``coverage_top`` looks at.
COVERAGE_DEPTH = 10
#: How many nearest page centroids ``page_knn_cosine`` averages.
PAGE_NEIGHBOURS = 5

_NAN = float("nan")


def bm25_info(retriever: BM25Retriever, query: str, result: RetrievalResult, *, depth: int = COVERAGE_DEPTH) -> dict:
    """``max_score``, ``coverage_top`` and ``coverage_corpus`` of one query (see the module docstring).

    All three are NaN when the query has no token (e.g. only stop words for
    the ``stopwords`` variant).
    """
    from .bm25 import tokenize

    tokens = tokenize(query, variant=retriever.variant)
    if not tokens:
        return {"max_score": _NAN, "coverage_top": _NAN, "coverage_corpus": _NAN}
    counts = Counter(tokens)
    distinct = list(counts)
    distinct_idf = retriever.idf(distinct)
    in_corpus = ~np.isnan(distinct_idf)
    repeats = np.fromiter(counts.values(), dtype=float, count=len(distinct))
    max_score = float((distinct_idf[in_corpus] * repeats[in_corpus]).sum() * (retriever.k1 + 1))
    weights = np.where(in_corpus, distinct_idf, retriever.unseen_idf())
    top = np.array([retriever.position_of(chunk_id) for chunk_id in result.chunk_ids[:depth]], dtype=np.intp)
    in_top = retriever.occurs_in(top, distinct)
    total = weights.sum()
    return {
        "max_score": max_score,
        "coverage_top": float(weights[in_top].sum() / total),
        "coverage_corpus": float(weights[in_corpus].sum() / total),
    }


_DOMAINS: "weakref.WeakKeyDictionary[DenseRetriever, tuple]" = weakref.WeakKeyDictionary()


def _domain(retriever: DenseRetriever):
    """Unit corpus centroid and unit page centroids of a retriever's chunks (cached per retriever object)."""
    cached = _DOMAINS.get(retriever)
    if cached is not None and cached[0] == len(retriever.chunk_ids):
        return cached[1], cached[2]
    vectors = np.asarray(retriever.chunk_vectors(), dtype=np.float64)
    centroid = vectors.mean(axis=0)
    centroid /= np.linalg.norm(centroid)
    pages = np.array(pages_of(retriever.chunk_ids))
    names, page_of_chunk = np.unique(pages, return_inverse=True)
    sums = np.zeros((names.size, vectors.shape[1]))
    np.add.at(sums, page_of_chunk, vectors)
    page_centroids = sums / np.linalg.norm(sums, axis=1, keepdims=True)
    _DOMAINS[retriever] = (len(retriever.chunk_ids), centroid, page_centroids)
    return centroid, page_centroids


def dense_info(retriever: DenseRetriever, query_vectors, *, neighbours: int = PAGE_NEIGHBOURS) -> list[dict]:
    """``centroid_cosine`` and ``page_knn_cosine`` for each row of ``query_vectors`` (L2-normalised)."""
    query_vectors = np.atleast_2d(np.asarray(query_vectors, dtype=np.float64))
    if not retriever.chunk_ids:
        return [{"centroid_cosine": _NAN, "page_knn_cosine": _NAN} for _ in range(query_vectors.shape[0])]
    centroid, page_centroids = _domain(retriever)
    to_centroid = query_vectors @ centroid
    to_pages = query_vectors @ page_centroids.T
    nearest = min(neighbours, to_pages.shape[1])
    knn = -np.sort(-to_pages, axis=1)[:, :nearest].mean(axis=1)
    return [{"centroid_cosine": float(c), "page_knn_cosine": float(k)} for c, k in zip(to_centroid, knn)]


def _with_info(result: RetrievalResult, info: dict) -> RetrievalResult:
    return replace(result, info={**result.info, **info})


def attach_diagnostics(retrieved: dict, queries, retrievers: dict, *, query_vectors=None) -> dict:
    """Copy of ``retrieved`` whose results carry their retriever's diagnostics in ``info``.

    Parameters
    ----------
    retrieved : dict of str to list of RetrievalResult
        ``{retriever name: [result of query 0, query 1, ...]}``.
    queries : sequence of str
        The query texts, in the same order.
    retrievers : dict of str to retriever
        The objects that produced each named list (the ones built on the
        chunks this caller may see). :class:`BM25Retriever` and
        :class:`DenseRetriever` get diagnostics; other names are left as they are.
    query_vectors : ndarray of shape (n_queries, dim), default=None
        The query embeddings the dense retriever searched with; dense
        diagnostics are skipped when None.
    """
    from .bm25 import BM25Retriever
    from .dense import DenseRetriever

    queries = [str(query) for query in queries]
    output = dict(retrieved)
    for name, retriever in retrievers.items():
        if name not in retrieved:
            continue
        if isinstance(retriever, BM25Retriever):
            output[name] = [
                _with_info(result, bm25_info(retriever, query, result))
                for query, result in zip(queries, retrieved[name])
            ]
        elif isinstance(retriever, DenseRetriever) and query_vectors is not None:
            infos = dense_info(retriever, query_vectors)
            output[name] = [_with_info(result, info) for result, info in zip(retrieved[name], infos)]
    return output
