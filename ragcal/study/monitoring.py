"""The live log of notebook 09: questions the FastAPI calibration set has never seen, asked of the FastAPI docs.

Two sources make it up:

- the Rust book's labeled questions (``data/queries/rust-book.csv``), every
  one of them unanswerable from the FastAPI docs (slice ``other corpus``);
- ``data/queries/fastapi-live.csv``: new near-domain questions the docs do not
  answer and new answerable ones, written for the notebook and checked like
  the bundled set (see ``data/README.md``).

:func:`live_log` scores them on a FastAPI index exactly as a deployed system
would log them, then splits what a deployment has (the scores, in arrival
order, with a timestamp) from what only the study knows (the labels, for
standing in for a human labeler). The arrival order and the timestamps are
synthetic: a seeded shuffle, one question a minute.
"""

from __future__ import annotations

import pandas as pd

from ..datasets import FASTAPI_LIVE_QUERIES, RUST_BOOK_QUERIES
from ..queries import load_queries
from ..scoring import score_table

__all__ = ["LIVE_SCORES", "OTHER_CORPUS_SLICE", "live_log", "live_scores", "truth_labels"]

#: The live questions' score table that ``ragcal reproduce`` commits beside the FastAPI results
#: (``results/fastapi/live_scores.csv``), which the notebook's live log is anchored to (:mod:`ragcal.study.anchoring`).
LIVE_SCORES = "live_scores.csv"

#: Slice of the other corpus's questions in the truth table.
OTHER_CORPUS_SLICE = "other corpus"
#: Arrival times of the synthetic log: one question a minute from this moment.
LOG_START = pd.Timestamp("2026-11-02 09:00", tz="UTC")


def _live_questions(live_queries, other_queries) -> pd.DataFrame:
    other = load_queries(other_queries)
    other = other.assign(answerable=False, slice=OTHER_CORPUS_SLICE, gold=[() for _ in range(len(other))])
    other["id"] = "rust-" + other["id"].astype(str)
    new = load_queries(live_queries)
    columns = ["id", "query", "answerable", "slice", "gold"]
    return pd.concat([new[columns], other[columns]], ignore_index=True)


def live_scores(index, *, live_queries=FASTAPI_LIVE_QUERIES, other_queries=RUST_BOOK_QUERIES, random_state=0):
    """``(table, questions)``: the live questions in arrival order (a seeded shuffle), and their score table."""
    questions = _live_questions(live_queries, other_queries)
    questions = questions.sample(frac=1.0, random_state=random_state).reset_index(drop=True)
    return score_table(questions, index.retrieve(questions["query"].tolist())), questions


def live_log(index, *, live_queries=FASTAPI_LIVE_QUERIES, other_queries=RUST_BOOK_QUERIES, random_state=0):
    """Score the notebook's live questions on ``index`` and return the log a deployment would keep.

    When ``ragcal reproduce`` executes the notebook, the scores are anchored
    to the committed ``results/fastapi/live_scores.csv`` (see
    :func:`ragcal.study.notebooks.results_anchor`), as the study's own are.

    Parameters
    ----------
    index : RetrievalIndex
        The FastAPI index the gate was fitted on.
    live_queries, other_queries : path
        Labeled query files: the new FastAPI questions and the other corpus's.
    random_state : int, default=0
        Seed of the arrival order.

    Returns
    -------
    log : DataFrame
        ``id, query, timestamp`` and one column per signal, in arrival order:
        no labels.
    truth : DataFrame
        ``id, answerable, slice, gold`` of the same rows (``gold`` a tuple of
        pages), what only the study knows.
    """
    from .notebooks import results_anchor

    table, questions = live_scores(
        index, live_queries=live_queries, other_queries=other_queries, random_state=random_state
    )
    anchor = results_anchor("fastapi")
    if anchor is not None:
        table = anchor.table(table, LIVE_SCORES)
    signals = [column for column in table.columns if column not in ("id", "query", "answerable", "slice")]
    log = table[["id", "query"]].assign(timestamp=LOG_START + pd.to_timedelta(range(len(table)), unit="min"))
    log = pd.concat([log, table[signals]], axis=1)
    truth = questions[["id", "answerable", "slice", "gold"]].copy()
    return log, truth


def truth_labels(review: pd.DataFrame, truth: pd.DataFrame, page_columns) -> list[dict]:
    """What a careful labeler would enter for each row of a review sample, from the study's labels.

    ``gold`` keeps the true pages among the row's retrieved pages (``page_columns``): an answerable question
    whose page was not retrieved gets none, a retrieval miss, as the labeler records it.

    Returns
    -------
    list of dict
        ``{"row", "answerable", "slice", "gold"}`` per row of ``review``, in its order.
    """
    known = truth.set_index("id")
    labels = []
    for row, (question, retrieved) in enumerate(zip(review["id"], review[list(page_columns)].to_numpy().tolist())):
        entry = known.loc[question]
        true_pages = set(entry["gold"])
        gold = [page for page in dict.fromkeys(retrieved) if page and page in true_pages]
        labels.append(
            {"row": row, "answerable": bool(entry["answerable"]), "slice": entry["slice"], "gold": gold}
        )
    return labels
