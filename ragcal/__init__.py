"""ragcal: calibrate when a RAG system should say "I don't know".

The public API, importable from here::

    from ragcal import build_index, load_queries, score_table, auc_table, fit_threshold

Names are loaded on first use (PEP 562), so ``import ragcal`` imports no
model code (torch, sentence-transformers), no faiss, no scikit-learn and no
matplotlib, loads no model, configures no logging and touches no network.
The subpackages (:mod:`ragcal.retrieval`, :mod:`ragcal.metrics`,
:mod:`ragcal.gates`, :mod:`ragcal.plotting`) list the rest in their
``__all__``; :mod:`ragcal.study` is our own experiment, not the library.
"""

from importlib import import_module

__version__ = "0.1.0"

#: Public name -> module that defines it (relative to this package).
_API = {
    "Document": "corpus",
    "CorpusError": "corpus",
    "load_corpus": "corpus",
    "Chunk": "chunking",
    "chunk_by_headings": "chunking",
    "chunk_fixed_size": "chunking",
    "DEFAULT_MODEL": "embedding",
    "Embedder": "embedding",
    "EmbedderProtocol": "embedding",
    "WordLlamaEmbedder": "embedding",
    "load_embedder": "embedding",
    "resolve_model": "embedding",
    "QueryFileError": "queries",
    "load_queries": "queries",
    "RetrievalResult": "retrieval",
    "DenseRetriever": "retrieval",
    "BM25Retriever": "retrieval",
    "reciprocal_rank_fusion": "retrieval",
    "retrieve_with": "retrieval",
    "RetrievalIndex": "retrieval.index",
    "build_index": "retrieval.index",
    "score_table": "scoring",
    "read_score_table": "score_tables",
    "write_score_table": "score_tables",
    "SIGNALS": "signals",
    "register_signal": "signals",
    "get_signal": "signals",
    "group_stats": "metrics",
    "auc_with_ci": "metrics",
    "auc_table": "metrics",
    "outcome_table": "metrics",
    "sweep": "metrics",
    "retrieval_metrics": "metrics",
    "fit_threshold": "calibration",
    "heldout_outcomes": "calibration",
    "calibrate": "calibration",
    "ScoreDistributionDisplay": "plotting",
    "RocDisplay": "plotting",
    "TradeoffDisplay": "plotting",
    "HeldoutDisplay": "plotting",
    "Decision": "gates",
    "ThresholdGate": "gates",
    "FloorGapGate": "gates",
    "Stage": "gates",
    "FallbackChain": "gates",
    "LearnedGate": "gates",
    "fit_gate": "gates",
    "fit_learned_gate": "gates",
    "load_gate": "gates",
    "save_gate": "gates",
    "sweep_chunking": "chunk_sweep",
}

__all__ = ["__version__", *_API]


def __getattr__(name):
    if name in _API:
        value = getattr(import_module(f".{_API[name]}", __name__), name)
        globals()[name] = value  # later look-ups skip this function
        return value
    raise AttributeError(f"module 'ragcal' has no attribute {name!r}")


def __dir__():
    return sorted(set(globals()) | set(__all__))
