"""A judge's training pairs from what a user has: a labeled query file and a corpus, or their own candidates.

::

    pairs = corpus_judge_pairs("queries.csv", "docs/")              # ragcal's own dense list over the corpus
    pairs = candidate_judge_pairs(read_candidates_jsonl("c.jsonl"))  # the candidates' dense list
    train_judge(pairs, "judge/")

Both retrieve each labeled question's dense list as ``ragcal score`` does
(:func:`ragcal.scoring.score_query_file` over a Markdown folder,
:func:`ragcal.candidate_scoring.score_candidates` over exported candidates) and
hand it to :func:`ragcal.judges.pairs.judge_pairs`, which labels the passages:
gold passages of answerable questions are positives, the top passages of
unanswerable questions and the non-gold top passages of answerable ones are
negatives.
"""

from __future__ import annotations

import pandas as pd

from .._params import check_int
from .pairs import judge_pairs

__all__ = ["corpus_judge_pairs", "candidate_judge_pairs"]


def corpus_judge_pairs(queries_path, corpus_dir, *, depth: int = 10, **index_options) -> pd.DataFrame:
    """Training pairs from a labeled query file and the dense list of ragcal's own index of ``corpus_dir``.

    Parameters
    ----------
    queries_path : str or Path
        Labeled query CSV (``id,query,answerable,slice,gold``); it is checked
        against the corpus before anything is embedded.
    corpus_dir : str or Path
        Markdown folder.
    depth : int, default=10
        How far down each dense list pairs are taken from.
    **index_options
        For :func:`ragcal.retrieval.index.build_index` (model, chunking,
        excluded pages, cache); a reranker or a reader after retrieval (a
        judge) is refused, as the pairs read the dense list only.

    Returns
    -------
    DataFrame
        :data:`ragcal.judges.pairs.PAIR_COLUMNS`, in query order.
    """
    from ..corpus import load_corpus
    from ..queries import load_queries
    from ..retrieval.index import build_index

    depth = check_int(depth, "depth", "corpus_judge_pairs", low=1)
    extra = [name for name in ("reranker", "readers") if index_options.get(name)]
    if extra:
        raise ValueError(f"corpus_judge_pairs reads the dense list only; drop {', '.join(extra)}")
    documents = load_corpus(corpus_dir, expand_includes=False, exclude=tuple(index_options.get("exclude", ())))
    queries = load_queries(queries_path, corpus_paths={document.path for document in documents})
    index = build_index(corpus_dir, **index_options)
    retrieved = index.retrieve(queries["query"], depth=depth, diagnostics=False)
    texts = {chunk.chunk_id: chunk.text for chunk in index.chunks}
    return judge_pairs(queries, retrieved["dense"], texts, depth=depth)


def candidate_judge_pairs(
    candidates, *, depth: int = 10, model: str | None = None, embedder=None, cache_dir=None, use_cache: bool = True
) -> pd.DataFrame:
    """Training pairs from a labeled candidate set and its dense list over the pool of candidates.

    Parameters
    ----------
    candidates : CandidateSet
        With labels (:func:`ragcal.importers.read_candidates_jsonl`, or
        :func:`ragcal.importers.trec.read_trec_candidates` with a labeled
        query file). A gold passage the run missed is still a positive.
    depth : int, default=10
    model, embedder, cache_dir, use_cache
        The embedding model, as for :func:`ragcal.candidate_scoring.score_candidates`.

    Returns
    -------
    DataFrame
        :data:`ragcal.judges.pairs.PAIR_COLUMNS`, in the set's question
        order. An answerable question with no passage marked as answering it
        is left out: nothing says which of its passages answer.
    """
    from ..chunking import chunk_id
    from ..importers.candidates import candidate_queries, passage_pages
    from ..retrieval.candidates import candidate_retrievers, passage_text

    depth = check_int(depth, "depth", "candidate_judge_pairs", low=1)
    queries = candidate_queries(candidates)
    pages = passage_pages(candidates.passages)
    queries["gold"] = [
        tuple(dict.fromkeys(pages[passage] for passage in question.gold)) for question in candidates.questions
    ]
    retrievers = candidate_retrievers(
        candidates,
        embedder=embedder,
        **({} if model is None else {"model": model}),
        cache_dir=cache_dir,
        use_cache=use_cache,
    )
    dense = retrievers["dense"]
    retrieved = dense.search(list(queries["query"]), k=max(dense.pool.depth, 1))
    texts = dict(zip(dense.pool.chunk_ids, dense.pool.texts))
    for question in candidates.questions:  # gold passages no list holds: positives taken from outside the lists
        for passage in question.unlisted_gold:
            texts.setdefault(chunk_id(pages[passage], 0), passage_text(candidates.passages[passage]))
    labeled = [not (row.answerable and not row.gold) for row in queries.itertuples(index=False)]
    kept = [result for result, keep in zip(retrieved, labeled) if keep]
    return judge_pairs(queries[labeled].reset_index(drop=True), kept, texts, depth=depth)
