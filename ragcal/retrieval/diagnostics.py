"""Per-query diagnostics that gating signals need beyond a ranked list.

Some signals need corpus-level numbers: the IDF weights of the query's terms,
which chunks contain which term, the embedding centroid of the corpus. Those
numbers must come from the retriever object that produced the query's results,
never from a global corpus object: when a caller may only see some chunks, the
retrievers are built on those chunks only, and a restricted page must not move
a signal. So each diagnostic here is a function of one retriever object and
the query, and :func:`attach_diagnostics` stores it in the ``info`` mapping of
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

Every diagnostic is computed for a whole batch of queries at once, with array
operations: :func:`bm25_diagnostics` and :func:`dense_diagnostics` return one
array per key. :func:`bm25_info` and :func:`dense_info` are the same
computation on a batch of one query (or as a list of dicts), so there is one
definition of each. The BM25 sums run in the same order and through the same
NumPy reductions as one query's own arrays would (:func:`_segment_sums`), so a
query's BM25 numbers are the same bit for bit in any batch. The dense ones are
two matrix products (BLAS), whose last bit can depend on how many rows the
batch has (BLAS tiles the rows), as it always did here: a query embedded with
others may differ from the same query alone in the last bits (a few 1e-16).
"""

from __future__ import annotations

import threading
import weakref
from contextlib import contextmanager
from dataclasses import dataclass
from itertools import chain, repeat
from typing import TYPE_CHECKING

import numpy as np
import pandas as pd

from ..chunking import pages_of
from .base import RetrievalResult

if TYPE_CHECKING:
    from .bm25 import BM25Retriever
    from .dense import DenseRetriever

__all__ = [
    "COVERAGE_DEPTH",
    "PAGE_NEIGHBOURS",
    "BM25_KEYS",
    "DENSE_KEYS",
    "bm25_diagnostics",
    "dense_diagnostics",
    "dense_domain",
    "set_dense_domain",
    "bm25_info",
    "dense_info",
    "diagnostic_rows",
    "attach_diagnostics",
]

#: How many of a BM25 result's top chunks ``coverage_top`` looks at.
COVERAGE_DEPTH = 10
#: How many nearest page centroids ``page_knn_cosine`` averages.
PAGE_NEIGHBOURS = 5
#: The ``info`` keys of a BM25 result, in the order :func:`bm25_diagnostics` returns them.
BM25_KEYS = ("max_score", "coverage_top", "coverage_corpus")
#: The ``info`` keys of a dense result, in the order :func:`dense_diagnostics` returns them.
DENSE_KEYS = ("centroid_cosine", "page_knn_cosine")


def _segment_sums(values: np.ndarray, counts: np.ndarray) -> np.ndarray:
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


def _cached(cache: weakref.WeakKeyDictionary, retriever, source, build):
    """``build(retriever)``, kept per retriever object while ``source`` (what it was built from) stays the same."""
    entry = cache.get(retriever)
    if entry is not None and entry[0] is source and entry[1] == len(retriever.chunk_ids):
        return entry[2]
    value = build(retriever)
    cache[retriever] = (source, len(retriever.chunk_ids), value)
    return value


class _Columns(dict):
    """Term -> column; -1 for a term that is not in the corpus (so that ``map(columns.__getitem__, ...)`` works)."""

    def __missing__(self, term):
        return -1


@dataclass(frozen=True)
class _Terms:
    """What the batch BM25 diagnostics need of a retriever, read once through its public accessors.

    ``columns`` maps every term that occurs in a chunk to its column (the
    scorer's own, for the sparse backend) and ``idf`` holds the scorer's IDF
    per column (NaN for a column of no occurring term). ``indptr`` and
    ``indices`` are the chunk-by-term pattern in CSR layout: the columns of
    the terms of chunk ``i`` are ``indices[indptr[i]:indptr[i + 1]]``.
    ``positions`` maps a chunk id to its position.
    """

    columns: dict
    idf: np.ndarray
    indptr: np.ndarray
    indices: np.ndarray
    positions: dict

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


