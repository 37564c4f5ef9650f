"""Retrievers that re-score each question's own candidates: ragcal's dense and BM25 over a candidate pool, and the run.

A user with a production system has already retrieved: per question, a top-k
of passages (a :class:`~ragcal.importers.candidates.CandidateSet`, read from
a candidates JSONL or a TREC run plus passages). These retrievers search
nothing beyond it. Each meets the retriever protocol
(:class:`~ragcal.retrieval.protocol.Retriever`), so
:func:`~ragcal.retrieval.protocol.retrieve_with` runs them, fuses dense and
BM25 into ``rrf`` and attaches the diagnostics, as it does for any engine::

    from ragcal.retrieval.candidates import candidate_retrievers
    retrievers = candidate_retrievers(candidates)   # dense, bm25_raw, bm25_stopwords (+ run)
    retrieved = retrieve_with(retrievers, [question.query for question in candidates.questions], k=100)
    table = score_table(queries, retrieved)

(:func:`ragcal.candidate_scoring.score_candidates` does exactly this, with the
labels and provenance.)

**The pool is the corpus.** Every passage listed under some question forms
one collection, the *candidate pool* (:class:`CandidatePool`), one chunk per
passage, ``<page>#0`` with the page :func:`~ragcal.importers.candidates.passage_pages`
gives it. :class:`CandidateDenseRetriever` and :class:`CandidateBM25Retriever`
are ragcal's own :class:`~ragcal.retrieval.DenseRetriever` and
:class:`~ragcal.retrieval.BM25Retriever` built over that pool (the same
embedder and cache, tokenizers and BM25 parameters k1=1.5, b=0.75,
epsilon=0.25), whose ``search`` scores only the question's own candidates.
So every statistic the diagnostics read from the retriever object is a
statistic **of the pool**: BM25's IDF and collection model (``bm25_norm_*``,
coverage, NQC/WIG/SMV's ``s(C)``, clarity) and the dense centroid and page
centroids (``dense_centroid_cosine``, ``dense_page_knn5``, the dense QPP
normalisations). Those are not the numbers an index over the user's whole
corpus would give, and they depend on which questions were scored together;
a gate fitted on them is to be served with the same pool. The list-only
signals (``dense_top1``, ``dense_gap``, the top-10 summaries, σ_k,
``perturbation_jaccard``, ``run_*``) depend on the question's own list only.

Scores, best first (ties keep the candidates' own order):

- ``dense``: cosine of the L2-normalised query and passage embeddings;
- ``bm25_raw``, ``bm25_stopwords``: Okapi BM25 of the candidates that contain
  a query token (as :class:`~ragcal.retrieval.BM25Retriever`, a candidate with
  none is not matched; an empty result means no candidate matched);
- ``run`` (:class:`CandidateRunRetriever`, when the set has scores): the
  exporting system's own scores in its own order, never re-sorted.

A passage is embedded and tokenised as ``title``, a blank line, ``text`` (the
text alone when it has no title): the text ragcal's heading chunker indexes
for the page ``# title`` + text that ``ragcal import-benchmark`` writes, so a
passage scores the same here as in an index of the imported pages (when the
page is one chunk).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ..importers.candidates import CandidateFileError, CandidateSet, passage_pages
from ..chunking import chunk_id
from ..embedding.loading import load_embedder
from ..embedding.models import DEFAULT_MODEL
from ..embedding.protocol import check_embedder
from .base import RetrievalResult, view_key
from .bm25 import BM25Retriever, tokenize
from .dense import DenseRetriever

__all__ = [
    "CandidatePool",
    "CandidateDenseRetriever",
    "CandidateBM25Retriever",
    "CandidateRunRetriever",
    "candidate_pool",
    "candidate_retrievers",
    "CANDIDATE_VIEWS",
    "passage_text",
]


def passage_text(passage) -> str:
    """What is embedded and tokenised for a passage: ``title``, a blank line, ``text``; the text alone without title."""
    return f"{passage.title}\n\n{passage.text}" if passage.title else passage.text


@dataclass(frozen=True, eq=False)
class CandidatePool:
    """The passages of a candidate set as one collection, and each question's candidates in it.

    Attributes
    ----------
    chunk_ids : tuple of str
        ``<page>#0`` of every passage listed under some question, in the order
        they are first listed.
    passage_ids : tuple of str
        The passage of each chunk id.
    texts : tuple of str
        :func:`passage_text` of each.
    queries : tuple of str
        Each question's text, in the set's order.
    positions : tuple of ndarray
        Per question, the positions of its candidates in :attr:`chunk_ids`,
        best first as listed.
    scores : tuple of (ndarray or None)
        Per question, the exporting system's scores of its candidates (None
        when the set carries none).
    source : str
        The set's file, for messages.
    """

    chunk_ids: tuple[str, ...]
    passage_ids: tuple[str, ...]
    texts: tuple[str, ...]
    queries: tuple[str, ...]
    positions: tuple[np.ndarray, ...]
    scores: tuple
    source: str = ""

    def __len__(self) -> int:
        return len(self.chunk_ids)

    @property
    def depth(self) -> int:
        """The longest candidate list."""
        return max((len(positions) for positions in self.positions), default=0)

    def questions_of(self, queries) -> list[int]:
        """The question of each query text: by position when ``queries`` are the set's own texts in order, else by text.

        Raises
        ------
        ValueError
            A text that is no question of the set, or that several questions
            share with different candidate lists (pass the set's own texts in
            order to score those).
        """
        queries = [str(query) for query in queries]
        if queries == list(self.queries):
            return list(range(len(queries)))
        by_text: dict[str, list[int]] = {}
        for position, text in enumerate(self.queries):
            by_text.setdefault(text, []).append(position)
        questions = []
        for query in queries:
            found = by_text.get(query)
            if not found:
                raise ValueError(f"{query!r} is not a question of the candidate set {self.source or ''}".rstrip())
            lists = {tuple(self.positions[position].tolist()) for position in found}
            if len(lists) > 1:
                raise ValueError(
                    f"{len(found)} questions of the candidate set {self.source} share the text {query!r} with "
                    "different candidates; search with the set's own question texts, in order, to score each"
                )
            questions.append(found[0])
        return questions


def candidate_pool(candidates: CandidateSet) -> CandidatePool:
    """The pool of a candidate set (see the module docstring).

    Raises
    ------
    CandidateFileError
        Naming the set's file and the question: its scores increase down its
        list (distances, not similarities).
    ValueError
        No question has a candidate.
    """
    pages = passage_pages(candidates.passages)
    index: dict[str, int] = {}
    positions, scores = [], []
    for question in candidates.questions:
        for passage_id in question.passage_ids:
            index.setdefault(passage_id, len(index))
        positions.append(np.fromiter((index[p] for p in question.passage_ids), np.intp, len(question.passage_ids)))
        own = None if question.scores is None else np.asarray(question.scores, dtype=np.float64)
        if own is not None and np.any(np.diff(own) > 1e-9):
            raise CandidateFileError(
                f"{candidates.source}, question {question.id!r}: its scores increase down the ranking "
                f"({own[:3].round(4).tolist()} ...). ragcal needs similarities, best first; a system that returns "
                "distances must convert them, e.g. similarity = 1 - cosine distance"
            )
        scores.append(own)
    if not index:
        raise ValueError(f"{candidates.source or 'the candidate set'}: no question has a candidate passage to score")
    passage_ids = tuple(index)
    return CandidatePool(
        chunk_ids=tuple(chunk_id(pages[passage_id], 0) for passage_id in passage_ids),
        passage_ids=passage_ids,
        texts=tuple(passage_text(candidates.passages[passage_id]) for passage_id in passage_ids),
        queries=tuple(question.query for question in candidates.questions),
        positions=tuple(positions),
        scores=tuple(scores),
        source=candidates.source,
    )


def _ranked(scores: np.ndarray, positions: np.ndarray, k: int) -> tuple[np.ndarray, np.ndarray]:
    """``(positions, scores)`` best first, ties in the given order, cut at ``k``."""
    order = np.argsort(-scores, kind="stable")[:k]
    return positions[order], scores[order]


class CandidateDenseRetriever(DenseRetriever):
    """ragcal's dense retriever over a candidate pool that scores each question's own candidates only.

    A :class:`~ragcal.retrieval.DenseRetriever` (exact inner product over the
    pool's L2-normalised embeddings), so the dense diagnostics
    (centroid, page centroids, perturbation) are computed from it, over the
    pool. :meth:`search` returns, per query, its candidates ranked by cosine.

    Parameters
    ----------
    pool : CandidatePool
    embeddings : ndarray of shape (len(pool), dim)
        L2-normalised rows of the pool's texts.
    embedder : Embedder, default=None
        Embeds the queries.
    name : str, default="dense"
    """

    def __init__(self, pool: CandidatePool, embeddings, *, embedder=None, name: str = "dense"):
        super().__init__(pool.chunk_ids, embeddings, embedder=embedder, name=name)
        self.pool = pool
        self._vectors = np.ascontiguousarray(embeddings, dtype=np.float32)

    @classmethod
    def from_candidates(cls, candidates: CandidateSet, embedder, *, name: str = "dense") -> CandidateDenseRetriever:
        """Embed the pool of ``candidates`` (through the embedder's cache) and index it."""
        pool = candidate_pool(candidates)
        return cls(pool, embedder.encode(list(pool.texts)), embedder=embedder, name=name)

    def encode_queries(self, queries) -> np.ndarray:
        """Embed query strings; the last batch is kept, since :func:`retrieve_with` asks again for the diagnostics."""
        queries = tuple(str(query) for query in queries)
        if getattr(self, "_last_queries", None) != queries:
            self._last_queries, self._last_vectors = queries, super().encode_queries(queries)
        return self._last_vectors

    def subset(self, positions):
        raise ValueError("a candidate retriever has no access views; build it on the candidates the caller may see")

    def search(self, queries, *, k: int = 100) -> list[RetrievalResult]:
        """Each query's candidates ranked by cosine, at most ``k`` (see :meth:`CandidatePool.questions_of`)."""
        return self.rescore(self.encode_queries(queries), self.pool.questions_of(queries), k=k)

    def rescore(self, query_vectors, questions, *, k: int = 100) -> list[RetrievalResult]:
        """The candidates of question ``questions[i]`` ranked by their cosine to ``query_vectors[i]``."""
        query_vectors = np.ascontiguousarray(np.atleast_2d(query_vectors), dtype=np.float32)
        results = []
        for vector, question in zip(query_vectors, questions):
            candidates = self.pool.positions[question]
            positions, scores = _ranked((self._vectors[candidates] @ vector).astype(np.float64), candidates, k)
            results.append(self._result(positions, scores))
        return results

    def _result(self, positions, scores) -> RetrievalResult:
        chunk_ids = self.chunk_ids
        return RetrievalResult(
            self.name,
            tuple(chunk_ids[i] for i in positions.tolist()),
            scores,
            view=self.view,
            positions=positions,
            source_ids=chunk_ids,
        )


class CandidateBM25Retriever(BM25Retriever):
    """ragcal's BM25 over a candidate pool (the pool is the collection) that scores each question's candidates only.

    A :class:`~ragcal.retrieval.BM25Retriever` (same tokenizers and
    parameters; IDF, document lengths and collection statistics from the
    pool), so the BM25 diagnostics are computed from it, over the pool.
    :meth:`search` returns, per query, the candidates that contain a query
    token, ranked by BM25.

    Parameters
    ----------
    pool : CandidatePool
    variant : {"raw", "stopwords"}, default="raw"
    name : str, default=None
        Defaults to ``"bm25_<variant>"``.
    """

    def __init__(self, pool: CandidatePool, *, variant: str = "raw", name: str | None = None):
        super().__init__(pool.chunk_ids, pool.texts, variant=variant, name=name)
        self.pool = pool

    def search(self, queries, *, k: int = 100) -> list[RetrievalResult]:
        """Each query's matched candidates ranked by BM25, at most ``k``; empty when no candidate matched."""
        queries = [str(query) for query in queries]
        return [self.rescore(query, question, k=k) for query, question in zip(queries, self.pool.questions_of(queries))]

    def search_one(self, query: str, *, k: int = 100) -> RetrievalResult:
        return self.search([query], k=k)[0]

    def rescore(self, query: str, question: int, *, k: int = 100) -> RetrievalResult:
        """The candidates of question ``question`` that contain a token of ``query``, ranked by BM25."""
        tokens = tokenize(query, variant=self.variant)
        matched, scores = self.bm25.score(tokens)  # ascending pool positions
        candidates = self.pool.positions[question]
        found = np.searchsorted(matched, candidates)
        hit = found < matched.size
        hit[hit] = matched[found[hit]] == candidates[hit]
        positions, scores = _ranked(scores[found[hit]], candidates[hit], k)
        return self._result(tuple(self.chunk_ids[i] for i in positions.tolist()), scores, positions, tokens)


class CandidateRunRetriever:
    """The exporting system's own ranked candidates and scores, as a retriever: ``name="run"``.

    Never re-sorted: the order and scores are the system's (checked to be
    non-increasing when the pool was built). Searching asks nothing of the
    system; ``k`` cuts each list.
    """

    def __init__(self, pool: CandidatePool, *, name: str = "run"):
        missing = [
            position for position, scores in enumerate(pool.scores) if scores is None and len(pool.positions[position])
        ]
        if missing:
            raise ValueError(
                f"{pool.source}: {len(missing)} question(s) with candidates but no scores; no run to score"
            )
        self.pool = pool
        self.name = name
        self.chunk_ids = list(pool.chunk_ids)
        self.view = view_key(self.chunk_ids)

    def search(self, queries, *, k: int = 100) -> list[RetrievalResult]:
        results = []
        for question in self.pool.questions_of(queries):
            positions = self.pool.positions[question][:k]
            scores = self.pool.scores[question]
            scores = np.empty(0) if scores is None else scores[:k]
            chunk_ids = tuple(self.chunk_ids[i] for i in positions.tolist())
            results.append(
                RetrievalResult(
                    self.name, chunk_ids, scores, view=self.view, positions=positions, source_ids=self.chunk_ids
                )
            )
        return results


#: The retrievers :func:`candidate_retrievers` can build; ``rrf`` is fused from ``dense`` and ``bm25_stopwords``.
CANDIDATE_VIEWS = ("dense", "bm25_raw", "bm25_stopwords", "run")


def candidate_retrievers(
    candidates: CandidateSet,
    *,
    embedder=None,
    model: str = DEFAULT_MODEL,
    cache_dir=None,
    use_cache: bool = True,
    views=None,
) -> dict:
    """``{"dense", "bm25_raw", "bm25_stopwords"[, "run"]: retriever}`` over one pool of ``candidates``.

    Parameters
    ----------
    candidates : CandidateSet
    embedder : EmbedderProtocol, default=None
        Overrides ``model``, ``cache_dir`` and ``use_cache``.
    model : str, default=DEFAULT_MODEL
        What :func:`ragcal.embedding.load_embedder` reads (default: the
        packaged MiniLM).
    cache_dir, use_cache
        The embedding cache (:func:`ragcal.embedding.load_embedder`).
    views : sequence of str, default=None
        Build only these retrievers (names of :data:`CANDIDATE_VIEWS`; ``"rrf"``
        stands for the two it fuses). Without ``"dense"`` no embedder is
        loaded, so the candidates' own scores and BM25 need no model stack.
        None builds every one.

    Returns
    -------
    dict of str to retriever
        ``"run"`` only when every question with candidates carries scores
        (:attr:`CandidateSet.has_scores`), or when ``views`` asks for it (then
        a question without scores is an error).
    """
    wanted = set(CANDIDATE_VIEWS) if views is None else set(views)
    if "rrf" in wanted:
        wanted = (wanted - {"rrf"}) | {"dense", "bm25_stopwords"}
    unknown = sorted(wanted - set(CANDIDATE_VIEWS))
    if unknown:
        raise ValueError(
            f"candidate_retrievers cannot build {', '.join(map(repr, unknown))}: it builds "
            f"{', '.join(CANDIDATE_VIEWS)} (and rrf from dense and bm25_stopwords)"
        )
    pool = candidate_pool(candidates)
    retrievers = {}
    if "dense" in wanted:
        if embedder is None:
            embedder = load_embedder(model, cache_dir=cache_dir, use_cache=use_cache)
        else:
            check_embedder(embedder, function="candidate_retrievers")
        retrievers["dense"] = CandidateDenseRetriever(pool, embedder.encode(list(pool.texts)), embedder=embedder)
    for variant in ("raw", "stopwords"):
        if f"bm25_{variant}" in wanted:
            retrievers[f"bm25_{variant}"] = CandidateBM25Retriever(pool, variant=variant)
    if "run" in wanted and (candidates.has_scores or views is not None):
        retrievers["run"] = CandidateRunRetriever(pool)
    return retrievers
