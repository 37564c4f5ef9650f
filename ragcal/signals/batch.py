"""The retrieval results of a batch of queries as arrays: what vectorised signals read.

:class:`ResultBatch` holds ``{retriever name: [result of query 0, query 1, ...]}``
and builds, on first use, the NaN-padded score matrices, list lengths, ``info``
columns and page codes that the signals of :mod:`ragcal.signals.builtin` and
:mod:`ragcal.signals.qpp` compute with. :func:`by_length` reduces the rows of
such a padded matrix so that each query gets, bit for bit, what its own score
vector would give.
"""

from __future__ import annotations

import functools
from itertools import chain, repeat
from operator import attrgetter, itemgetter
from typing import TYPE_CHECKING, Mapping, Sequence

import numpy as np

from ..chunking import page_of
from ..retrieval.base import RetrievalResult

if TYPE_CHECKING:
    from ..retrieval.diagnostics.registry import RetrieverBatch

__all__ = ["ResultBatch", "CorpusBatch", "by_length"]


_CHUNK_IDS = attrgetter("chunk_ids")
_SCORES = attrgetter("scores")
_INFO = attrgetter("info")
_POSITIONS = attrgetter("positions")
#: ResultBatch.top_scores keeps the first this many scores of each list for any k up to it.
_SHORT = 10


