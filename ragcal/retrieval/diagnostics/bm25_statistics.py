r"""BM25 corpus statistics of each query: its maximum score, its lexical coverage and its corpus score.

Computed from the :class:`~ragcal.retrieval.BM25Retriever` that scored the
query (``bm25_raw``, ``bm25_stopwords``) and stored in its result's ``info``:

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
    which the query-performance predictors of :mod:`ragcal.signals.qpp` (NQC,
    WIG, SMV) normalise by: the BM25 formula with the collection frequency
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
    The query's clarity, from :mod:`~ragcal.retrieval.diagnostics.clarity`.

The last three (:data:`BM25_QPP_KEYS`) are skipped (absent from ``info``)
with ``qpp=False``. All are NaN for a query with no token (e.g. only stop
words for the ``stopwords`` variant).

Every key is computed for a whole batch of queries at once, with array
operations, and summed through :func:`~ragcal.retrieval.diagnostics.bm25_terms.segment_sums`
in the same order as one query's own arrays would be, so a query's numbers
are the same bit for bit in any batch. :func:`bm25_info` is the same
computation on a batch of one query.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np
import pandas as pd

from ..._params import check_int
from .bm25_terms import query_terms, segment_sums
from .clarity import clarity_column
from .registry import RetrieverBatch, register_diagnostic

if TYPE_CHECKING:
    from ..base import RetrievalResult
    from ..bm25 import BM25Retriever

__all__ = ["COVERAGE_DEPTH", "BM25_KEYS", "BM25_QPP_KEYS", "bm25_diagnostics", "bm25_info"]

#: How many of a BM25 result's top chunks ``coverage_top`` looks at.
COVERAGE_DEPTH = 10
#: The query-performance-prediction keys of a BM25 result (:mod:`ragcal.signals.qpp`); skipped with ``qpp=False``.
BM25_QPP_KEYS = ("corpus_score", "query_terms", "clarity")
#: The ``info`` keys of a BM25 result, in the order :func:`bm25_diagnostics` returns them.
BM25_KEYS = ("max_score", "coverage_top", "coverage_corpus", *BM25_QPP_KEYS)


def _sums(terms, segments) -> np.ndarray:
    """Each query's sum of each segment list ``(values, query of each value)``: shape (len(segments), n_queries)."""
    return segment_sums(
        np.concatenate([values for values, _ in segments]),
        np.concatenate([np.bincount(of_query, minlength=terms.n_queries) for _, of_query in segments]),
    ).reshape(len(segments), terms.n_queries)


def _nan_without_token(terms, columns: dict) -> dict:
    for values in columns.values():
        values[terms.no_token] = np.nan
    return columns


@register_diagnostic("bm25 coverage", keys=BM25_KEYS[:3], kind="bm25")
def coverage_columns(batch: RetrieverBatch, *, depth: int = COVERAGE_DEPTH) -> dict[str, np.ndarray]:
    """``max_score``, ``coverage_top`` (over the top ``depth`` chunks) and ``coverage_corpus`` of each query."""
    retriever = batch.retriever
    terms = query_terms(batch)
    statistics, query, code, in_corpus = terms.terms, terms.query, terms.code, terms.in_corpus
    n_queries, n_terms = terms.n_queries, statistics.n_terms

    # Which of a query's terms occur in its top chunks: look (chunk, term) up among the retriever's occurrences.
    top_positions = batch.positions(depth)
    n_top = np.fromiter(map(len, top_positions), dtype=np.intp, count=n_queries)
    top = np.full((n_queries, depth), -1, dtype=np.int64)
    top[np.arange(top.shape[1]) < n_top[:, None]] = np.concatenate([np.empty(0, dtype=np.intp), *top_positions])
    pair_top = top[query[in_corpus]]
    wanted = pair_top * n_terms + code[in_corpus][:, None]
    # Hashed look-ups (pandas) among the query terms in this batch's top chunks only: the cost follows the batch.
    in_some_top = np.zeros(len(retriever.chunk_ids), dtype=bool)
    in_some_top[top[top >= 0]] = True
    occurring = statistics.occurrences(np.flatnonzero(in_some_top), code[in_corpus])
    found = (pair_top >= 0) & pd.Index(wanted.ravel()).isin(occurring).reshape(wanted.shape)
    in_top = np.zeros(query.size, dtype=bool)
    in_top[in_corpus] = found.any(axis=1)

    # Four sums per query, over the distinct terms in order: idf * repeats of the terms in the corpus, and the
    # weights of all terms, of those in the top chunks and of those in the corpus. One call sums all 4n segments.
    weights = terms.weights
    sums = _sums(terms, [
        (terms.idf * terms.repeats[in_corpus], query[in_corpus]),
        (weights, query),
        (weights[in_top], query[in_top]),
        (weights[in_corpus], query[in_corpus]),
    ])
    max_score = sums[0] * (retriever.k1 + 1)
    with np.errstate(divide="ignore", invalid="ignore"):  # a corpus whose IDF floor is negative can sum to 0
        coverage_top, coverage_corpus = sums[2] / sums[1], sums[3] / sums[1]
    return _nan_without_token(
        terms, {"max_score": max_score, "coverage_top": coverage_top, "coverage_corpus": coverage_corpus}
    )


