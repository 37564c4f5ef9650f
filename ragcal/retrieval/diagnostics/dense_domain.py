"""Dense domain scores of each query: its cosine to the corpus centroid and to its nearest page centroids.

Computed from the :class:`~ragcal.retrieval.DenseRetriever` that searched the
query, with the query embedding it searched with, and stored in its result's
``info``:

``centroid_cosine``
    Cosine between the query and the mean of the retriever's chunk embeddings.
``page_knn_cosine``
    Mean cosine between the query and its ``PAGE_NEIGHBOURS`` nearest page
    centroids (the normalised mean embedding of each page's chunks).

Both are seed 003's "is this question in our domain at all" check, without
an LLM. ``centroid_cosine`` is also the corpus score :math:`s(C)` that the
dense QPP predictors of :mod:`ragcal.signals.qpp` normalise by. This module
also registers ``perturbation_jaccard``
(:mod:`~ragcal.retrieval.diagnostics.perturbation`), the third dense key.

The two are matrix products (BLAS) over a whole batch, whose last bit can
depend on how many rows the batch has (BLAS tiles the rows), as it always
did here: a query embedded with others may differ from the same query alone
in the last bits (a few 1e-16). :func:`dense_info` gives the rows of
:func:`dense_diagnostics` as dicts.
"""

from __future__ import annotations

import weakref
from typing import TYPE_CHECKING

import numpy as np

from ...chunking import pages_of
from .perturbation import PERTURBATION_CANDIDATES, perturbation_jaccard
from .registry import RetrieverBatch, register_diagnostic, retriever_cache

if TYPE_CHECKING:
    from ..dense import DenseRetriever

__all__ = [
    "PAGE_NEIGHBOURS",
    "DENSE_KEYS",
    "DENSE_QPP_KEYS",
    "dense_domain",
    "set_dense_domain",
    "dense_diagnostics",
    "dense_info",
]

#: How many nearest page centroids ``page_knn_cosine`` averages.
PAGE_NEIGHBOURS = 5
#: The query-performance-prediction keys of a dense result (:mod:`ragcal.signals.qpp`); skipped with ``qpp=False``.
DENSE_QPP_KEYS = ("perturbation_jaccard",)
#: The ``info`` keys of a dense result, in the order :func:`dense_diagnostics` returns them.
DENSE_KEYS = ("centroid_cosine", "page_knn_cosine", *DENSE_QPP_KEYS)


_DOMAINS: "weakref.WeakKeyDictionary[DenseRetriever, tuple]" = weakref.WeakKeyDictionary()


def _build_domain(retriever: DenseRetriever):
    """Unit corpus centroid and unit page centroids of a retriever's chunks."""
    vectors = np.asarray(retriever.chunk_vectors(), dtype=np.float64)
    centroid = vectors.mean(axis=0)
    centroid /= np.linalg.norm(centroid[None, :], axis=1)[0]  # as a row: the norm of a 1-D array goes through BLAS
    pages = np.array(pages_of(retriever.chunk_ids))
    names, page_of_chunk = np.unique(pages, return_inverse=True)
    sums = np.zeros((names.size, vectors.shape[1]))
    np.add.at(sums, page_of_chunk, vectors)
    page_centroids = sums / np.linalg.norm(sums, axis=1, keepdims=True)
    return centroid, page_centroids


def dense_domain(retriever: DenseRetriever) -> tuple[np.ndarray, np.ndarray]:
    """``(unit corpus centroid, unit page centroids)`` of a retriever's chunks, computed once per retriever.

    What :func:`dense_diagnostics` compares queries with. At 200,000 chunks it
    takes seconds, so :mod:`ragcal.retrieval.store` saves it with the index and
    hands it back with :func:`set_dense_domain`.
    """
    return retriever_cache(_DOMAINS, retriever, retriever.index, _build_domain)


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


def _domain_columns(retriever: DenseRetriever, query_vectors: np.ndarray, neighbours: int) -> dict[str, np.ndarray]:
    """``centroid_cosine`` and ``page_knn_cosine`` of each row of ``query_vectors`` (float64, L2-normalised)."""
    if not retriever.chunk_ids:
        return {key: np.full(query_vectors.shape[0], np.nan) for key in DENSE_KEYS[:2]}
    centroid, page_centroids = dense_domain(retriever)
    # einsum, not BLAS: OpenBLAS picks its matrix kernels by processor (Haswell, SkylakeX) and they round
    # differently, while einsum's loops give the same bits on every x86-64 machine (ragcal.numerics).
    # The centroid is one more row of the same product: the matrix-vector form takes other loops, which an emulated
    # AVX2 machine rounded apart (benchmarks/bench_embedding.py's check, ragcal/numerics.py).
    products = np.einsum("qd,pd->qp", query_vectors, np.vstack([centroid[None, :], page_centroids]))
    to_centroid, to_pages = products[:, 0].copy(), products[:, 1:]
    nearest = min(neighbours, to_pages.shape[1])
    if nearest < to_pages.shape[1]:  # only the nearest pages need sorting
        to_pages = np.partition(to_pages, to_pages.shape[1] - nearest, axis=1)[:, to_pages.shape[1] - nearest :]
    knn = -np.sort(-to_pages, axis=1)[:, :nearest].mean(axis=1)  # best first, as the mean adds them
    return {"centroid_cosine": to_centroid, "page_knn_cosine": knn}


@register_diagnostic("dense domain", keys=DENSE_KEYS[:2], kind="dense")
def domain_columns(batch: RetrieverBatch) -> dict[str, np.ndarray]:
    """``centroid_cosine`` and ``page_knn_cosine`` of each query of ``batch`` (its :attr:`query_vectors`)."""
    return _domain_columns(batch.retriever, batch.query_vectors, PAGE_NEIGHBOURS)


@register_diagnostic("dense perturbation", keys=DENSE_QPP_KEYS, kind="dense", qpp=True)
def perturbation_columns(batch: RetrieverBatch) -> dict[str, np.ndarray]:
    """``perturbation_jaccard`` of each query of ``batch`` (:mod:`~ragcal.retrieval.diagnostics.perturbation`)."""
    return {"perturbation_jaccard": perturbation_jaccard(batch.retriever, batch.results)}


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
    columns = _domain_columns(retriever, query_vectors, neighbours)
    if qpp and not retriever.chunk_ids:
        columns["perturbation_jaccard"] = np.full(query_vectors.shape[0], np.nan)
    elif qpp:
        if results is None:
            results = retriever.search_vectors(query_vectors, k=PERTURBATION_CANDIDATES)
        results = list(results)
        if len(results) != query_vectors.shape[0]:
            raise ValueError(f"dense_diagnostics: {query_vectors.shape[0]} query vectors but {len(results)} results")
        columns["perturbation_jaccard"] = perturbation_jaccard(retriever, results)
    return columns


def dense_info(
    retriever: DenseRetriever, query_vectors, *, neighbours: int = PAGE_NEIGHBOURS, results=None, qpp: bool = True
) -> list[dict]:
    """The :data:`DENSE_KEYS` of each row of ``query_vectors``, one dict per row: the rows of :func:`dense_diagnostics`."""
    columns = dense_diagnostics(retriever, query_vectors, neighbours=neighbours, results=results, qpp=qpp)
    keys = list(columns)
    return [dict(zip(keys, values)) for values in zip(*(column.tolist() for column in columns.values()))]
