"""The result type that every retriever returns, and the key of the corpus view it was searched in."""

from __future__ import annotations

import hashlib
from dataclasses import dataclass, field
from typing import Mapping, Sequence

import numpy as np

from ..chunking import pages_of

__all__ = ["RetrievalResult", "view_key"]


def view_key(chunk_ids) -> str:
    """A short digest of a set of chunk ids: equal keys, same view (the ``view`` a retriever stamps on its results)."""
    digest = hashlib.sha256("\n".join(sorted(map(str, chunk_ids))).encode("utf-8"))
    return digest.hexdigest()[:20]


@dataclass(frozen=True)
class RetrievalResult:
    """Ranked chunks for one query, best first.

    Attributes
    ----------
    retriever : str
        Name of the retriever; becomes the run tag and the report label.
    chunk_ids : tuple of str
        Chunk ids, best first. Empty when nothing matched.
    scores : ndarray of shape (len(chunk_ids),), dtype float64
        Scores aligned with ``chunk_ids``, non-increasing.
    info : mapping of str to float, default={}
        Per-query diagnostics that need more than the ranked list (a BM25
        query's maximum attainable score, the query's cosine to the corpus
        centroid, ...), computed by :mod:`ragcal.retrieval.diagnostics` from
        the retriever object that produced this result, so they only ever
        describe the chunks that retriever holds. Empty for results from other
        sources; signals that read it return NaN then.
    view : str, default=None
        :func:`view_key` of the chunks the producing
        retriever holds: which corpus view was searched. None for results
        built by hand.
    corpus : CorpusDescription, default=None
        What a refusal or hedge may say about that view; attached by
        :meth:`ragcal.retrieval.index.RetrievalIndex.retrieve`. Gates word
        their messages with it rather than with the description they were
        bound to (see :func:`ragcal.retrieval.views.searched_corpus`).
    positions : ndarray of shape (len(chunk_ids),), dtype intp, default=None
        Position of each chunk in ``source_ids``, so that diagnostics and
        signals need not look the ids up again. None for results built by
        hand, fused or reranked.
    source_ids : sequence of str, default=None
        The producing retriever's own ``chunk_ids`` (the object itself, not a
        copy), which ``positions`` index: ``source_ids[positions[i]] ==
        chunk_ids[i]``. Given with ``positions``.
    tokens : tuple of str, default=None
        The query's tokens as the producing retriever scored them (BM25:
        :func:`ragcal.retrieval.bm25.tokenize` with its variant); None for
        retrievers that do not tokenize.
    """

    retriever: str
    chunk_ids: tuple[str, ...]
    scores: np.ndarray = field(repr=False)
    info: Mapping[str, float] = field(default_factory=dict, repr=False, compare=False)
    view: str | None = field(default=None, repr=False, compare=False)
    corpus: object = field(default=None, repr=False, compare=False)
    positions: np.ndarray | None = field(default=None, repr=False, compare=False)
    source_ids: Sequence[str] | None = field(default=None, repr=False, compare=False)
    tokens: tuple[str, ...] | None = field(default=None, repr=False, compare=False)

    def __post_init__(self):
        scores = np.asarray(self.scores, dtype=np.float64).reshape(-1)
        if scores.shape[0] != len(self.chunk_ids):
            raise ValueError(
                f"RetrievalResult of {self.retriever!r}: {len(self.chunk_ids)} chunk ids but {scores.shape[0]} scores"
            )
        scores.setflags(write=False)
        object.__setattr__(self, "chunk_ids", tuple(self.chunk_ids))
        object.__setattr__(self, "scores", scores)
        object.__setattr__(self, "info", {str(key): float(value) for key, value in dict(self.info).items()})
        if (self.positions is None) != (self.source_ids is None):
            raise ValueError(f"RetrievalResult of {self.retriever!r}: positions and source_ids go together")
        if self.positions is not None:
            positions = np.asarray(self.positions, dtype=np.intp).reshape(-1)
            if positions.shape[0] != len(self.chunk_ids):
                raise ValueError(
                    f"RetrievalResult of {self.retriever!r}: {len(self.chunk_ids)} chunk ids but "
                    f"{positions.shape[0]} positions"
                )
            positions.setflags(write=False)
            object.__setattr__(self, "positions", positions)
        if self.tokens is not None:
            object.__setattr__(self, "tokens", tuple(self.tokens))

    def with_view(self, *, view=None, corpus=None) -> "RetrievalResult":
        """A copy stamped with a view key and, optionally, the view's description."""
        from dataclasses import replace

        return replace(self, view=view if view is not None else self.view, corpus=corpus)

    def _with_info(self, info: dict | None = None, **fields) -> "RetrievalResult":
        """A copy whose ``info`` also holds ``info`` (a new dict of str to float, which the copy may keep).

        ``fields`` replace other fields as they are (``view``, ``corpus``). For
        :meth:`ragcal.retrieval.index.RetrievalIndex.retrieve` and
        :func:`ragcal.retrieval.diagnostics.attach_diagnostics`, which stamp
        every result of a batch: the other fields were checked when this result
        was made, so the copy skips ``__post_init__`` (a tenth of the cost of
        ``dataclasses.replace``).
        """
        copy = object.__new__(type(self))
        copy.__dict__.update(self.__dict__)
        if info:
            copy.__dict__["info"] = {**self.info, **info} if self.info else info
        copy.__dict__.update(fields)
        return copy

    def __len__(self) -> int:
        return len(self.chunk_ids)

    @property
    def is_empty(self) -> bool:
        """True when the retriever matched nothing."""
        return len(self.chunk_ids) == 0

    def score_at(self, rank: int) -> float:
        """Score at 1-based ``rank``; NaN when the list is shorter."""
        return float(self.scores[rank - 1]) if rank <= len(self.scores) else float("nan")

    def doc_paths(self) -> list[str]:
        """Document path of each chunk (the part of the id before ``#``)."""
        return pages_of(self.chunk_ids)