class ResultBatch:
    """The retrieval results of a batch of queries, as the arrays that vectorised signals read.

    Parameters
    ----------
    retrieved : mapping of str to sequence of RetrievalResult
        ``{retriever name: [result of query 0, query 1, ...]}``, as
        :meth:`ragcal.retrieval.index.RetrievalIndex.retrieve` returns; every
        list holds one result per query.

    Notes
    -----
    Each array is built on first use and kept, so signals that read the same
    one share it; they are read-only. Rows are queries, in order. Padding is
    NaN for scores and -1 for page codes, so a row shorter than the width
    asked for stays recognisable.

    Examples
    --------
    >>> import numpy as np
    >>> from ragcal.retrieval import RetrievalResult
    >>> batch = ResultBatch({"dense": [RetrievalResult("dense", ("a.md#0", "b.md#0"), np.array([0.9, 0.5])),
    ...                                RetrievalResult("dense", ("a.md#1",), np.array([0.7]))]})
    >>> batch.top_scores("dense", 2)
    array([[0.9, 0.5],
           [0.7, nan]])
    """

    def __init__(self, retrieved: Mapping[str, Sequence[RetrievalResult]]):
        self._retrieved = {name: list(results) for name, results in retrieved.items()}
        sizes = {name: len(results) for name, results in self._retrieved.items()}
        if len(set(sizes.values())) > 1:
            raise ValueError(f"ResultBatch needs one result per query from every retriever; got {sizes}")
        self._size = next(iter(sizes.values()), 0)
        self._arrays: dict = {}
        self._queries: list | None = None
        self._page_of_chunk: dict[str, int] = {}  # chunk id -> page code, for every chunk id seen so far
        self._page_codes: dict[str, int] = {}  # page -> code
        self._source_codes: dict[int, tuple] = {}  # id(a retriever's chunk ids) -> (them, page code per position)

    @classmethod
    def of_query(cls, results: Mapping[str, RetrievalResult]) -> "ResultBatch":
        """The batch of one query: ``{retriever name: RetrievalResult}``."""
        return ResultBatch({name: [result] for name, result in results.items()})

    def __len__(self) -> int:
        return self._size

    def __contains__(self, retriever) -> bool:
        return retriever in self._retrieved

    def __iter__(self):
        return iter(self._retrieved)

    @property
    def retrievers(self) -> tuple[str, ...]:
        """Names of the retrievers whose results the batch holds."""
        return tuple(self._retrieved)

    def results(self, retriever: str) -> list[RetrievalResult]:
        """The results of ``retriever``, one per query."""
        return self._retrieved[retriever]

    def query(self, position: int) -> dict[str, RetrievalResult]:
        """``{retriever name: RetrievalResult}`` of the query at ``position``, as a per-query signal takes it."""
        if self._queries is None:
            self._queries = [dict(zip(self._retrieved, row)) for row in zip(*self._retrieved.values())]
        return self._queries[position]

    def _array(self, key, build):
        if key not in self._arrays:
            array = build()
            array.setflags(write=False)
            self._arrays[key] = array
        return self._arrays[key]

    def lengths(self, retriever: str) -> np.ndarray:
        """Number of ranked chunks of each query, shape (n_queries,)."""
        return self._array(("lengths", retriever), lambda: _lengths(self._retrieved[retriever]))

    def scores(self, retriever: str, depth: int | None = None) -> np.ndarray:
        """Each result's first ``depth`` scores (all when None), best first: shape (n_queries, width), NaN-padded.

        The width is that of the longest list, cut at ``depth``.
        """

        def build():
            lengths = self.lengths(retriever)
            kept = lengths if depth is None else np.minimum(lengths, depth)
            every = np.concatenate([np.empty(0), *map(_SCORES, self._retrieved[retriever])])  # no slice per result
            if depth is not None:  # the first ``kept`` of each list: its start in ``every``, then one by one
                shift = (np.cumsum(lengths) - lengths) - (np.cumsum(kept) - kept)
                every = every[np.repeat(shift, kept) + np.arange(kept.sum())]
            return _padded(kept, every, np.nan)

        return self._array(("scores", retriever, depth), build)

    def top_scores(self, retriever: str, k: int) -> np.ndarray:
        """The ``k`` best scores of each query, shape (n_queries, k): NaN where a list is shorter."""
        scores = self.scores(retriever, max(k, _SHORT))  # one matrix serves every k up to _SHORT
        if scores.shape[1] >= k:
            return scores[:, :k]
        return np.pad(scores, ((0, 0), (0, k - scores.shape[1])), constant_values=np.nan)

    def info(self, retriever: str, key: str) -> np.ndarray:
        """``result.info[key]`` of each query, shape (n_queries,): NaN where a result lacks it."""

        def build():
            infos = map(_INFO, self._retrieved[retriever])
            return np.fromiter(map(dict.get, infos, repeat(key), repeat(np.nan)), float, self._size)

        return self._array(("info", retriever, key), build)

    def pages(self, retriever: str, depth: int | None = None) -> np.ndarray:
        """Page of each of the first ``depth`` chunks (all when None) as an integer code, -1-padded.

        Shape (n_queries, longest list cut at ``depth``). Codes are shared by
        every retriever of the batch: equal codes are equal pages
        (:func:`ragcal.chunking.page_of`).
        """
        return self._array(("pages", retriever, depth), lambda: self.pages_of(retriever, None, depth))

    def pages_of(self, retriever: str, queries, depth: int | None = None) -> np.ndarray:
        """:meth:`pages` of the queries at positions ``queries`` only (all when None), in that order; not kept."""
        results = self._retrieved[retriever]
        if queries is not None:
            results = [results[position] for position in np.asarray(queries, dtype=np.intp).tolist()]
        lengths = _lengths(results)
        kept = lengths if depth is None else np.minimum(lengths, depth)
        cut = (lambda values: values) if depth is None else functools.partial(map, itemgetter(slice(depth)))
        sources = {id(result.source_ids) for result in results}
        if len(sources) == 1 and results and results[0].source_ids is not None:
            # One retriever's results: look its chunk positions up in one array per batch, code by code.
            source = results[0].source_ids
            positions = np.concatenate([np.empty(0, dtype=np.intp), *cut(map(_POSITIONS, results))])
            table = self._source_codes.get(id(source), (None, None))[1]
            if table is None:
                table = np.full(len(source), -1, dtype=np.int64)
                self._source_codes[id(source)] = (source, table)  # the reference keeps the id from being reused
            new = np.unique(positions[table[positions] < 0]).tolist()
            table[new] = [self._code(source[position]) for position in new]
            return _padded(kept, table[positions], -1)
        chunk_ids = list(chain.from_iterable(cut(map(_CHUNK_IDS, results))))
        return _padded(kept, np.fromiter(map(self._code, chunk_ids), np.int64, len(chunk_ids)), -1)

    def _code(self, chunk_id: str) -> int:
        """Page code of a chunk id; the page of each chunk id is worked out once per batch."""
        code = self._page_of_chunk.get(chunk_id)
        if code is None:
            pages = self._page_codes
            code = self._page_of_chunk[chunk_id] = pages.setdefault(page_of(chunk_id), len(pages))
        return code


