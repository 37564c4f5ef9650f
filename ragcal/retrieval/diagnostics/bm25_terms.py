"""What every BM25 diagnostic starts from: a retriever's term statistics and each query's distinct terms.

:func:`term_statistics` reads a :class:`~ragcal.retrieval.BM25Retriever`'s
vocabulary, IDF weights and chunk-by-term frequencies once per retriever
object; :func:`query_terms` lists the distinct terms of every query of a
batch, in order, once per batch, for the diagnostics of
:mod:`~ragcal.retrieval.diagnostics.bm25_statistics` and
:mod:`~ragcal.retrieval.diagnostics.clarity` to share. :func:`segment_sums`
sums each query's terms bit for bit as the query's own 1-D array would be
summed, so a query's numbers do not depend on its batch.
"""

from __future__ import annotations

import weakref
from dataclasses import dataclass
from itertools import chain
from typing import TYPE_CHECKING

import numpy as np

from .registry import RetrieverBatch, retriever_cache

if TYPE_CHECKING:
    from ..bm25 import BM25Retriever

__all__ = ["TermStatistics", "QueryTerms", "term_statistics", "query_terms", "segment_sums"]


def segment_sums(values: np.ndarray, counts: np.ndarray) -> np.ndarray:
    """``values[start:start + count].sum()`` of consecutive segments, bit for bit, without a loop over segments.

    NumPy sums a 1-D array pairwise, so a segment's rounding depends on its
    length; ``np.add.reduceat`` (left to right) does not reproduce it. Segments
    of one length, stacked as the rows of a C-contiguous matrix and summed
    along the rows, do: each row goes through the same pairwise routine as the
    1-D array. So the segments are grouped by length (few distinct lengths).
    An empty segment sums to 0.
    """
    counts = np.asarray(counts, dtype=np.intp)
    sums = np.zeros(counts.size)
    starts = np.cumsum(counts) - counts
    for length in np.unique(counts).tolist():
        if length:
            rows = np.flatnonzero(counts == length)
            sums[rows] = values[starts[rows, None] + np.arange(length)].sum(axis=1)
    return sums


class _Columns(dict):
    """Term -> column; -1 for a term that is not in the corpus (so that ``map(columns.__getitem__, ...)`` works)."""

    def __missing__(self, term):
        return -1


@dataclass(frozen=True)
class TermStatistics:
    """What the BM25 diagnostics need of a retriever, read once through its public accessors.

    ``columns`` maps every term that occurs in a chunk to its column (the
    scorer's own, for the sparse backend) and ``idf`` holds the scorer's IDF
    per column (NaN for a column of no occurring term). ``indptr`` and
    ``indices`` are the chunk-by-term pattern in CSR layout: the columns of
    the terms of chunk ``i`` are ``indices[indptr[i]:indptr[i + 1]]``.
    ``frequencies`` holds the
    raw term frequency of each entry of ``indices``; ``doc_len`` the length
    of each chunk as the scorer counts it (an empty chunk is one padding
    token) and ``collection_frequency`` the sum of a column's frequencies.
    ``k1`` and ``b`` are the scorer's.
    """

    columns: dict
    idf: np.ndarray
    indptr: np.ndarray
    indices: np.ndarray
    frequencies: np.ndarray
    doc_len: np.ndarray
    collection_frequency: np.ndarray
    k1: float
    b: float

    @property
    def n_terms(self) -> int:
        return self.idf.size

    def occurrences(self, chunks: np.ndarray, columns: np.ndarray) -> np.ndarray:
        """Keys ``position * n_terms + column`` of the terms at ``columns`` that occur in the chunks at ``chunks``.

        ``chunks`` holds distinct positions; the keys are distinct too.
        """
        starts = self.indptr[chunks]
        counts = self.indptr[chunks + 1] - starts
        offsets = np.cumsum(counts) - counts
        entries = np.arange(counts.sum()) - np.repeat(offsets - starts, counts)
        found = self.indices[entries]
        wanted = np.zeros(self.n_terms, dtype=bool)
        wanted[columns] = True
        keep = wanted[found]
        return np.repeat(chunks.astype(np.int64), counts)[keep] * self.n_terms + found[keep]


