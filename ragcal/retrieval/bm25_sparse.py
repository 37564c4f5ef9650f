"""Okapi BM25 on a sparse term-document matrix: rank-bm25's ``BM25Okapi`` scores, vectorised.

rank-bm25 scores a query by looping in Python over the query tokens and, for
each, over the candidate documents. That is fine for 2,000 chunks and far too
slow for 200,000. :class:`SparseBM25` precomputes, for every (term, document)
pair that occurs, the term's contribution

.. math:: w_{t,d} = \\mathrm{idf}(t) \\cdot \\frac{f_{t,d} (k_1 + 1)}{f_{t,d} + k_1 (1 - b + b \\, |d| / \\mathrm{avgdl})}

and stores it column-wise (one column per term, CSC layout), so that a query's
scores are a sum of a few columns. The IDF is rank-bm25's, including its floor:

.. math:: \\mathrm{idf}(t) = \\log(N - n_t + 0.5) - \\log(n_t + 0.5),

and every term with a negative IDF (one in more than half of the documents)
gets ``epsilon * mean idf`` instead, where the mean runs over the whole
vocabulary. The arithmetic is done in the same order as rank-bm25's
(``math.log``, terms added in query order, a repeated query token counted
each time), so the scores agree to the last bit on the bundled corpora; the
tests hold them to ``1e-12``.
"""

from __future__ import annotations

import math
from collections import Counter

import numpy as np

__all__ = ["SparseBM25"]


