"""Gating signals: one number per query, computed from its retrieval results.

A signal is an ordinary function that takes the mapping ``{retriever name:
RetrievalResult}`` of one query and returns a float. Registering it makes it a
column of every score table, and so part of every AUC table, sweep and plot::

    from ragcal.signals import register_signal

    @register_signal("dense_top3_mean", retrievers=("dense",))
    def dense_top3_mean(results):
        return float(results["dense"].scores[:3].mean())

A signal that needs the corpus itself (the retriever object that searched:
its vocabulary, its chunk embeddings) is one function of a
:class:`CorpusBatch` and one registry line; it runs at retrieval time, on the
retriever built on the chunks the caller may see::

    from ragcal.signals import register_corpus_signal

    @register_corpus_signal("dense_top1_over_centroid", retriever="dense")
    def dense_top1_over_centroid(batch):
        centroid = batch.per_retriever("centroid", lambda dense: dense.chunk_vectors().mean(axis=0))
        return batch.top_scores("dense", 1)[:, 0] - batch.query_vectors @ (centroid / np.linalg.norm(centroid))

The package, one module per part:

- :mod:`~ragcal.signals.batch`: :class:`ResultBatch`, the results of a batch
  of queries as the arrays vectorised signals read, and :class:`CorpusBatch`;
- :mod:`~ragcal.signals.registry`: :class:`Signal`, the registry
  (:data:`SIGNALS`), the ``register_*`` decorators and the functions that
  evaluate signals on one query or a batch;
- :mod:`~ragcal.signals.builtin`: the built-in signals (top scores,
  :data:`NEW_SIGNALS`);
- :mod:`~ragcal.signals.run`: the signals of a user's own run of scored
  candidates (``run_top1``, ``run_gap``, ...), present only where ``run``
  results are (:data:`RUN_SIGNALS`);
- :mod:`~ragcal.signals.qpp`: the query-performance predictors
  (:data:`QPP_SIGNALS`);
- :mod:`~ragcal.signals.judge`: what a judge says of the top passages
  (``judge_top1``, ``judge_mass``, ...), present only where a judge ran
  (:data:`JUDGE_SIGNALS`);
- :mod:`~ragcal.signals.logged`: signals a system logged itself (an LLM's
  verdict), read from a file and joined into a score table by id;
- :mod:`~ragcal.signals.directions`: a signal's direction, declared,
  inferred from labels, registered or recorded.

Importing :mod:`ragcal.signals` (or any of its modules, which imports the
package first) registers the built-in signals, then the run signals, then the
predictors, then the judge signals: that
order is the column order of score tables. The registry itself imports
neither.
"""

from .batch import CorpusBatch, ResultBatch
from .builtin import NEW_SIGNALS  # registers the built-in signals
from .run import RUN_SIGNALS  # then the signals of a user's own run
from .qpp import QPP_SIGNALS  # then the predictors
from .judge import JUDGE_SIGNALS  # then what a judge says of the passages
from .registry import (
    SIGNALS,
    Signal,
    compute_signals,
    compute_signals_batch,
    get_signal,
    load_signals_module,
    register_batch_signal,
    register_corpus_signal,
    register_signal,
    signals_for,
    unregister_signal,
)

__all__ = [
    "Signal",
    "SIGNALS",
    "NEW_SIGNALS",
    "QPP_SIGNALS",
    "RUN_SIGNALS",
    "JUDGE_SIGNALS",
    "ResultBatch",
    "CorpusBatch",
    "register_signal",
    "register_batch_signal",
    "register_corpus_signal",
    "get_signal",
    "compute_signals",
    "compute_signals_batch",
    "signals_for",
    "unregister_signal",
    "load_signals_module",
]
