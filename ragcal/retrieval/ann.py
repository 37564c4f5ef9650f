"""faiss indexes for dense retrieval: exact (``flat``) and approximate (``hnsw``, ``ivf``).

A threshold belongs to the score scale of the engine that produced the
scores, and an approximate index is part of that engine: it can miss the true
nearest chunk, and then the top-1 score it reports is lower than the exact
one. Both approximate kinds here keep the full vectors (no quantisation), so a
chunk they do return carries its exact cosine; the error is only in *which*
chunks are found. :func:`index_config` gives the parameters to record next to
any threshold fitted on these scores (see ``docs/approximate_search.md``).

Builds run on one thread, so that the same vectors always give the same graph
or the same clusters (faiss adds to an HNSW graph in parallel otherwise, and
the graph then depends on thread timing).
"""

from __future__ import annotations

# faiss is imported where an index is built, not here: importing ragcal.retrieval needs no faiss.
from contextlib import contextmanager
from dataclasses import asdict, dataclass
from typing import TYPE_CHECKING

import numpy as np

from .._params import check_choice, check_int
from ..extras import import_extra

if TYPE_CHECKING:
    import faiss

__all__ = ["DENSE_INDEXES", "DenseIndexSpec", "build_faiss_index", "index_config", "configure_search"]

#: Names accepted by ``DenseRetriever(index=...)`` and ``build_index(dense_index=...)``.
DENSE_INDEXES = ("flat", "hnsw", "ivf")


@dataclass(frozen=True)
class DenseIndexSpec:
    """Which faiss index to build, with its parameters.

    Parameters
    ----------
    kind : {"flat", "hnsw", "ivf"}, default="flat"
        ``flat``: ``IndexFlatIP``, exact. ``hnsw``: ``IndexHNSWFlat`` (inner
        product). ``ivf``: ``IndexIVFFlat`` over a flat inner-product quantizer.
    hnsw_m : int, default=32
        Neighbours per node of the HNSW graph.
    ef_construction : int, default=200
        HNSW build-time candidate list.
    ef_search : int, default=64
        HNSW query-time candidate list; at least ``k`` is used.
    nlist : int, default=None
        IVF cells; ``round(4 * sqrt(n))`` capped at ``n // 39`` (faiss wants 39
        training points per cell) when None.
    nprobe : int, default=8
        IVF cells visited per query.
    """

    kind: str = "flat"
    hnsw_m: int = 32
    ef_construction: int = 200
    ef_search: int = 64
    nlist: int | None = None
    nprobe: int = 8

    def __post_init__(self):
        check_choice(self.kind, "index", "DenseRetriever (DenseIndexSpec.kind)", DENSE_INDEXES)
        for name in ("hnsw_m", "ef_construction", "ef_search", "nprobe"):
            check_int(getattr(self, name), name, "DenseIndexSpec", low=1)
        check_int(self.nlist, "nlist", "DenseIndexSpec", low=1, allow_none=True)

    def resolved_nlist(self, n_vectors: int) -> int:
        if self.nlist is not None:
            return min(self.nlist, n_vectors)
        return max(1, min(round(4 * np.sqrt(n_vectors)), n_vectors // 39))


@contextmanager
def _single_thread():
    import faiss

    threads = faiss.omp_get_max_threads()
    faiss.omp_set_num_threads(1)
    try:
        yield
    finally:
        faiss.omp_set_num_threads(threads)


def build_faiss_index(embeddings: np.ndarray, spec: DenseIndexSpec) -> faiss.Index:
    """An inner-product faiss index of ``spec.kind`` holding ``embeddings`` (float32, C order)."""
    faiss = import_extra("faiss", "retrieval", "the dense index (faiss)")

    embeddings = np.ascontiguousarray(embeddings, dtype=np.float32)
    dim = embeddings.shape[1]
    if spec.kind == "flat":
        index = faiss.IndexFlatIP(dim)
        index.add(embeddings)
        return index
    with _single_thread():
        if spec.kind == "hnsw":
            index = faiss.IndexHNSWFlat(dim, spec.hnsw_m, faiss.METRIC_INNER_PRODUCT)
            index.hnsw.efConstruction = spec.ef_construction
            index.hnsw.efSearch = spec.ef_search
            index.add(embeddings)
            return index
        nlist = spec.resolved_nlist(embeddings.shape[0])
        quantizer = faiss.IndexFlatIP(dim)
        index = faiss.IndexIVFFlat(quantizer, dim, nlist, faiss.METRIC_INNER_PRODUCT)
        index.cp.seed = 1234
        index.train(embeddings)
        index.add(embeddings)
        index.make_direct_map()  # so that vectors can be read back (reconstruct), as from the flat and HNSW kinds
        return index


def configure_search(index: faiss.Index, spec: DenseIndexSpec, k: int) -> None:
    """Apply the query-time parameters of ``spec`` before a top-``k`` search.

    ``ef_search`` (HNSW, raised to ``k``: HNSW returns at most ``efSearch``
    results) and ``nprobe`` (IVF) are read from the spec at every search, so a
    study can vary them on one built index.
    """
    if spec.kind == "hnsw":
        index.hnsw.efSearch = max(spec.ef_search, k)
    elif spec.kind == "ivf":
        index.nprobe = min(spec.nprobe, index.nlist)


def index_config(spec: DenseIndexSpec, n_vectors: int) -> dict:
    """The parameters that define the score scale, for provenance (``dense_index`` and its settings)."""
    config = {"dense_index": spec.kind, "dense_metric": "cosine similarity (inner product of L2-normalised vectors)"}
    if spec.kind == "hnsw":
        settings = asdict(spec)
        config.update({key: settings[key] for key in ("hnsw_m", "ef_construction", "ef_search")})
    elif spec.kind == "ivf":
        config.update({"nlist": spec.resolved_nlist(n_vectors), "nprobe": spec.nprobe})
    return config