class SparseBM25:
    """BM25Okapi over pre-tokenised documents, stored as a CSC matrix of term contributions.

    Parameters
    ----------
    corpus_tokens : sequence of list of str
        One token list per document. Pass ``[""]`` for an empty document, as
        for rank-bm25 (a document of length 0 would make ``avgdl`` zero).
    k1 : float, default=1.5
    b : float, default=0.75
    epsilon : float, default=0.25
        IDF floor for terms in more than half of the documents, as a share of
        the mean IDF.

    Attributes
    ----------
    idf : dict of str to float
        As ``rank_bm25.BM25Okapi.idf`` (vocabulary in order of first
        appearance, floored values included).
    vocabulary : dict of str to int
        Term to column.
    doc_len : ndarray of shape (n_documents,)
    avgdl : float
    weights : scipy.sparse.csc_matrix of shape (n_documents, n_terms)
        :math:`w_{t,d}`; its sparsity pattern is "term occurs in document",
        explicit zeros included (a term with IDF exactly 0 still matches).
    frequencies : ndarray of int32, aligned with ``weights.data``
        The raw term frequency :math:`f_{t,d}` of each stored entry (same
        CSC order), which query-performance predictors such as clarity need
        (:mod:`ragcal.signals.qpp`). It cannot always be recovered from the
        contributions: a term in exactly half the documents has IDF 0 and so
        contribution 0 whatever its frequency.

    Examples
    --------
    >>> bm25 = SparseBM25([["a", "cookie"], ["a", "header"], ["a", "form"]])
    >>> positions, scores = bm25.score(["cookie"])
    >>> positions.tolist()
    [0]
    """

    def __init__(self, corpus_tokens, *, k1: float = 1.5, b: float = 0.75, epsilon: float = 0.25):
        from scipy.sparse import csc_matrix

        vocabulary: dict[str, int] = {}
        term_ids: list[int] = []
        frequencies: list[int] = []
        lengths: list[int] = []
        distinct: list[int] = []
        for tokens in corpus_tokens:
            lengths.append(len(tokens))
            counts = Counter(tokens)
            distinct.append(len(counts))
            term_ids.extend(vocabulary.setdefault(token, len(vocabulary)) for token in counts)
            frequencies.extend(counts.values())
        n_documents = len(lengths)
        if n_documents == 0:
            raise ValueError("SparseBM25 needs at least one document")
        doc_len = np.asarray(lengths, dtype=np.int64)
        if doc_len.sum() == 0:
            raise ValueError("SparseBM25: every document is empty; pass [''] for an empty document")
        term_ids = np.asarray(term_ids, dtype=np.int64)
        frequencies = np.asarray(frequencies, dtype=np.int64)
        doc_ids = np.repeat(np.arange(n_documents, dtype=np.int64), distinct)

        self.k1, self.b, self.epsilon = k1, b, epsilon
        self.corpus_size = n_documents
        self.doc_len = doc_len
        self.avgdl = int(doc_len.sum()) / n_documents
        self.vocabulary = vocabulary
        document_frequency = np.bincount(term_ids, minlength=len(vocabulary))
        self.idf = self._idf(list(vocabulary), document_frequency.tolist())

        idf = np.fromiter(self.idf.values(), dtype=np.float64, count=len(self.idf))
        # rank-bm25's expression, evaluated in the same order: idf * (f * (k1 + 1) / (f + k1 * (1 - b + b * dl / avgdl)))
        length_norm = self.k1 * (1 - self.b + self.b * doc_len[doc_ids] / self.avgdl)
        contribution = idf[term_ids] * (frequencies * (self.k1 + 1) / (frequencies + length_norm))
        order = np.argsort(term_ids, kind="stable")  # by term, documents ascending within a term
        indptr = np.concatenate([[0], np.cumsum(document_frequency)])
        self.weights = csc_matrix(
            (contribution[order], doc_ids[order], indptr), shape=(n_documents, len(vocabulary)), copy=False
        )
        self.frequencies = frequencies[order].astype(np.int32)

    @classmethod
    def from_arrays(
        cls,
        *,
        vocabulary,
        idf,
        weights,
        frequencies,
        doc_len,
        k1: float,
        b: float,
        epsilon: float,
        avgdl: float,
        average_idf: float,
    ) -> "SparseBM25":
        """Rebuild a scorer from the arrays it keeps (as saved by :mod:`ragcal.retrieval.store`), without re-tokenising.

        Parameters
        ----------
        vocabulary : sequence of str
            Terms in column order.
        idf : array of float64
            IDF of each term, in the same order (floors included).
        weights : tuple of (data, indices, indptr)
            The CSC arrays of :attr:`weights`; they are used as given (not
            copied), so memory-mapped arrays stay memory-mapped.
        frequencies : array of int32
            :attr:`frequencies`, aligned with ``weights``'s data (used as given too).
        doc_len : array of int64
        k1, b, epsilon, avgdl, average_idf : float
        """
        from scipy.sparse import csc_matrix

        scorer = cls.__new__(cls)
        terms = list(vocabulary)
        if len(idf) != len(terms):
            raise ValueError(f"{len(idf)} IDF values for {len(terms)} terms")
        scorer.k1, scorer.b, scorer.epsilon = k1, b, epsilon
        scorer.doc_len = doc_len
        scorer.corpus_size = len(doc_len)
        scorer.avgdl = avgdl
        scorer.average_idf = average_idf
        scorer.vocabulary = dict(zip(terms, range(len(terms))))
        scorer.idf = dict(zip(terms, np.asarray(idf, dtype=np.float64).tolist()))
        data, indices, indptr = weights
        if len(indptr) != len(terms) + 1:
            raise ValueError(f"indptr of length {len(indptr)} for {len(terms)} terms")
        scorer.weights = csc_matrix((data, indices, indptr), shape=(scorer.corpus_size, len(terms)), copy=False)
        if len(frequencies) != len(data):
            raise ValueError(f"{len(frequencies)} term frequencies for {len(data)} stored weights")
        scorer.frequencies = frequencies
        return scorer

    def _idf(self, words, document_frequency) -> dict:
        idf: dict[str, float] = {}
        idf_sum = 0.0
        negative = []
        for word, frequency in zip(words, document_frequency):
            value = math.log(self.corpus_size - frequency + 0.5) - math.log(frequency + 0.5)
            idf[word] = value
            idf_sum += value
            if value < 0:
                negative.append(word)
        self.average_idf = idf_sum / len(idf)
        floor = self.epsilon * self.average_idf
        for word in negative:
            idf[word] = floor
        return idf

    def score(self, query_tokens) -> tuple[np.ndarray, np.ndarray]:
        """Scores of the documents that contain at least one query token.

        Parameters
        ----------
        query_tokens : sequence of str
            A token repeated in the query counts once per occurrence; tokens
            outside the vocabulary are ignored.

        Returns
        -------
        positions : ndarray of int64
            Matched documents, ascending.
        scores : ndarray of float64
            Their BM25 scores, aligned with ``positions``.
        """
        columns = [self.vocabulary[token] for token in query_tokens if token in self.vocabulary]
        if not columns:
            return np.empty(0, dtype=np.int64), np.empty(0)
        indptr, indices, data = self.weights.indptr, self.weights.indices, self.weights.data
        rows = np.concatenate([indices[indptr[column] : indptr[column + 1]] for column in columns])
        values = np.concatenate([data[indptr[column] : indptr[column + 1]] for column in columns])
        # bincount adds in input order, i.e. query token by query token, as rank-bm25 does.
        totals = np.bincount(rows, weights=values, minlength=self.corpus_size)
        matched = np.zeros(self.corpus_size, dtype=bool)
        matched[rows] = True
        positions = np.flatnonzero(matched)
        return positions, totals[positions]
