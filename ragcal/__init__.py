"""ragcal: calibrate when a RAG system should say "I don't know".

The public API, importable from here::

    from ragcal import build_index, load_queries, score_table, auc_table, fit_threshold

Names are loaded on first use (PEP 562), so ``import ragcal`` imports no
model code (torch, sentence-transformers), no faiss, no scikit-learn and no
matplotlib, loads no model, configures no logging and touches no network.
The subpackages list their user-facing names in their ``__all__``;
everything else is imported from the module that defines it:

- :mod:`ragcal.embedding`: models that turn texts into vectors, and their cache;
- :mod:`ragcal.retrieval`: dense and BM25 retrievers, fusion, the reranker, the index;
- :mod:`ragcal.judges`: a model that reads each retrieved passage against the question;
- :mod:`ragcal.llm`: an LLM's own abstention, as a baseline signal;
- :mod:`ragcal.signals`: the registry of gating signals;
- :mod:`ragcal.metrics`: AUC, outcomes, selective risk, with intervals;
- :mod:`ragcal.calibration`: where a threshold goes, held out, and Learn-then-Test;
- :mod:`ragcal.gates`: gates that decide, their files and their refusals;
- :mod:`ragcal.monitoring`: shift and review after deployment;
- :mod:`ragcal.logs`: score logs of any size as counts (pandas, DuckDB, Spark);
- :mod:`ragcal.importers`: public benchmarks and exported candidate lists, read in;
- :mod:`ragcal.integrations`: a gate inside LangChain, LlamaIndex and Haystack;
- :mod:`ragcal.plotting`: displays that draw and never compute;
- :mod:`ragcal.cli`: the ``ragcal`` command, a thin floor over the rest.

:mod:`ragcal.study` is our own experiment, not the library.
"""

from ._lazy import lazy_names

__version__ = "0.1.0"

#: Public name -> module that defines it (relative to this package).
_API = {
    # from a folder of Markdown pages and a labeled query file to a score table
    "load_corpus": "corpus",
    "chunk_by_headings": "chunking",
    "load_embedder": "embedding",
    "build_index": "retrieval.index",
    "IndexOptions": "retrieval.index",
    "load_queries": "queries",
    "RetrievalResult": "retrieval",
    "retrieve_with": "retrieval",
    "reciprocal_rank_fusion": "retrieval",
    "score_table": "scoring",
    "read_score_table": "score_tables",
    "write_score_table": "score_tables",
    # signals: one function and one registry line
    "SIGNALS": "signals",
    "register_signal": "signals",
    "register_batch_signal": "signals",
    # which signal separates, where the threshold goes, what it costs
    "group_stats": "metrics",
    "auc_table": "metrics",
    "outcome_table": "metrics",
    "sweep": "metrics",
    "retrieval_metrics": "metrics",
    "fit_threshold": "calibration",
    "heldout_outcomes": "calibration",
    "calibrate": "calibration",
    # gates: decisions, fitted, saved and asked
    "Decision": "gates",
    "ThresholdGate": "gates",
    "FloorGapGate": "gates",
    "FallbackChain": "gates",
    "LearnedGate": "gates",
    "fit_gate": "gates",
    "load_gate": "gates",
    "load_gate_index": "gates",
    "save_gate": "gates",
    "ask": "gates",
    # figures
    "ScoreDistributionDisplay": "plotting",
    "RocDisplay": "plotting",
    "TradeoffDisplay": "plotting",
    "HeldoutDisplay": "plotting",
    # after deployment
    "monitor": "monitoring",
    "review_sample": "monitoring",
}

__all__ = ["__version__", *_API]


__getattr__, __dir__ = lazy_names(__name__, _API, globals())