def _build_terms(retriever: BM25Retriever) -> _Terms:
    from scipy.sparse import csc_matrix, csr_matrix

    if retriever.backend == "sparse":
        # The scorer's own columns, and its term-by-chunk pattern turned row-wise (O(entries), 5 bytes each).
        scorer = retriever.bm25
        vocabulary = list(scorer.vocabulary)
        columns = np.fromiter(scorer.vocabulary.values(), dtype=np.intp, count=len(vocabulary))
        idf = np.full(len(vocabulary), np.nan)
        idf[columns] = retriever.idf(vocabulary)  # NaN for a token in no chunk (the padding of empty chunks)
        weights = scorer.weights
        ones = np.ones(weights.indices.size, dtype=np.int8)
        pattern = csc_matrix((ones, weights.indices, weights.indptr), shape=weights.shape).tocsr()
    else:  # rank_bm25, the reference: its postings, term by term
        vocabulary = list(retriever.bm25.idf)
        columns = np.arange(len(vocabulary))
        idf = retriever.idf(vocabulary)
        postings = [retriever.positions_with(term) for term in vocabulary]
        lengths = np.fromiter(map(len, postings), dtype=np.intp, count=len(vocabulary))
        chunks = np.concatenate([np.empty(0, dtype=np.intp), *postings])
        pattern = csr_matrix(
            (np.ones(chunks.size, dtype=np.int8), (chunks, np.repeat(columns, lengths))),
            shape=(len(retriever.chunk_ids), len(vocabulary)),
        )
    occurs = (~np.isnan(idf[columns])).tolist()
    return _Terms(
        columns=_Columns((term, column) for term, column, kept in zip(vocabulary, columns.tolist(), occurs) if kept),
        idf=idf,
        indptr=pattern.indptr.astype(np.int64),
        indices=pattern.indices,
        positions={chunk_id: position for position, chunk_id in enumerate(retriever.chunk_ids)},
    )


_TERMS: "weakref.WeakKeyDictionary[BM25Retriever, tuple]" = weakref.WeakKeyDictionary()


def bm25_diagnostics(
    retriever: BM25Retriever, queries, results, *, depth: int = COVERAGE_DEPTH
) -> dict[str, np.ndarray]:
    """``max_score``, ``coverage_top`` and ``coverage_corpus`` of a batch of queries (see the module docstring).

    Parameters
    ----------
    retriever : BM25Retriever
        The retriever that produced ``results``; every statistic comes from it.
    queries : sequence of str
    results : sequence of RetrievalResult
        The retriever's result of each query, in the same order.
    depth : int, default=COVERAGE_DEPTH
        How many top chunks ``coverage_top`` looks at.

    Returns
    -------
    dict of str to ndarray of shape (n_queries,)
        One float64 array per key of :data:`BM25_KEYS`. All three are NaN for
        a query with no token (e.g. only stop words for the ``stopwords``
        variant).
    """
    from .bm25 import tokenize

    if not isinstance(depth, int) or depth < 0:
        raise ValueError(f"The 'depth' parameter of bm25_diagnostics must be an int >= 0. Got {depth!r} instead.")
    queries = [str(query) for query in queries]
    results = list(results)
    if len(results) != len(queries):
        raise ValueError(f"bm25_diagnostics: {len(queries)} queries but {len(results)} results")
    terms = _cached(_TERMS, retriever, retriever.bm25, _build_terms)
    n_queries, n_terms = len(queries), terms.n_terms
    # The tokens and chunk positions the retriever itself produced, when the result is its own.
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

    # Which of a query's terms occur in its top chunks: look (chunk, term) up among the retriever's occurrences.
    top_positions = [
        result.positions[:depth] if mine else _positions_of(terms, result, depth)
        for result, mine in zip(results, own)
    ]
    n_top = np.fromiter(map(len, top_positions), dtype=np.intp, count=n_queries)
    top = np.full((n_queries, depth), -1, dtype=np.int64)
    top[np.arange(top.shape[1]) < n_top[:, None]] = np.concatenate([np.empty(0, dtype=np.intp), *top_positions])
    pair_top = top[query[in_corpus]]
    wanted = pair_top * n_terms + code[in_corpus][:, None]
    # Hashed look-ups (pandas) among the query terms in this batch's top chunks only: the cost follows the batch.
    in_some_top = np.zeros(len(retriever.chunk_ids), dtype=bool)
    in_some_top[top[top >= 0]] = True
    occurring = terms.occurrences(np.flatnonzero(in_some_top), code[in_corpus])
    found = (pair_top >= 0) & pd.Index(wanted.ravel()).isin(occurring).reshape(wanted.shape)
    in_top = np.zeros(distinct.size, dtype=bool)
    in_top[in_corpus] = found.any(axis=1)

    # Four sums per query, over the distinct terms in order: idf * repeats of the terms in the corpus, and the
    # weights of all terms, of those in the top chunks and of those in the corpus. One call sums all 4n segments.
    segments = (
        (idf * repeats[in_corpus], query[in_corpus]),
        (weights, query),
        (weights[in_top], query[in_top]),
        (weights[in_corpus], query[in_corpus]),
    )
    sums = _segment_sums(
        np.concatenate([values for values, _ in segments]),
        np.concatenate([np.bincount(of_query, minlength=n_queries) for _, of_query in segments]),
    ).reshape(len(segments), n_queries)
    max_score = sums[0] * (retriever.k1 + 1)
    with np.errstate(divide="ignore", invalid="ignore"):  # a corpus whose IDF floor is negative can sum to 0
        coverage_top, coverage_corpus = sums[2] / sums[1], sums[3] / sums[1]
    no_token = counts == 0
    for values in (max_score, coverage_top, coverage_corpus):
        values[no_token] = np.nan
    return dict(zip(BM25_KEYS, (max_score, coverage_top, coverage_corpus)))


