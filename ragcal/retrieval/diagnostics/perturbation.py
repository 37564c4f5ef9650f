"""Rank stability of a dense query under small perturbations of its embedding (``perturbation_jaccard``).

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

Registered, with the other dense keys, by
:mod:`~ragcal.retrieval.diagnostics.dense_domain`.
"""

from __future__ import annotations

import threading
import weakref
from typing import TYPE_CHECKING

import numpy as np

from .registry import result_positions, retriever_cache

if TYPE_CHECKING:
    from ..dense import DenseRetriever

__all__ = [
    "PERTURBATIONS",
    "PERTURBATION_NOISE",
    "PERTURBATION_TOP",
    "PERTURBATION_CANDIDATES",
    "PERTURBATION_SEED",
    "perturbation_jaccard",
]

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


def perturbation_jaccard(retriever: DenseRetriever, results) -> np.ndarray:
    """``perturbation_jaccard`` of each of ``retriever``'s ``results`` (see the module docstring), shape (n_results,).

    Computed for the queries grouped by list length; NaN for every result
    when the retriever holds no chunk.
    """
    results = list(results)
    if not retriever.chunk_ids:
        return np.full(len(results), np.nan)
    projections = retriever_cache(_NOISE, retriever, retriever.index, _NoiseProjections)
    candidates = [result_positions(retriever, result, PERTURBATION_CANDIDATES) for result in results]
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

