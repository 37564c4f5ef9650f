"""Numbers of the published experiment ("Make your RAG say 'I don't know': a score
threshold, measured", seeds/score-threshold-measured.txt), for side-by-side tables.

Setup: 152 FastAPI doc pages, 2,808 heading-aware chunks, MiniLM-L6-v2 cosine and BM25;
30 answerable, 15 near-domain and 15 unrelated queries.
"""

import pandas as pd

from ..calibration.heldout import heldout_outcomes

__all__ = ["GROUP_STATS", "AUC", "SWEEP", "SWEEP_GRID", "HELDOUT", "QUERY_COUNTS", "published_split"]

QUERY_COUNTS = {"answerable": 30, "near-domain": 15, "unrelated": 15}

#: dense_top1 per slice: (median, min, max).
GROUP_STATS = {
    "answerable": (0.619, 0.393, 0.818),
    "near-domain": (0.385, 0.256, 0.508),
    "unrelated": (0.218, 0.175, 0.298),
}

#: AUC, answerable vs all unanswerable.
AUC = {
    "dense_top1": 0.986,
    "bm25_top1_stopwords": 0.927,
    "bm25_top1_raw": 0.910,
    "dense_gap": 0.649,
}

#: dense_top1 threshold -> (answerable kept, near-domain refused, unrelated refused, all unanswerable refused).
SWEEP = {
    0.30: (1.00, 0.13, 1.00, 0.57),
    0.35: (1.00, 0.20, 1.00, 0.60),
    0.40: (0.97, 0.60, 1.00, 0.80),
    0.45: (0.93, 0.73, 1.00, 0.87),
    0.50: (0.90, 0.93, 1.00, 0.97),
    0.55: (0.73, 1.00, 1.00, 1.00),
}

#: One half split, calibrated keeping every answerable question.
#: The thresholds of the published sweep, 0.30 to 0.55 in steps of 0.05.
SWEEP_GRID = tuple(SWEEP)

HELDOUT = {"threshold": 0.393, "answerable_kept": (15, 15), "unanswerable_refused": (11, 14)}


def published_split(
    table: pd.DataFrame,
    signal: str = "dense_top1",
    *,
    rule: str = "keep@1.0",
    random_state=0,
    higher_is_answerable: bool = True,
) -> pd.Series:
    """The published protocol: one seeded half split, calibrate keeping every answerable question."""
    return heldout_outcomes(
        table, signal, [rule], n_splits=1, random_state=random_state, higher_is_answerable=higher_is_answerable
    ).iloc[0]
