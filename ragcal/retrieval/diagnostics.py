r"""Per-query diagnostics that gating signals need beyond a ranked list.

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

``corpus_score``
    :math:`s(C)`, the score of the whole collection treated as one document,
    which the query-performance predictors of :mod:`ragcal.qpp` (NQC, WIG,
    SMV) normalise by: the BM25 formula with the collection frequency
    :math:`F_t` as the term frequency and the collection's length
    :math:`|C| = N \cdot \mathrm{avgdl}` as the document length, summed over
    the query's tokens that occur in the corpus (repeats counted):
    :math:`\sum_t \mathrm{idf}(t) F_t (k_1 + 1) / (F_t + k_1 (1 - b + b N))`.
    This is the BM25 analogue of the language-model corpus score
    :math:`\log P(q|C)` of Zhou & Croft (SIGIR 2007) and Shtok et al. (TOIS
    2012), who score the corpus as one large document. 0 when no query token
    occurs in the corpus; negative only when IDF floors are (a corpus where
    most terms occur in more than half of the chunks).
``query_terms``
    :math:`|q|`: how many of the query's tokens occur in the corpus (repeats
    counted), i.e. how many terms the BM25 score sums; WIG and n(σ_x%)
    divide by its square root.
``clarity``
    Clarity (Cronen-Townsend, Zhou & Croft, SIGIR 2002) of the query's
    top ``CLARITY_DEPTH`` chunks: the KL divergence, in bits, of the query
    language model estimated from them from the collection language model
    (see :func:`ragcal.qpp.bm25_clarity_stopwords` for the formula and its
    choices). Computed for the ``stopwords`` variant only, NaN for ``raw``:
    the paper's models are over stopped text, and with stop words kept they
    dominate both models. 0 when nothing matched.

The three are skipped (absent from ``info``) with ``qpp=False``.

Dense, from :func:`dense_info`:

``centroid_cosine``
    Cosine between the query and the mean of the retriever's chunk embeddings.
``page_knn_cosine``
    Mean cosine between the query and its ``PAGE_NEIGHBOURS`` nearest page
    centroids (the normalised mean embedding of each page's chunks).

Both are seed 003's "is this question in our domain at all" check, without
an LLM. ``centroid_cosine`` is also the corpus score :math:`s(C)` that the
dense QPP predictors of :mod:`ragcal.qpp` normalise by.

``perturbation_jaccard``
    Rank stability of the query's top ``PERTURBATION_TOP`` chunks under
    small random perturbations of the query embedding (after Arabzadeh et
    al., "noisy perturbations for estimating query difficulty in dense
    retrievers"): the mean, over ``PERTURBATIONS`` perturbations, of the
    Jaccard overlap between the original top ``PERTURBATION_TOP`` and the
    perturbed one. A perturbed query is ``q + e_p``, with ``e_p`` Gaussian,
    ``PERTURBATION_NOISE / sqrt(dim)`` per dimension (so ``|e_p|`` is about
    ``PERTURBATION_NOISE`` for a unit ``q``). The ``PERTURBATIONS`` noise
    vectors are drawn once from ``PERTURBATION_SEED`` and shared by every
    query (common random numbers): a query's value depends on nothing but
    the query and the retriever, never on its batch, and two queries differ
    by their neighbourhoods, not by their luck. **Approximation**: the
    perturbed list is re-ranked among the original top
    ``PERTURBATION_CANDIDATES`` chunks only (``q.v`` is the result's own
    score, ``e_p.v`` is computed once per chunk from its vector read back
    from faiss and kept), not searched again over the whole index: a chunk
    outside them would need a perturbation larger than the gap between the
    10th and the 100th cosine to enter the top 10. Re-normalising ``q +
    e_p`` scales its scores by one positive number, so it cannot change a
    ranking and is skipped. 1 when the result holds at most
    ``PERTURBATION_TOP`` chunks (nothing can move in or out); NaN when it is
    empty. Skipped with ``qpp=False``.

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
    "CLARITY_DEPTH",
    "CLARITY_LAMBDA",
    "PERTURBATIONS",
    "PERTURBATION_NOISE",
    "PERTURBATION_TOP",
    "PERTURBATION_CANDIDATES",
    "BM25_KEYS",
    "BM25_QPP_KEYS",
    "DENSE_KEYS",
    "DENSE_QPP_KEYS",
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
#: How many top chunks the clarity query model is estimated from.
CLARITY_DEPTH = 10
#: Jelinek-Mercer weight of a chunk's own model in clarity's smoothed document models (0.6, Cronen-Townsend et al.).
CLARITY_LAMBDA = 0.6
#: How many perturbed copies of a query embedding ``perturbation_jaccard`` averages over.
PERTURBATIONS = 10
#: Length (about) of the Gaussian noise added to a unit query embedding.
PERTURBATION_NOISE = 0.1
#: How many top chunks ``perturbation_jaccard`` compares.
PERTURBATION_TOP = 10
#: Among how many of the original top chunks the perturbed queries are ranked.
PERTURBATION_CANDIDATES = 100
#: Seed of the perturbation noise vectors, which every query shares.
PERTURBATION_SEED = 20230402
#: The query-performance-prediction keys of a BM25 result (:mod:`ragcal.qpp`); skipped with ``qpp=False``.
BM25_QPP_KEYS = ("corpus_score", "query_terms", "clarity")
#: The ``info`` keys of a BM25 result, in the order :func:`bm25_diagnostics` returns them.
BM25_KEYS = ("max_score", "coverage_top", "coverage_corpus", *BM25_QPP_KEYS)
#: The query-performance-prediction keys of a dense result (:mod:`ragcal.qpp`); skipped with ``qpp=False``.
DENSE_QPP_KEYS = ("perturbation_jaccard",)
#: The ``info`` keys of a dense result, in the order :func:`dense_diagnostics` returns them.
DENSE_KEYS = ("centroid_cosine", "page_knn_cosine", *DENSE_QPP_KEYS)


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


def _build_terms(retriever: BM25Retriever) -> _Terms:
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
    return _Terms(
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


def bm25_diagnostics(
    retriever: BM25Retriever, queries, results, *, depth: int = COVERAGE_DEPTH, qpp: bool = True
) -> dict[str, np.ndarray]:
    """The :data:`BM25_KEYS` of a batch of queries (see the module docstring).

    Parameters
    ----------
    retriever : BM25Retriever
        The retriever that produced ``results``; every statistic comes from it.
    queries : sequence of str
    results : sequence of RetrievalResult
        The retriever's result of each query, in the same order.
    depth : int, default=COVERAGE_DEPTH
        How many top chunks ``coverage_top`` looks at.
    qpp : bool, default=True
        Also compute :data:`BM25_QPP_KEYS` (the inputs of :mod:`ragcal.qpp`);
        False returns the first three keys only, as before issue 21.

    Returns
    -------
    dict of str to ndarray of shape (n_queries,)
        One float64 array per key of :data:`BM25_KEYS` (or the first three).
        All are NaN for a query with no token (e.g. only stop words for the
        ``stopwords`` variant).
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
    top_positions = [_result_positions(retriever, result, depth) for result in results]
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
    segments = [
        (idf * repeats[in_corpus], query[in_corpus]),
        (weights, query),
        (weights[in_top], query[in_top]),
        (weights[in_corpus], query[in_corpus]),
    ]
    if qpp:  # s(C): each term's BM25 contribution in the collection as one document (length N * avgdl); and |q|
        frequency = terms.collection_frequency[code[in_corpus]]
        length_norm = terms.k1 * (1 - terms.b + terms.b * len(terms.doc_len))
        segments += [
            (idf * (frequency * (terms.k1 + 1) / (frequency + length_norm)) * repeats[in_corpus], query[in_corpus]),
            (repeats[in_corpus], query[in_corpus]),
        ]
    sums = _segment_sums(
        np.concatenate([values for values, _ in segments]),
        np.concatenate([np.bincount(of_query, minlength=n_queries) for _, of_query in segments]),
    ).reshape(len(segments), n_queries)
    max_score = sums[0] * (retriever.k1 + 1)
    with np.errstate(divide="ignore", invalid="ignore"):  # a corpus whose IDF floor is negative can sum to 0
        coverage_top, coverage_corpus = sums[2] / sums[1], sums[3] / sums[1]
    columns = [max_score, coverage_top, coverage_corpus]
    if qpp:
        if retriever.variant == "stopwords":
            clarity = _clarity(retriever, terms, results, query[in_corpus], code[in_corpus], repeats[in_corpus])
        else:
            clarity = np.full(n_queries, np.nan)
        columns += [sums[4], sums[5], clarity]
    no_token = counts == 0
    for values in columns:
        values[no_token] = np.nan
    return dict(zip(BM25_KEYS, columns))


