"""Training pairs for a judge: (question, passage, answers?) from a labeled set and its retrieval results.

For each labeled question, from its retrieved list (best first, the first
``depth`` passages):

- **positives**: the gold passages of an answerable question, the first
  ``positives_per_question`` retrieved passages on a gold page (when none was
  retrieved, the first passage of a gold page in the corpus);
- **negatives**: the first ``negatives_per_question`` retrieved passages of
  an unanswerable question (on SQuAD 2.0 the very paragraph it was written
  against, the hardest negative there is), and the first
  ``negatives_per_question`` retrieved non-gold passages of an answerable one.

Gold is page-level, as everywhere in ragcal: a passage counts as gold when it
sits on one of the question's gold pages (:func:`ragcal.chunking.page_of`).
"""

from __future__ import annotations

import pandas as pd

from .._params import check_int
from ..chunking import page_of

__all__ = ["PAIR_COLUMNS", "judge_pairs"]

#: The columns of a pairs table, in order.
PAIR_COLUMNS = ("id", "query", "chunk_id", "passage", "label", "rank")


def judge_pairs(
    queries: pd.DataFrame,
    candidates,
    texts,
    *,
    depth: int = 10,
    positives_per_question: int = 1,
    negatives_per_question: int = 2,
) -> pd.DataFrame:
    """The labeled (question, passage) pairs a judge is trained on.

    Parameters
    ----------
    queries : DataFrame
        Labeled queries with ``id, query, answerable, gold`` (gold: the gold
        pages of each question, see :func:`ragcal.queries.load_queries`).
    candidates : sequence of RetrievalResult
        One retrieved list per query, in the order of ``queries`` (the dense
        results, say).
    texts : mapping of str to str
        Chunk id -> the passage text.
    depth : int, default=10
        How far down each list pairs are taken from.
    positives_per_question, negatives_per_question : int, default=1, 2

    Returns
    -------
    DataFrame
        Columns :data:`PAIR_COLUMNS`: the query's ``id`` and text, the
        passage's ``chunk_id`` and text, ``label`` (1: answers, 0: does not)
        and the passage's ``rank`` in the list (1 = first; 0 for a gold
        passage taken from the corpus because retrieval missed it). Rows in
        query order, then rank.
    """
    depth = check_int(depth, "depth", "judge_pairs", low=1)
    positives_per_question = check_int(positives_per_question, "positives_per_question", "judge_pairs", low=0)
    negatives_per_question = check_int(negatives_per_question, "negatives_per_question", "judge_pairs", low=0)
    candidates = list(candidates)
    if len(candidates) != len(queries):
        raise ValueError(f"judge_pairs: {len(queries)} queries but {len(candidates)} retrieved lists")
    first_of_page = {}
    for chunk_id in texts:
        first_of_page.setdefault(page_of(chunk_id), chunk_id)
    rows = []
    for query, result in zip(queries.itertuples(index=False), candidates):
        gold = set(query.gold) if query.answerable else set()
        ranked = list(enumerate(result.chunk_ids[:depth], start=1))
        positives = [(rank, chunk_id) for rank, chunk_id in ranked if page_of(chunk_id) in gold]
        negatives = [(rank, chunk_id) for rank, chunk_id in ranked if page_of(chunk_id) not in gold]
        if query.answerable and not positives:
            positives = [(0, first_of_page[page]) for page in sorted(gold) if page in first_of_page]
        chosen = [(rank, chunk_id, 1) for rank, chunk_id in positives[:positives_per_question]]
        chosen += [(rank, chunk_id, 0) for rank, chunk_id in negatives[:negatives_per_question]]
        for rank, chunk_id, label in sorted(chosen):
            rows.append((str(query.id), str(query.query), chunk_id, texts[chunk_id], label, rank))
    return pd.DataFrame(rows, columns=list(PAIR_COLUMNS)).astype({"label": "int64", "rank": "int64"})
