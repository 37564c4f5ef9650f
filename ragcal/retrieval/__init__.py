"""Retrievers: dense (faiss), BM25 (sparse, rank-bm25 as reference), rank fusion, and the protocol for your own.

- :mod:`~ragcal.retrieval.base`: :class:`RetrievalResult`, what every retriever returns;
- :mod:`~ragcal.retrieval.dense` (+ :mod:`~ragcal.retrieval.ann`): exact or approximate faiss search;
- :mod:`~ragcal.retrieval.bm25` (+ :mod:`~ragcal.retrieval.bm25_sparse`): Okapi BM25;
- :mod:`~ragcal.retrieval.fusion`: reciprocal rank fusion;
- :mod:`~ragcal.retrieval.rerank`: a cross-encoder that re-scores the fused candidates;
- :mod:`~ragcal.retrieval.pgvector`: PostgreSQL + pgvector as a retriever;
- :mod:`~ragcal.retrieval.protocol`: the protocol your own engine meets, and :func:`retrieve_with`;
- :mod:`~ragcal.retrieval.diagnostics`: per-query numbers that corpus-level signals read;
- :mod:`~ragcal.retrieval.readers`: readers after retrieval (a judge) that add a view of their own;
- :mod:`~ragcal.retrieval.index`: a corpus as one index (chunks, dense, BM25, fusion, reranker, readers, access views);
- :mod:`~ragcal.retrieval.approximate`: how far approximate search moves scores and decisions.

Names load on first use, so importing this package needs neither faiss nor rank-bm25.
"""

from .._lazy import lazy_names

_API = {
    "RetrievalResult": "base",
    "DenseRetriever": "dense",
    "BM25Retriever": "bm25",
    "tokenize": "bm25",
    "reciprocal_rank_fusion": "fusion",
    "Retriever": "protocol",
    "retrieve_with": "protocol",
    "RetrievalIndex": "index",
    "build_index": "index",
    "IndexOptions": "index",
    "PassageReader": "readers",
}

__all__ = list(_API)


__getattr__, __dir__ = lazy_names(__name__, _API, globals())