def _positions_of(terms: _Terms, result: RetrievalResult, depth: int) -> np.ndarray:
    """Positions of a result's top ``depth`` chunks, looked up by id (a result the retriever did not stamp)."""
    return np.fromiter(map(terms.positions.__getitem__, result.chunk_ids[:depth]), dtype=np.intp)


def bm25_info(retriever: BM25Retriever, query: str, result: RetrievalResult, *, depth: int = COVERAGE_DEPTH) -> dict:
    """``max_score``, ``coverage_top`` and ``coverage_corpus`` of one query (see the module docstring).

    :func:`bm25_diagnostics` on a batch of one. All three are NaN when the
    query has no token (e.g. only stop words for the ``stopwords`` variant).
    """
    columns = bm25_diagnostics(retriever, [query], [result], depth=depth)
    return {key: float(values[0]) for key, values in columns.items()}


_DOMAINS: "weakref.WeakKeyDictionary[DenseRetriever, tuple]" = weakref.WeakKeyDictionary()


def _build_domain(retriever: DenseRetriever):
    """Unit corpus centroid and unit page centroids of a retriever's chunks."""
    vectors = np.asarray(retriever.chunk_vectors(), dtype=np.float64)
    centroid = vectors.mean(axis=0)
    centroid /= np.linalg.norm(centroid)
    pages = np.array(pages_of(retriever.chunk_ids))
    names, page_of_chunk = np.unique(pages, return_inverse=True)
    sums = np.zeros((names.size, vectors.shape[1]))
    np.add.at(sums, page_of_chunk, vectors)
    page_centroids = sums / np.linalg.norm(sums, axis=1, keepdims=True)
    return centroid, page_centroids


_BLAS_LOCK = threading.Lock()
_THREADPOOLS = None


@contextmanager
def _one_blas_thread():
    """Run the block with BLAS on one thread (threadpoolctl), one block at a time.

    The dense products here are small (queries x dimension x pages): a
    multi-threaded OpenBLAS spends longer waking its workers than they save,
    and a worker that spins after the call takes the CPU from the Python code
    that follows (measured: the batch's diagnostics took twice as long on two
    busy cores). scikit-learn's KMeans limits BLAS the same way. Each output
    element is summed by one thread either way, so the values are the same.
    The lock keeps two threads from restoring each other's setting.
    """
    global _THREADPOOLS
    with _BLAS_LOCK:
        if _THREADPOOLS is None:
            from threadpoolctl import ThreadpoolController

            _THREADPOOLS = ThreadpoolController()
        with _THREADPOOLS.limit(limits=1, user_api="blas"):
            yield


def dense_domain(retriever: DenseRetriever) -> tuple[np.ndarray, np.ndarray]:
    """``(unit corpus centroid, unit page centroids)`` of a retriever's chunks, computed once per retriever.

    What :func:`dense_diagnostics` compares queries with. At 200,000 chunks it
    takes seconds, so :mod:`ragcal.retrieval.store` saves it with the index and
    hands it back with :func:`set_dense_domain`.
    """
    return _cached(_DOMAINS, retriever, retriever.index, _build_domain)


