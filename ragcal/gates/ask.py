"""Ask a bound gate about new questions: one decision per question, as rows."""

from __future__ import annotations

import pandas as pd

__all__ = ["ask"]


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
    table = pd.DataFrame(
        {
            "id": list(ids) if ids is not None else [None] * len(questions),
            "query": questions,
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
    return decisions, table
