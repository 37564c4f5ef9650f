"""ragcal: calibrate when a RAG system should say "I don't know".

Importing ragcal loads no model, configures no logging and does not import
matplotlib (the plotting module imports it only when it draws).
"""

__version__ = "0.1.0"

from .chunking import Chunk, chunk_by_headings, chunk_fixed_size
from .corpus import CorpusError, Document, load_corpus
from .embedding import DEFAULT_MODEL, Embedder, resolve_model
from .queries import QueryFileError, load_queries
from .retrieval import BM25Retriever, DenseRetriever, RetrievalResult, reciprocal_rank_fusion
from .calibration import fit_threshold, heldout_outcomes
from .metrics import auc_table, auc_with_ci, group_stats, outcome_table, retrieval_metrics, sweep
from .plotting import HeldoutDisplay, RocDisplay, ScoreDistributionDisplay, TradeoffDisplay
from .scoring import RetrievalIndex, build_index, load_score_table, score_table
from .signals import SIGNALS, get_signal, register_signal
from .gates import (
    Decision,
    FallbackChain,
    FloorGapGate,
    LearnedGate,
    Stage,
    ThresholdGate,
    fit_learned_gate,
    load_gate,
    save_gate,
)
from .chunk_sweep import sweep_chunking

__all__ = [
    "__version__",
    "Document",
    "CorpusError",
    "load_corpus",
    "Chunk",
    "chunk_by_headings",
    "chunk_fixed_size",
    "DEFAULT_MODEL",
    "Embedder",
    "resolve_model",
    "QueryFileError",
    "load_queries",
    "RetrievalResult",
    "DenseRetriever",
    "BM25Retriever",
    "reciprocal_rank_fusion",
    "RetrievalIndex",
    "build_index",
    "score_table",
    "load_score_table",
    "SIGNALS",
    "register_signal",
    "get_signal",
    "group_stats",
    "auc_with_ci",
    "auc_table",
    "outcome_table",
    "sweep",
    "retrieval_metrics",
    "fit_threshold",
    "heldout_outcomes",
    "ScoreDistributionDisplay",
    "RocDisplay",
    "TradeoffDisplay",
    "HeldoutDisplay",
    "Decision",
    "ThresholdGate",
    "FloorGapGate",
    "Stage",
    "FallbackChain",
    "LearnedGate",
    "fit_learned_gate",
    "load_gate",
    "save_gate",
    "sweep_chunking",
]
