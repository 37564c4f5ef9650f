"""Okapi BM25 retrieval (k1=1.5, b=0.75, epsilon=0.25), with rank-bm25's scores.

Two backends give the same scores (tested to 1e-12): ``"sparse"`` (the
default), a vectorised scipy core in :mod:`ragcal.retrieval.bm25_sparse` that
scales to hundreds of thousands of chunks, and ``"rank_bm25"``, the reference
library's ``BM25Okapi``, kept as the reference in tests.

Tokenizer: lower-case, then every maximal run of letters, digits and
underscores is a token (``response_model`` stays one token, ``/items/{id}``
gives ``items`` and ``id``). The ``"stopwords"`` variant also drops
scikit-learn's English stop-word list (318 words).

A chunk is *matched* when it contains at least one query token. Only matched
chunks are returned, so a result is empty when no query token occurs anywhere
in the corpus, which is how BM25 reports "nothing matched".
"""

from __future__ import annotations

import re
from collections import defaultdict

import numpy as np
from rank_bm25 import BM25Okapi
from sklearn.feature_extraction.text import ENGLISH_STOP_WORDS

from .._params import check_choice
from .base import RetrievalResult, view_key
from .bm25_sparse import SparseBM25

__all__ = ["BM25Retriever", "tokenize", "TOKENIZERS", "BM25_BACKENDS"]

_WORD = re.compile(r"\w+")

#: Names accepted by :func:`tokenize` and :class:`BM25Retriever`.
TOKENIZERS = ("raw", "stopwords")

#: Names accepted by the ``backend`` parameter of :class:`BM25Retriever`.
BM25_BACKENDS = ("sparse", "rank_bm25")


def tokenize(text: str, *, variant: str = "raw") -> list[str]:
    """Split text into BM25 tokens; see the module docstring."""
    check_choice(variant, "variant", "tokenize", TOKENIZERS)
    tokens = _WORD.findall(text.lower())
    if variant == "stopwords":
        tokens = [token for token in tokens if token not in ENGLISH_STOP_WORDS]
    return tokens


