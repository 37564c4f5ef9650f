"""Bring your own retriever: the one method ragcal needs, and the check that its results are usable.

Any object with a ``name`` and a ``search(queries, *, k)`` method that returns
one :class:`~ragcal.retrieval.base.RetrievalResult` per query, best first,
can feed ragcal: :func:`retrieve_with` runs it on a labeled set and gives the
``{retriever name: [result, ...]}`` dict that
:func:`ragcal.scoring.score_table`, the signals and the gates take.
:class:`~ragcal.retrieval.DenseRetriever`, :class:`~ragcal.retrieval.BM25Retriever`
and :class:`~ragcal.retrieval.pgvector.PgvectorRetriever` all meet it.

Scores must be **similarities** (higher is better), so that a threshold means
"answer when the score clears it". An engine that reports distances (pgvector's
``<=>`` is cosine *distance*, ``1 - cosine similarity``) has to convert them;
:func:`retrieve_with` refuses results whose scores increase down the list,
which is what unconverted distances look like.

::

    from ragcal.retrieval.protocol import retrieve_with
    retrieved = retrieve_with({"dense": my_engine}, queries["query"], k=100)
    table = score_table(queries, retrieved)
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol, runtime_checkable

import numpy as np

from .base import RetrievalResult
from .fusion import reciprocal_rank_fusion

__all__ = ["Retriever", "retrieve_with"]


@runtime_checkable
class Retriever(Protocol):
    """What ragcal asks of a retriever.

    Attributes
    ----------
    name : str
        Label in run files and reports.

    Methods
    -------
    search(queries, *, k) -> list of RetrievalResult
        One result per query, in query order; each holds at most ``k`` chunk
        ids (``<page path>#<n>``) with similarity scores, best first. An empty
        result means nothing matched.
    """

    name: str

    def search(self, queries: Sequence[str], *, k: int) -> list[RetrievalResult]: ...


def _check_results(name, results, n_queries) -> list[RetrievalResult]:
    results = list(results)
    if len(results) != n_queries:
        raise ValueError(f"retriever {name!r} returned {len(results)} results for {n_queries} queries")
    for position, result in enumerate(results):
        if not isinstance(result, RetrievalResult):
            raise TypeError(
                f"retriever {name!r}, query {position}: expected a RetrievalResult, got {type(result).__name__}"
            )
        if np.any(np.diff(result.scores) > 1e-9):
            raise ValueError(
                f"retriever {name!r}, query {position}: scores increase down the ranking "
                f"({result.scores[:3].round(4).tolist()} ...). ragcal needs similarities, best first; "
                "an engine that returns distances (pgvector's <=> is cosine distance) must convert them, "
                "e.g. similarity = 1 - cosine distance"
            )
    return results


def retrieve_with(
    retrievers,
    queries,
    *,
    k: int = 100,
    fuse=("dense", "bm25_stopwords"),
    rrf_k: int = 60,
    rrf_top: int = 50,
    diagnostics: bool = True,
):
    """Run conforming retrievers on every query and collect results by name.

    Parameters
    ----------
    retrievers : dict of str to Retriever, or sequence of Retriever
        The dict key (else each retriever's ``name``) becomes the key that the
        signals look up: ``"dense"`` for ``dense_top1``, ``"bm25_raw"`` and
        ``"bm25_stopwords"`` for the BM25 signals.
    queries : sequence of str
    k : int, default=100
    fuse : tuple of str, default=("dense", "bm25_stopwords")
        When every one of these names is present, their lists are also fused
        into ``"rrf"`` by reciprocal rank fusion, as
        :meth:`ragcal.retrieval.index.RetrievalIndex.retrieve` does.
    rrf_k, rrf_top : int
        See :func:`ragcal.retrieval.reciprocal_rank_fusion`.
    diagnostics : bool, default=True
        Attach the per-query diagnostics of ragcal's own retrievers
        (:class:`BM25Retriever`, and :class:`DenseRetriever` when there is
        exactly one) that the lexical-coverage, normalised-BM25 and domain
        signals read. Another engine's results carry none, so signals that
        need them from that engine are NaN.

    Returns
    -------
    dict of str to list of RetrievalResult

    Raises
    ------
    TypeError
        A retriever lacks ``search`` or returns something else than RetrievalResult.
    ValueError
        Wrong number of results, or scores that increase down a ranking (distances).
    """
    if not isinstance(retrievers, dict):
        retrievers = {getattr(retriever, "name", None): retriever for retriever in retrievers}
    queries = [str(query) for query in queries]
    retrieved = {}
    for name, retriever in retrievers.items():
        if not isinstance(retriever, Retriever):
            raise TypeError(
                f"{type(retriever).__name__} is not a ragcal retriever: it needs a 'name' and "
                "search(queries, *, k) -> list[RetrievalResult]"
            )
        if not isinstance(name, str) or not name:
            raise ValueError(f"every retriever needs a name; got {name!r}")
        retrieved[name] = _check_results(name, retriever.search(queries, k=k), len(queries))
    if fuse and all(name in retrieved for name in fuse):
        retrieved["rrf"] = [
            reciprocal_rank_fusion([retrieved[name][position] for name in fuse], k=rrf_k, depth=k, top=rrf_top)
            for position in range(len(queries))
        ]
    if diagnostics:
        from .dense import DenseRetriever
        from .diagnostics.registry import attach_diagnostics

        dense = [retriever for retriever in retrievers.values() if isinstance(retriever, DenseRetriever)]
        vectors = dense[0].encode_queries(queries) if len(dense) == 1 and dense[0].embedder is not None else None
        retrieved = attach_diagnostics(retrieved, queries, retrievers, query_vectors=vectors)
    return retrieved