@register_diagnostic("bm25 corpus score", keys=BM25_QPP_KEYS[:2], kind="bm25", qpp=True)
def corpus_score_columns(batch: RetrieverBatch) -> dict[str, np.ndarray]:
    """``corpus_score`` :math:`s(C)` and ``query_terms`` :math:`|q|` of each query."""
    terms = query_terms(batch)
    statistics, query, in_corpus, repeats = terms.terms, terms.query, terms.in_corpus, terms.repeats[terms.in_corpus]
    # s(C): each term's BM25 contribution in the collection as one document (length N * avgdl); and |q|.
    frequency = statistics.collection_frequency[terms.code[in_corpus]]
    length_norm = statistics.k1 * (1 - statistics.b + statistics.b * len(statistics.doc_len))
    sums = _sums(terms, [
        (terms.idf * (frequency * (statistics.k1 + 1) / (frequency + length_norm)) * repeats, query[in_corpus]),
        (repeats, query[in_corpus]),
    ])
    return _nan_without_token(terms, {"corpus_score": sums[0], "query_terms": sums[1]})


@register_diagnostic("bm25 clarity", keys=BM25_QPP_KEYS[2:], kind="bm25", qpp=True)
def clarity_columns(batch: RetrieverBatch) -> dict[str, np.ndarray]:
    """``clarity`` of each query (:func:`~ragcal.retrieval.diagnostics.clarity.clarity_column`)."""
    return _nan_without_token(query_terms(batch), {"clarity": clarity_column(batch)})


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
        Also compute :data:`BM25_QPP_KEYS` (the inputs of :mod:`ragcal.signals.qpp`);
        False returns the first three keys only, as before issue 21.

    Returns
    -------
    dict of str to ndarray of shape (n_queries,)
        One float64 array per key of :data:`BM25_KEYS` (or the first three).
        All are NaN for a query with no token (e.g. only stop words for the
        ``stopwords`` variant).
    """
    depth = check_int(depth, "depth", "bm25_diagnostics", low=0)
    queries, results = [str(query) for query in queries], list(results)
    if len(results) != len(queries):
        raise ValueError(f"bm25_diagnostics: {len(queries)} queries but {len(results)} results")
    batch = RetrieverBatch(retriever, queries, results)
    columns = coverage_columns(batch, depth=depth)
    if qpp:
        columns.update(corpus_score_columns(batch))
        columns.update(clarity_columns(batch))
    return columns


def bm25_info(
    retriever: BM25Retriever, query: str, result: RetrievalResult, *, depth: int = COVERAGE_DEPTH, qpp: bool = True
) -> dict:
    """The :data:`BM25_KEYS` of one query (see the module docstring): :func:`bm25_diagnostics` on a batch of one.

    All are NaN when the query has no token (e.g. only stop words for the
    ``stopwords`` variant).
    """
    columns = bm25_diagnostics(retriever, [query], [result], depth=depth, qpp=qpp)
    return {key: float(values[0]) for key, values in columns.items()}