_CLARITY: "weakref.WeakKeyDictionary[BM25Retriever, tuple]" = weakref.WeakKeyDictionary()


@dataclass(frozen=True)
class _LanguageModels:
    """Per-chunk language models of a BM25 retriever's chunks, for clarity (see :func:`_clarity`).

    ``own`` is the CSR matrix (chunk x term) of maximum-likelihood estimates
    ``tf / |D|``; ``lift`` has the same pattern and holds
    ``log(1 + lambda tf / |D| / ((1 - lambda) P_coll))``, the part of a
    chunk's smoothed log-likelihood of one term that differs between chunks;
    ``collection`` is ``P_coll(w) = F_w / |C|`` per column.
    """

    own: object
    lift: object
    collection: np.ndarray


def _build_language_models(terms: _Terms, smoothing: float = CLARITY_LAMBDA) -> _LanguageModels:
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


def _clarity(
    retriever, terms: _Terms, results, query_rows, query_columns, query_repeats, *, depth: int = CLARITY_DEPTH
) -> np.ndarray:
    """Clarity of each query's top ``depth`` chunks, in bits (see :func:`ragcal.qpp.bm25_clarity_stopwords`).

    ``query_rows``, ``query_columns`` and ``query_repeats`` list each query's
    distinct terms that occur in the corpus: its position in the batch, the
    term's column and how often the query repeats it. Every step is a
    row-wise sparse operation or a :func:`_segment_sums`, so a query's value
    does not depend on the others in the batch.
    """
    from scipy.sparse import csr_matrix

    models = _cached(_CLARITY, retriever, retriever.bm25, lambda _: _build_language_models(terms))
    n_queries = len(results)
    tops = [_result_positions(retriever, result, depth) for result in results]
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
    asked = counts[of_row]
    asked.sort_indices()
    log_likelihood = np.asarray(lifts.multiply(asked).sum(axis=1), dtype=np.float64).ravel()
    # P(D|Q): the likelihoods normalised over each query's top chunks (a uniform prior), the largest first scaled to 1.
    starts = np.cumsum(n_top) - n_top
    scored = n_top > 0
    peak = np.zeros(n_queries)
    peak[scored] = np.maximum.reduceat(log_likelihood, starts[scored])
    unnormalised = np.exp(log_likelihood - peak[of_row])
    weight = unnormalised / _segment_sums(unnormalised, n_top)[of_row]
    # P(w|Q) = lambda * sum_D P(D|Q) tf(w, D) / |D| + (1 - lambda) P_coll(w), over the terms of the top chunks.
    mixing = csr_matrix((weight, np.arange(chunks.size), np.concatenate([[0], np.cumsum(n_top)])),
                        shape=(n_queries, chunks.size))
    query_model = mixing @ models.own[chunks]
    query_model.sort_indices()
    background = models.collection[query_model.indices]
    probability = CLARITY_LAMBDA * query_model.data + (1 - CLARITY_LAMBDA) * background
    clarity = _segment_sums(probability * np.log2(probability / background), np.diff(query_model.indptr))
    return clarity