def set_dense_domain(retriever: DenseRetriever, centroid: np.ndarray, page_centroids: np.ndarray) -> None:
    """Give ``retriever`` the :func:`dense_domain` saved with its index, instead of computing it again."""
    dimension, n_chunks = retriever.index.d, len(retriever.chunk_ids)
    if centroid.shape != (dimension,) or page_centroids.ndim != 2 or page_centroids.shape[1] != dimension:
        raise ValueError(
            f"a saved domain of shapes {centroid.shape} and {page_centroids.shape} does not fit vectors of "
            f"dimension {dimension}"
        )
    if not 1 <= page_centroids.shape[0] <= n_chunks:
        raise ValueError(f"a saved domain of {page_centroids.shape[0]} pages does not fit {n_chunks} chunks")
    _DOMAINS[retriever] = (retriever.index, len(retriever.chunk_ids), (centroid, page_centroids))


def dense_diagnostics(
    retriever: DenseRetriever, query_vectors, *, neighbours: int = PAGE_NEIGHBOURS
) -> dict[str, np.ndarray]:
    """``centroid_cosine`` and ``page_knn_cosine`` of each row of ``query_vectors`` (L2-normalised).

    Returns
    -------
    dict of str to ndarray of shape (n_queries,)
        One float64 array per key of :data:`DENSE_KEYS`; NaN when the
        retriever holds no chunk.
    """
    query_vectors = np.atleast_2d(np.asarray(query_vectors, dtype=np.float64))
    if not retriever.chunk_ids:
        return {key: np.full(query_vectors.shape[0], np.nan) for key in DENSE_KEYS}
    centroid, page_centroids = dense_domain(retriever)
    with _one_blas_thread():
        to_centroid = query_vectors @ centroid
        to_pages = query_vectors @ page_centroids.T
    nearest = min(neighbours, to_pages.shape[1])
    if nearest < to_pages.shape[1]:  # only the nearest pages need sorting
        to_pages = np.partition(to_pages, to_pages.shape[1] - nearest, axis=1)[:, to_pages.shape[1] - nearest :]
    knn = -np.sort(-to_pages, axis=1)[:, :nearest].mean(axis=1)  # best first, as the mean adds them
    return dict(zip(DENSE_KEYS, (to_centroid, knn)))


def dense_info(retriever: DenseRetriever, query_vectors, *, neighbours: int = PAGE_NEIGHBOURS) -> list[dict]:
    """``centroid_cosine`` and ``page_knn_cosine`` for each row of ``query_vectors``, one dict per row.

    The rows of :func:`dense_diagnostics`.
    """
    return _rows(dense_diagnostics(retriever, query_vectors, neighbours=neighbours))


def _rows(columns: dict) -> list[dict]:
    keys = list(columns)
    return [dict(zip(keys, values)) for values in zip(*(column.tolist() for column in columns.values()))]


def diagnostic_rows(retrieved: dict, queries, retrievers: dict, *, query_vectors=None) -> dict[str, list[dict]]:
    """The ``info`` of every result in ``retrieved`` that has diagnostics: ``{retriever name: [dict per query]}``.

    What :func:`attach_diagnostics` stores (see it for the parameters); names
    without diagnostics are left out.
    """
    from .bm25 import BM25Retriever
    from .dense import DenseRetriever

    queries = [str(query) for query in queries]
    rows = {}
    for name, retriever in retrievers.items():
        if name not in retrieved:
            continue
        if isinstance(retriever, BM25Retriever):
            columns = bm25_diagnostics(retriever, queries, retrieved[name])
        elif isinstance(retriever, DenseRetriever) and query_vectors is not None:
            columns = dense_diagnostics(retriever, query_vectors)
        else:
            continue
        rows[name] = list(map(dict, map(zip, repeat(list(columns)), zip(*(column.tolist() for column in columns.values())))))
    return rows


def attach_diagnostics(retrieved: dict, queries, retrievers: dict, *, query_vectors=None) -> dict:
    """Copy of ``retrieved`` whose results carry their retriever's diagnostics in ``info``.

    The diagnostics of each retriever are computed for the whole batch at
    once (:func:`bm25_diagnostics`, :func:`dense_diagnostics`).

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
    output = dict(retrieved)
    for name, infos in diagnostic_rows(retrieved, queries, retrievers, query_vectors=query_vectors).items():
        output[name] = list(map(RetrievalResult._with_info, retrieved[name], infos))
    return output
