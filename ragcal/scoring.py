"""From labeled queries and their retrieval results to the score table.

::

    index = build_index("path/to/markdown")
    queries = load_queries("my_queries.csv", corpus_paths=index.doc_paths)
    retrieved = index.retrieve(queries["query"])
    table = score_table(queries, retrieved)

The table's schema, checks, reading and writing live in :mod:`ragcal.score_tables`.
"""

from __future__ import annotations

import pandas as pd

from .corpus import load_corpus
from .score_tables import SCORE_KEY_COLUMNS
from .signals import compute_signals, signals_for

__all__ = ["score_table", "score_query_file"]


def score_table(queries: pd.DataFrame, retrieved: dict, *, signals=None) -> pd.DataFrame:
    """One row per query, one column per signal.

    Parameters
    ----------
    queries : DataFrame
        With at least ``id, query, answerable, slice`` (see
        :func:`ragcal.queries.load_queries`), in the order the queries were
        retrieved.
    retrieved : dict of str to list of RetrievalResult
        As returned by :meth:`RetrievalIndex.retrieve`.
    signals : list of str, default=None
        Signal names; when None, every registered signal whose retrievers
        are in ``retrieved``.

    Returns
    -------
    DataFrame
        Columns ``id, query, answerable, slice`` and then one float column per
        signal, in registry order.
    """
    # By default every registered signal that these results can feed (rerank_* need a reranker).
    names = signals_for(retrieved) if signals is None else list(signals)
    rows = []
    for position in range(len(queries)):
        results = {retriever: per_query[position] for retriever, per_query in retrieved.items()}
        rows.append(compute_signals(results, names))
    table = queries[list(SCORE_KEY_COLUMNS)].reset_index(drop=True)
    return pd.concat([table, pd.DataFrame(rows, columns=names, dtype="float64")], axis=1)


def score_query_file(queries_path, corpus_dir, *, signals=None, **index_options):
    """Build the index for ``corpus_dir`` and score a labeled query file.

    The query file is validated against the corpus before anything is
    embedded. ``index_options`` go to :func:`ragcal.retrieval.index.build_index`.

    Returns
    -------
    table : DataFrame
        The score table.
    index : RetrievalIndex
    retrieved : dict of str to list of RetrievalResult
    """
    from .queries import load_queries
    from .retrieval.index import build_index

    exclude = tuple(index_options.get("exclude", ()))
    documents = load_corpus(corpus_dir, expand_includes=False, exclude=exclude)
    queries = load_queries(queries_path, corpus_paths={document.path for document in documents})
    index = build_index(corpus_dir, **index_options)
    retrieved = index.retrieve(queries["query"])
    return score_table(queries, retrieved, signals=signals), index, retrieved