def _build_terms(retriever: BM25Retriever) -> TermStatistics:
    from scipy.sparse import csc_matrix, csr_matrix

    if retriever.backend == "sparse":
        # The scorer's own columns, and its term-by-chunk frequencies turned row-wise (O(entries)).
        scorer = retriever.bm25
        vocabulary = list(scorer.vocabulary)
        columns = np.fromiter(scorer.vocabulary.values(), dtype=np.intp, count=len(vocabulary))
        idf = np.full(len(vocabulary), np.nan)
        idf[columns] = retriever.idf(vocabulary)  # NaN for a token in no chunk (the padding of empty chunks)
        weights = scorer.weights
        frequencies = np.asarray(scorer.frequencies, dtype=np.int32)
        pattern = csc_matrix((frequencies, weights.indices, weights.indptr), shape=weights.shape).tocsr()
        doc_len = np.asarray(scorer.doc_len, dtype=np.float64)
    else:  # rank_bm25, the reference: its postings and per-document counts, term by term
        vocabulary = list(retriever.bm25.idf)
        columns = np.arange(len(vocabulary))
        idf = retriever.idf(vocabulary)
        postings = [retriever.positions_with(term) for term in vocabulary]
        lengths = np.fromiter(map(len, postings), dtype=np.intp, count=len(vocabulary))
        chunks = np.concatenate([np.empty(0, dtype=np.intp), *postings])
        counts = retriever.bm25.doc_freqs
        frequencies = np.fromiter(
            (counts[position][term] for term, posting in zip(vocabulary, postings) for position in posting.tolist()),
            dtype=np.int32,
            count=chunks.size,
        )
        pattern = csr_matrix(
            (frequencies, (chunks, np.repeat(columns, lengths))),
            shape=(len(retriever.chunk_ids), len(vocabulary)),
        )
        doc_len = np.asarray(retriever.bm25.doc_len, dtype=np.float64)
    pattern.sort_indices()
    occurs = (~np.isnan(idf[columns])).tolist()
    return TermStatistics(
        columns=_Columns((term, column) for term, column, kept in zip(vocabulary, columns.tolist(), occurs) if kept),
        idf=idf,
        indptr=pattern.indptr.astype(np.int64),
        indices=pattern.indices,
        frequencies=pattern.data.astype(np.float64),
        doc_len=doc_len,
        collection_frequency=np.bincount(pattern.indices, weights=pattern.data, minlength=idf.size),
        k1=float(retriever.bm25.k1),
        b=float(retriever.bm25.b),
    )

_TERMS: "weakref.WeakKeyDictionary[BM25Retriever, tuple]" = weakref.WeakKeyDictionary()


def term_statistics(retriever: BM25Retriever) -> TermStatistics:
    """The :class:`TermStatistics` of ``retriever``, read once per retriever object (again if its scorer changes)."""
    return retriever_cache(_TERMS, retriever, retriever.bm25, _build_terms)


@dataclass(frozen=True)
class QueryTerms:
    """The distinct terms of each query of a batch, in order of first appearance (the order a Counter keeps).

    One entry per (query, distinct term), grouped by query in batch order:
    ``query`` is the query's position, ``code`` the term's column in
    :attr:`terms` (a term the corpus lacks gets a code of ``n_terms`` or more,
    one per distinct word), ``repeats`` how often the query holds it (float).
    ``in_corpus`` marks the terms that occur in the retriever's chunks,
    ``idf`` holds their IDF (one per ``True`` of ``in_corpus``), and
    ``weights`` the IDF of every entry, with the IDF a term would have at
    document frequency 0 for the others. ``token_counts`` is the number of
    tokens of each query (0: a query with no token).
    """

    terms: TermStatistics
    n_queries: int
    token_counts: np.ndarray
    query: np.ndarray
    code: np.ndarray
    repeats: np.ndarray
    in_corpus: np.ndarray
    idf: np.ndarray
    weights: np.ndarray

    @property
    def no_token(self) -> np.ndarray:
        """Whether each query has no token at all (its BM25 diagnostics are NaN)."""
        return self.token_counts == 0


def query_terms(batch: RetrieverBatch) -> QueryTerms:
    """The :class:`QueryTerms` of a BM25 retriever's batch, computed once per batch (:meth:`RetrieverBatch.shared`).

    The tokens are those the retriever itself scored when the result is its
    own (``result.tokens``), else the query tokenized with its variant.
    """
    return batch.shared("bm25 query terms", lambda: _query_terms(batch.retriever, batch.queries, batch.results))


def _query_terms(retriever: BM25Retriever, queries: list, results: list) -> QueryTerms:
    from ..bm25 import tokenize

    terms = term_statistics(retriever)
    n_queries, n_terms = len(queries), terms.n_terms
    # The tokens the retriever itself produced, when the result is its own.
    own = [result.source_ids is retriever.chunk_ids for result in results]
    tokens = [
        list(result.tokens) if mine and result.tokens is not None else tokenize(query, variant=retriever.variant)
        for query, result, mine in zip(queries, results, own)
    ]
    flat = list(chain.from_iterable(tokens))
    codes = np.fromiter(map(terms.columns.__getitem__, flat), dtype=np.int64, count=len(flat))  # -1: not in it
    unseen = np.flatnonzero(codes < 0).tolist()
    n_codes = n_terms
    if unseen:  # terms the corpus lacks: one code per distinct word, after the corpus's columns
        extra: dict[str, int] = {}
        codes[unseen] = [extra.setdefault(flat[i], n_terms + len(extra)) for i in unseen]
        n_codes += len(extra)

    # The distinct terms of each query, in order of first appearance (the order a Counter of its tokens keeps).
    counts = np.fromiter(map(len, tokens), dtype=np.intp, count=n_queries)
    keys = np.repeat(np.arange(n_queries, dtype=np.int64), counts) * n_codes + codes
    distinct, first, repeats = np.unique(keys, return_index=True, return_counts=True)
    order = np.argsort(first, kind="stable")
    distinct, repeats = distinct[order], repeats[order].astype(float)
    query, code = np.divmod(distinct, n_codes)
    in_corpus = code < n_terms
    idf = terms.idf[code[in_corpus]]
    weights = np.full(distinct.size, retriever.unseen_idf())
    weights[in_corpus] = idf
    return QueryTerms(terms, n_queries, counts, query, code, repeats, in_corpus, idf, weights)