class CorpusBatch(ResultBatch):
    """One retriever's results for a batch of queries, with the retriever object that produced them.

    What a corpus signal (:func:`ragcal.signals.register_corpus_signal`)
    reads: a :class:`ResultBatch` of the one retriever :attr:`name` (its
    ``top_scores``, ``lengths``, ``pages``, ``info``, ...) that also holds
    the retriever object, which is built on the chunks the caller may see,
    so a corpus-level number computed from it never counts a hidden chunk.

    Parameters
    ----------
    retriever_batch : RetrieverBatch
        What :func:`ragcal.retrieval.diagnostics.attach_diagnostics` hands a
        diagnostic (:class:`ragcal.retrieval.diagnostics.RetrieverBatch`).

    Attributes
    ----------
    name : str
        The retriever's name among the results (``"dense"``, ``"bm25_raw"``).
    retriever : object
        The retriever object (a :class:`~ragcal.retrieval.DenseRetriever` for
        ``RetrievalIndex.retrieve``'s ``"dense"``, a
        :class:`~ragcal.retrieval.BM25Retriever` for ``"bm25_*"``).
    queries : list of str
    query_vectors : ndarray of shape (n_queries, dim) or None
        The query embeddings the dense retriever searched with; None when the
        caller did not pass them (:func:`ragcal.retrieval.retrieve_with`
        without a dense retriever that embeds).

    Examples
    --------
    >>> import numpy as np
    >>> from ragcal.retrieval import BM25Retriever
    >>> from ragcal.retrieval.diagnostics import RetrieverBatch
    >>> bm25 = BM25Retriever(["a.md#0", "b.md#0"], ["apple banana", "cherry"])
    >>> batch = CorpusBatch(RetrieverBatch(bm25, ["apple", "zebra"], bm25.search(["apple", "zebra"]), name="bm25_raw"))
    >>> batch.lengths("bm25_raw"), len(batch.retriever.chunk_ids)
    (array([1, 0]), 2)
    """

    def __init__(self, retriever_batch: RetrieverBatch):
        super().__init__({retriever_batch.name: retriever_batch.results})
        self.name = retriever_batch.name
        self.retriever = retriever_batch.retriever
        self.queries = retriever_batch.queries
        self.query_vectors = retriever_batch.query_vectors
        self._retriever_batch = retriever_batch

    def per_retriever(self, key, build):
        """``build(retriever)``, computed once per retriever object and kept while its chunks stay the same.

        For numbers that do not depend on the queries (a centroid, a
        vocabulary statistic): the first batch pays for them.
        """
        return self._retriever_batch.per_retriever(key, build)

    def positions(self, depth: int | None = None) -> list[np.ndarray]:
        """Positions, in :attr:`retriever`'s chunk list, of each result's first ``depth`` chunks (all when None)."""
        return self._retriever_batch.positions(depth)


def _lengths(results) -> np.ndarray:
    return np.fromiter(map(len, map(_CHUNK_IDS, results)), np.intp, len(results))


def _padded(lengths: np.ndarray, values: np.ndarray, fill) -> np.ndarray:
    """(len(lengths), max length) matrix whose row i holds the next ``lengths[i]`` of ``values``, then ``fill``."""
    width = int(lengths.max(initial=0))
    matrix = np.full((lengths.size, width), fill, dtype=values.dtype)
    matrix[np.arange(width) < lengths[:, None]] = values
    return matrix


def by_length(values: np.ndarray, lengths: np.ndarray, function, *, minimum: int = 1) -> np.ndarray:
    """``function(rows)`` on the first ``length`` columns of the rows of each length; NaN below ``minimum``.

    ``function`` maps a C-contiguous (n_rows, length) matrix to one value per
    row. NumPy reduces a contiguous row exactly as it reduces the same values
    as a 1-D array, so each query gets, bit for bit, what its own score vector
    would give: the padding never enters a sum.
    """
    output = np.full(values.shape[0], np.nan)
    for length in np.unique(lengths).tolist():
        if length >= minimum:
            rows = np.flatnonzero(lengths == length)
            output[rows] = function(np.ascontiguousarray(values[rows, :length]))
    return output
