"""A user's own retrieved candidates to a score table, without ragcal's retrievers over a corpus.

::

    from ragcal.importers.trec import read_trec_candidates
    from ragcal.candidate_scoring import score_candidates

    candidates = read_trec_candidates("run.trec", "passages.jsonl", queries="queries.csv")
    scores = score_candidates(candidates)
    scores.table          # one row per question, one column per signal
    scores.left_out       # {signal: why it could not be computed}

The retrieval half is :mod:`ragcal.retrieval.candidates` (retrievers that
re-score each question's own candidates, over the pool of all candidates);
this module sits beside :mod:`ragcal.scoring`, at the same level, because it
does what :func:`ragcal.scoring.score_query_file` does for a Markdown folder:
labels, retrieval, signals and provenance in one call. The retrievers run
through :func:`ragcal.retrieval.protocol.retrieve_with`, the path any engine
takes, so the table is the one a user gets from the protocol by hand.

Which signals: every registered signal whose retrievers the candidates give
(``dense``, ``bm25_raw``, ``bm25_stopwords``, ``rrf``, and ``run`` when the
candidates carry the system's own scores); the others are listed in
:attr:`CandidateScores.left_out` with the reason, derived from the registry
(:func:`left_out_signals`). Corpus-level statistics are those of the pool of
candidates, not of the user's corpus (see :mod:`ragcal.retrieval.candidates`).
"""

from __future__ import annotations

from dataclasses import dataclass, field

import pandas as pd

from . import __version__
from .embedding.protocol import embedder_name
from .importers.candidates import CandidateSet, candidate_queries
from .retrieval.candidates import candidate_retrievers
from .retrieval.protocol import retrieve_with
from .retrieval.readers import apply_readers, check_readers, readers_config
from .scoring import score_table
from .signals import SIGNALS, get_signal, signals_for

__all__ = ["CandidateScores", "score_candidates", "left_out_signals"]

#: Why a retriever's results are missing when candidates are re-scored; any other name gets a generic reason.
_ABSENT_BECAUSE = {
    "rerank": "needs a cross-encoder reranker's scores, and re-scoring candidates runs no reranker",
    "judge": "needs a judge's verdicts on the passages: score with a judge (readers=[judge_reader(...)], `ragcal score --judge`)",
    "run": "needs the exporting system's own scores, which these candidates do not carry",
    "dense": "needs the candidates embedded (dense re-scoring), which was left out: ragcal's embedding model is the "
    "retrieval extra (pip install 'ragcal[retrieval]')",
    "rrf": "needs the dense and bm25_stopwords lists fused, and one of them was left out",
}


@dataclass(frozen=True)
class CandidateScores:
    """The score table of a candidate set, with what produced it.

    Attributes
    ----------
    table : DataFrame
        ``id, query, answerable, slice`` and one float column per computed
        signal, in registry order (see :func:`ragcal.scoring.score_table`).
    retrieved : dict of str to list of RetrievalResult
        Per retriever (``dense``, ``bm25_raw``, ``bm25_stopwords``, ``rrf``,
        ``run``), one result per question, in the table's order.
    left_out : dict of str to str
        Every registered signal that the candidates cannot feed, with the
        reason (see :func:`left_out_signals`).
    config : dict
        Provenance: ragcal version, model and fingerprint, the candidates'
        source, pool size, candidate depth, BM25 and fusion parameters.
    """

    table: pd.DataFrame
    retrieved: dict = field(repr=False)
    left_out: dict
    config: dict


def left_out_signals(retrievers) -> dict[str, str]:
    """``{signal: reason}`` for every registered signal that results of ``retrievers`` (names) cannot feed.

    The reason names the retrievers the signal needs and why they are
    missing; it comes from the registry (:attr:`ragcal.signals.Signal.retrievers`).
    """
    computable = set(signals_for(retrievers))
    reasons = {}
    for name, signal in SIGNALS.items():
        if name in computable:
            continue
        missing = [retriever for retriever in signal.retrievers if retriever not in retrievers]
        reasons[name] = "; ".join(
            _ABSENT_BECAUSE.get(
                retriever, f"needs results of the retriever {retriever!r}, which re-scoring candidates does not produce"
            )
            for retriever in missing
        )
    return reasons


