"""Retrievers: dense (faiss), BM25 (sparse, rank-bm25 as reference), rank fusion, and the protocol for your own."""

from .base import RetrievalResult
from .bm25 import BM25Retriever, tokenize
from .dense import DenseRetriever
from .fusion import reciprocal_rank_fusion
from .protocol import Retriever, retrieve_with

__all__ = [
    "RetrievalResult",
    "DenseRetriever",
    "BM25Retriever",
    "tokenize",
    "reciprocal_rank_fusion",
    "Retriever",
    "retrieve_with",
]
