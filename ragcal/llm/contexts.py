"""What the LLM reads for each question: its top-k passages, from ragcal's own index or from a candidates file.

- :func:`dense_contexts`: each question's top-``k`` dense chunks of a
  :class:`~ragcal.retrieval.RetrievalIndex` (the realistic setting: what a RAG
  system built with ragcal would hand its LLM);
- :func:`candidate_contexts`: each question's first ``k`` passages of a
  candidates file (:func:`ragcal.importers.candidates.read_candidates_jsonl`),
  i.e. the user's own retrieval;
- :func:`questions_with_contexts`: a labeled query file (or the candidates
  file's own questions) with either, optionally a stratified sample, as
  ``ragcal llm-abstain`` reads them.
"""

from __future__ import annotations

from pathlib import Path

import pandas as pd

from .._params import check_int

__all__ = ["candidate_contexts", "dense_contexts", "questions_with_contexts", "sample_questions"]


def dense_contexts(questions: pd.DataFrame, index, *, k: int = 1) -> list[list[str]]:
    """Per question (in order), the indexed text of its top-``k`` dense chunks, best first."""
    k = check_int(k, "k", "dense_contexts", low=1)
    texts = {chunk.chunk_id: chunk.text for chunk in index.chunks}
    results = index.dense.search([str(query) for query in questions["query"]], k=k)
    return [[texts[chunk_id] for chunk_id in result.chunk_ids[:k]] for result in results]


def _passage_text(passage) -> str:
    return f"{passage.title}\n\n{passage.text}" if passage.title else passage.text


def candidate_contexts(questions: pd.DataFrame, candidates, *, k: int = 1) -> list[list[str]]:
    """Per question (in order, matched by id), the title and text of its first ``k`` candidate passages."""
    k = check_int(k, "k", "candidate_contexts", low=1)
    by_id = {question.id: question for question in candidates.questions}
    missing = [str(value) for value in questions["id"] if str(value) not in by_id]
    if missing:
        raise ValueError(
            f"{candidates.source}: {len(missing)} question ids are not in the candidates file, e.g. {missing[0]!r}"
        )
    return [
        [_passage_text(candidates.passages[passage]) for passage in by_id[str(value)].passage_ids[:k]]
        for value in questions["id"]
    ]


def sample_questions(questions: pd.DataFrame, n: int, *, by: str = "slice", random_state: int = 0) -> pd.DataFrame:
    """A sample of about ``n`` questions, stratified by ``by``: each group in proportion, at least one each.

    Rows keep their file order. ``n`` at least the number of questions returns them all.
    """
    n = check_int(n, "n", "sample_questions", low=1)
    if n >= len(questions):
        return questions
    shares = questions[by].value_counts(sort=False)
    sizes = (shares * n / len(questions)).round().clip(lower=1).astype(int)
    picked = [
        group.sample(n=min(int(sizes[name]), len(group)), random_state=random_state)
        for name, group in questions.groupby(by, sort=True)
    ]
    return questions.loc[sorted(pd.concat(picked).index)]


def questions_with_contexts(
    queries=None,
    *,
    corpus=None,
    candidates=None,
    k: int = 1,
    sample: int | None = None,
    random_state: int = 0,
    model: str | None = None,
    cache_dir=None,
) -> tuple[pd.DataFrame, list[list[str]]]:
    """Questions and what the LLM reads for each, from a corpus folder or a candidates file.

    Parameters
    ----------
    queries : str or Path, default=None
        Labeled query CSV (``id,query,answerable,slice,gold``). Required with
        ``corpus``; with ``candidates`` it selects questions by id (default:
        all questions of the candidates file, with their labels).
    corpus : str or Path, default=None
        Markdown folder: ragcal builds (or loads) its index and takes each
        question's top-``k`` dense chunks.
    candidates : str or Path, default=None
        Candidates JSONL: each question's first ``k`` passages.
    k : int, default=1
    sample : int, default=None
        Keep a sample of about this many questions, stratified by slice
        (:func:`sample_questions`).
    random_state : int, default=0
    model, cache_dir
        Embedding model and cache folder of the index (``corpus`` only).

    Returns
    -------
    (DataFrame, list of list of str)
        Questions (``id, query, answerable, slice`` ...) and their passages.
    """
    if (corpus is None) == (candidates is None):
        raise ValueError("give either a corpus folder or a candidates file, not both and not neither")
    if candidates is not None:
        from ..importers.candidates import read_candidates_jsonl

        candidate_set = read_candidates_jsonl(candidates, require_labels=queries is None)
        if queries is not None:
            from ..queries import load_queries

            questions = load_queries(queries)
        else:
            questions = pd.DataFrame(
                [(q.id, q.query, q.answerable, q.slice) for q in candidate_set.questions],
                columns=["id", "query", "answerable", "slice"],
            )
        if sample is not None:
            questions = sample_questions(questions, sample, random_state=random_state)
        return questions, candidate_contexts(questions, candidate_set, k=k)
    if queries is None:
        raise ValueError(f"{corpus}: a corpus needs a labeled query file")
    from ..embedding.models import DEFAULT_MODEL
    from ..queries import load_queries
    from ..retrieval.index import build_index

    index = build_index(Path(corpus), embedder=model or DEFAULT_MODEL, cache_dir=cache_dir)
    questions = load_queries(queries, corpus_paths=index.doc_paths)
    if sample is not None:
        questions = sample_questions(questions, sample, random_state=random_state)
    return questions, dense_contexts(questions, index, k=k)
