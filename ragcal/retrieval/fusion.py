"""Reciprocal rank fusion (Cormack, Clarke and Buettcher, SIGIR 2009)."""

from __future__ import annotations

from collections import defaultdict

import numpy as np

from .._params import check_float, check_int
from .base import RetrievalResult

__all__ = ["reciprocal_rank_fusion"]


def reciprocal_rank_fusion(
    results, *, k: int = 60, depth: int = 100, top: int = 50, name: str = "rrf"
) -> RetrievalResult:
    """Fuse ranked lists by the sum of ``1 / (k + rank)``.

    Parameters
    ----------
    results : sequence of RetrievalResult
        One query's results from several retrievers.
    k : int, default=60
        Damping constant from the original paper.
    depth : int, default=100
        How many of each list's top chunks take part (ranks 1..depth).
    top : int, default=50
        How many fused chunks to return.
    name : str, default="rrf"

    Returns
    -------
    RetrievalResult
        Fused scores, best first. Ties are broken by the best single rank,
        then by chunk id, so the order is deterministic.
    """
    check_float(k, "k", "reciprocal_rank_fusion", low=0, low_open=False)
    for parameter, value in (("depth", depth), ("top", top)):
        check_int(value, parameter, "reciprocal_rank_fusion", low=1)
    results = list(results)
    fused: dict[str, float] = defaultdict(float)
    best_rank: dict[str, int] = {}
    for result in results:
        for rank, chunk_id in enumerate(result.chunk_ids[:depth], start=1):
            fused[chunk_id] += 1.0 / (k + rank)
            best_rank[chunk_id] = min(rank, best_rank.get(chunk_id, rank))
    ordered = sorted(fused, key=lambda chunk_id: (-fused[chunk_id], best_rank[chunk_id], chunk_id))[:top]
    views = {result.view for result in results}
    view = views.pop() if len(views) == 1 else None  # lists from different views fuse into an unstamped list
    return RetrievalResult(name, tuple(ordered), np.array([fused[chunk_id] for chunk_id in ordered]), view=view)
