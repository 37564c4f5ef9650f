"""Clarity of a BM25 query: how far the language model of its top chunks is from the collection's.

``clarity`` (Cronen-Townsend, Zhou & Croft, SIGIR 2002) of the query's top
``CLARITY_DEPTH`` chunks: the KL divergence, in bits, of the query language
model estimated from them from the collection language model (see
:func:`ragcal.signals.qpp.bm25_clarity_stopwords` for the formula and its
choices). Computed for the ``stopwords`` variant only, NaN for ``raw``: the
paper's models are over stopped text, and with stop words kept they dominate
both models. 0 when nothing matched. Registered, with the other BM25 keys, by
:mod:`~ragcal.retrieval.diagnostics.bm25_statistics`.
"""

from __future__ import annotations

import weakref
from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np

from .bm25_terms import TermStatistics, query_terms, segment_sums
from .registry import RetrieverBatch, retriever_cache

if TYPE_CHECKING:
    from ..bm25 import BM25Retriever

__all__ = ["CLARITY_DEPTH", "CLARITY_LAMBDA", "clarity_column"]

#: How many top chunks the clarity query model is estimated from.
CLARITY_DEPTH = 10
#: Jelinek-Mercer weight of a chunk's own model in clarity's smoothed document models (0.6, Cronen-Townsend et al.).
CLARITY_LAMBDA = 0.6


_CLARITY: "weakref.WeakKeyDictionary[BM25Retriever, tuple]" = weakref.WeakKeyDictionary()


@dataclass(frozen=True)
class _LanguageModels:
    """Per-chunk language models of a BM25 retriever's chunks, for clarity (see :func:`clarity_column`).

    ``own`` is the CSR matrix (chunk x term) of maximum-likelihood estimates
    ``tf / |D|``; ``lift`` has the same pattern and holds
    ``log(1 + lambda tf / |D| / ((1 - lambda) P_coll))``, the part of a
    chunk's smoothed log-likelihood of one term that differs between chunks;
    ``collection`` is ``P_coll(w) = F_w / |C|`` per column.
    """

    own: object
    lift: object
    collection: np.ndarray


def _build_language_models(terms: TermStatistics, smoothing: float = CLARITY_LAMBDA) -> _LanguageModels:
    from scipy.sparse import csr_matrix

    shape = (terms.doc_len.size, terms.n_terms)
    rows = np.repeat(np.arange(terms.doc_len.size), np.diff(terms.indptr))
    own = terms.frequencies / terms.doc_len[rows]
    collection = terms.collection_frequency / terms.doc_len.sum()
    lift = np.log1p(smoothing * own / ((1 - smoothing) * collection[terms.indices]))
    return _LanguageModels(
        own=csr_matrix((own, terms.indices, terms.indptr), shape=shape),
        lift=csr_matrix((lift, terms.indices, terms.indptr), shape=shape),
        collection=collection,
    )


def clarity_column(batch: RetrieverBatch, *, depth: int = CLARITY_DEPTH) -> np.ndarray:
    """Clarity of each query's top ``depth`` chunks, in bits; NaN for every query of a ``raw`` BM25 retriever.

    See :func:`ragcal.signals.qpp.bm25_clarity_stopwords` for the formula.
    The query's distinct terms that occur in the corpus come from
    :func:`~ragcal.retrieval.diagnostics.bm25_terms.query_terms`. Every step
    is a row-wise sparse operation or a
    :func:`~ragcal.retrieval.diagnostics.bm25_terms.segment_sums`, so a
    query's value does not depend on the others in the batch. 0 when nothing
    matched.
    """
    from scipy.sparse import csr_matrix

    retriever = batch.retriever
    n_queries = len(batch)
    if retriever.variant != "stopwords":
        return np.full(n_queries, np.nan)
    asked = query_terms(batch)  # the query's distinct terms; those in the corpus are ``kept``
    terms, kept = asked.terms, asked.in_corpus
    query_rows, query_columns, query_repeats = asked.query[kept], asked.code[kept], asked.repeats[kept]
    models = retriever_cache(_CLARITY, retriever, retriever.bm25, lambda _: _build_language_models(terms))
    tops = batch.positions(depth)
    n_top = np.fromiter(map(len, tops), dtype=np.intp, count=n_queries)
    chunks = np.concatenate([np.empty(0, dtype=np.intp), *tops])
    clarity = np.zeros(n_queries)
    if not chunks.size:
        return clarity
    of_row = np.repeat(np.arange(n_queries), n_top)
    # log P(Q|D) up to a term shared by every chunk: sum over the query's terms of repeats * lift(term, chunk).
    counts = csr_matrix((query_repeats, (query_rows, query_columns)), shape=(n_queries, terms.n_terms))
    counts.sum_duplicates()
    lifts = models.lift[chunks]
    lifts.sort_indices()
    repeated = counts[of_row]
    repeated.sort_indices()
    log_likelihood = np.asarray(lifts.multiply(repeated).sum(axis=1), dtype=np.float64).ravel()
    # P(D|Q): the likelihoods normalised over each query's top chunks (a uniform prior), the largest first scaled to 1.
    starts = np.cumsum(n_top) - n_top
    scored = n_top > 0
    peak = np.zeros(n_queries)
    peak[scored] = np.maximum.reduceat(log_likelihood, starts[scored])
    unnormalised = np.exp(log_likelihood - peak[of_row])
    weight = unnormalised / segment_sums(unnormalised, n_top)[of_row]
    # P(w|Q) = lambda * sum_D P(D|Q) tf(w, D) / |D| + (1 - lambda) P_coll(w), over the terms of the top chunks.
    mixing = csr_matrix((weight, np.arange(chunks.size), np.concatenate([[0], np.cumsum(n_top)])),
                        shape=(n_queries, chunks.size))
    query_model = mixing @ models.own[chunks]
    query_model.sort_indices()
    background = models.collection[query_model.indices]
    probability = CLARITY_LAMBDA * query_model.data + (1 - CLARITY_LAMBDA) * background
    clarity = segment_sums(probability * np.log2(probability / background), np.diff(query_model.indptr))
    return clarity

