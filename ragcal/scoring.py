"""From labeled queries and their retrieval results to the score table.

::

    index = build_index("path/to/markdown")
    queries = load_queries("my_queries.csv", corpus_paths=index.doc_paths)
    retrieved = index.retrieve(queries["query"])
    table = score_table(queries, retrieved)

The table's schema, checks, reading and writing live in :mod:`ragcal.score_tables`.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from .corpus import load_corpus
from .score_tables import SCORE_KEY_COLUMNS
from .signals import ResultBatch, compute_signals_batch, signals_for

__all__ = ["score_table", "score_query_file", "index_arguments", "INDEX_SETTINGS"]

#: The flat settings :func:`index_arguments` reads; a gate file records them (:func:`ragcal.gates.files.index_options`).
INDEX_SETTINGS = (
    "model",
    "chunker",
    "max_tokens",
    "window",
    "expand_includes",
    "exclude",
    "dense_index",
    "reranker",
    "rerank_depth",
    "judge",
    "judge_depth",
)


def score_table(queries: pd.DataFrame, retrieved: dict, *, signals=None) -> pd.DataFrame:
    """One row per query, one column per signal.

    The signals are computed for all queries at once
    (:func:`ragcal.signals.compute_signals_batch`): each built-in signal with
    array operations over the whole batch, a signal registered per query
    (:func:`ragcal.signals.register_signal`) query by query. Either way a
    query's value is the one the signal gives on that query alone.

    Parameters
    ----------
    queries : DataFrame
        With at least ``id, query, answerable, slice`` (see
        :func:`ragcal.queries.load_queries`), in the order the queries were
        retrieved.
    retrieved : dict of str to list of RetrievalResult
        As returned by :meth:`RetrievalIndex.retrieve`: one result per query
        in every list.
    signals : list of str, default=None
        Signal names; when None, every registered signal whose retrievers
        are in ``retrieved``.

    Returns
    -------
    DataFrame
        Columns ``id, query, answerable, slice`` and then one float column per
        signal, in registry order.

    Raises
    ------
    ValueError
        When a list of ``retrieved`` does not hold one result per query.
    """
    sizes = {name: len(results) for name, results in retrieved.items() if len(results) != len(queries)}
    if sizes:
        raise ValueError(f"score_table: {len(queries)} queries, but results per retriever {sizes}")
    batch = ResultBatch(retrieved)
    # By default every registered signal that these results can feed (rerank_* need a reranker).
    names = signals_for(batch) if signals is None else list(signals)
    columns = compute_signals_batch(batch, names)
    values = np.column_stack([columns[name] for name in names]) if names else np.empty((len(queries), 0))
    table = queries[list(SCORE_KEY_COLUMNS)].reset_index(drop=True)
    return pd.concat([table, pd.DataFrame(values, columns=names, dtype="float64")], axis=1)


def score_query_file(queries_path, corpus_dir, *, signals=None, **index_options):
    """Build the index for ``corpus_dir`` and score a labeled query file.

    The query file is validated against the corpus before anything is
    embedded. ``index_options`` go to :func:`ragcal.retrieval.index.build_index`
    (from flat settings: :func:`index_arguments`).

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


def index_arguments(settings, *, cache_dir=None, use_cache: bool = True, access=None, allowed_levels=None) -> dict:
    """Keyword arguments of :func:`ragcal.retrieval.index.build_index` from flat settings, the reranker and judge loaded.

    The settings are what a gate file records (:func:`ragcal.gates.files.index_options`)
    and what the command line's options give: ``model``, ``chunker``,
    ``max_tokens``, ``window``, ``expand_includes``, ``exclude``,
    ``dense_index``, ``reranker`` with ``rerank_depth``, ``judge`` with
    ``judge_depth`` (:data:`INDEX_SETTINGS`); a missing or None one takes
    ``build_index``'s default. The reranker and the judge are loaded here,
    before anything is embedded, so a bad one fails early.

    ::

        index = build_index("docs/", **index_arguments({"chunker": "fixed", "judge": "judge/"}))

    Raises
    ------
    ValueError
        A setting that is not one of :data:`INDEX_SETTINGS`.
    """
    from .retrieval.index import IndexOptions

    settings = {key: value for key, value in dict(settings).items() if value is not None}
    unknown = sorted(set(settings) - set(INDEX_SETTINGS))
    if unknown:
        raise ValueError(f"index settings: unknown {', '.join(unknown)}; known: {', '.join(INDEX_SETTINGS)}")
    reranker, readers = None, ()
    if "reranker" in settings:
        from .retrieval.rerank import CrossEncoderReranker

        depth = settings.get("rerank_depth", 50)
        reranker = CrossEncoderReranker(
            str(settings["reranker"]), depth=depth, cache_dir=cache_dir, use_cache=use_cache
        )
    if "judge" in settings:
        from .judges.results import judge_reader

        depth = settings.get("judge_depth", 10)
        readers = (judge_reader(settings["judge"], depth=depth, cache_dir=cache_dir, use_cache=use_cache),)
    chunking = {key: settings[key] for key in ("chunker", "max_tokens", "window", "expand_includes") if key in settings}
    options = IndexOptions(
        **chunking, access=access, dense_index=settings.get("dense_index", "flat"), use_cache=use_cache
    )
    return {
        "embedder": settings.get("model"),
        "options": options,
        "exclude": tuple(settings.get("exclude", ())),
        "reranker": reranker,
        "readers": readers,
        "allowed_levels": allowed_levels,
        "cache_dir": cache_dir,
    }
