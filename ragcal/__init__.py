"""ragcal: calibrate when a RAG system should say "I don't know".

The computational core imports no plotting library and loads no model at
import time.
"""

__version__ = "0.1.0"

from .chunking import Chunk, chunk_by_headings, chunk_fixed_size
from .corpus import CorpusError, Document, load_corpus
from .embedding import DEFAULT_MODEL, Embedder, resolve_model
from .queries import QueryFileError, load_queries
from .retrieval import BM25Retriever, DenseRetriever, RetrievalResult, reciprocal_rank_fusion
from .scoring import RetrievalIndex, build_index, score_table
from .signals import SIGNALS, get_signal, register_signal

__all__ = [
    "__version__",
    "Document", "CorpusError", "load_corpus",
    "Chunk", "chunk_by_headings", "chunk_fixed_size",
    "DEFAULT_MODEL", "Embedder", "resolve_model",
    "QueryFileError", "load_queries",
    "RetrievalResult", "DenseRetriever", "BM25Retriever", "reciprocal_rank_fusion",
    "RetrievalIndex", "build_index", "score_table",
    "SIGNALS", "register_signal", "get_signal",
]