class BM25Retriever:
    """Okapi BM25 over chunk texts.

    Parameters
    ----------
    chunk_ids : sequence of str
    texts : sequence of str
    variant : {"raw", "stopwords"}, default="raw"
    name : str, default=None
        Defaults to ``"bm25_<variant>"``.
    backend : {"sparse", "rank_bm25"}, default="sparse"
        ``"sparse"``: :class:`~ragcal.retrieval.bm25_sparse.SparseBM25`;
        ``"rank_bm25"``: the reference ``rank_bm25.BM25Okapi``. Same scores.
    """

    def __init__(
        self, chunk_ids, texts, *, variant: str = "raw", name: str | None = None, backend: str = "sparse"
    ):
        check_choice(backend, "backend", "BM25Retriever", BM25_BACKENDS)
        if len(chunk_ids) != len(texts):
            raise ValueError(f"{len(chunk_ids)} chunk ids but {len(texts)} texts")
        if not len(texts):
            raise ValueError("BM25Retriever needs at least one text")
        self.chunk_ids = list(chunk_ids)
        self.variant = variant
        self.name = name or f"bm25_{variant}"
        self.backend = backend
        self.view = view_key(self.chunk_ids)  # stamped on every result: which chunks were searched
        corpus_tokens = [tokenize(text, variant=variant) for text in texts]
        # rank-bm25 divides by the average document length; keep it positive.
        padded = [tokens or [""] for tokens in corpus_tokens]
        if backend == "sparse":
            self.bm25 = SparseBM25(padded)  # same ``idf`` attribute as BM25Okapi
            return
        self.bm25 = BM25Okapi(padded)
        postings: dict[str, list[int]] = defaultdict(list)
        for position, tokens in enumerate(corpus_tokens):
            for token in set(tokens):
                postings[token].append(position)
        self._postings = {token: np.asarray(positions) for token, positions in postings.items()}

    @classmethod
    def from_sparse(cls, chunk_ids, sparse: SparseBM25, *, variant: str = "raw", name: str | None = None):
        """A sparse-backend retriever over an already built :class:`SparseBM25` (one document per chunk id)."""
        if sparse.corpus_size != len(chunk_ids):
            raise ValueError(f"the BM25 scorer holds {sparse.corpus_size} documents for {len(chunk_ids)} chunk ids")
        check_choice(variant, "variant", "BM25Retriever", TOKENIZERS)
        retriever = cls.__new__(cls)
        retriever.chunk_ids = list(chunk_ids)
        retriever.variant = variant
        retriever.name = name or f"bm25_{variant}"
        retriever.backend = "sparse"
        retriever.view = view_key(retriever.chunk_ids)
        retriever.bm25 = sparse
        return retriever

    @classmethod
    def from_chunks(
        cls, chunks, *, variant: str = "raw", name: str | None = None, backend: str = "sparse"
    ) -> "BM25Retriever":
        return cls(
            [chunk.chunk_id for chunk in chunks],
            [chunk.text for chunk in chunks],
            variant=variant,
            name=name,
            backend=backend,
        )

    def search_one(self, query: str, *, k: int = 100) -> RetrievalResult:
        tokens = tokenize(query, variant=self.variant)
        if self.backend == "sparse":
            matched, scores = self.bm25.score(tokens)
        else:
            known = [token for token in tokens if token in self._postings]
            if not known:
                return self._result((), np.empty(0), np.empty(0, dtype=np.intp), tokens)
            matched = np.unique(np.concatenate([self._postings[token] for token in known]))
            scores = np.asarray(self.bm25.get_batch_scores(known, matched.tolist()), dtype=np.float64)
        if matched.size == 0:
            return self._result((), np.empty(0), np.empty(0, dtype=np.intp), tokens)
        if 0 < k < matched.size:
            # Keep every score tied with the k-th best, so the stable sort below breaks ties as on the full list.
            kth_best = np.partition(scores, matched.size - k)[matched.size - k]
            candidates = np.flatnonzero(scores >= kth_best)
            matched, scores = matched[candidates], scores[candidates]
        order = np.argsort(-scores, kind="stable")[:k]  # ties keep corpus order
        positions = matched[order]
        chunk_ids = self.chunk_ids
        return self._result(tuple(chunk_ids[i] for i in positions.tolist()), scores[order], positions, tokens)

    def _result(self, chunk_ids, scores, positions, tokens) -> RetrievalResult:
        return RetrievalResult(
            self.name, chunk_ids, scores, view=self.view, positions=positions, source_ids=self.chunk_ids, tokens=tokens
        )

    def search(self, queries, *, k: int = 100) -> list[RetrievalResult]:
        """Top ``k`` matched chunks per query; empty when nothing matched."""
        return [self.search_one(query, k=k) for query in queries]

    # ------------------------------------------------------------------ accessors for per-query diagnostics

    @property
    def k1(self) -> float:
        """Term-frequency saturation: one term adds at most ``idf * (k1 + 1)`` to a chunk's score."""
        return float(self.bm25.k1)

    def idf(self, tokens) -> np.ndarray:
        """IDF weight of each token as the scorer uses it; NaN for a token that occurs in no chunk."""
        return np.array([self.bm25.idf[token] if self._occurs(token) else np.nan for token in tokens], dtype=float)

    def _occurs(self, token: str) -> bool:
        if self.backend == "sparse":
            return bool(token) and token in self.bm25.vocabulary  # "" only pads empty chunks
        return token in self._postings

    def unseen_idf(self) -> float:
        """The IDF a token would have if it occurred in no chunk: ``log((N + 0.5) / 0.5)`` (the Okapi formula at df=0)."""
        return float(np.log((len(self.chunk_ids) + 0.5) / 0.5))

    def positions_with(self, token: str) -> np.ndarray:
        """Positions (in :attr:`chunk_ids`, ascending) of the chunks that contain ``token``; empty when none does."""
        if self.backend == "sparse":
            if not self._occurs(token):
                return np.empty(0, dtype=np.intp)
            column = self.bm25.vocabulary[token]
            weights = self.bm25.weights
            # SparseBM25 stores each column's chunks in ascending order (built from a stable sort by term).
            return weights.indices[weights.indptr[column] : weights.indptr[column + 1]].astype(np.intp, copy=False)
        return self._postings.get(token, np.empty(0, dtype=np.intp))

    def occurs_in(self, positions, tokens) -> np.ndarray:
        """For each token, whether any chunk at ``positions`` contains it (boolean array)."""
        positions = np.asarray(positions, dtype=np.intp)
        if positions.size == 0 or not len(tokens):
            return np.zeros(len(tokens), dtype=bool)
        if self.backend == "sparse":
            if not hasattr(self, "_rows"):
                self._rows = self.bm25.weights.tocsr()  # chunk -> its terms, built once
            rows = self._rows
            present = np.concatenate([rows.indices[rows.indptr[p] : rows.indptr[p + 1]] for p in positions])
            columns = np.array([self.bm25.vocabulary.get(token, -1) if token else -1 for token in tokens])
            return np.isin(columns, present) & (columns >= 0)
        postings = [self.positions_with(token) for token in tokens]
        return np.array([np.isin(posting, positions).any() for posting in postings], dtype=bool)

    def position_of(self, chunk_id: str) -> int:
        """Position of ``chunk_id`` in :attr:`chunk_ids`."""
        if not hasattr(self, "_positions"):
            self._positions = {chunk_id: position for position, chunk_id in enumerate(self.chunk_ids)}
        return self._positions[chunk_id]