def bm25_info(
    retriever: BM25Retriever, query: str, result: RetrievalResult, *, depth: int = COVERAGE_DEPTH, qpp: bool = True
) -> dict:
    """The :data:`BM25_KEYS` of one query (see the module docstring): :func:`bm25_diagnostics` on a batch of one.

    All are NaN when the query has no token (e.g. only stop words for the
    ``stopwords`` variant).
    """
    columns = bm25_diagnostics(retriever, [query], [result], depth=depth, qpp=qpp)
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
    retriever: DenseRetriever, query_vectors, *, neighbours: int = PAGE_NEIGHBOURS, results=None, qpp: bool = True
) -> dict[str, np.ndarray]:
    """The :data:`DENSE_KEYS` of each row of ``query_vectors`` (L2-normalised).

    Parameters
    ----------
    retriever : DenseRetriever
    query_vectors : ndarray of shape (n_queries, dim)
    neighbours : int, default=PAGE_NEIGHBOURS
    results : sequence of RetrievalResult, default=None
        The retriever's result of each row, whose top chunks
        ``perturbation_jaccard`` perturbs; without them the retriever is
        searched for its top ``PERTURBATION_CANDIDATES``.
    qpp : bool, default=True
        Also compute :data:`DENSE_QPP_KEYS`; False returns the first two keys.

    Returns
    -------
    dict of str to ndarray of shape (n_queries,)
        One float64 array per key; NaN when the retriever holds no chunk.
    """
    query_vectors = np.atleast_2d(np.asarray(query_vectors, dtype=np.float64))
    keys = DENSE_KEYS if qpp else DENSE_KEYS[:2]
    if not retriever.chunk_ids:
        return {key: np.full(query_vectors.shape[0], np.nan) for key in keys}
    centroid, page_centroids = dense_domain(retriever)
    with _one_blas_thread():
        to_centroid = query_vectors @ centroid
        to_pages = query_vectors @ page_centroids.T
    nearest = min(neighbours, to_pages.shape[1])
    if nearest < to_pages.shape[1]:  # only the nearest pages need sorting
        to_pages = np.partition(to_pages, to_pages.shape[1] - nearest, axis=1)[:, to_pages.shape[1] - nearest :]
    knn = -np.sort(-to_pages, axis=1)[:, :nearest].mean(axis=1)  # best first, as the mean adds them
    columns = [to_centroid, knn]
    if qpp:
        if results is None:
            results = retriever.search_vectors(query_vectors, k=PERTURBATION_CANDIDATES)
        results = list(results)
        if len(results) != query_vectors.shape[0]:
            raise ValueError(f"dense_diagnostics: {query_vectors.shape[0]} query vectors but {len(results)} results")
        columns.append(_perturbation_jaccard(retriever, results))
    return dict(zip(keys, columns))