def score_candidates(
    candidates: CandidateSet,
    *,
    model: str | None = None,
    embedder=None,
    signals=None,
    cache_dir=None,
    use_cache: bool = True,
    rrf_k: int = 60,
    rrf_top: int = 50,
    readers=(),
    views=None,
) -> CandidateScores:
    """Score a user's own candidates: dense, BM25, fused and their own scores, then every signal they feed.

    Parameters
    ----------
    candidates : CandidateSet
        With labels (:func:`ragcal.importers.read_candidates_jsonl`, or
        :func:`ragcal.importers.trec.read_trec_candidates` joined with a
        labeled query file).
    model : str, default=None
        The embedding model (:func:`ragcal.embedding.load_embedder`); None is
        the packaged MiniLM.
    embedder : EmbedderProtocol, default=None
        A ready embedder; overrides ``model``, ``cache_dir`` and ``use_cache``.
    signals : sequence of str, default=None
        The signals to compute; None computes every one the candidates can
        feed.
    cache_dir, use_cache
        The embedding cache.
    rrf_k, rrf_top : int, default=60, 50
        Reciprocal rank fusion of ``dense`` and ``bm25_stopwords``, as
        :meth:`ragcal.retrieval.index.RetrievalIndex.retrieve` fuses.
    readers : sequence of PassageReader, default=()
        Steps after retrieval (:mod:`ragcal.retrieval.readers`), as
        :func:`ragcal.retrieval.index.build_index` takes them: a judge
        (:func:`ragcal.judges.judge_reader`) reads the first passages of each
        question's dense list into the ``"judge"`` view, which the judge
        signals read. Their provenance is recorded in ``config``.
    views : sequence of str, default=None
        Re-score with these retrievers only
        (:func:`ragcal.retrieval.candidates.candidate_retrievers`); without
        ``"dense"`` nothing is embedded, so no model stack is needed, and the
        dense and fused signals are listed in ``left_out``. None: every one.

    Returns
    -------
    CandidateScores

    Raises
    ------
    ValueError
        A question without a label, scores that increase down a list, no
        candidate at all, or a requested signal that the candidates cannot
        feed (with the reason) or that is not registered.
    JudgeLeakageError
        A judge trained on any of the questions.
    """
    queries = candidate_queries(candidates)
    readers = check_readers(readers, "score_candidates", taken=("dense", "bm25_raw", "bm25_stopwords", "rrf", "run"))
    names = None if signals is None else [get_signal(name).name for name in signals]
    retrievers = candidate_retrievers(
        candidates,
        embedder=embedder,
        **({} if model is None else {"model": model}),
        cache_dir=cache_dir,
        use_cache=use_cache,
        views=views,
    )
    if readers and "dense" not in retrievers:
        raise ValueError("readers (a judge) read the dense list: re-score with the dense view")
    pool = next(iter(retrievers.values())).pool
    fused = ["rrf"] if {"dense", "bm25_stopwords"} <= set(retrievers) else []
    left_out = left_out_signals((*retrievers, *fused, *(reader.name for reader in readers)))
    blocked = [name for name in names or () if name in left_out]
    if blocked:
        raise ValueError(f"signal {blocked[0]!r} cannot be computed from these candidates: it {left_out[blocked[0]]}")
    depth = max(pool.depth, 1)
    retrieved = retrieve_with(retrievers, queries["query"], k=depth, rrf_k=rrf_k, rrf_top=rrf_top)
    apply_readers(readers, queries["query"], retrieved, dict(zip(pool.chunk_ids, pool.texts)) if readers else {})
    table = score_table(queries, retrieved, signals=names)
    embedder = retrievers["dense"].embedder if "dense" in retrievers else None
    bm25 = retrievers.get("bm25_raw")
    config = {
        "ragcal_version": __version__,
        "scoring": "candidates",
        "candidates": candidates.source,
        "n_questions": len(candidates),
        "n_pool_passages": len(pool),
        "candidate_depth": pool.depth,
        "collection": "the candidate pool: every passage listed under some question, one chunk each",
        "model": embedder_name(embedder) if embedder is not None else None,
        "model_fingerprint": embedder.fingerprint if embedder is not None else None,
        "bm25": {key: getattr(bm25.bm25, key) for key in ("k1", "b", "epsilon")} if bm25 is not None else None,
        "retrievers": sorted(retrievers),
        "rrf_k": rrf_k,
        "rrf_top": rrf_top,
        "run_scores": "run" in retrievers,
        "signals_left_out": left_out,
        **readers_config(readers),
    }
    return CandidateScores(table=table, retrieved=retrieved, left_out=left_out, config=config)
