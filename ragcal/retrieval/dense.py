"""Dense retrieval: cosine search with faiss, exact (``IndexFlatIP``) by default, HNSW or IVF on request."""

from __future__ import annotations

import numpy as np

from .ann import DenseIndexSpec, build_faiss_index, configure_search, index_config
from .base import RetrievalResult, view_key

__all__ = ["DenseRetriever"]


class DenseRetriever:
    """Exact inner-product search over L2-normalised embeddings (= cosine).

    Parameters
    ----------
    chunk_ids : sequence of str
    embeddings : ndarray of shape (n_chunks, dim)
        L2-normalised rows, e.g. from :meth:`ragcal.embedding.Embedder.encode`.
    embedder : Embedder, default=None
        Used by :meth:`search` to embed query strings.
    name : str, default="dense"
    index : {"flat", "hnsw", "ivf"} or DenseIndexSpec, default="flat"
        ``"flat"`` is exact. The approximate kinds can miss the best chunk,
        which lowers the top-1 score: a threshold fitted on one kind is not
        on the scale of another (see :mod:`ragcal.retrieval.ann`). A string
        uses :class:`~ragcal.retrieval.ann.DenseIndexSpec`'s defaults. Its
        query-time parameters (``ef_search``, ``nprobe``) are read from
        :attr:`index_spec` at every search.
    """

    def __init__(self, chunk_ids, embeddings, *, embedder=None, name: str = "dense", index="flat"):
        embeddings = np.ascontiguousarray(embeddings, dtype=np.float32)
        if embeddings.ndim != 2 or embeddings.shape[0] != len(chunk_ids):
            raise ValueError(f"embeddings must have shape ({len(chunk_ids)}, dim); got {embeddings.shape}")
        self.chunk_ids = list(chunk_ids)
        self.embedder = embedder
        self.name = name
        self.index_spec = index if isinstance(index, DenseIndexSpec) else DenseIndexSpec(kind=index)
        self.index = build_faiss_index(embeddings, self.index_spec)
        self.view = view_key(self.chunk_ids)  # stamped on every result: which chunks were searched

    @classmethod
    def from_faiss(cls, chunk_ids, faiss_index, *, embedder=None, name: str = "dense", index="flat") -> "DenseRetriever":
        """A retriever over an already built faiss index (e.g. one loaded by :mod:`ragcal.retrieval.store`).

        ``faiss_index`` must hold one vector per chunk, in ``chunk_ids`` order,
        built as ``index`` says.
        """
        if faiss_index.ntotal != len(chunk_ids):
            raise ValueError(f"the faiss index holds {faiss_index.ntotal} vectors for {len(chunk_ids)} chunk ids")
        retriever = cls.__new__(cls)
        retriever.chunk_ids = list(chunk_ids)
        retriever.embedder = embedder
        retriever.name = name
        retriever.index_spec = index if isinstance(index, DenseIndexSpec) else DenseIndexSpec(kind=index)
        retriever.index = faiss_index
        retriever.view = view_key(retriever.chunk_ids)
        return retriever

    @property
    def index_config(self) -> dict:
        """Kind and parameters of the faiss index, for provenance."""
        return index_config(self.index_spec, len(self.chunk_ids))

    @classmethod
    def from_chunks(cls, chunks, embedder, *, name: str = "dense", index="flat") -> "DenseRetriever":
        """Embed ``chunk.text`` of every chunk (through the cache) and index it."""
        embeddings = embedder.encode([chunk.text for chunk in chunks])
        return cls([chunk.chunk_id for chunk in chunks], embeddings, embedder=embedder, name=name, index=index)

    def subset(self, positions) -> "DenseRetriever":
        """A retriever over the chunks at ``positions`` only (a new index of their vectors, of the same kind).

        Searching it searches within the subset, so ``k`` results come back
        whenever the subset holds ``k`` chunks; nothing outside it can appear
        or influence a score.
        """
        positions = np.asarray(positions, dtype=np.int64).reshape(-1)
        vectors = self.index.reconstruct_batch(positions) if len(positions) else np.zeros((0, self.index.d), np.float32)
        ids = [self.chunk_ids[i] for i in positions]
        return type(self)(ids, vectors, embedder=self.embedder, name=self.name, index=self.index_spec)

    def search_vectors(self, query_vectors, *, k: int = 100) -> list[RetrievalResult]:
        """Top ``k`` chunks for each row of ``query_vectors`` (L2-normalised)."""
        query_vectors = np.ascontiguousarray(np.atleast_2d(query_vectors), dtype=np.float32)
        k = min(k, len(self.chunk_ids))
        if k == 0 or query_vectors.shape[0] == 0:
            return [RetrievalResult(self.name, (), np.empty(0), view=self.view) for _ in range(query_vectors.shape[0])]
        configure_search(self.index, self.index_spec, k)
        scores, indices = self.index.search(query_vectors, k)
        results = []
        chunk_ids = self.chunk_ids
        for row_scores, row_indices in zip(scores, indices):
            keep = row_indices >= 0
            positions = row_indices[keep].astype(np.intp)
            results.append(
                RetrievalResult(
                    self.name,
                    tuple(chunk_ids[i] for i in positions.tolist()),
                    row_scores[keep],
                    view=self.view,
                    positions=positions,
                    source_ids=chunk_ids,
                )
            )
        return results

    def chunk_vectors(self) -> np.ndarray:
        """The indexed embeddings, one row per chunk in :attr:`chunk_ids` order (for per-query diagnostics)."""
        return self.index.reconstruct_n(0, self.index.ntotal)

    def search(self, queries, *, k: int = 100) -> list[RetrievalResult]:
        """Embed query strings with the embedder and search."""
        return self.search_vectors(self.encode_queries(queries), k=k)

    def encode_queries(self, queries) -> np.ndarray:
        """Embed query strings with the embedder (L2-normalised rows), as :meth:`search` does."""
        if self.embedder is None:
            raise ValueError("DenseRetriever.search needs an embedder; use search_vectors for raw vectors")
        return self.embedder.encode(list(queries), show_progress_bar=False)