_POSITIONS: "weakref.WeakKeyDictionary[object, tuple]" = weakref.WeakKeyDictionary()


def _result_positions(retriever, result: RetrievalResult, depth: int) -> np.ndarray:
    """Positions of a result's top ``depth`` chunks in ``retriever``: its own stamp, else looked up by id.

    A result's ``positions`` are trusted only when its ``source_ids`` are the
    retriever's own chunk list (the very object); any other result, built by
    hand or by another retriever, is looked up by chunk id.
    """
    if result.positions is not None and result.source_ids is retriever.chunk_ids:
        return result.positions[:depth]
    lookup = _cached(
        _POSITIONS, retriever, retriever.chunk_ids, lambda r: {chunk_id: i for i, chunk_id in enumerate(r.chunk_ids)}
    )
    return np.fromiter(map(lookup.__getitem__, result.chunk_ids[:depth]), dtype=np.intp)


class _NoiseProjections:
    """``e_p . v`` for the perturbations ``e_p`` and each chunk vector ``v`` of one retriever, filled in as chunks are met.

    A chunk's projections are computed the first time a batch retrieves it
    (its vector read back from faiss) and kept, so a batch costs a gather
    and a large index pays only for the chunks that queries ever reach.
    Each row is a plain sum of products (``numpy.einsum``, no BLAS), so its
    value does not depend on which other chunks were computed with it.
    """

    def __init__(self, retriever: DenseRetriever):
        dimension, size = retriever.index.d, len(retriever.chunk_ids)
        noise = np.random.default_rng(PERTURBATION_SEED).standard_normal((PERTURBATIONS, dimension))
        self.noise = noise * (PERTURBATION_NOISE / np.sqrt(dimension))
        self.values = np.zeros((size, PERTURBATIONS))
        self.known = np.zeros(size, dtype=bool)
        self.index = retriever.index
        self.lock = threading.Lock()

    def at(self, positions: np.ndarray) -> np.ndarray:
        with self.lock:
            new = np.unique(positions[~self.known[positions]])
            if new.size:
                vectors = np.asarray(self.index.reconstruct_batch(new.astype(np.int64)), dtype=np.float64)
                self.values[new] = np.einsum("cd,pd->cp", vectors, self.noise, optimize=False)
                self.known[new] = True
            return self.values[positions]


