"""Ask a bound gate about new questions: one decision per question, as rows."""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pandas as pd

__all__ = ["ask", "ask_candidates"]


def ask(gate, index, questions, *, ids=None, allowed_levels=None) -> tuple[list, pd.DataFrame]:
    """Retrieve every question with ``index`` and let ``gate`` decide.

    Parameters
    ----------
    gate : Gate
        Its refusals and hedges name only the pages of the view that is
        searched, whatever it was bound to (the results carry that view's
        description).
    index : RetrievalIndex
    questions : sequence of str
    ids : sequence of str, default=None
    allowed_levels : str or sequence of str, default=None
        Decide as a caller who may see only these access levels: retrieval
        runs on ``index.restrict(allowed_levels)``.

    Returns
    -------
    decisions : list of Decision
    table : DataFrame
        ``id, query, action, score, stage, tier, passages, message`` with
        ``passages`` as ``chunk_id (score)`` text, for display.
    """
    if allowed_levels is not None:
        index = index.restrict(allowed_levels)
    # No rebinding needed: the results carry their view's description, and messages use it.
    questions = [str(question) for question in questions]
    # Deciding, not measuring: a judge may meet one of its training questions here.
    retrieved = index.retrieve(questions, check_leakage=False)
    decisions = [
        gate.decide({name: per_query[position] for name, per_query in retrieved.items()}, query=question)
        for position, question in enumerate(questions)
    ]
    return decisions, decision_table(decisions, questions, ids)


def decision_table(decisions, questions, ids=None) -> pd.DataFrame:
    """``id, query, action, score, stage, tier, passages, message``: one row per decision, for display."""
    return pd.DataFrame(
        {
            "id": list(ids) if ids is not None else [None] * len(questions),
            "query": list(questions),
            "action": [decision.action for decision in decisions],
            "score": [decision.score for decision in decisions],
            "stage": [decision.stage for decision in decisions],
            "tier": [decision.tier for decision in decisions],
            "passages": [
                "; ".join(f"{chunk_id} ({score:.3f})" for chunk_id, score in decision.passages)
                for decision in decisions
            ],
            "message": [decision.message for decision in decisions],
        }
    )


def ask_candidates(gate, candidates, *, provenance: dict, embedder=None, cache_dir=None, use_cache: bool = True):
    """Let ``gate`` decide on questions that come with their own candidates: no index, no corpus.

    Only the retriever views the gate reads are built over the candidates
    (:func:`ragcal.retrieval.candidates.candidate_retrievers` with
    ``views=gate.retrievers``). A gate on the system's own scores (``run_*``)
    or on BM25 therefore needs no model stack; one on ``dense`` or ``rrf``
    embeds the pool with the model the gate was fitted with.

    Parameters
    ----------
    gate : Gate
    candidates : CandidateSet
        The questions and their candidates, best first
        (:func:`ragcal.importers.read_candidates_jsonl` with
        ``require_labels=False``); labels are not read.
    provenance : dict
        The gate file's provenance: the gate must have been fitted on a table
        that ``ragcal score --candidates`` wrote (``scoring: candidates``), and
        a dense view is embedded with its ``model``, whose fingerprint must match.
    embedder : EmbedderProtocol, default=None
        For a dense view: overrides the recorded model (its fingerprint is
        still checked).
    cache_dir, use_cache
        The embedding cache, for a dense view.

    Returns
    -------
    decisions : list of Decision
    table : DataFrame
        As :func:`ask` returns it, in the candidates' order.

    Raises
    ------
    GateFileError
        The gate was not fitted on candidates, or with another model.

    Notes
    -----
    BM25's statistics and the dense diagnostics are those of the pool these
    candidates form (:mod:`ragcal.retrieval.candidates`); the list-only
    signals (``run_*``, ``dense_top1``, ``dense_gap``, the top-k summaries)
    depend on each question's own list only.
    """
    from ..embedding.loading import load_embedder
    from ..retrieval.base import RetrievalResult
    from ..retrieval.candidates import candidate_retrievers
    from ..retrieval.protocol import retrieve_with
    from .files import GateFileError

    if provenance.get("scoring") != "candidates":
        raise GateFileError(
            f"the gate was fitted on {provenance.get('score_scale') or 'scores of an index of a corpus'}, not on "
            "candidates scored by `ragcal score --candidates`; decide with `ragcal ask` on its corpus, or score your "
            "candidates and fit again"
        )
    views = set(gate.retrievers)
    if views & {"dense", "rrf"}:
        if embedder is None:
            embedder = load_embedder(provenance.get("model"), cache_dir=cache_dir, use_cache=use_cache)
        if embedder.fingerprint != provenance.get("model_fingerprint"):
            raise GateFileError(
                f"the gate was fitted on dense scores of {provenance.get('model_fingerprint')}, not of "
                f"{embedder.fingerprint}; a threshold on another model's scale is wrong, not approximate"
            )
    questions = [question.query for question in candidates.questions]
    depth = max((len(question.passage_ids) for question in candidates.questions), default=0)
    if depth == 0:  # nothing retrieved for any question: each is decided on empty lists (a refusal, with the reason)
        empty = RetrievalResult("", (), np.empty(0))
        retrieved = {view: [replace(empty, retriever=view) for _ in questions] for view in views}
    else:
        retrieved = retrieve_with(
            candidate_retrievers(candidates, embedder=embedder, views=views),
            questions,
            k=depth,
            rrf_k=provenance.get("rrf_k", 60),
            rrf_top=provenance.get("rrf_top", 50),
        )
    decisions = [
        gate.decide({name: per_query[position] for name, per_query in retrieved.items()}, query=question)
        for position, question in enumerate(questions)
    ]
    return decisions, decision_table(decisions, questions, [question.id for question in candidates.questions])
