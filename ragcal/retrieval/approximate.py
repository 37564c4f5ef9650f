"""What approximate search does to gating: top-1 score error and decision flips.

A gate answers when the top-1 score clears a threshold fitted on some engine's
scores. Run the same queries through another engine (faiss HNSW or IVF,
pgvector's HNSW) and two things can move:

- the **top-1 score**: an approximate index that keeps full vectors returns
  the exact cosine of every chunk it finds, but it can miss the best chunk,
  and then its top-1 is *lower* than the exact one (never higher);
- the **decision**: a query flips when its exact and approximate top-1 fall
  on opposite sides of the threshold. With full vectors a flip can only turn
  an answer into a refusal.

:func:`top1_comparison` lines the two up per query, :func:`decision_flips`
counts flips at given thresholds with exact binomial intervals, and
:func:`synthetic_corpus` makes a seeded large corpus of unit vectors (topic
clusters, answerable and unanswerable queries) for studying sizes that the
bundled corpora do not reach. The study itself, with the numbers measured on
this machine, is ``docs/approximate_search.md``.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd

from .._params import check_int
from ..metrics import clopper_pearson

__all__ = ["top1_comparison", "decision_flips", "topk_overlap", "SyntheticCorpus", "synthetic_corpus"]


def _check_aligned(exact, approximate, function):
    if len(exact) != len(approximate):
        raise ValueError(f"{function}: {len(exact)} exact results but {len(approximate)} approximate ones")


def top1_comparison(exact, approximate) -> pd.DataFrame:
    """Exact against approximate top-1, per query.

    Parameters
    ----------
    exact, approximate : sequence of RetrievalResult
        The same queries, in the same order, from the reference engine and
        from the one under study.

    Returns
    -------
    DataFrame
        One row per query: ``exact_top1``, ``approximate_top1`` (NaN for an
        empty result), ``top1_error`` (``exact_top1 - approximate_top1``) and
        ``same_top1`` (the same chunk id at rank 1).
    """
    _check_aligned(exact, approximate, "top1_comparison")
    exact_top1 = np.array([result.score_at(1) for result in exact])
    approximate_top1 = np.array([result.score_at(1) for result in approximate])
    same = [
        bool(len(ours) and len(theirs) and ours.chunk_ids[0] == theirs.chunk_ids[0])
        for ours, theirs in zip(exact, approximate)
    ]
    return pd.DataFrame(
        {
            "exact_top1": exact_top1,
            "approximate_top1": approximate_top1,
            "top1_error": exact_top1 - approximate_top1,
            "same_top1": same,
        }
    )


def decision_flips(
    exact_scores, approximate_scores, thresholds, *, higher_is_answerable: bool = True, confidence: float = 0.95
) -> pd.DataFrame:
    """How many decisions change when the approximate score replaces the exact one.

    A query is answered when its score clears the threshold (``>=``, or
    ``<=`` when ``higher_is_answerable`` is False), as everywhere in ragcal.

    Parameters
    ----------
    exact_scores, approximate_scores : array-like of float
        Aligned per query. NaN (an empty result) is a refusal.
    thresholds : dict of str to float or array-like of float
        Thresholds to test, e.g. ``{"keep@0.95": 0.479}``.

    Returns
    -------
    DataFrame
        One row per threshold: ``threshold``, ``n``, ``flips``,
        ``flip_rate`` with exact ``flip_rate_low`` / ``flip_rate_high``,
        ``answer_to_refuse`` and ``refuse_to_answer`` (counts), and
        ``exact_answered`` (how many the exact scores answer).
    """
    exact_scores = np.asarray(exact_scores, dtype=float)
    approximate_scores = np.asarray(approximate_scores, dtype=float)
    if exact_scores.shape != approximate_scores.shape or exact_scores.ndim != 1:
        raise ValueError(
            f"decision_flips: exact_scores and approximate_scores must be 1-D of one length; got "
            f"{exact_scores.shape} and {approximate_scores.shape}"
        )
    if not isinstance(thresholds, dict):
        thresholds = {f"{value:g}": value for value in np.asarray(thresholds, dtype=float).reshape(-1)}
    rows = []
    for name, threshold in thresholds.items():
        with np.errstate(invalid="ignore"):
            if higher_is_answerable:
                exact_answer, approximate_answer = exact_scores >= threshold, approximate_scores >= threshold
            else:
                exact_answer, approximate_answer = exact_scores <= threshold, approximate_scores <= threshold
        flips = int((exact_answer != approximate_answer).sum())
        low, high = clopper_pearson(flips, exact_scores.size, confidence=confidence)
        rows.append(
            {
                "threshold_name": name,
                "threshold": float(threshold),
                "n": exact_scores.size,
                "flips": flips,
                "flip_rate": flips / exact_scores.size if exact_scores.size else np.nan,
                "flip_rate_low": float(low),
                "flip_rate_high": float(high),
                "answer_to_refuse": int((exact_answer & ~approximate_answer).sum()),
                "refuse_to_answer": int((~exact_answer & approximate_answer).sum()),
                "exact_answered": int(exact_answer.sum()),
            }
        )
    return pd.DataFrame(rows)


def topk_overlap(reference, candidate, *, k: int = 10) -> np.ndarray:
    """Share of each query's reference top-``k`` chunk ids that the candidate's top-``k`` also holds.

    Returns
    -------
    ndarray of shape (n_queries,)
        NaN where the reference result is empty.
    """
    _check_aligned(reference, candidate, "topk_overlap")
    overlap = np.full(len(reference), np.nan)
    for position, (ours, theirs) in enumerate(zip(reference, candidate)):
        wanted = set(ours.chunk_ids[:k])
        if wanted:
            overlap[position] = len(wanted & set(theirs.chunk_ids[:k])) / len(wanted)
    return overlap


@dataclass(frozen=True)
class SyntheticCorpus:
    """Seeded unit vectors standing in for chunk and query embeddings.

    Attributes
    ----------
    chunk_ids : list of str
        ``topic<t>/chunk<n>#0``.
    embeddings : ndarray of shape (n_chunks, dim), float32, L2-normalised
    queries : ndarray of shape (n_queries, dim), float32, L2-normalised
    answerable : ndarray of bool, shape (n_queries,)
        True for a query written near one chunk (a paraphrase of it), False
        for one near a topic but no chunk (near-domain) or near nothing.
    slices : ndarray of str
        ``answerable``, ``near-domain`` or ``unrelated``.
    """

    chunk_ids: list
    embeddings: np.ndarray
    queries: np.ndarray
    answerable: np.ndarray
    slices: np.ndarray


def _unit(rows):
    return (rows / np.linalg.norm(rows, axis=1, keepdims=True)).astype(np.float32)


def synthetic_corpus(
    n_chunks: int,
    n_queries: int,
    *,
    dim: int = 384,
    n_topics: int | None = None,
    random_state=0,
) -> SyntheticCorpus:
    """A seeded corpus of clustered unit vectors and labeled queries, for scale studies.

    Chunks are ``topic centre + noise`` (MiniLM embeddings of one site are
    clustered like this: most cosines between chunks of one corpus are
    0.2-0.6). Half of the queries are answerable: a chunk plus noise, so the
    exact top-1 cosine is high. A quarter are near-domain (a topic centre plus
    noise: close to many chunks, to none in particular), a quarter unrelated
    (random directions). The answerable top-1 cosines spread from about 0.8
    down to the near-domain ones (about 0.5), so a ``keep@0.95`` threshold
    sits where queries are dense, as it does on real corpora.

    Parameters
    ----------
    n_chunks, n_queries : int
    dim : int, default=384
        MiniLM's dimension.
    n_topics : int, default=None
        ``max(1, n_chunks // 200)`` when None.
    random_state : int, default=0

    Returns
    -------
    SyntheticCorpus
    """
    n_chunks = check_int(n_chunks, "n_chunks", "synthetic_corpus", low=1)
    n_queries = check_int(n_queries, "n_queries", "synthetic_corpus", low=1)
    rng = np.random.default_rng(random_state)
    n_topics = n_topics or max(1, n_chunks // 200)
    centres = _unit(rng.standard_normal((n_topics, dim)))
    topic = rng.integers(0, n_topics, size=n_chunks)
    # Noise of norm ~1.1 around a unit centre: chunks of one topic share cosines around 0.45.
    embeddings = _unit(centres[topic] + rng.standard_normal((n_chunks, dim)).astype(np.float32) * (1.1 / np.sqrt(dim)))
    slices = rng.choice(np.array(["answerable", "near-domain", "unrelated"]), size=n_queries, p=[0.5, 0.25, 0.25])
    queries = np.empty((n_queries, dim), dtype=np.float32)
    answerable = slices == "answerable"
    source = rng.integers(0, n_chunks, size=int(answerable.sum()))
    # Paraphrase noise of norm 0.7 to 1.7: exact top-1 cosines from about 0.8 down into the near-domain range.
    paraphrase = rng.uniform(0.7, 1.7, size=(source.size, 1)) / np.sqrt(dim)
    queries[answerable] = embeddings[source] + rng.standard_normal((source.size, dim)) * paraphrase
    near = slices == "near-domain"
    queries[near] = centres[rng.integers(0, n_topics, size=int(near.sum()))] + rng.standard_normal(
        (int(near.sum()), dim)
    ) * (1.2 / np.sqrt(dim))
    unrelated = slices == "unrelated"
    queries[unrelated] = rng.standard_normal((int(unrelated.sum()), dim))
    chunk_ids = [f"topic{t}/chunk{n}#0" for n, t in enumerate(topic)]
    return SyntheticCorpus(chunk_ids, embeddings, _unit(queries), answerable, slices)
