"""Per-query diagnostics that gating signals need beyond a ranked list.

Some signals need corpus-level numbers: the IDF weights of the query's terms,
which chunks contain which term, the embedding centroid of the corpus. Those
numbers must come from the retriever object that produced the query's results,
never from a global corpus object: when a caller may only see some chunks, the
retrievers are built on those chunks only, and a restricted page must not move
a signal. So each diagnostic is a function of one retriever's batch of results
(:class:`RetrieverBatch`: the retriever object, the queries, their embeddings,
the results), registered with :func:`register_diagnostic`, and
:func:`attach_diagnostics` stores its values in the ``info`` mapping of that
retriever's :class:`~ragcal.retrieval.RetrievalResult`.

One module per family:

- :mod:`~ragcal.retrieval.diagnostics.registry`: the hook (:class:`RetrieverBatch`,
  :func:`register_diagnostic`, :func:`attach_diagnostics`);
- :mod:`~ragcal.retrieval.diagnostics.bm25_statistics`: a BM25 query's
  ``max_score``, ``coverage_top``, ``coverage_corpus``, ``corpus_score``,
  ``query_terms`` (from :mod:`~ragcal.retrieval.diagnostics.bm25_terms`) and
  ``clarity`` (:mod:`~ragcal.retrieval.diagnostics.clarity`);
- :mod:`~ragcal.retrieval.diagnostics.dense_domain`: a dense query's
  ``centroid_cosine`` and ``page_knn_cosine``, and ``perturbation_jaccard``
  (:mod:`~ragcal.retrieval.diagnostics.perturbation`).

Every diagnostic is computed for a whole batch of queries at once, with array
operations: :func:`bm25_diagnostics` and :func:`dense_diagnostics` return one
array per key, and :func:`bm25_info` and :func:`dense_info` are the same
computation on a batch of one query (or as a list of dicts), so there is one
definition of each. A signal that needs a corpus statistic of its own
registers it with :func:`ragcal.signals.register_corpus_signal`: one function,
one registry line.

Importing this package registers the built-in diagnostics, the BM25 ones then
the dense ones; the registry itself imports neither.
"""

from .bm25_statistics import BM25_KEYS, BM25_QPP_KEYS, bm25_diagnostics, bm25_info
from .dense_domain import DENSE_KEYS, DENSE_QPP_KEYS, dense_diagnostics, dense_info
from .registry import DIAGNOSTICS, RetrieverBatch, attach_diagnostics, register_diagnostic, unregister_diagnostic

__all__ = [
    "BM25_KEYS",
    "BM25_QPP_KEYS",
    "DENSE_KEYS",
    "DENSE_QPP_KEYS",
    "DIAGNOSTICS",
    "RetrieverBatch",
    "register_diagnostic",
    "unregister_diagnostic",
    "attach_diagnostics",
    "bm25_diagnostics",
    "bm25_info",
    "dense_diagnostics",
    "dense_info",
]