_NOISE: "weakref.WeakKeyDictionary[DenseRetriever, tuple]" = weakref.WeakKeyDictionary()


def _perturbation_jaccard(retriever: DenseRetriever, results) -> np.ndarray:
    """``perturbation_jaccard`` of each result (see the module docstring), for queries grouped by list length."""
    projections = _cached(_NOISE, retriever, retriever.index, _NoiseProjections)
    candidates = [_result_positions(retriever, result, PERTURBATION_CANDIDATES) for result in results]
    counts = np.fromiter(map(len, candidates), dtype=np.intp, count=len(results))
    values = np.where(counts > 0, 1.0, np.nan)  # at most PERTURBATION_TOP candidates: nothing can move in or out
    for count in np.unique(counts[counts > PERTURBATION_TOP]).tolist():
        rows = np.flatnonzero(counts == count)
        positions = np.concatenate([candidates[row] for row in rows.tolist()])
        scores = np.stack([results[row].scores[:count] for row in rows.tolist()])
        # (queries, candidates, perturbations): q.v + e_p.v, each perturbed query's score of each original candidate.
        perturbed = scores[:, :, None] + projections.at(positions).reshape(rows.size, count, PERTURBATIONS)
        values[rows] = _kept_share(perturbed, PERTURBATION_TOP)
    return values


def _kept_share(perturbed: np.ndarray, top: int) -> np.ndarray:
    """Mean Jaccard overlap between the first ``top`` candidates and the ``top`` best under each perturbation.

    ``perturbed`` has shape (queries, candidates, perturbations), candidates
    in the original order. A perturbed top list is the ``top`` highest
    scores, ties going to the earlier candidate (as a stable sort would); it
    keeps ``kept`` of the original ones, and two lists of ``top`` that share
    ``kept`` have Jaccard overlap ``kept / (2 top - kept)``.
    """
    count = perturbed.shape[1]
    bar = np.partition(perturbed, count - top, axis=1)[:, count - top, :]  # the top-th best of each perturbation
    first = perturbed[:, :top, :]
    above = (perturbed > bar[:, None, :]).sum(axis=1)  # beaten by no tie: in for sure
    first_above = (first > bar[:, None, :]).sum(axis=1)
    first_tied = (first == bar[:, None, :]).sum(axis=1)  # ties at the bar: the earliest fill the free places
    kept = first_above + np.minimum(top - above, first_tied)
    return (kept / (2 * top - kept)).mean(axis=1)


def dense_info(
    retriever: DenseRetriever, query_vectors, *, neighbours: int = PAGE_NEIGHBOURS, results=None, qpp: bool = True
) -> list[dict]:
    """The :data:`DENSE_KEYS` of each row of ``query_vectors``, one dict per row: the rows of :func:`dense_diagnostics`."""
    return _rows(dense_diagnostics(retriever, query_vectors, neighbours=neighbours, results=results, qpp=qpp))


def _rows(columns: dict) -> list[dict]:
    keys = list(columns)
    return [dict(zip(keys, values)) for values in zip(*(column.tolist() for column in columns.values()))]


def diagnostic_rows(
    retrieved: dict, queries, retrievers: dict, *, query_vectors=None, qpp: bool = True
) -> dict[str, list[dict]]:
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
            columns = bm25_diagnostics(retriever, queries, retrieved[name], qpp=qpp)
        elif isinstance(retriever, DenseRetriever) and query_vectors is not None:
            columns = dense_diagnostics(retriever, query_vectors, results=retrieved[name], qpp=qpp)
        else:
            continue
        rows[name] = list(map(dict, map(zip, repeat(list(columns)), zip(*(column.tolist() for column in columns.values())))))
    return rows


def attach_diagnostics(retrieved: dict, queries, retrievers: dict, *, query_vectors=None, qpp: bool = True) -> dict:
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
    qpp : bool, default=True
        Also the query-performance-prediction keys (:data:`BM25_QPP_KEYS`,
        :data:`DENSE_QPP_KEYS`) that :mod:`ragcal.qpp` reads.
    """
    output = dict(retrieved)
    for name, infos in diagnostic_rows(retrieved, queries, retrievers, query_vectors=query_vectors, qpp=qpp).items():
        output[name] = list(map(RetrievalResult._with_info, retrieved[name], infos))
    return output
